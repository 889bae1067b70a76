"""The encoding kernel: replay frozen merges by rank on pre-tokenized text.

Per pre-token ("piece"), start from its base symbols and repeatedly merge the adjacent pair
with the lowest merge rank, the leftmost one on equal rank, until no adjacent pair has a
rank. Nothing in the input is counted, and this is not longest-match.

Short pieces use a flat array (an O(n^2) scan that beats any heap for a handful of
symbols). Pieces longer than ``long_piece`` units use linked lists, so a pathological
piece (a megabyte of digits or spaces) is never O(n^2):

* ``_merge_windowed`` cuts the piece into overlapping windows of ``sweep_window`` units
  that stay in cache and joins their encodings where they share a token (exact, see its
  docstring); each window is merged by the rank sweep (``_merge_sweep``): positions are
  queued per rank and each rank is merged in one pass, O(n log k) for k distinct ranks.
  The sweep needs each merge to make only pairs of higher rank (always true of trained
  tables); where a merge does not, it gives up and that window goes to the heap;
* the heap (``_merge_long``): a binary min-heap of ``(rank << 32) | position`` keys,
  O(n log n); also the BPE-dropout path.

Merging never crosses pieces, so a piece's ids are looked up before they are merged
(``piece_cache.py``): the vocabulary's own short tokens, a persistent cache of the pieces
earlier calls merged (read only during a call), and each block's table of the pieces it
merged itself; after the parallel loop the blocks' tables are added to the cache serially.
"""

import numpy as np
from numba import njit, prange

from .hashing import (EMPTY, HASH_SEED, hash_slot, hash_units, interleaved_get, pair_key,
                      prefetch, same_units)
from .backtrack import encode_piece, new_memo
from .piece_cache import (LONG_TAG, S_BLOCK_HITS, S_HITS, S_MERGED, S_PUBLISH, SHORT_BYTES,  # noqa: F401
                          SHORT_ID_BITS, SHORT_ID_MASK, SHORT_MAX_IDS, emit, emit_packed, get,
                          pack_ids, packable, publish, put, short_key, short_key_tail,
                          short_mix)
#: kernel cache stamp: 68823ae3c07f039e59178f8a2646b92d3f143471c625529e691489fc93ececc0

NO_RANK = np.int64(-1)
#: A packed value's count field for one id (``piece_cache.pack_ids`` of a single id).
ONE_ID = np.int64(1) << 60
LOW32 = np.int64(0xFFFFFFFF)
#: The sweep keeps positions and its up to 3 n list entries in int32: longer pieces (over
#: 700 MB) take the heap path.
SWEEP_MAX_UNITS = (2**31 - 1) // 3
#: Slots of a block's front table (24 bytes each: 192 KiB, in L2 beside the scan's data).
FRONT_SLOTS = 8192
#: Slots a block's table starts with (24 KiB); it doubles as it fills, up to its cap.
BLOCK_FIRST_SLOTS = 1024
#: The encoder reads each piece's keys this many pieces ahead and prefetches the slots of
#: the tables it will probe (``_encode_block``); a power of two, the size of its ring of keys.
LOOKAHEAD = 16
#: A hashed (long) piece's cache slot, prefetched LOOKAHEAD pieces ahead, is read this many
#: pieces ahead, and the arena lines its entry points at (its units, its ids) prefetched.
CHECK_AHEAD = 8


# The helpers called per piece or per pair that never allocate are compiled without
# reference counting (``_nrt=False``): a call that LLVM does not inline otherwise pays an
# atomic increment and decrement per array argument (9% of the samples when encoding
# SuperBPE's distinct stage-2 segments, whole pieces of up to 250 bytes).
@njit(cache=True, nogil=True, _nrt=False)
def _short_lookup(table, key, key2):
    """Packed ids stored for ``(key, key2)`` in an interleaved short-piece table, or -1."""
    mask = table.shape[0] // 3 - 1
    i = short_mix(key, key2) & mask
    while True:
        k = table[3 * i]
        if k == key and table[3 * i + 1] == key2:
            return table[3 * i + 2]
        if k == EMPTY:
            return NO_RANK
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def build_short_table(data, piece_offsets, ids, id_offsets):
    """The short-piece table: packed bytes of a piece -> its packed ids.

    Parameters
    ----------
    data : uint8[m]
        Candidate pieces' bytes, concatenated (each 2 .. SHORT_BYTES bytes).
    piece_offsets : int64[n + 1]
        Candidate boundaries in ``data``.
    ids : int32[k]
        The encoder's ids of the candidates, concatenated (each encoded as a document of
        its own, so a hit returns exactly what merging would return, in either merge mode).
    id_offsets : int64[n + 1]
        Candidate boundaries in ``ids``; a candidate of more than SHORT_MAX_IDS ids, or
        with an id of SHORT_ID_BITS bits or more, is left out.

    Returns
    -------
    table : int64[3 * cap]
        Slot i holds the keys at ``3 i`` (``EMPTY`` when free) and ``3 i + 1``, the packed
        ids at ``3 i + 2``: keys and value share a cache line (mostly), so a probe costs
        one memory access.
    """
    n = piece_offsets.shape[0] - 1
    keep = np.zeros(n, dtype=np.bool_)
    m = 0
    for p in range(n):
        c = id_offsets[p + 1] - id_offsets[p]
        ok = 1 <= c <= SHORT_MAX_IDS
        for k in range(id_offsets[p], id_offsets[p + 1]):
            if ids[k] < 0 or ids[k] > SHORT_ID_MASK:
                ok = False
        keep[p] = ok
        m += ok
    cap = 16
    while cap < 2 * m:
        cap *= 2
    table = np.full(3 * cap, EMPTY, dtype=np.int64)
    mask = cap - 1
    for p in range(n):
        if not keep[p]:
            continue
        s = piece_offsets[p]
        key, key2 = short_key(data, s, piece_offsets[p + 1] - s)
        i = short_mix(key, key2) & mask
        while table[3 * i] != EMPTY and not (table[3 * i] == key and table[3 * i + 1] == key2):
            i = (i + 1) & mask
        table[3 * i] = key
        table[3 * i + 1] = key2
        table[3 * i + 2] = pack_ids(ids, id_offsets[p], id_offsets[p + 1] - id_offsets[p])
    return table


@njit(cache=True, nogil=True, _nrt=False)
def _lookup(pairs, a, b):
    """``(rank << 32) | new_id`` of pair (a, b), or -1 when the pair has no merge.

    ``pairs`` is the rank table interleaved (``hashing.interleave_table``): a probe reads
    key and value from one cache line.
    """
    return interleaved_get(pairs, pair_key(a, b), NO_RANK)


