"""Atomic file output: write to a temporary name in the same folder, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile

from ..errors import FastBPEError


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object; on success it replaces ``path`` atomically, on failure nothing changes.

    The temporary file lives in the destination folder so that the final ``os.replace`` is a
    rename within one file system. Errors name the destination path.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if (isinstance(exc, OSError) and not isinstance(exc, FastBPEError)
                and not getattr(exc, "filename", None)):
            raise OSError(exc.errno, f"{exc.strerror or exc} while writing", path) from exc
        raise
