"""The persistent piece cache: each tokenizer remembers the pieces it has merged.

Merging never crosses pieces, so a piece's ids depend on its units alone. Real text
repeats its pieces (10 MB of Linux sources hold 73k distinct ones among 2.3 M), so after
the first occurrence a piece costs one hash probe instead of a merge. The cache is filled
by the encode kernels themselves (``kernels/piece_cache.py``): during a call every block
of documents reads it and keeps its own table of what it merged; after the parallel loop
the blocks' tables are added to the cache, serially, inside the same kernel call.

Memory is bounded: the cache's arrays never exceed ``max_bytes`` (default
``DEFAULT_MAX_BYTES``; 0 turns the cache off). When it is full it stops growing, and the
next call empties it, so it follows the text being encoded instead of the text of the
first hour. ``info()`` reports its size and hit counts.

Threads and fork: a call holds the cache alone (a lock taken without waiting); a call
that finds it taken, e.g. from another Python thread, encodes without it, with the same
ids. A forked child (DataLoader workers, ``datasets.map(num_proc=...)``) keeps its copy of
the parent's cache unless a call was running in the parent at the fork, then it starts
empty. A kernel call that fails or is interrupted empties the cache (its arrays may be
half updated). It is not pickled: a copy starts empty.
"""

from __future__ import annotations

import os
import threading

import numpy as np

#: Default cap on a tokenizer's piece cache, in bytes (its table and arenas; a piece
#: costs ~70 bytes with its ids).
DEFAULT_MAX_BYTES = 128 << 20

# Counter indices shared with kernels/piece_cache.py (kept as literals here so that
# importing this module does not import Numba).
_ENTRIES, _UNITS, _IDS, _MAX_BYTES, _HITS, _BLOCK_HITS, _MERGED, _PUBLISH, _DROPPED = range(9)
_N_STATE = 9


def no_cache(dtype) -> tuple:
    """Kernel arguments for "no persistent cache": empty arrays, nothing published."""
    return (np.full(0, -1, dtype=np.int64), np.zeros(0, dtype=dtype),
            np.zeros(0, dtype=np.int32), np.zeros(_N_STATE, dtype=np.int64))


class PieceCache:
    """A tokenizer's cache of merged pieces; see the module docstring."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._reset(None)

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"max_bytes must be an int >= 0, not {value!r}")
        self._max_bytes = value

    def _reset(self, dtype) -> None:
        self._dtype = dtype
        self._arrays = None if dtype is None else no_cache(dtype)[:3]
        counters = getattr(self, "_state", None)
        self._state = np.zeros(_N_STATE, dtype=np.int64)
        if counters is not None:  # hit counts survive a reset; sizes do not
            self._state[_HITS:_MERGED + 1] = counters[_HITS:_MERGED + 1]

    def clear(self) -> None:
        """Forget every cached piece (the counters are kept)."""
        with self._lock:
            self._reset(None)

    def checkout(self, dtype) -> tuple:
        """``(tab, units, ids, state)`` for one kernel call; pass what it returns to
        ``checkin`` (or ``None`` if it failed). Without the cache (taken by another call,
        or off) the arrays are empty and the state is a throwaway."""
        if os.getpid() != self._pid:
            self._after_fork()
        if self._max_bytes == 0 or not self._lock.acquire(blocking=False):
            return no_cache(dtype)
        if self._dtype != dtype or self._state[_DROPPED] > 0:
            self._reset(dtype)  # new unit type, or full: start over with this text's pieces
        self._state[_MAX_BYTES] = self._max_bytes
        self._state[_PUBLISH] = 1
        return (*self._arrays, self._state)

    def checkin(self, state, arrays) -> None:
        """End a call begun with ``checkout``: keep the kernel's ``arrays`` (None: drop all)."""
        if state is not self._state:
            return  # the call ran without the cache
        if arrays is None:
            self._reset(None)
        else:
            self._arrays = tuple(arrays)
        self._state[_PUBLISH] = 0
        self._lock.release()

    def _after_fork(self) -> None:
        held = self._lock.locked()  # a call was running in the parent at the fork
        self._lock = threading.Lock()
        self._pid = os.getpid()
        if held:
            self._reset(None)

    def info(self) -> dict:
        """Entries, bytes held and the cap, and the lookups since the tokenizer was made:
        pieces found in the cache, found in their own call's tables, and merged."""
        state = self._state
        held = 0 if self._arrays is None else sum(int(a.nbytes) for a in self._arrays)
        return {"entries": int(state[_ENTRIES]), "bytes": held, "max_bytes": self._max_bytes,
                "full": bool(state[_DROPPED] > 0), "hits": int(state[_HITS]),
                "call_hits": int(state[_BLOCK_HITS]), "merged": int(state[_MERGED])}

    def __reduce__(self):
        return (PieceCache, (self._max_bytes,))
