"""Word counting kernels: pre-token byte ranges -> a growing table of unique words.

The corpus arrives in batches (a chunk of a text file, a Parquet row group, ...) already
cut into pieces (``piece_offsets`` over the batch's UTF-8 bytes). Each batch is counted
in parallel: ``n_blocks`` contiguous ranges of pieces are counted into private hash
tables (one per block, no sharing), then merged serially, in block order, into the
global table. Counts are sums and first occurrences are minima, so the result does not
depend on the number of blocks or threads.

The global table keeps each unique word's bytes in a growable byte store (the batch
buffer is transient), its count, and the global index of its first occurrence (for the
``first`` tie rule). All arrays are passed in and returned, grown when needed.
"""

import numpy as np
from numba import njit, prange

from .hashing import EMPTY, HASH_SEED, grow, hash_slot, hash_units
#: kernel cache stamp: f33394c68d3ee70edf8da2fc67b7abfc4d9e07a07cce73cc01d96a5c6cb1b162


@njit(cache=True, nogil=True)
def _same(a, a0, b, b0, n):
    for k in range(n):
        if a[a0 + k] != b[b0 + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _count_block(data, piece_offsets, p0, p1, keys, u_piece, u_count, u_hash):
    """Count pieces ``p0 .. p1-1`` into a private table; returns the number of unique pieces.

    ``keys`` (int64[cap], EMPTY-filled) maps hash slots to local unique indices; for each
    unique piece ``u_piece`` holds the index of its first occurrence, ``u_count`` its count
    and ``u_hash`` its hash.
    """
    mask = keys.shape[0] - 1
    n_unique = 0
    for p in range(p0, p1):
        s = piece_offsets[p]
        e = piece_offsets[p + 1]
        if e <= s:
            continue
        h = hash_units(data, s, e, HASH_SEED)
        i = hash_slot(h) & mask
        while True:
            u = keys[i]
            if u == EMPTY:
                keys[i] = n_unique
                u_piece[n_unique] = p
                u_count[n_unique] = 1
                u_hash[n_unique] = h
                n_unique += 1
                break
            q = u_piece[u]
            if u_hash[u] == h and piece_offsets[q + 1] - piece_offsets[q] == e - s and _same(
                    data, piece_offsets[q], data, s, e - s):
                u_count[u] += 1
                break
            i = (i + 1) & mask
    return n_unique


@njit(cache=True, nogil=True, parallel=True)
def count_batch(data, piece_offsets, n_blocks, first_index, g_keys, g_store, g_store_len,
                g_off, g_count, g_first, g_hash, g_n):
    """Add one batch of pieces to the global word table.

    Parameters
    ----------
    data : uint8[n_bytes]
        The batch's UTF-8 bytes.
    piece_offsets : int64[n_pieces + 1]
        Piece boundaries in ``data`` (empty pieces are ignored).
    n_blocks : int
        Number of contiguous piece ranges counted in parallel.
    first_index : int
        Global index of this batch's first piece (pieces of earlier batches come first).
    g_keys : int64[cap]
        Global hash slots -> word index (EMPTY when free); capacity a power of two.
    g_store : uint8[m]
        Bytes of the unique words, concatenated (``g_store_len`` bytes used).
    g_store_len : int
        Bytes used in ``g_store``.
    g_off : int64[k + 1]
        ``g_off[w] .. g_off[w+1]``: word w's bytes in ``g_store`` (``g_n + 1`` entries used).
    g_count : int64[k]
        Occurrences of each word.
    g_first : int64[k]
        Global piece index of each word's first occurrence.
    g_hash : int64[k]
        Hash of each word's bytes.
    g_n : int
        Number of words in the table.

    Returns
    -------
    tuple
        The (possibly reallocated) ``g_keys, g_store, g_store_len, g_off, g_count, g_first,
        g_hash, g_n``.
    """
    n_blocks, block_start, u_base, u_piece, u_count, u_hash, n_unique = _blocks(piece_offsets,
                                                                              n_blocks)
    for b in prange(n_blocks):
        _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_hash, n_unique)
    return _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_hash,
                         n_unique, first_index, g_keys, g_store, g_store_len, g_off, g_count,
                         g_first, g_hash, g_n)


