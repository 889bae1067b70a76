"""Open-addressing hash tables on plain NumPy arrays, keyed by packed 64-bit pair keys.

A pair of ids ``(left, right)`` (both in ``0 .. 2**31-1``) is packed as
``(left << 32) | right``; ``EMPTY = -1`` marks a free slot. Tables are power-of-two sized
with linear probing and are never more than half full. The hash only multiplies numbers
below 2**31 by constants below 2**32, so it never overflows int64: the same code gives the
same slots compiled or under ``NUMBA_DISABLE_JIT=1``.
"""

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

EMPTY = -1


@njit(cache=True, nogil=True)
def pair_key(left, right):
    """Pack two ids (each ``0 <= id < 2**31``) into one int64 key."""
    return (np.int64(left) << 32) | np.int64(right)


@njit(cache=True, nogil=True)
def _mix(key):
    hi = key >> 32
    lo = key & 0xFFFFFFFF
    h = (hi * 0x9E3779B1) ^ (lo * 0x85EBCA6B)
    return h ^ (h >> 29)


@njit(cache=True, nogil=True)
def table_capacity(n_items):
    """Smallest power of two >= 2 * n_items (at least 16): the load factor stays <= 1/2."""
    cap = 16
    while cap < 2 * n_items:
        cap *= 2
    return cap


@njit(cache=True, nogil=True)
def table_slot(keys, key):
    """Slot holding ``key`` in ``keys`` (int64[cap]), or the empty slot where it belongs."""
    mask = keys.shape[0] - 1
    i = _mix(key) & mask
    while True:
        k = keys[i]
        if k == key or k == EMPTY:
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def table_get(keys, vals, key, default):
    """``vals[slot of key]``, or ``default`` when the key is absent."""
    i = table_slot(keys, key)
    if keys[i] == EMPTY:
        return default
    return vals[i]


@njit(cache=True, nogil=True)
def table_rehash(keys, vals, new_cap):
    """A copy of the table with ``new_cap`` slots (a power of two)."""
    new_keys = np.full(new_cap, EMPTY, dtype=np.int64)
    new_vals = np.zeros(new_cap, dtype=vals.dtype)
    for i in range(keys.shape[0]):
        if keys[i] != EMPTY:
            j = table_slot(new_keys, keys[i])
            new_keys[j] = keys[i]
            new_vals[j] = vals[i]
    return new_keys, new_vals


@njit(cache=True, nogil=True)
def build_rank_table(merges, merge_ids):
    """The encoder's table: pair key -> ``(rank << 32) | new_id``.

    Parameters
    ----------
    merges : int32[n, 2]
        Merge pairs in rank order (validated: every id defined before it is used).
    merge_ids : int32[n]
        Id produced by each merge.

    Returns
    -------
    keys : int64[cap]
        Packed pair keys, ``EMPTY`` in free slots.
    vals : int64[cap]
        ``(rank << 32) | new_id``; a pair listed twice keeps its first (lowest) rank.
    """
    n = merges.shape[0]
    cap = table_capacity(n)
    keys = np.full(cap, EMPTY, dtype=np.int64)
    vals = np.zeros(cap, dtype=np.int64)
    for r in range(n):
        key = pair_key(merges[r, 0], merges[r, 1])
        i = table_slot(keys, key)
        if keys[i] == EMPTY:
            keys[i] = key
            vals[i] = (np.int64(r) << 32) | np.int64(merge_ids[r])
    return keys, vals


@njit(cache=True, nogil=True)
def interleave_table(keys, vals):
    """``keys`` and ``vals`` (int64[cap] each) as one int64[2 * cap] array, slot i's key at
    ``2 i`` and its value at ``2 i + 1``, at the same slots (``table_slot`` finds them).

    A probe of the encoder's rank table then reads one cache line instead of one in each
    array; ``table[0::2]`` and ``table[1::2]`` are the two arrays again (views).
    """
    cap = keys.shape[0]
    table = np.empty(2 * cap, dtype=np.int64)
    for i in range(cap):
        table[2 * i] = keys[i]
        table[2 * i + 1] = vals[i]
    return table


@njit(cache=True, nogil=True)
def interleaved_get(table, key, default):
    """The value stored for ``key`` in an ``interleave_table`` table, or ``default``."""
    mask = (table.shape[0] >> 1) - 1
    i = _mix(key) & mask
    while True:
        k = table[2 * i]
        if k == key:
            return table[2 * i + 1]
        if k == EMPTY:
            return default
        i = (i + 1) & mask


#: Start value of ``hash_units`` (any constant works; this one is FNV's offset basis, cut).
HASH_SEED = np.int64(1469598103)


