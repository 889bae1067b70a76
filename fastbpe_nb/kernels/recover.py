"""Merge recovery for tiktoken ranks files: the last merge tiktoken's algorithm makes for
each token, using only the ranks below the token's own.

The Python twin (``io.tiktoken_format._last_merge``) is the specification; this kernel
runs the same rule over all tokens at once (a 200k-token file: seconds in Python).
"""

import numpy as np
from numba import njit

from .encode import _heap_pop, _heap_push, _whole_piece
from .hashing import HASH_SEED, hash_units
#: kernel cache stamp: 38cd827f8d7bb2d3cc057fa89676e75a434e58f4a496e4c12fb9b13bc5e06ee8

#: Tokens up to this many bytes are merged by a flat scan; longer ones (only malformed or
#: unusual files have them) by a linked list and a heap, so that a 200 KB token is not
#: quadratic. A tunable: ``recover_last_merges`` takes it as ``flat_bytes``; this is what
#: the Python caller (``io.tiktoken_format.recover_merges``) passes.
FLAT_BYTES = 64


@njit(cache=True, nogil=True)
def _rank_of(tok_data, a, c, whole_keys, tok_off):
    """Rank of the token whose bytes are ``tok_data[a:c]``, or -1."""
    h = hash_units(tok_data, a, c, HASH_SEED)
    return _whole_piece(tok_data, a, c, h, whole_keys, tok_off, tok_data)


@njit(cache=True, nogil=True)
def _pair_rank(tok_data, s, i, j, k, whole_keys, tok_off, r, longest):
    """Rank (< r) of the concatenated parts ``[i, j)`` and ``[j, k)`` of the token at ``s``,
    or ``r`` (never merges)."""
    if k - i > longest:
        return r
    t = _rank_of(tok_data, s + i, s + k, whole_keys, tok_off)
    if t < 0 or t >= r:
        return r
    return t


@njit(cache=True, nogil=True)
def _cut_flat(tok_data, s, n, r, longest, whole_keys, tok_off, bnd, rk):
    """Boundaries left by merging the token's bytes with ranks < r (flat scan, each pair's
    rank looked up once and kept in ``rk``); returns the number of parts, with
    ``bnd[:parts + 1]`` the boundaries."""
    for i in range(n + 1):
        bnd[i] = i
    for i in range(n - 1):
        rk[i] = _pair_rank(tok_data, s, i, i + 1, i + 2, whole_keys, tok_off, r, longest)
    parts = n
    while parts > 2:
        best = r
        bi = -1
        for i in range(parts - 1):
            if rk[i] < best:  # strict: the leftmost of equal ranks
                best = rk[i]
                bi = i
        if bi < 0:
            break
        for i in range(bi + 1, parts):
            bnd[i] = bnd[i + 1]
        for i in range(bi + 1, parts - 2):
            rk[i] = rk[i + 1]
        parts -= 1
        if bi > 0:
            rk[bi - 1] = _pair_rank(tok_data, s, bnd[bi - 1], bnd[bi], bnd[bi + 1], whole_keys,
                                    tok_off, r, longest)
        if bi < parts - 1:
            rk[bi] = _pair_rank(tok_data, s, bnd[bi], bnd[bi + 1], bnd[bi + 2], whole_keys,
                                tok_off, r, longest)
    return parts


@njit(cache=True, nogil=True)
def _cut_heap(tok_data, s, n, r, longest, whole_keys, tok_off, bnd):
    """``_cut_flat`` with a linked list and a heap of ``(rank << 32) | start`` keys."""
    nxt = np.empty(n + 1, dtype=np.int64)
    prv = np.empty(n + 1, dtype=np.int64)
    alive = np.ones(n + 1, dtype=np.bool_)
    for i in range(n + 1):
        nxt[i] = i + 1
        prv[i] = i - 1
    heap = np.empty(3 * n + 1, dtype=np.int64)
    hn = 0
    for i in range(n - 1):
        t = _pair_rank(tok_data, s, i, i + 1, i + 2, whole_keys, tok_off, r, longest)
        if t < r:
            hn = _heap_push(heap, hn, (t << 32) | i)
    parts = n
    while parts > 2 and hn > 0:
        item, hn = _heap_pop(heap, hn)
        t = item >> 32
        i = item & 0xFFFFFFFF
        if not alive[i] or nxt[i] >= n:
            continue
        j = nxt[i]
        if _pair_rank(tok_data, s, i, j, nxt[j], whole_keys, tok_off, r, longest) != t:
            continue  # stale: this part or its right neighbour changed
        alive[j] = False
        nxt[i] = nxt[j]
        prv[nxt[i]] = i
        parts -= 1
        p = prv[i]
        if p >= 0:
            tp = _pair_rank(tok_data, s, p, i, nxt[i], whole_keys, tok_off, r, longest)
            if tp < r:
                hn = _heap_push(heap, hn, (tp << 32) | p)
        if nxt[i] < n:
            ti = _pair_rank(tok_data, s, i, nxt[i], nxt[nxt[i]], whole_keys, tok_off, r,
                            longest)
            if ti < r:
                hn = _heap_push(heap, hn, (ti << 32) | i)
    k = 0
    i = 0
    while i < n:
        bnd[k] = i
        k += 1
        i = nxt[i]
    bnd[k] = n
    return parts


