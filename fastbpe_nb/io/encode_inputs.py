"""The input tables of ``encode_parquet``, read as slices of about 8 MB of text.

Parquet (runs of small row groups read together, a huge one never decoded whole), Arrow
IPC (batch by batch into our memory, never memory-mapped) and JSON lines; the text column
is checked (type, offsets) before anything reads it, and errors name the file and row.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorpusReadError, TextColumnTypeError
from . import arrow_text
from .arrow_text import row_group_batches
from .input_files import ARROW_SUFFIXES, JSONL_SUFFIXES, PARQUET_SUFFIXES, file_kind
from .table_files import read_failure

TABLE_SUFFIXES = PARQUET_SUFFIXES + ARROW_SUFFIXES + JSONL_SUFFIXES
#: What ``file_kind`` calls the inputs encode reads (JSONL also compressed: ``x.jsonl.zst``).
TABLE_KINDS = ("parquet", "arrow", "jsonl")
#: At most this many rows per encoder call when small batches are gathered into a slice.
SLICE_ROWS = 1 << 20


def open_input(path: str, columns: list[str]):
    """``(schema, batches)``: the input's Arrow schema (checked for ``columns``) and an
    iterator of ``(row_offset, RecordBatch)`` of those columns, in file order."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    kind = file_kind(path)
    if kind not in TABLE_KINDS:
        raise CorpusReadError(f"{path}: not a Parquet, Arrow or JSONL file (encode reads tables)")
    if kind == "jsonl":
        return _open_jsonl(path, columns)
    try:
        if kind == "parquet":
            pf = pq.ParquetFile(path)
            schema = pf.schema_arrow
            batches = None
        else:
            import itertools

            # Read batch by batch into our memory, never memory-mapped: a file cut while it
            # is read gives CorpusReadError, not SIGBUS (arrow_text.ipc_batches).
            stream = arrow_text.ipc_batches(path)
            first = next(stream, None)
            if first is None:
                with pa.OSFile(path) as f:
                    try:
                        schema = ipc.open_file(f).schema
                    except pa.ArrowInvalid:
                        f.seek(0)
                        schema = ipc.open_stream(f).schema
                batches = iter(())
            else:
                schema = first.schema
                batches = itertools.chain([first], stream)
    except Exception as exc:
        raise read_failure(f"{path}: not a readable {kind} file", exc) from None
    names = schema.names
    for k, c in enumerate(columns):
        if c not in names:
            what = f"no column {c!r}" if k == 0 else f"keep_columns: no column {c!r} to keep"
            raise CorpusReadError(f"{path}: {what} (columns: {names})")
        if names.count(c) > 1:
            raise CorpusReadError(f"{path}: the column name {c!r} appears twice")
    text_type = schema.field(columns[0]).type
    if not (arrow_text._is_text_type(text_type) or pa.types.is_null(text_type) or (
            pa.types.is_dictionary(text_type) and arrow_text._is_text_type(text_type.value_type))):
        raise TextColumnTypeError(f"{path}: column {columns[0]!r} has type {text_type}, not text "
                                  f"(expected one of {', '.join(arrow_text.TEXT_TYPES)})")
    schema = pa.schema([schema.field(c) for c in columns])
    if kind == "parquet":
        return schema, _parquet_batches(pf, path, columns)
    return schema, _arrow_batches(batches, path, columns)


def _open_jsonl(path: str, columns: list[str]):
    """``open_input`` of a JSON-lines file: a missing or null field is a null row; the schema
    is the first block's (the text column is always ``string``)."""
    import itertools

    import pyarrow as pa

    from .jsonl_files import jsonl_tables

    if len(set(columns)) != len(columns):
        raise CorpusReadError(f"{path}: a column is asked for twice ({columns})")
    tables = jsonl_tables(path, columns)
    first = next(tables, None)
    if first is None:
        fields = [pa.field(columns[0], pa.string())] + [pa.field(c, pa.null()) for c in columns[1:]]
        return pa.schema(fields), iter(())

    def batches():
        for row0, table in itertools.chain([first], tables):
            row = row0
            for batch in table.to_batches():
                yield row, batch
                row += batch.num_rows

    return first[1].schema, batches()


def _parquet_batches(pf, path, columns):
    row = 0
    # Runs of small row groups are read together (one call each, not one per group);
    # record batches of ~8 MB: a huge row group is never decoded whole.
    for run, rows in arrow_text.parquet_read_plan(pf, max_rows=SLICE_ROWS):
        try:
            if len(run) == 1:  # maybe huge: its pages are freed before its last batch is used
                batches = row_group_batches(pf, run[0], columns)
            else:
                batches = pf.iter_batches(batch_size=rows, row_groups=run, columns=columns,
                                          use_threads=False)
            for batch in batches:
                yield row, batch
                row += batch.num_rows
        except CorpusReadError:
            raise
        except Exception as exc:
            rg = _failing_row_group(pf, run, columns)
            raise CorpusReadError(f"{path}: row group {rg}: cannot read ({exc})") from None


def _failing_row_group(pf, run, columns):
    """The first row group of ``run`` that cannot be read alone (for the error message)."""
    if len(run) == 1:
        return run[0]
    for rg in run:
        try:
            pf.read_row_group(rg, columns=columns, use_threads=False)
        except Exception:
            return rg
    return f"{run[0]}-{run[-1]}"


def _arrow_batches(batches, path, columns):
    row = 0
    try:
        for batch in batches:
            yield row, batch.select(columns)
            row += batch.num_rows
    except Exception as exc:
        raise read_failure(f"{path}: not a readable arrow file after row {row}", exc) from None


def text_slices(batches, column, path):
    """Gather batches into consecutive row ranges of about SLICE_BYTES of text.

    The rows are packed as one stream: a slice takes rows until the next would pass
    SLICE_BYTES (or SLICE_ROWS rows), across batch boundaries, so a batch's remainder fills
    the next slice instead of becoming an encoder call of its own (batches of a little over
    SLICE_BYTES made calls of a few hundred rows). Memory stays bounded by the slice, not
    by the input's row-group size (one encoder call needs about 10-15 bytes per text byte);
    a single row over the limit is a slice of its own. Yields ``(first_row, pa.Table)``;
    rows keep their order and row numbers are the file's. Output row groups follow the
    slices.
    """
    import pyarrow as pa

    from .arrow_text import text_buffers

    limit = arrow_text.SLICE_BYTES
    pending, size, rows, start = [], 0, 0, 0
    for row0, batch in batches:
        # Checked (offsets within the data; a text type, converted to string) before
        # anything reads the column: CorpusReadError naming the file, column and row.
        col = arrow_text.as_string_array(batch.column(column), f"{path}: column {column!r}", row0)
        if col is not batch.column(column):
            batch = batch.set_column(batch.schema.get_field_index(column), column, col)
        _, offsets, _ = text_buffers(col)
        n, r0 = batch.num_rows, 0
        while r0 < n:
            # The rows from r0 that fit what is left of the slice (one at least when empty).
            fit = int(np.searchsorted(offsets, offsets[r0] + (limit - size), side="right")) - 1
            r1 = min(fit, n, r0 + SLICE_ROWS - rows)
            if r1 <= r0:
                if pending:
                    yield start, pa.Table.from_batches(pending)
                    pending, size, rows = [], 0, 0
                    continue
                r1 = r0 + 1  # a row over the limit: a slice of its own
            if not pending:
                start = row0 + r0
            pending.append(batch.slice(r0, r1 - r0))
            size += int(offsets[r1] - offsets[r0])
            rows += r1 - r0
            r0 = r1
    if pending:
        yield start, pa.Table.from_batches(pending)
