"""tiktoken and Hugging Face interoperability: round trips, peer parity, malformed files.

* Round trips: ours -> ``.tiktoken`` -> ours and ours -> ``tokenizer.json`` -> ours give the
  same tokenizer (the tiktoken one comes back with ``merge_mode="ranks"``).
* Differential: tokenizers trained by ``fb.train`` (each named pattern) encode held-out
  corpus documents and stdlib sources exactly like ``tiktoken.Encoding`` built from the
  exported ranks file and like ``tokenizers.Tokenizer.from_file`` on the exported JSON.
* A bpeasy-trained vocabulary rewritten with a permuted byte order loads and matches tiktoken.
* Malformed files of every kind raise ModelFormatError naming the file and the entry.

Everything is built from local data: nothing is downloaded. tiktoken's ``load_tiktoken_bpe``
caches every file it reads *by path* in a temp folder (even a local one), so ranks files are
read here with that cache disabled (``TIKTOKEN_CACHE_DIR=""``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import ModelFormatError
from fastbpe_nb.io.huggingface_export import save_huggingface as to_huggingface
from fastbpe_nb.io.tiktoken_format import save_tiktoken as to_tiktoken
from fastbpe_nb.loaders import from_huggingface, from_tiktoken
from fastbpe_nb.reference import bytes_to_unicode

try:
    from . import peers
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    import peers

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
CORPUS_FILES = ("kjv.txt", "fortunes_en.txt", "fortunes_de.txt", "fortunes_ru.txt", "fortunes_zh.txt")
PATTERNS = ("gpt2", "cl100k", "o200k")
STDLIB_FILES = ("textwrap.py", "difflib.py", "json/decoder.py", "string.py")
SPECIALS = ["<|endoftext|>", "<|fim_middle|>"]


# --------------------------------------------------------------------------------------
# data and peers


def _require_corpora():
    if not CORPORA.is_dir():
        pytest.skip(f"sample corpora folder {CORPORA} is absent (only on the team's machines)")


@functools.lru_cache(maxsize=None)
def _docs(name: str, nbytes: int, where: str) -> tuple[str, ...]:
    """Documents of ``nbytes`` of a corpus file, from its start or its middle (held out)."""
    _require_corpora()
    path = CORPORA / name
    if not path.is_file():
        pytest.skip(f"corpus file {path} is absent")
    size = path.stat().st_size
    start = 0 if where == "start" else min(size // 2, max(0, size - nbytes))
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read(nbytes).decode("utf-8", errors="ignore")
    sep = "\n%\n" if "\n%\n" in text else "\n\n"
    return tuple(d for d in text.split(sep) if d)


def training_texts(nbytes: int = 80_000) -> list[str]:
    return [d for name in CORPUS_FILES for d in _docs(name, nbytes, "start")]


def held_out_docs(nbytes: int = 30_000):
    """(source, document) pairs: every held-out document of every corpus file, then stdlib files."""
    for name in CORPUS_FILES:
        for doc in _docs(name, nbytes, "middle"):
            yield name, doc
    for rel in STDLIB_FILES:
        path = Path(sysconfig.get_paths()["stdlib"]) / rel
        if path.is_file():
            yield rel, path.read_text(encoding="utf-8")


def some_docs(n: int) -> list[str]:
    """The first ``n`` held-out documents (a mix of the corpus files)."""
    docs = list(held_out_docs())
    return [doc for _, doc in docs[:: max(1, len(docs) // n)]][:n]


@functools.lru_cache(maxsize=None)
def trained(pattern, vocab_size: int = 3000):
    return fb.train(training_texts(), vocab_size=vocab_size, pattern=pattern, tie_break="ids")


@contextlib.contextmanager
def _no_tiktoken_cache():
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # tiktoken: "" disables its by-path file cache
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


def tiktoken_from_file(path, pattern, special_tokens=None, name="fastbpe_nb_file"):
    """A ``tiktoken.Encoding`` from a ranks file, read by tiktoken's own loader."""
    import tiktoken.load

    with _no_tiktoken_cache():
        ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    return tiktoken.Encoding(name=name, pat_str=peers.pattern_str(pattern), mergeable_ranks=ranks,
                             special_tokens=dict(special_tokens or {}))


def first_difference(a, b) -> int:
    return next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))


