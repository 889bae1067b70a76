"""Encode one input file of ``encode_parquet``, slice by slice, into its output.

Parquet output: one row per input row (nulls kept), ``ids`` as ``list<dtype>`` plus the
kept columns, the identity record in the schema metadata. Bin output: the ``bin_files``
layout. Every file is written to a temporary name and renamed when complete; on any
error nothing of this file's output is left behind.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import DisallowedSpecialTokenError, FastBPEError, InvalidUTF8Error
from ..framing import add_special
from .atomic import PendingFile, name_error, sync_written
from .bin_files import commit_bin, write_bin
from .encode_identity import META_KEY, check_unchanged
from .encode_inputs import open_input, text_slices
from .heap import release_free_memory
from .pipeline import OrderedWriter, prefetch

#: Bytes per id that writing ``ids`` as a Parquet ``list`` row takes in pyarrow's writer
#: (repetition/definition levels and buffers for the whole row), measured with 11.5M and
#: 86M ids of one row: 24 and 20 (14-18 in the writer alone); plus the 4 of the ids.
PARQUET_LIST_BYTES_PER_ID = 24


def encode_one(tok, job, column, keep, fmt, np_dtype, sep_id, allowed, disallowed,
               n_threads, count_only, bar, record, sink=None):
    """Encode ``job``'s input (or only count it); returns the file's report dict.

    ``allowed`` and ``disallowed`` are the special-token specs of ``Tokenizer.encode_batch_flat``;
    ``record`` is the identity record written into the output (see ``encode_identity``);
    ``sink``: the ``token_formats.TokenSink`` of a training-stack format. The memory the
    file's slices freed goes back to the system afterwards (``heap.py``).
    """
    try:
        return _encode_one(tok, job, column, keep, fmt, np_dtype, sep_id, allowed, disallowed,
                           n_threads, count_only, bar, record, sink)
    finally:
        release_free_memory()


def _encode_one(tok, job, column, keep, fmt, np_dtype, sep_id, allowed, disallowed,
                n_threads, count_only, bar, record, sink):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = job.path
    ids_column = record.get("ids_column") or "ids"
    count_column = record.get("token_count_column")
    bos_id = record.get("bos_id") if fmt in ("parquet", "bin") else None
    rep = {"path": path, "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
           "encoder_calls": 0, "outputs": list(job.outs)}
    columns = [column] + [c for c in keep if c != column]
    writer = None
    pending = []
    idx_parts = []
    n_tokens_written = 0
    null_ranges = []  # [start, stop) runs of null input rows
    batch = table = None
    # The next slice is read and the last one written while this one is encoded.
    out = OrderedWriter()
    try:
        in_schema, batches = open_input(path, columns)
        if sink is not None:
            pass  # the sink makes its own files, shard by shard
        elif not count_only:
            os.makedirs(os.path.dirname(os.path.abspath(job.outs[0])), exist_ok=True)
            pending.append(PendingFile(job.outs[0]))
            if fmt == "parquet":
                fields = [pa.field(ids_column, pa.list_(pa.from_numpy_dtype(np_dtype)))]
                if count_column is not None:
                    fields.append(pa.field(count_column, pa.int32()))
                fields += [in_schema.field(c) for c in keep]
                schema = pa.schema(fields, metadata={META_KEY: json.dumps(record)})
                writer = pq.ParquetWriter(pending[0].file, schema, write_page_checksum=True,
                                          compression="zstd")
        for row0, table in prefetch(text_slices(batches, column, path)):
            batch = (row0, table.num_rows)  # named if memory runs out
            col = table.column(column)
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            try:
                ids, offsets, valid = tok.encode_batch_flat(col, n_threads, allowed, disallowed,
                                                            row_base=row0)
            except DisallowedSpecialTokenError as exc:
                exc.args = (f"{path}: {exc.args[0]} (use special='allow' or 'text')",)
                exc.path = path
                raise
            except InvalidUTF8Error as exc:  # a normalizing model needs text: name the file
                raise InvalidUTF8Error(exc.row, exc.offset, exc.detail, exc.label, path) from None
            rep["encoder_calls"] += 1
            _add_null_ranges(null_ranges, valid, row0)
            rep["rows"] += len(valid)
            rep["null_rows"] += int((~valid).sum())
            rep["tokens"] += int(offsets[-1])
            rep["bytes"] += _text_bytes(col)
            if bar is not None:
                bar.update(len(valid))
                bar.set_postfix(MBps=f"{rep['bytes'] / 1e6 / max(bar.format_dict['elapsed'], 1e-9):.1f}")
            if count_only:
                continue
            if sink is not None:
                out.submit(sink.write_slice, ids, offsets, valid, row0)
            elif fmt == "parquet":
                if bos_id is not None or sep_id is not None:
                    ids, offsets = add_special(ids, offsets, -1 if bos_id is None else bos_id,
                                               -1 if sep_id is None else sep_id, valid)
                values = pa.array(ids.astype(np_dtype, copy=False))
                mask = None if valid.all() else pa.array(~valid)
                lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values,
                                                 mask=mask)
                arrays = [lists]
                if count_column is not None:
                    arrays.append(pa.array(np.diff(offsets).astype(np.int32), mask=~valid))
                arrays += [table.column(c).combine_chunks() for c in keep]
                out.submit(_write_synced, writer.write_table, pending[0].file,
                           pa.Table.from_arrays(arrays, schema=schema))
            else:
                if bos_id is not None:
                    ids, offsets = add_special(ids, offsets, bos_id, -1, valid)
                # Null rows encode to nothing, so ``ids`` is already the valid documents'
                # ids back to back: insert the separator after each of them.
                ends = offsets[1:][valid]
                n_flat = int(ends.shape[0]) + int(ids.shape[0])
                out.submit(_write_synced, write_bin, pending[0].file, pending[0].file, ids,
                           ends, sep_id, np.dtype("<" + np_dtype.str[1:]))
                starts = (offsets[:-1][valid] + np.arange(len(ends))).astype(np.int64)
                idx_parts.append(starts + n_tokens_written)
                n_tokens_written += n_flat
        out.finish()
        check_unchanged(path, record, rep["rows"])
        if count_only:
            return rep
        if sink is not None:
            # Flat outputs drop null rows: the marker says which, so document i of the
            # output maps back to its input row.
            meta = sink.commit(dict(record, null_row_ranges=null_ranges))
            rep["outputs"] = [os.path.join(sink.output, f["path"]) for f in meta["files"]]
            rep["outputs"].append(sink.marker)
            rep["splits"] = meta["splits"]
            return rep
        if fmt == "parquet":
            writer.close()
            writer = None
            pending[0].commit()
            return rep
        index = np.concatenate(idx_parts + [np.array([n_tokens_written], np.int64)])
        pending.append(PendingFile(job.outs[1]))
        np.save(pending[1].file, index.astype("<i8"))
        for p in pending:
            p.finish()
        meta = {"dtype": np_dtype.name, "separator_id": sep_id, "documents": len(index) - 1,
                "tokens": n_tokens_written, "source": path,
                "bin_bytes": n_tokens_written * np_dtype.itemsize,
                "idx_bytes": os.path.getsize(pending[1].tmp), "null_row_ranges": null_ranges}
        meta.update(record)
        commit_bin(pending, job.outs[2], meta)
        return rep
    except BaseException as exc:
        try:
            out.finish()  # no write may still run while the outputs are removed
        except BaseException:
            pass
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        for p in pending:
            p.discard()
        if sink is not None:
            sink.discard()
        if isinstance(exc, MemoryError) and not isinstance(exc, FastBPEError) and batch:
            raise _out_of_memory(path, batch, table, column, fmt, exc) from exc
        new = name_error(exc, job.outs[0]) if job.outs else exc
        if new is not exc:
            raise new from exc
        raise


def _write_synced(write, f, *args) -> None:
    """``write(*args)``, then what ``f`` holds made durable (``atomic.sync_written``), in the
    writer thread, while the next slice is encoded."""
    write(*args)
    sync_written(f)


def _add_null_ranges(ranges: list, valid, row0: int) -> None:
    """Append the ``[start, stop)`` runs of null rows of a slice (rows from ``row0``) to
    ``ranges``, joining a run that continues the previous slice's last one."""
    if valid.all():
        return
    null = np.concatenate(([False], ~valid, [False]))
    edges = np.flatnonzero(null[1:] != null[:-1])
    for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
        if ranges and ranges[-1][1] == row0 + a:
            ranges[-1][1] = row0 + b
        else:
            ranges.append([row0 + a, row0 + b])


