"""The backtracking encoder (kernels.backtrack) is exact: tiktoken's ids on real vocabularies,
the merge kernel's ids on generated rank vocabularies (ties, overlaps, unreachable tokens),
and the builder refuses a vocabulary the algorithm cannot be trusted with.
"""

import base64
import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import _scanner
from fastbpe_nb.errors import ModelFormatError
from fastbpe_nb.kernels.backtrack import encode_pieces
from fastbpe_nb.model import backtrack_tables

from fbtest import NOJIT

EXAMPLES = 25 if NOJIT else 200
BYTES = [bytes([i]) for i in range(256)]
CORPORA = Path("/work/shared/corpora")


def _pieces(chunks):
    """``(data uint8, offsets int64)`` of the byte strings ``chunks`` end to end."""
    data = np.frombuffer(b"".join(chunks) or b"\0", np.uint8).copy()
    offs = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=offs[1:])
    return data, offs


def _encode(tables, chunks):
    data, offs = _pieces(chunks)
    ids, id_offs, failed = encode_pieces(data, offs, *tables)
    assert failed == 0
    return [ids[id_offs[i]:id_offs[i + 1]].tolist() for i in range(len(chunks))]


def _tiktoken_pieces(tokens, chunks):
    """tiktoken's ids of each chunk as one piece (whole-piece rule, then byte-pair merge)."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {t: i for i, t in enumerate(tokens)}
    enc = tiktoken.Encoding("bt", pat_str=r".", mergeable_ranks=ranks, special_tokens={})
    return [enc._core_bpe.encode_single_piece(c) for c in chunks]


# ------------------------------------------------------------------ real vocabularies
def _real(name):
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None:
        pytest.skip("bpe-openai (which ships the real ranks files) is not installed")
    path = Path(spec.origin).parent / "data" / f"{name}_base.tiktoken.gz"
    if not path.exists():
        pytest.skip(f"{path} missing")
    tokens = [base64.b64decode(line.split()[0]) for line in gzip.decompress(path.read_bytes()).splitlines() if line]
    return tokens


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_real_vocabulary_matches_tiktoken_on_the_corpora(name):
    tokens = _real(name)
    tables, unreachable, out_of_order = backtrack_tables(tokens)
    assert tables is not None and out_of_order.size == 0 and unreachable.size == 0
    files = sorted(CORPORA.glob("*.txt"))
    if not files:
        pytest.skip(f"no corpora in {CORPORA}")
    chunks = set()
    for f in files:
        raw = f.read_bytes()[:400_000]
        data = np.frombuffer(raw, np.uint8)
        offs, _ = _scanner.scan_offsets(data, np.array([0, len(data)], np.int64), name)
        chunks.update(raw[offs[i]:offs[i + 1]] for i in range(len(offs) - 1))
    # Plus pieces no pre-tokenizer makes: long mixed runs, whitespace and byte soup.
    chunks.update([b" " * 300, b"=" * 1000, b"\xe4\xb8" * 50, bytes(range(256)), b"ab" * 400])
    chunks = sorted(chunks)
    assert len(chunks) > 20_000
    assert _encode(tables, chunks) == _tiktoken_pieces(tokens, chunks)


# ---------------------------------------------------------- generated vocabularies
@st.composite
def vocabularies(draw, alphabet=(b"a", b"b", b"c")):
    """Ranked tokens over a tiny alphabet: mostly concatenations of earlier tokens (ties
    and overlaps everywhere), some arbitrary strings (often unreachable), some runs."""
    alphabet = list(alphabet[:draw(st.integers(1, len(alphabet)))])
    tokens, known = list(BYTES), set(BYTES)
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["concat"] * 4 + ["junk", "run"]))
        pool = alphabet + tokens[256:]
        if kind == "concat":
            new = draw(st.sampled_from(pool)) + draw(st.sampled_from(pool))
        elif kind == "junk":
            new = b"".join(draw(st.lists(st.sampled_from(alphabet), min_size=2, max_size=6)))
        else:
            new = draw(st.sampled_from(alphabet)) * draw(st.integers(2, 12))
        if new not in known:
            known.add(new)
            tokens.append(new)
    return tokens


def texts(alphabet=b"abc"):
    return st.lists(st.binary(min_size=1, max_size=40).map(
        lambda b: bytes(alphabet[x % len(alphabet)] for x in b)), min_size=1, max_size=8)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=vocabularies(), chunks=texts())
def test_generated_vocabularies_match_tiktoken(tokens, chunks):
    tables, unreachable, out_of_order = backtrack_tables(tokens)
    assume(tables is not None)
    assert _encode(tables, chunks) == _tiktoken_pieces(tokens, chunks)


def _ranks_file(tmp_path, tokens):
    path = tmp_path / "gen.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


def _merge_kernel(tok, chunks):
    """The existing merge kernel's ids of each chunk as a piece, with no piece cache."""
    from fastbpe_nb.kernels.encode import encode_serial
    from fastbpe_nb.piece_cache import no_cache

    data, offs = _pieces(chunks)
    tb = tok._tables()
    docs = np.arange(len(chunks) + 1, dtype=np.int64)  # a piece per document
    ids, id_offs, *_ = encode_serial(data, tok.level.sym_map, offs, np.zeros(0, np.int32), docs,
                                     *tb.args(backtrack=False), 0.0, 0, *tb.tail(), *no_cache(np.uint8))
    return [ids[id_offs[i]:id_offs[i + 1]].tolist() for i in range(len(chunks))]


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(tokens=vocabularies(), chunks=texts())
def test_generated_vocabularies_match_the_merge_kernel(tmp_path, tokens, chunks):
    while True:  # from_tiktoken refuses unreachable tokens: drop them (BPE never makes them)
        _, unreachable, _ = backtrack_tables(tokens)
        if not unreachable.size:
            break
        tokens = [t for i, t in enumerate(tokens) if i not in set(unreachable.tolist())]
    try:
        tok = fb.from_tiktoken(_ranks_file(tmp_path, tokens), pattern=None)
    except ModelFormatError:
        assume(False)  # a rank order from_tiktoken refuses (an unreachable token)
    tables, _, out_of_order = backtrack_tables(tokens)
    assert tables is not None and out_of_order.size == 0
    assert _encode(tables, chunks) == _merge_kernel(tok, chunks)


