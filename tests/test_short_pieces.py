"""The short-piece table (pieces of 2..15 bytes looked up by their packed bytes) is exact.

The table is filled by encoding every short token as a piece of its own with the encoder
itself, so a hit must give what merging gives, in both merge modes, including vocabularies
where a token's own bytes do not encode to that token (hand-made merge orders) and where
the two modes disagree. The block's cache of short multi-token pieces must not change ids
either. Oracles: ``reference.encode`` (pairs) and tiktoken (ranks).
"""

import base64

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import pretokenize
from fastbpe_nb import reference as ref
from fastbpe_nb.errors import ModelFormatError
from fastbpe_nb.kernels.encode import SHORT_BYTES

from fbtest import NOJIT, merges_over_bytes

EXAMPLES = 30 if NOJIT else 150
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
texts = st.lists(st.text(alphabet="abc ", max_size=40), min_size=1, max_size=6)


def _without_short_table(tok, text):
    tables = tok._tables()
    saved = tables.short
    tables.short = np.zeros(0, dtype=np.int64)
    try:
        return tok.encode_ordinary(text)
    finally:
        tables.short = saved


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=24), docs=texts)
def test_pairs_mode_any_merge_order(raw, docs):
    merges = merges_over_bytes(raw)
    tok = fb.Tokenizer(merges=merges, pattern="gpt2")
    model = ref.model_from_merges(merges, pattern="gpt2")
    for doc in docs:
        want = ref.encode(doc, model)
        assert tok.encode(doc) == want
        assert tok.encode_to_numpy(doc).tolist() == want
        assert _without_short_table(tok, doc) == want
    assert tok.encode_batch(docs, num_threads=2) == [ref.encode(d, model) for d in docs]


def test_a_token_its_own_bytes_do_not_make():
    a, b, c = 97, 98, 99
    # "bc" outranks "ab", so the piece "abc" is a + bc, never the token abc = ab + c.
    tok = fb.Tokenizer(merges=[(b, c), (a, b), (257, c)], pattern="gpt2")
    assert tok.vocab[258] == b"abc"
    table = tok._tables().short
    assert table.size and (table[::3] >= 0).sum() == 3  # bc, ab and abc are all there
    assert tok.encode("abc abc") == [a, 256, 32, a, 256]
    assert tok.encode("ab") == [257]


def _ranks_file(tmp_path, tokens):
    lines = [base64.b64encode(bytes([i])).decode() + f" {i}" for i in range(256)]
    lines += [base64.b64encode(t).decode() + f" {256 + k}" for k, t in enumerate(tokens)]
    path = tmp_path / "hand.tiktoken"
    path.write_text("\n".join(lines) + "\n")
    return path


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(raw=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=20),
       docs=texts)
def test_ranks_mode_matches_tiktoken(tmp_path, raw, docs):
    tiktoken = pytest.importorskip("tiktoken")
    merges = merges_over_bytes(raw)
    tokens, seen = [], set()
    vocab = [bytes([i]) for i in range(256)]
    for x, y in merges:
        t = vocab[x] + vocab[y]
        if t not in seen and len(t) > 1:
            seen.add(t)
            tokens.append(t)
        vocab.append(t)
    path = _ranks_file(tmp_path, tokens)
    try:
        tok = fb.from_tiktoken(path, pattern="gpt2")
    except ModelFormatError:
        assume(False)  # a rank order tiktoken's own rule cannot reach
    ranks = {bytes([i]): i for i in range(256)}
    ranks.update({t: 256 + k for k, t in enumerate(tokens)})
    enc = tiktoken.Encoding("hand", pat_str=GPT2, mergeable_ranks=ranks, special_tokens={})
    for doc in docs:
        want = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == want
        assert _without_short_table(tok, doc) == want


def test_short_table_holds_every_short_token_of_a_trained_model():
    docs = ["the cat sat on the mat, naïve café 東京 2024 " * 3, "abc abd abe " * 5]
    tok = fb.train(docs, vocab_size=330)
    table = tok._tables().short
    short = [t for t in tok.vocab[256:tok.n_regular] if 2 <= len(t) <= SHORT_BYTES]
    assert int((table[::3] >= 0).sum()) == len(short)
    whole_pieces = 0
    for t in short:
        text = t.decode("utf-8", "replace")
        if text.encode() == t and fb.split(text, "gpt2") == [text]:  # a piece of its own
            assert tok.encode(text) == [tok.vocab.index(t)]
            whole_pieces += 1
    assert whole_pieces > 10


def test_char_mode_and_dropout_do_without_it():
    tok = fb.train(["ab ab abc"] * 5, vocab_size=12, base="chars", end_of_word="</w>")
    assert tok._tables().short.size == 0
    bt = fb.train(["ab ab abc"] * 5, vocab_size=260)
    ids = bt.encode("ab abc", dropout=1.0, seed=1)  # every merge skipped: the bytes
    assert ids == list(b"ab abc")


