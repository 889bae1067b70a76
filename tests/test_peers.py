"""Differential tests against the peers: Hugging Face ``tokenizers``, ``bpeasy``, ``tiktoken``.

* Training parity: ``tie_break="hf"`` merges == HF ``BpeTrainer``'s merges, ``tie_break="ids"``
  new tokens == bpeasy's, first for ``fastbpe_nb.reference`` (the specification) on small
  samples, then for ``fastbpe_nb.train`` at larger sizes, and ``fb.train`` == ``reference.train``
  for all four tie rules.
* Encode parity: a tokenizer trained by ``fb.train`` encodes held-out text to the same ids as
  tiktoken built from its vocabulary and as HF built from its merges.

The peers' conventions (vocab_size counting, strict max_token_length, id numbering, ...)
are documented in ``tests/peers.py``. The corpora come from ``/work/shared/corpora`` (absent
in a user's clone: those tests skip); the synthetic corpora are built here.
"""

from __future__ import annotations

import functools
import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from fastbpe_nb import reference as R

try:
    from . import peers
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    import peers

pytest.importorskip("tokenizers")
pytest.importorskip("bpeasy")
pytest.importorskip("tiktoken")

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
LANG_FILES = ("kjv.txt", "fortunes_de.txt", "fortunes_ru.txt", "fortunes_zh.txt")
ALL_FILES = LANG_FILES + ("fortunes_en.txt",)
PATTERNS = ("gpt2", "cl100k", "o200k")
TIE_RULES = ("ids", "hf", "first", "bytes")
NO_LIMIT = 10**6  # bpeasy's max_token_length when we want none

SMALL_BYTES = 20_000  # reference-sized sample of each language
SMALL_MERGES = 200


# --------------------------------------------------------------------------------------
# data


def _require_corpora():
    if not CORPORA.is_dir():
        pytest.skip(f"sample corpora folder {CORPORA} is absent (only on the dev machine)")


@functools.lru_cache(maxsize=None)
def sample(name: str, nbytes: int, start: int = 0) -> tuple[str, ...]:
    """Documents from ``nbytes`` of corpus file ``name`` starting at byte ``start``."""
    _require_corpora()
    path = CORPORA / name
    if not path.is_file():
        pytest.skip(f"corpus file {path} is absent")
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(nbytes)
    text = data.decode("utf-8", errors="ignore")  # cut partial characters at both ends
    sep = "\n%\n" if "\n%\n" in text else "\n\n"
    docs = tuple(d for d in text.split(sep) if d)
    assert sum(map(len, docs)) > nbytes // 8, f"sample of {name} unexpectedly small"
    return docs


