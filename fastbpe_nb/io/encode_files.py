"""Batch-encode Parquet / Arrow datasets into token ids, streamed in slices of ~8 MB of text.

Layout
------
One output per input file, at the input's path relative to the common parent of the
inputs (a folder given is its own root, a glob's root is its folder before the first
wildcard, a file's root is its folder), with the extension replaced:
``encode(["dup/a/train.parquet", "dup/b/train.parquet"], "out")`` writes
``out/a/train.parquet`` and ``out/b/train.parquet``. Two inputs that would still map to one
output (``x.parquet`` and ``x.arrow``, or a file given twice) are refused before anything
is encoded, naming both; so is an output folder that is, or is inside, an input folder,
and any output path that is an input path. Inside a folder or a glob, files that are not
Parquet/Arrow by their name are not read (listed in the report as ``ignored_files``).

Two output forms:

* ``format="parquet"``: ``<stem>.parquet`` with one row per input row, in order, the ids as a
  ``list<int32>`` column (``uint16`` / ``uint32`` choosable) named ``ids``, nulls kept as
  nulls, and optionally other input columns carried along with their input types (also
  for an input of zero rows). Page checksums are on.
* ``format="bin"``: ``<stem>.bin``, the ids of every non-null row as one flat little-endian
  array (``uint16`` when the vocabulary fits, else ``uint32``), each document followed by
  the separator token, plus ``<stem>.idx.npy``: int64 offsets (in tokens) of each document's
  start and, last, the total length. This is the layout language-model training scripts
  memory-map (``np.memmap(path, dtype=np.uint16, mode="r")``; ``read_bin`` checks it first).
  ``<stem>.bin.json`` is the completeness marker: it is removed before the ``.bin`` and
  ``.idx.npy`` of a new run replace the old ones and written last (atomically), with the
  byte sizes of both; a ``.bin`` without a marker (or with sizes that disagree) is
  incomplete and ``read_bin`` refuses it. The three renames happen under an exclusive
  ``flock`` of the folder, so concurrent writers of one output cannot interleave them.

Identity: every output records (Parquet: the schema metadata key ``fastbpe_nb.encode``; bin:
the marker) the SHA-256 of the model's canonical serialization (``model_to_json``), the
input's size, ``mtime_ns`` and row count, and the options that change the ids (column,
format, dtype, separator, special policy, kept columns). ``resume=True`` skips an input
whose output is complete and whose record matches; any other output is encoded again, and
the report's ``reencoded`` says which and why. An input that changes while it is read
raises ``CorpusReadError`` (its output is not written).

Every file is written to a temporary name (``.tmp-<pid>-<host>-<random>-<name>``, see
``atomic.py``) and renamed when complete; a run removes the temporary files that killed
runs left in its output folder (``stale_temp_files_removed``), never those of a live
writer. A corrupt input raises ``CorpusReadError`` naming it; the outputs of the files
before it are kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time

import numpy as np

from ..errors import (CorpusReadError, DisallowedSpecialTokenError, EncodeOptionsError,
                      FastBPEError, InvalidUTF8Error, OutputError, TextColumnTypeError)
from . import arrow_text
from .arrow_text import row_group_batches
from .atomic import (PendingFile, atomic_write, check_writable, folder_lock, fsync_dir,
                     name_error, remove_stale_temps)
from .input_files import ARROW_SUFFIXES, JSONL_SUFFIXES, PARQUET_SUFFIXES, expand_paths, file_kind

SPECIAL_POLICIES = ("error", "allow", "text")
TABLE_SUFFIXES = PARQUET_SUFFIXES + ARROW_SUFFIXES + JSONL_SUFFIXES
#: What ``file_kind`` calls the inputs encode reads (JSONL also compressed: ``x.jsonl.zst``).
TABLE_KINDS = ("parquet", "arrow", "jsonl")
#: Key of the identity record in an output Parquet file's schema metadata.
META_KEY = "fastbpe_nb.encode"
#: Version of the identity record (outputs without one were made by an older version).
LAYOUT_VERSION = 1
#: At most this many rows per encoder call when small batches are gathered into a slice.
SLICE_ROWS = 1 << 20
_MAGIC = "*?["


# ----------------------------------------------------------------------------- planning
@dataclasses.dataclass
class _Spec:
    spec: str  # the argument as given
    kind: str  # "folder", "glob" or "file"
    root: str  # absolute folder the relative output paths start from


@dataclasses.dataclass
class _Job:
    path: str  # the input file
    spec: str  # the argument that named it
    outs: list  # parquet: [x.parquet]; bin: [x.bin, x.idx.npy, x.bin.json]


def _spec_list(inputs) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return [os.fspath(p) for p in inputs]


def _glob_root(pattern: str) -> str:
    """The folder of ``pattern`` before its first component holding a wildcard."""
    parts = os.path.abspath(pattern).split(os.sep)
    keep = []
    for part in parts[:-1]:
        if any(ch in part for ch in _MAGIC):
            break
        keep.append(part)
    return os.sep.join(keep) or os.sep


def _out_names(base: str, fmt: str) -> list[str]:
    if fmt == "parquet":
        return [base + ".parquet"]
    return [base + ".bin", base + ".idx.npy", base + ".bin.json"]


def _plan(inputs, output, fmt):
    """``(jobs, ignored, specs)``: the input files, their outputs, the files not read."""
    specs, found, ignored = [], [], []
    for spec in _spec_list(inputs):
        if os.path.isdir(spec):
            kind, root = "folder", os.path.abspath(spec)
        elif any(ch in spec for ch in _MAGIC):
            kind, root = "glob", _glob_root(spec)
        else:
            kind, root = "file", os.path.dirname(os.path.abspath(spec))
        specs.append(_Spec(spec, kind, root))
        for path in expand_paths([spec]):
            if file_kind(path) not in TABLE_KINDS:
                if kind == "file":
                    raise CorpusReadError(f"{path}: not a Parquet or Arrow file (encode reads "
                                          f"tables: files ending in {', '.join(TABLE_SUFFIXES)})")
                ignored.append(path)
                continue
            found.append((path, spec))
    if not specs:
        raise CorpusReadError("no input given (give Parquet/Arrow files, folders or globs)")
    if not found:
        extra = f"; {len(ignored)} other file(s) ignored" if ignored else ""
        raise CorpusReadError(f"no Parquet or Arrow input found in {', '.join(s.spec for s in specs)} "
                              f"(looked for files ending in {', '.join(TABLE_SUFFIXES)}{extra})")
    roots = [s.root for s in specs] + [os.path.dirname(os.path.abspath(p)) for p, _ in found]
    common = os.path.commonpath(roots)
    jobs, taken, reals = [], {}, {}
    for path, spec in found:
        real = os.path.realpath(path)
        if real in reals and reals[real] != path:
            raise EncodeOptionsError(f"{reals[real]} and {path} are the same file (a link): its "
                                     "rows would be encoded twice; name it once")
        reals.setdefault(real, path)
        rel = os.path.relpath(os.path.abspath(path), common)
        base = os.path.splitext(rel)[0]
        outs = [] if output is None else _out_names(os.path.join(os.fspath(output), base), fmt)
        job = _Job(path, spec, outs)
        for out in outs:
            key = os.path.normcase(os.path.abspath(out))
            if key in taken:
                other = taken[key]
                if os.path.realpath(other.path) == os.path.realpath(path):
                    why = f"{path} is given twice (by {other.spec!r} and by {spec!r})"
                else:
                    why = f"{other.path} and {path} would both be encoded to {out}"
                raise EncodeOptionsError(f"{why}: no row may be lost, so nothing was encoded; "
                                         "rename one input or encode them into separate folders")
            taken[key] = job
        jobs.append(job)
    return jobs, ignored, specs


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _check_not_over_inputs(jobs, specs, output) -> None:
    """Refuse an output folder in an input folder, and any output that is an input."""
    out_real = os.path.realpath(output)
    for s in specs:
        if s.kind == "folder" or (s.kind == "glob" and "**" in s.spec):
            root = os.path.realpath(s.root)
            if _inside(out_real, root):
                where = "is" if out_real == root else "is inside"
                raise EncodeOptionsError(
                    f"the output folder {output} {where} the input folder {s.root} (of "
                    f"{s.spec!r}): outputs would replace inputs or be read as inputs; choose an "
                    "output folder outside the inputs")
        elif s.kind == "file" and _inside(out_real, os.path.realpath(s.spec)):
            raise EncodeOptionsError(f"the output folder {output} is the input file {s.spec}")
    # (A glob without ``**`` cannot list the outputs: they lie deeper than its inputs.)
    inputs = {os.path.realpath(j.path): j.path for j in jobs}
    for job in jobs:
        for out in job.outs:
            real = os.path.realpath(out)
            if real in inputs:
                raise EncodeOptionsError(f"the output {out} would replace the input "
                                         f"{inputs[real]}; choose another output folder")


def _keep_list(keep_columns, column, fmt) -> list[str]:
    keep = [keep_columns] if isinstance(keep_columns, str) else list(keep_columns or ())
    if keep and fmt == "bin":
        raise EncodeOptionsError(f"keep_columns {keep} cannot be carried into format='bin' (a "
                                 "flat id array); use format='parquet' or drop keep_columns")
    seen = set()
    for c in keep:
        if c == "ids":
            raise EncodeOptionsError("keep_columns: the input column 'ids' cannot be kept: the "
                                     "output column of the token ids is named 'ids' (rename the "
                                     "input column first)")
        if c in seen:
            raise EncodeOptionsError(f"keep_columns names the column {c!r} twice")
        seen.add(c)
    return keep


# ----------------------------------------------------------------------------- identity
def model_sha256(tok) -> str:
    """SHA-256 of the model's canonical serialization (the model file text)."""
    from .model_file import model_to_json

    return hashlib.sha256(model_to_json(tok).encode("utf-8")).hexdigest()


