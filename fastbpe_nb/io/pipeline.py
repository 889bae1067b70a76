"""Overlap reading, encoding and writing of a file: a reader thread and a writer thread.

pyarrow reads, decompresses and writes with the GIL released, and so do the encode
kernels, so while slice k is encoded, slice k+1 is read and slice k-1 written. Each side
holds at most ``depth`` slices ahead (bounded memory: one slice read ahead and one being
written by default). Order is kept, and an error on any side is raised in the calling
thread at the point where the serial code would have raised it: a read error when the
slice is asked for, a write error at the next ``submit`` or at ``finish``. Both run in
``parallel``'s kept helper threads: no thread ends after a file (see ``parallel.py`` on
why a thread that ends may break a later ``fork``).
"""

from __future__ import annotations

import queue
import threading

from ..parallel import in_helper

_DONE = object()


class _Failed:
    def __init__(self, exc: BaseException):
        self.exc = exc


def prefetch(iterable, depth: int = 1):
    """Iterate ``iterable`` in a reader thread, ``depth`` items ahead of the caller.

    Closing the generator (or an exception in the caller's loop) stops the reader after
    the item it is reading; the reader never runs more than ``depth + 1`` items ahead.
    """
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def read():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put(_DONE)
        except BaseException as exc:  # handed to the caller, raised there
            items.put(_Failed(exc))

    reader = in_helper(read)
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item
    finally:
        stop.set()
        while not reader.done():  # unblock a reader waiting to put, then let it end
            try:
                items.get_nowait()
            except queue.Empty:
                pass
            reader.wait(timeout=0.05)
        close = getattr(iterable, "close", None)
        if close is not None:
            close()


class OrderedWriter:
    """Run write jobs in one writer thread, in submission order, one at a time.

    ``submit(fn, *args)`` waits for the previous job first (so at most one slice is held
    for writing) and raises its error, if any; ``finish()`` waits for the last one.
    """

    def __init__(self):
        self._job = None

    def _wait(self):
        if self._job is not None:
            job, self._job = self._job, None
            job.wait()  # raises the job's error

    def submit(self, fn, *args) -> None:
        self._wait()
        self._job = in_helper(fn, *args)

    def finish(self) -> None:
        self._wait()
