"""Word tables of distributed counting: a stable hash per word (shards) and exact merges.

The hash depends only on the word's bytes (no seed, no process state), so every machine
puts a word in the same hash shard.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .hashing import same_units
#: kernel cache stamp: f61736dfda6e18e2bc4664aedc29c401524c0df661f343da5017c51fb214b6bf


@njit(cache=True, nogil=True)
def word_hashes(data, offsets):
    """64-bit FNV-1a of each word, then the splitmix64 finalizer (spreads the low bits,
    which ``hash % n_shards`` reads).

    Parameters
    ----------
    data : uint8[total]
        The words' bytes, concatenated.
    offsets : int64[n_words + 1]
        Word boundaries in ``data`` (validated by the caller: non-decreasing, within data).

    Returns
    -------
    uint64[n_words]
    """
    n = len(offsets) - 1
    out = np.empty(max(n, 0), dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for w in range(n):
        h = np.uint64(14695981039346656037)
        for i in range(offsets[w], offsets[w + 1]):
            h = (h ^ np.uint64(data[i])) * prime
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
        out[w] = h
    return out


@njit(cache=True, nogil=True)
def merge_words(data, offsets, hashes, counts, keys, pieces):
    """Sum the counts of equal words and keep each word's smallest ``(key, piece)``.

    One pass over the rows with an open-addressing table of row representatives (probed by
    the word's hash, confirmed on its bytes: two words with one hash stay apart), so the
    cost is linear in the rows (a sort of the bytes took ~8x longer).

    Parameters
    ----------
    data : uint8[total]
        The rows' words, concatenated.
    offsets : int64[n_rows + 1]
        Row boundaries in ``data`` (validated by the caller).
    hashes : uint64[n_rows]
        ``word_hashes(data, offsets)``.
    counts, keys, pieces : int64[n_rows]
        Each row's count and its ``(first_key, first_piece)`` (zeros when unused).

    Returns
    -------
    rows : int64[n_unique]
        For each distinct word, the first row holding it (in row order).
    total, key, piece : int64[n_unique]
        Its summed count and its smallest ``(key, piece)`` (lexicographic).
    """
    n = len(offsets) - 1
    bits = 4
    while (1 << bits) < 2 * n:
        bits += 1
    shift = np.uint64(64 - bits)
    slots = np.full(1 << bits, -1, dtype=np.int64)
    mask = (1 << bits) - 1
    rows = np.empty(n, dtype=np.int64)
    total = np.empty(n, dtype=np.int64)
    key = np.empty(n, dtype=np.int64)
    piece = np.empty(n, dtype=np.int64)
    n_unique = 0
    for r in range(n):
        h = hashes[r]
        # Fibonacci hashing on the top bits: the low bits are what ``hash % n_shards`` used
        # to choose this row's shard, so they may all be equal here.
        s = np.int64((h * np.uint64(0x9E3779B97F4A7C15)) >> shift)
        start, length = offsets[r], offsets[r + 1] - offsets[r]
        while True:
            u = slots[s]
            if u < 0:
                slots[s] = n_unique
                rows[n_unique] = r
                total[n_unique] = counts[r]
                key[n_unique] = keys[r]
                piece[n_unique] = pieces[r]
                n_unique += 1
                break
            q = rows[u]
            if hashes[q] == h and offsets[q + 1] - offsets[q] == length and same_units(
                    data, offsets[q], data, start, length):
                total[u] += counts[r]
                if keys[r] < key[u] or (keys[r] == key[u] and pieces[r] < piece[u]):
                    key[u] = keys[r]
                    piece[u] = pieces[r]
                break
            s = (s + 1) & mask
    return rows[:n_unique], total[:n_unique], key[:n_unique], piece[:n_unique]