def _input_identity(path: str) -> dict:
    """``{"size", "mtime_ns", "rows"}`` of an input file (rows from its metadata)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "rows": _input_rows(path)}


def _input_rows(path: str) -> int | None:
    """Rows of a Parquet/Arrow file from its metadata; None when it cannot be read."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    try:
        if file_kind(path) == "parquet":
            return pq.ParquetFile(path).metadata.num_rows
    except Exception:
        return None
    # Arrow IPC has no row count without reading every batch, and memory-mapping it to read
    # them is what let a file cut meanwhile end in SIGBUS: size and mtime identify it.
    return None


def _n_rows(path: str) -> int | None:
    return _input_rows(path)


_COMPARED = ("layout", "format", "model_sha256", "column", "dtype", "separator_id", "special",
             "keep_columns")


def _mismatch(found: dict, expected: dict) -> str | None:
    """Why an output's record does not match this run (None: it matches)."""
    if not isinstance(found, dict) or found.get("layout") != LAYOUT_VERSION:
        return "no identity recorded (made by an older version)"
    if found.get("model_sha256") != expected["model_sha256"]:
        return "made with another model (model_sha256 differs)"
    for key in _COMPARED:
        if found.get(key) != expected[key]:
            return f"{key} was {found.get(key)!r}, now {expected[key]!r}"
    got, want = found.get("input") or {}, expected["input"]
    for key in ("size", "mtime_ns", "rows"):
        if got.get(key) != want[key]:
            return f"the input changed ({key} was {got.get(key)!r}, now {want[key]!r})"
    return None


