"""Calling Numba ``parallel=True`` kernels safely: from many threads, and under Ctrl-C.

Two hazards, two rules:

* Numba's ``workqueue`` threading layer (the fallback when neither TBB nor OpenMP is
  available) aborts the process when two threads launch parallel kernels at once. Until the
  first parallel call has shown which layer Numba picked, and whenever it is ``workqueue``,
  parallel calls are serialised with one lock; with ``tbb`` or ``omp`` they run concurrently.
* A SIGINT delivered to a thread that is waiting inside a parallel region can make the region
  return early while pool threads still write into its arrays (seen as a segfault on Ctrl-C).
  So a parallel kernel runs in a helper thread with SIGINT and SIGTERM blocked (the pool
  threads it starts inherit that mask), while the calling thread waits: it alone receives the
  signal, lets the kernel call finish (one batch, well under a second), then raises.

Single-threaded work never needs the pool: the encoder has a serial kernel for that.
"""

from __future__ import annotations

import signal
import threading

_lock = threading.Lock()
_layer_is_threadsafe = False
_BLOCKED = {signal.SIGINT, signal.SIGTERM}


def run_parallel(kernel, n_threads: int, *args):
    """``kernel(*args)`` with Numba's thread count set to ``n_threads`` for this call."""
    global _layer_is_threadsafe
    import numba

    n = max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
    if _layer_is_threadsafe:
        return run_shielded(_call, kernel, n, args)
    with _lock:
        result = run_shielded(_call, kernel, n, args)
        try:
            _layer_is_threadsafe = numba.threading_layer() in ("tbb", "omp")
        except ValueError:  # no parallel region has run yet (NUMBA_DISABLE_JIT=1)
            pass
        return result


def run_shielded(fn, *args, poll=None, on_interrupt=None):
    """``fn(*args)`` in a helper thread with SIGINT/SIGTERM blocked; the caller waits.

    A KeyboardInterrupt received while waiting is re-raised once ``fn`` has returned, so
    no native code is ever abandoned mid-call. While waiting, ``poll()`` runs about every
    50 ms (a progress bar); ``on_interrupt()`` runs at the first Ctrl-C (e.g. to ask a
    long kernel to stop early).
    """
    result = {}

    def target():
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        try:
            result["value"] = fn(*args)
        except BaseException as exc:  # handed to the waiting thread
            result["error"] = exc

    worker = threading.Thread(target=target, name="fastbpe-kernel", daemon=True)
    worker.start()
    interrupted = None
    while worker.is_alive():
        try:
            worker.join(0.05)
            if poll is not None:
                poll()
        except KeyboardInterrupt as exc:
            if interrupted is None and on_interrupt is not None:
                on_interrupt()
            interrupted = exc
    if interrupted is not None:
        raise interrupted
    if "error" in result:
        raise result["error"]
    return result["value"]


def _call(kernel, n, args):
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        if getattr(kernel, "overloads", True):
            return kernel(*args)
        return _load_and_call(kernel, args)
    finally:
        numba.set_num_threads(previous)


def call_kernel(kernel, *args):
    """``kernel(*args)``; its first call (Numba compile or cache load) is shielded from Ctrl-C.

    A KeyboardInterrupt raised inside llvmlite's object-cache callback is swallowed there and
    can leave a half-loaded function behind (a segfault on its first use). Until a kernel has a
    compiled overload, it is called through ``run_shielded``; afterwards directly (no thread
    hop on the hot path). Under ``NUMBA_DISABLE_JIT=1`` kernels are plain functions.
    """
    if getattr(kernel, "overloads", True):
        return kernel(*args)
    return run_shielded(_load_and_call, kernel, args)


def call_kernel_shielded(kernel, *args, poll=None, on_interrupt=None):
    """``kernel(*args)`` always in a shielded helper thread (see ``run_shielded``).

    For long kernels (the merge loop): the caller can show progress and pass Ctrl-C on,
    and a damaged cache is recovered on the first call as in ``call_kernel``.
    """
    return run_shielded(_load_and_call, kernel, args, poll=poll, on_interrupt=on_interrupt)


def _load_and_call(kernel, args):
    """First call of a kernel; a damaged on-disk cache is dropped and the kernel recompiled.

    Numba raises from its cache loader (e.g. ``UnpicklingError: pickle data was truncated``)
    when an index or data file was cut short (a full disk, a killed process). While the
    dispatcher still has no compiled overload, an error can only come from loading or
    compiling, never from running the kernel: then the cache index is emptied and the call
    retried once, which compiles afresh and rewrites the cache.
    """
    try:
        return kernel(*args)
    except Exception:
        if getattr(kernel, "overloads", True):
            raise  # it compiled (or is plain Python), so the error came from running it
        # The damaged file may belong to any kernel it calls (they load while it compiles).
        _flush_kernel_caches()
        return kernel(*args)


def _flush_kernel_caches():
    """Empty the on-disk cache index of every loaded fastbpe_nb kernel."""
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith("fastbpe_nb.kernels.") or module is None:
            continue
        for obj in vars(module).values():
            cache = getattr(obj, "_cache", None)
            if cache is not None and hasattr(cache, "flush") and hasattr(obj, "overloads"):
                cache.flush()
