"""Piece tables: a pre-token's units -> its token ids, without merging it again.

Merging never crosses pieces, so a piece's ids depend on its units alone and can be kept.
Two tables of one layout serve the encoder:

* the **persistent cache**, kept between calls by ``piece_cache.PieceCache`` (Python): it
  owns its arenas of units and ids and is read by every block of a call;
* a **block table**, one per block of documents, private to the block: its entries point
  into the call's own input units and output ids, so filling it copies nothing. After the
  parallel loop, ``publish`` copies the block tables' new entries into the cache, serially.

Layout: ``tab`` is ``int64[3 * cap]``, slot ``i`` holding ``k1`` (``EMPTY`` when free), ``k2``
and ``v`` at ``3 i``, ``3 i + 1``, ``3 i + 2`` (a probe reads one cache line, mostly):

* a byte piece of 2 .. SHORT_BYTES bytes is keyed by its packed bytes (``short_key``):
  ``k1 < 2**60``, ``k2`` the bytes after the 7th; the keys are the piece, no bytes compared;
* any other piece: ``k1 = LONG_TAG | hash_units(units)`` and ``k2 = (offset << 16) | n``,
  where its ``n`` units are, compared on a hit;
* ``v > 0``: up to SHORT_MAX_IDS ids packed (``pack_ids``); ``v < 0``: ``~((offset << 16) | m)``,
  ``m`` ids at ``offset``. ``v == 0`` never occurs: "no entry".

The offsets point into the cache's arenas (``units``, ``ids``) in the persistent cache, and
into the call's ``data`` and ``out`` in a block table.
"""

import numpy as np
from numba import njit

from .hashing import EMPTY, hash_slot, load8, same_units
#: kernel cache stamp: f61736dfda6e18e2bc4664aedc29c401524c0df661f343da5017c51fb214b6bf

#: Pieces of up to this many bytes are keyed by their packed bytes: two int64 keys hold
#: 7 + 8 bytes and the length.
SHORT_BYTES = 15
#: Up to SHORT_MAX_IDS ids of SHORT_ID_BITS bits each are packed into one int64 value, their
#: number in the top bits. Vocabularies of 2**20 ids or more store them in the arena.
SHORT_ID_BITS = 20
SHORT_MAX_IDS = 3
SHORT_ID_MASK = (1 << SHORT_ID_BITS) - 1
#: Tag of hashed keys (``hash_units`` is 48-bit; packed keys stay below 2**60).
LONG_TAG = np.int64(1) << 62
HASH_MASK = np.int64(0xFFFFFFFFFFFF)
#: Largest piece (in units) a table keeps: its length and id count fit 16 bits.
MAX_UNITS = 0xFFFF
#: ``state`` fields of the persistent cache (int64[N_STATE]).
S_ENTRIES = 0  # entries held
S_UNITS = 1  # units arena used
S_IDS = 2  # ids arena used
S_MAX_BYTES = 3  # cap on the cache's arrays (tab + units + ids), in bytes
S_HITS = 4  # pieces found in the cache (all calls)
S_BLOCK_HITS = 5  # pieces found in their block's table
S_MERGED = 6  # pieces merged
S_PUBLISH = 7  # 1: this call may add entries to the cache
S_DROPPED = 8  # entries not added because the cache was full
N_STATE = 9


# Compiled without reference counting where they never allocate (see the comment above
# encode._short_lookup).
@njit(cache=True, nogil=True, _nrt=False)
def short_key(data, s, n):
    """``data[s:s+n]`` (n <= SHORT_BYTES bytes) as two int64 keys: the length and the
    first 7 bytes (below 2**60, so never EMPTY), then the next 8 as a little-endian word
    (0 for a piece of up to 7 bytes).

    Away from the array's end, two 8-byte loads and masks, without a loop: piece lengths
    vary too much for a loop's exit to be predicted (10 MB of code, 2.3 M pieces: 26 ms
    with the loop, 13 ms without). The last 14 bytes take ``short_key_tail``, a call of
    its own: a loop in this function keeps LLVM from simplifying it. A hot loop should test
    ``s + SHORT_BYTES <= len(data)`` itself and call ``short_key_tail`` otherwise: with the
    test at the call site too, LLVM drops the inner one (2.5x faster again, measured).
    """
    if s + 15 <= data.shape[0]:
        head = min(n, 7)
        key = (np.int64(n) << 56) | (load8(data, s) & ((np.int64(1) << (8 * head)) - 1))
        tail = n - head  # 0 .. 8 bytes in the second key
        low = np.int64(-1) if tail == 8 else (np.int64(1) << (8 * tail)) - 1
        return key, load8(data, s + 7) & low
    return short_key_tail(data, s, n)


