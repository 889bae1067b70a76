"""SentencePiece-style BPE: differential tests with the ``sentencepiece`` package as the oracle.

* models trained by sentencepiece itself (BPE; byte fallback on/off, split_digits on/off,
  identity and nmt_nfkc normalization, character coverage 1.0 and 0.9995, user-defined
  symbols, no dummy prefix, kept extra whitespace) load into ours and give identical ids
  and identical decoded text on held-out multilingual documents;
* models trained by us export to a ``.model`` that sentencepiece loads and encodes
  identically;
* malformed ``.model`` files raise ModelFormatError.
"""

from __future__ import annotations

import io
import random
import struct

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import ModelFormatError, UnknownTokenError
from fastbpe_nb.io import sentencepiece_model as spio
from fastbpe_nb.sentencepiece_style import (
    from_sentencepiece,
    from_sentencepiece_bytes,
    to_sentencepiece,
)
from fastbpe_nb.sentencepiece_train import train_sentencepiece

from fbtest import CORPORA, NOJIT

spm = pytest.importorskip("sentencepiece")

LANGS = ("kjv.txt", "fortunes_de.txt", "fortunes_ru.txt", "fortunes_zh.txt")
N_TRAIN = 1500
N_HELD = 40 if NOJIT else 300  # the kernel runs as plain Python under NUMBA_DISABLE_JIT

#: Hand-written edge cases appended to the held-out documents.
EDGE = [
    "",
    "   ",
    "Hello 😀 world",
    "  lead  and   trail  ",
    "tab\tsep\nnew\r\nline",
    "ｶﾞ Ａ\u3000full-width ﬁ ①",
    "e\u0301t\u00e9 cafe\u0301",
    "▁ literal ▁ marks ▁",
    "12345 abc 3.14 ٣٤",
    "\x01\x02 control \x7f",
    "a<sep>b foo<sep> foofoo",
    "<s> </s> <unk> <0x41>",
    "漢字かなカナ한국어ไทยالعربية",
    "\u200b zero\u200dwidth \ufeff",
    "🤖🤖 👩‍👩‍👧 🇩🇪",
]


def _lines(name, start, n):
    with open(CORPORA / name, encoding="utf-8", errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    return lines[start:start + n]


@pytest.fixture(scope="module")
def corpus():
    if not CORPORA.exists():
        pytest.skip(f"{CORPORA} is absent (the shared corpora exist only on the team's machines)")
    train, held = [], []
    for name in LANGS:
        train += _lines(name, 0, N_TRAIN)
        held += _lines(name, 5000, N_HELD)
    return train, held + EDGE


def _spm_train(lines, **kw) -> bytes:
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out,
                                   model_type="bpe", minloglevel=2, num_threads=1, **kw)
    return out.getvalue()


SPM_CONFIGS = {
    "identity-bytes-digits": dict(vocab_size=2000, byte_fallback=True, split_digits=True,
                                  normalization_rule_name="identity"),
    "identity-nobytes-cov": dict(vocab_size=2000, byte_fallback=False, split_digits=False,
                                 normalization_rule_name="identity", character_coverage=0.9995),
    "nfkc-bytes-cov": dict(vocab_size=3000, byte_fallback=True, split_digits=True,
                           normalization_rule_name="nmt_nfkc", character_coverage=0.9995),
    "nfkc-nobytes-keepspace": dict(vocab_size=1000, byte_fallback=False,
                                   normalization_rule_name="nmt_nfkc",
                                   remove_extra_whitespaces=False),
    "identity-user-nodummy": dict(vocab_size=1500, byte_fallback=True,
                                  normalization_rule_name="identity", add_dummy_prefix=False,
                                  user_defined_symbols=["<sep>", "foo"]),
}


@pytest.fixture(scope="module")
def spm_models(corpus, tmp_path_factory):
    """{config name: path of a .model trained by sentencepiece} (trained once per module)."""
    folder = tmp_path_factory.mktemp("spm_models")
    train, _ = corpus
    paths = {}
    for name, kw in SPM_CONFIGS.items():
        path = folder / f"{name}.model"
        path.write_bytes(_spm_train(train, **kw))
        paths[name] = path
    return paths


