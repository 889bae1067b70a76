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

A third hazard is ``fork``. Numba starts its thread pool once per process; a child created
by ``fork`` (``multiprocessing``'s default on Linux, DataLoader workers,
``datasets.map(num_proc=...)``) inherits the pool's state but none of its threads. GNU OpenMP
then hands out garbage (empty results, ``MemoryError``, wrong ids with no exception: its guard
raises SIGTERM, which the kernel thread has blocked), and ``workqueue`` waits on threads that do
not exist. So a process forked from one whose pool had started never launches a parallel
region: every parallel kernel has a serial twin with the same results, and ``run_parallel``
calls it there (``os.register_at_fork`` marks the child). The child's own children inherit the
mark. Children made by ``spawn`` or ``forkserver`` start a fresh interpreter and a pool of their
own. The lock of the first rule is renewed in every forked child (a fork taken while another
thread held it would otherwise leave the child deadlocked).

Single-threaded work never needs the pool: each parallel kernel has a serial twin for that.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading

_lock = threading.Lock()
_layer_is_threadsafe = False
_BLOCKED = {signal.SIGINT, signal.SIGTERM}
#: True in a process forked (directly or not) from one whose Numba thread pool had started.
_pool_inherited = False


def _numba_pool_started() -> bool:
    """Whether Numba's thread pool has been launched in this process (by us or anyone)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return bool(parallel is not None and getattr(parallel, "_is_initialized", False))


def _after_fork_in_child() -> None:
    global _lock, _pool_inherited, _helpers_lock, _idle_helpers
    _lock = threading.Lock()
    # The parent's helper threads do not exist here; a lock held by one would never be freed.
    _helpers_lock = _thread.allocate_lock()
    _idle_helpers = []
    if _numba_pool_started():
        _pool_inherited = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pool_usable() -> bool:
    """False in a forked child of a process whose pool had started: use serial kernels there."""
    return not _pool_inherited


def default_threads() -> int:
    """Numba's thread count, read without launching the pool (``get_num_threads`` would)."""
    import numba

    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def run_encode(parallel_kernel, serial_kernel, n_threads: int, n_docs: int, args,
               blocks_per_thread: int, out=None):
    """The encode kernels' one runner: ``serial_kernel(*args)`` for one thread or one
    document (no pool is started for a single text), else ``parallel_kernel`` over
    ``blocks_per_thread * n_threads`` blocks of documents (the serial twin in a forked
    child, see ``run_parallel``). ``out``: the output buffer both take (checked by the
    caller), or None."""
    tail = () if out is None else (out,)
    if n_threads <= 1 or n_docs <= 1:
        return call_kernel(serial_kernel, *args, *tail)
    n_blocks = max(1, min(n_docs, blocks_per_thread * n_threads))
    return run_parallel(parallel_kernel, n_threads, *args, n_blocks, *tail,
                        serial=(serial_kernel, args + tail))