def test_trained_vocabulary_matches_the_merge_kernel_on_adversarial_pieces(tmp_path):
    # Runs of one byte, period-2/3 patterns and near-repeats: the inputs that make the
    # greedy longest match wrong and the search backtrack.
    corpus = ["aaaa ab abab abcabc aab baab " * 40, "a" * 300, "ab" * 200, "aab" * 150]
    tok = fb.train(corpus, vocab_size=400, pattern=None)
    path = tmp_path / "t.tiktoken"
    tok.to_tiktoken(path)
    loaded = fb.from_tiktoken(path, pattern=None)
    tokens = list(loaded.model.token_bytes)
    tables, _, _ = backtrack_tables(tokens)
    chunks = [b"a" * n for n in range(1, 80)] + [b"ab" * n + b"a" for n in range(1, 60)]
    chunks += [b"aab" * n for n in range(1, 40)] + [b"a" * 5000, b"ab" * 3000 + b"b"]
    assert _encode(tables, chunks) == _merge_kernel(loaded, chunks)
    assert _encode(tables, chunks) == _tiktoken_pieces(tokens, chunks)


# ----------------------------------------------------------------- what it relies on
def test_ties_are_broken_leftmost():
    # "aaa": (aa, a), never (a, aa); "aaaa": (aa, aa) when "aaaa" is no token.
    tokens = BYTES + [b"aa"]
    tables, _, _ = backtrack_tables(tokens)
    assert _encode(tables, [b"aaa", b"aaaa", b"aaaaa"]) == [[256, 97], [256, 256],
                                                            [256, 256, 97]]


def test_unreachable_token_is_left_out_but_whole_pieces_keep_it():
    # No two-token split of "abc" exists, so BPE never makes it (nor "abcd") from bytes;
    # the piece "abc" itself is the token (tiktoken's whole-piece rule). "cde" is made
    # from cd + e, and stays usable.
    tokens = BYTES + [b"abc", b"abcd", b"cd", b"cde"]
    tables, unreachable, out_of_order = backtrack_tables(tokens)
    assert out_of_order.size == 0 and unreachable.tolist() == [256, 257]
    chunks = [b"abc", b"abcabc", b"abcd", b"abcdx", b"xabc", b"abcde", b"cdecde"]
    assert _encode(tables, chunks) == _tiktoken_pieces(tokens, chunks)
    assert _encode(tables, chunks)[:2] == [[256], [97, 98, 99, 97, 98, 99]]
    assert _encode(tables, chunks)[5] == [97, 98, 259]


def test_a_token_made_only_through_a_higher_rank_is_refused():
    # "abc" (256) is made from ab (257) + c: merges are not in rank order, so a rank is
    # no longer a time and the compatibility test would be wrong.
    tables, _, out_of_order = backtrack_tables(BYTES + [b"abc", b"ab"])
    assert tables is None and out_of_order.tolist() == [256]


