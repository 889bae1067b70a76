"""Arrow string arrays as the flat buffers the kernels read (no per-row Python objects)."""

from __future__ import annotations

import numpy as np


def string_chunks(array):
    """The chunks of a pyarrow (Chunked)Array of ``string`` / ``large_string``; TypeError otherwise."""
    import pyarrow as pa

    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    for chunk in chunks:
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            raise TypeError(f"expected a string or large_string array, got type {chunk.type}")
        yield chunk


def text_buffers(array):
    """``(data uint8[n], offsets int64[len+1], valid bool[len])`` of a string array.

    Honours the array's slice offset. Null rows become empty documents (their ``valid``
    is False): Arrow allows a null slot to hold bytes, so they are never read.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(array)
    valid = np.ones(n, dtype=bool)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        array = pc.fill_null(array, "")
    large = pa.types.is_large_string(array.type)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[array.offset : array.offset + n + 1].astype(np.int64)
    if buffers[2] is None or n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64), valid
    data = np.frombuffer(buffers[2], dtype=np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    return data[start:end], offsets - start, valid
