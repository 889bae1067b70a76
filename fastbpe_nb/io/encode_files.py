"""Batch-encode Parquet / Arrow datasets into token ids, streamed in slices of ~8 MB of text.

``encode_parquet`` is the front door; the parts it runs, in order:

* ``encode_plan``: one output per input file, at the input's path relative to the inputs'
  common parent, with the extension replaced; collisions and outputs over inputs are
  refused before anything is encoded. Files inside a folder or glob that are not
  Parquet/Arrow/JSONL by name are listed as ``ignored_files``, not read.
* ``encode_identity``: every output records the SHA-256 of the model, the input's size,
  ``mtime_ns`` and row count, and the options that change the ids; ``resume=True`` skips
  an input whose output is complete and matches, and re-encodes the others
  (``reencoded`` says why). An input that changes while it is read raises
  ``CorpusReadError`` (its output is not written).
* ``encode_inputs`` reads the input tables as slices; ``encode_one_file`` encodes one file
  into its output.

``prepare`` checks and resolves the options; ``encode_planned`` encodes some of the jobs
of a whole call's plan exactly as the call would (the cluster engines' per-file tasks).

Output forms:

* ``format="parquet"``: ``<stem>.parquet`` with one row per input row, in order, the ids as a
  ``list<int32>`` column (``uint16`` / ``uint32`` choosable) named ``ids``, nulls kept as
  nulls, and optionally other input columns carried along with their input types (also
  for an input of zero rows). Page checksums are on.
* ``format="bin"``: ``<stem>.bin`` (the ids of every non-null row, each document followed
  by the separator token), ``<stem>.idx.npy`` (document offsets) and the completeness
  marker ``<stem>.bin.json``, written last: see ``bin_files`` and ``read_bin``.
* ``format="megatron" | "datatrove" | "nanogpt" | "llmc" | "mds" | "litdata"``: the token
  files those training stacks read, sharded by size, with an optional seeded validation
  split and a completeness marker ``<stem>.<format>.json`` written last: see
  ``token_formats`` (mds, litdata: ``token_formats_streaming``); ``read_tokens``
  (``token_readers``) reads every flat format back.

Every file is written to a temporary name (``.tmp-<pid>-<host>-<random>-<name>``, see
``atomic.py``) and renamed when complete; a run removes the temporary files that killed
runs left in its output folder (``stale_temp_files_removed``), never those of a live
writer. A corrupt input raises ``CorpusReadError`` naming it; the outputs of the files
before it are kept.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..errors import EncodeOptionsError
from .atomic import check_writable, remove_stale_temps
from .encode_identity import (LAYOUT_VERSION, input_identity, input_rows, model_sha256,
                              output_complete)
from .encode_one_file import encode_one
from .encode_plan import check_not_over_inputs, keep_list, plan_jobs
from .token_formats import (TOKEN_FORMATS, TokenSink, check_concat_tokens, parse_size,
                            token_dtype)
from .token_formats_streaming import STREAM_FORMATS, StreamTokenSink, stream_shard_bytes

SPECIAL_POLICIES = ("error", "allow", "text")
FORMATS = ("parquet", "bin") + TOKEN_FORMATS


def encode_parquet(tok, inputs, output, column="text", format="parquet", dtype=None,
                   keep_columns=(), special="error", separator=None, resume=False,
                   count_only=False, progress=False, num_threads=None, bos=None,
                   shard_size=None, val_fraction=0.0, seed=0, concat_tokens=None,
                   ids_column="ids", token_count_column=None):
    """Encode the ``column`` of Parquet/Arrow files with ``tok``; returns a report dict.

    Parameters
    ----------
    tok : Tokenizer
    inputs : path, glob, folder, or a list of them
    output : str
        Output folder (created if missing); one output per input file, at the input's path
        relative to the inputs' common parent (see ``encode_plan``).
    column : str
        The text column (``string`` or ``large_string``).
    format : {"parquet", "bin", "megatron", "datatrove", "nanogpt", "llmc", "mds", "litdata"}
        The last six are the layouts of training stacks (see ``token_formats``).
    dtype : {"int32", "uint16", "uint32"}, optional
        Id type. Parquet default int32; the others uint16 when the vocabulary fits.
    keep_columns : sequence of str
        Parquet output: input columns copied next to ``ids`` (not ``ids`` itself).
    special : {"error", "allow", "text"}
        A row holding a registered special token: raise ``DisallowedSpecialTokenError``
        naming the file and row (default), encode it as the special id, or as plain text.
    separator : str or int, optional
        Flat outputs: the token after each document (llmc: before it), default the
        tokenizer's ``eos_token``, else ``<|endoftext|>`` (or a SentencePiece ``</s>``) when
        registered. Parquet: when given, appended to each (non-null) row.
    bos : str or int, optional
        A token before each document (llmc: after the separator).
    ids_column, token_count_column : str
        Parquet: the name of the ids column (``"input_ids"`` for transformers' pipelines),
        and of an int32 column of each row's token count (None: no such column).
    shard_size : int or str, optional
        Training-stack formats: bytes per id file ("1G", "500M"); documents are not split.
    val_fraction, seed : float, int
        Training-stack formats: the share of documents, chosen by a hash of (seed, the
        input's relative path, the row), written to the validation split.
    concat_tokens : int, optional
        ``format="mds"``: samples of exactly this many ids cut from the stream of documents
        (llm-foundry's ``--concat_tokens``) instead of one sample per document.
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
    prep = prepare(tok, output, column=column, format=format, dtype=dtype,
                   keep_columns=keep_columns, special=special, separator=separator,
                   count_only=count_only, num_threads=num_threads, bos=bos,
                   shard_size=shard_size, val_fraction=val_fraction, seed=seed,
                   concat_tokens=concat_tokens, ids_column=ids_column,
                   token_count_column=token_count_column)
    jobs, ignored, specs = plan_jobs(inputs, None if count_only else output, format)
    removed = 0
    if not count_only:
        output = os.fspath(output)
        check_not_over_inputs(jobs, specs, output)
        check_writable(output, create=True)
        removed = len(remove_stale_temps(output, recursive=True))
    return _encode_jobs(tok, jobs, output, prep, resume, progress, ignored, removed)


def encode_planned(tok, jobs, output, resume=False, **options):
    """Encode some of the jobs of one ``encode_parquet`` call exactly as that call does.

    ``jobs``: ``encode_plan.Job`` values from ``plan_jobs(inputs, output, format)`` over
    *all* the call's inputs (what decides each output's path, and so the training-stack
    formats' shard names and validation split); ``options``: ``encode_parquet``'s. The
    outputs of these jobs are byte for byte the ones ``encode_parquet(tok, inputs, output,
    **options)`` writes for them. The cluster engines run one job per task on their
    workers (``fastbpe_nb.distributed``); the caller checks the whole plan
    (``check_not_over_inputs``, ``check_writable``) once before. Stale temporary files
    are removed only in the folders these jobs write to (a retried task cleans what its
    killed attempt left), not in the whole output tree.
    """
    if options.get("count_only"):
        raise EncodeOptionsError("encode_planned writes outputs: count_only is not supported")
    prep = prepare(tok, output, **options)
    output = os.fspath(output)
    removed = 0
    for folder in sorted({f for job in jobs for f in job_folders(job, output, prep)}):
        removed += len(remove_stale_temps(folder))
    return _encode_jobs(tok, jobs, output, prep, resume, False, [], removed)


class Prepared:
    """``encode_parquet``'s options, checked, with what they resolve to (the id type,
    the separator and BOS ids, the special-token sets, the identity record's settings)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def prepare(tok, output, column="text", format="parquet", dtype=None, keep_columns=(),
            special="error", separator=None, count_only=False, num_threads=None, bos=None,
            shard_size=None, val_fraction=0.0, seed=0, concat_tokens=None, ids_column="ids",
            token_count_column=None, progress=False) -> Prepared:
    """Check ``encode_parquet``'s options before any output exists (ValueError /
    ``EncodeOptionsError`` naming the option) and resolve them (``Prepared``)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    from ..validation import check_num_threads

    check_num_threads(num_threads)  # before any output exists
    if special not in SPECIAL_POLICIES:
        raise ValueError(f"special must be one of {SPECIAL_POLICIES}, not {special!r}")
    keep = keep_list(keep_columns, column, format)
    allowed = "all" if special == "allow" else ()
    disallowed = () if special == "text" else "all"
    tok.special_sets(allowed, disallowed)  # resolvable before any output exists
    flat = format in TOKEN_FORMATS
    np_dtype = token_dtype(tok, format, dtype) if flat else _id_dtype(tok, format, dtype)
    parquet = format == "parquet"
    sep_id = None
    if not count_only and (not parquet or separator is not None):
        sep_id = _separator_id(tok, separator)
    bos_id = _token_id(tok, bos, "bos") if bos is not None else None
    if not flat and (shard_size is not None or val_fraction):
        raise EncodeOptionsError(f"shard_size and val_fraction apply to the formats "
                                 f"{', '.join(TOKEN_FORMATS)}, not {format!r}")
    if not parquet and (ids_column != "ids" or token_count_column is not None):
        raise EncodeOptionsError(f"ids_column and token_count_column name Parquet columns; "
                                 f"format {format!r} has none")
    for name in (ids_column, token_count_column):
        if name is not None and (not isinstance(name, str) or not name):
            raise EncodeOptionsError(f"a column name must be a non-empty str, not {name!r}")
    if parquet and ids_column in keep_list(keep_columns, column, format):
        raise EncodeOptionsError(f"ids_column {ids_column!r} is also a kept input column")
    if parquet and token_count_column is not None and token_count_column in (
            ids_column, *keep_list(keep_columns, column, format)):
        raise EncodeOptionsError(f"token_count_column {token_count_column!r} names another "
                                 "output column")
    shard_bytes = parse_size(shard_size)
    concat_tokens = check_concat_tokens(format, concat_tokens)
    if format in STREAM_FORMATS:
        stream_shard_bytes(shard_bytes)  # uint32 offsets: refused before any output
    if not isinstance(val_fraction, (int, float)) or not 0 <= val_fraction < 1:
        raise EncodeOptionsError(f"val_fraction must be a number in [0, 1), not {val_fraction!r}")
    if output is None and not count_only:
        raise EncodeOptionsError("an output folder is needed (or count_only=True)")
    settings = {"layout": LAYOUT_VERSION, "format": format, "column": column,
                "dtype": np_dtype.name, "separator_id": sep_id, "special": special,
                "keep_columns": keep, "model_sha256": None if count_only else model_sha256(tok)}
    if flat:
        settings.update(bos_id=bos_id, shard_bytes=shard_bytes, val_fraction=float(val_fraction),
                        seed=int(seed), concat_tokens=concat_tokens)
    elif bos_id is not None or ids_column != "ids" or token_count_column:
        # Recorded only when used, so that outputs of earlier versions stay resumable.
        settings.update(bos_id=bos_id, ids_column=ids_column,
                        token_count_column=token_count_column)
    return Prepared(format=format, column=column, keep=keep, allowed=allowed,
                    disallowed=disallowed, flat=flat, np_dtype=np_dtype, sep_id=sep_id,
                    bos_id=bos_id, shard_bytes=shard_bytes, val_fraction=float(val_fraction),
                    seed=int(seed), concat_tokens=concat_tokens, count_only=count_only,
                    n_threads=num_threads or os.cpu_count() or 1, settings=settings)


def _sink(job, output, prep):
    """The ``TokenSink`` of a training-stack format's job (its base: the job's output path
    relative to the output folder, without the marker's extension)."""
    fmt = prep.format
    base = os.path.relpath(job.outs[0], output)[: -len(f".{fmt}.json")]
    args = (fmt, output, base, prep.np_dtype, prep.sep_id, prep.bos_id, prep.shard_bytes,
            prep.val_fraction, prep.seed, prep.settings["model_sha256"])
    return (StreamTokenSink(*args, concat_tokens=prep.concat_tokens)
            if fmt in STREAM_FORMATS else TokenSink(*args))


def job_folders(job, output, prep) -> list[str]:
    """The folders ``job``'s output files are written into (their temporary files too)."""
    if prep.flat:
        return _sink(job, output, prep).folders()
    return [os.path.dirname(os.path.abspath(job.outs[0]))]


def _encode_jobs(tok, jobs, output, prep, resume, progress, ignored, removed):
    """Encode ``jobs`` (planned) with the checked options ``prep``; the report dict."""
    report = {"files": [], "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
              "skipped_complete": [], "reencoded": [], "ignored_files": ignored,
              "stale_temp_files_removed": removed, "encoder_calls": 0}
    settings, fmt, count_only = prep.settings, prep.format, prep.count_only
    bar = None
    if progress:
        from ..progress import progress_bar

        bar = progress_bar(total=sum(input_rows(j.path) or 0 for j in jobs) or None,
                           desc="encoding", unit="row")
    t0 = time.perf_counter()
    try:
        for job in jobs:
            record = dict(settings, input=dict(input_identity(job.path),
                                               path=os.path.abspath(job.path)))
            if resume and job.outs:
                complete, reason = output_complete(job, fmt, record)
                if complete:
                    report["skipped_complete"].append(job.path)
                    if bar is not None:
                        bar.update(record["input"]["rows"] or 0)
                    continue
                if reason is not None:
                    report["reencoded"].append({"path": job.path, "output": job.outs[0],
                                                "reason": reason})
            sink = _sink(job, output, prep) if prep.flat and not count_only else None
            file_report = encode_one(tok, job, prep.column, prep.keep, fmt, prep.np_dtype,
                                     prep.sep_id, prep.allowed, prep.disallowed, prep.n_threads,
                                     count_only, bar, record, sink)
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
        raise EncodeOptionsError(f"dtype must be int32, uint16 or uint32, not {dtype!r}")
    if dtype == "uint16" and tok.vocab_size > 65536:
        raise EncodeOptionsError(f"dtype uint16 cannot hold {tok.vocab_size} ids; use uint32")
    return np.dtype(dtype)


def _token_id(tok, token, what):
    """The id of a special token's text (or an int id) for ``bos=``."""
    try:
        return _separator_id(tok, token)
    except ValueError as exc:
        raise EncodeOptionsError(str(exc).replace("separator", what)) from None


def _separator_id(tok, separator):
    """The id written after each document of a ``.bin``: ``<|endoftext|>`` by default, or
    a SentencePiece model's end-of-sentence control piece ``</s>``; a str names a special
    token (or a SentencePiece control piece), an int is an id."""
    names = dict(tok.special_tokens)
    if tok.base == "pieces":  # SentencePiece keeps <s>, </s>, <pad> as control pieces
        from .sentencepiece_model import CONTROL

        model = tok.model
        names.update({p: i for i, (p, t) in enumerate(zip(model.pieces, model.types.tolist()))
                      if t == CONTROL})
    if separator is None and getattr(tok, "eos_token_id", None) is not None:
        return tok.eos_token_id  # the tokenizer's own end-of-document role
    if separator is None:
        default = next((s for s in ("<|endoftext|>", "</s>") if s in names), None)
        if default is None:
            raise EncodeOptionsError("bin output needs a separator token: register "
                                     "<|endoftext|> or pass separator=")
        return names[default]
    if isinstance(separator, str) and separator not in names and separator.isdigit():
        separator = int(separator)  # an id given as text (the command line)
    if isinstance(separator, str):
        if separator not in names:
            raise EncodeOptionsError(f"separator {separator!r} is not a registered special "
                                     "token")
        return names[separator]
    if isinstance(separator, (bool, np.bool_)) or not isinstance(separator, (int, np.integer)):
        raise EncodeOptionsError(f"separator must be a special token's text or an int id, "
                                 f"not {separator!r}")
    if not 0 <= int(separator) < tok.vocab_size or tok.vocab[int(separator)] is None:
        raise EncodeOptionsError(f"separator id {separator} is not in the vocabulary"
                                 + (" (an unused id between the special tokens)"
                                    if 0 <= int(separator) < tok.vocab_size else ""))
    return int(separator)