def assert_same_ids(ours, theirs, vocab, what):
    if ours != theirs:
        i = first_difference(ours, theirs)
        raise AssertionError(f"{what}: ids differ at token {i}: ours "
                             f"{[vocab[t] for t in ours[i:i + 4]]} vs peer "
                             f"{[vocab[t] for t in theirs[i:i + 4]]}")


def write_ranks(path, ranked: list[tuple[bytes, int]]):
    with open(path, "wb") as f:
        for token, rank in ranked:
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")


# --------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("pattern", PATTERNS + (None,))
def test_tiktoken_round_trip(tmp_path, pattern):
    tok = trained(pattern)
    path = tmp_path / "vocab.tiktoken"
    to_tiktoken(tok, path)
    specials = {t: tok.n_regular + i for i, t in enumerate(SPECIALS)}
    back = from_tiktoken(path, pattern, special_tokens=specials)
    assert back.merge_mode == "ranks" and back.pattern == pattern and back.byte_order is None
    assert back.vocab[: back.n_regular] == tok.vocab
    assert np.array_equal(back.merges, tok.merges)
    assert back.special_tokens == specials
    text = "\n%\n".join(some_docs(200))
    assert back.encode(text) == tok.encode(text)
    assert back.encode("x<|endoftext|>y", allowed_special="all")[-2] == tok.n_regular
    # save -> load -> save gives identical bytes
    to_tiktoken(back, tmp_path / "again.tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("pattern", PATTERNS + (None,))
def test_huggingface_round_trip(tmp_path, pattern):
    base = trained(pattern)
    tok = fb.Tokenizer(base.merges, pattern=pattern, special_tokens=SPECIALS)
    path = tmp_path / "tokenizer.json"
    to_huggingface(tok, path)
    back = from_huggingface(path)
    assert back == tok
    assert back.vocab == tok.vocab and back.merge_mode == "pairs"
    assert from_huggingface(tmp_path) == tok  # a folder holding tokenizer.json
    to_huggingface(back, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_huggingface_round_trip_custom_pattern_and_byte_order(tmp_path):
    base = trained("gpt2")
    order = list(bytes_to_unicode())  # printable bytes first
    remap = {b: i for i, b in enumerate(order)}
    merges = [[remap.get(a, a) if a < 256 else a, remap.get(b, b) if b < 256 else b]
              for a, b in base.merges.tolist()]
    tok = fb.Tokenizer(merges, pattern=r"\w+|\s+|[^\w\s]+", byte_order=order)
    assert tok.vocab[256:] == base.vocab[256:]
    to_huggingface(tok, tmp_path / "t.json")
    back = from_huggingface(tmp_path / "t.json")
    assert back == tok
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    for doc in some_docs(300):
        assert peers.hf_encode(hf, doc) == tok.encode(doc)


# --------------------------------------------------------------------------------------
# differential: our exports read by the peers themselves


@pytest.mark.parametrize("pattern", PATTERNS)
def test_exported_files_encode_like_tiktoken_and_hf(tmp_path, pattern):
    tok = trained(pattern)
    specials = {t: tok.n_regular + i for i, t in enumerate(SPECIALS)}
    tok = fb.Tokenizer(tok.merges, pattern=pattern, special_tokens=specials)
    to_tiktoken(tok, tmp_path / "v.tiktoken")
    to_huggingface(tok, tmp_path / "tokenizer.json")
    enc = tiktoken_from_file(tmp_path / "v.tiktoken", pattern, specials)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ranks_tok = from_tiktoken(tmp_path / "v.tiktoken", pattern, special_tokens=specials)
    vocab = tok.vocab
    n_docs = n_tokens = 0
    for source, doc in held_out_docs():
        ids = tok.encode(doc)
        assert_same_ids(ids, enc.encode_ordinary(doc), vocab, f"{pattern} {source} tiktoken")
        assert_same_ids(ids, peers.hf_encode(hf, doc), vocab, f"{pattern} {source} HF")
        assert_same_ids(ranks_tok.encode(doc), ids, vocab, f"{pattern} {source} from_tiktoken")
        n_docs += 1
        n_tokens += len(ids)
    assert n_docs > 500 and n_tokens > 100_000
    # special tokens: tiktoken with allowed_special="all", HF always splits them out
    text = "Hello<|endoftext|> wor<|fim_middle|>ld 1234567 <|endoftext|>"
    ids = tok.encode(text, allowed_special="all")
    assert ids.count(specials["<|endoftext|>"]) == 2
    assert enc.encode(text, allowed_special="all") == ids
    assert peers.hf_encode(hf, text) == ids
    assert hf.decode(ids, skip_special_tokens=False) == text


# --------------------------------------------------------------------------------------
# tiktoken files made by others


@functools.lru_cache(maxsize=None)
def bpeasy_ranks(pattern: str) -> tuple[tuple[bytes, int], ...]:
    pytest.importorskip("bpeasy")
    texts = training_texts(40_000)
    ranks = peers.bpeasy_train_ranks(texts, 2500, pattern, 10**6)
    if sorted(ranks.values()) != list(range(len(ranks))):
        pytest.skip("bpeasy re-created an existing token (its ranks collide): see peers.py")
    return tuple(sorted(ranks.items(), key=lambda kv: kv[1]))


@pytest.mark.parametrize("pattern", ["cl100k", pytest.param("o200k", marks=pytest.mark.slow)])
def test_bpeasy_file_with_permuted_byte_order_loads_and_matches_tiktoken(tmp_path, pattern):
    ranked = list(bpeasy_ranks(pattern))
    assert len(ranked) > 2000 and all(r == b for (t, r), b in zip(ranked, range(256)) if len(t) == 1)
    plain = tmp_path / "bpeasy.tiktoken"
    import bpeasy

    bpeasy.save_vocab_to_tiktoken(dict(ranked), str(plain))  # bpeasy's own writer (offline)
    tok_plain = from_tiktoken(plain, pattern)
    assert tok_plain.byte_order is None and tok_plain.vocab == [t for t, _ in ranked]
    # Renumber the 256 single bytes in GPT-2's printable-first order; nothing else moves.
    order = list(bytes_to_unicode())
    assert order != list(range(256))
    permuted = [(bytes([order[i]]), i) for i in range(256)] + ranked[256:]
    path = tmp_path / "permuted.tiktoken"
    write_ranks(path, permuted)
    tok = from_tiktoken(path, pattern)
    assert tok.byte_order == order and tok.merge_mode == "ranks"
    assert tok.vocab == [t for t, _ in permuted]
    enc = tiktoken_from_file(path, pattern)
    n = 0
    for source, doc in held_out_docs():
        ids = tok.encode(doc)
        assert_same_ids(ids, enc.encode_ordinary(doc), tok.vocab, f"bpeasy {pattern} {source}")
        assert tok.decode(ids) == doc
        n += len(ids)
    assert n > 100_000
    # The same merges with pair-keyed encoding export to HF with the permuted byte ids.
    pairs = fb.Tokenizer(tok.merges, pattern=pattern, byte_order=tok.byte_order)
    to_huggingface(pairs, tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert hf.get_vocab()[peers.bytes_to_hf(b"!")] == 0
    for doc in some_docs(300):
        assert peers.hf_encode(hf, doc) == tok.encode(doc)


def test_tiktoken_unit_example_rank_keyed(tmp_path):
    """bc (256), ab (257), abc (258): tiktoken joins [a, bc] into abc; so do we."""
    ranked = [(bytes([b]), b) for b in range(256)] + [(b"bc", 256), (b"ab", 257), (b"abc", 258)]
    path = tmp_path / "abc.tiktoken"
    write_ranks(path, ranked)
    tok = from_tiktoken(path, "gpt2")
    enc = tiktoken_from_file(path, "gpt2")
    assert enc.encode_ordinary("abc") == [258]
    assert tok.encode("abc") == [258]
    # tiktoken's own algorithm builds abc from [a, bc] (bc has the lower rank)
    assert tok.merges.tolist() == [[98, 99], [97, 98], [97, 256]]
    for text in ("abcabc", "aabbcc", "cab abc bca", "ab c abcc"):
        assert tok.encode(text) == enc.encode_ordinary(text), text


def test_tiktoken_special_tokens_must_follow_the_ranks(tmp_path):
    path = tmp_path / "v.tiktoken"
    to_tiktoken(trained("gpt2"), path)
    n = trained("gpt2").n_regular
    # A rank's id cannot be a special token's; ids after the ranks may leave gaps (cl100k).
    with pytest.raises(ValueError, match="right after"):
        from_tiktoken(path, "gpt2", special_tokens={"<|endoftext|>": n - 1})
    gap = from_tiktoken(path, "gpt2", special_tokens={"<|endoftext|>": n + 1})
    assert gap.vocab_size == n + 2 and gap.unused_ids == [n]
    assert from_tiktoken(path, "gpt2", special_tokens=["<|a|>", "<|b|>"]).special_tokens == {
        "<|a|>": n, "<|b|>": n + 1}


def test_tiktoken_save_rejects_char_mode(tmp_path):
    tok = fb.train(["low lower lowest newer wider"] * 5, vocab_size=30, base="chars",
                   end_of_word="</w>", pattern="default")
    with pytest.raises(ValueError, match="char-mode"):
        to_tiktoken(tok, tmp_path / "x.tiktoken")
    with pytest.raises(ValueError, match="char-mode"):
        to_huggingface(tok, tmp_path / "x.json")
    assert not list(tmp_path.iterdir())  # nothing half-written


# --------------------------------------------------------------------------------------
# malformed tiktoken files


def _base_lines() -> list[bytes]:
    ranked = [(bytes([b]), b) for b in range(256)] + [(b"ab", 256), (b"abc", 257), (b"cd", 258)]
    return [base64.b64encode(t) + b" " + str(r).encode() for t, r in ranked]


def _mutate_tiktoken(kind: str) -> tuple[bytes, str | None]:
    """(file contents, expected entry) for one kind of damage."""
    lines = _base_lines()
    if kind == "truncated":  # cut in the middle of the last line
        data = b"\n".join(lines)
        return data[:-3], f"line {len(lines)}"
    if kind == "bad base64":
        lines[100] = b"YW*= 100"
        return b"\n".join(lines) + b"\n", "line 101"
    if kind == "bad padding":
        lines[257] = b"YWJj 999"[:3] + b" 257"
        return b"\n".join(lines) + b"\n", "line 258"
    if kind == "duplicate rank":
        lines[258] = lines[258].replace(b" 258", b" 257")
        return b"\n".join(lines) + b"\n", "line 259"
    if kind == "duplicate token":
        lines[258] = base64.b64encode(b"ab") + b" 258"
        return b"\n".join(lines) + b"\n", "line 259"
    if kind == "gap":
        lines[257] = lines[257].replace(b" 257", b" 300")
        return b"\n".join(lines) + b"\n", "line 258"  # the line with the out-of-range rank
    if kind == "non-integer rank":
        lines[3] = lines[3].replace(b" 3", b" 3.0")
        return b"\n".join(lines) + b"\n", "line 4"
    if kind == "negative rank":
        lines[258] = lines[258].replace(b" 258", b" -1")
        return b"\n".join(lines) + b"\n", "line 259"
    if kind == "missing single byte":
        del lines[0x41]
        lines = [ln.rsplit(b" ", 1)[0] + b" " + str(i).encode() for i, ln in enumerate(lines)]
        return b"\n".join(lines) + b"\n", "single bytes"
    if kind == "single byte ranked late":
        lines[0x41], lines[256] = (base64.b64encode(b"ab") + b" 65",
                                   base64.b64encode(b"A") + b" 256")
        return b"\n".join(lines) + b"\n", "line 257"
    if kind == "unreachable token":  # 'xyz' with neither 'xy' nor 'yz' below it
        lines.append(base64.b64encode(b"xyz") + b" 259")
        return b"\n".join(lines) + b"\n", "line 260"
    if kind == "empty":
        return b"\n\n", None
    if kind == "three fields":
        lines[10] += b" extra"
        return b"\n".join(lines) + b"\n", "line 11"
    raise AssertionError(kind)


TIKTOKEN_DAMAGE = ("truncated", "bad base64", "bad padding", "duplicate rank", "duplicate token",
                   "gap", "non-integer rank", "negative rank", "missing single byte",
                   "single byte ranked late", "unreachable token", "empty", "three fields")


@pytest.mark.parametrize("kind", TIKTOKEN_DAMAGE)
def test_malformed_tiktoken_file(tmp_path, kind):
    data, entry = _mutate_tiktoken(kind)
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError) as info:
        from_tiktoken(path, "gpt2")
    err = info.value
    assert err.path == str(path), str(err)
    assert err.entry == entry, str(err)
    assert str(path) in str(err)


def test_undamaged_base_file_loads(tmp_path):
    path = tmp_path / "ok.tiktoken"
    path.write_bytes(b"\n".join(_base_lines()) + b"\n")
    tok = from_tiktoken(path, "gpt2")
    assert tok.encode("abcd") == tiktoken_from_file(path, "gpt2").encode_ordinary("abcd") == [257, 100]


# --------------------------------------------------------------------------------------
# malformed / unsupported Hugging Face files


@functools.lru_cache(maxsize=None)
def _small_hf_json() -> str:
    merges = [(97, 98), (256, 99), (99, 100), (32, 257)]
    tok = fb.Tokenizer(merges, pattern="cl100k", special_tokens=["<|endoftext|>"])
    from fastbpe_nb.io.huggingface_export import huggingface_json

    return huggingface_json(tok)


def _mutate_hf(kind: str):
    doc = json.loads(_small_hf_json())
    model = doc["model"]
    entry = None
    if kind == "truncated":
        return _small_hf_json()[:-200], None
    if kind == "non-BPE model":
        model["type"] = "WordPiece"
        entry = "model.type"
    elif kind == "normalizer":
        doc["normalizer"] = {"type": "Lowercase"}  # NFC and NFKC are supported
        entry = "normalizer"
    elif kind == "continuing_subword_prefix":
        model["continuing_subword_prefix"] = "##"
        entry = "model.continuing_subword_prefix"
    elif kind == "end_of_word_suffix":
        model["end_of_word_suffix"] = "</w>"
        entry = "model.end_of_word_suffix"
    elif kind == "dropout":
        model["dropout"] = 0.1
        entry = "model.dropout"
    elif kind == "byte_fallback":
        model["byte_fallback"] = True
        entry = "model.byte_fallback"
    elif kind == "ignore_merges":
        model["ignore_merges"] = True
        entry = "model.ignore_merges"
    elif kind == "ids not our layout":
        ab, abc = model["vocab"]["ab"], model["vocab"]["abc"]
        model["vocab"]["ab"], model["vocab"]["abc"] = abc, ab
        entry = "model.merges[1]"
    elif kind == "missing byte":
        del model["vocab"][peers.bytes_to_hf(b"\x00")]
        entry = "model.vocab"
    elif kind == "token not made by a merge":
        del model["merges"][-1]
        entry = "model.vocab"
    elif kind == "merge result not in vocab":
        model["merges"].append(["a", "a"])
        entry = f"model.merges[{len(model['merges']) - 1}]"
    elif kind == "non-byte-level token":
        model["vocab"]["ab€"] = model["vocab"].pop("<|endoftext|>")
        doc["added_tokens"] = []
        entry = "model.vocab['ab€']"
    elif kind == "no pre_tokenizer":
        doc["pre_tokenizer"] = None
        entry = "pre_tokenizer"
    elif kind == "add_prefix_space":
        doc["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
        entry = "pre_tokenizer.pretokenizers[1]"
    elif kind == "Split behavior":
        doc["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"
        entry = "pre_tokenizer.pretokenizers[0]"
    elif kind == "post_processor":
        doc["post_processor"] = {"type": "TemplateProcessing", "single": [], "pair": [],
                                 "special_tokens": {}}
        entry = "post_processor"
    elif kind == "decoder":
        doc["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
        entry = "decoder"
    elif kind == "non-special added token":
        doc["added_tokens"][0]["special"] = False
        entry = "added_tokens[0]"
    elif kind == "special not after regular":
        # A regular token's id (an id after the regular ones is allowed, gaps included).
        doc["added_tokens"][0]["id"] = 100
        model["vocab"]["<|endoftext|>"] = 100
        entry = "added_tokens"
    elif kind == "duplicate merge":
        model["merges"].append(model["merges"][0])
        entry = f"model.merges[{len(model['merges']) - 1}]"
    else:
        raise AssertionError(kind)
    return json.dumps(doc, ensure_ascii=False), entry


HF_DAMAGE = ("truncated", "non-BPE model", "normalizer", "continuing_subword_prefix",
             "end_of_word_suffix", "dropout", "byte_fallback", "ignore_merges",
             "ids not our layout", "missing byte", "token not made by a merge",
             "merge result not in vocab", "non-byte-level token", "no pre_tokenizer",
             "add_prefix_space", "Split behavior", "post_processor", "decoder",
             "non-special added token", "special not after regular", "duplicate merge")


@pytest.mark.parametrize("kind", HF_DAMAGE)
def test_malformed_or_unsupported_tokenizer_json(tmp_path, kind):
    text, entry = _mutate_hf(kind)
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ModelFormatError) as info:
        from_huggingface(path)
    err = info.value
    assert err.path == str(path), str(err)
    assert err.entry == entry, str(err)
    if kind not in ("truncated", "merge result not in vocab", "duplicate merge"):
        assert "unsupported" in str(err), str(err)


def test_small_tokenizer_json_is_valid_for_hf(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(_small_hf_json(), encoding="utf-8")
    tok = from_huggingface(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    text = "abcd abc ab<|endoftext|>cd"
    assert peers.hf_encode(hf, text) == tok.encode(text, allowed_special="all")


def test_huggingface_save_rejects_ranks_mode_and_unportable_pattern(tmp_path):
    path = tmp_path / "v.tiktoken"
    to_tiktoken(trained("gpt2"), path)
    with pytest.raises(ValueError, match="merge_mode='pairs'"):
        to_huggingface(from_tiktoken(path, "gpt2"), tmp_path / "t.json")
    with pytest.raises(ValueError, match="possessive interval"):
        to_huggingface(fb.Tokenizer([], pattern=r"\d{1,3}+|\D+"), tmp_path / "t.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.tiktoken"]


# --------------------------------------------------------------------------------------
# Hugging Face files made by HF itself


def test_hf_trained_tokenizer_json_loads_and_encodes_identically(tmp_path):
    texts = training_texts(20_000)
    hf = peers.hf_train_tokenizer(texts, 1200, "cl100k")
    hf.add_special_tokens(["<|endoftext|>"])
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = from_huggingface(path)
    assert tok.pattern == "cl100k"  # HF's file holds the {1,3} variant (see peers.hf_pattern)
    assert tok.byte_order == sorted(range(256), key=lambda b: ord(peers.BYTE_TO_CHAR[b]))
    assert tok.special_tokens == {"<|endoftext|>": 1200}
    for source, doc in held_out_docs(10_000):
        assert_same_ids(tok.encode(doc), peers.hf_encode(hf, doc), tok.vocab, source)
    text = "in 1234567 days<|endoftext|>"
    assert tok.encode(text, allowed_special="all") == peers.hf_encode(hf, text)


def test_hf_byte_level_use_regex_is_gpt2(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    base = trained("gpt2")
    vocab = {peers.bytes_to_hf(t): i for i, t in enumerate(base.vocab)}
    merges = [(peers.bytes_to_hf(base.vocab[a]), peers.bytes_to_hf(base.vocab[b]))
              for a, b in base.merges.tolist()]
    hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # use_regex=True
    hf.decoder = decoders.ByteLevel()
    hf.save(str(tmp_path / "tokenizer.json"))
    tok = from_huggingface(tmp_path / "tokenizer.json")
    assert tok.pattern == "gpt2" and tok == base
    for source, doc in held_out_docs(10_000):
        assert_same_ids(tok.encode(doc), peers.hf_encode(hf, doc), tok.vocab, source)


def test_oniguruma_possessive_interval_is_read_as_hf_reads_it(tmp_path):
    """A file with cl100k's literal ``{1,3}+``: HF takes whole digit runs, and so must we."""
    tok = fb.Tokenizer([(49, 50), (256, 51), (257, 257)], pattern="cl100k")  # 12 123 123123
    to_huggingface(tok, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    split = doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]
    assert split["Regex"] == fb.NAMED_PATTERNS["cl100k"].replace("{1,3}+", "{1,3}")
    split["Regex"] = fb.NAMED_PATTERNS["cl100k"]
    (tmp_path / "raw.json").write_text(json.dumps(doc), encoding="utf-8")
    raw = from_huggingface(tmp_path / "raw.json")
    assert raw.pattern != "cl100k" and r"(?:\p{N}{1,3})+" in raw.pattern
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "raw.json"))
    text = "in 1234567 days, 12 or 123123"
    assert raw.encode(text) == peers.hf_encode(hf, text)
    assert raw.encode(text)[-1] == 258  # '123123' is one pre-token, as in HF
    assert tok.encode(text)[-2:] == [257, 257]  # cl100k proper cuts digits in threes


# --------------------------------------------------------------------------------------
# GPT-2 style vocab.json + merges.txt


def write_gpt2_files(folder: Path, tok, endoftext="<|endoftext|>"):
    """GPT-2's layout: the bytes in GPT-2 character order, the merges, then <|endoftext|>."""
    order = list(bytes_to_unicode())  # GPT-2 numbers byte b by its character's code point
    id_of = {b: i for i, b in enumerate(order)}
    vocab_b = tok.vocab[: tok.n_regular]
    vocab = {peers.bytes_to_hf(bytes([b])): id_of[b] for b in range(256)}
    for i in range(256, len(vocab_b)):
        vocab[peers.bytes_to_hf(vocab_b[i])] = i
    vocab[endoftext] = len(vocab_b)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    lines = ["#version: 0.2"] + [f"{peers.bytes_to_hf(vocab_b[a])} {peers.bytes_to_hf(vocab_b[b])}"
                                 for a, b in tok.merges.tolist()]
    (folder / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return order


@pytest.mark.parametrize("n_merges", [2000, pytest.param(50_000, marks=pytest.mark.slow)])
def test_gpt2_vocab_and_merges_layout(tmp_path, n_merges):
    nbytes = 80_000 if n_merges < 10_000 else 1_500_000
    texts = [d for name in CORPUS_FILES for d in _docs(name, nbytes, "start")]
    base = fb.train(texts, vocab_size=256 + n_merges, pattern="gpt2", tie_break="hf")
    assert len(base.merges) == n_merges and base.n_regular == 256 + n_merges
    order = write_gpt2_files(tmp_path, base)
    tok = from_huggingface(tmp_path / "vocab.json")
    assert tok.vocab_size == 256 + n_merges + 1
    assert tok.special_tokens == {"<|endoftext|>": 256 + n_merges}
    assert tok.byte_order == order and tok.pattern == "gpt2" and tok.merge_mode == "pairs"
    assert tok.vocab[256:] == base.vocab[256:] + [b"<|endoftext|>"]
    assert from_huggingface(tmp_path) == tok
    assert from_huggingface(tmp_path / "vocab.json", merges=tmp_path / "merges.txt") == tok
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    hf = Tokenizer(models.BPE.from_file(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    for source, doc in held_out_docs(10_000):
        ids = tok.encode(doc)
        assert_same_ids(ids, peers.hf_encode(hf, doc), tok.vocab, source)
        assert tok.decode(ids) == doc
    # a merges.txt line that is damaged names merges.txt and the line
    lines = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n")
    lines[5] = lines[5].replace(" ", "")
    (tmp_path / "merges.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ModelFormatError) as info:
        from_huggingface(tmp_path / "vocab.json")
    assert info.value.path == str(tmp_path / "merges.txt") and info.value.entry == "line 6"


def test_gpt2_vocab_json_without_merges_txt(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0}), encoding="utf-8")
    with pytest.raises(ModelFormatError, match="merges.txt not found"):
        from_huggingface(tmp_path / "vocab.json")


# --------------------------------------------------------------------------------------
# a big tiktoken file


@pytest.mark.slow
def test_load_100k_tiktoken_file(tmp_path):
    texts = [d for name in CORPUS_FILES for d in _docs(name, 10**8, "start")]
    base = fb.train(texts, vocab_size=100_256, pattern="o200k")
    assert base.n_regular == 100_256
    path = tmp_path / "big.tiktoken"
    to_tiktoken(base, path)
    t0 = time.perf_counter()
    tok = from_tiktoken(path, "o200k")
    seconds = time.perf_counter() - t0
    print(f"\nfrom_tiktoken: {tok.n_regular} ranks loaded in {seconds:.2f} s")
    assert tok.vocab == base.vocab and np.array_equal(tok.merges, base.merges)
    enc = tiktoken_from_file(path, "o200k")
    for source, doc in held_out_docs(30_000):
        assert_same_ids(tok.encode(doc), enc.encode_ordinary(doc), tok.vocab, source)
