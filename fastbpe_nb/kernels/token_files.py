"""Token files: a batch's ids written with a separator after each document, in one pass.

``np.insert(ids.astype(dtype), ends, sep)`` made two copies of every id (the conversion,
then the insertion with its index arrays) and held the GIL, in the writer thread that runs
beside the encode kernels; this kernel converts and interleaves in one pass into a buffer
the caller reuses.
"""

from numba import njit


@njit(cache=True, nogil=True)
def interleave_separators(ids, a, b, ends, lo, hi, sep, out):
    """Write ``ids[a:b]`` into ``out`` with ``sep`` inserted before each id index
    ``ends[lo:hi]`` (an index ``b`` puts it after the last id): ``np.insert(ids[a:b],
    ends[lo:hi] - a, sep)`` cast to ``out``'s dtype.

    Parameters
    ----------
    ids : int32[n]
        Token ids, each fitting ``out``'s dtype (checked by the caller).
    a, b : int
        The ids to write, ``0 <= a <= b <= n``.
    ends : int64[k]
        Sorted separator positions (id indices); ``ends[lo:hi]`` lie in ``a .. b``.
    lo, hi : int
        The separators to write, ``0 <= lo <= hi <= k``.
    sep : int
        The separator id (fitting ``out``'s dtype).
    out : uint16[m] or uint32[m]
        At least ``(b - a) + (hi - lo)`` slots.

    Returns
    -------
    int
        Slots written, ``(b - a) + (hi - lo)``.
    """
    o = 0
    i = a
    for j in range(lo, hi):
        e = ends[j]
        while i < e:
            out[o] = ids[i]
            o += 1
            i += 1
        out[o] = sep
        o += 1
    while i < b:
        out[o] = ids[i]
        o += 1
        i += 1
    return o