def document_rows(null_row_ranges, n_documents: int):
    """``int64[n_documents]``: the input row of each document of a flat output whose
    marker records ``null_row_ranges`` (its documents are the non-null rows, in order)."""
    runs = np.asarray(null_row_ranges, dtype=np.int64).reshape(-1, 2)
    nulls_before = np.concatenate(([0], np.cumsum(runs[:, 1] - runs[:, 0])))
    # A run starting at input row a comes after a - (nulls before it) documents.
    k = np.searchsorted(runs[:, 0] - nulls_before[:-1], np.arange(n_documents), side="right")
    return np.arange(n_documents, dtype=np.int64) + nulls_before[k]


def _out_of_memory(path, batch, table, column, fmt, exc):
    """The error for a batch that ran out of memory: its rows, size and an estimate."""
    from ..errors import OutOfMemoryError
    from .arrow_text import text_buffers

    row0, n_rows = batch
    try:
        _, offsets, _ = text_buffers(table.column(column).combine_chunks())
        n_bytes = int(offsets[-1])
    except Exception:  # the estimate is a courtesy: never hide the error behind another
        n_bytes = 0
    # Prose runs ~3.5 bytes per token (an upper bound on ids is one per byte).
    ids = n_bytes / 3.5
    need = n_bytes + 4 * ids + (PARQUET_LIST_BYTES_PER_ID * ids if fmt == "parquet" else 0)
    rows = f"row {row0}" if n_rows == 1 else f"rows {row0}..{row0 + n_rows - 1}"
    hint = (" format='bin' needs no list writer: about the text plus 4 bytes per id."
            if fmt == "parquet" else "")
    return OutOfMemoryError(
        f"{path}: {rows} ({n_bytes / 2**20:,.0f} MiB of text): out of memory ({exc or 'MemoryError'}); "
        f"encoding it needs about {need / 2**20:,.0f} MiB (the text, 4 bytes per id, "
        + (f"{PARQUET_LIST_BYTES_PER_ID} per id in the Parquet writer; " if fmt == "parquet" else "")
        + f"~3.5 text bytes per id).{hint}")

def _text_bytes(col) -> int:
    from .arrow_text import text_buffers

    _, offsets, _ = text_buffers(col)
    return int(offsets[-1])

