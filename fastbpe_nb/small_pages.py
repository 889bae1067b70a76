"""Arrays allocated without NumPy's huge-page advice, for data written once front to back.

NumPy advises the kernel to back every array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``, unless ``NUMPY_MADVISE_HUGEPAGE=0``). Huge pages pay where an
array is read at random for long (fewer TLB misses); an array that is only copied into, in
order, gains nothing from them, and on the team's machine (a 2-core Firecracker VM) a fresh
2 MiB page costs 1.4-2.3 ms per MB the first time it is written, against about 0.1 ms for
4 KiB pages (docs/performance.md, 2026-12-04; our reading: the guest gets huge pages from
memory the host has not backed yet). SuperBPE's stage 2 joins its counting batches' tables
end to end (360 MB of words in 14 M rows on 1.2 GB of Linux sources): that join and the cut
table's without the advice took the 1.2 GB training from 14.9-15.5 s to 13.9-14.0 s (one
run each; docs/variants.md, 2026-12-05, has the A/B of this and the overflow check).

On a machine where huge pages are backed up front, 4 KiB pages cost one page fault per 4
KiB instead of per 2 MiB: a few tens of milliseconds for such a join.
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()  # the advice is NumPy's global flag: one switch at a time
_switch = None  # NumPy's private ``_set_madvise_hugepage``, once looked up; False if none


def _advice_switch():
    global _switch
    if _switch is None:
        try:  # NumPy 2 (``numpy.core`` still answers there, with a DeprecationWarning)
            from numpy._core.multiarray import _set_madvise_hugepage
        except ImportError:
            try:  # NumPy 1.x
                from numpy.core.multiarray import _set_madvise_hugepage
            except ImportError:
                _set_madvise_hugepage = False
        _switch = _set_madvise_hugepage
    return _switch


def empty_in_small_pages(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` without the huge-page advice (NumPy's own allocator
    otherwise: the same array; where NumPy has no such switch, ``np.empty`` as it is)."""
    switch = _advice_switch()
    if switch is False:
        return np.empty(shape, dtype)
    with _lock:
        advised = switch(False)
        try:
            return np.empty(shape, dtype)
        finally:
            switch(advised)