def run_parallel(kernel, n_threads: int, *args, serial):
    """``kernel(*args)`` with Numba's thread count set to ``n_threads`` for this call.

    ``serial`` is ``(serial_kernel, serial_args)``, the same computation on the calling thread
    only; it runs instead where Numba's pool cannot be used (a forked child, see above).
    """
    global _layer_is_threadsafe
    if _pool_inherited:
        serial_kernel, serial_args = serial
        return call_kernel(serial_kernel, *serial_args)
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

    The helper is a bare ``_thread`` thread, not a ``threading.Thread``: every Thread is
    entered in ``threading._dangling``, a WeakSet whose Python callback runs when the
    Thread object is freed -- here, on the calling thread, after the call. A Python signal
    handler can run inside any Python code, that callback included, and an exception raised
    in a weakref callback is printed as "Exception ignored" and dropped: one Ctrl-C in
    several hundred was lost that way (the encode loop went on for ever). Here the calling
    thread runs no Python code it does not call itself, and waits inside the ``try``
    (tests/reliability/test_sigint.py interrupts every point of a call in turn).

    Helpers are kept for the next call, never ended (see ``_hand_to_helper``).
    """
    state = {}
    finished = _thread.allocate_lock()
    finished.acquire()
    claim = _thread.allocate_lock()
    trace, profile = threading.gettrace(), threading.getprofile()

    def target(helper):
        if not claim.acquire(False):
            _park(helper)  # a second start (see below): the first helper runs fn
            return
        traced = trace is not None or profile is not None
        try:
            if traced:  # as threading.Thread does
                sys.settrace(trace)
                sys.setprofile(profile)
            state["value"] = fn(*args)
        except BaseException as exc:  # handed to the waiting thread
            state["error"] = exc
        finally:
            if traced:
                sys.settrace(None)
                sys.setprofile(None)
            state["done"] = True  # before the release: the waiter tests it, not the lock
            _park(helper)  # idle before the caller wakes: its next call reuses this helper
            finished.release()

    started = False
    interrupted = None
    while "done" not in state:
        try:
            if not started:
                # Inside the try: a Ctrl-C just after the start must not leave fn running
                # behind the caller's back. It may land just before or just after the start
                # (we cannot tell which), so the start is repeated; a second helper finds
                # fn claimed and goes back to the idle ones at once.
                _hand_to_helper(target)
                started = True
            finished.acquire(timeout=0.05)
            if poll is not None:
                poll()
        except KeyboardInterrupt as exc:
            if interrupted is None and on_interrupt is not None:
                on_interrupt()
            interrupted = exc
    error = interrupted if interrupted is not None else state.pop("error", None)
    interrupted = None
    if error is not None:
        try:
            raise error
        finally:
            # The traceback holds this frame: a local naming the exception would make a
            # cycle, freed (with the kernel's arrays) only by some later garbage collection.
            error = None
    return state["value"]


# Helper threads live as long as the process. A thread that ends calls pthread_exit, whose
# unwinding holds libgcc's frame-registry mutex while it walks every frame table Numba's
# JIT registered; a fork at that moment (DataLoader workers, multiprocessing) left the
# child with the mutex locked for ever, and the child's first kernel load (MCJIT registers
# the kernel's frames) hung: tests/test_boundless.py's forked training did, once in a few
# full runs under load. Kept helpers also keep GNU OpenMP's worker team, which belongs to
# the thread that starts a parallel region and was made and ended anew on every call.
_helpers_lock = _thread.allocate_lock()
_idle_helpers: list = []


class _Helper:
    """One kept helper thread: ``job(helper)`` runs when ``wake`` is released."""

    __slots__ = ("wake", "job")

    def __init__(self):
        self.wake = _thread.allocate_lock()
        self.wake.acquire()
        self.job = None


def _helper_main(helper: _Helper) -> None:
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)  # OpenMP's team inherits it
    while True:
        helper.wake.acquire()
        job, helper.job = helper.job, None
        job(helper)


def _hand_to_helper(target) -> None:
    """Run ``target(helper)`` in an idle helper thread, or in a new one when none is idle
    (so concurrent callers each get their own: about as many helpers as callers at once).
    ``target`` must ``_park`` its helper when done."""
    with _helpers_lock:
        helper = _idle_helpers.pop() if _idle_helpers else None
    if helper is None:
        helper = _Helper()
        _thread.start_new_thread(_helper_main, (helper,))
    helper.job = target
    helper.wake.release()


def _park(helper: _Helper) -> None:
    with _helpers_lock:
        _idle_helpers.append(helper)


class Pending:
    """A call running in a kept helper thread (``in_helper``)."""

    def __init__(self):
        self._finished = _thread.allocate_lock()
        self._finished.acquire()
        self._value = self._error = None

    def done(self) -> bool:
        return not self._finished.locked()

    def wait(self, timeout: float = -1):
        """The call's result, or its exception raised here; with a ``timeout`` (seconds)
        None if it has not finished by then."""
        if not self._finished.acquire(timeout=timeout):
            return None
        self._finished.release()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value


def in_helper(fn, *args) -> Pending:
    """``fn(*args)`` in a kept helper thread (not a thread of its own that then ends, see
    above): the Parquet path's reader and writer. Its SIGINT is blocked, so a Ctrl-C goes
    to the main thread, as Python would deliver it anyway."""
    pending = Pending()

    def target(helper):
        try:
            pending._value = fn(*args)
        except BaseException as exc:  # raised by wait()
            pending._error = exc
        finally:
            _park(helper)
            pending._finished.release()

    _hand_to_helper(target)
    return pending


def on_parts(fn, n_parts: int) -> list:
    """``[fn(0)]``, or ``[fn(0), fn(1)]`` with ``fn(1)`` in a helper thread (``in_helper``)
    while this thread runs ``fn(0)``: two halves of one job at once, when the work
    releases the GIL (kernels, NumPy's copies)."""
    if n_parts == 1:
        return [fn(0)]
    second = in_helper(fn, 1)
    try:
        first = fn(0)
    finally:
        rest = second.wait()
    return [first, rest]


def _call(kernel, n, args):
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        if getattr(kernel, "overloads", True):
            return _call_compiled(kernel, args)
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
        try:
            return _call_compiled(kernel, args)
        except SystemError as exc:
            # A SIGINT whose Python handler runs while the dispatcher boxes the result (in
            # Numba's unpickling of a constant) surfaces as "returned a result with an
            # exception set", the KeyboardInterrupt as its cause: raise it as what it is.
            cause = exc
            while cause is not None and not isinstance(cause, KeyboardInterrupt):
                cause = cause.__cause__ or cause.__context__
            if cause is None:
                raise
            raise KeyboardInterrupt from None
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
    except Exception as exc:
        if getattr(kernel, "overloads", True) and not _from_cache_loader(exc):
            raise  # it compiled (or is plain Python), so the error came from running it
        # The damaged file may belong to any kernel it calls (they load while it compiles).
        _flush_kernel_caches()
        return kernel(*args)


def _call_compiled(kernel, args):
    """``kernel(*args)`` for a kernel that has compiled before. New argument types compile
    it again, and then it may load (damaged) cache files of its own or of the kernels it
    calls: an error raised in Numba's cache loader drops the cache and retries once (see
    ``_load_and_call``); any other error is the kernel's."""
    try:
        return kernel(*args)
    except SystemError:
        raise  # see call_kernel: a KeyboardInterrupt while boxing the result
    except Exception as exc:
        if not _from_cache_loader(exc):
            raise
        _flush_kernel_caches()
        return kernel(*args)


#: Numba's on-disk cache reader: an exception raised through it comes from a cache file.
_CACHE_LOADER = os.path.join("numba", "core", "caching.py")


def _from_cache_loader(exc) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, went through Numba's
    cache loader (a damaged index or data file; never the kernel's own code)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith(_CACHE_LOADER):
                return True
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return False


def _flush_kernel_caches():
    """Drop the on-disk cache index of every loaded fastbpe_nb kernel.

    The dispatchers found as module attributes are flushed (an empty index). Functions that
    Numba compiles with a cache but that no module attribute holds (the implementation of
    an ``@overload``, such as ``kernels.merge``'s prefetch) are reached through their files:
    every index named after a kernel module (``<module>.<qualname>-<line>.pyXY.nbi``) in the
    cache folders of that module is removed, so the next load misses and compiles afresh.
    """
    import glob

    folders = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("fastbpe_nb.kernels.") or module is None:
            continue
        for obj in vars(module).values():
            cache = getattr(obj, "_cache", None)
            if cache is not None and hasattr(cache, "flush") and hasattr(obj, "overloads"):
                cache.flush()
                folder = getattr(cache, "_cache_path", None)
                if folder:
                    folders.add((folder, name.rsplit(".", 1)[1]))
    for folder, stem in folders:
        for index in glob.glob(os.path.join(glob.escape(folder), glob.escape(stem) + ".*.nbi")):
            try:
                os.unlink(index)
            except OSError:
                pass  # removed by another process meanwhile, or not ours to remove