@njit(cache=True, nogil=True, _nrt=False)
def short_key_tail(data, s, n):
    """``short_key`` a byte at a time, for pieces that end in the array's last 14 bytes."""
    key = np.int64(n) << 56
    for k in range(min(n, 7)):
        key |= np.int64(data[s + k]) << (8 * k)
    key2 = np.int64(0)
    for k in range(7, n):
        key2 |= np.int64(data[s + k]) << (8 * (k - 7))
    return key, key2


@njit(cache=True, nogil=True)
def short_mix(key, key2):
    """Slot hash of a short piece's two keys: 21-bit parts times 32-bit odd constants (every
    product below 2**54, so the same compiled or not), xored, the high bits folded down."""
    h = ((key & 0x1FFFFF) * 0x9E3779B1) ^ (((key >> 21) & 0x1FFFFF) * 0x85EBCA6B) \
        ^ (((key >> 42) & 0x3FFFF) * 0xC2B2AE35) ^ ((key2 & 0x1FFFFF) * 0x27D4EB2F) \
        ^ (((key2 >> 21) & 0x1FFFFF) * 0x165667B1) ^ (((key2 >> 42) & 0x3FFFFF) * 0x9E3779B9)
    return h ^ (h >> 29)


@njit(cache=True, nogil=True, _nrt=False)
def pack_ids(ids, start, m):
    """``ids[start:start+m]`` (1 <= m <= SHORT_MAX_IDS, each < 2**SHORT_ID_BITS) as one int64."""
    v = np.int64(m) << 60
    for k in range(m):
        v |= np.int64(ids[start + k]) << (SHORT_ID_BITS * k)
    return v


@njit(cache=True, nogil=True, _nrt=False)
def emit_packed(v, out, o):
    """Write the ids packed in ``v`` to ``out[o:]``; returns how many."""
    m = v >> 60
    for k in range(m):
        out[o + k] = (v >> (SHORT_ID_BITS * k)) & SHORT_ID_MASK
    return m


@njit(cache=True, nogil=True)
def _slot(k1, k2):
    """Slot hash of an entry from its keys alone (so tables can be rehashed)."""
    if k1 >= LONG_TAG:
        return hash_slot(k1 & HASH_MASK)
    return short_mix(k1, k2)


@njit(cache=True, nogil=True, _nrt=False)
def packable(ids, start, m):
    """True when ``ids[start:start+m]`` can be packed into one value."""
    if m < 1 or m > SHORT_MAX_IDS:
        return False
    for k in range(m):
        if ids[start + k] < 0 or ids[start + k] > SHORT_ID_MASK:
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def get(tab, base, cap, k1, k2, units, data, s, n):
    """The value of the piece ``data[s:s+n]`` (keys ``k1``, ``k2``) in the table of ``cap``
    slots at ``tab[3 * base:]``, or 0. Hashed keys are confirmed against ``units``."""
    if cap == 0:
        return np.int64(0)
    mask = cap - 1
    i = _slot(k1, k2) & mask
    while True:
        j = 3 * (base + i)
        k = tab[j]
        if k == EMPTY:
            return np.int64(0)
        if k == k1:
            if k1 < LONG_TAG:
                if tab[j + 1] == k2:
                    return tab[j + 2]
            else:
                ref = tab[j + 1]
                if (ref & 0xFFFF) == n and same_units(units, ref >> 16, data, s, n):
                    return tab[j + 2]
        i = (i + 1) & mask


@njit(cache=True, nogil=True, _nrt=False)
def emit(v, ids, out, o):
    """Write the ids of value ``v`` (packed, or ``m`` ids at an offset of ``ids``) to
    ``out[o:]``; returns how many."""
    if v > 0:
        return emit_packed(v, out, o)
    ref = ~v
    off = ref >> 16
    m = ref & 0xFFFF
    for q in range(m):
        out[o + q] = ids[off + q]
    return m


@njit(cache=True, nogil=True, _nrt=False)
def put(tab, base, cap, k1, k2, v):
    """Insert an entry known to be absent into the table of ``cap`` slots at ``tab[3 * base:]``
    (the caller keeps the load at most one half). The key goes in last."""
    mask = cap - 1
    i = _slot(k1, k2) & mask
    while tab[3 * (base + i)] != EMPTY:
        i = (i + 1) & mask
    j = 3 * (base + i)
    tab[j + 1] = k2
    tab[j + 2] = v
    tab[j] = k1