def held_out(name: str, nbytes: int = 40_000) -> str:
    """Text from the middle of a corpus file (never part of a training sample here)."""
    _require_corpora()
    size = (CORPORA / name).stat().st_size
    start = min(size // 2, max(0, size - nbytes))
    return "\n%\n".join(sample(name, nbytes, start))


STDLIB_FILES = ("textwrap.py", "difflib.py", "json/decoder.py", "argparse.py", "string.py")


def stdlib_text(rel: str) -> str:
    path = Path(sysconfig.get_paths()["stdlib"]) / rel
    if not path.is_file():
        pytest.skip(f"stdlib source {path} is absent")
    return path.read_text(encoding="utf-8")


def synthetic(seed: int, n_docs: int = 40) -> list[str]:
    """A tie-heavy corpus: few distinct characters (ASCII, Cyrillic, CJK, euro sign, so the
    ``hf`` byte order differs from byte-value order), short words, many equal pair counts."""
    rng = random.Random(seed)
    alphabets = ["ab", "abc", "aж中", "ab€ж", "a1b"]
    letters = alphabets[seed % len(alphabets)]
    seps = [" ", " ", " ", "  ", "\n", ", ", " '"]
    docs = []
    for _ in range(n_docs):
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append("".join(rng.choice(letters) for _ in range(rng.randint(1, 7))))
            parts.append(rng.choice(seps))
        docs.append("".join(parts))
    return docs


# --------------------------------------------------------------------------------------
# helpers


def merge_bytes(token_bytes, merges) -> list[tuple[bytes, bytes]]:
    return [(bytes(token_bytes[int(a)]), bytes(token_bytes[int(b)])) for a, b in merges]


def first_duplicate(merges_b: list[tuple[bytes, bytes]]) -> int | None:
    """Index of the first merge whose result already existed (None: no such merge)."""
    seen = {bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges_b):
        if a + b in seen:
            return i
        seen.add(a + b)
    return None


def new_tokens(merges_b) -> list[bytes]:
    """The merged tokens in creation order (a re-created token is not new)."""
    seen = {bytes([b]) for b in range(256)}
    out = []
    for a, b in merges_b:
        if a + b not in seen:
            seen.add(a + b)
            out.append(a + b)
    return out


def assert_same_merges(ours, theirs, what: str, min_len: int):
    """Merges equal, with a readable first difference; ``ours`` long enough to mean something."""
    assert len(ours) >= min_len, f"{what}: only {len(ours)} merges (expected >= {min_len})"
    if ours == theirs:
        return
    n = min(len(ours), len(theirs))
    i = next((k for k in range(n) if ours[k] != theirs[k]), n)
    raise AssertionError(
        f"{what}: merges differ at rank {i} of {len(ours)} (peer has {len(theirs)}): "
        f"ours {ours[i:i + 3]} vs peer {theirs[i:i + 3]}"
    )


def assert_same_tokens(ours, theirs, what: str, min_len: int):
    assert len(ours) >= min_len, f"{what}: only {len(ours)} tokens (expected >= {min_len})"
    if ours == theirs:
        return
    n = min(len(ours), len(theirs))
    i = next((k for k in range(n) if ours[k] != theirs[k]), n)
    raise AssertionError(
        f"{what}: tokens differ at index {i} of {len(ours)} (peer has {len(theirs)}): "
        f"ours {ours[i:i + 3]} vs peer {theirs[i:i + 3]}"
    )


@functools.lru_cache(maxsize=None)
def ref_model(texts: tuple[str, ...], pattern: str, tie_break: str, vocab_size: int,
              max_token_length: int | None = None, min_frequency: int = 0):
    return R.train(list(texts), vocab_size=vocab_size, pattern=pattern, tie_break=tie_break,
                   max_token_length=max_token_length, min_frequency=min_frequency)


def _fb():
    import fastbpe_nb as fb

    if not hasattr(fb, "train"):
        pytest.skip("fastbpe_nb.train is not implemented yet")
    return fb


def fb_train(texts, **kwargs):
    return _fb().train(list(texts), **kwargs)


def fb_merge_bytes(tok) -> list[tuple[bytes, bytes]]:
    merges = np.asarray(tok.merges)
    assert merges.dtype == np.int32 and merges.ndim == 2 and merges.shape[1] == 2
    return merge_bytes(tok.vocab, merges.tolist())


def compare_with_hf(merges_b, texts, vocab_size, pattern, what, min_len, **hf_kwargs):
    """``merges_b`` (ours) == HF's, compared up to and including our first duplicate-result
    merge (after it HF's lazy heap is no longer exact: see peers.py)."""
    hf = peers.hf_train(texts, vocab_size, pattern, **hf_kwargs)
    dup = first_duplicate(merges_b)
    if dup is not None:
        merges_b, hf = merges_b[: dup + 1], hf[: dup + 1]
        min_len = min(min_len, dup + 1)
    assert_same_merges(merges_b, hf, what, min_len)


def compare_with_bpeasy(merges_b, texts, vocab_size, pattern, what, min_len, max_token_length=None):
    """The new tokens of ``merges_b`` (ours, ids rule) == bpeasy's tokens in rank order.

    bpeasy mishandles a merge that re-creates an existing token (see peers.py); if our merges
    have one, only the tokens before it are compared, using bpeasy's raw ranks.
    """
    ours = new_tokens(merges_b)
    bp_mtl = NO_LIMIT if max_token_length is None else max_token_length + 1
    dup = first_duplicate(merges_b)
    if dup is None:
        theirs = peers.bpeasy_train(texts, vocab_size, pattern, bp_mtl)
    else:
        ranks = peers.bpeasy_train_ranks(texts, vocab_size, pattern, bp_mtl)
        theirs = [t for t, r in sorted(ranks.items(), key=lambda kv: kv[1]) if 256 <= r < 256 + dup]
        ours = ours[:dup]
        min_len = min(min_len, dup)
    assert_same_tokens(ours, theirs, what, min_len)


# --------------------------------------------------------------------------------------
# the peers' pre-tokenization agrees with the regex module (the premise of every test here)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_hf_pretokenizer_matches_regex_module(pattern):
    _require_corpora()
    n = 0
    for name in ALL_FILES:
        for doc in sample(name, 30_000):
            assert peers.hf_split(doc, pattern) == R.pretokenize(doc, pattern), (name, doc[:80])
            n += 1
    tricky = "Year 1234567 and 12345,\u00a0x \x1c y\u2028z  \n\n  it's IT'S  \t\r\n end  "
    assert peers.hf_split(tricky, pattern) == R.pretokenize(tricky, pattern)
    assert n > 100


def test_hf_oniguruma_cl100k_digits_needs_rewrite():
    """Oniguruma reads cl100k's possessive ``{1,3}+`` as a repeated interval."""
    from tokenizers import Regex, pre_tokenizers

    raw = pre_tokenizers.Split(Regex(peers.pattern_str("cl100k")), behavior="isolated")
    text = "in 1234567 days"
    assert [p for p, _ in raw.pre_tokenize_str(text)] == ["in", " ", "1234567", " days"]
    assert R.pretokenize(text, "cl100k") == ["in", " ", "123", "456", "7", " days"]
    assert peers.hf_split(text, "cl100k") == R.pretokenize(text, "cl100k")


# --------------------------------------------------------------------------------------
# reference vs peers: training (small samples, so the slow reference takes seconds)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("name", LANG_FILES)
def test_reference_hf_rule_equals_hf_trainer(name, pattern):
    texts = sample(name, SMALL_BYTES)
    vocab_size = 256 + SMALL_MERGES
    model = ref_model(texts, pattern, "hf", vocab_size)
    ours = merge_bytes(model.token_bytes, model.merges)
    compare_with_hf(ours, texts, vocab_size, pattern, f"reference/hf {name} {pattern}", SMALL_MERGES)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("name", LANG_FILES)
def test_reference_ids_rule_equals_bpeasy(name, pattern):
    texts = sample(name, SMALL_BYTES)
    vocab_size = 256 + SMALL_MERGES
    model = ref_model(texts, pattern, "ids", vocab_size)
    ours = merge_bytes(model.token_bytes, model.merges)
    assert model.token_bytes[256:] == new_tokens(ours)
    compare_with_bpeasy(ours, texts, vocab_size, pattern, f"reference/ids {name} {pattern}", SMALL_MERGES)


SYNTH_SEEDS = range(10)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_reference_tie_heavy_synthetic_equals_peers(pattern):
    """Run to exhaustion on tie-heavy corpora: nearly every merge is decided by the tie rule."""
    ties_seen = 0
    rules_differ = 0
    for seed in SYNTH_SEEDS:
        texts = tuple(synthetic(seed))
        vocab_size = 256 + 400
        hf_model = ref_model(texts, pattern, "hf", vocab_size)
        ids_model = ref_model(texts, pattern, "ids", vocab_size)
        hf_m = merge_bytes(hf_model.token_bytes, hf_model.merges)
        ids_m = merge_bytes(ids_model.token_bytes, ids_model.merges)
        counts = hf_model.merge_counts
        ties_seen += sum(c1 == c2 for c1, c2 in zip(counts, counts[1:]))
        rules_differ += hf_m != ids_m
        compare_with_hf(hf_m, texts, vocab_size, pattern, f"synthetic seed {seed} hf", 30)
        compare_with_bpeasy(ids_m, texts, vocab_size, pattern, f"synthetic seed {seed} ids", 30)
    assert ties_seen > 200, "the synthetic corpora are not tie-heavy"
    assert rules_differ >= 3, "hf and ids rules never differed: the test would not tell them apart"


@pytest.mark.parametrize("max_token_length", [2, 3, 5])
def test_reference_max_token_length_is_peers_minus_one(max_token_length):
    """Ours ``N`` (merged token <= N bytes) == HF's and bpeasy's ``N + 1`` (strict ``<``)."""
    texts = sample("fortunes_de.txt", SMALL_BYTES)
    vocab_size = 256 + SMALL_MERGES
    hf_model = ref_model(texts, "gpt2", "hf", vocab_size, max_token_length=max_token_length)
    hf_m = merge_bytes(hf_model.token_bytes, hf_model.merges)
    assert max(len(a + b) for a, b in hf_m) == max_token_length
    compare_with_hf(hf_m, texts, vocab_size, "gpt2", f"reference/hf mtl={max_token_length}",
                    SMALL_MERGES, max_token_length=max_token_length + 1)
    ids_model = ref_model(texts, "gpt2", "ids", vocab_size, max_token_length=max_token_length)
    ids_m = merge_bytes(ids_model.token_bytes, ids_model.merges)
    compare_with_bpeasy(ids_m, texts, vocab_size, "gpt2", f"reference/ids mtl={max_token_length}",
                        SMALL_MERGES, max_token_length=max_token_length)


def test_peers_allow_byte_pairs_at_max_token_length_two():
    """The peers never length-check the initial byte pairs: their N=2 still makes 2-byte
    tokens (= our 2), and ours N=1 means no merge at all (no peer equivalent)."""
    texts = sample("kjv.txt", 5_000)
    assert {len(a + b) for a, b in peers.hf_train(texts, 300, "gpt2", max_token_length=2)} == {2}
    assert {len(t) for t in peers.bpeasy_train(texts, 300, "gpt2", 2)} == {2}
    assert R.train(list(texts), vocab_size=300, max_token_length=1).merges == []


@pytest.mark.parametrize("min_frequency", [2, 7, 40])
def test_reference_min_frequency_equals_hf(min_frequency):
    texts = sample("kjv.txt", 10_000)
    model = ref_model(texts, "gpt2", "hf", 100_000, min_frequency=min_frequency)
    ours = merge_bytes(model.token_bytes, model.merges)
    assert model.merge_counts[-1] >= min_frequency
    compare_with_hf(ours, texts, 100_000, "gpt2", f"reference/hf min_frequency={min_frequency}",
                    30, min_frequency=min_frequency)


# --------------------------------------------------------------------------------------
# encoding harness on a reference-trained model: reference.encode == tiktoken == HF


@pytest.mark.parametrize("pattern", PATTERNS)
def test_reference_encode_equals_tiktoken_and_hf(pattern):
    texts = sample("fortunes_de.txt", SMALL_BYTES)
    model = ref_model(texts, pattern, "hf", 256 + SMALL_MERGES)
    merges_b = merge_bytes(model.token_bytes, model.merges)
    enc = peers.tiktoken_encoding(model.token_bytes, pattern)
    hf = peers.hf_tokenizer_from_merges(model.token_bytes, merges_b, pattern)
    for name in ("fortunes_de.txt", "kjv.txt", "fortunes_zh.txt"):
        text = held_out(name, 4_000)
        ids = R.encode(text, model)
        assert len(ids) > 500 and max(ids) >= 256
        assert enc.encode_ordinary(text) == ids, name
        assert peers.hf_encode(hf, text) == ids, name
        assert R.decode_bytes(ids, model) == text.encode("utf-8")


def test_pair_keyed_and_rank_keyed_encoding_can_differ_on_unreachable_merges():
    """A hand-made merge list whose token cannot be formed the way its merge says.

    Merges: ``b c`` (rank 0), ``a b`` (1), ``ab c`` (2). In "abc" the pair-keyed encoder
    (ours, HF) merges ``b c`` first and then has no merge for ``(a, bc)``: ``[a, bc]``.
    tiktoken is rank-keyed: after ``bc`` it finds the bytes ``abc`` in its ranks and
    joins them. Trained vocabularies never contain such a merge (after ``b c`` is learned,
    ``ab`` and ``c`` are never adjacent), so the peers agree on them.
    """
    a, b, c = ord("a"), ord("b"), ord("c")
    model = R.model_from_merges([(b, c), (a, b), (256 + 1, c)], pattern="gpt2")
    text = "abc"
    ours = R.encode(text, model)
    assert ours == [a, 256]
    hf = peers.hf_tokenizer_from_merges(model.token_bytes, merge_bytes(model.token_bytes, model.merges), "gpt2")
    assert peers.hf_encode(hf, text) == ours
    enc = peers.tiktoken_encoding(model.token_bytes, "gpt2")
    assert enc.encode_ordinary(text) == [258]


# --------------------------------------------------------------------------------------
# fb.train vs reference (all tie rules) on the small samples


@pytest.mark.parametrize("tie_break", TIE_RULES)
@pytest.mark.parametrize("name", LANG_FILES)
def test_fb_train_equals_reference_small(name, tie_break):
    _fb()
    texts = sample(name, SMALL_BYTES)
    vocab_size = 256 + SMALL_MERGES
    model = ref_model(texts, "gpt2", tie_break, vocab_size)
    tok = fb_train(texts, vocab_size=vocab_size, pattern="gpt2", tie_break=tie_break)
    expected = merge_bytes(model.token_bytes, model.merges)
    assert_same_merges(fb_merge_bytes(tok), expected, f"fb/{tie_break} {name}", SMALL_MERGES)
    assert np.asarray(tok.merges).tolist() == [list(m) for m in model.merges]
    assert list(tok.vocab[: len(model.token_bytes)]) == model.token_bytes


@pytest.mark.parametrize("tie_break", TIE_RULES)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_fb_train_equals_reference_tie_heavy(pattern, tie_break):
    _fb()
    for seed in SYNTH_SEEDS:
        texts = tuple(synthetic(seed))
        model = ref_model(texts, pattern, tie_break, 256 + 400)
        tok = fb_train(texts, vocab_size=256 + 400, pattern=pattern, tie_break=tie_break)
        assert_same_merges(fb_merge_bytes(tok), merge_bytes(model.token_bytes, model.merges),
                           f"fb/{tie_break} synthetic seed {seed} {pattern}", 30)


# --------------------------------------------------------------------------------------
# fb.train vs peers at larger sizes


LARGE_CASES = [
    pytest.param(name, "gpt2", 200_000, 1000, id=f"{name}-gpt2-200KB-v1000") for name in LANG_FILES
]
SLOW_LARGE_CASES = [
    pytest.param(name, pattern, 1_000_000, 4096, id=f"{name}-{pattern}-1MB-v4096",
                 marks=pytest.mark.slow)
    for name in LANG_FILES
    for pattern in PATTERNS
]


@pytest.mark.parametrize("name,pattern,nbytes,vocab_size", LARGE_CASES + SLOW_LARGE_CASES)
def test_fb_train_hf_rule_equals_hf_trainer_large(name, pattern, nbytes, vocab_size):
    _fb()
    texts = sample(name, nbytes)
    tok = fb_train(texts, vocab_size=vocab_size, pattern=pattern, tie_break="hf")
    compare_with_hf(fb_merge_bytes(tok), texts, vocab_size, pattern,
                    f"fb/hf {name} {pattern} {nbytes}B", vocab_size - 256 - 5)


@pytest.mark.parametrize("name,pattern,nbytes,vocab_size", LARGE_CASES + SLOW_LARGE_CASES)
def test_fb_train_ids_rule_equals_bpeasy_large(name, pattern, nbytes, vocab_size):
    _fb()
    texts = sample(name, nbytes)
    tok = fb_train(texts, vocab_size=vocab_size, pattern=pattern, tie_break="ids")
    merges_b = fb_merge_bytes(tok)
    assert list(tok.vocab[256:]) == new_tokens(merges_b)
    compare_with_bpeasy(merges_b, texts, vocab_size, pattern,
                        f"fb/ids {name} {pattern} {nbytes}B", vocab_size - 256 - 5)


@pytest.mark.parametrize("max_token_length", [3, 6])
def test_fb_train_max_token_length_equals_peers(max_token_length):
    """Ours ``N`` == the peers' ``N + 1`` (they test ``len < N``)."""
    _fb()
    texts = sample("fortunes_ru.txt", 200_000)
    for tie_break in ("hf", "ids"):
        tok = fb_train(texts, vocab_size=1500, pattern="gpt2", tie_break=tie_break,
                       max_token_length=max_token_length)
        merges_b = fb_merge_bytes(tok)
        assert max(len(a + b) for a, b in merges_b) == max_token_length
        what = f"fb/{tie_break} max_token_length={max_token_length}"
        if tie_break == "hf":
            compare_with_hf(merges_b, texts, 1500, "gpt2", what, 300,
                            max_token_length=max_token_length + 1)
        else:
            compare_with_bpeasy(merges_b, texts, 1500, "gpt2", what, 300,
                                max_token_length=max_token_length)


def test_fb_train_min_frequency_equals_hf():
    _fb()
    texts = sample("fortunes_de.txt", 200_000)
    tok = fb_train(texts, vocab_size=100_000, pattern="gpt2", tie_break="hf", min_frequency=25)
    merges_b = fb_merge_bytes(tok)
    assert 300 < len(merges_b) < 100_000 - 256
    compare_with_hf(merges_b, texts, 100_000, "gpt2", "fb/hf min_frequency=25", 300,
                    min_frequency=25)


@pytest.mark.slow
@pytest.mark.parametrize("tie_break", ["hf", "ids"])
def test_fb_train_multilingual_mix_equals_peers(tie_break):
    _fb()
    texts = tuple(d for name in ALL_FILES for d in sample(name, 400_000))
    tok = fb_train(texts, vocab_size=4096, pattern="o200k", tie_break=tie_break)
    merges_b = fb_merge_bytes(tok)
    if tie_break == "hf":
        compare_with_hf(merges_b, texts, 4096, "o200k", "fb/hf mix", 3800)
    else:
        compare_with_bpeasy(merges_b, texts, 4096, "o200k", "fb/ids mix", 3800)


# --------------------------------------------------------------------------------------
# encode parity: fb tokenizer == tiktoken from its vocab == HF from its merges


@functools.lru_cache(maxsize=None)
def trained_tokenizer(pattern: str):
    texts = [d for name in ALL_FILES for d in sample(name, 100_000)]
    return fb_train(texts, vocab_size=3000, pattern=pattern, tie_break="ids")


ENCODE_SOURCES = [f"corpus:{n}" for n in ALL_FILES] + [f"stdlib:{p}" for p in STDLIB_FILES]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_fb_encode_equals_tiktoken_and_hf(pattern):
    _fb()
    _require_corpora()
    tok = trained_tokenizer(pattern)
    vocab = [bytes(t) for t in tok.vocab]
    merges_b = fb_merge_bytes(tok)
    assert len(merges_b) > 2500 and first_duplicate(merges_b) is None
    enc = peers.tiktoken_encoding(vocab, pattern)
    hf = peers.hf_tokenizer_from_merges(vocab, merges_b, pattern)
    for source in ENCODE_SOURCES:
        kind, ref = source.split(":", 1)
        text = held_out(ref, 40_000) if kind == "corpus" else stdlib_text(ref)
        ids = list(tok.encode_ordinary(text))
        assert len(ids) > 1000, source
        assert len(ids) < len(text.encode("utf-8")) * 0.9, f"{source}: hardly any merge applied"
        expected = enc.encode_ordinary(text)
        if ids != expected:
            i = next((k for k in range(min(len(ids), len(expected))) if ids[k] != expected[k]),
                     min(len(ids), len(expected)))
            raise AssertionError(
                f"{pattern} {source}: fb vs tiktoken differ at token {i}: "
                f"{[vocab[t] for t in ids[i:i + 4]]} vs {[vocab[t] for t in expected[i:i + 4]]}"
            )
        assert peers.hf_encode(hf, text) == ids, f"{pattern} {source}: fb vs HF"
        assert tok.decode_bytes(ids) == text.encode("utf-8")
        assert list(tok.encode(text)) == ids  # no special tokens registered
