"""Token offsets (``encode_with_offsets``, ``encode_batch(return_offsets=True)``,
``decode_with_offsets``): equal to Hugging Face's on the shared corpora for a byte-level
and a SentencePiece-style model, and to a naive reference on every preset."""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from presets import FACTORIES, build

tokenizers = pytest.importorskip("tokenizers")

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
MIXED = ["Héllo wörld 日本語  x", "e\u0301t\u00e9 \ufb01ne \u1100\u1161\u11a8 ok",
         "🎉👍🏽 tabs\tand\nnewlines  ", "", " ", "<|endoftext|>after", "a" * 300]


@functools.cache
def shared_texts() -> tuple[str, ...]:
    files = sorted(CORPORA.glob("*.txt"))
    if not files:
        pytest.skip("the shared corpora are not on this machine")
    return tuple(f.read_text(encoding="utf-8") for f in files)


def shared_docs(join: str) -> list[str]:
    """Documents of 5-7 lines from every shared corpus (every language)."""
    docs = []
    for text in shared_texts():
        lines = text.splitlines()
        docs += [join.join(lines[i:i + 6]) for i in range(0, min(len(lines), 1800), 6)]
    return docs


@functools.cache
def byte_level(normalization=None) -> fb.Tokenizer:
    return fb.train([t[:40000] for t in shared_texts()], vocab_size=600, pattern="gpt2",
                    special_tokens=["<|endoftext|>"], normalization=normalization)


def hf_of(tok, tmp_path):
    path = tmp_path / "tokenizer.json"
    tok.to_huggingface(path)
    return tokenizers.Tokenizer.from_file(str(path))


def char_of_byte(text: str) -> list[int]:
    """The naive map: for every UTF-8 byte of ``text``, the index of its character."""
    return [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")]


def reference_offsets(tok, text: str, ids) -> list[tuple[int, int]]:
    """Byte level, no normalizer: token k spans the characters holding its bytes."""
    owner = char_of_byte(text)
    out, pos = [], 0
    for i in ids:
        n = len(tok.decode_single_token_bytes(i))
        out.append((owner[pos], owner[pos + n - 1] + 1))
        pos += n
    assert pos == len(text.encode("utf-8"))
    return out


@pytest.mark.parametrize("normalization", [None, "NFKC"])
def test_byte_level_equals_hugging_face_on_the_shared_corpora(tmp_path, normalization):
    tok = byte_level(normalization)
    hf = hf_of(tok, tmp_path)
    docs = shared_docs("\n") + MIXED
    ids, offsets = tok.encode_batch(docs, return_offsets=True, allowed_special="all")
    assert len(ids) == len(offsets) == len(docs)
    for doc, got_ids, got in zip(docs, ids, offsets):
        want = hf.encode(doc)
        assert got_ids == want.ids, doc[:60]
        if normalization and doc in COMPOSING:
            continue  # the one deliberate difference: test_composed_characters_cover_their_sources
        assert got == [tuple(o) for o in want.offsets], doc[:60]


#: Texts where NFKC composes several characters into one (e + U+0301 -> é, jamo -> 각).
COMPOSING = {MIXED[1]}


def test_composed_characters_cover_their_sources(tmp_path):
    """A character that NFKC composes from several gets a span over all of them: Hugging
    Face's spans it over the first only, so no token would cover the accent (U+0301)."""
    tok = byte_level("NFKC")
    text = "e\u0301t\u1100\u1161\u11a8"
    ids, spans = tok.encode_with_offsets(text)
    assert {text[a:b] for a, b in spans} == {"e\u0301", "t", "\u1100\u1161\u11a8"}
    hf_spans = hf_of(tok, tmp_path).encode(text).offsets
    assert hf_of(tok, tmp_path).encode(text).ids == ids
    assert {text[a:b] for a, b in hf_spans} == {"e", "t", "\u1100"}  # what HF leaves out


def sentencepiece_as_hugging_face(sp):
    """A ``tokenizers.Tokenizer`` with ``sp``'s pieces and merge order and SentencePiece's
    normalization (strip, collapse spaces, dummy prefix, spaces as ▁), as Llama-style
    tokenizer.json files express it; byte fallback, unknown runs fused."""
    from tokenizers import Regex, models, normalizers

    sp.encode("warm up")  # builds the merge tables
    model = sp.model
    pieces = model.pieces
    merges = [(pieces[a], pieces[b]) for a, b in model.merges.tolist()]
    hf = tokenizers.Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)},
                                         merges=merges, unk_token="<unk>",
                                         byte_fallback=True, fuse_unk=True))
    hf.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex("^ +| +$"), ""), normalizers.Replace(Regex(" {2,}"), " "),
        normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    return hf


def test_sentencepiece_style_equals_hugging_face_on_the_shared_corpora():
    sp = fb.train([t[:30000] for t in shared_texts()], vocab_size=2000, base="chars",
                  whitespace="\u2581", byte_fallback=True)
    hf = sentencepiece_as_hugging_face(sp)
    docs = shared_docs(" ") + ["  lead and trail  ", "in  the   middle", "🎉 日本語 x"]
    ids, offsets = sp.encode_batch(docs, return_offsets=True)
    compared = 0
    for doc, got_ids, got in zip(docs, ids, offsets):
        want = hf.encode(doc)
        assert got_ids == want.ids, doc[:60]  # the same tokenizer, else nothing is compared
        assert got == [tuple(o) for o in want.offsets], doc[:60]
        compared += 1
    assert compared == len(docs) > 500