def _assert_same(sp, ours, docs):
    got = ours.encode_batch(docs)
    for doc, ids in zip(docs, got):
        want = sp.encode(doc)
        assert ids == want, (doc, sp.encode(doc, out_type=str), [ours.model.pieces[i] for i in ids])
        assert ours.decode(ids) == sp.decode(want), doc
    return got


@pytest.mark.parametrize("config", list(SPM_CONFIGS))
def test_sentencepiece_trained_models_encode_identically(spm_models, corpus, config):
    _, held = corpus
    path = spm_models[config]
    sp = spm.SentencePieceProcessor(model_file=str(path))
    ours = from_sentencepiece(path)
    assert ours.model.pieces == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    got = _assert_same(sp, ours, held)
    # single-document path agrees with the batch path
    for doc, ids in zip(held[::97], got[::97]):
        assert ours.encode(doc) == ids
        as_array = ours.encode_to_numpy(doc)
        assert as_array.dtype == np.uint32 and as_array.tolist() == ids
    # normalization is SentencePiece's
    for doc in held[::13]:
        assert ours.normalize(doc) == sp.normalize(doc)


def test_unseen_characters_byte_fallback_vs_unk(spm_models):
    text = "Zeichen 😀 und ✈✈ und ꙮ"
    with_bytes = from_sentencepiece(spm_models["identity-bytes-digits"])
    without = from_sentencepiece(spm_models["identity-nobytes-cov"])
    ids = with_bytes.encode(text)
    assert with_bytes.model.unk_id not in ids
    assert with_bytes.decode(ids) == text
    ids2 = without.encode(text)
    assert without.model.unk_id in ids2
    # a run of unknown characters becomes one <unk> (as in sentencepiece)
    sp = spm.SentencePieceProcessor(model_file=str(spm_models["identity-nobytes-cov"]))
    assert ids2 == sp.encode(text)
    assert without.decode(ids2) == sp.decode(ids2)


def test_random_id_sequences_decode_identically(spm_models):
    rng = random.Random(7)
    for config in ("identity-bytes-digits", "identity-nobytes-cov", "identity-user-nodummy",
                   "nfkc-nobytes-keepspace"):
        path = spm_models[config]
        sp = spm.SentencePieceProcessor(model_file=str(path))
        ours = from_sentencepiece(path)
        n = len(ours.model.pieces)
        for _ in range(300):
            ids = [rng.randrange(n) if rng.random() < 0.6 else rng.randrange(min(n, 300))
                   for _ in range(rng.randrange(12))]
            assert ours.decode(ids) == sp.decode(ids), ids
    with pytest.raises(UnknownTokenError):
        ours.decode([n])


def test_modified_models_ties_and_unused(spm_models, corpus):
    """Equal scores (leftmost wins) and UNUSED pieces (resegmented), via our writer."""
    _, held = corpus
    m = spio.read_model(spm_models["identity-bytes-digits"])
    rng = random.Random(1)
    for variant in ("ties", "unused"):
        scores, types = m.scores.copy(), m.types.copy()
        if variant == "ties":
            scores = np.floor(scores / 7).astype(np.float32)
        else:
            for i, p in enumerate(m.pieces):
                if types[i] == spio.NORMAL and len(p) > 1 and rng.random() < 0.15:
                    types[i] = spio.UNUSED
        buf = spio.encode_model(m.pieces, scores, types, m.raw_trainer_spec,
                                m.raw_normalizer_spec)
        sp = spm.SentencePieceProcessor(model_proto=buf)
        _assert_same(sp, from_sentencepiece_bytes(buf), held[::3])


# ---------------------------------------------------------------------- our training


OUR_CONFIGS = {
    "bytes-digits": dict(vocab_size=2000, byte_fallback=True, split_digits=True),
    "nobytes-cov": dict(vocab_size=1200, byte_fallback=False, split_digits=False,
                        character_coverage=0.9995),
    "user-nodummy-keepspace": dict(vocab_size=1500, byte_fallback=True, add_dummy_prefix=False,
                                   remove_extra_whitespaces=False,
                                   user_defined_symbols=["<sep>", "foo"]),
}


