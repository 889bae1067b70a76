"""A stable hash of each word of a word table (distributed counts: shards and merges).

The value depends only on the word's bytes (no seed, no process state), so every machine
puts a word in the same hash shard and sorts it to the same place.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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