def _complete(job: _Job, fmt: str, expected: dict):
    """``(complete, reason)``: reason says why an existing output is not reusable (None
    when there is no output at all)."""
    import pyarrow.parquet as pq

    if fmt == "parquet":
        out = job.outs[0]
        if not os.path.exists(out):
            return False, None
        try:
            pf = pq.ParquetFile(out)
            raw = (pf.schema_arrow.metadata or {}).get(META_KEY.encode())
            found = json.loads(raw) if raw is not None else None
            rows = pf.metadata.num_rows
        except Exception as exc:
            return False, f"unreadable output ({exc})"
        reason = _mismatch(found, expected)
        if reason is None and rows != expected["input"]["rows"]:
            reason = f"the output has {rows} rows, the input {expected['input']['rows']}"
        return reason is None, reason
    bin_path, idx_path, marker = job.outs
    with folder_lock(os.path.dirname(os.path.abspath(bin_path)), exclusive=False):
        if not os.path.exists(marker):
            if os.path.exists(bin_path) or os.path.exists(idx_path):
                return False, f"incomplete (no marker {os.path.basename(marker)})"
            return False, None
        try:
            with open(marker, encoding="utf-8") as f:
                found = json.load(f)
            sizes = (os.path.getsize(bin_path), os.path.getsize(idx_path))
        except (OSError, ValueError) as exc:
            return False, f"incomplete ({exc})"
        reason = _mismatch(found, expected)
        if reason is None and sizes != (found.get("bin_bytes"), found.get("idx_bytes")):
            reason = (f"incomplete (.bin/.idx.npy are {sizes[0]}/{sizes[1]} bytes, the marker "
                      f"says {found.get('bin_bytes')}/{found.get('idx_bytes')})")
        return reason is None, reason