@njit(cache=True, nogil=True)
def recover_last_merges(tok_off, tok_data, whole_keys, flat_bytes):
    """The two parts of every token's last merge under tiktoken's rule.

    Parameters
    ----------
    tok_off : int64[n_tokens + 1]
        Offsets of each token's bytes in ``tok_data``; tokens in rank order, the first
        256 single bytes (validated by the caller: distinct, non-empty).
    tok_data : uint8[m]
        The tokens' bytes, concatenated.
    whole_keys : int64[cap]
        Bytes -> rank table from ``kernels.encode.build_whole_table``.
    flat_bytes : int
        Tokens of up to this many bytes are cut by the flat scan, longer ones by the heap
        (>= 0; the result is the same either way, only the time differs).

    Returns
    -------
    parts : int64[n_tokens, 2]
        For rank r >= 256: the ranks of the two parts that tiktoken's byte-pair merge of
        token r's bytes, using only ranks < r, ends with; ``-1, -1`` when it does not end
        in exactly two parts. Rows below 256 are -1.
    """
    n_tokens = tok_off.shape[0] - 1
    out = np.full((n_tokens, 2), -1, dtype=np.int64)
    longest = 1  # the longest token of rank < r: longer pairs cannot have a rank
    max_len = 1
    for t in range(n_tokens):
        max_len = max(max_len, tok_off[t + 1] - tok_off[t])
    for t in range(min(256, n_tokens)):
        longest = max(longest, tok_off[t + 1] - tok_off[t])
    bnd = np.empty(max_len + 1, dtype=np.int64)
    rk = np.empty(flat_bytes, dtype=np.int64)
    for r in range(256, n_tokens):
        s = tok_off[r]
        n = tok_off[r + 1] - s
        if n <= flat_bytes:
            parts = _cut_flat(tok_data, s, n, r, longest, whole_keys, tok_off, bnd, rk)
        else:
            parts = _cut_heap(tok_data, s, n, r, longest, whole_keys, tok_off, bnd)
        if parts == 2:
            out[r, 0] = _rank_of(tok_data, s, s + bnd[1], whole_keys, tok_off)
            out[r, 1] = _rank_of(tok_data, s + bnd[1], s + n, whole_keys, tok_off)
        longest = max(longest, n)
    return out


@njit(cache=True, nogil=True)
def split_pairs(tok_off, tok_data, whole_keys, n_base):
    """Every split of every token into two tokens: the ``ranks`` encoder's pair table.

    Parameters
    ----------
    tok_off : int64[n_tokens + 1]
        Offsets of each token's bytes in ``tok_data`` (distinct tokens).
    tok_data : uint8[m]
        The tokens' bytes, concatenated.
    whole_keys : int64[cap]
        Bytes -> id table of the same tokens (``kernels.encode.build_whole_table``).
    n_base : int
        Tokens below this id are base symbols (never split).

    Returns
    -------
    lefts, rights, results : int32[k]
        For each token ``t >= n_base`` in id order and each cut ``1 <= c < len(t)`` in
        order, where both ``t[:c]`` and ``t[c:]`` are tokens: their ids and ``t``.
        ``Tokenizer._split_pairs``'s Python twin is the specification.
    """
    n_tokens = tok_off.shape[0] - 1
    count = 0
    for pass_ in range(2):
        if pass_ == 1:
            lefts = np.empty(count, dtype=np.int32)
            rights = np.empty(count, dtype=np.int32)
            results = np.empty(count, dtype=np.int32)
        k = 0
        for t in range(n_base, n_tokens):
            s = tok_off[t]
            e = tok_off[t + 1]
            for c in range(s + 1, e):
                a = _rank_of(tok_data, s, c, whole_keys, tok_off)
                if a < 0:
                    continue
                b = _rank_of(tok_data, c, e, whole_keys, tok_off)
                if b < 0:
                    continue
                if pass_ == 1:
                    lefts[k] = a
                    rights[k] = b
                    results[k] = t
                k += 1
        count = k
    return lefts, rights, results