@pytest.mark.parametrize("name", [n for n, _ in FACTORIES])
def test_every_preset_spans_its_text(name):
    tok = build(name)
    texts = ["Hello world, it's 2026!", "naïve café  über", "the  quick\tbrown\n fox",
             "x", "", "  "]
    ids, offsets = tok.encode_batch(texts, return_offsets=True)
    for text, got_ids, spans in zip(texts, ids, offsets):
        assert got_ids == tok.encode(text)
        assert len(spans) == len(got_ids)
        starts = [a for a, _ in spans]
        ends = [b for _, b in spans]
        assert starts == sorted(starts) and ends == sorted(ends)
        assert all(0 <= a <= b <= len(text) for a, b in spans)
        if tok.level.kind == "bytes" and tok.normalizer.identity:
            assert spans == reference_offsets(tok, text, got_ids)
        if tok.level.kind == "chars":  # each token spells its text, minus the marker
            marker = tok.level.end_of_word or ""
            for i, (a, b) in zip(got_ids, spans):
                assert tok.vocab[i].decode("utf-8").removesuffix(marker) == text[a:b]


def test_cl100k_matches_the_reference_on_every_language():
    tok = build("cl100k-tiktoken")
    docs = shared_docs("\n")[::5] + MIXED
    ids, offsets = tok.encode_batch(docs, return_offsets=True, allowed_special="all")
    for doc, got_ids, got in zip(docs, ids, offsets):
        assert got == reference_offsets(tok, doc, got_ids), doc[:60]


def test_byte_offsets_and_single_text():
    tok = byte_level()
    text = "Héllo 日本<|endoftext|>"
    ids, chars = tok.encode_with_offsets(text, allowed_special="all")
    _, byts = tok.encode_with_offsets(text, allowed_special="all", unit="bytes")
    assert ids == tok.encode(text, allowed_special="all")
    raw = text.encode("utf-8")
    assert b"".join(raw[a:b] for a, b in byts) == raw  # byte spans tile the text
    assert chars[-1] == (len(text) - len("<|endoftext|>"), len(text))
    with pytest.raises(ValueError, match="unit"):
        tok.encode_with_offsets(text, unit="words")
    with pytest.raises(TypeError, match="str"):
        tok.encode_with_offsets(b"bytes")


def test_unknown_runs_get_their_characters():
    tok = build("sp-unk")
    text = "ab \u16a0\u16a1 cd \u2603"  # runes and a snowman: outside the alphabet
    ids, spans = tok.encode_with_offsets(text)
    unk = tok.model.unk_id
    assert unk in ids
    got = [text[a:b] for i, (a, b) in zip(ids, spans) if i == unk]
    assert got == ["\u16a0\u16a1", "\u2603"]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_nfkc_offsets_point_at_their_source(text):
    """With a normalizer, each token's span normalizes to text that contains the token."""
    tok = byte_level("NFKC")
    ids, spans = tok.encode_with_offsets(text, disallowed_special=())
    norm = unicodedata.normalize("NFKC", text)
    assert tok.decode_bytes(ids).decode("utf-8") == norm
    for i, (a, b) in zip(ids, spans):
        piece = tok.decode_single_token_bytes(i)
        source = unicodedata.normalize("NFKC", text[a:b]).encode("utf-8")
        # A byte-level piece of a character is inside that character's normalized bytes.
        assert piece in source or source in piece or not piece.strip(), (text, a, b, piece)


def test_decode_with_offsets():
    tok = byte_level()
    text = "Héllo 日本語 🎉!"
    ids = tok.encode(text)
    decoded, spans = tok.decode_with_offsets(ids)
    assert decoded == text
    assert spans == reference_offsets(tok, text, ids)
    broken, spans = tok.decode_with_offsets(ids[:-2] + [ids[-1]])  # cut into the emoji
    assert len(spans) == len(ids) - 1 and all(0 <= a <= b <= len(broken) for a, b in spans)
    sp = build("sp-byte-fallback")
    ids = sp.encode("hello world")
    decoded, spans = sp.decode_with_offsets(ids)
    assert decoded == sp.decode(ids)
    assert "".join(decoded[a:b] for a, b in spans).replace(" ", "") == decoded.replace(" ", "")


def test_offsets_kernel_reports_a_mismatch():
    """Ids that do not spell their text are refused, not given made-up offsets."""
    from fastbpe_nb.offsets import batch_spans

    tok = byte_level()
    ids = np.array(tok.encode("hello"), dtype=np.int32)
    with pytest.raises(fb.FastBPEError, match="document 0"):
        batch_spans(tok, ["jello"], ids, np.array([0, len(ids)], dtype=np.int64))


def test_offsets_index_the_callers_string_through_surrogates():
    """A str may hold a surrogate pair (joined into one character before encoding) or a
    lone surrogate (U+FFFD): offsets still index the string as given."""
    tok = byte_level()
    text = "a\ud83d\ude00b \udc00x"
    ids, spans = tok.encode_with_offsets(text)
    assert ids == tok.encode(text)
    pieces = [text[a:b] for a, b in spans]
    assert "\ud83d\ude00" in pieces and "\udc00" in pieces
    assert spans[-1] == (6, 7) and spans[0] == (0, 1)
