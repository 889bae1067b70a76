"""Handing work between two threads that stay inside compiled kernels: acquire loads and
release stores of one int64 array element, and a spin-wait hint.

Numba's parallel regions start a thread team per call: a few microseconds from the main
thread, 13-60 us from a worker thread on the team's 2-vCPU VM, where libgomp's idle
threads sleep and are woken through the kernel (``docs/performance.md``, 2026-12-05). A
loop that hands work to another thread every few microseconds (the two-core merge loop,
``merge_halves.py``) instead keeps a second thread in a kernel of its own, waiting on a
shared array: one side writes its data, then ``atomic_store`` s a sequence number; the
other ``atomic_load`` s it until it changes, then reads the data. Release and acquire make
the data visible in that order on any CPU (on x86 they are plain moves that the compiler
may not reorder or hoist out of the waiting loop); ``cpu_relax`` is x86's ``pause`` (on
other CPUs nothing), which keeps a waiting core from flooding the memory system, and a
wait that lasts calls ``cpu_yield`` (``sched_yield``), so that with more runnable threads
than cores the thread waited for gets the CPU.

Under ``NUMBA_DISABLE_JIT=1`` the three are plain Python (``cpu_relax`` does nothing: a
waiting thread gives up the GIL at Python's switch interval).
"""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload


def atomic_load(arr, i):
    """``arr[i]`` (int64, 1-d, contiguous) read with acquire ordering: what the thread that
    stored it wrote before its ``atomic_store`` is visible after this returns."""
    return arr[i]


def atomic_store(arr, i, value):
    """``arr[i] = value`` (int64, 1-d, contiguous) with release ordering: everything this
    thread wrote before is visible to a thread whose ``atomic_load`` sees ``value``."""
    arr[i] = value


def cpu_relax():
    """A spin-wait's pause (x86 ``pause``; nothing on other CPUs)."""


def cpu_yield():
    """Give this thread's CPU to another runnable thread (``sched_yield`` on Linux and
    macOS; nothing elsewhere): a wait that has spun for long, because the thread it waits
    for may need this CPU (more runnable threads than cores)."""


def _element_pointer(context, builder, arr_type, arr, index, index_type):
    ary = context.make_array(arr_type)(context, builder, arr)
    return builder.gep(ary.data, [context.cast(builder, index, index_type, types.intp)])


def _int64_array(arr, i):
    return (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.int64
            and arr.layout == "C" and isinstance(i, types.Integer))


@intrinsic
def _load_acquire(typingctx, arr, i):
    if not _int64_array(arr, i):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(arr, i), codegen


@intrinsic
def _store_release(typingctx, arr, i, value):
    if not _int64_array(arr, i) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        v = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(v, ptr, "release", 8)
        return context.get_dummy_value()

    return types.void(arr, i, value), codegen


@intrinsic
def _pause(typingctx):
    def codegen(context, builder, sig, args):
        if builder.module.triple.startswith(("x86_64", "i386", "i686")):
            fnty = cgutils.ir.FunctionType(cgutils.ir.VoidType(), [])
            builder.call(cgutils.get_or_insert_function(builder.module, fnty,
                                                        "llvm.x86.sse2.pause"), [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _sched_yield(typingctx):
    def codegen(context, builder, sig, args):
        if "linux" in builder.module.triple or "darwin" in builder.module.triple:
            fnty = cgutils.ir.FunctionType(cgutils.ir.IntType(32), [])
            builder.call(cgutils.get_or_insert_function(builder.module, fnty, "sched_yield"),
                         [])
        return context.get_dummy_value()

    return types.void(), codegen


@overload(atomic_load, jit_options={"cache": True, "nogil": True, "_nrt": False})
def _atomic_load_jit(arr, i):
    def impl(arr, i):
        return _load_acquire(arr, i)

    return impl


@overload(atomic_store, jit_options={"cache": True, "nogil": True, "_nrt": False})
def _atomic_store_jit(arr, i, value):
    def impl(arr, i, value):
        _store_release(arr, i, value)

    return impl


@overload(cpu_relax, jit_options={"cache": True, "nogil": True, "_nrt": False})
def _cpu_relax_jit():
    def impl():
        _pause()

    return impl


@overload(cpu_yield, jit_options={"cache": True, "nogil": True, "_nrt": False})
def _cpu_yield_jit():
    def impl():
        _sched_yield()

    return impl
