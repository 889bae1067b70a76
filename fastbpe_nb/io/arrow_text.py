"""Arrow text arrays as the flat buffers the kernels read (no per-row Python objects).

Arrow data read from a file is untrusted: an IPC reader checks buffer sizes but not the
offsets inside them, and NumPy / Numba do not bounds-check. ``string_chunks`` and
``text_buffers`` are the one place every Arrow text path goes through (the tokenizer's
Arrow encode, ``encode_parquet``, the corpus readers, training from arrays), and they check
the offsets of every row (O(rows), vectorised) before anything else reads the data.

Text column types (``string_chunks``):

* ``string``, ``large_string``: as they are.
* ``binary``, ``large_binary``: viewed as strings (zero-copy); the bytes are encoded as
  they are, invalid UTF-8 included, exactly like ``Tokenizer.encode_bytes`` (each invalid
  byte is a character of its own for pre-tokenization). Training counts them the same way.
* ``dictionary<string | binary ...>``: decoded (a copy of the text); the dictionary's
  offsets and the indices are checked first.
* ``string_view``, ``binary_view``: the views are checked against their buffers, then the
  array is cast to ``large_string`` (a copy).
* ``null`` (a column of nulls only): every row is a null row.
* anything else (integers, lists, structs, fixed-size binary...): ``TextColumnTypeError``
  naming the column (and file) and the type.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArrowDataError, TextColumnTypeError

#: What the error for an unusable column type lists as accepted.
TEXT_TYPES = ("string", "large_string", "binary", "large_binary", "dictionary<string>",
              "string_view", "binary_view", "null")


def _prefix(where) -> str:
    return f"{where}: " if where else ""


def string_chunks(array, where=None, row_base: int = 0):
    """The chunks of a pyarrow (Chunked)Array as ``string`` / ``large_string`` arrays.

    Each chunk's offsets are checked (``check_offsets``) before any pyarrow function
    reads its data (a concatenation or a cast of a corrupt array reads out of bounds).
    Other text types are converted as the module docstring says; a type that holds no
    text raises ``TextColumnTypeError``. ``where`` (e.g. ``"data.arrow: column 'text'"``)
    and ``row_base`` (the row number of the array's first row) go into error messages.
    """
    import pyarrow as pa

    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    row = row_base
    for chunk in chunks:
        if not isinstance(chunk, pa.Array):
            raise TextColumnTypeError(f"{_prefix(where)}expected a pyarrow array, got "
                                      f"{type(chunk).__name__}")
        out = as_string_array(chunk, where, row)
        row += len(chunk)
        yield out


def as_string_array(chunk, where=None, row_base: int = 0):
    """One chunk as a checked ``string`` / ``large_string`` array (see ``string_chunks``)."""
    import pyarrow as pa

    t = chunk.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        check_offsets(chunk, where, row_base)
        return chunk
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        check_offsets(chunk, where, row_base)
        return chunk.view(pa.large_string() if pa.types.is_large_binary(t) else pa.string())
    if pa.types.is_dictionary(t) and _is_text_type(t.value_type):
        # Indices are bounds-checked by take; the dictionary's offsets by us, first.
        values = as_string_array(chunk.dictionary, _prefix(where) + "dictionary", 0)
        import pyarrow.compute as pc

        try:
            return pc.take(values, chunk.indices)
        except (pa.ArrowIndexError, pa.ArrowInvalid) as exc:
            raise ArrowDataError(f"{_prefix(where)}rows {row_base}..{row_base + len(chunk) - 1}: "
                                 f"bad dictionary indices ({exc})") from None
    if _is_view_type(t):
        try:
            chunk.view(pa.binary_view()).validate(full=True)  # views vs buffers; no UTF-8 check
        except (pa.ArrowIndexError, pa.ArrowInvalid) as exc:
            raise ArrowDataError(f"{_prefix(where)}rows {row_base}..{row_base + len(chunk) - 1}: "
                                 f"corrupt {t} array ({exc})") from None
        return chunk.view(pa.string_view()).cast(pa.large_string())
    if pa.types.is_null(t):
        return pa.nulls(len(chunk), pa.string())
    raise TextColumnTypeError(f"{where or 'the array'} has type {t}, not text (expected one of "
                              f"{', '.join(TEXT_TYPES)})")


def _is_view_type(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string_view(t) or pa.types.is_binary_view(t)


def _is_text_type(t) -> bool:
    import pyarrow as pa

    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or _is_view_type(t))


def _raw_offsets(array, where=None):
    """``(offsets int32/int64[len+1] view, data length)`` of a string/binary array, after
    checking that the offsets buffer is long enough for the array's slice."""
    import pyarrow as pa

    n = len(array)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    dtype = np.int64 if large else np.int32
    buffers = array.buffers()
    need = (array.offset + n + 1) * np.dtype(dtype).itemsize
    if buffers[1] is None or buffers[1].size < need:
        have = 0 if buffers[1] is None else buffers[1].size
        raise ArrowDataError(f"{_prefix(where)}offsets buffer of {have} bytes is too short "
                             f"for {n} rows at slice offset {array.offset} (corrupt Arrow data)")
    offsets = np.frombuffer(buffers[1], dtype=dtype, count=array.offset + n + 1)[array.offset:]
    data_len = 0 if buffers[2] is None else buffers[2].size
    return offsets, data_len


def check_offsets(array, where=None, row_base: int = 0) -> None:
    """Raise ``ArrowDataError`` unless every row of a string/binary array lies in its data.

    Checks that the offsets are non-decreasing, the first is >= 0 and the last is <= the
    data buffer's length (honouring the array's slice offset; string or large_string).
    Arrow requires this of null rows too. O(rows) in NumPy; the bad row is looked for
    only when the check fails. ``row_base``: the row number of ``array[0]`` in messages.
    """
    if len(array) == 0:
        return
    offsets, data_len = _raw_offsets(array, where)
    first, last = int(offsets[0]), int(offsets[-1])
    if first >= 0 and last <= data_len and (np.diff(offsets) >= 0).all():
        return
    lo, hi = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    bad = (hi < lo) | (lo < 0) | (hi > data_len)
    row = int(np.argmax(bad))
    what = ("decrease" if hi[row] < lo[row] else
            f"run outside the data buffer of {data_len} bytes")
    raise ArrowDataError(f"{_prefix(where)}row {row_base + row}: offsets {int(lo[row])}.."
                         f"{int(hi[row])} {what}: corrupt Arrow data")


def text_buffers(array, where=None, row_base: int = 0):
    """``(data uint8[n], offsets int64[len+1], valid bool[len])`` of a string array.

    Honours the array's slice offset; the offsets are checked first (``check_offsets``).
    Null rows become empty documents (their ``valid`` is False): Arrow allows a null slot
    to hold bytes, so they are never read. The data is a view of the array's buffer, not
    a copy, unless a null slot does hold bytes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_string(array.type) and not pa.types.is_large_string(array.type):
        array = as_string_array(array, where, row_base)
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64), np.ones(0, dtype=bool)
    check_offsets(array, where, row_base)
    valid = np.ones(n, dtype=bool)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        raw, _ = _raw_offsets(array)
        if (np.diff(raw)[~valid] != 0).any():  # a null slot holds bytes: drop them (a copy)
            array = pc.fill_null(array, "")
    offsets, _ = _raw_offsets(array)
    offsets = offsets.astype(np.int64)
    buffers = array.buffers()
    if buffers[2] is None:
        return np.zeros(0, dtype=np.uint8), offsets - offsets[0], valid
    data = np.frombuffer(buffers[2], dtype=np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    return data[start:end], offsets - start, valid


def ipc_batches(path):
    """Yield the record batches of an Arrow IPC file (random-access file or stream format).

    Read through an ordinary file, one record batch at a time, never memory-mapped: each
    batch is copied into our memory as it is read, so a file truncated while we read it
    gives a read error (pyarrow's "expected to read N bytes"), never a SIGBUS on a page
    that no longer exists; memory stays about one record batch. The file's size and
    modification time are compared after every batch, so a file rewritten or cut at a
    batch boundary (a stream then just looks shorter) raises ``CorpusReadError`` too,
    rather than giving part of the data silently.
    """
    import os

    import pyarrow as pa
    import pyarrow.ipc as ipc

    from ..errors import CorpusReadError

    with open(path, "rb") as raw:
        before = os.fstat(raw.fileno())

        def unchanged(batch_index):
            now = os.fstat(raw.fileno())
            if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                raise CorpusReadError(
                    f"{path}: the file changed while it was read (size {before.st_size} -> "
                    f"{now.st_size} bytes at record batch {batch_index})")

        source = pa.PythonFile(raw, mode="r")
        try:
            reader = ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:  # not the file format: try the stream format
            raw.seek(0)
            batches = iter(ipc.open_stream(source))
        for i, batch in enumerate(batches):
            unchanged(i)
            yield batch
        unchanged("end")


#: Text bytes per kernel call when a batch is cut into slices: bounds the memory of one
#: call (pre-token offsets, ids and counting tables take about 10-15 bytes per text byte).
SLICE_BYTES = 8 << 20


def row_slices(offsets: np.ndarray, max_bytes: int | None = None) -> list[tuple[int, int]]:
    """Cut rows ``0 .. len(offsets)-2`` into consecutive ranges of about ``max_bytes`` text.

    ``offsets`` are the rows' byte offsets (``int64[rows + 1]``). A single row longer than
    ``max_bytes`` gets a range of its own (rows are never split). Default: ``SLICE_BYTES``.
    """
    if max_bytes is None:
        max_bytes = SLICE_BYTES
    n = len(offsets) - 1
    out = []
    start = 0
    while start < n:
        limit = offsets[start] + max_bytes
        end = int(np.searchsorted(offsets, limit, side="right")) - 1
        end = min(max(end, start + 1), n)
        out.append((start, end))
        start = end
    return out


def parquet_batch_rows(parquet_file, row_group: int, max_bytes: int | None = None) -> int:
    """Rows per record batch so that one batch holds about ``max_bytes`` of data.

    From the row group's metadata (uncompressed size / rows): a row group of a few huge
    documents is read a few rows at a time, not decoded whole.
    """
    if max_bytes is None:
        max_bytes = SLICE_BYTES
    meta = parquet_file.metadata.row_group(row_group)
    if meta.num_rows == 0:
        return 1024
    per_row = max(1, meta.total_byte_size // meta.num_rows)
    return int(max(1, min(65536, max_bytes // per_row)))


#: At most this many rows in one run of small row groups (``parquet_read_plan``).
MAX_RUN_ROWS = 1 << 20


def parquet_read_plan(parquet_file, max_bytes: int | None = None,
                      max_rows: int = MAX_RUN_ROWS) -> list[tuple[list[int], int]]:
    """Runs of consecutive row groups to read together, each with its record-batch size.

    ``[(row_groups, batch_rows), ...]`` in file order. Small row groups are read together
    until a run holds about ``max_bytes`` (uncompressed) or ``max_rows`` rows (one
    ``iter_batches`` call per row group costs about 70 us: 20,000 ten-row groups took
    1.5 s to read one by one, 0.13 s together); a big row group is a run of its own.
    ``batch_rows`` is the smallest ``parquet_batch_rows`` of the run, so a batch never
    holds much more than ``max_bytes``.
    """
    if max_bytes is None:
        max_bytes = SLICE_BYTES
    meta = parquet_file.metadata
    plan, run, run_bytes, n_rows, run_rows = [], [], 0, 0, 65536
    for rg in range(meta.num_row_groups):
        g = meta.row_group(rg)
        if run and (run_bytes + g.total_byte_size > max_bytes or n_rows + g.num_rows > max_rows):
            plan.append((run, run_rows))
            run, run_bytes, n_rows, run_rows = [], 0, 0, 65536
        run.append(rg)
        run_bytes += g.total_byte_size
        n_rows += g.num_rows
        run_rows = min(run_rows, parquet_batch_rows(parquet_file, rg, max_bytes))
    if run:
        plan.append((run, run_rows))
    return plan


def describe_row_groups(row_groups: list[int]) -> str:
    """``"row group 3"`` or ``"row groups 3-9"`` for error messages."""
    if len(row_groups) == 1:
        return f"row group {row_groups[0]}"
    return f"row groups {row_groups[0]}-{row_groups[-1]}"


def row_group_batches(parquet_file, row_group: int, columns=None, max_bytes: int | None = None):
    """Yield the record batches of one Parquet row group, about ``max_bytes`` each
    (``parquet_batch_rows``), the last one only after the reader has let go of the row
    group: pyarrow's reader keeps the column chunk and its decompressed pages while its
    iterator lives (measured: 1,044 MiB held for a row of 300 MiB in a dictionary-encoded
    chunk, 300 MiB once exhausted), and a huge row is usually alone in its row group.
    """
    import pyarrow as pa

    rows_left = parquet_file.metadata.row_group(row_group).num_rows
    batches = parquet_file.iter_batches(batch_size=parquet_batch_rows(parquet_file, row_group,
                                                                      max_bytes),
                                        row_groups=[row_group], columns=columns)
    for batch in batches:
        rows_left -= batch.num_rows
        if rows_left <= 0:
            for _ in batches:  # nothing is left: this ends the reader and frees its pages
                pass
            if batch.nbytes >= RELEASE_BYTES:
                # pyarrow's allocator keeps freed pages for itself; NumPy (the ids) and the
                # kernels cannot reuse them. After a huge batch, hand them back.
                pa.default_memory_pool().release_unused()
        yield batch


#: A batch at least this large is followed by ``MemoryPool.release_unused`` (its cost, a
#: few ms, is nothing next to encoding 16 MiB of text; batches are ~8 MiB, SLICE_BYTES).
RELEASE_BYTES = 16 << 20
