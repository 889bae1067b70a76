"""Batch-encode Parquet / Arrow datasets into token ids, streamed row group by row group.

Two output forms, one output file per input file in the output folder (so that a run can
resume file by file):

* ``format="parquet"``: ``<stem>.parquet`` with one row per input row, in order, the ids as a
  ``list<int32>`` column (``uint16`` / ``uint32`` choosable) named ``ids``, nulls kept as
  nulls, and optionally other input columns carried along. Page checksums are on.
* ``format="bin"``: ``<stem>.bin``, the ids of every non-null row as one flat little-endian
  array (``uint16`` when the vocabulary fits, else ``uint32``), each document followed by
  the separator token, plus ``<stem>.idx.npy``: int64 offsets (in tokens) of each document's
  start and, last, the total length. This is the layout language-model training scripts
  memory-map (``np.memmap(path, dtype=np.uint16, mode="r")``).

Every output is written to a temporary name and renamed when complete, so an output that
exists is complete: ``resume=True`` skips input files whose outputs exist (and, for Parquet,
have the input's row count). A corrupt input raises ``CorpusReadError`` naming it; the
outputs of the files before it are kept.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from ..errors import CorpusReadError, DisallowedSpecialTokenError, FastBPEError
from .arrow_text import row_group_batches
from .atomic import atomic_write
from .corpus import expand_paths, file_kind

SPECIAL_POLICIES = ("error", "allow", "text")


def _row_batches(path: str, columns: list[str]):
    """Yield ``(row_offset, pa.Table)`` per Parquet row group or Arrow record batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = file_kind(path)
    try:
        if kind == "parquet":
            pf = pq.ParquetFile(path)
            names = pf.schema_arrow.names
            missing = [c for c in columns if c not in names]
            if missing:
                raise CorpusReadError(f"{path}: no column {missing[0]!r} (columns: {names})")
            row = 0
            for rg in range(pf.num_row_groups):
                # Stream each row group in record batches: a huge row group is never
                # decoded whole (bounded memory whatever the writer chose).
                try:
                    for batch in row_group_batches(pf, rg, columns):
                        yield row, pa.Table.from_batches([batch])
                        row += batch.num_rows
                except CorpusReadError:
                    raise
                except Exception as exc:
                    raise CorpusReadError(f"{path}: row group {rg}: cannot read ({exc})") from None
        elif kind == "arrow":
            from .arrow_text import ipc_batches

            row = 0
            for batch in ipc_batches(path):  # not memory-mapped: see ipc_batches
                table = pa.Table.from_batches([batch])
                missing = [c for c in columns if c not in table.schema.names]
                if missing:
                    raise CorpusReadError(f"{path}: no column {missing[0]!r}")
                yield row, table.select(columns)
                row += table.num_rows
        else:
            raise CorpusReadError(f"{path}: not a Parquet or Arrow file (encode reads tables)")
    except CorpusReadError:
        raise
    except Exception as exc:
        raise CorpusReadError(f"{path}: not a readable {kind} file ({exc})") from None


def _n_rows(path: str) -> int | None:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:
        return None


def _output_paths(path: str, out_dir: str, fmt: str):
    stem = os.path.splitext(os.path.basename(path))[0]
    if fmt == "parquet":
        return [os.path.join(out_dir, stem + ".parquet")]
    return [os.path.join(out_dir, stem + ".bin"), os.path.join(out_dir, stem + ".idx.npy")]