# ------------------------------------------------------------ short texts: the piece memo
memo_texts = st.lists(st.sampled_from(list("ab c\n\t'sé中😀<|>") + ["\ud800", "<|endoftext|>",
                                                                  "  ", "12", "x"]),
                      max_size=20).map("".join)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts_=st.lists(memo_texts, min_size=1, max_size=8),
       pattern=st.sampled_from(["gpt2", "cl100k", "o200k"]))
def test_short_texts_from_the_piece_memo_equal_the_kernels(texts_, pattern):
    docs = ["abc ab c 12 é中 it's <|endoftext|> aab"] * 4
    tok = fb.train(docs, vocab_size=290, pattern=pattern, special_tokens=["<|endoftext|>"])
    model = ref.train(docs, vocab_size=290, pattern=pattern, special_tokens=["<|endoftext|>"])
    for _ in range(2):  # the second time every piece comes from the memo
        for text in texts_:
            slow = tok._encoder.encode_one(text, frozenset(), frozenset()).tolist()
            assert tok.encode_ordinary(text) == slow
            clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            assert slow == ref.encode(clean, model, allowed_special=())
            if "<|endoftext|>" in text:
                with pytest.raises(fb.DisallowedSpecialTokenError):
                    tok.encode(text)
            else:
                assert tok.encode(text) == slow
            assert tok.encode(text, disallowed_special=()) == slow
    if any(t and "\ud800" not in t for t in texts_):  # the memo really served them
        assert len(tok._encoder.memo) > 0


ascii_memo_texts = st.lists(st.sampled_from(["a", "ab ", " c", "\n", "\t", "  ", "'s", "'ll",
                                             "12", "345", ";", "x=1", "<|endoftext|>",
                                             "\r\n", "/", "A"]), min_size=20,
                            max_size=90).map("".join)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts_=st.lists(ascii_memo_texts, min_size=1, max_size=6),
       pattern=st.sampled_from(["gpt2", "cl100k", "o200k"]))
def test_ascii_short_texts_split_by_the_scanner_equal_the_kernels(texts_, pattern):
    """ASCII texts of SCAN_SHORT_CHARS characters and more are split for the memo by the
    scanner, not by regex: the same pieces, the kernel's ids, the first time (a fill from
    the scanner's offsets) and the second (from the memo)."""
    import fastbpe_nb.encoder as encoder

    docs = ["abc ab c 12 it's <|endoftext|> aab x=1;\n"] * 4
    tok = fb.train(docs, vocab_size=290, pattern=pattern, special_tokens=["<|endoftext|>"])
    enc = tok._encoder
    split = pretokenize.compiled_pattern(enc.level.pattern).findall
    for _ in range(2):
        for text in texts_:
            slow = enc.encode_one(text, frozenset(), frozenset()).tolist()
            assert tok.encode_ordinary(text) == slow
            assert tok.encode(text, disallowed_special=()) == slow
    long = [t for t in texts_ if encoder.SCAN_SHORT_CHARS <= len(t) <= encoder.SHORT_TEXT_CHARS]
    for text in long:  # the scanner's pieces are the memo's keys
        assert enc.encode_short(text) is not None and all(p in enc.memo for p in split(text))


def test_memo_fill_of_pieces_that_do_not_tile_the_text():
    """The memo is filled from the text's own bytes when its pieces tile it (always, for
    the scanner's patterns); pieces that do not are encoded from their own bytes."""
    tok = fb.train(["the cat sat on the mat é中"] * 3, vocab_size=275)
    enc = tok._encoder
    for pieces, text in ((["the", " cat"], "the cat"), (["é中", " the"], "é中 the"),
                         (["the", " mat"], "xy"), (["中", " cat"], "é")):
        ids = enc._memo_fill(pieces, text)
        each = [enc.encode_one(p, frozenset(), frozenset()).tolist() for p in pieces]
        assert [enc.memo[p] for p in pieces] == each
        assert ids == [i for piece_ids in each for i in piece_ids]


def test_texts_the_piece_memo_served_are_kept_whole(monkeypatch):
    """A short text served whole by the piece memo is kept whole: the next call returns
    its ids without splitting it, as a list of the caller's own; the text memo is bounded
    and starts empty in an unpickled tokenizer."""
    import pickle

    import fastbpe_nb.encoder as encoder

    tok = fb.train(["the cat sat on the mat, 12 dogs é"] * 3, vocab_size=280)
    enc = tok._encoder
    text = "the cat sat é"
    expected = enc.encode_one(text, frozenset(), frozenset()).tolist()
    assert tok.encode(text) == expected and text not in enc.text_memo  # filled the memo
    assert tok.encode(text) == expected and enc.text_memo[text] == expected
    monkeypatch.setattr(encoder.pretokenize, "compiled_pattern", None)  # no split any more
    first = tok.encode(text)
    first.append(-1)  # the caller's list: the memo's is not changed
    assert tok.encode(text) == expected == enc.text_memo[text]
    assert tok.encode_to_numpy(text).tolist() == expected
    monkeypatch.undo()
    monkeypatch.setattr(encoder, "TEXT_MEMO_IDS", 20)
    for k in range(40):
        other = f"the cat {k}"
        want = enc.encode_one(other, frozenset(), frozenset()).tolist()
        assert [tok.encode(other) for _ in range(3)] == [want] * 3
        held = sum(map(len, enc.text_memo.values()))
        assert held == enc.text_memo_ids <= 20 and other in enc.text_memo
    assert pickle.loads(pickle.dumps(tok))._encoder.text_memo == {}