@njit(cache=True, nogil=True)
def hash_units(data, start, end, h):
    """Polynomial hash of ``data[start:end]`` continuing from ``h`` (48-bit, never overflows).

    Used for byte strings (token bytes, pieces) and for int32 symbol runs alike; start
    with ``HASH_SEED``. The result is turned into a slot with ``hash_slot(h) & mask``.
    """
    for k in range(start, end):
        h = (h * 31 + np.int64(data[k])) & 0xFFFFFFFFFFFF
    return h


@njit(cache=True, nogil=True)
def same_units(a, a0, b, b0, n):
    """Whether ``a[a0:a0+n]`` and ``b[b0:b0+n]`` hold the same values (the check behind
    every hashed look-up of bytes or symbol runs)."""
    for k in range(n):
        if a[a0 + k] != b[b0 + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def hash_slot(h):
    """``hash_units``'s 48-bit value mixed so that every bit reaches the slot bits.

    The polynomial hash of similar short strings (tokens, words) differs mostly in a few
    bits, and ``(h ^ (h >> 17)) & mask`` put cl100k's tokens into one run of 7,195 occupied
    slots (European text read 165 slots per lookup on average). Multiplying both 24-bit
    halves and folding the high bits down gives a longest run of 24. Products stay below
    2**56, so the slots are the same compiled or under ``NUMBA_DISABLE_JIT=1``.
    """
    m = ((h & 0xFFFFFF) * 0x9E3779B1) ^ ((h >> 24) * 0x85EBCA6B)
    return m ^ (m >> 29)


@njit(cache=True, nogil=True)
def grow(arr, need):
    """``arr`` with room for at least ``need`` rows (capacity doubles), first rows copied."""
    n = arr.shape[0]
    if need <= n:
        return arr
    cap = max(need, 2 * n, 16)
    out = np.empty((cap,) + arr.shape[1:], dtype=arr.dtype)
    out[:n] = arr
    return out


def load8(data, s):
    """The 8 units ``data[s:s+8]`` as one little-endian int64 (``s + 8 <= len(data)``).

    Compiled for a ``uint8`` array: one unaligned 8-byte load (Numba assembles eight byte
    loads with index fix-ups that LLVM does not always fuse: 2.5x slower in the encoder's
    piece keys). Other arrays, and plain Python under ``NUMBA_DISABLE_JIT=1``: assembled
    from the units' low bytes, with the same result.
    """
    x = 0
    for k in range(8):
        x |= (int(data[s + k]) & 0xFF) << (8 * k)
    return np.int64(x - (1 << 64) if x >= 1 << 63 else x)


@intrinsic
def _load8_unaligned(typingctx, data, s):
    """``*(int64 *)&data[s]``, unaligned (x86-64 and AArch64 both allow it)."""
    if not (isinstance(data, types.Array) and data.ndim == 1 and data.dtype == types.uint8
            and isinstance(s, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        address = builder.gep(ary.data, [index])
        return builder.load(builder.bitcast(address, cgutils.ir.IntType(64).as_pointer()),
                            align=1)

    return types.int64(data, s), codegen


@overload(load8, jit_options={"cache": True, "nogil": True}, inline="always")
def _load8_jit(data, s):
    if isinstance(data, types.Array) and data.dtype == types.uint8:
        def impl(data, s):
            return _load8_unaligned(data, s)
        return impl

    def assembled(data, s):  # no loop: a loop in an inlined overload upsets Numba's IR checks
        u = np.uint64(s)
        b = np.uint64(0xFF)
        x = ((np.uint64(data[u]) & b) | ((np.uint64(data[u + np.uint64(1)]) & b) << np.uint64(8))
             | ((np.uint64(data[u + np.uint64(2)]) & b) << np.uint64(16))
             | ((np.uint64(data[u + np.uint64(3)]) & b) << np.uint64(24))
             | ((np.uint64(data[u + np.uint64(4)]) & b) << np.uint64(32))
             | ((np.uint64(data[u + np.uint64(5)]) & b) << np.uint64(40))
             | ((np.uint64(data[u + np.uint64(6)]) & b) << np.uint64(48))
             | ((np.uint64(data[u + np.uint64(7)]) & b) << np.uint64(56)))
        return np.int64(x)
    return assembled


def prefetch(arr, i):
    """Hint to the CPU that ``arr[i]`` (1-d) will be read soon. A no-op in Python (under
    ``NUMBA_DISABLE_JIT=1``); compiled, one prefetch instruction, which never faults (an
    index past the end is harmless)."""


@intrinsic
def _prefetch_address(typingctx, arr, i):
    """``llvm.prefetch`` of ``&arr[i]`` (read, keep in all cache levels)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        ir = cgutils.ir
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        address = builder.bitcast(builder.gep(ary.data, [index]), byte_ptr)
        builder.call(fn, [address, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


@overload(prefetch, jit_options={"cache": True, "nogil": True, "_nrt": False})
def _prefetch_jit(arr, i):
    def impl(arr, i):
        _prefetch_address(arr, i)

    return impl
