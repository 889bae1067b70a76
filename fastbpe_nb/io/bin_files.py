"""The ``.bin`` token file of ``encode_parquet(format="bin")``: written in pieces, read back.

``<stem>.bin`` holds the ids of every non-null row as one flat little-endian array
(``uint16`` when the vocabulary fits, else ``uint32``), each document followed by the
separator token; ``<stem>.idx.npy`` the int64 offsets (in tokens) of each document's start
and, last, the total length. This is the layout language-model training scripts
memory-map (``np.memmap(path, dtype=np.uint16, mode="r")``; ``read_bin`` checks it first).
``<stem>.bin.json`` is the completeness marker: it is removed before the ``.bin`` and
``.idx.npy`` of a new run replace the old ones and written last (atomically), with the
byte sizes of both; a ``.bin`` without a marker (or with sizes that disagree) is
incomplete and ``read_bin`` refuses it. The three renames happen under an exclusive
``flock`` of the folder, so concurrent writers of one output cannot interleave them.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import OutputError
from .atomic import atomic_write, folder_lock, fsync_dir

#: Ids per piece when a bin file is written (bounds the conversion and insertion copies).
BIN_PIECE_IDS = 4 << 20


def write_bin(f, ids, ends, sep_id, dtype) -> int:
    """Write ``ids`` with ``sep_id`` inserted before each index of ``ends`` (sorted; an end
    equal to ``len(ids)`` is appended), ``BIN_PIECE_IDS`` ids at a time, as ``dtype``.
    The same bytes as one ``np.insert`` of the whole, without copies of the whole (a
    single huge document's ids were copied twice): each piece is converted and interleaved
    by one kernel pass (``kernels.token_files``, GIL released) into one reused buffer.
    Returns the ids written."""
    from ..kernels.token_files import interleave_separators
    from ..parallel import call_kernel

    ids = np.ascontiguousarray(ids, dtype=np.int32)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    n = len(ids)
    # The kernel indexes without bounds checks: ends must be sorted within 0..n.
    if len(ends) and (ends[0] < 0 or ends[-1] > n or np.any(np.diff(ends) < 0)):
        raise ValueError("ends must be sorted id indices within 0..len(ids)")
    native = np.dtype(dtype).newbyteorder("=")  # (the kernel writes native integers)
    buf = np.empty(0, dtype=native)
    written = 0
    for a in range(0, max(n, 1), BIN_PIECE_IDS):
        b = min(n, a + BIN_PIECE_IDS)
        lo = int(np.searchsorted(ends, a, side="left"))
        hi = len(ends) if b == n else int(np.searchsorted(ends, b, side="left"))
        size = (b - a) + (hi - lo)
        if len(buf) < size:
            buf = np.empty(size, dtype=native)
        call_kernel(interleave_separators, ids, a, b, ends, lo, hi, int(sep_id), buf)
        f.write(buf[:size].astype(dtype, copy=False).data)
        written += size
    return written


def commit_bin(pending, marker, meta) -> None:
    """Put ``.bin`` and ``.idx.npy`` in place, then the marker, under the folder's lock.

    The old marker goes first: from then on until the new marker is in place the output
    is incomplete, whatever happens (a kill, a full disk), and resume encodes it again.
    """
    folder = os.path.dirname(os.path.abspath(marker))
    with folder_lock(folder, exclusive=True):
        try:
            os.unlink(marker)
            fsync_dir(folder)
        except FileNotFoundError:
            pass
        for p in pending:
            p.commit()
        with atomic_write(marker, "w") as g:
            g.write(json.dumps(meta, indent=2) + "\n")


def read_bin(bin_path):
    """Memory-map a ``.bin`` token file: ``(ids, doc_offsets)`` (index from ``.idx.npy``).

    Checks the completeness marker ``<bin>.json`` first (present, and recording the sizes
    the two files have); raises OutputError naming the file otherwise. An output of no
    document gives empty arrays.
    """
    bin_path = os.fspath(bin_path)
    base = bin_path[:-4] if bin_path.endswith(".bin") else bin_path
    marker, idx_path = bin_path + ".json", base + ".idx.npy"
    resume_hint = "encode it again (resume=True / --resume does that)"
    with folder_lock(os.path.dirname(os.path.abspath(bin_path)), exclusive=False):
        try:
            with open(marker, encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            raise OutputError(f"{bin_path}: incomplete output: its completeness marker {marker} "
                              f"is missing (the run writing it was interrupted); {resume_hint}"
                              ) from None
        except (OSError, ValueError) as exc:
            raise OutputError(f"{marker}: unreadable completeness marker ({exc}); "
                              f"{resume_hint}") from None
        try:
            dtype = np.dtype(meta["dtype"]).newbyteorder("<")
            bin_size = os.path.getsize(bin_path)
            idx_size = os.path.getsize(idx_path)
        except (KeyError, TypeError) as exc:
            raise OutputError(f"{marker}: not a marker of ours ({exc})") from None
        except OSError as exc:
            raise OutputError(f"{exc.filename}: missing part of the output {bin_path}; "
                              f"{resume_hint}") from None
        if "bin_bytes" in meta and (bin_size, idx_size) != (meta["bin_bytes"], meta["idx_bytes"]):
            raise OutputError(f"{bin_path}: inconsistent output: .bin/.idx.npy are {bin_size}/"
                              f"{idx_size} bytes, the marker {marker} says {meta['bin_bytes']}/"
                              f"{meta['idx_bytes']}; {resume_hint}")
        if bin_size % dtype.itemsize:
            raise OutputError(f"{bin_path}: {bin_size} bytes is not a whole number of "
                              f"{dtype.name} ids")
        if bin_size == 0:  # np.memmap cannot map 0 bytes
            ids = np.zeros(0, dtype=dtype)
            ids.flags.writeable = False
        else:
            ids = np.memmap(bin_path, dtype=dtype, mode="r")
        try:
            index = np.load(idx_path)
        except Exception as exc:
            raise OutputError(f"{idx_path}: unreadable index ({exc})") from None
    if index.ndim != 1 or len(index) == 0 or index[-1] != len(ids):
        raise OutputError(f"{bin_path}: index says {index[-1] if len(index) else None} tokens, "
                          f"file has {len(ids)}")
    if "documents" in meta and len(index) != meta["documents"] + 1:
        raise OutputError(f"{bin_path}: index has {len(index) - 1} documents, the marker "
                          f"says {meta['documents']}")
    return ids, index
