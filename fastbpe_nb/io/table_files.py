"""The text column of Parquet and Arrow IPC corpus files, as corpus batches.

Read row group by row group (Parquet) or record batch by record batch (Arrow IPC, never
memory-mapped), sliced into batches of about 8 MB of text; each row's invalid UTF-8 is
replaced and counted by the ``Utf8Policy``.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorpusReadError, FastBPEError, OutOfMemoryError
from .file_bytes import open_regular
from .input_files import compression_suffix
from .read_stats import ReadStats
from .utf8_policy import DEFAULT_MAX_INVALID_UTF8, Utf8Policy


def _column_of(table_or_batch, column: str, path: str, where: str):
    names = table_or_batch.schema.names
    if column not in names:
        raise CorpusReadError(f"{path}: {where}: no column {column!r} (columns: {names})")
    return table_or_batch.column(names.index(column))


def _clean_rows(chunk, data, offsets, r0, r1, policy: Utf8Policy, where):
    """Rows ``r0..r1`` of a string chunk as (data, offsets), invalid UTF-8 replaced per row.

    Arrow validates each value on its own (rows are never decoded across a boundary: two
    halves of a character in two rows are two invalid rows). Returns the input untouched
    in the usual case of valid text.
    """
    import pyarrow as pa

    d = data[offsets[r0] : offsets[r1]]
    o = offsets[r0 : r1 + 1] - offsets[r0]
    try:
        chunk.slice(r0, r1 - r0).validate(full=True)
        policy.seen += len(d)
        return d, o
    except pa.ArrowInvalid:
        pass
    raw = d.tobytes()
    parts = []
    for r in range(r1 - r0):
        a, b = int(o[r]), int(o[r + 1])
        parts.append(policy.clean(raw[a:b], a, lambda i, r=r, a=a: where(r0 + r, i)))
    lengths = np.fromiter(map(len, parts), np.int64, len(parts))
    new_o = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_o[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), new_o


def _arrow_batches(array, stats: ReadStats, policy: Utf8Policy, where, prefix=None, row_base=0):
    """Batches of a text column, sliced so that one batch holds at most ~8 MB of text.

    ``where(row, byte)`` describes a position for the invalid-UTF-8 message.
    ``string_chunks`` checks each chunk (offsets, type) before it is read; ``prefix`` and
    ``row_base`` name the file, column and row in its errors (CorpusReadError).
    """
    from .arrow_text import row_slices, string_chunks, text_buffers

    base = 0
    for chunk in string_chunks(array, prefix, row_base):
        stats.documents += len(chunk) - chunk.null_count
        stats.null_rows += chunk.null_count
        data, offsets, valid = text_buffers(chunk)
        stats.bytes_read += int(offsets[-1])
        if chunk.null_count:  # null slots may hold any bytes: validate what is read
            import pyarrow.compute as pc

            chunk = pc.fill_null(chunk, "")
        for r0, r1 in row_slices(offsets):
            yield _clean_rows(chunk, data, offsets, r0, r1, policy,
                              lambda r, i, b=base: where(b + r, i))
            policy.check()
        base += len(chunk)


def read_failure(what: str, exc: BaseException) -> FastBPEError:
    """The error for a corpus read that raised ``exc`` (``what``: the file and, where known,
    the row or row group): ``OutOfMemoryError`` when pyarrow ran out of memory (the file
    is not at fault, and saying it is unreadable would send the user the wrong way),
    ``CorpusReadError`` otherwise."""
    if isinstance(exc, MemoryError):
        return OutOfMemoryError(f"{what}: out of memory while reading ({exc or 'MemoryError'}); "
                                "the file itself may be fine: free memory and read it again")
    return CorpusReadError(f"{what} ({exc})")


def read_parquet(path: str, column: str, stats: ReadStats,
                 max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8):
    """Yield batches of one Parquet file, one row group at a time."""
    import pyarrow.parquet as pq

    if compression_suffix(path) is not None:
        raise CorpusReadError(f"{path}: a compressed Parquet file: decompress it first "
                              "(Parquet compresses inside)")
    open_regular(path).close()  # a FIFO or device is refused before pyarrow opens it
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for bad files
        raise read_failure(f"{path}: not a readable Parquet file", exc) from None
    from .arrow_text import describe_row_groups, parquet_read_plan, row_group_batches

    policy = Utf8Policy(path, max_invalid_utf8, stats)
    columns = [column] if column in pf.schema_arrow.names else None
    row = 0
    for row_groups, batch_rows in parquet_read_plan(pf):
        # Record batches of ~8 MB: a row group of huge documents is never decoded whole (and
        # its pages are freed before a big batch is used); runs of small row groups are
        # read together.
        where = describe_row_groups(row_groups)
        if len(row_groups) == 1:
            batches = row_group_batches(pf, row_groups[0], columns)
        else:
            batches = pf.iter_batches(batch_size=batch_rows, row_groups=row_groups,
                                      columns=columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:
                raise read_failure(f"{path}: {where}: cannot read", exc) from None
            col = _column_of(batch, column, path, where)
            yield from _arrow_batches(col, stats, policy, lambda r, i, b=row, g=where: (
                f"row {b + r:,} ({g}), byte {i:,} of the value"), f"{path}: column {column!r}", row)
            row += batch.num_rows
    policy.check(final=True)


def read_arrow(path: str, column: str, stats: ReadStats,
               max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8):
    """Yield batches of one Arrow IPC file (random-access file or stream format).

    Read record batch by record batch into our memory, not memory-mapped (see
    ``arrow_text.ipc_batches``): a file truncated meanwhile raises CorpusReadError.
    """
    from .arrow_text import ipc_batches

    if compression_suffix(path) is not None:
        raise CorpusReadError(f"{path}: a compressed Arrow file: decompress it first")
    open_regular(path).close()  # a FIFO or device is refused before it is opened for reading
    policy = Utf8Policy(path, max_invalid_utf8, stats)
    row = 0
    try:
        for i, batch in enumerate(ipc_batches(path)):
            col = _column_of(batch, column, path, f"record batch {i}")
            yield from _arrow_batches(col, stats, policy, lambda r, b, base=row, k=i: (
                f"row {base + r:,} (record batch {k}), byte {b:,} of the value"),
                f"{path}: column {column!r}", row)
            row += batch.num_rows
    except FastBPEError:
        raise
    except FileNotFoundError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    except Exception as exc:
        raise read_failure(f"{path}: not a readable Arrow IPC file (at row {row:,})", exc) \
            from None
    policy.check(final=True)
