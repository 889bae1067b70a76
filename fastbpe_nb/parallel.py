"""Calling Numba ``parallel=True`` kernels safely from any number of Python threads.

Numba's ``workqueue`` threading layer (the fallback when neither TBB nor OpenMP is
available) aborts the process when two threads launch parallel kernels at once. Until
the first parallel call has shown which layer Numba picked, and whenever it is
``workqueue``, parallel calls are serialised with one lock; with ``tbb`` or ``omp``
(both thread-safe) they run concurrently. Single-threaded work never needs the pool:
the encoder has a serial kernel for that.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_layer_is_threadsafe = False


def run_parallel(kernel, n_threads: int, *args):
    """``kernel(*args)`` with Numba's thread count set to ``n_threads`` for this call."""
    global _layer_is_threadsafe
    import numba

    n = max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
    if _layer_is_threadsafe:
        return _call(kernel, n, args)
    with _lock:
        result = _call(kernel, n, args)
        try:
            _layer_is_threadsafe = numba.threading_layer() in ("tbb", "omp")
        except ValueError:  # no parallel region has run yet (NUMBA_DISABLE_JIT=1)
            pass
        return result


def _call(kernel, n, args):
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(previous)