@njit(cache=True, nogil=True)
def count_batch_serial(data, piece_offsets, n_blocks, first_index, g_keys, g_store, g_store_len,
                       g_off, g_count, g_first, g_hash, g_n):
    """``count_batch`` on the calling thread only (no thread pool is touched).

    Same parameters and results. Used where Numba's thread pool cannot be trusted: in a
    process forked from one whose pool had started (see ``parallel.py``).
    """
    n_blocks, block_start, u_base, u_piece, u_count, u_hash, n_unique = _blocks(piece_offsets,
                                                                              n_blocks)
    for b in range(n_blocks):
        _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_hash, n_unique)
    return _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_hash,
                         n_unique, first_index, g_keys, g_store, g_store_len, g_off, g_count,
                         g_first, g_hash, g_n)


@njit(cache=True, nogil=True)
def _blocks(piece_offsets, n_blocks):
    """Block boundaries and the per-block private arrays of ``count_batch``."""
    n_pieces = piece_offsets.shape[0] - 1
    n_blocks = max(1, min(n_blocks, n_pieces))
    # Per-block private tables, sized for the block's pieces (load factor <= 1/2).
    block_start = np.empty(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks + 1):
        block_start[b] = b * n_pieces // n_blocks
    u_base = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks):
        u_base[b + 1] = u_base[b] + (block_start[b + 1] - block_start[b])
    u_piece = np.empty(max(1, n_pieces), dtype=np.int64)
    u_count = np.empty(max(1, n_pieces), dtype=np.int64)
    u_hash = np.empty(max(1, n_pieces), dtype=np.int64)
    n_unique = np.zeros(n_blocks, dtype=np.int64)
    return n_blocks, block_start, u_base, u_piece, u_count, u_hash, n_unique


@njit(cache=True, nogil=True)
def _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_hash, n_unique):
    """Count block ``b`` into its own slices of the private arrays (no sharing)."""
    p0 = block_start[b]
    p1 = block_start[b + 1]
    cap = 16
    while cap < 2 * (p1 - p0):
        cap *= 2
    keys = np.full(cap, EMPTY, dtype=np.int64)
    lo = u_base[b]
    hi = u_base[b + 1]
    n_unique[b] = _count_block(data, piece_offsets, p0, p1, keys, u_piece[lo:hi],
                               u_count[lo:hi], u_hash[lo:hi])


@njit(cache=True, nogil=True)
def _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_hash, n_unique,
                  first_index, g_keys, g_store, g_store_len, g_off, g_count, g_first, g_hash, g_n):
    """Serial merge in block order: a word's first occurrence is in the earliest block."""
    for b in range(n_blocks):
        lo = u_base[b]
        for j in range(n_unique[b]):
            p = u_piece[lo + j]
            h = u_hash[lo + j]
            s = piece_offsets[p]
            e = piece_offsets[p + 1]
            if 2 * (g_n + 1) > g_keys.shape[0]:
                new_keys = np.full(2 * g_keys.shape[0], EMPTY, dtype=np.int64)
                nmask = new_keys.shape[0] - 1
                for w in range(g_n):
                    i = hash_slot(g_hash[w]) & nmask
                    while new_keys[i] != EMPTY:
                        i = (i + 1) & nmask
                    new_keys[i] = w
                g_keys = new_keys
            mask = g_keys.shape[0] - 1
            i = hash_slot(h) & mask
            while True:
                w = g_keys[i]
                if w == EMPTY:
                    g_keys[i] = g_n
                    g_store = grow(g_store, g_store_len + (e - s))
                    for k in range(e - s):
                        g_store[g_store_len + k] = data[s + k]
                    g_off = grow(g_off, g_n + 2)
                    g_count = grow(g_count, g_n + 1)
                    g_first = grow(g_first, g_n + 1)
                    g_hash = grow(g_hash, g_n + 1)
                    g_off[g_n] = g_store_len
                    g_store_len += e - s
                    g_off[g_n + 1] = g_store_len
                    g_count[g_n] = u_count[lo + j]
                    g_first[g_n] = first_index + p
                    g_hash[g_n] = h
                    g_n += 1
                    break
                ws = g_off[w]
                if g_hash[w] == h and g_off[w + 1] - ws == e - s and _same(g_store, ws, data, s, e - s):
                    g_count[w] += u_count[lo + j]
                    break
                i = (i + 1) & mask
    return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_hash, g_n