def encode_parquet(tok, inputs, output, column="text", format="parquet", dtype=None,
                   keep_columns=(), special="error", separator=None, resume=False,
                   count_only=False, progress=False, num_threads=None):
    """Encode the ``column`` of Parquet/Arrow files with ``tok``; returns a report dict.

    Parameters
    ----------
    tok : Tokenizer
    inputs : path, glob, folder, or a list of them
    output : str
        Output folder (created if missing); one output per input file.
    column : str
        The text column: ``string``, ``large_string``, ``binary`` / ``large_binary`` (the
        bytes encoded as they are, as ``encode_bytes``), ``dictionary`` or ``*_view`` of
        those, or ``null``; other types raise ``TextColumnTypeError`` (see
        ``io.arrow_text``).
    format : {"parquet", "bin"}
    dtype : {"int32", "uint16", "uint32"}, optional
        Id type. Parquet default int32; bin default uint16 when the vocabulary fits.
    keep_columns : sequence of str
        Parquet output: input columns copied next to ``ids``.
    special : {"error", "allow", "text"}
        A row holding a registered special token: raise ``DisallowedSpecialTokenError``
        naming the file and row (default), encode it as the special id, or as plain text.
    separator : str or int, optional
        Bin output: token after each document (default ``<|endoftext|>`` when registered).
    resume : bool
        Skip input files whose outputs are already complete.
    count_only : bool
        Count tokens per file without writing ids.
    """
    if format not in ("parquet", "bin"):
        raise ValueError(f"format must be 'parquet' or 'bin', not {format!r}")
    if special not in SPECIAL_POLICIES:
        raise ValueError(f"special must be one of {SPECIAL_POLICIES}, not {special!r}")
    allowed = "all" if special == "allow" else ()
    disallowed = () if special == "text" else "all"
    allowed_set, disallowed_set = tok._special_sets(allowed, disallowed)
    np_dtype = _id_dtype(tok, format, dtype)
    sep_id = _separator_id(tok, separator) if format == "bin" and not count_only else None
    files = expand_paths(inputs)
    if not count_only:
        os.makedirs(output, exist_ok=True)
    n_threads = num_threads or os.cpu_count() or 1
    report = {"files": [], "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
              "skipped_complete": []}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(_n_rows(f) or 0 for f in files) or None, desc="encoding",
                   unit="row", dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        for path in files:
            outs = [] if count_only else _output_paths(path, output, format)
            if resume and outs and _complete(path, outs, format):
                report["skipped_complete"].append(path)
                if bar is not None:
                    bar.update(_n_rows(path) or 0)
                continue
            columns = [column] + [c for c in keep_columns if c != column]
            file_report = _encode_one(tok, path, outs, column, columns, format, np_dtype, sep_id,
                                      allowed_set, disallowed_set, n_threads, count_only, bar)
            report["files"].append(file_report)
            for key in ("rows", "null_rows", "tokens", "bytes"):
                report[key] += file_report[key]
    finally:
        if bar is not None:
            bar.close()
    report["seconds"] = time.perf_counter() - t0
    report["mb_per_second"] = report["bytes"] / 1e6 / max(report["seconds"], 1e-9)
    return report


def _id_dtype(tok, fmt, dtype):
    if dtype is None:
        dtype = "int32" if fmt == "parquet" else ("uint16" if tok.vocab_size <= 65536 else "uint32")
    if dtype not in ("int32", "uint16", "uint32"):
        raise ValueError(f"dtype must be int32, uint16 or uint32, not {dtype!r}")
    if dtype == "uint16" and tok.vocab_size > 65536:
        raise ValueError(f"dtype uint16 cannot hold {tok.vocab_size} ids; use uint32")
    return np.dtype(dtype)


def _separator_id(tok, separator):
    if separator is None:
        if "<|endoftext|>" not in tok.special_tokens:
            raise ValueError("bin output needs a separator token: register <|endoftext|> or "
                             "pass separator=")
        return tok.special_tokens["<|endoftext|>"]
    if isinstance(separator, str):
        if separator not in tok.special_tokens:
            raise ValueError(f"separator {separator!r} is not a registered special token")
        return tok.special_tokens[separator]
    if not 0 <= int(separator) < tok.vocab_size:
        raise ValueError(f"separator id {separator} is not in the vocabulary")
    return int(separator)


def _complete(path, outs, fmt) -> bool:
    if not all(os.path.exists(o) for o in outs):
        return False
    if fmt == "parquet":
        expected = _n_rows(path)
        got = _n_rows(outs[0])
        return expected is not None and expected == got
    return True


def _encode_one(tok, path, outs, column, columns, fmt, np_dtype, sep_id, allowed, disallowed,
                n_threads, count_only, bar):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rep = {"path": path, "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0}
    writer = None
    ctx = None
    batch = None
    idx_parts = []
    n_tokens_written = 0
    try:
        if not count_only:
            ctx = atomic_write(outs[0])
            f = ctx.__enter__()
        for row0, table in _slices(_row_batches(path, columns), column, path):
            batch = (row0, table.num_rows)  # named if memory runs out
            col = table.column(column)
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            try:
                ids, offsets, valid = tok._encode_arrow_flat(col, allowed, disallowed, n_threads,
                                                             row_base=row0)
            except DisallowedSpecialTokenError as exc:
                exc.args = (f"{path}: {exc.args[0]} (use special='allow' or 'text')",)
                exc.path = path
                raise
            rep["rows"] += len(valid)
            rep["null_rows"] += int((~valid).sum())
            rep["tokens"] += int(offsets[-1])
            rep["bytes"] += _text_bytes(col)
            if bar is not None:
                bar.update(len(valid))
                bar.set_postfix(MBps=f"{rep['bytes'] / 1e6 / max(bar.format_dict['elapsed'], 1e-9):.1f}")
            if count_only:
                continue
            if fmt == "parquet":
                values = pa.array(ids.astype(np_dtype, copy=False))
                mask = None if valid.all() else pa.array(~valid)
                lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values,
                                                 mask=mask)
                arrays = [lists] + [table.column(c).combine_chunks() for c in columns[1:]]
                out = pa.Table.from_arrays(arrays, names=["ids"] + columns[1:])
                if writer is None:
                    writer = pq.ParquetWriter(f, out.schema, write_page_checksum=True,
                                              compression="zstd")
                writer.write_table(out)
            else:
                # Null rows encode to nothing, so ``ids`` is already the valid documents'
                # ids back to back: insert the separator after each of them.
                ends = offsets[1:][valid]
                n_flat = _write_bin(f, ids, ends, sep_id, np.dtype("<" + np_dtype.str[1:]))
                starts = (offsets[:-1][valid] + np.arange(len(ends))).astype(np.int64)
                idx_parts.append(starts + n_tokens_written)
                n_tokens_written += n_flat
        if count_only:
            return rep
        if fmt == "parquet":
            if writer is None:  # no row groups: still write a valid, empty file
                schema = pa.schema([("ids", pa.list_(pa.from_numpy_dtype(np_dtype)))])
                writer = pq.ParquetWriter(f, schema, write_page_checksum=True)
            writer.close()
            writer = None
        ctx.__exit__(None, None, None)
        ctx = None
        if fmt == "bin":
            index = np.concatenate(idx_parts + [np.array([n_tokens_written], np.int64)])
            with atomic_write(outs[1]) as g:
                np.save(g, index.astype("<i8"))
            meta = {"dtype": np_dtype.name, "separator_id": sep_id, "documents": len(index) - 1,
                    "tokens": n_tokens_written, "source": path}
            with atomic_write(outs[0] + ".json", "w") as g:
                g.write(json.dumps(meta, indent=2) + "\n")
        return rep
    except BaseException as exc:
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        if ctx is not None:
            ctx.__exit__(type(exc), exc, exc.__traceback__)
        if isinstance(exc, MemoryError) and not isinstance(exc, FastBPEError) and batch:
            raise _out_of_memory(path, batch, table, column, fmt, exc) from exc
        raise