@njit(cache=True, nogil=True)
def _bytes_of(tab, units, ids):
    return tab.nbytes + units.nbytes + ids.nbytes


@njit(cache=True, nogil=True)
def _rehashed(tab, cap):
    """The entries of ``tab`` in a new table of ``cap`` slots."""
    new = np.full(3 * cap, EMPTY, dtype=np.int64)
    for i in range(tab.shape[0] // 3):
        k1 = tab[3 * i]
        if k1 != EMPTY:
            put(new, 0, cap, k1, tab[3 * i + 1], tab[3 * i + 2])
    return new


@njit(cache=True, nogil=True)
def _grown(arr, need):
    """``arr`` with room for ``need`` items (capacity doubles), used part copied."""
    if need <= arr.shape[0]:
        return arr
    cap = max(need, 2 * arr.shape[0], 1024)
    new = np.empty(cap, dtype=arr.dtype)
    new[:arr.shape[0]] = arr
    return new


@njit(cache=True, nogil=True)
def publish(tab, units, ids, state, btab, bases, caps, data, out):
    """Copy the block tables' entries that the cache lacks into the cache, serially.

    Parameters
    ----------
    tab : int64[3 * cap]
        The persistent cache's table (``cap`` a power of two, or 0 for no cache yet).
    units : uint8[*] or int32[*]
        Its units arena (the dtype of ``data``); ``state[S_UNITS]`` are used.
    ids : int32[*]
        Its ids arena; ``state[S_IDS]`` are used.
    state : int64[N_STATE]
        The cache's counters (see the module's ``S_*``); updated in place.
    btab : int64[3 * sum(caps)]
        The call's block tables, block ``b`` at slot offset ``bases[b]``, ``caps[b]`` slots.
    bases, caps : int64[n_blocks]
    data : uint8[n_units] or int32[n_units]
        The call's input units (block tables' hashed keys point into it).
    out : int32[*]
        The call's output ids before compaction (block values point into it).

    Returns
    -------
    tab, units, ids
        The cache's arrays, new ones where they had to grow. Growth stops at
        ``state[S_MAX_BYTES]``; entries that do not fit are counted in ``state[S_DROPPED]``.
    """
    max_bytes = state[S_MAX_BYTES]
    for b in range(bases.shape[0]):
        base = bases[b]
        for i in range(caps[b]):
            j = 3 * (base + i)
            k1 = btab[j]
            if k1 == EMPTY:
                continue
            k2 = btab[j + 1]
            v = btab[j + 2]
            s = np.int64(0)
            n = np.int64(0)
            if k1 >= LONG_TAG:
                s = k2 >> 16
                n = k2 & 0xFFFF
            cap = tab.shape[0] // 3
            if get(tab, 0, cap, k1, k2, units, data, s, n) != 0:
                continue
            m = np.int64(0) if v > 0 else (~v) & 0xFFFF
            # Room first (the table at most half full, both arenas), within the budget.
            new_cap = cap
            if 2 * (state[S_ENTRIES] + 1) > cap:
                new_cap = max(2 * cap, 1024)
            need_units = state[S_UNITS] + n
            need_ids = state[S_IDS] + m
            grow_units = need_units > units.shape[0]
            grow_ids = need_ids > ids.shape[0]
            size = 24 * new_cap + units.itemsize * (max(need_units, 2 * units.shape[0], 1024)
                                                    if grow_units else units.shape[0]) \
                + 4 * (max(need_ids, 2 * ids.shape[0], 1024) if grow_ids else ids.shape[0])
            if size > max_bytes:
                state[S_DROPPED] += 1
                continue
            if new_cap != cap:
                tab = _rehashed(tab, new_cap)
                cap = new_cap
            if grow_units:
                units = _grown(units, need_units)
            if grow_ids:
                ids = _grown(ids, need_ids)
            if k1 >= LONG_TAG:
                u0 = state[S_UNITS]
                for q in range(n):
                    units[u0 + q] = data[s + q]
                state[S_UNITS] = u0 + n
                k2 = (u0 << 16) | n
            if v < 0:
                ref = ~v
                o = ref >> 16
                i0 = state[S_IDS]
                for q in range(m):
                    ids[i0 + q] = out[o + q]
                state[S_IDS] = i0 + m
                v = ~((i0 << 16) | m)
            put(tab, 0, cap, k1, k2, v)
            state[S_ENTRIES] += 1
    return tab, units, ids