@pytest.mark.parametrize("config", list(OUR_CONFIGS))
def test_our_model_exports_and_sentencepiece_agrees(corpus, tmp_path, config):
    train, held = corpus
    kw = OUR_CONFIGS[config]
    tok = train_sentencepiece(train, **kw)
    assert len(tok.model.pieces) == kw["vocab_size"]
    path = tmp_path / "ours.model"
    to_sentencepiece(tok, path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert sp.get_piece_size() == len(tok.model.pieces)
    got = _assert_same(sp, tok, held)
    assert from_sentencepiece(path).encode_batch(held) == got
    # layout: <unk> <s> </s>, [user pieces], [256 bytes], merged pieces, then characters
    assert tok.model.pieces[:3] == ["<unk>", "<s>", "</s>"]
    if kw["byte_fallback"]:
        first = 3 + len(kw.get("user_defined_symbols", ()))
        assert tok.model.pieces[first:first + 256] == [f"<0x{b:02X}>" for b in range(256)]
        assert all(t == spio.BYTE for t in tok.model.types[first:first + 256])
    normal = np.nonzero(tok.model.types == spio.NORMAL)[0]
    assert np.all(np.diff(tok.model.scores[normal]) == -1.0)  # 0, -1, -2, ...
    # pieces never cross a split: "▁" only as a prefix; digits alone when split_digits
    for i in normal:
        p = tok.model.pieces[i]
        assert "▁" not in p[1:]
        if kw.get("split_digits", True) and any(c.isdigit() and c.isascii() for c in p):
            assert len(p) == 1


def test_character_coverage_leaves_rare_characters_to_bytes(corpus):
    train, _ = corpus
    tok = train_sentencepiece(train, vocab_size=1500, character_coverage=0.98)
    singles = {p for p, t in zip(tok.model.pieces, tok.model.types) if t == spio.NORMAL and len(p) == 1}
    chars = {c for line in train for c in line}
    assert len(singles) < len(chars)
    rare = next(c for c in sorted(chars) if c not in singles and c != " ")
    ids = tok.encode(rare)
    assert all(tok.model.types[i] in (spio.BYTE, spio.NORMAL) for i in ids)
    assert tok.decode(ids) == rare


def test_worked_example():
    texts = ["the cat sat on the mat", "the hat is on the cat", "a cat and a hat"] * 20
    tok = train_sentencepiece(texts, vocab_size=3 + 256 + 30)
    pieces = [tok.model.pieces[i] for i in tok.encode("the cat 😀")]
    assert pieces[0].startswith("▁")
    assert "▁cat" in pieces or "▁c" in pieces
    assert pieces[-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    ids = tok.encode("the cat 😀")
    assert [tok.model.pieces[i] for i in ids] == pieces
    assert tok.decode(ids) == "the cat 😀"
    assert tok.normalize("  the   cat ") == "▁the▁cat"


def test_worked_example_matches_sentencepiece(tmp_path):
    texts = ["the cat sat on the mat", "the hat is on the cat", "a cat and a hat"] * 20
    tok = train_sentencepiece(texts, vocab_size=3 + 256 + 30)
    tok.to_sentencepiece(tmp_path / "tiny.model")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "tiny.model"))
    for text in ("the cat 😀", " the  mat ", "cats hats", "Ünïcödé ✓"):
        assert tok.encode(text) == sp.encode(text)
        assert [tok.model.pieces[i] for i in tok.encode(text)] == sp.encode(text, out_type=str)
        assert tok.decode(tok.encode(text)) == sp.decode(sp.encode(text))


def test_training_options_errors():
    with pytest.raises(NotImplementedError):
        train_sentencepiece(["a b"], vocab_size=300, normalization="nmt_nfkc")
    from fastbpe_nb.errors import TrainingError

    with pytest.raises(TrainingError):
        train_sentencepiece(["abcdefg"], vocab_size=260)


def test_pyarrow_input(spm_models):
    pa = pytest.importorskip("pyarrow")
    ours = from_sentencepiece(spm_models["identity-bytes-digits"])
    docs = ["In the beginning", None, "Und 😀"]
    # Nulls stay null (as for every preset); the other rows are encoded as lists would be.
    want = ours.encode_batch([d or "" for d in docs])
    assert ours.encode_batch(pa.array(docs)).to_pylist() == [want[0], None, want[2]]


# ---------------------------------------------------------------------- malformed files


