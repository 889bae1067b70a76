"""Tokenizer behaviour: special tokens, decoding, round trips, batches, errors, pickling."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb

from fbtest import NOJIT

SAMPLE = [
    "Hello world! It's a test of the tokenizer's 123 numbers.\n",
    "Grüße aus Köln — naïve café. Привет, мир! 你好，世界。 😀👍🏽",
    "def f(x):\n    return x ** 2  # square\n\n\n",
    "   leading and trailing spaces   ",
]


@pytest.fixture(scope="module")
def tok():
    return fb.train(SAMPLE * 3, vocab_size=400, special_tokens=["<|endoftext|>", "<|pad|>"])


def test_special_token_ids_follow_merges(tok):
    assert tok.special_tokens == {"<|endoftext|>": tok.n_regular, "<|pad|>": tok.n_regular + 1}
    assert tok.vocab_size == tok.n_regular + 2
    assert tok.vocab[tok.n_regular] == b"<|endoftext|>"


def test_disallowed_special_raises_with_offset(tok):
    text = "abc <|endoftext|> def"
    with pytest.raises(fb.DisallowedSpecialTokenError) as info:
        tok.encode(text)
    assert info.value.token == "<|endoftext|>"
    assert info.value.offset == 4
    assert isinstance(info.value, ValueError)
    assert "offset 4" in str(info.value)


def test_allowed_special(tok):
    eot = tok.special_tokens["<|endoftext|>"]
    ids = tok.encode("a<|endoftext|>b", allowed_special={"<|endoftext|>"})
    assert ids == tok.encode("a") + [eot] + tok.encode("b")
    assert tok.encode("a<|endoftext|>b", allowed_special="all") == ids
    # <|pad|> stays disallowed when only <|endoftext|> is allowed.
    with pytest.raises(fb.DisallowedSpecialTokenError):
        tok.encode("<|pad|>", allowed_special={"<|endoftext|>"})
    assert tok.decode(ids) == "a<|endoftext|>b"


def test_encode_ordinary_treats_specials_as_text(tok):
    text = "x<|endoftext|>y"
    ids = tok.encode_ordinary(text)
    assert tok.special_tokens["<|endoftext|>"] not in ids
    assert ids == tok.encode(text, disallowed_special=())
    assert tok.decode(ids) == text


@settings(max_examples=40 if NOJIT else 200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab <|endoftext|>pad\n1é😀"), max_size=120),
       dropout=st.sampled_from([0.0, 0.3]))
def test_encode_to_numpy_is_encode_as_uint32(tok, text, dropout):
    for kwargs in ({"allowed_special": "all"}, {"disallowed_special": ()}, {}):
        try:
            expected = tok.encode(text, dropout=dropout, seed=5, **kwargs)
        except fb.DisallowedSpecialTokenError:
            with pytest.raises(fb.DisallowedSpecialTokenError):
                tok.encode_to_numpy(text, dropout=dropout, seed=5, **kwargs)
            continue
        ids = tok.encode_to_numpy(text, dropout=dropout, seed=5, **kwargs)
        assert isinstance(ids, np.ndarray) and ids.dtype == np.uint32 and ids.ndim == 1
        assert ids.tolist() == expected
        if kwargs == {"disallowed_special": ()}:  # every byte is a unit of the kernel's buffer
            owner = ids.base  # the int32 array viewed as uint32 (None: ids of the memo)
            assert owner is None or owner.base is None or (
                2 * len(ids) >= len(text.encode("utf-8"))), (
                "a kept array may view only a buffer it fills at least half of")


def test_near_miss_specials_are_text(tok):
    for text in ["<|endoftext|", "<|endoftext", "|endoftext|>", "<|endof text|>"]:
        ids = tok.encode(text)
        assert not set(ids) & set(tok.special_tokens.values())
        assert tok.decode(ids) == text


def test_unknown_allowed_special_rejected(tok):
    with pytest.raises(ValueError, match="unregistered"):
        tok.encode("x", allowed_special={"<|nope|>"})


@settings(max_examples=60 if NOJIT else 300, deadline=None)
@given(text=st.text(max_size=200))
def test_round_trip_text(tok, text):
    ids = tok.encode_ordinary(text)
    clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert tok.decode_bytes(ids) == clean.encode("utf-8")
    assert tok.decode(ids) == clean


def test_lone_surrogates_become_replacement_character(tok):
    ids = tok.encode_ordinary("a\ud800b")
    assert tok.decode(ids) == "a\ufffdb"


@settings(max_examples=60 if NOJIT else 300, deadline=None)
@given(data=st.binary(max_size=200))
def test_round_trip_arbitrary_bytes(tok, data):
    ids = tok.encode_bytes(data)
    assert tok.decode_bytes(ids) == data


def test_decode_errors(tok):
    with pytest.raises(fb.UnknownTokenError, match="position 1"):
        tok.decode([1, tok.vocab_size])
    with pytest.raises(fb.UnknownTokenError):
        tok.decode([-1])
    with pytest.raises(fb.UnknownTokenError):
        tok.decode_bytes([3, -5])
    with pytest.raises(fb.UnknownTokenError):
        tok.stream_decoder().push(10**9)
    assert tok.decode([]) == ""
    assert tok.decode(np.array(tok.encode("hello"))) == "hello"


def test_decode_replace_vs_strict(tok):
    assert tok.decode([0xF0, 0x9F]) == "\ufffd"
    with pytest.raises(UnicodeDecodeError):
        tok.decode([0xF0, 0x9F], errors="strict")


def test_stream_decoder_matches_decode(tok):
    text = SAMPLE[1]
    ids = tok.encode(text)
    stream = tok.stream_decoder()
    parts = [stream.push(i) for i in ids]
    assert "".join(parts) + stream.flush() == text
    assert all("\ufffd" not in p for p in parts)
    # An emoji split over byte tokens comes out whole, once.
    emoji_ids = [0xF0, 0x9F, 0x98, 0x80]
    stream = tok.stream_decoder()
    assert [stream.push(i) for i in emoji_ids] == ["", "", "", "😀"]


def test_stream_decoder_flush_incomplete(tok):
    stream = tok.stream_decoder()
    assert stream.push(0xE6) == ""
    assert stream.flush() == "\ufffd"


def test_encode_batch_list_and_threads(tok):
    docs = SAMPLE * 50 + [""]
    expected = [tok.encode(d) for d in docs]
    assert tok.encode_batch(docs) == expected
    assert tok.encode_batch(docs, num_threads=1) == expected
    assert tok.encode_batch([]) == []


def test_encode_batch_disallowed_names_document(tok):
    with pytest.raises(fb.DisallowedSpecialTokenError, match="document 1"):
        tok.encode_batch(["fine", "bad <|pad|>"])


def test_encode_batch_arrow(tok):
    pa = pytest.importorskip("pyarrow")
    docs = SAMPLE + [None, ""] + SAMPLE
    arr = pa.array(docs, type=pa.string())
    out = tok.encode_batch(arr)
    assert isinstance(out, pa.ListArray)
    assert out.to_pylist() == [None if d is None else tok.encode(d) for d in docs]
    large = pa.array(docs, type=pa.large_string()).slice(2, 5)
    assert tok.encode_batch(large).to_pylist() == [
        None if d is None else tok.encode(d) for d in docs[2:7]]
    chunked = pa.chunked_array([arr.slice(0, 3), arr.slice(3)])
    assert tok.encode_batch(chunked).to_pylist() == out.to_pylist()
    with pytest.raises(TypeError, match="string"):
        tok.encode_batch(pa.array([1, 2]))


def test_pickle_round_trip(tok):
    tok.encode("warm the rank table")
    clone = pickle.loads(pickle.dumps(tok))
    assert clone == tok
    assert clone.encode(SAMPLE[1]) == tok.encode(SAMPLE[1])


def test_split_named_patterns_match_regex():
    import regex

    text = "I'm here, aren't you?  123456 ok\n\n  x"
    for name, pattern in fb.NAMED_PATTERNS.items():
        assert fb.split(text, name) == regex.findall(pattern, text)
    assert fb.split(text, None) == [text]
    assert fb.split("", "gpt2") == []
    # A custom pattern that skips text keeps the gaps as pieces: encoding stays lossless.
    assert fb.split("ab  cd", r"\w+") == ["ab", "  ", "cd"]
    with pytest.raises(ValueError, match="invalid"):
        fb.split("x", "(unclosed")


def test_char_mode_unknown_character():
    tok = fb.train({"low": 5, "lower": 2}, num_merges=3, base="chars", end_of_word="</w>")
    with pytest.raises(fb.UnknownCharacterError) as info:
        tok.encode("low lowz")
    assert info.value.char == "z"
    assert info.value.offset == 7
    assert tok.decode(tok.encode("low lower")) == "low lower"


def test_char_mode_marker_in_text_rejected():
    with pytest.raises(fb.TrainingError, match="end_of_word"):
        fb.train({"a_b": 3}, num_merges=2, base="chars", end_of_word="_")


def test_training_option_errors():
    with pytest.raises(ValueError, match="tie_break"):
        fb.train(["x"], vocab_size=300, tie_break="nope")
    with pytest.raises(fb.TrainingError, match="smaller than the 256"):
        fb.train(["x"], vocab_size=100)
    with pytest.raises(TypeError, match="iterable of documents"):
        fb.train("just one string", vocab_size=300)
    with pytest.raises(ValueError, match="end_of_word"):
        fb.train(["x"], vocab_size=300, end_of_word="_")


def test_train_from_arrow_array():
    pa = pytest.importorskip("pyarrow")
    arr = pa.array(SAMPLE + [None], type=pa.large_string())
    assert fb.train(arr, vocab_size=300) == fb.train(SAMPLE, vocab_size=300)


def test_train_stops_when_no_pairs_left():
    tok = fb.train(["ab"], vocab_size=1000)
    assert tok.merges.tolist() == [[97, 98]]
    tok = fb.train([""], vocab_size=1000)
    assert len(tok.merges) == 0
    assert tok.encode("anything") == list(b"anything")
    tok = fb.train(["a"], vocab_size=1000)
    assert len(tok.merges) == 0
    # No document at all is not "no pairs left" but no input: an error (issue 15).
    with pytest.raises(fb.TrainingError, match="nothing to learn"):
        fb.train([], vocab_size=1000)


def test_dropout(tok):
    text = " ".join(SAMPLE) * 3
    plain = tok.encode(text)
    assert tok.encode(text, dropout=0.0, seed=5) == plain
    noisy = tok.encode(text, dropout=0.3, seed=1)
    assert noisy == tok.encode(text, dropout=0.3, seed=1)  # same seed, same ids
    assert noisy != plain and len(noisy) > len(plain)
    assert tok.decode(noisy) == text
    assert tok.encode(text, dropout=0.3, seed=2) != noisy
    # p = 1 skips every merge: the bytes themselves.
    assert tok.encode(text, dropout=1.0) == list(text.encode("utf-8"))
    with pytest.raises(ValueError, match="dropout"):
        tok.encode("x", dropout=1.5)
    with pytest.raises(ValueError, match="seed"):
        tok.encode("x", dropout=0.1, seed=-1)


def test_merge_modes_differ_on_unreachable_merge():
    # Merges bc (rank 0), ab (1), ab+c (2). Pair-keyed (ours, HF): "abc" -> b+c first, then
    # (a, bc) has no merge -> [a, bc]. Rank-keyed (tiktoken): the piece "abc" is a token.
    a, b, c = 97, 98, 99
    merges = [(b, c), (a, b), (257, c)]
    pairs = fb.Tokenizer(merges, pattern=None)
    ranks = fb.Tokenizer(merges, pattern=None, merge_mode="ranks")
    assert pairs.encode("abc") == [a, 256]
    assert ranks.encode("abc") == [258]
    assert ranks.encode("xabcx") == [120, 258, 120]  # one piece: "abc" inside is merged by rank
    assert pairs.decode(pairs.encode("abcabc")) == ranks.decode(ranks.encode("abcabc")) == "abcabc"


def test_byte_order_permutation(tmp_path):
    order = list(range(255, -1, -1))  # id i is byte 255 - i
    tok = fb.Tokenizer([(255 - 97, 255 - 98)], pattern=None, byte_order=order)
    assert tok.vocab[0] == b"\xff" and tok.vocab[256] == b"ab"
    assert tok.encode("abc") == [256, 255 - 99]
    assert tok.decode(tok.encode("héllo")) == "héllo"
    tok.save(tmp_path / "p.json")
    assert fb.load(tmp_path / "p.json") == tok
    with pytest.raises(fb.ModelFormatError, match="byte_order"):
        fb.Tokenizer([], byte_order=[0] * 256)


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_normalization(form, tmp_path):
    import unicodedata

    nfd = unicodedata.normalize("NFD", "Café ﬁne Ｆｕｌｌ ½")
    docs = [nfd * 5, "plain text " * 5]
    tok = fb.train(docs, vocab_size=300, normalization=form)
    assert tok.normalization == form
    assert tok.decode(tok.encode(nfd)) == unicodedata.normalize(form, nfd)
    assert tok.encode(nfd) == tok.encode(unicodedata.normalize(form, nfd))
    tok.save(tmp_path / "n.json")
    loaded = fb.load(tmp_path / "n.json")
    assert loaded == tok and loaded.encode(nfd) == tok.encode(nfd)
    pa = pytest.importorskip("pyarrow")
    assert tok.encode_batch(pa.array([nfd])).to_pylist() == [tok.encode(nfd)]


def test_no_normalization_is_lossless_for_nfc_and_nfd():
    import unicodedata

    tok = fb.train(SAMPLE, vocab_size=300)
    for text in ("Café", unicodedata.normalize("NFD", "Café"), "ﬁ", "Å Å"):
        assert tok.decode(tok.encode(text)) == text


@settings(max_examples=200 if not NOJIT else 50, deadline=None)
@given(text=st.text(alphabet="<|>ab", max_size=40),
       specials=st.lists(st.text(alphabet="<|>ab", min_size=1, max_size=5), min_size=1,
                         max_size=6, unique=True))
def test_special_matcher_matches_reference(text, specials):
    from fastbpe_nb import reference as ref
    from fastbpe_nb.pretokenize import SpecialTokenMatcher, split_special

    assert split_special(text, SpecialTokenMatcher(specials)) == ref.split_special_tokens(
        text, specials)
    # The filter: False only when no token occurs (one prefix or several).
    matcher = SpecialTokenMatcher(specials)
    assert matcher.maybe_in(text) == any(p in text for p in matcher.prefixes)
    assert matcher.maybe_in(text) or not any(t in text for t in specials)


def test_many_special_tokens(tmp_path):
    specials = [f"<|extra_{i}|>" for i in range(100_000)]
    tok = fb.Tokenizer([], pattern="gpt2", special_tokens=specials)
    tok.save(tmp_path / "s.json")
    loaded = fb.load(tmp_path / "s.json")
    assert loaded.vocab_size == 256 + 100_000
    assert loaded.encode("a<|extra_99999|>b<|extra_5|", allowed_special="all") == [
        97, 256 + 99_999, 98] + list(b"<|extra_5|")


@settings(max_examples=300 if not NOJIT else 50, deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.text(alphabet="<|>ab é", max_size=12)),
                     max_size=8),
       specials=st.lists(st.text(alphabet="<|>ab é", min_size=1, max_size=4), min_size=1,
                         max_size=5, unique=True),
       lead=st.integers(0, 3))
def test_candidate_rows_hold_every_row_with_a_special_token(rows, specials, lead):
    # Arrow rows as bytes (offsets need not start at 0): every row holding a token is a
    # candidate, candidates are sorted and distinct, and a prefix alone in a row's text
    # (or running into the next row) at most adds a row to check.
    from fastbpe_nb.specials import SpecialTokens

    raw = [b"" if r is None else r.encode() for r in rows]
    data = np.frombuffer(b"x" * lead + b"".join(raw) + b"<|", dtype=np.uint8)
    offsets = np.cumsum([lead] + [len(r) for r in raw]).astype(np.int64)
    specials_of = SpecialTokens({t: 1000 + i for i, t in enumerate(specials)})
    got = specials_of.candidate_rows(data, offsets, frozenset(specials))
    assert got.tolist() == sorted(set(got.tolist()))
    holding = [i for i, r in enumerate(rows) if r and any(t in r for t in specials)]
    assert set(holding) <= set(got.tolist())
    assert all(0 <= i < len(rows) and raw[i] for i in got.tolist())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(SAMPLE + ["<|endoftext|>", "<|pad", "\ud800", "x" * 300, ""]),
                max_size=12), st.sampled_from([(), "all"]), st.sampled_from([(), "all"]))
def test_one_text_paths_agree_with_the_batch_layout(tok, parts, allowed, disallowed):
    """``encode`` of one text takes the piece memo (short), ``Encoder.encode_plain`` (one
    scan and one kernel call, no batch layout) or the layout; all give the batch path's
    ids, and refuse a disallowed special token alike."""
    text = "".join(parts)
    try:
        expected = tok.encode_batch([text], allowed_special=allowed,
                                    disallowed_special=disallowed)[0]
    except fb.DisallowedSpecialTokenError:
        with pytest.raises(fb.DisallowedSpecialTokenError):
            tok.encode(text, allowed_special=allowed, disallowed_special=disallowed)
        return
    assert tok.encode(text, allowed_special=allowed, disallowed_special=disallowed) == expected
    assert tok.encode_to_numpy(text, allowed_special=allowed,
                               disallowed_special=disallowed).tolist() == expected
    enc = tok._encoder
    sets = tok.specials.sets(allowed, disallowed)
    plain = enc.encode_plain(text, *sets)
    if plain is not None:  # taken only where no special token is to be looked at
        assert plain[0].tolist() == expected
        assert not any(s in text for s in tok.special_tokens) or (allowed == () and
                                                                 disallowed == ())
    elif "\ud800" not in text and allowed == () and disallowed == ():
        raise AssertionError("a plain text should take encode_plain")
