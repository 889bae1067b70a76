"""Decoding: the bytes of a long sequence of token ids, gathered into one flat buffer.

Joining a Python list of per-token ``bytes`` costs a Python int and a list slot per id
before the join (a 10^8-id decode took over 10 GiB); this kernel writes the bytes straight
into the output array, so the extra memory is the output itself.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def gather_tokens(ids, tok_off, tok_data):
    """The bytes of the tokens ``ids``, end to end.

    Parameters
    ----------
    ids : int64[n]
        Token ids, each in ``0 .. len(tok_off) - 2`` (validated by the caller).
    tok_off : int64[vocab + 1]
        ``tok_data[tok_off[i]:tok_off[i + 1]]`` are the bytes of token ``i`` (empty for an
        id no token has; the caller refuses those).
    tok_data : uint8[total]
        Every token's bytes, end to end.

    Returns
    -------
    out : uint8[sum of the tokens' lengths]
    """
    total = 0
    for k in range(ids.shape[0]):
        i = ids[k]
        total += tok_off[i + 1] - tok_off[i]
    out = np.empty(total, dtype=np.uint8)
    p = 0
    for k in range(ids.shape[0]):
        i = ids[k]
        s = tok_off[i]
        e = tok_off[i + 1]
        for j in range(s, e):
            out[p] = tok_data[j]
            p += 1
    return out