def test_truncated_models_raise(spm_models, tmp_path):
    buf = spm_models["identity-bytes-digits"].read_bytes()
    path = tmp_path / "cut.model"
    cuts = sorted(set(list(range(0, 48)) + list(range(0, len(buf), max(1, len(buf) // 150)))
                      + [len(buf) - k for k in range(1, 40)]))
    for cut in cuts:
        path.write_bytes(buf[:cut])
        with pytest.raises(ModelFormatError) as info:
            from_sentencepiece(path)
        assert str(path) in str(info.value)


def test_random_and_corrupted_bytes_raise(spm_models, tmp_path):
    rng = random.Random(3)
    path = tmp_path / "bad.model"
    buf = spm_models["identity-bytes-digits"].read_bytes()
    for k in range(200):
        if k < 100:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:  # a real model with a few bytes flipped: must load or raise our error
            data = bytearray(buf)
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        path.write_bytes(data)
        try:
            tok = from_sentencepiece(path)
        except ModelFormatError as exc:
            assert str(path) in str(exc)
        else:
            tok.decode(tok.encode("In the beginning 😀"))
    with pytest.raises(FileNotFoundError):
        from_sentencepiece(tmp_path / "missing.model")


def test_wrong_model_type_and_options_raise(corpus, tmp_path):
    train, _ = corpus
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(train[:2000]), model_writer=out,
                                   model_type="unigram", vocab_size=500, minloglevel=2)
    path = tmp_path / "unigram.model"
    path.write_bytes(out.getvalue())
    with pytest.raises(ModelFormatError, match="UNIGRAM"):
        from_sentencepiece(path)
    suffix = _spm_train(train[:2000], vocab_size=500, treat_whitespace_as_suffix=True)
    with pytest.raises(ModelFormatError, match="treat_whitespace_as_suffix"):
        from_sentencepiece_bytes(suffix, "suffix.model")


def _proto(pieces, trainer=None, normalizer=None):
    trainer = trainer if trainer is not None else spio.encode_trainer_spec(
        vocab_size=len(pieces), byte_fallback=False, split_digits=False)
    normalizer = normalizer if normalizer is not None else spio.encode_normalizer_spec()
    return spio.encode_model([p for p, _, _ in pieces], [s for _, s, _ in pieces],
                             [t for _, _, t in pieces], trainer, normalizer)


@pytest.mark.parametrize("pieces, message", [
    ([("a", 0.0, spio.NORMAL)], "unk is not defined"),
    ([("<unk>", 0.0, spio.UNKNOWN), ("a", 0.0, spio.NORMAL), ("a", -1.0, spio.NORMAL)],
     "already defined"),
    ([("<unk>", 0.0, spio.UNKNOWN), ("<0x00>", 0.0, spio.BYTE)], "byte_fallback is false"),
    ([("<unk>", 0.0, spio.UNKNOWN), ("a", float("nan"), spio.NORMAL)], "NaN"),
])
def test_inconsistent_models_raise(pieces, message):
    with pytest.raises(ModelFormatError, match=message):
        from_sentencepiece_bytes(_proto(pieces), "x.model")


def test_missing_byte_pieces_and_specs_raise():
    trainer = spio.encode_trainer_spec(vocab_size=2, byte_fallback=True, split_digits=False)
    with pytest.raises(ModelFormatError, match="256 byte pieces"):
        from_sentencepiece_bytes(_proto([("<unk>", 0.0, spio.UNKNOWN), ("<0x00>", 0.0, spio.BYTE)],
                                        trainer=trainer))
    piece = spio._f_bytes(1, spio._f_bytes(1, "<unk>") + spio._f_varint(3, spio.UNKNOWN))
    with pytest.raises(ModelFormatError, match="trainer_spec is missing"):
        from_sentencepiece_bytes(piece)
    with pytest.raises(ModelFormatError, match="wire type"):
        from_sentencepiece_bytes(spio._key(1, 0) + b"\x01" + piece)
    # a charsmap whose trie size is larger than the blob
    normalizer = spio.encode_normalizer_spec(name="nmt_nfkc",
                                             precompiled_charsmap=struct.pack("<I", 99) + b"ab")
    with pytest.raises(ModelFormatError, match="charsmap"):
        from_sentencepiece_bytes(_proto([("<unk>", 0.0, spio.UNKNOWN)], normalizer=normalizer))


def test_wire_format_round_trip(spm_models):
    path = spm_models["nfkc-bytes-cov"]
    m = spio.read_model(path)
    assert m.model_type == spio.BPE and m.normalizer_name == "nmt_nfkc"
    assert m.byte_fallback and m.split_digits
    tok = from_sentencepiece(path)
    again = spio.parse_model(spio.model_proto(tok))
    assert again.pieces == m.pieces
    assert np.array_equal(again.scores, m.scores) and np.array_equal(again.types, m.types)
    assert again.precompiled_charsmap == m.precompiled_charsmap
    assert isinstance(tok, fb.Tokenizer) and tok.base == "pieces"


# ---------------------------------------------------------------------- property test


@pytest.mark.parametrize("config", ["nfkc-bytes-cov", "identity-nobytes-cov",
                                    "identity-user-nodummy", "nfkc-nobytes-keepspace"])
def test_random_strings_match_sentencepiece(spm_models, config):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    sp = spm.SentencePieceProcessor(model_file=str(spm_models[config]))
    ours = from_sentencepiece(spm_models[config])
    alphabet = list("the andTHEdeun  \t\n▁0123") + [
        "\u0301", "\u0308", "ｶ", "ﾞ", "Ａ", "\u3000", "ﬁ", "①", "😀", "é", "я", "中", "\x01",
        "<sep>", "foo", "\u200b", "\ufeff", "ß", "İ", "ǅ",
    ]

    @hypothesis.settings(max_examples=40 if NOJIT else 100, deadline=None, database=None)
    @hypothesis.given(st.lists(st.sampled_from(alphabet), max_size=25).map("".join))
    def check(text):
        ids = ours.encode(text)
        assert ids == sp.encode(text)
        assert ours.decode(ids) == sp.decode(ids)

    check()


@pytest.mark.slow
def test_bigger_models_encode_identically(corpus, tmp_path):
    train, held = corpus
    big_train = []
    for name in LANGS:
        big_train += _lines(name, 0, 12000)
    for kw in (dict(vocab_size=8000, byte_fallback=True, normalization_rule_name="nmt_nfkc"),
               dict(vocab_size=8000, byte_fallback=False, normalization_rule_name="identity",
                    split_digits=True)):
        buf = _spm_train(big_train, **kw)
        sp = spm.SentencePieceProcessor(model_proto=buf)
        _assert_same(sp, from_sentencepiece_bytes(buf), held + big_train[::50])
    tok = train_sentencepiece(big_train, vocab_size=8000)
    to_sentencepiece(tok, tmp_path / "big.model")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "big.model"))
    _assert_same(sp, tok, held)


