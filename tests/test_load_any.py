"""``fb.load(path)``: every format fastbpe_nb reads, recognised by content (names that say
otherwise are ignored), folders, and the errors for anything else."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

import fastbpe_nb as fb
import presets

DOCS = ["Hello world, it's 2024! naïve café 😀", "Grüße aus Köln", "Привет, мир", "日本語"]


def same_ids(a: fb.Tokenizer, b: fb.Tokenizer) -> bool:
    return all(a.encode(d) == b.encode(d) for d in DOCS)


@pytest.fixture(scope="module")
def gpt2():
    return presets.gpt2_bytes()


def test_our_model_files_by_content(gpt2, tmp_path):
    for name, tok in (("bytes", gpt2), ("chars", presets.chars_eow()),
                      ("pieces", presets.sp_byte_fallback())):
        path = tmp_path / f"{name}.bin"  # no .json: the content decides
        tok.save(path)
        assert fb.load(path) == tok, name


def test_huggingface_files_by_content(gpt2, tmp_path):
    gpt2.to_huggingface(tmp_path / "exported.dat")
    back = fb.load(tmp_path / "exported.dat")
    assert back == gpt2
    assert same_ids(back, gpt2)
    # GPT-2's vocab.json + merges.txt, from the tokenizer.json's model.
    model = json.loads((tmp_path / "exported.dat").read_text(encoding="utf-8"))["model"]
    gpt2_dir = tmp_path / "gpt2"
    gpt2_dir.mkdir()
    vocab = dict(model["vocab"])
    (gpt2_dir / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (gpt2_dir / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in model["merges"]), encoding="utf-8")
    for path in (gpt2_dir, gpt2_dir / "vocab.json", gpt2_dir / "merges.txt"):
        tok = fb.load(path)
        assert tok.merges.tolist() == gpt2.merges.tolist() and same_ids(tok, gpt2), path
        assert tok.special_tokens == gpt2.special_tokens


def test_a_merges_txt_needs_its_vocab_json(gpt2, tmp_path):
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ t\nh e\n", encoding="utf-8")
    with pytest.raises(fb.ModelFormatError, match="vocab.json") as info:
        fb.load(tmp_path / "merges.txt")
    assert info.value.path == str(tmp_path / "merges.txt")


def test_save_pretrained_folder(gpt2, tmp_path):
    tok = gpt2.with_roles(eos="<|endoftext|>", chat_template="{{ messages }}")
    tok.save_pretrained(tmp_path / "hf")
    back = fb.load(tmp_path / "hf")
    assert back == tok and back.roles == tok.roles
    assert fb.load(tmp_path / "hf" / "tokenizer.json").roles == tok.roles


def test_tiktoken_files(gpt2, tmp_path):
    pairs = fb.Tokenizer(gpt2.merges, pattern="gpt2")
    pairs.to_tiktoken(tmp_path / "small.tiktoken")
    with pytest.raises(fb.ModelFormatError, match=r"pattern.*from_tiktoken") as info:
        fb.load(tmp_path / "small.tiktoken")
    assert info.value.path == str(tmp_path / "small.tiktoken")
    tok = fb.load(tmp_path / "small.tiktoken", pattern="r50k_base",
                  special_tokens=["<|endoftext|>"])
    assert tok.merge_mode == "ranks" and tok.pattern == "gpt2" and same_ids(tok, pairs)
    assert tok.eos_token == "<|endoftext|>"
    # Gzipped, under a name that says nothing.
    (tmp_path / "ranks.bin").write_bytes(gzip.compress((tmp_path / "small.tiktoken").read_bytes()))
    assert fb.load(tmp_path / "ranks.bin", pattern="gpt2") == fb.from_tiktoken(
        tmp_path / "small.tiktoken", "gpt2")
    assert fb.from_tiktoken(tmp_path / "ranks.bin", "gpt2") == fb.from_tiktoken(
        tmp_path / "small.tiktoken", "gpt2")


@pytest.mark.parametrize("name, expected", [("cl100k_base", "cl100k"), ("o200k_base", "o200k"),
                                            ("r50k_base", "gpt2"), ("p50k_base", "gpt2"),
                                            ("CL100K", "cl100k")])
def test_from_tiktoken_takes_tiktoken_encoding_names(gpt2, tmp_path, name, expected):
    fb.Tokenizer(gpt2.merges, pattern="gpt2").to_tiktoken(tmp_path / "small.tiktoken")
    assert fb.from_tiktoken(tmp_path / "small.tiktoken", pattern=name).pattern == expected


def test_openai_ranks_files_load_as_tiktoken_does():
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None:
        pytest.skip("bpe-openai (which ships the real ranks files) is not installed")
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz"
    tok = fb.load(path)  # gzipped, no pattern given: recognised by its SHA-256
    assert tok == presets.cl100k_tiktoken()
    assert tok.special_tokens == presets.CL100K_SPECIALS and tok.pattern == "cl100k"
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding("cl100k_base", pat_str=fb.NAMED_PATTERNS["cl100k"],
                            mergeable_ranks={t: i for i, t in enumerate(tok.vocab[:tok.n_regular])},
                            special_tokens=presets.CL100K_SPECIALS)
    for doc in DOCS + ["<|endoftext|> and <|fim_prefix|>"]:
        assert tok.encode(doc, allowed_special="all") == enc.encode(doc, allowed_special="all")


def test_sentencepiece_model_by_content(tmp_path):
    sp = presets.sp_unk()
    sp.to_sentencepiece(tmp_path / "sp.bin")
    assert fb.load(tmp_path / "sp.bin") == sp
    folder = tmp_path / "spdir"
    folder.mkdir()
    sp.to_sentencepiece(folder / "tokenizer.model")
    assert fb.load(folder) == sp


def test_folder_with_our_model_file(gpt2, tmp_path):
    gpt2.save(tmp_path / "fastbpe_model.json")
    assert fb.load(tmp_path) == gpt2


@pytest.mark.parametrize("content, detail", [
    (b"", "the file is empty"),
    (b"hello there\nthis is plain text\n", "its first line is 'hello there'"),
    (b"\xff\xfe\x00junk", "not UTF-8"),
    (b"   \n\t\n", "only whitespace"),
])
def test_unknown_files_name_every_format(tmp_path, content, detail):
    path = tmp_path / "mystery"
    path.write_bytes(content)
    with pytest.raises(fb.ModelFormatError) as info:
        fb.load(path)
    message = str(info.value)
    assert info.value.path == str(path) and detail in message
    for loader in ("fb.Tokenizer.save", "fb.from_huggingface", "merges.txt",
                   "fb.from_tiktoken", "fb.from_sentencepiece"):
        assert loader in message


def test_empty_folder_names_what_it_looked_for(tmp_path):
    with pytest.raises(fb.ModelFormatError, match="tokenizer.json.*vocab.json.*tokenizer.model"):
        fb.load(tmp_path)


def test_malformed_files_of_a_recognised_kind(gpt2, tmp_path):
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"not a ranks file\n"))
    with pytest.raises(fb.ModelFormatError) as info:
        fb.load(tmp_path / "bad.gz", pattern="gpt2")
    assert info.value.path == str(tmp_path / "bad.gz")
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"IQ== 0\n" * 100)[:-12])
    with pytest.raises(fb.ModelFormatError, match="gzip"):
        fb.load(tmp_path / "cut.gz", pattern="gpt2")
    (tmp_path / "cut.json").write_text('{"model": {"type": "BPE", "vocab": {', encoding="utf-8")
    with pytest.raises(fb.ModelFormatError, match="JSON"):
        fb.load(tmp_path / "cut.json")
    gpt2.save(tmp_path / "m.json")
    with pytest.raises(fb.ModelFormatError, match="pattern= and special_tokens="):
        fb.load(tmp_path / "m.json", pattern="gpt2")


def test_gzip_bomb_is_refused(tmp_path, monkeypatch):
    import fastbpe_nb.io.tiktoken_format as tf

    monkeypatch.setattr(tf, "MAX_INFLATED_BYTES", 1000)
    (tmp_path / "big.gz").write_bytes(gzip.compress(b"IQ== 0\n" * 1000))
    with pytest.raises(fb.ModelFormatError, match="inflates beyond"):
        fb.load(tmp_path / "big.gz", pattern="gpt2")


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        fb.load(tmp_path / "nope")
