"""Hostile arguments and models: every bad value is refused in Python, naming what is wrong.

Covers: normalization in tokenizer.json and .tiktoken exports; special token ids with gaps
(cl100k/o200k layouts) through every constructor, file format and decoder; word counts
that would overflow the merge kernel's int64 counters; non-integer merges; every kind of
id sequence given to the decoders; num_threads / dropout / seed; invalid UTF-8 in Arrow
string arrays.
"""

import json
import unicodedata
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import (
    InvalidUTF8Error,
    LossyExportError,
    ModelFormatError,
    TokenIdTypeError,
    TrainingError,
    UnknownTokenError,
)

TEXTS = [
    "Hello world! It's a test of the tokenizer's 123 numbers.\n",
    "Grüße aus Köln — naïve café. Crème brûlée, déjà vu. Ångström. ﬁne ﬂour ①②",
    "def f(x):\n    return x ** 2  # square\n\n\n",
] * 4
#: Decomposed accents: NFC composes them, so a model that forgets its normalizer splits
#: them differently.
NFD_TEXT = unicodedata.normalize("NFD", "Grüße aus Köln — naïve café, déjà vu, Ångström ﬁne")


@pytest.fixture(scope="module")
def tok():
    return fb.train(TEXTS, vocab_size=400, special_tokens=["<|endoftext|>", "<|pad|>"])


