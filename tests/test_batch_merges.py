"""Batched merges (BatchBPE, ``train(..., merge_batch=k)``) against the specification
(``reference.train(..., merge_batch=k)``): merges, ids and counts identical for every tie
rule and stopping option, on hypothesis corpora, tie-heavy seeded corpora and the kernel's
rarer heap paths; ``merge_batch=1`` is exact BPE.
"""


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref

from fbtest import NOJIT, assert_same_model
from fbtest import spaced_word_corpus as tie_heavy_corpus

TIES = ["ids", "hf", "first", "bytes"]
EXAMPLES = 30 if NOJIT else 150

alphabets = st.sampled_from(["ab", "abc", "ab ", "aab ", "abé ", "a中b ", "ab\n", "abcd "])


@st.composite
def corpora(draw):
    alphabet = draw(alphabets)
    return draw(st.lists(st.text(alphabet=alphabet, min_size=0, max_size=30), min_size=1,
                         max_size=8))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), k=st.integers(1, 12),
       num_merges=st.one_of(st.none(), st.integers(0, 40)), min_frequency=st.integers(0, 3),
       max_len=st.one_of(st.none(), st.integers(1, 6)),
       pattern=st.sampled_from([None, "gpt2", r"\S+|\s+"]))
def test_batched_training_matches_reference(docs, tie, k, num_merges, min_frequency, max_len,
                                            pattern):
    opts = dict(num_merges=num_merges, vocab_size=None if num_merges is not None else 300,
                pattern=pattern, tie_break=tie, min_frequency=min_frequency,
                max_token_length=max_len, merge_batch=k)
    model = ref.train(docs, **opts)
    tok = fb.train(docs, **opts)
    assert_same_model(tok, model)
    for doc in docs:
        assert tok.encode(doc) == ref.encode(doc, model)


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), k=st.integers(1, 12),
       vocab_size=st.integers(256, 300), n_special=st.integers(0, 2))
def test_vocab_size_and_special_tokens(docs, tie, k, vocab_size, n_special):
    specials = ["<|s|>", "<|e|>"][:n_special]
    if vocab_size < 256 + n_special:
        vocab_size = 256 + n_special
    opts = dict(vocab_size=vocab_size, tie_break=tie, special_tokens=specials, merge_batch=k)
    model = ref.train(docs, **opts)
    tok = fb.train(docs, **opts)
    assert_same_model(tok, model)
    assert tok.vocab_size <= vocab_size


@pytest.mark.parametrize("seed", range(3 if NOJIT else 8))
@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("k", [2, 7, 64])
def test_tie_heavy_corpora_match_reference(seed, tie, k):
    docs = tie_heavy_corpus(seed)
    model = ref.train(docs, vocab_size=380, tie_break=tie, merge_batch=k)
    tok = fb.train(docs, vocab_size=380, tie_break=tie, merge_batch=k)
    assert len(model.merges) >= 20
    assert_same_model(tok, model)


def test_one_is_exact_bpe_and_more_differs():
    docs = tie_heavy_corpus(1, 200)
    exact = fb.train(docs, vocab_size=400)
    assert np.array_equal(fb.train(docs, vocab_size=400, merge_batch=1).merges, exact.merges)
    batched = fb.train(docs, vocab_size=400, merge_batch=16)
    assert not np.array_equal(batched.merges, exact.merges)  # a different algorithm


@pytest.mark.parametrize("tie", TIES)
def test_kernel_heap_paths_in_batches(tie):
    """A small heap floor makes the heap run dry while a pass collects its pairs (rebuilt
    from the table, which may list a candidate again) and fill with rare pairs (threshold
    raised): the kernel's rarer paths, against the reference."""
    from fastbpe_nb.byte_level import hf_byte_ranks
    from fastbpe_nb.kernels.merge import (N_PROGRESS, PROG_RAISES, PROG_REBUILDS, TIE_BYTES,
                                          TIE_FIRST, TIE_RANKS, train_merges, word_index_rows)
    from test_merge_kernel import zipf_words

    mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST, "bytes": TIE_BYTES}[tie]
    ranks = np.asarray(hf_byte_ranks() if tie == "hf" else range(256), dtype=np.int64)
    seen = {PROG_REBUILDS: 0, PROG_RAISES: 0}
    for seed, k, heap_floor in [(1, 5, 1), (2, 16, 2), (3, 3, 1)][: 1 if NOJIT else None]:
        words = zipf_words(seed, 300 if NOJIT else 1200)
        raw = [w.encode("utf-8") for w in words]
        symbols = np.frombuffer(b"".join(raw), np.uint8).astype(np.int32)
        offsets = np.zeros(len(raw) + 1, np.int64)
        np.cumsum([len(r) for r in raw], out=offsets[1:])
        counts = np.array(list(words.values()), np.int64)
        progress = np.zeros(N_PROGRESS, np.int64)
        rows = word_index_rows(len(symbols), len(counts), int(np.diff(offsets).max()))
        merges, ids, got_counts = train_merges(
            symbols, offsets, counts, np.arange(257, dtype=np.int64),
            np.arange(256, dtype=np.uint8), ranks, mode, 200, 1 << 40, 1, 1 << 40, progress,
            np.empty((rows, 2), np.int32), 1 << 20, 16, heap_floor, None, k)
        model = ref.train(words=words, num_merges=200, tie_break=tie, merge_batch=k)
        assert [tuple(m) for m in merges.tolist()] == model.merges, (seed, k)
        assert ids.tolist() == model.merge_ids and got_counts.tolist() == model.merge_counts
        for slot in seen:
            seen[slot] += int(progress[slot])
    if not NOJIT:
        assert all(seen.values()), seen


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2", 1 << 17])
def test_merge_batch_is_validated(value):
    with pytest.raises(ValueError, match="merge_batch"):
        fb.train(["ab ab"], vocab_size=300, merge_batch=value)


def test_refused_with_superbpe_and_sentencepiece_style():
    with pytest.raises(fb.TrainingError, match="merge_batch"):
        fb.train(["ab ab"], vocab_size=300, superbpe_transition=280, merge_batch=4)
    with pytest.raises(TypeError, match="merge_batch"):
        fb.train(["ab ab"], vocab_size=300, whitespace="\u2581", merge_batch=4)


def test_train_files_and_cli(tmp_path):
    from fastbpe_nb.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(d + "\n" for d in tie_heavy_corpus(2, 100)), encoding="utf-8")
    want = fb.train_files([str(corpus)], vocab_size=380, merge_batch=8)
    model = ref.train([corpus.read_text(encoding="utf-8")], vocab_size=380, merge_batch=8)
    assert_same_model(want, model)
    out = tmp_path / "m.json"
    assert main(["train", str(corpus), "-o", str(out), "--vocab-size", "380",
                 "--merge-batch", "8", "-q"]) == 0
    assert np.array_equal(fb.load(out).merges, want.merges)
