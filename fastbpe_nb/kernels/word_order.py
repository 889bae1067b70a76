"""The word table in the order the merge kernel runs fastest on: words sorted by their
first symbols.

The merge loop is bound by memory latency: a merge visits the words that hold its pair,
scattered over the table. Words that begin alike hold the same first pairs, so in an order
sorted by their first symbols the words a merge visits lie closer together (fewer cache
lines and pages touched).

The merges do not depend on the order of the words, except under the ``first`` tie rule,
which ranks pairs by their first occurrence in the table as counted: there the caller
keeps the order.
"""

import numpy as np
from numba import njit

from .hashing import prefetch
#: kernel cache stamp: f61736dfda6e18e2bc4664aedc29c401524c0df661f343da5017c51fb214b6bf

#: Bits of the sort key (the first symbols, each + 1 so that "no symbol" sorts first).
KEY_BITS = 32
#: Bits of a word's number beside its key in the sorted 64-bit values.
WORD_BITS = 31
#: Bits sorted per radix pass.
RADIX_BITS = 8
#: How many words ahead ``ordered_table`` prefetches a word's offsets and count.
AHEAD = 16


@njit(cache=True, nogil=True)
def prefix_order(symbols, offsets, n_base):
    """Word numbers sorted by the words' first symbols (stably: words that begin alike keep
    their order), as many first symbols as fit in ``KEY_BITS`` bits (3 of 256 bytes).

    Parameters
    ----------
    symbols : uint8, int16 or int32 [n_symbols]
        The words' symbols, concatenated; each in ``0 .. n_base - 1`` (checked by the
        caller).
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols`` (rising from 0; fewer than 2**31 words).
    n_base : int
        Number of base symbols (>= 1).

    Returns
    -------
    order : int64[n_words]
        ``order[k]``: the word that comes k-th.
    """
    n_words = offsets.shape[0] - 1
    bits = 1
    while (1 << bits) <= n_base:  # values 0 (no symbol) .. n_base
        bits += 1
    depth = max(1, KEY_BITS // bits)
    key_bits = depth * bits
    values = np.empty(n_words, dtype=np.int64)
    for w in range(n_words):
        s = offsets[w]
        n = offsets[w + 1] - s
        key = np.int64(0)
        for d in range(depth):
            digit = np.int64(symbols[s + d]) + 1 if d < n else 0
            key = (key << bits) | digit
        values[w] = (key << WORD_BITS) | w
    # LSD radix sort of (key, word) on the key's bits, RADIX_BITS at a time: each pass is
    # stable, so the words of equal keys stay in order.
    other = np.empty(n_words, dtype=np.int64)
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    mask = (1 << RADIX_BITS) - 1
    for shift in range(WORD_BITS, WORD_BITS + key_bits, RADIX_BITS):
        count[:] = 0
        for k in range(n_words):
            count[((values[k] >> shift) & mask) + 1] += 1
        for b in range(1 << RADIX_BITS):
            count[b + 1] += count[b]
        for k in range(n_words):
            b = (values[k] >> shift) & mask
            other[count[b]] = values[k]
            count[b] += 1
        values, other = other, values
    for k in range(n_words):
        values[k] &= (1 << WORD_BITS) - 1
    return values


@njit(cache=True, nogil=True)
def ordered_table(symbols, offsets, counts, order, out_symbols):
    """The word table with its words in ``order``: ``out_symbols`` (filled, any integer
    type that holds the symbols) and the new offsets and counts.

    Parameters
    ----------
    symbols : uint8, int16 or int32 [n_symbols]
        The words' symbols, concatenated.
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols``.
    counts : int64[n_words]
        Each word's count.
    order : int64[n_words]
        A permutation of the words (``prefix_order``).
    out_symbols : int16 or int32 [n_symbols]
        Filled with the words' symbols in ``order``.

    Returns
    -------
    out_offsets : int64[n_words + 1]
    out_counts : int64[n_words]
    """
    n_words = order.shape[0]
    out_offsets = np.empty(n_words + 1, dtype=np.int64)
    out_counts = np.empty(n_words, dtype=np.int64)
    o = 0
    out_offsets[0] = 0
    for k in range(n_words):
        # The words are read in a new order, all over the table: request a word's offsets
        # and count AHEAD words before it is copied, and its symbols half as far.
        if k + AHEAD < n_words:
            prefetch(offsets, order[k + AHEAD])
            prefetch(counts, order[k + AHEAD])
        if k + AHEAD // 2 < n_words:
            prefetch(symbols, offsets[order[k + AHEAD // 2]])
        w = order[k]
        s = offsets[w]
        e = offsets[w + 1]
        for i in range(s, e):
            out_symbols[o + i - s] = symbols[i]
        o += e - s
        out_offsets[k + 1] = o
        out_counts[k] = counts[w]
    return out_offsets, out_counts