#: Ids per piece when a bin file is written (bounds the conversion and insertion copies).
BIN_PIECE_IDS = 4 << 20
#: Bytes per id that writing ``ids`` as a Parquet ``list`` row takes in pyarrow's writer
#: (repetition/definition levels and buffers for the whole row), measured with 11.5M and
#: 86M ids of one row: 24 and 20 (14-18 in the writer alone); plus the 4 of the ids.
PARQUET_LIST_BYTES_PER_ID = 24


def _write_bin(f, ids, ends, sep_id, dtype) -> int:
    """Write ``ids`` with ``sep_id`` inserted before each index of ``ends`` (sorted; an end
    equal to ``len(ids)`` is appended), ``BIN_PIECE_IDS`` ids at a time, as ``dtype``.
    The same bytes as one ``np.insert`` of the whole, without copies of the whole (a
    single huge document's ids were copied twice). Returns the ids written."""
    n = len(ids)
    written = 0
    for a in range(0, max(n, 1), BIN_PIECE_IDS):
        b = min(n, a + BIN_PIECE_IDS)
        lo = int(np.searchsorted(ends, a, side="left"))
        hi = len(ends) if b == n else int(np.searchsorted(ends, b, side="left"))
        piece = np.insert(ids[a:b].astype(dtype), ends[lo:hi] - a, sep_id)
        f.write(piece.data)
        written += len(piece)
    return written


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


def _slices(batches, column, path):
    """Cut each row group into consecutive row ranges of at most ~8 MB of text (SLICE_BYTES).

    Memory then stays bounded by the slice, not by the input's row-group size (one
    encoder call needs about 10-15 bytes per text byte). Output row groups follow the
    slices; rows keep their order.
    """
    import pyarrow as pa

    from .arrow_text import row_slices, string_chunks, text_buffers

    for row0, table in batches:
        # Checked (offsets within the data; a text type, converted to string) before
        # anything reads the column: CorpusReadError naming the file, column and row.
        chunks = list(string_chunks(table.column(column), f"{path}: column {column!r}", row0))
        combined = chunks[0] if len(chunks) == 1 else pa.chunked_array(
            chunks, chunks[0].type if chunks else pa.string()).combine_chunks()
        table = table.set_column(table.schema.get_field_index(column), column, combined)
        _, offsets, _ = text_buffers(combined)
        for r0, r1 in row_slices(offsets):
            yield row0 + r0, table.slice(r0, r1 - r0)


def _text_bytes(col) -> int:
    from .arrow_text import text_buffers

    _, offsets, _ = text_buffers(col)
    return int(offsets[-1])


def read_bin(bin_path):
    """Memory-map a ``.bin`` token file: ``(ids, doc_offsets)`` (index from ``.idx.npy``)."""
    bin_path = os.fspath(bin_path)
    base = bin_path[:-4] if bin_path.endswith(".bin") else bin_path
    with open(bin_path + ".json") as f:
        meta = json.load(f)
    ids = np.memmap(bin_path, dtype=np.dtype(meta["dtype"]).newbyteorder("<"), mode="r")
    index = np.load(base + ".idx.npy")
    if index[-1] != len(ids):
        raise FastBPEError(f"{bin_path}: index says {index[-1]} tokens, file has {len(ids)}")
    return ids, index