@njit(cache=True, nogil=True)
def build_byte_pairs(keys, vals):
    """``(rank << 32) | new_id`` of every pair of ids below 256 (-1: no merge), dense.

    Parameters
    ----------
    keys, vals : int64[cap]
        The rank table (``hashing.build_rank_table``).

    Returns
    -------
    byte_pairs : int64[65536]
        Entry ``a * 256 + b``: what ``_lookup`` returns for pair (a, b). The first round
        of merging a piece looks up only such pairs (its base symbols): 512 KB that stay
        in cache instead of a probe of a table of hundreds of thousands of pairs.
    """
    out = np.full(65536, NO_RANK, dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        if k == EMPTY:
            continue
        a = k >> 32
        b = k & LOW32
        if a < 256 and b < 256:
            out[a * 256 + b] = vals[i]
    return out


@njit(cache=True, nogil=True, _nrt=False)
def _merge_short(buf, n, rk, pairs, byte_pairs):
    """Merge ``buf[:n]`` in place by scanning for the best pair; returns the new length.

    ``rk[i]`` holds the packed ``(rank << 32) | new_id`` of pair ``(buf[i], buf[i+1])``;
    pairs are compared by rank alone and the strict ``<`` keeps the leftmost of equal
    ranks (as the heap path does with its ``(rank << 32) | position`` keys). The first
    round reads pairs of ids below 256 from ``byte_pairs`` (``build_byte_pairs``; an
    empty array: the rank table only).
    """
    dense = byte_pairs.shape[0] == 65536
    for i in range(n - 1):
        a = buf[i]
        b = buf[i + 1]
        if dense and a < 256 and b < 256:
            rk[i] = byte_pairs[a * 256 + b]
        else:
            rk[i] = _lookup(pairs, a, b)
    while n > 1:
        best = NO_RANK
        bi = -1
        for i in range(n - 1):
            v = rk[i]
            if v >= 0 and (bi < 0 or (v >> 32) < (best >> 32)):
                best = v
                bi = i
        if bi < 0:
            break
        buf[bi] = best & LOW32
        for j in range(bi + 1, n - 1):
            buf[j] = buf[j + 1]
        for j in range(bi + 1, n - 2):
            rk[j] = rk[j + 1]
        n -= 1
        if bi > 0:
            rk[bi - 1] = _lookup(pairs, buf[bi - 1], buf[bi])
        if bi < n - 1:
            rk[bi] = _lookup(pairs, buf[bi], buf[bi + 1])
    return n


@njit(cache=True, nogil=True, _nrt=False)
def _heap_push(heap, n, item):
    heap[n] = item
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return n + 1


@njit(cache=True, nogil=True, _nrt=False)
def _heap_pop(heap, n):
    top = heap[0]
    n -= 1
    heap[0] = heap[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        c = left
        if left + 1 < n and heap[left + 1] < heap[left]:
            c = left + 1
        if heap[i] <= heap[c]:
            break
        heap[i], heap[c] = heap[c], heap[i]
        i = c
    return top, n


@njit(cache=True, nogil=True)
def _xorshift32(state):
    """Next state of a 32-bit xorshift generator (all arithmetic stays below 2**63)."""
    x = state
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


@njit(cache=True, nogil=True, _nrt=False)
def _merge_mid(buf, n, rk, nxt, prv, heap, pairs, byte_pairs):
    """Merge ``buf[:n]`` in place with a linked list and a min-heap; returns the new length.

    For pieces of a few dozen to a few hundred units, where ``_merge_short``'s rescan and
    shift of the whole piece per merge costs more than a heap (CJK text: most of its bytes
    are in pieces of 16-128 bytes). Like ``_merge_long`` without dropout, but an entry is
    checked against ``rk`` (the current pair value at each position) instead of a second
    lookup, and the first round reads ``byte_pairs``.

    Exact: heap keys are ``(rank << 32) | position``, so the pop is the lowest rank, the
    leftmost on equal rank. Every live pair at position i has an entry with key
    ``(rank of rk[i], i)`` (pushed when ``rk[i]`` was set); an entry whose rank is not
    ``rk[i]``'s any more is stale and dropped, and one whose rank still is stands for the
    pair now at i, which has that rank and position: popping it is right either way.

    Parameters
    ----------
    buf : int32[>= n]
        Base ids in (n >= 2), token ids out (``buf[:m]``).
    n : int
        Number of symbols.
    rk : int64[>= n]
        Scratch: packed ``(rank << 32) | new_id`` of pair (i, nxt[i]), -1 when none.
    nxt, prv : int32[>= n]
        Scratch: the linked list of live positions.
    heap : int64[>= 3 n]
        Scratch: the heap (n - 1 initial entries, at most two more per merge).
    pairs : int64[2 * cap]
        The interleaved merge-rank table.
    byte_pairs : int64[65536] or int64[0]
        ``build_byte_pairs`` (empty: the rank table only).
    """
    dense = byte_pairs.shape[0] == 65536
    hn = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    for i in range(n - 1):
        a = buf[i]
        b = buf[i + 1]
        if dense and a < 256 and b < 256:
            v = byte_pairs[a * 256 + b]
        else:
            v = _lookup(pairs, a, b)
        rk[i] = v
        if v >= 0:
            hn = _heap_push(heap, hn, ((v >> 32) << 32) | i)
    rk[n - 1] = NO_RANK
    while hn > 0:
        item, hn = _heap_pop(heap, hn)
        i = item & LOW32
        v = rk[i]
        if v < 0 or (v >> 32) != (item >> 32):
            continue  # stale: the pair at i was merged or changed since
        j = nxt[i]
        buf[i] = v & LOW32
        rk[j] = NO_RANK  # j is gone: its entries are stale from now on
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
        p = prv[i]
        if p >= 0:
            w = _lookup(pairs, buf[p], buf[i])
            rk[p] = w
            if w >= 0:
                hn = _heap_push(heap, hn, ((w >> 32) << 32) | p)
        w = NO_RANK
        if k < n:
            w = _lookup(pairs, buf[i], buf[k])
            if w >= 0:
                hn = _heap_push(heap, hn, ((w >> 32) << 32) | i)
        rk[i] = w
    m = 0
    i = 0
    while i < n:
        buf[m] = buf[i]
        m += 1
        i = nxt[i]
    return m


@njit(cache=True, nogil=True)
def _merge_long(buf, n, pairs, dropout, rng, starts):
    """Merge ``buf[:n]`` in place with a linked list and a min-heap; returns the new length.

    With ``dropout > 0`` (BPE-dropout), each applicable merge is skipped with probability
    ``dropout``; skipped merges become applicable again after the next merge that happens
    (Hugging Face's rule). ``rng`` is int64[1], the generator state (nonzero), updated.
    ``starts`` (int32[>= n], or empty to skip) receives each token's first offset.
    """
    nxt = np.empty(n, dtype=np.int64)
    prv = np.empty(n, dtype=np.int64)
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    # Each merge pushes at most two entries: n - 1 initial + 2 (n - 1) later; skipped
    # entries are parked in ``skipped`` and pushed back, so the bound still holds.
    heap = np.empty(3 * n, dtype=np.int64)
    skipped = np.empty(3 * n if dropout > 0.0 else 0, dtype=np.int64)
    n_skipped = 0
    hn = 0
    for i in range(n - 1):
        v = _lookup(pairs, buf[i], buf[i + 1])
        if v >= 0:
            hn = _heap_push(heap, hn, ((v >> 32) << 32) | i)
    while hn > 0:
        item, hn = _heap_pop(heap, hn)
        rank = item >> 32
        i = item & LOW32
        if buf[i] < 0:
            continue  # this position was merged into its left neighbour
        j = nxt[i]
        if j >= n:
            continue
        v = _lookup(pairs, buf[i], buf[j])
        if v < 0 or (v >> 32) != rank:
            continue  # stale: the pair at i changed since this entry was pushed
        if dropout > 0.0:
            rng[0] = _xorshift32(rng[0])
            if rng[0] < dropout * 4294967296.0:
                skipped[n_skipped] = item
                n_skipped += 1
                continue
            for k in range(n_skipped):
                hn = _heap_push(heap, hn, skipped[k])
            n_skipped = 0
        buf[i] = v & LOW32
        buf[j] = -1
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
        if prv[i] >= 0:
            v = _lookup(pairs, buf[prv[i]], buf[i])
            if v >= 0:
                hn = _heap_push(heap, hn, ((v >> 32) << 32) | prv[i])
        if nxt[i] < n:
            v = _lookup(pairs, buf[i], buf[nxt[i]])
            if v >= 0:
                hn = _heap_push(heap, hn, ((v >> 32) << 32) | i)
    keep_starts = starts.shape[0] > 0
    m = 0
    i = 0
    while i < n:
        buf[m] = buf[i]
        if keep_starts:
            starts[m] = i
        m += 1
        i = nxt[i]
    return m


@njit(cache=True, nogil=True)
def sweep_rank_count(keys, vals):
    """Size of the rank sweep's per-rank list heads: ``1 + the largest rank`` (0: no merges).

    Parameters
    ----------
    keys, vals : int64[cap]
        The merge-rank table from ``hashing.build_rank_table``.

    Returns
    -------
    int
        ``head`` for ``_merge_sweep`` is ``int32[this]``.
    """
    max_rank = -1
    for s in range(keys.shape[0]):
        if keys[s] != EMPTY:
            max_rank = max(max_rank, vals[s] >> 32)
    return max_rank + 1


@njit(cache=True, nogil=True, _nrt=False)
def _sweep_push(head, ent_pos, ent_next, n_ent, ranks, n_ranks_live, v, pos):
    """Queue position ``pos`` (whose pair has packed value ``v``) on its rank's list."""
    r = v >> 32
    if head[r] < 0:
        n_ranks_live = _heap_push(ranks, n_ranks_live, r)
    ent_pos[n_ent] = pos
    ent_next[n_ent] = head[r]
    head[r] = n_ent
    return n_ent + 1, n_ranks_live


@njit(cache=True, nogil=True)
def _merge_sweep(buf, n, pairs, head, starts):
    """Merge ``buf[:n]`` in place rank by rank; returns the new length, or -1 (see below).

    Exactly the lowest-rank-leftmost-first rule, in O(n log k) for k distinct ranks. Each
    position whose pair has rank r is queued on list r; ranks are taken in increasing
    order from a small heap. While every merge at rank r only creates pairs of higher
    rank, the pairs of rank r fall into independent chains of adjacent positions, and
    each chain is merged from its left end (the leftmost pair first, as the rule says),
    whichever entry of the list reached it first. Trained tables always satisfy this (a
    merge outranks the merges that made its parts); when a table does not and a merge at
    rank r creates a pair of rank <= r, the sweep stops and returns -1 (``buf`` is then
    garbage; the caller merges a fresh copy with the heap).

    Chains are taken in list order, not left to right. When a chain ends next to a token
    that an earlier chain of the same rank already merged, the rule would have met the
    pair (new token, that token's left part) first, so that pair is checked too
    (``left_part``, ``merged_at``); checking only the pair with the merged token misses
    a lower-rank pair that a hand-made table can hold.

    Parameters
    ----------
    buf : int32[>= n]
        The piece's base ids (n >= 1); on return ``buf[:m]`` holds its token ids.
    n : int
        Number of symbols.
    pairs : int64[2 * cap]
        The merge-rank table.
    head : int32[sweep_rank_count(keys, vals)]
        Scratch list heads, all -1 on entry; all -1 again on return.
    starts : int32[>= n]
        Output: ``starts[k]`` is the offset in the piece of token ``k``'s first unit.
    """
    nxt = np.empty(n, dtype=np.int32)
    prv = np.empty(n, dtype=np.int32)
    pair = np.empty(n, dtype=np.int64)  # packed (rank, new id) of pair (i, nxt[i]), or -1
    # n - 1 initial entries and at most two per merge (n - 1 merges at most).
    ent_pos = np.empty(3 * n, dtype=np.int32)
    ent_next = np.empty(3 * n, dtype=np.int32)
    ranks = np.empty(min(head.shape[0], 3 * n) + 1, dtype=np.int64)
    # For a position merged (as the left token) at rank merged_at[i]: its token before.
    left_part = np.empty(n, dtype=np.int32)
    merged_at = np.empty(n, dtype=np.int64)
    n_ent = 0
    n_live = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        merged_at[i] = -1
    pair[n - 1] = NO_RANK
    for i in range(n - 1):
        v = _lookup(pairs, buf[i], buf[i + 1])
        pair[i] = v
        if v >= 0:
            n_ent, n_live = _sweep_push(head, ent_pos, ent_next, n_ent, ranks, n_live, v, i)
    broken = False
    while n_live > 0 and not broken:
        r, n_live = _heap_pop(ranks, n_live)
        e = head[r]
        head[r] = -1
        while e >= 0 and not broken:
            i = ent_pos[e]
            e = ent_next[e]
            if pair[i] < 0 or (pair[i] >> 32) != r:
                continue  # stale: the pair at i was merged or changed since
            # Walk to the left end of this chain of rank-r pairs.
            while prv[i] >= 0 and pair[prv[i]] >= 0 and (pair[prv[i]] >> 32) == r:
                i = prv[i]
            # Merge the chain left to right: after merging (i, j), the next candidate
            # is the pair starting right after the new token.
            while True:
                j = nxt[i]
                left_part[i] = buf[i]
                merged_at[i] = r
                buf[i] = pair[i] & LOW32
                k = nxt[j]
                nxt[i] = k
                pair[j] = NO_RANK
                if k < n:
                    prv[k] = i
                p = prv[i]
                if p >= 0:
                    v = _lookup(pairs, buf[p], buf[i])
                    pair[p] = v
                    if v >= 0:
                        if (v >> 32) <= r:
                            broken = True
                            break
                        n_ent, n_live = _sweep_push(head, ent_pos, ent_next, n_ent, ranks,
                                                    n_live, v, p)
                if k >= n:
                    pair[i] = NO_RANK
                    break
                v = _lookup(pairs, buf[i], buf[k])
                pair[i] = v
                if v >= 0 and (v >> 32) <= r:
                    broken = True
                    break
                if merged_at[k] == r:
                    # k's chain went first; the rule merges this one first and meets
                    # (new token, k's old token) before k is merged.
                    w = _lookup(pairs, buf[i], left_part[k])
                    if w >= 0 and (w >> 32) <= r:
                        broken = True
                        break
                if pair[k] >= 0 and (pair[k] >> 32) == r:
                    i = k  # the chain goes on; merging at k recomputes the pair at i
                    continue
                if v >= 0:
                    n_ent, n_live = _sweep_push(head, ent_pos, ent_next, n_ent, ranks,
                                                n_live, v, i)
                break
    if broken:
        head[r] = -1
        while n_live > 0:  # leave the list heads empty for the next call
            r, n_live = _heap_pop(ranks, n_live)
            head[r] = -1
        return -1
    m = 0
    i = 0
    while i < n:
        buf[m] = buf[i]
        starts[m] = i
        m += 1
        i = nxt[i]
    return m


@njit(cache=True, nogil=True, _nrt=False)
def _load_units(units, sym_map, start, ids, n):
    """``ids[:n]`` = base ids of ``units[start:start + n]`` (through ``sym_map`` unless it
    is empty, when the units are base ids already)."""
    if sym_map.shape[0] > 0:
        for k in range(n):
            ids[k] = sym_map[units[start + k]]
    else:
        for k in range(n):
            ids[k] = units[start + k]


@njit(cache=True, nogil=True)
def _sweep_window(units, sym_map, s, x0, x1, pairs, head, ids, starts):
    """Encode the piece's units ``x0:x1`` (``units[s + x0:s + x1]``) into ``ids[:m]``, with
    token starts (offsets in the piece) in ``starts[:m + 1]`` (``starts[m] = x1``);
    returns ``m``. The sweep, or the heap where the sweep gives up."""
    n = x1 - x0
    _load_units(units, sym_map, s + x0, ids, n)
    m = _merge_sweep(ids, n, pairs, head, starts)
    if m < 0:
        _load_units(units, sym_map, s + x0, ids, n)
        m = _merge_long(ids, n, pairs, 0.0, np.ones(1, dtype=np.int64), starts)
    for k in range(m):
        starts[k] += x0
    starts[m] = x1
    return m


@njit(cache=True, nogil=True)
def _merge_windowed(units, sym_map, s, n, pairs, head, window, margin, out, o):
    """Merge one piece window by window, so each window's work stays in cache; writes its
    ids to ``out[o:o + m]`` and returns ``m``. Exact: where windows do not meet, the piece
    is merged whole.

    Why it is exact: any run of consecutive tokens of a BPE encoding is itself the encoding
    of its text, and two encodings that share one token at the same span join at it into
    the encoding of their union (github/rust-gems ``bpe``, corollaries II and III; the
    argument needs only the lowest-rank-leftmost rule). So after encoding window A, the
    next window B starts at the start of a token of A about ``margin`` units before A's
    end; where A and B first hold the same token at the same span, A's tokens up to it
    and B's from it on form the encoding of both windows' text. If they share no token,
    B starts 4, then 16... times further back; if they still do not meet, the whole
    piece is merged at once instead. Each window is merged by ``_merge_sweep`` (or by
    the heap where the sweep gives up).

    Parameters
    ----------
    units : uint8[:] or int32[:]
        Input units; the piece is ``units[s:s + n]`` (n >= 1).
    sym_map : int32[k] or int32[0]
        Base id of each unit value; empty when the units are base ids already.
    s, n : int
        Start and length of the piece in ``units``.
    pairs : int64[2 * cap]
        The merge-rank table.
    head : int32[sweep_rank_count(keys, vals)]
        Scratch list heads, all -1 on entry and on return.
    window, margin : int
        Units committed per window and units of overlap (``window > margin > 0``).
    out : int32[>= o + n]
        Output, a different array from ``units``; ``out[o:o + n]`` may be overwritten.
    o : int
        Where the piece's ids go.
    """
    span = window + margin
    if n <= span:
        return _sweep_window(units, sym_map, s, 0, n, pairs, head, out[o:o + n],
                             np.empty(n + 1, dtype=np.int32))
    a_ids = np.empty(span, dtype=np.int32)
    a_st = np.empty(span + 1, dtype=np.int32)
    b_ids = np.empty(span, dtype=np.int32)
    b_st = np.empty(span + 1, dtype=np.int32)
    xa = 0
    ea = span
    na = _sweep_window(units, sym_map, s, xa, ea, pairs, head, a_ids, a_st)
    ia = 0  # A's tokens before ia are committed to out[o:o + m]
    m = 0
    while ea < n:
        # Cut at the last token of A starting at least `back` units before A's end (A's
        # last tokens may differ from the piece's: A ends where the piece does not); if
        # the windows do not meet, cut further back.
        back = margin
        found = False
        while True:
            c = na - 1
            while c > ia and a_st[c] > ea - back:
                c -= 1
            if a_st[c] <= xa:
                break  # a token as long as the window: no progress possible
            xb = a_st[c]
            eb = min(n, xb + span)
            nb = _sweep_window(units, sym_map, s, xb, eb, pairs, head, b_ids, b_st)
            # The first token both encodings hold at the same span.
            i = c
            j = 0
            while i < na and j < nb:
                if a_st[i] == b_st[j]:
                    if a_st[i + 1] == b_st[j + 1] and a_ids[i] == b_ids[j]:
                        found = True
                        break
                    i += 1
                    j += 1
                elif a_st[i] < b_st[j]:
                    i += 1
                else:
                    j += 1
            if found or c == ia or back >= span // 2:
                break
            back *= 4
        if not found:
            # No shared token in some overlap: merge the whole piece (still exact).
            return _sweep_window(units, sym_map, s, 0, n, pairs, head, out[o:o + n],
                                 np.empty(n + 1, dtype=np.int32))
        for k in range(ia, i):
            out[o + m] = a_ids[k]
            m += 1
        a_ids, b_ids = b_ids, a_ids
        a_st, b_st = b_st, a_st
        na = nb
        ia = j
        xa = xb
        ea = eb
    for k in range(ia, na):
        out[o + m] = a_ids[k]
        m += 1
    return m


@njit(cache=True, nogil=True, _nrt=False)
def _whole_piece(data, s, e, h, whole_keys, tok_off, tok_data):
    """Id of the token whose bytes equal ``data[s:e]`` (hash ``h``), or -1."""
    mask = whole_keys.shape[0] - 1
    i = hash_slot(h) & mask
    n = e - s
    while True:
        t = whole_keys[i]
        if t == EMPTY:
            return -1
        if tok_off[t + 1] - tok_off[t] == n and same_units(tok_data, tok_off[t], data, s, n):
            return t
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def build_whole_table(tok_off, tok_data, n_tokens):
    """Bytes -> id table of tokens ``0 .. n_tokens-1`` for whole-piece lookup.

    Parameters
    ----------
    tok_off : int64[n_tokens + 1]
        Offsets of each token's bytes in ``tok_data``.
    tok_data : uint8[m]
        The tokens' bytes, concatenated.

    Returns
    -------
    whole_keys : int64[cap]
        Token ids in open-addressing slots (hash of the bytes), ``EMPTY`` elsewhere.
    """
    cap = 16
    while cap < 2 * n_tokens:
        cap *= 2
    keys = np.full(cap, EMPTY, dtype=np.int64)
    mask = cap - 1
    for t in range(n_tokens):
        h = hash_units(tok_data, tok_off[t], tok_off[t + 1], HASH_SEED)
        i = hash_slot(h) & mask
        while keys[i] != EMPTY:
            i = (i + 1) & mask
        keys[i] = t
    return keys


@njit(cache=True, nogil=True, _nrt=False)
def _remember(front, fs, key, key2, v):
    """Keep a short piece in its block's front table (slot ``fs``, a multiple of 3) when
    its ids are packed (``v > 0``); the slot's previous piece is dropped."""
    if v > 0:
        front[fs] = key
        front[fs + 1] = key2
        front[fs + 2] = v


@njit(cache=True, nogil=True)
def _encode_block(data, sym_map, piece_offsets, piece_special, doc_piece_offsets, pairs,
                  whole_keys, tok_off, tok_data, short_table, byte_pairs, bt_trie, bt_node_tok,
                  bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r, bt_pair_keys,
                  bt_pair_vals, dropout, seed, long_piece, sweep_ranks, sweep_window,
                  sweep_margin, cache_units, scan_piece, bt_piece, ctab, cunits, cids, btab, base,
                  bcap, d0, d1, out, doc_counts, stats):
    """Encode documents ``d0 .. d1-1`` into ``out``, back to back from the block's first unit
    (a block's ids never outnumber its units, so blocks never overlap); ``doc_counts[d]``
    gets each document's number of ids.

    A piece is looked up, in this order, in the vocabulary's short-piece table, as a whole
    token, in the persistent cache (``ctab``, read only) and in the block's own table
    (up to ``bcap`` slots at ``btab[3 * base:]``, filled as it grows); only then merged,
    and its ids added to the block's table. ``stats`` (int64[5]) gets the cache hits, block
    hits, merged pieces, the entries of the block's table and the slots it grew to.
    """
    use_whole = whole_keys.shape[0] > 0
    use_short = short_table.shape[0] > 0 and not dropout > 0.0
    has_special = piece_special.shape[0] > 0
    use_cache = dropout <= 0.0
    packed = data.itemsize == 1  # byte units: short pieces are keyed by their bytes
    use_bt = bt_trie.shape[0] > 0 and packed and not dropout > 0.0
    alive = np.empty(0, dtype=np.uint8)  # the backtracking's scratch, grown on first use
    memo = np.empty(0, dtype=np.int64)  # its memo of compatible pairs, made on first use
    gcap = ctab.shape[0] // 3
    rng = np.ones(1, dtype=np.int64)
    max_short = long_piece + 1
    buf = np.empty(max_short, dtype=np.int32)
    rk = np.empty(max_short, dtype=np.int64)
    head = np.empty(0, dtype=np.int32)  # the sweep's list heads, allocated on first use
    nxt = np.empty(0, dtype=np.int32)  # _merge_mid's scratch, allocated on first use
    prv = nxt
    heap = np.empty(0, dtype=np.int64)
    no_starts = np.empty(0, dtype=np.int32)
    # The front table: a direct-mapped copy of the block's most recent short pieces with
    # packed ids, small enough to stay in L2. The vocabulary's table and the cache (tens of
    # MB for a 200k vocabulary and multilingual text) then serve only the rarer pieces:
    # without it a warm cache still cost a DRAM access per piece.
    n_front = 16
    if use_cache and packed:
        block_pieces = doc_piece_offsets[d1] - doc_piece_offsets[d0]
        while n_front < FRONT_SLOTS and n_front < 2 * block_pieces:
            n_front *= 2
    front = np.full(3 * n_front, EMPTY, dtype=np.int64)
    fmask = n_front - 1
    fs = 0
    key_safe = data.shape[0] - SHORT_BYTES  # pieces starting here or before: two loads
    # Byte pieces are read LOOKAHEAD pieces ahead (keys into a ring, table slots prefetched):
    # a piece that misses the front table then finds the vocabulary's or the cache's slot
    # in cache (warm cache, cl100k, one thread: the 86 MB Parquet file's kernel time 15%
    # less, CJK 13%, code 7%). Not under dropout (no tables are read).
    ahead = packed and use_cache
    ring = np.empty(3 * LOOKAHEAD, dtype=np.int64)
    resolved = np.zeros(LOOKAHEAD, dtype=np.int64)
    la = doc_piece_offsets[d0]  # the next piece to look ahead at
    # Long pieces looked ahead at whose cache slot is still to be read (a ring of piece
    # indices, at most LOOKAHEAD of them pending).
    long_q = np.empty(LOOKAHEAD, dtype=np.int64)
    q_head = 0
    q_tail = 0
    p_end = doc_piece_offsets[d1]
    smask = short_table.shape[0] // 3 - 1
    n_block = 0  # entries in the block's table
    # The block's table starts small and doubles, up to ``bcap`` slots, as pieces are
    # merged: its slots are only filled as it grows. Filled whole up front, a 2 MiB
    # segment's table (6 MB) cost ~1,500 fresh pages per call, most never used once the
    # cache is warm (a fifth of a warm call on 10 MB of code, in page faults).
    bslots = min(bcap, BLOCK_FIRST_SLOTS)
    btab[3 * base:3 * (base + bslots)] = EMPTY
    hits = 0
    block_hits = 0
    merged = 0
    # Documents back to back: the pages of ``out`` touched are those the ids fill (each
    # document at its own first unit touched up to 4 bytes per unit of short documents).
    o = piece_offsets[doc_piece_offsets[d0]]
    for d in range(d0, d1):
        p0 = doc_piece_offsets[d]
        p1 = doc_piece_offsets[d + 1]
        o_start = o
        # Dropout draws depend only on (seed, document), never on threads or blocks.
        rng[0] = ((seed * 2654435761 + d * 40503 + 1) & 0xFFFFFFFF) | 1
        for _ in range(4):
            rng[0] = _xorshift32(rng[0])
        for p in range(p0, p1):
            if ahead:
                while la < p_end and la <= p + LOOKAHEAD - 1:
                    sq = piece_offsets[la]
                    nq = piece_offsets[la + 1] - sq
                    rq = 3 * (la & (LOOKAHEAD - 1))
                    vr = la & (LOOKAHEAD - 1)
                    la += 1
                    # A piece the look-ahead can settle (one byte, a special token, a short
                    # piece in the front table) gets its packed ids in ``resolved``: the
                    # main loop then only copies them out (0: not settled).
                    resolved[vr] = 0
                    if has_special and piece_special[la - 1] >= 0:
                        if piece_special[la - 1] <= SHORT_ID_MASK:
                            resolved[vr] = ONE_ID | piece_special[la - 1]
                        continue
                    if nq < 2:
                        if nq == 1 and sym_map[data[sq]] <= SHORT_ID_MASK:
                            resolved[vr] = ONE_ID | sym_map[data[sq]]
                        continue
                    if nq <= SHORT_BYTES:
                        if sq <= key_safe:
                            kq, kq2 = short_key(data, sq, nq)
                        else:
                            kq, kq2 = short_key_tail(data, sq, nq)
                        hq = short_mix(kq, kq2)
                        ring[rq] = kq
                        ring[rq + 1] = kq2
                        ring[rq + 2] = hq
                        fq = 3 * (hq & fmask)
                        if front[fq] == kq and front[fq + 1] == kq2:
                            resolved[vr] = front[fq + 2]
                        else:
                            if use_short:
                                prefetch(short_table, 3 * (hq & smask))
                            if gcap > 0:
                                prefetch(ctab, 3 * (hq & (gcap - 1)))
                    else:
                        hq = hash_units(data, sq, sq + nq, HASH_SEED)
                        ring[rq + 2] = hq
                        if gcap > 0:
                            prefetch(ctab, 3 * (hash_slot(hq) & (gcap - 1)))
                            long_q[q_tail & (LOOKAHEAD - 1)] = la - 1
                            q_tail += 1
                # A long piece's entry is confirmed against its units in the arena and its
                # ids copied from there: two more misses, a third of the kernel's samples on
                # CJK text (cl100k, warm cache) before these prefetches.
                while q_head < q_tail and long_q[q_head & (LOOKAHEAD - 1)] <= p + CHECK_AHEAD - 1:
                    lp = long_q[q_head & (LOOKAHEAD - 1)]
                    q_head += 1
                    hq = ring[3 * (lp & (LOOKAHEAD - 1)) + 2]
                    j = 3 * (hash_slot(hq) & (gcap - 1))
                    if ctab[j] == (LONG_TAG | hq):
                        prefetch(cunits, ctab[j + 1] >> 16)
                        vq = ctab[j + 2]
                        if vq < 0:
                            prefetch(cids, (~vq) >> 16)
                v = resolved[p & (LOOKAHEAD - 1)]
                if v > 0:
                    o += emit_packed(v, out, o)
                    continue
            s = piece_offsets[p]
            e = piece_offsets[p + 1]
            if has_special and piece_special[p] >= 0:
                out[o] = piece_special[p]
                o += 1
                continue
            n = e - s
            if n == 1:
                out[o] = sym_map[data[s]]
                o += 1
                continue
            key = NO_RANK
            key2 = np.int64(0)
            short = packed and n <= SHORT_BYTES
            r = 3 * (p & (LOOKAHEAD - 1))
            if short:
                if ahead:
                    key = ring[r]
                    key2 = ring[r + 1]
                    fs = 3 * (ring[r + 2] & fmask)
                else:
                    if s <= key_safe:  # tested here, not only inside: 2.5x faster keys (LLVM)
                        key, key2 = short_key(data, s, n)
                    else:
                        key, key2 = short_key_tail(data, s, n)
                    fs = 3 * (short_mix(key, key2) & fmask)
                if use_cache and front[fs] == key and front[fs + 1] == key2:
                    o += emit_packed(front[fs + 2], out, o)
                    continue
                if use_short:
                    # Most pieces of real text are a few bytes: one probe of the vocabulary's
                    # table, keyed by the bytes themselves. Every token of 2..SHORT_BYTES
                    # bytes is in it, so a miss is never a whole token.
                    v = _short_lookup(short_table, key, key2)
                    if v >= 0:
                        o += emit_packed(v, out, o)
                        if use_cache:
                            _remember(front, fs, key, key2, v)
                        continue
            h = np.int64(0)
            if not short:
                h = ring[r + 2] if ahead else hash_units(data, s, e, HASH_SEED)
            # A piece for the backtracking encoder skips the whole-token table: its first
            # walk down the trie finds a whole token too (``encode_piece``).
            bt_next_piece = use_bt and n > bt_piece
            if use_whole and not (short and use_short) and not bt_next_piece:
                if short:
                    h = hash_units(data, s, e, HASH_SEED)
                t = _whole_piece(data, s, e, h, whole_keys, tok_off, tok_data)
                if t >= 0:
                    out[o] = t
                    o += 1
                    continue
            cacheable = use_cache and n <= cache_units
            if cacheable:
                if not short:
                    key = LONG_TAG | h
                    key2 = (s << 16) | n
                v = get(ctab, 0, gcap, key, key2, cunits, data, s, n)
                if v != 0:
                    o += emit(v, cids, out, o)
                    if short:
                        _remember(front, fs, key, key2, v)
                    hits += 1
                    continue
                v = get(btab, base, bslots, key, key2, data, data, s, n)
                if v != 0:
                    o += emit(v, out, out, o)
                    if short:
                        _remember(front, fs, key, key2, v)
                    block_hits += 1
                    continue
            m = -1
            if bt_next_piece:
                # Linear-time backtracking (kernels/backtrack.py); -1: a byte without a
                # token of its own, merged below.
                if alive.shape[0] <= n:
                    alive = np.empty(max(n + 1, 2 * alive.shape[0]), dtype=np.uint8)
                if memo.shape[0] == 0:
                    memo = new_memo()
                m = encode_piece(data, s, n, bt_trie, bt_node_tok, bt_node_use, bt_tok_len,
                                 bt_next, bt_split_l, bt_split_r, bt_pair_keys, bt_pair_vals,
                                 alive, memo, out, o)
            if m >= 0:
                pass
            elif n <= long_piece and not dropout > 0.0:
                for k in range(n):
                    buf[k] = sym_map[data[s + k]]
                if n <= scan_piece:
                    m = _merge_short(buf, n, rk, pairs, byte_pairs)
                else:
                    if heap.shape[0] == 0:
                        nxt = np.empty(max_short, dtype=np.int32)
                        prv = np.empty(max_short, dtype=np.int32)
                        heap = np.empty(3 * max_short, dtype=np.int64)
                    m = _merge_mid(buf, n, rk, nxt, prv, heap, pairs, byte_pairs)
                for k in range(m):
                    out[o + k] = buf[k]
            elif sweep_ranks > 0 and not dropout > 0.0 and n < SWEEP_MAX_UNITS:
                if head.shape[0] == 0:
                    head = np.full(sweep_ranks, -1, dtype=np.int32)
                m = _merge_windowed(data, sym_map, s, n, pairs, head, sweep_window,
                                    sweep_margin, out, o)
            else:
                big = out[o:o + n]  # ids never outgrow the piece's units
                for k in range(n):
                    big[k] = sym_map[data[s + k]]
                m = _merge_long(big, n, pairs, dropout, rng, no_starts)
            merged += 1
            if cacheable:
                v = pack_ids(out, o, m) if packable(out, o, m) else ~((o << 16) | m)
                if short:
                    _remember(front, fs, key, key2, v)
            if cacheable and 2 * (n_block + 1) <= bcap:
                if 2 * (n_block + 1) > bslots:
                    bslots = _grow_block_table(btab, base, bslots)
                put(btab, base, bslots, key, key2, v)
                n_block += 1
            o += m
        doc_counts[d] = o - o_start
    stats[0] = hits
    stats[1] = block_hits
    stats[2] = merged
    stats[3] = n_block
    stats[4] = bslots


@njit(cache=True, nogil=True)
def _grow_block_table(btab, base, slots):
    """Double a block's table of ``slots`` slots at ``btab[3 * base:]`` in place (its
    entries rehashed into the first ``2 * slots`` slots); returns the new size."""
    old = btab[3 * base:3 * (base + slots)].copy()
    btab[3 * base:3 * (base + 2 * slots)] = EMPTY
    for i in range(slots):
        if old[3 * i] != EMPTY:
            put(btab, base, 2 * slots, old[3 * i], old[3 * i + 1], old[3 * i + 2])
    return 2 * slots


@njit(cache=True, nogil=True)
def _block_tables(doc_piece_offsets, n_blocks, block_bits, use_cache):
    """Slot offsets and sizes of each block's table: a power of two of at least half the
    block's pieces (at most ``2**block_bits``), 0 under dropout; and the shared array,
    not filled (each block fills the part of its slots it uses, see ``_encode_block``)."""
    n_docs = doc_piece_offsets.shape[0] - 1
    bases = np.zeros(n_blocks, dtype=np.int64)
    caps = np.zeros(n_blocks, dtype=np.int64)
    total = 0
    for blk in range(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        pieces = doc_piece_offsets[d1] - doc_piece_offsets[d0]
        cap = 0
        if use_cache and pieces > 1:
            cap = 16
            while 2 * cap < pieces and cap < (1 << block_bits):
                cap *= 2
        bases[blk] = total
        caps[blk] = cap
        total += cap
    return bases, caps, np.empty(3 * total, dtype=np.int64)


@njit(cache=True, nogil=True)
def _finish(stats, ctab, cunits, cids, cstate, btab, bases, caps, data, out, doc_counts):
    """Add the blocks' counters to the cache's and publish their tables if allowed; returns
    ``(doc_offsets, ctab, cunits, cids)``."""
    used = np.zeros_like(caps)
    for blk in range(stats.shape[0]):
        cstate[S_HITS] += stats[blk, 0]
        cstate[S_BLOCK_HITS] += stats[blk, 1]
        cstate[S_MERGED] += stats[blk, 2]
        if stats[blk, 3] != 0:
            used[blk] = stats[blk, 4]  # the slots it filled (none to publish: none read)
    if cstate[S_PUBLISH] == 1:
        ctab, cunits, cids = publish(ctab, cunits, cids, cstate, btab, bases, used, data, out)
    n_docs = doc_counts.shape[0]
    doc_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    for d in range(n_docs):
        doc_offsets[d + 1] = doc_offsets[d] + doc_counts[d]
    return doc_offsets, ctab, cunits, cids


@njit(cache=True, nogil=True, parallel=True)
def encode_batch(data, sym_map, piece_offsets, piece_special, doc_piece_offsets, pairs,
                 whole_keys, tok_off, tok_data, short_table, byte_pairs, bt_trie, bt_node_tok,
                 bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r, bt_pair_keys,
                 bt_pair_vals, dropout, seed, long_piece, sweep_ranks, block_bits, sweep_window,
                 sweep_margin, cache_units, scan_piece, bt_piece, ctab, cunits, cids, cstate,
                 n_blocks, out=None):
    """Encode a batch of pre-tokenized documents.

    Parameters
    ----------
    data : uint8[n_units] or int32[n_units]
        The input units of all documents, concatenated: UTF-8 bytes (byte mode) or base
        symbol indices (char mode). Every value must index ``sym_map``.
    sym_map : int32[k]
        Base id of each unit value (byte mode: id of each byte; char mode: the identity).
    piece_offsets : int64[n_pieces + 1]
        Piece boundaries in ``data``; pieces tile each document, documents are contiguous.
    piece_special : int32[n_pieces] or int32[0]
        The special token id of a piece that is a special token, else -1; empty when
        the batch holds no special token (saves 4 bytes per piece).
    doc_piece_offsets : int64[n_docs + 1]
        Index of each document's first piece.
    pairs : int64[2 * cap]
        The merge-rank table from ``hashing.build_rank_table``, interleaved
        (``hashing.interleave_table``).
    whole_keys : int64[cap2] or int64[0]
        Byte mode with tiktoken's rule: a piece whose bytes are a token becomes that token
        before any merging (``build_whole_table``). Empty: no whole-piece lookup.
    tok_off : int64[n_tokens + 1]
        Offsets of the tokens' bytes (used with ``whole_keys``).
    tok_data : uint8[m]
        The tokens' bytes (used with ``whole_keys``).
    short_table : int64[3 * cap] or int64[0]
        Byte mode: ``build_short_table`` of the vocabulary, pieces of 2 .. SHORT_BYTES bytes
        that encode to one token (skipped under dropout). Empty: no short-piece lookup.
    byte_pairs : int64[65536] or int64[0]
        ``build_byte_pairs(keys, vals)``: the rank table's pairs of ids below 256, dense
        (empty: every pair from ``pairs``).
    bt_trie, bt_node_tok, bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r, \
    bt_pair_keys, bt_pair_vals : arrays, or empty arrays
        ``backtrack.build_backtrack_tables`` of a ``ranks`` vocabulary it is exact for
        (``model.backtrack_tables``): byte pieces longer than ``bt_piece`` bytes are encoded
        by backtracking (linear time). Empty (``bt_trie`` of length 0): merging only.
    dropout : float
        BPE-dropout probability (0.0: ordinary encoding; > 0 disables the piece tables).
    seed : int
        Dropout seed (non-negative, < 2**31); each document draws from (seed, its index).
    long_piece : int
        Pieces longer than this many units use the rank sweep (or the heap algorithm).
    sweep_ranks : int
        ``sweep_rank_count(keys, vals)``, the size of the sweep's list heads; long pieces
        then go through ``_merge_windowed`` (0, a table without merges: the heap).
    block_bits : int
        log2 of the largest block table (slots of 24 bytes).
    sweep_window : int
        Units per window of the rank sweep (must exceed ``sweep_margin``): about 40 bytes
        of scratch per unit; 8192 keeps a window's work in a 1 MiB L2 cache.
    sweep_margin : int
        Overlap of consecutive sweep windows, in units, where their encodings must meet
        (``sweep_window > sweep_margin > 0``; see ``_merge_windowed``).
    cache_units : int
        Pieces of at most this many units (<= ``piece_cache.MAX_UNITS``) are kept in the
        piece tables.
    scan_piece : int
        Pieces of at most this many units (and of at most ``long_piece``) are merged by
        rescanning an array (``_merge_short``), longer ones up to ``long_piece`` by a small
        heap (``_merge_mid``): where one beats the other (``model.SCAN_PIECE``).
    bt_piece : int
        Byte pieces longer than this take the backtracking encoder when its tables are given.
    ctab, cunits, cids : int64[3 * cap], data's dtype[*], int32[*]
        The persistent piece cache (``kernels.piece_cache``; ``cap`` 0 for none): read by
        every block; the blocks' new entries are added to it after the parallel loop when
        ``cstate[S_PUBLISH]`` is 1 (the caller holds it alone).
    cstate : int64[N_STATE]
        The cache's counters (``piece_cache.S_*``), updated in place.
    n_blocks : int
        Documents are split into this many contiguous blocks, encoded in parallel; each
        block writes only its own documents' slices of the output and its own table.
    out : int32[m], ``m >= n_units``, optional
        Where the blocks write their ids (each from its first unit on), then moved down
        into one run from ``out[0]`` (in place, block after block: a block's ids never
        start after its first unit); ``ids`` is then ``out[:n_ids]``. The caller's to
        check, and to allocate with NumPy (large NumPy arrays get transparent huge pages,
        the kernels' own do not: an Arrow batch of 42 MB took 25,000 fresh 4 KiB pages for
        its output and ids). None: a fresh array, the ids copied out of it in parallel.

    Returns
    -------
    ids : int32[n_ids]
        The token ids of all documents, concatenated.
    doc_offsets : int64[n_docs + 1]
        Boundaries of each document's ids in ``ids``.
    ctab, cunits, cids
        The cache's arrays after publishing (new arrays where they grew).
    """
    n_docs = doc_piece_offsets.shape[0] - 1
    if out is None:
        buf = np.empty(data.shape[0], dtype=np.int32)
    else:
        buf = out
    doc_counts = np.zeros(n_docs, dtype=np.int64)
    bases, caps, btab = _block_tables(doc_piece_offsets, n_blocks, block_bits, dropout <= 0.0)
    stats = np.zeros((n_blocks, 5), dtype=np.int64)
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        _encode_block(data, sym_map, piece_offsets, piece_special, doc_piece_offsets, pairs,
                      whole_keys, tok_off, tok_data, short_table, byte_pairs, bt_trie,
                      bt_node_tok, bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r,
                      bt_pair_keys, bt_pair_vals, dropout, seed, long_piece, sweep_ranks,
                      sweep_window, sweep_margin, cache_units, scan_piece, bt_piece, ctab, cunits,
                      cids, btab, bases[blk], caps[blk], d0, d1, buf, doc_counts, stats[blk])
    doc_offsets, ctab, cunits, cids = _finish(stats, ctab, cunits, cids, cstate, btab, bases,
                                              caps, data, buf, doc_counts)
    if out is None:
        # Each block's ids are together in ``buf``: one copy per block, in parallel.
        ids = np.empty(doc_offsets[n_docs], dtype=np.int32)
        for blk in prange(n_blocks):
            d0 = blk * n_docs // n_blocks
            d1 = (blk + 1) * n_docs // n_blocks
            src = piece_offsets[doc_piece_offsets[d0]]
            dst = doc_offsets[d0]
            ids[dst:doc_offsets[d1]] = buf[src:src + doc_offsets[d1] - dst]
        return ids, doc_offsets, ctab, cunits, cids
    _compact_blocks(buf, piece_offsets, doc_piece_offsets, doc_offsets, n_blocks)
    return buf[:doc_offsets[n_docs]], doc_offsets, ctab, cunits, cids


@njit(cache=True, nogil=True)
def _compact_blocks(out, piece_offsets, doc_piece_offsets, doc_offsets, n_blocks):
    """Move each block's ids down in ``out`` to follow the previous block's, in block order.

    Block ``b`` wrote its ids from its first unit ``src`` on; they belong at ``dst``, the ids
    of the blocks before it, and ``dst <= src`` (a block's ids never outnumber its units),
    so a forward copy never overwrites what it has still to read, nor the next block's ids
    (``dst + n`` is the next block's ``dst``, at most its ``src``)."""
    n_docs = doc_piece_offsets.shape[0] - 1
    for blk in range(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        src = piece_offsets[doc_piece_offsets[d0]]
        dst = doc_offsets[d0]
        if dst != src:
            for i in range(doc_offsets[d1] - dst):
                out[dst + i] = out[src + i]


@njit(cache=True, nogil=True)
def encode_serial(data, sym_map, piece_offsets, piece_special, doc_piece_offsets, pairs,
                  whole_keys, tok_off, tok_data, short_table, byte_pairs, bt_trie, bt_node_tok,
                  bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r, bt_pair_keys,
                  bt_pair_vals, dropout, seed, long_piece, sweep_ranks, block_bits, sweep_window,
                  sweep_margin, cache_units, scan_piece, bt_piece, ctab, cunits, cids, cstate,
                  out=None):
    """``encode_batch`` on the calling thread only (no thread pool is started), one block.

    Same parameters and results as ``encode_batch`` without ``n_blocks``, and ``out``:
    int32[m], ``m >= n_units`` (the caller's to check), where the ids are written from
    ``out[piece_offsets[doc_piece_offsets[0]]]`` on (the ids returned are a view of it);
    None: a fresh array. A caller that encodes a long text segment by segment passes
    the rest of its result array: no array per segment and no copy (fresh pages for each
    segment's array were a tenth of encoding 10 MB of code). Any number of Python threads
    may call it at once, as long as at most one of them passes a given cache or ``out``
    (it releases the GIL and shares nothing else).
    """
    n_docs = doc_piece_offsets.shape[0] - 1
    if out is None:
        buf = np.empty(data.shape[0], dtype=np.int32)
    else:
        buf = out
    doc_counts = np.zeros(n_docs, dtype=np.int64)
    bases, caps, btab = _block_tables(doc_piece_offsets, 1, block_bits, dropout <= 0.0)
    stats = np.zeros((1, 5), dtype=np.int64)
    _encode_block(data, sym_map, piece_offsets, piece_special, doc_piece_offsets, pairs,
                  whole_keys, tok_off, tok_data, short_table, byte_pairs, bt_trie, bt_node_tok,
                  bt_node_use, bt_tok_len, bt_next, bt_split_l, bt_split_r, bt_pair_keys,
                  bt_pair_vals, dropout, seed, long_piece, sweep_ranks, sweep_window,
                  sweep_margin, cache_units, scan_piece, bt_piece, ctab, cunits, cids, btab,
                  bases[0], caps[0], 0, n_docs, buf, doc_counts, stats[0])
    doc_offsets, ctab, cunits, cids = _finish(stats, ctab, cunits, cids, cstate, btab, bases,
                                              caps, data, buf, doc_counts)
    # One block: the ids are already together; a view saves a copy (pages of ``buf`` past
    # them were never touched, so they hold no memory).
    src = piece_offsets[doc_piece_offsets[0]]
    return buf[src:src + doc_offsets[n_docs]], doc_offsets, ctab, cunits, cids
