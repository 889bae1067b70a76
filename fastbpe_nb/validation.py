"""Validation of the scalar arguments and of the token ids that the public API accepts.

Numba kernels do not check their inputs, and a wrong type reaching one fails late and
obscurely (a ``num_threads=2.5`` used to end in an LLVM error after a compile attempt):
every argument is checked here, in Python, and a bad one raises an error naming the
argument (or the position of the bad id) and the reason.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import TokenIdTypeError, UnknownTokenError


def _is_integer(value) -> bool:
    """A Python int or a NumPy integer, not a bool (``True`` is an int in Python)."""
    return (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)))


def check_num_threads(value, name: str = "num_threads"):
    """``None`` (all cores) or an int >= 1 (NumPy integers too): returns None or an int."""
    if value is None:
        return None
    if not _is_integer(value) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 (or None: all cores), got {value!r}")
    return int(value)


def check_min_count(value, name: str = "min_count") -> int:
    """A minimum word count: an int >= 1 (NumPy integers too, not a bool)."""
    if not _is_integer(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def check_dropout(value, name: str = "dropout") -> float:
    """A BPE-dropout probability: a real number in [0, 1] (not a bool, not NaN).

    1.0 is allowed: every merge is skipped and the ids are the base symbols.
    """
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating))
            or not math.isfinite(float(value)) or not 0.0 <= float(value) <= 1.0):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def check_seed(value, name: str = "seed") -> int:
    """A dropout seed: an int in [0, 2**31) (NumPy integers too, not a bool)."""
    if not _is_integer(value) or not 0 <= value < 2**31:
        raise ValueError(f"{name} must be an int in [0, 2**31), got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------ token ids
def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _arrow_ids(ids, n: int, base: int = 0) -> np.ndarray:
    """A pyarrow integer Array / ChunkedArray as int64, nulls and other types refused."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        parts, at = [], base
        for chunk in ids.chunks:
            parts.append(_arrow_ids(chunk, n, at))
            at += len(chunk)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if not isinstance(ids, pa.Array):
        raise TypeError(f"ids must be a sequence of token ids, not {type(ids).__name__}")
    if not pa.types.is_integer(ids.type):
        first = next((k for k in range(len(ids)) if ids[k].is_valid), 0)
        value = ids[first].as_py() if len(ids) else None
        raise TokenIdTypeError(value, base + first, n,
                               f"is not an integer id (the array's type is {ids.type})")
    if ids.null_count:
        valid = np.asarray(ids.is_valid().to_numpy(zero_copy_only=False))
        raise TokenIdTypeError(None, base + _first(~valid), n, "is null (no token id)")
    return _numpy_ids(ids.to_numpy(zero_copy_only=False), n, base)


def _numpy_ids(ids: np.ndarray, n: int, base: int = 0) -> np.ndarray:
    """A NumPy array of ids as int64, range-checked (ints of any width)."""
    if ids.ndim != 1:
        raise TypeError(f"ids must be one-dimensional, got an array of shape {ids.shape}")
    if not len(ids):  # np.array([]) is float64: nothing to decode either way
        return np.zeros(0, dtype=np.int64)
    if ids.dtype.kind not in "iu":
        if ids.dtype.kind == "O":
            return _sequence_ids(ids.tolist(), n, base)
        raise TokenIdTypeError(ids[0].item(), base, n,
                               f"is not an integer id (the array's dtype is {ids.dtype})")
    if ids.min() < 0 or ids.max() >= n:
        bad = (ids < 0) | (ids >= n)
        pos = _first(bad)
        raise UnknownTokenError(int(ids[pos]), base + pos, n)
    return ids.astype(np.int64, copy=False)


def _sequence_ids(seq: list, n: int, base: int = 0) -> np.ndarray:
    """A list of ids as int64: each must be an int or a NumPy integer in 0..n-1."""
    types = set(map(type, seq))
    if types != {int}:
        for t in types:
            if not (issubclass(t, (int, np.integer)) and not issubclass(t, (bool, np.bool_))):
                pos = next(k for k, x in enumerate(seq) if type(x) is t)
                raise TokenIdTypeError(seq[pos], base + pos, n,
                                       f"is not an integer id (a {t.__name__})")
    if seq and (min(seq) < 0 or max(seq) >= n):
        pos = next(k for k, x in enumerate(seq) if not 0 <= x < n)
        raise UnknownTokenError(seq[pos], base + pos, n)
    return np.array(seq, dtype=np.int64).reshape(-1)


def checked_ids(ids, n: int, unused=None) -> np.ndarray:
    """``ids`` as a validated int64 array of ids in ``0..n-1``.

    Accepts any iterable of ints (a list, a tuple, a generator, a range), a NumPy integer
    array of any width, or a pyarrow integer Array / ChunkedArray. Raises
    ``TokenIdTypeError`` (an UnknownTokenError and a TypeError) naming the position of the
    first entry that is not an integer (a bool, a float even if integral, a str, a null),
    and ``UnknownTokenError`` naming the first id outside the vocabulary. ``unused``: a
    bool mask of length ``n``, True for ids that name no token (gaps between special
    token ids); such an id raises UnknownTokenError too.
    """
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"ids must be a sequence of token ids, not {type(ids).__name__} "
                        "(decode takes the ids that encode returned)")
    if isinstance(ids, np.ndarray):
        arr = _numpy_ids(ids, n)
    elif (type(ids).__module__ or "").startswith("pyarrow"):
        arr = _arrow_ids(ids, n)
    else:
        try:
            seq = ids if isinstance(ids, list) else list(ids)
        except TypeError:
            raise TypeError(f"ids must be an iterable of token ids, not "
                            f"{type(ids).__name__}") from None
        arr = _sequence_ids(seq, n)
    if unused is not None and len(arr):
        hit = unused[arr]
        if hit.any():
            pos = _first(hit)
            raise UnknownTokenError(int(arr[pos]), pos, n,
                                    "is an unused id: no token has it (a gap between the "
                                    "special token ids)")
    return arr


#: The most pairs a BatchBPE pass may take (``merge_batch``; the kernel holds them).
MAX_MERGE_BATCH = 1 << 16


def check_merge_batch(merge_batch) -> int:
    """``merge_batch`` (BatchBPE's pairs per pass): an int in 1..MAX_MERGE_BATCH."""
    if (isinstance(merge_batch, bool) or not isinstance(merge_batch, int)
            or not 1 <= merge_batch <= MAX_MERGE_BATCH):
        raise ValueError(f"merge_batch must be an int from 1 to {MAX_MERGE_BATCH}, "
                         f"got {merge_batch!r}")
    return merge_batch