def invalid_utf8_array(rows, large=False):
    """A string array holding exactly ``rows`` (bytes, maybe invalid UTF-8; None = null)."""
    lengths = [0 if r is None else len(r) for r in rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    validity = None
    if any(r is None for r in rows):
        validity = pa.py_buffer(np.packbits([r is not None for r in rows],
                                            bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(rows),
                                 [validity, pa.py_buffer(offsets.tobytes()),
                                  pa.py_buffer(b"".join(r for r in rows if r is not None))],
                                 null_count=sum(r is None for r in rows))


# ---------------------------------------------------------- 1. tokenizer.json normalizer
@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_huggingface_export_keeps_the_normalization(tmp_path, form):
    from tokenizers import Tokenizer as HFTokenizer

    tok = fb.train(TEXTS, vocab_size=500, normalization=form, special_tokens=["<|endoftext|>"])
    path = tmp_path / "tokenizer.json"
    tok.to_huggingface(path)
    assert json.loads(path.read_text("utf-8"))["normalizer"] == {"type": form}
    hf = HFTokenizer.from_file(str(path))
    text = NFD_TEXT + " <|endoftext|> " + NFD_TEXT[::-1]
    ours = tok.encode(text, allowed_special="all")
    assert ours != tok.encode_bytes(text.encode("utf-8"))  # normalization matters here
    assert hf.encode(text).ids == ours
    back = fb.from_huggingface(path)
    assert back.normalization == form
    assert back == tok
    assert back.encode(text, allowed_special="all") == ours


@pytest.mark.parametrize("normalizer", [
    {"type": "Lowercase"},
    {"type": "NFD"},
    {"type": "NFKD"},
    {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
    {"type": "Sequence", "normalizers": [{"type": "Strip", "left": True, "right": True}]},
])
def test_huggingface_other_normalizers_are_refused_by_name(tmp_path, normalizer):
    tok = fb.train(TEXTS, vocab_size=300)
    path = tmp_path / "tokenizer.json"
    tok.to_huggingface(path)
    doc = json.loads(path.read_text("utf-8"))
    doc["normalizer"] = normalizer
    path.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(ModelFormatError, match="unsupported") as info:
        fb.from_huggingface(path)
    assert info.value.entry == "normalizer"
    kinds = [normalizer["type"]] + [s["type"] for s in normalizer.get("normalizers", [])]
    assert any(repr(k) in str(info.value) for k in kinds if k != "Sequence"), str(info.value)


def test_huggingface_nfc_one_step_sequence_and_raw_added_tokens(tmp_path):
    tok = fb.train(TEXTS, vocab_size=300, normalization="NFC", special_tokens=["<|endoftext|>"])
    path = tmp_path / "tokenizer.json"
    tok.to_huggingface(path)
    doc = json.loads(path.read_text("utf-8"))
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    path.write_text(json.dumps(doc), "utf-8")
    assert fb.from_huggingface(path) == tok
    # normalized=false: HF would look for the token in the raw text, we in the NFC text.
    doc["added_tokens"][0]["normalized"] = False
    path.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(ModelFormatError, match="normalized=false") as info:
        fb.from_huggingface(path)
    assert info.value.entry == "added_tokens[0]"


def test_huggingface_export_refuses_a_special_token_normalization_changes(tmp_path):
    tok = fb.Tokenizer([], special_tokens=["<ﬁ>"], normalization="NFKC")
    with pytest.raises(ValueError, match="NFKC form"):
        tok.to_huggingface(tmp_path / "tokenizer.json")


# ----------------------------------------------------------------- 2. .tiktoken export
@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_tiktoken_export_refuses_a_normalizing_model(tmp_path, form):
    tok = fb.train(TEXTS, vocab_size=300, normalization=form)
    path = tmp_path / "v.tiktoken"
    with pytest.raises(LossyExportError, match=form) as info:
        tok.to_tiktoken(path)
    assert "allow_lossy=True" in str(info.value) and isinstance(info.value, ValueError)
    assert not path.exists()
    with pytest.warns(UserWarning, match=form):
        tok.to_tiktoken(path, allow_lossy=True)
    plain = fb.Tokenizer(tok.merges, pattern=tok.pattern)
    plain.to_tiktoken(tmp_path / "plain.tiktoken")
    assert path.read_bytes() == (tmp_path / "plain.tiktoken").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.to_tiktoken(tmp_path / "again.tiktoken")  # no normalization: no warning


# ---------------------------------------------------------- 3. special ids with gaps
def gap_tokenizer(merges=None):
    base = fb.train(TEXTS, vocab_size=300, pattern="cl100k")
    n = base.n_regular
    specials = {"<|endoftext|>": n + 1, "<|fim_prefix|>": n + 2, "<|endofprompt|>": n + 20}
    return fb.Tokenizer(base.merges if merges is None else merges, pattern="cl100k",
                        special_tokens=specials), n, specials


def test_special_ids_may_leave_gaps():
    tok, n, specials = gap_tokenizer()
    assert tok.vocab_size == n + 21
    assert tok.unused_ids == [n] + list(range(n + 3, n + 20))
    assert tok.vocab[n] is None and tok.vocab[n + 20] == b"<|endofprompt|>"
    text = "a<|endofprompt|>b<|endoftext|> c"
    ids = tok.encode(text, allowed_special="all")
    assert ids == tok.encode("a") + [n + 20] + tok.encode("b") + [n + 1] + tok.encode(" c")
    assert tok.decode(ids) == text
    assert tok.decode(np.array(ids * 2000)) == text * 2000  # the kernel path
    for bad in (n, n + 3, n + 19):
        for ids_ in ([97, bad], np.array([97] * 5000 + [bad])):
            with pytest.raises(UnknownTokenError, match="unused id") as info:
                tok.decode(ids_)
            assert info.value.token_id == bad and info.value.position == len(ids_) - 1
        with pytest.raises(UnknownTokenError):
            tok.stream_decoder().push(bad)
        with pytest.raises(UnknownTokenError):
            tok.id_to_piece(bad)
    with pytest.raises(UnknownTokenError):
        tok.decode([n + 21])


@pytest.mark.parametrize("specials, message", [
    ({"<a>": "n - 1"}, "right after"),
    ({"<a>": "-1"}, "negative"),
    ({"<a>": "n", "<b>": "n"}, "used twice"),
    ({"<a>": "n + 70000"}, "unused"),
    ({"<a>": "2**31"}, "2\\*\\*31"),
    ({"<a>": "True"}, "not an integer"),
    ({"<a>": "n + 0.0"}, "not an integer"),
])
def test_special_ids_that_are_refused(specials, message):
    base = fb.train(TEXTS, vocab_size=300)
    n = base.n_regular
    given = {t: eval(v, {"n": n}) for t, v in specials.items()}  # noqa: S307 - test data
    with pytest.raises(ValueError, match=message):
        fb.Tokenizer(base.merges, special_tokens=given)


def test_gap_ids_survive_our_model_file(tmp_path):
    tok, n, specials = gap_tokenizer()
    path = tmp_path / "m.json"
    tok.save(path)
    doc = json.loads(path.read_text("utf-8"))
    assert doc["special_tokens"] == sorted(([t, i] for t, i in specials.items()),
                                           key=lambda e: e[1])
    back = fb.load(path)
    assert back == tok and back.vocab_size == tok.vocab_size
    assert back.unused_ids == tok.unused_ids
    back.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    # A file naming a regular token's id, or a huge id, is still refused by entry.
    for bad in (n - 1, 10**9, 2**70):
        doc["special_tokens"] = [["<a>", bad]]
        (tmp_path / "bad.json").write_text(json.dumps(doc), "utf-8")
        with pytest.raises(ModelFormatError) as info:
            fb.load(tmp_path / "bad.json")
        assert info.value.entry == "special_tokens" and str(tmp_path) in str(info.value)


def test_old_model_files_stay_readable(tmp_path):
    # Version-1 files written before gaps were allowed: contiguous ids after the merges.
    tok = fb.train(TEXTS, vocab_size=300, special_tokens=["<|endoftext|>"])
    doc = {"format": "fastbpe_nb", "version": 1, "base": "bytes", "pattern": "gpt2",
           "end_of_word": None, "alphabet": None, "tie_break": "ids", "normalization": None,
           "byte_order": None, "merge_mode": "pairs",
           "special_tokens": [["<|endoftext|>", tok.n_regular]],
           "merges": tok.merges.tolist()}
    (tmp_path / "old.json").write_text(json.dumps(doc), "utf-8")
    back = fb.load(tmp_path / "old.json")
    assert back.special_tokens == tok.special_tokens and back.unused_ids == []


def test_gap_ids_in_tokenizer_json(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer

    tok, n, specials = gap_tokenizer()
    path = tmp_path / "tokenizer.json"
    tok.to_huggingface(path)
    doc = json.loads(path.read_text("utf-8"))
    assert {a["content"]: a["id"] for a in doc["added_tokens"]} == specials
    hf = HFTokenizer.from_file(str(path))
    text = "x <|endofprompt|> y<|fim_prefix|>z <|endoftext|>"
    assert hf.encode(text).ids == tok.encode(text, allowed_special="all")
    assert hf.decode(tok.encode(text, allowed_special="all"), skip_special_tokens=False) == text
    back = fb.from_huggingface(path)
    assert back == tok and back.unused_ids == tok.unused_ids


def test_gap_ids_with_tiktoken(tmp_path):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    tok, n, specials = gap_tokenizer()
    path = tmp_path / "v.tiktoken"
    tok.to_tiktoken(path)
    enc = tiktoken.Encoding("gaps", pat_str=fb.NAMED_PATTERNS["cl100k"],
                            mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=specials)
    back = fb.from_tiktoken(path, pattern="cl100k", special_tokens=specials)
    assert back.vocab_size == tok.vocab_size == enc.n_vocab
    text = "x <|endofprompt|> y<|fim_prefix|>z <|endoftext|> 12345 ok"
    ids = enc.encode(text, allowed_special="all")
    assert back.encode(text, allowed_special="all") == ids == tok.encode(text, allowed_special="all")
    assert back.decode(ids) == enc.decode(ids) == text


# ------------------------------------------------ 4. word counts past int64, bad merges
def test_word_counts_whose_pair_counts_overflow_int64_are_refused():
    # "ab" occurs 2**62 + 2 * 2**61 = 2**63 times: one past int64, so the kernel's count
    # wrapped negative and "ba" was merged first.
    with pytest.raises(TrainingError, match="int64") as info:
        fb.train({"ab": 2**62, "abab": 2**61, "cd": 5}, num_merges=1, pattern=None)
    assert "count" in str(info.value)
    with pytest.raises(TrainingError, match="does not fit in int64"):
        fb.train({"ab": 2**63}, num_merges=1, pattern=None)
    with pytest.raises(TrainingError, match="counts sum to"):
        fb.train({chr(c): 2**62 for c in range(97, 100)}, num_merges=1, pattern=None)
    # Large counts that fit still train exactly.
    tok = fb.train({"ab": 2**60, "abab": 2**59, "cd": 2**60 - 1}, num_merges=1, pattern=None)
    assert tok.merges.tolist() == [[97, 98]] and tok.merge_counts.tolist() == [2**61]


@pytest.mark.parametrize("merges, entry", [
    ([(97.5, 98)], "merges[0]"),
    ([(97, 98), (97.0, 98)], "merges[1]"),
    ([(97, 98), (256, True)], "merges[1]"),
    ([(97, False)], "merges[0]"),
    ([("97", 98)], "merges[0]"),
    ([(97, b"b")], "merges[0]"),
    ([(np.float64(97), 98)], "merges[0]"),
    ([(97, None)], "merges[0]"),
    ([(97, 98, 99)], "merges[0]"),
    ([97, 98], "merges[0]"),
    ([(97, 2**70)], "merges[0]"),
    (np.array([[97.0, 98.0]]), "merges[0]"),
    (np.array([[97, 98], [-1, 3]]), "merges[1]"),
    (np.array([[97, True]], dtype=object), "merges[0]"),
])
def test_non_integer_merges_are_refused(merges, entry):
    with pytest.raises(ModelFormatError) as info:
        fb.Tokenizer(merges=merges)
    assert info.value.entry == entry, str(info.value)


def test_integer_merges_of_any_kind_are_accepted():
    want = [[97, 98], [256, 99]]
    for merges in ([(97, 98), (256, 99)], [[np.int16(97), np.uint64(98)], (256, 99)],
                   np.array(want, dtype=np.uint16), np.array(want, dtype=np.int64),
                   np.array(want, dtype=object), tuple(map(tuple, want))):
        assert fb.Tokenizer(merges=merges).merges.tolist() == want


# ------------------------------------------------------------ 5. decoding any id kind
def id_inputs(ids):
    """The same ids as every accepted container."""
    yield list(ids)
    yield tuple(ids)
    yield iter(ids)
    yield (i for i in ids)
    yield [np.int32(i) for i in ids]
    for dtype in (np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64):
        yield np.array(ids, dtype=dtype)
    yield pa.array(ids, pa.int32())
    yield pa.array(ids, pa.uint16())
    yield pa.chunked_array([pa.array(ids[:3], pa.int64()), pa.array(ids[3:], pa.int64())])


def test_decode_accepts_any_integer_sequence(tok):
    text = "Grüße, naïve café 😀 <|endoftext|>"
    ids = tok.encode(text, allowed_special="all")
    for given in id_inputs(ids):
        assert tok.decode(given) == text, type(given)
    for given in id_inputs(ids * 1000):  # long: the kernel path
        assert tok.decode_bytes(given) == text.encode("utf-8") * 1000, type(given)
    assert tok.decode(range(97, 100)) == "abc"
    assert tok.decode(np.array([])) == tok.decode(pa.array([], pa.int64())) == ""
    assert tok.decode(pa.chunked_array([], pa.int32())) == ""


@pytest.mark.parametrize("bad, position", [
    ([97, True], 1),
    ([False], 0),
    ([97, 98.0], 1),
    ([97, 98, 99.5], 2),
    ([97, "98"], 1),
    ([97, None], 1),
    ([np.float32(97)], 0),
    (np.array([97.0, 98.0]), 0),
    (np.array([True, False]), 0),
    (np.array(["a", "b"]), 0),
    (pa.array([97, None, 98], pa.int64()), 1),
    (pa.chunked_array([pa.array([97, 98]), pa.array([99, None])]), 3),
    (pa.array([97.0, 98.0]), 0),
    (pa.array(["a"]), 0),
])
def test_decode_refuses_non_integers_naming_the_position(tok, bad, position):
    for decode in (tok.decode, tok.decode_bytes):
        with pytest.raises(TokenIdTypeError) as info:
            decode(bad)
        assert info.value.position == position, str(info.value)
        assert f"position {position}" in str(info.value)
        assert isinstance(info.value, UnknownTokenError) and isinstance(info.value, TypeError)


def test_decode_refuses_out_of_range_ids_naming_the_position(tok):
    n = tok.vocab_size
    for bad, position in (([97, n], 1), ([-1], 0), (np.array([5, 7, n], np.uint64), 2),
                          (np.array([1, 2**63 + 5], np.uint64), 1), ([97, 10**30], 1),
                          (pa.array([1, 2, -3], pa.int8()), 2), (iter([1, n + 5]), 1)):
        with pytest.raises(UnknownTokenError) as info:
            tok.decode(bad)
        assert info.value.position == position


def test_decode_refuses_text_and_bytes(tok):
    for bad in ("abc", b"abc", bytearray(b"ab"), 97, np.array([[97, 98]])):
        with pytest.raises(TypeError):
            tok.decode(bad)


def test_stream_decoder_refuses_non_integers(tok):
    for bad in (True, 97.0, "a", None):
        with pytest.raises(TokenIdTypeError):
            tok.stream_decoder().push(bad)
    assert tok.stream_decoder().push(np.uint8(97)) == "a"


def test_sentencepiece_decode_accepts_any_integer_sequence():
    sp = fb.train_sentencepiece(["hello world", "naïve café hello", "world of words"] * 20,
                                vocab_size=300)
    text = "hello café"
    ids = sp.encode(text)
    seq = ids if len(ids) > 3 else ids * 2
    want = sp.decode(seq)
    for given in id_inputs(seq):
        assert sp.decode(given) == want, type(given)
    assert sp.decode(iter(ids)) == text
    assert sp.decode(np.array(ids, np.uint16)) == text
    assert sp.decode(pa.array(ids, pa.int64())) == text
    for bad, position in (([ids[0], True], 1), ([1.0], 0), (np.array([1.0]), 0),
                          (pa.array([1, None]), 1), (["a"], 0)):
        with pytest.raises(TokenIdTypeError) as info:
            sp.decode(bad)
        assert info.value.position == position
    with pytest.raises(UnknownTokenError):
        sp.decode([len(sp.model.pieces)])


# ------------------------------------------------------- 6. num_threads, dropout, seed
BAD_THREADS = [2.5, 0, -1, True, "2", np.float64(2.0)]


@pytest.mark.parametrize("bad", BAD_THREADS)
def test_num_threads_is_validated_everywhere(tok, tmp_path, bad):
    pq.write_table(pa.table({"text": ["hello world"] * 3}), tmp_path / "in.parquet")
    (tmp_path / "c.txt").write_text("hello world\n" * 10)
    sp = fb.train_sentencepiece(["hello world"] * 10, vocab_size=270)
    calls = [
        lambda: tok.encode_batch(["a b", "c"], num_threads=bad),
        lambda: tok.encode_batch(pa.array(["a b", "c"]), num_threads=bad),
        lambda: tok.count_tokens(["a b", "c"], num_threads=bad),
        lambda: fb.train(["hello world"] * 5, vocab_size=260, num_threads=bad),
        lambda: fb.train_files([tmp_path / "c.txt"], vocab_size=260, num_threads=bad),
        lambda: fb.count_to_file([tmp_path / "c.txt"], tmp_path / "counts.arrow",
                                 num_threads=bad),
        lambda: fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "out",
                                  num_threads=bad),
        lambda: sp.encode_batch(["hello"], num_threads=bad),
    ]
    for k, call in enumerate(calls):
        with pytest.raises(ValueError, match="num_threads") as info:
            call()
        assert "int >= 1" in str(info.value), k
    assert not (tmp_path / "out").exists()  # refused before any output


def test_num_threads_accepts_ints_and_numpy_ints(tok):
    want = tok.encode_batch(["a b", "c d e"])
    for good in (1, 2, np.int64(2), np.uint8(3), None):
        assert tok.encode_batch(["a b", "c d e"], num_threads=good) == want
        assert tok.count_tokens(["a b", "c d e"], num_threads=good).tolist() == [
            len(x) for x in want]


@pytest.mark.parametrize("kw, name", [
    (dict(dropout=True), "dropout"), (dict(dropout=float("nan")), "dropout"),
    (dict(dropout=1.5), "dropout"), (dict(dropout=-0.1), "dropout"),
    (dict(dropout="0.1"), "dropout"), (dict(dropout=None), "dropout"),
    (dict(dropout=0.1, seed=True), "seed"), (dict(dropout=0.1, seed=2**31), "seed"),
    (dict(dropout=0.1, seed=1.0), "seed"), (dict(dropout=0.1, seed=-1), "seed"),
    (dict(dropout=0.1, seed="3"), "seed"),
])
def test_dropout_and_seed_are_validated(tok, kw, name):
    for encode in (tok.encode, tok.encode_to_numpy):
        with pytest.raises(ValueError, match=name):
            encode("hello world", **kw)


def test_dropout_and_seed_accept_numpy_scalars(tok):
    text = " ".join(TEXTS)
    want = tok.encode(text, dropout=0.25, seed=7)
    assert tok.encode(text, dropout=np.float32(0.25), seed=np.int64(7)) == want
    assert tok.encode(text, dropout=0, seed=np.uint8(7)) == tok.encode(text)


@pytest.mark.parametrize("argv", [
    ["encode", "--threads", "2.5"], ["encode", "--threads", "0"],
    ["train", "-o", "x.json", "--threads", "-2"], ["count", "-o", "x", "--threads", "0"],
    ["inspect", "--dropout", "1.5"], ["inspect", "--seed", "-1"],
])
def test_cli_refuses_bad_threads_dropout_seed(argv, capsys):
    from fastbpe_nb.cli import main

    option = next(a for a in argv if a.startswith("--") and a != "--model")
    with pytest.raises(SystemExit) as info:
        main(argv[:1] + ["--model", "m.json"] * (argv[0] in ("encode", "inspect"))
             + argv[1:] + ["in.txt"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and ("must" in err or "not int" in err), err


# ------------------------------------------------------ 7. invalid UTF-8 in Arrow rows
ROWS = [b"hello \xff world", b"ok", None, b"bad \xe2<|endoftext|> x\x80", b"caf\xc3",
        b"\xed\xa0\x80 surrogate", b"<|pad|>\xf0\x9f"]


def special_split_bytes(tok, row):
    """Our expected ids for ``row`` with every special token allowed: the bytes between
    special tokens encoded as ``encode_bytes`` encodes them."""
    out, rest = [], row
    while True:
        hits = [(rest.find(t.encode()), t) for t in tok.special_tokens if t.encode() in rest]
        if not hits:
            return out + (tok.encode_bytes(rest) if rest else [])
        at, token = min(hits)
        out += (tok.encode_bytes(rest[:at]) if at else []) + [tok.special_tokens[token]]
        rest = rest[at + len(token.encode()):]


@pytest.mark.parametrize("large", [False, True])
def test_invalid_utf8_rows_encode_as_their_bytes(tok, large):
    array = invalid_utf8_array(ROWS, large)
    as_bytes = [None if r is None else tok.encode_bytes(r) for r in ROWS]
    assert tok.encode_batch(array, disallowed_special=()).to_pylist() == as_bytes
    allowed = tok.encode_batch(array, allowed_special="all").to_pylist()
    assert allowed == [None if r is None else special_split_bytes(tok, r) for r in ROWS]
    assert tok.special_tokens["<|endoftext|>"] in allowed[3]
    for row, ids in zip(ROWS, allowed):
        if row is not None:
            assert tok.decode_bytes(ids) == row  # nothing lost
    counts = tok.count_tokens(array, disallowed_special=())
    assert counts.tolist() == [0 if r is None else len(r) for r in as_bytes]
    chunked = pa.chunked_array([array.slice(0, 3), array.slice(3)])
    assert tok.encode_batch(chunked, allowed_special="all").to_pylist() == allowed


def test_invalid_utf8_row_with_a_disallowed_special_names_the_row(tok):
    array = invalid_utf8_array(ROWS)
    with pytest.raises(fb.DisallowedSpecialTokenError) as info:
        tok.encode_batch(array)
    assert info.value.row == 3 and info.value.token == "<|endoftext|>"
    # Only <|pad|> disallowed: row 6 holds it right before invalid bytes.
    with pytest.raises(fb.DisallowedSpecialTokenError) as info:
        tok.encode_batch(array, allowed_special={"<|endoftext|>"}, disallowed_special={"<|pad|>"})
    assert info.value.row == 6 and info.value.offset == 0


def test_invalid_utf8_row_for_a_normalizing_model_names_the_row(tmp_path):
    nfc = fb.train(TEXTS, vocab_size=300, normalization="NFC")
    array = invalid_utf8_array([b"fine", b"caf\xc3\xa9", b"bad \xff here", b"x\x80"])
    with pytest.raises(InvalidUTF8Error) as info:
        nfc.encode_batch(array)
    assert (info.value.row, info.value.offset) == (2, 4) and "row 2" in str(info.value)
    assert isinstance(info.value, ValueError)
    good = invalid_utf8_array([b"fine", "cafe\u0301".encode()])
    assert nfc.encode_batch(good).to_pylist() == [nfc.encode("fine"), nfc.encode("café")]
    # Through encode_parquet: the error names the file too.
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": array}), path)
    with pytest.raises(InvalidUTF8Error) as info:
        fb.encode_parquet(nfc, path, tmp_path / "out")
    assert info.value.path == str(path) and str(path) in str(info.value)
    assert info.value.row == 2


def test_invalid_utf8_parquet_file_encodes_as_bytes(tok, tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": invalid_utf8_array(ROWS)}), path)
    fb.encode_parquet(tok, path, tmp_path / "out", special="allow")
    got = pq.read_table(tmp_path / "out" / "in.parquet").column("ids").to_pylist()
    assert got == [None if r is None else special_split_bytes(tok, r) for r in ROWS]


# ------------------------------------------- gap ids and SentencePiece-style Arrow rows
def test_gap_ids_are_refused_by_inspect_and_as_a_separator(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastbpe_nb.inspect import TokenLookupError, construction_tree, token_id

    tok = fb.Tokenizer(merges=[], special_tokens={"<|endoftext|>": 256, "<b>": 260})
    assert tok.vocab[258] is None
    with pytest.raises(TokenLookupError, match="unused id"):
        token_id(tok, 258)
    with pytest.raises(TokenLookupError, match="unused id"):
        construction_tree(tok, 258)
    assert construction_tree(tok, 260)["kind"] == "special"
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a", "b"]}), src)
    for bad in (258, True, 2.0):
        with pytest.raises(ValueError, match="separator"):
            fb.encode_parquet(tok, src, tmp_path / "out", format="bin", separator=bad)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.bin"))
    fb.encode_parquet(tok, src, tmp_path / "ok", format="bin", separator=260)
    ids, index = fb.read_bin(tmp_path / "ok" / "in.bin")
    assert ids.tolist() == [97, 260, 98, 260] and index.tolist() == [0, 2, 4]


def test_sentencepiece_style_arrow_rows_with_invalid_utf8_name_the_row():
    import pyarrow as pa

    sp = fb.train(["hello world abc " * 20, "naïve café"] * 5, vocab_size=300, base="chars",
                  whitespace="\u2581", byte_fallback=True)
    good = pa.chunked_array([pa.array(["hello", None]), pa.array(["world"])])
    # Nulls stay null, as for every preset.
    assert sp.encode_batch(good).to_pylist() == [sp.encode("hello"), None, sp.encode("world")]
    offsets = np.array([0, 2, 7], np.int32).tobytes()
    bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(offsets),
                                                 pa.py_buffer(b"okbad\xff\xfe")])
    with pytest.raises(fb.InvalidUTF8Error) as err:
        sp.encode_batch(pa.chunked_array([pa.array(["x"]), bad]))
    assert err.value.row == 2 and err.value.offset == 3