def test_a_byte_without_a_token_is_counted_not_guessed():
    tokens = [b"a", b"b", b"ab"]
    tables, _, _ = backtrack_tables(tokens)
    data, offs = _pieces([b"ab", b"abz", b"ba"])
    ids, id_offs, failed = encode_pieces(data, offs, *tables)
    assert failed == 1 and ids.tolist() == [2, 1, 0] and id_offs.tolist() == [0, 1, 1, 3]


@pytest.mark.parametrize("tokens, where", [
    ([b"a", b""], "tokens[1]"), ([b"a", b"b", b"a"], "tokens[2]"), ([b"a", "b"], "tokens[1]")])
def test_bad_vocabularies_are_named(tokens, where):
    with pytest.raises(ModelFormatError, match=where.replace("[", r"\[")):
        backtrack_tables(tokens)


# ------------------------------------------------------------------ wired into the encoder
def test_tokenizer_with_backtracking_matches_tiktoken_and_itself_without():
    """The encode kernels take the backtracking path for long pieces once a big call has
    built its tables (``KernelTables.use_backtracking``): ids as tiktoken's, and as the
    same tokenizer's before the tables existed, serial and on two threads."""
    import pickle

    from peers import tiktoken_encoding
    from presets import build

    tok = pickle.loads(pickle.dumps(build("cl100k-tiktoken")))  # tables of its own
    files = sorted(CORPORA.glob("*.txt"))
    texts = [f.read_text(encoding="utf-8", errors="replace")[:60_000] for f in files]
    texts += ["Donaudampfschifffahrtsgesellschaftskapitänswitwe " * 5,
              "東京是日本的首都我們在北京學習中文今天天氣很好東京是日本的首都" * 3,
              "=" * 5000 + "ab" * 3000 + " " * 700, "x" * 20 + "\u00e9" * 40]
    plain = [tok.encode_ordinary(t) for t in texts]  # below BACKTRACK_UNITS: merging only
    tables = tok._tables()
    assert tables.backtrack[0].shape[0] == 0
    tables.use_backtracking()
    assert tables.backtrack[0].shape[0] > 0
    tok.piece_cache.clear()
    enc = tiktoken_encoding(list(tok.vocab[:tok.n_regular]), "cl100k")
    want = [enc.encode_ordinary(t) for t in texts]
    assert plain == want
    assert [tok.encode_ordinary(t) for t in texts] == want
    tok.piece_cache.clear()
    assert tok.encode_batch(texts, num_threads=2, disallowed_special=()) == want


def test_a_big_call_builds_the_backtracking_tables():
    import pickle

    from fastbpe_nb.encoder import BACKTRACK_UNITS
    from presets import build

    tok = pickle.loads(pickle.dumps(build("cl100k-tiktoken")))
    tok.encode_ordinary("short text")
    assert tok._tables().backtrack[0].shape[0] == 0
    big = ("Straßenbahnhaltestellenüberdachung und 東京是日本的首都 " * (BACKTRACK_UNITS // 40))
    ids = tok.encode_ordinary(big)
    assert tok._tables().backtrack[0].shape[0] > 0
    assert tok.decode(ids) == big


def _child_encode(args):
    """In a forked child: a big text (builds the backtracking tables there) and a batch
    on two threads (the parent already ran the parallel kernels)."""
    big, texts = args
    from presets import build

    tok = build("cl100k-tiktoken")
    return tok.encode_ordinary(big), tok.encode_ordinary_batch(texts, num_threads=2)


def test_forked_child_after_parallel_kernels_gets_the_same_ids():
    import multiprocessing
    import pickle

    from fastbpe_nb.encoder import BACKTRACK_UNITS
    from presets import build

    tok = pickle.loads(pickle.dumps(build("cl100k-tiktoken")))
    texts = ["Straßenbahnhaltestellenüberdachung 東京是日本的首都我們在北京學習中文", "plain"] * 50
    big = "Donaudampfschifffahrtsgesellschaft 東京是日本的首都 " * (BACKTRACK_UNITS // 40)
    want = (tok.encode_ordinary(big), tok.encode_ordinary_batch(texts, num_threads=2))
    build("cl100k-tiktoken").encode_ordinary_batch(texts, num_threads=2)  # the shared preset too
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.map_async(_child_encode, [(big, texts)]).get(timeout=120)[0]
    assert got == want