def test_piece_memo_is_bounded_and_not_pickled(monkeypatch):
    import pickle

    import fastbpe_nb.encoder as encoder

    monkeypatch.setattr(encoder, "PIECE_MEMO_ENTRIES", 50)
    tok = fb.train(["the cat sat on the mat"] * 3, vocab_size=270)
    for k in range(200):
        text = f"w{k} x{k * 7} the cat"
        assert tok.encode(text) == tok._encoder.encode_one(text, frozenset(), frozenset()).tolist()
        assert len(tok._encoder.memo) <= 50
    again = pickle.loads(pickle.dumps(tok))
    assert again._encoder.memo == {} and again.encode("the cat") == tok.encode("the cat")


# ----------------------------------------- ranks mode: the split-pair table in one kernel
@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(raw=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=30))
def test_split_pairs_kernel_equals_its_python_twin(tmp_path, raw):
    merges = merges_over_bytes(raw)
    vocab = [bytes([i]) for i in range(256)]
    tokens, seen = [], set()
    for x, y in merges:
        t = vocab[x] + vocab[y]
        if t not in seen:
            seen.add(t)
            tokens.append(t)
        vocab.append(t)
    try:
        tok = fb.from_tiktoken(_ranks_file(tmp_path, tokens), pattern="gpt2")
    except ModelFormatError:
        assume(False)
    got, want = tok.model.split_pairs(), tok.model.split_pairs_py()
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_split_pairs_kernel_on_a_real_vocabulary(tmp_path):
    import gzip
    import importlib.util
    import os

    spec = importlib.util.find_spec("bpe_openai")
    if spec is None:
        pytest.skip("bpe-openai (which ships cl100k_base) is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "data", "cl100k_base.tiktoken.gz")
    ranks = tmp_path / "cl100k_base.tiktoken"
    ranks.write_bytes(gzip.decompress(open(path, "rb").read()))
    tok = fb.from_tiktoken(ranks, pattern="cl100k")
    got, want = tok.model.split_pairs(), tok.model.split_pairs_py()
    assert len(want[1]) > 200_000
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])



def test_a_tokenizer_pickled_before_the_short_tables_still_encodes():
    tok = fb.train(["the cat sat on the mat, naïve café"] * 3, vocab_size=280)
    want = tok.encode_batch(["the cat", "naïve café sat"]) + [tok.encode("the mat")]
    # The attributes an earlier version pickled (before the tokenizer was built of parts).
    state = {"base": "bytes", "pattern": tok.pattern, "merges": tok.merges,
             "special_tokens": tok.special_tokens, "alphabet": None, "end_of_word": None,
             "byte_order": None, "merge_mode": "pairs", "normalization": None,
             "tie_break": tok.tie_break, "merge_counts": None, "_rank_keys": None}
    old = fb.Tokenizer.__new__(fb.Tokenizer)
    old.__setstate__(state)
    assert old.encode_batch(["the cat", "naïve café sat"]) + [old.encode("the mat")] == want


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.binary(min_size=1, max_size=48), where=st.data())
def test_short_key_loads_equal_the_byte_loop(data, where):
    """``short_key`` reads two unaligned 8-byte words away from the array's end and a byte
    at a time near it (``short_key_tail``); both must give the same keys at every offset
    and length, and ``load8`` must be the little-endian word of the 8 bytes."""
    from numba import njit

    from fastbpe_nb.kernels.hashing import load8
    from fastbpe_nb.kernels.piece_cache import short_key, short_key_tail

    @njit
    def keys(d, s, n, w):  # compiled together, as the encoder calls them
        return short_key(d, s, n), short_key_tail(d, s, n), load8(d, w) if w >= 0 else 0

    arr = np.frombuffer(data, dtype=np.uint8)
    s = where.draw(st.integers(0, len(arr) - 1))
    n = where.draw(st.integers(1, min(SHORT_BYTES, len(arr) - s)))
    w = min(s, len(arr) - 8)  # load8 needs 8 bytes: -1 when the array is shorter
    fast, slow, word = keys(arr, s, n, w)
    assert fast == slow
    expected_key = (n << 56) | int.from_bytes(data[s:s + min(n, 7)], "little")
    expected_key2 = int.from_bytes(data[s + 7:s + n], "little", signed=n == SHORT_BYTES)
    assert (int(fast[0]), int(fast[1])) == (expected_key, expected_key2)
    if w >= 0:
        assert int(word) == int.from_bytes(data[w:w + 8], "little", signed=True)