# ----------------------------------------------------------------------------- encoding
def encode_parquet(tok, inputs, output, column="text", format="parquet", dtype=None,
                   keep_columns=(), special="error", separator=None, resume=False,
                   count_only=False, progress=False, num_threads=None):
    """Encode the ``column`` of Parquet/Arrow files with ``tok``; returns a report dict.

    Parameters
    ----------
    tok : Tokenizer
    inputs : path, glob, folder, or a list of them
    output : str
        Output folder (created if missing); one output per input file, at the input's path
        relative to the inputs' common parent (see the module docstring).
    column : str
        The text column (``string`` or ``large_string``).
    format : {"parquet", "bin"}
    dtype : {"int32", "uint16", "uint32"}, optional
        Id type. Parquet default int32; bin default uint16 when the vocabulary fits.
    keep_columns : sequence of str
        Parquet output: input columns copied next to ``ids`` (not ``ids`` itself).
    special : {"error", "allow", "text"}
        A row holding a registered special token: raise ``DisallowedSpecialTokenError``
        naming the file and row (default), encode it as the special id, or as plain text.
    separator : str or int, optional
        Bin output: token after each document (default ``<|endoftext|>`` when registered).
    resume : bool
        Skip input files whose outputs are complete and were made from the same input,
        model and options; encode the others again (``reencoded`` in the report).
    count_only : bool
        Count tokens per file without writing ids.

    Returns
    -------
    dict
        ``files`` (one report per encoded file), ``rows``, ``null_rows``, ``tokens``,
        ``bytes``, ``skipped_complete``, ``reencoded`` (``{"path", "output", "reason"}``),
        ``ignored_files``, ``stale_temp_files_removed``, ``encoder_calls``, ``seconds``,
        ``mb_per_second``.
    """
    if format not in ("parquet", "bin"):
        raise ValueError(f"format must be 'parquet' or 'bin', not {format!r}")
    from ..validation import check_num_threads

    check_num_threads(num_threads)  # before any output exists
    if special not in SPECIAL_POLICIES:
        raise ValueError(f"special must be one of {SPECIAL_POLICIES}, not {special!r}")
    keep = _keep_list(keep_columns, column, format)
    allowed = "all" if special == "allow" else ()
    disallowed = () if special == "text" else "all"
    allowed_set, disallowed_set = tok._special_sets(allowed, disallowed)
    np_dtype = _id_dtype(tok, format, dtype)
    sep_id = _separator_id(tok, separator) if format == "bin" and not count_only else None
    if output is None and not count_only:
        raise EncodeOptionsError("an output folder is needed (or count_only=True)")
    jobs, ignored, specs = _plan(inputs, None if count_only else output, format)
    report = {"files": [], "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
              "skipped_complete": [], "reencoded": [], "ignored_files": ignored,
              "stale_temp_files_removed": 0, "encoder_calls": 0}
    if not count_only:
        output = os.fspath(output)
        _check_not_over_inputs(jobs, specs, output)
        check_writable(output, create=True)
        report["stale_temp_files_removed"] = len(remove_stale_temps(output, recursive=True))
    settings = {"layout": LAYOUT_VERSION, "format": format, "column": column,
                "dtype": np_dtype.name, "separator_id": sep_id, "special": special,
                "keep_columns": keep, "model_sha256": None if count_only else model_sha256(tok)}
    n_threads = num_threads or os.cpu_count() or 1
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(_n_rows(j.path) or 0 for j in jobs) or None, desc="encoding",
                   unit="row", dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        for job in jobs:
            record = dict(settings, input=dict(_input_identity(job.path),
                                               path=os.path.abspath(job.path)))
            if resume and job.outs:
                complete, reason = _complete(job, format, record)
                if complete:
                    report["skipped_complete"].append(job.path)
                    if bar is not None:
                        bar.update(record["input"]["rows"] or 0)
                    continue
                if reason is not None:
                    report["reencoded"].append({"path": job.path, "output": job.outs[0],
                                                "reason": reason})
            file_report = _encode_one(tok, job, column, keep, format, np_dtype, sep_id,
                                      allowed_set, disallowed_set, n_threads, count_only, bar,
                                      record)
            report["files"].append(file_report)
            for key in ("rows", "null_rows", "tokens", "bytes", "encoder_calls"):
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
    if isinstance(separator, (bool, np.bool_)) or not isinstance(separator, (int, np.integer)):
        raise ValueError(f"separator must be a special token's text or an int id, not "
                         f"{separator!r}")
    if not 0 <= int(separator) < tok.vocab_size or tok.vocab[int(separator)] is None:
        raise ValueError(f"separator id {separator} is not in the vocabulary"
                         + (" (an unused id between the special tokens)"
                            if 0 <= int(separator) < tok.vocab_size else ""))
    return int(separator)