def test_dict_input_counts_sentences():
    texts = ["the cat sat on the mat", "the hat is on the cat", "a cat and a hat"]
    a = train_sentencepiece(texts * 20, vocab_size=3 + 256 + 30)
    b = train_sentencepiece({t: 20 for t in texts}, vocab_size=3 + 256 + 30)
    assert a.model.pieces == b.model.pieces
    assert np.array_equal(a.model.scores, b.model.scores)


@pytest.mark.parametrize("config", ["identity-bytes-digits", "nfkc-nobytes-keepspace"])
def test_fastbpe_encode_of_a_sentencepiece_model_gives_its_ids(spm_models, corpus, config, tmp_path):
    # The SentencePiece preset is a Tokenizer: `fastbpe encode` takes its .model (or our
    # model file of it) to Parquet ids and to a .bin whose documents end in </s>, and the
    # ids are sentencepiece's own; a null row stays null in Parquet and is absent in .bin.
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    _, held = corpus
    sp = spm.SentencePieceProcessor(model_file=str(spm_models[config]))
    docs = held[:150] + [None, ""]
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), tmp_path / "in.parquet")
    from_sentencepiece(spm_models[config]).save(tmp_path / "m.json")
    eos = sp.piece_to_id("</s>")
    for model in (spm_models[config], tmp_path / "m.json"):
        for fmt in ("parquet", "bin"):
            out = tmp_path / f"out-{model.name}-{fmt}"
            run = subprocess.run([sys.executable, "-m", "fastbpe_nb", "encode", "--model",
                                  str(model), str(tmp_path / "in.parquet"), "-o", str(out),
                                  "--format", fmt], capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr
            if fmt == "parquet":
                got = pq.read_table(out / "in.parquet").column("ids").to_pylist()
                assert got == [None if d is None else sp.encode(d) for d in docs]
            else:
                ids, _ = fb.read_bin(out / "in.bin")
                assert ids.tolist() == [i for d in docs if d is not None
                                        for i in sp.encode(d) + [eos]]
