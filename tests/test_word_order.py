"""The merge kernel's copy of the word table (``merge_loop.kernel_table``,
``kernels/word_order.py``): words sorted by their first symbols (every other word of that
order first), against a sort by hand, and the same merges, ids and counts as the table in
its counted order."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fbtest import CORPORA, NOJIT

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb.errors import TrainingError
from fastbpe_nb.kernels.merge import TIE_BYTES, TIE_FIRST, TIE_RANKS
from fastbpe_nb.kernels.word_order import KEY_BITS, ordered_table, prefix_order
from fastbpe_nb.merge_loop import UNLIMITED, kernel_table, run_merge_kernel


def table_of(words):
    """(symbols int32, offsets, counts) of a list of (symbol list, count)."""
    offsets = np.zeros(len(words) + 1, np.int64)
    np.cumsum([len(w) for w, _ in words], out=offsets[1:])
    symbols = np.array([s for w, _ in words for s in w], np.int32)
    return symbols, offsets, np.array([c for _, c in words], np.int64)


def sort_key(word, n_base):
    """What prefix_order sorts by: the first symbols that fit in KEY_BITS bits, each + 1,
    0 past the word's end."""
    depth = max(1, KEY_BITS // n_base.bit_length())
    return [word[d] + 1 if d < len(word) else 0 for d in range(depth)]


@st.composite
def tables(draw):
    n_base = draw(st.sampled_from([1, 2, 3, 256, 257, 300, 5000, 70_000]))
    words = draw(st.lists(st.tuples(
        st.lists(st.integers(0, n_base - 1), min_size=0, max_size=6),
        st.integers(1, 10**12)), min_size=0, max_size=60))
    return n_base, words


@settings(max_examples=150 if not NOJIT else 25, deadline=None)
@given(tables())
def test_prefix_order_is_a_stable_sort_by_the_first_symbols(case):
    n_base, words = case
    symbols, offsets, counts = table_of(words)
    order = prefix_order(symbols, offsets, n_base).tolist()
    want = sorted(range(len(words)), key=lambda w: sort_key(words[w][0], n_base))
    assert order == want  # (sorted() is stable: equal keys keep the words' order)
    out = np.empty(len(symbols), np.int32)
    new_offsets, new_counts = ordered_table(symbols, offsets, counts, np.array(order, np.int64),
                                            out)
    got = [(out[new_offsets[k]:new_offsets[k + 1]].tolist(), int(new_counts[k]))
           for k in range(len(words))]
    assert got == [(list(words[w][0]), words[w][1]) for w in order]


def test_kernel_table_types_and_kept_order():
    words = [([5, 1], 3), ([0], 1), ([5, 0, 2], 2)]
    symbols, offsets, counts = table_of(words)
    for bound, dtype in ((1 << 15, np.int16), ((1 << 15) + 1, np.int32)):
        out, new_offsets, new_counts = kernel_table(symbols.astype(np.uint8), offsets, counts,
                                                    6, bound, keep_order=False)
        assert out.dtype == dtype
        # Sorted [0], [5, 0, 2], [5, 1]; every other word of that order first (the halves
        # of the two-thread merge loop): [0], [5, 1], then [5, 0, 2].
        assert out.tolist() == [0, 5, 1, 5, 0, 2] and new_counts.tolist() == [1, 3, 2]
        assert new_offsets.tolist() == [0, 1, 3, 6]
    out, new_offsets, new_counts = kernel_table(symbols, offsets, counts, 6, 100,
                                                keep_order=True)
    assert out.dtype == np.int16 and out.tolist() == symbols.tolist()
    assert new_offsets.tolist() == offsets.tolist() and new_counts.tolist() == counts.tolist()
    out[0] = -1  # a copy: the kernel rewrites it, never the caller's table
    assert symbols[0] == 5
    for bad in (np.array([0, 6, 1], np.int32), np.array([0, -1, 1], np.int32),
                np.array([0, 1, 2], np.int64)):
        with pytest.raises(TrainingError):
            kernel_table(bad, np.array([0, 3]), np.ones(1, np.int64), 6, 100, keep_order=False)


@pytest.mark.parametrize("tie", ["ids", "hf", "bytes", "first"])
def test_sorted_table_learns_what_the_counted_one_learns(tie):
    """The same merges, ids and counts from the table as counted (first-occurrence order)
    and from the kernel's sorted copy (kept in order under ``first``), on real text."""
    files = sorted(CORPORA.glob("fortunes_*.txt"))
    texts = ([f.read_text(encoding="utf-8")[:400_000] for f in files] if files
             else [" ".join(f"w{i % 997}x{i % 13}" for i in range(60_000))])
    counter = fb.word_table.count_corpus(texts, "gpt2")
    word_bytes, offsets, counts = counter.table()
    mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "bytes": TIE_BYTES, "first": TIE_FIRST}[tie]
    ranks = np.asarray(ref.hf_byte_ranks() if tie == "hf" else range(256), np.int64)
    base = [bytes([b]) for b in range(256)]
    n_merges = 400 if NOJIT else 3000
    results = []
    for table in ((word_bytes.astype(np.int32), offsets, counts),
                  kernel_table(word_bytes, offsets, counts, 256, 256 + n_merges,
                               keep_order=tie == "first")):
        out = run_merge_kernel(*table, base, ranks, mode, n_merges, UNLIMITED, 1, UNLIMITED)
        results.append([a.tolist() for a in out])
    assert results[0] == results[1]
    assert len(results[0][0]) == n_merges