def _open_input(path: str, columns: list[str]):
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
        raise CorpusReadError(f"{path}: not a readable {kind} file ({exc})") from None
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
    """``_open_input`` of a JSON-lines file: a missing or null field is a null row; the schema
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
        raise CorpusReadError(f"{path}: not a readable arrow file after row {row} ({exc})") from None


def _slices(batches, column, path):
    """Gather batches into consecutive row ranges of about SLICE_BYTES of text.

    A batch over the limit is cut (``row_slices``: memory stays bounded by the slice, not
    by the input's row-group size; one encoder call needs about 10-15 bytes per text
    byte); small batches are gathered (the per-call overhead is then paid once per ~8 MB,
    not once per tiny row group). Yields ``(first_row, pa.Table)``; rows keep their order
    and row numbers are the file's. Output row groups follow the slices.
    """
    import pyarrow as pa

    from .arrow_text import row_slices, text_buffers

    limit = arrow_text.SLICE_BYTES
    pending, size, rows, start = [], 0, 0, 0
    for row0, batch in batches:
        # Checked (offsets within the data; a text type, converted to string) before
        # anything reads the column: CorpusReadError naming the file, column and row.
        col = arrow_text.as_string_array(batch.column(column), f"{path}: column {column!r}", row0)
        if col is not batch.column(column):
            batch = batch.set_column(batch.schema.get_field_index(column), column, col)
        _, offsets, _ = text_buffers(col)
        for r0, r1 in row_slices(offsets):
            nbytes = int(offsets[r1] - offsets[r0])
            if pending and (size + nbytes > limit or rows + r1 - r0 > SLICE_ROWS):
                yield start, pa.Table.from_batches(pending)
                pending = []
            if not pending:
                start, size, rows = row0 + r0, 0, 0
            pending.append(batch.slice(r0, r1 - r0))
            size += nbytes
            rows += r1 - r0
    if pending:
        yield start, pa.Table.from_batches(pending)


def _encode_one(tok, job, column, keep, fmt, np_dtype, sep_id, allowed, disallowed,
                n_threads, count_only, bar, record):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = job.path
    rep = {"path": path, "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
           "encoder_calls": 0, "outputs": list(job.outs)}
    columns = [column] + [c for c in keep if c != column]
    writer = None
    pending = []
    idx_parts = []
    n_tokens_written = 0
    batch = table = None
    try:
        in_schema, batches = _open_input(path, columns)
        if not count_only:
            os.makedirs(os.path.dirname(os.path.abspath(job.outs[0])), exist_ok=True)
            pending.append(PendingFile(job.outs[0]))
            if fmt == "parquet":
                fields = [pa.field("ids", pa.list_(pa.from_numpy_dtype(np_dtype)))]
                fields += [in_schema.field(c) for c in keep]
                schema = pa.schema(fields, metadata={META_KEY: json.dumps(record)})
                writer = pq.ParquetWriter(pending[0].file, schema, write_page_checksum=True,
                                          compression="zstd")
        for row0, table in _slices(batches, column, path):
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
            except InvalidUTF8Error as exc:  # a normalizing model needs text: name the file
                raise InvalidUTF8Error(exc.row, exc.offset, exc.detail, exc.label, path) from None
            rep["encoder_calls"] += 1
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
                arrays = [lists] + [table.column(c).combine_chunks() for c in keep]
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            else:
                # Null rows encode to nothing, so ``ids`` is already the valid documents'
                # ids back to back: insert the separator after each of them.
                ends = offsets[1:][valid]
                n_flat = _write_bin(pending[0].file, ids, ends, sep_id,
                                    np.dtype("<" + np_dtype.str[1:]))
                starts = (offsets[:-1][valid] + np.arange(len(ends))).astype(np.int64)
                idx_parts.append(starts + n_tokens_written)
                n_tokens_written += n_flat
        _check_unchanged(path, record, rep["rows"])
        if count_only:
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
                "idx_bytes": os.path.getsize(pending[1].tmp)}
        meta.update(record)
        _commit_bin(pending, job.outs[2], meta)
        return rep
    except BaseException as exc:
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        for p in pending:
            p.discard()
        if isinstance(exc, MemoryError) and not isinstance(exc, FastBPEError) and batch:
            raise _out_of_memory(path, batch, table, column, fmt, exc) from exc
        new = name_error(exc, job.outs[0]) if job.outs else exc
        if new is not exc:
            raise new from exc
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


def _check_unchanged(path, record, rows) -> None:
    """An input rewritten while it was read gives an output of neither version: refuse."""
    try:
        st = os.stat(path)
        now = (st.st_size, st.st_mtime_ns)
    except OSError as exc:
        raise CorpusReadError(f"{path}: vanished while being encoded ({exc.strerror})") from None
    ident = record["input"]
    if now != (ident["size"], ident["mtime_ns"]) or (ident["rows"] is not None
                                                     and rows != ident["rows"]):
        raise CorpusReadError(f"{path}: changed while being encoded (size, mtime or row count); "
                              "its output was not written")
    ident["rows"] = rows


def _commit_bin(pending, marker, meta) -> None:
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


def _text_bytes(col) -> int:
    from .arrow_text import text_buffers

    _, offsets, _ = text_buffers(col)
    return int(offsets[-1])


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
