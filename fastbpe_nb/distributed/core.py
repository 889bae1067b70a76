"""The engine-neutral core of distributed counting and training (no engine types here).

A *counts table* is a ``pa.Table`` with the columns ``word`` (large_binary: a pre-token's
UTF-8 bytes), ``count`` (int64) and, when the corpus order is known, ``first_key`` and
``first_piece`` (int64): where the word first occurs, as (the key of the batch or file it
first occurs in, its rank among that batch's words by first occurrence). Its schema
metadata records the pattern and special tokens it was counted with.

Why two order columns and not a per-block "first occurrence" number: blocks are counted
anywhere, in any order, so only an explicit, caller-given key is deterministic. Batch keys
ordered like the corpus (file i of the listing, partition i of a dataframe) make
``(first_key, first_piece)`` order the words exactly as one ``WordCounter`` over the whole
corpus does: a word's first occurrence lies in the first batch holding it, and inside a
batch the counter's table is already in first-occurrence order. So ``ordered`` gives the
one-process table byte for byte, and ``tie_break="first"`` trains the same model.

``merge_count_tables`` sums counts exactly (int64) and keeps the smallest
``(first_key, first_piece)`` per word; its rows come in ``ordered``'s order, so the
result is the same whatever the order of its inputs. ``partition_counts`` cuts a table into
shards by a stable hash of the words' bytes (the same word lands in the same shard on every
machine), so that shard i of every batch can be reduced on its own and the reduced shards
concatenated.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .. import pretokenize
from ..errors import ModelFormatError, TrainingError

#: Schema metadata key of a counts table (the same key the counts files use).
META_KEY = b"fastbpe_nb"
ORDER_COLUMNS = ("first_key", "first_piece")


def _schema(pattern, special_tokens, ordered: bool):
    import pyarrow as pa

    fields = [("word", pa.large_binary()), ("count", pa.int64())]
    if ordered:
        fields += [(name, pa.int64()) for name in ORDER_COLUMNS]
    meta = {"pattern": pattern, "special_tokens": list(special_tokens)}
    return pa.schema(fields, metadata={META_KEY: json.dumps(meta)})


def table_meta(table) -> dict:
    """``{"pattern", "special_tokens"}`` of a counts table (ModelFormatError if missing)."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None or table.schema.names[:2] != ["word", "count"]:
        raise ModelFormatError("not a fastbpe_nb counts table (columns word, count and its "
                               "schema metadata are needed)", "<table>")
    return json.loads(raw)


def has_order(table) -> bool:
    """True when the table carries the (first_key, first_piece) order columns."""
    return all(name in table.schema.names for name in ORDER_COLUMNS)


def make_table(word_bytes, offsets, counts, pattern, special_tokens=(), order_key=None):
    """A counts table from a word table in first-occurrence order (``WordCounter.table()``).

    ``order_key`` (an int): the batch's place in the corpus; the rows get
    ``first_key = order_key`` and ``first_piece = 0, 1, 2, ...`` (their order here).
    """
    import pyarrow as pa

    from ..io.counts_file import _word_array

    columns = [_word_array(word_bytes, offsets), pa.array(np.asarray(counts, np.int64))]
    if order_key is not None:
        key = _check_key(order_key)
        n = len(counts)
        columns += [pa.array(np.full(n, key, np.int64)), pa.array(np.arange(n, dtype=np.int64))]
    return pa.Table.from_arrays(columns, schema=_schema(pattern, special_tokens,
                                                        order_key is not None))


def _check_key(order_key) -> int:
    if isinstance(order_key, (bool, np.bool_)) or not isinstance(order_key, (int, np.integer)) \
            or order_key < 0:
        raise ValueError(f"order_key must be a non-negative int, not {order_key!r}")
    return int(order_key)


def resolve_counting(tok_or_pattern, special_tokens=None):
    """``(pattern, special_tokens)`` from a Tokenizer (its own) or a pattern name/regex."""
    if hasattr(tok_or_pattern, "pattern") and hasattr(tok_or_pattern, "special_tokens"):
        specials = list(dict(tok_or_pattern.special_tokens)) if special_tokens is None \
            else list(special_tokens)
        return pretokenize.resolve_pattern(tok_or_pattern.pattern), specials
    pattern = pretokenize.resolve_pattern(tok_or_pattern)
    pretokenize.compiled_pattern(pattern)  # an unknown name or bad regex fails here
    return pattern, list(dict.fromkeys(special_tokens or ()))


def count_batch(tok_or_pattern, texts, order_key=None, *, column="text", special_tokens=None,
                num_threads=None):
    """Count one batch of documents into a counts table.

    ``texts``: a pyarrow string array (or chunked array; nulls are empty documents), a
    RecordBatch or Table (its ``column``), or a list of str. ``tok_or_pattern``: a
    Tokenizer (its pattern and special tokens) or a pattern. ``order_key``: the batch's
    place in the corpus (see the module docstring); without it the table has no order
    columns (fine for every tie rule but ``first``).
    """
    from ..word_table import count_corpus

    if hasattr(texts, "schema") and hasattr(texts, "column"):
        if column not in texts.schema.names:
            from ..errors import CorpusReadError

            raise CorpusReadError(f"the batch has no column {column!r} (columns: "
                                  f"{texts.schema.names})")
        texts = texts.column(column)
    pattern, specials = resolve_counting(tok_or_pattern, special_tokens)
    counter = count_corpus(texts, pattern, specials, num_threads)
    return make_table(*counter.table(), pattern, specials, order_key)


def count_file(path, order_key=None, *, column="text", pattern="gpt2", special_tokens=(),
               num_threads=None, **read_options):
    """Count one corpus file, or a list of consecutive ones (one contiguous part of the
    corpus), exactly as ``fastbpe count`` reads them: ``(table, stats dict)``.

    ``read_options`` are ``training.count_files``' (on_bad_input, max_invalid_utf8,
    chunk_bytes, max_chunk_bytes).
    """
    from ..training import count_files

    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    pattern, specials = resolve_counting(pattern, special_tokens)
    counter, stats = count_files(paths, column, pattern=pattern, special_tokens=specials,
                                 num_threads=num_threads, **read_options)
    report = stats.as_dict()
    report["pre_tokens"] = counter.n_pieces
    return make_table(*counter.table(), pattern, specials, order_key), report


def file_groups(files, n_groups: int) -> list:
    """``files`` (in corpus order) cut into at most ``n_groups`` runs of consecutive files
    of about equal total size: one counting task each. A run is a contiguous part of the
    corpus, so one key per run orders the words as well as one key per file does, and
    counting a run in one table merges its files' common words before any shuffle."""
    if n_groups >= len(files):
        return [[f] for f in files]
    sizes = np.array([max(1, os.path.getsize(f)) for f in files], dtype=np.float64)
    ends = np.cumsum(sizes)
    targets = ends[-1] * np.arange(1, n_groups) / n_groups
    cuts = np.unique(np.clip(np.searchsorted(ends, targets) + 1, 1, len(files) - 1))
    bounds = [0, *cuts.tolist(), len(files)]
    return [list(files[a:b]) for a, b in zip(bounds, bounds[1:])]


def _same_meta(tables):
    metas = [table_meta(t) for t in tables]
    for i, meta in enumerate(metas[1:], 1):
        if meta != metas[0]:
            raise ModelFormatError(
                f"counts table {i} was counted with pattern {meta['pattern']!r} and special "
                f"tokens {meta['special_tokens']}, table 0 with {metas[0]['pattern']!r} and "
                f"{metas[0]['special_tokens']}: counts of different pre-tokenizations do not "
                "add up", "<tables>")
    return metas[0]


def _concat(tables, names, meta, ordered_all):
    import pyarrow as pa

    schema = _schema(meta["pattern"], meta["special_tokens"], ordered_all)
    return pa.concat_tables([t.select(names).cast(schema) for t in tables])


def merge_count_tables(tables):
    """Merge counts tables exactly: counts summed per word (int64), the smallest
    ``(first_key, first_piece)`` kept.

    The rows come out in ``ordered``'s order (first occurrence with order columns, else
    the words' bytes), the same whatever the order of ``tables``. Order columns are kept
    only if every table has them (a table without order cannot say where its words came
    first). One linear pass (``kernels.partition.merge_words``), then a sort of the
    distinct words only.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..io.counts_file import _word_parts
    from ..kernels.partition import merge_words
    from ..parallel import call_kernel

    tables = list(tables)
    if not tables:
        raise ValueError("merge_count_tables needs at least one table")
    meta = _same_meta(tables)
    ordered_all = all(has_order(t) for t in tables)
    names = ["word", "count"] + (list(ORDER_COLUMNS) if ordered_all else [])
    big = _concat(tables, names, meta, ordered_all)
    counts = np.ascontiguousarray(big.column("count").to_numpy(), np.int64)
    # Exactness: int64 sums cannot overflow while the total stays below 2**62.
    if len(counts) and float(counts.sum(dtype=np.float64)) >= 2.0**62:
        raise ModelFormatError("the counts add up to 2**62 or more, beyond exact int64 sums",
                               "<tables>", "count")
    words = big.column("word").combine_chunks()
    hashes = word_hashes(words)  # checks the offsets, before the kernel reads them
    data, offsets, start = _word_parts(words)
    if len(counts) and (counts <= 0).any():
        raise ModelFormatError("a count is not positive", "<tables>", "count")
    if ordered_all:
        keys, pieces = (np.ascontiguousarray(big.column(c).to_numpy(), np.int64)
                        for c in ORDER_COLUMNS)
    else:
        keys = pieces = np.zeros(len(counts), np.int64)
    used = data[start:start + (int(offsets[-1]) if len(offsets) else 0)]
    rows, total, key, piece = call_kernel(merge_words, used, offsets, hashes, counts, keys,
                                          pieces)
    unique = words.take(pa.array(rows))
    if ordered_all:  # distinct words have distinct (key, piece): a total order
        order = np.lexsort((piece, key))
    else:
        order = pc.sort_indices(unique).to_numpy()
    columns = [unique.take(pa.array(order)), pa.array(total[order])]
    if ordered_all:
        columns += [pa.array(key[order]), pa.array(piece[order])]
    return pa.Table.from_arrays(columns, schema=big.schema)


def word_hashes(words) -> np.ndarray:
    """A stable 64-bit hash of each word's bytes (``kernels.partition.word_hashes``: the
    same on every machine and in every process). ``words``: a large_binary array or a
    counts table."""
    from ..io.arrow_text import check_offsets
    from ..io.counts_file import _word_parts
    from ..kernels.partition import word_hashes as kernel
    from ..parallel import call_kernel

    if hasattr(words, "schema"):
        words = words.column("word")
    if hasattr(words, "combine_chunks"):
        words = words.combine_chunks()
    check_offsets(words, "column 'word'")  # before the kernel reads the buffers
    data, offsets, start = _word_parts(words)
    if len(offsets) <= 1:
        return np.zeros(0, np.uint64)
    return call_kernel(kernel, data[start:start + int(offsets[-1])], offsets)


def partition_counts(table, n_partitions: int) -> list:
    """Cut a counts table into ``n_partitions`` shards by a stable hash of the words' bytes.

    A word lands in the same shard whatever table it is in and wherever it is cut, so
    merging shard i of every table gives exactly the rows of shard i of the merged whole,
    and the reduced shards hold disjoint words (``combine_partitions`` joins them).
    """
    if isinstance(n_partitions, bool) or not isinstance(n_partitions, int) or n_partitions < 1:
        raise ValueError(f"n_partitions must be an int >= 1, not {n_partitions!r}")
    if n_partitions == 1:
        return [table]
    import pyarrow as pa

    shard = (word_hashes(table) % np.uint64(n_partitions)).astype(np.int64)
    order = np.argsort(shard, kind="stable")
    bounds = np.searchsorted(shard[order], np.arange(n_partitions + 1))
    return [table.take(pa.array(order[bounds[i]:bounds[i + 1]])) for i in range(n_partitions)]


def ordered(table):
    """The table in the corpus' first-occurrence order if it has order columns (then the
    same rows as one ``WordCounter`` over the corpus), else sorted by the words' bytes."""
    import pyarrow.compute as pc

    keys = [(c, "ascending") for c in ORDER_COLUMNS] if has_order(table) else [("word", "ascending")]
    return table.take(pc.sort_indices(table, sort_keys=keys))


def combine_partitions(tables):
    """Join reduced shards (disjoint words) into one table in its final order (``ordered``)."""
    tables = list(tables)
    meta = _same_meta(tables)
    ordered_all = all(has_order(t) for t in tables)
    names = ["word", "count"] + (list(ORDER_COLUMNS) if ordered_all else [])
    return ordered(_concat(tables, names, meta, ordered_all)).combine_chunks()


def table_arrays(table):
    """``(word_bytes uint8, offsets int64 from 0, counts int64)`` of a counts table (copies)."""
    from ..io.counts_file import _word_parts

    words = table.column("word").combine_chunks()
    data, offsets, start = _word_parts(words)
    if not len(offsets):
        offsets = np.zeros(1, np.int64)
    data = data[start : start + int(offsets[-1])].copy()
    counts = table.column("count").to_numpy().astype(np.int64)
    return data, offsets.astype(np.int64), counts


def write_counts(table, path) -> None:
    """Write a counts table as a counts file (``fastbpe count``'s format), atomically.

    A table with order columns is written in first-occurrence order with no ``order`` key
    (byte for byte the file ``fastbpe count`` writes for the same corpus); one without is
    written sorted by bytes with ``order: "bytes"`` (as ``fastbpe count --merge`` does).
    """
    from ..io.counts_file import ORDER_BYTES, save_counts

    meta = table_meta(table)
    table = ordered(table)
    extra = None if has_order(table) else {"order": ORDER_BYTES}
    save_counts(path, *table_arrays(table), meta["pattern"], meta["special_tokens"], extra=extra)


def read_counts(path, order_key=None):
    """A counts file as a counts table. ``order_key``: give a file in first-occurrence
    order (one corpus, ``fastbpe count``) its place among others (see ``make_table``)."""
    from ..io.counts_file import ORDER_FIRST, load_counts

    word_bytes, offsets, counts, meta = load_counts(path)
    if order_key is not None and meta.get("order", ORDER_FIRST) != ORDER_FIRST:
        raise ModelFormatError("order_key given, but the file's rows are not in a corpus' "
                               "first-occurrence order (a merge of several counts)", path, "order")
    return make_table(word_bytes, offsets, counts, meta.get("pattern"),
                      meta.get("special_tokens", ()), order_key)


def check_train_options(vocab_size=None, **options):
    """Validated ``TrainOptions`` for training from counts tables (before any counting):
    byte-level only, as ``train_files``."""
    from ..training import TrainOptions

    opts = TrainOptions.make(vocab_size, **options)
    if opts.base != "bytes":
        raise TrainingError("training from counts tables supports base='bytes' (use train() "
                            "for char mode)")
    if opts.normalization is not None:
        raise TrainingError("training from counts tables does not normalize: normalize the "
                            "corpus first")
    return opts


def train_from_count_tables(tables, vocab_size=None, *, min_word_count=1, return_report=False,
                            **options):
    """Learn a tokenizer from counts tables (a table or a list of them, e.g. reduced shards).

    The tables are merged (``merge_count_tables``) and put in their final order
    (``ordered``); the merge phase is then ``train_files``' on the same word table, so the
    model is byte-identical to ``fb.train_files`` on the corpus the tables count, for every
    tie rule (``first`` needs the order columns: TrainingError otherwise). The pattern and
    special tokens are the tables' (a different one given is a TrainingError).
    """
    from ..training import require_words, train_from_table
    from ..validation import check_min_count

    min_word_count = check_min_count(min_word_count, "min_word_count")
    tables = [tables] if hasattr(tables, "schema") else list(tables)
    table = merge_count_tables(tables) if len(tables) > 1 else tables[0]
    meta = table_meta(table)
    options = dict(options)
    given = options.get("pattern", "default")
    if given != "default" and pretokenize.resolve_pattern(given) != meta["pattern"]:
        raise TrainingError(f"the counts were made with pattern {meta['pattern']!r}, not "
                            f"{given!r}")
    options["pattern"] = meta["pattern"]
    given_specials = list(options.get("special_tokens") or ())
    if given_specials and given_specials != meta["special_tokens"]:
        raise TrainingError(f"the counts were made with special tokens {meta['special_tokens']}, "
                            f"not {given_specials}: they decide what text was cut out")
    options["special_tokens"] = meta["special_tokens"]
    opts = check_train_options(vocab_size, **options)
    if opts.tie_break == "first" and not has_order(table):
        raise TrainingError("tie_break='first' needs the corpus order of first occurrences, "
                            "which these counts tables do not carry (count them with order "
                            "keys); use 'ids', 'hf' or 'bytes'")
    word_bytes, offsets, counts = table_arrays(ordered(table))
    report = {"unique_words_counted": int(len(counts))}
    require_words(counts, "the counts tables hold no word")
    if min_word_count != 1:
        word_bytes, offsets, counts = _prune(word_bytes, offsets, counts, min_word_count, report)
    tok = train_from_table(word_bytes.astype(np.int32), offsets, counts, None, opts, report)
    return (tok, report) if return_report else tok


def train_by(count_words, data, vocab_size=None, *, column="text", min_word_count=1,
             counts_output=None, n_partitions=None, return_report=False, num_threads=None,
             progress=False, read_options=None, **options):
    """Train with an engine's ``count_words`` (its connection bound): the options are
    checked before any work, the corpus counted on the cluster (``counts_output``: also
    write the counts file), then the merge loop runs here (``train_from_count_tables``).
    ``options`` are ``train_files``'; ``read_options`` go to the file readers."""
    opts = check_train_options(vocab_size, num_threads=num_threads, progress=progress,
                               **options)  # before any work
    table, report = count_words(data, column, pattern=opts.pattern,
                                special_tokens=opts.special_tokens, num_threads=num_threads,
                                n_partitions=n_partitions, output=counts_output,
                                progress=progress, return_report=True, **(read_options or {}))
    tok, train_report = train_from_count_tables(
        table, vocab_size, min_word_count=min_word_count, return_report=True, progress=progress,
        num_threads=num_threads, **options)
    report.update(train_report)
    return (tok, report) if return_report else tok


def _prune(word_bytes, offsets, counts, min_word_count, report):
    """The table without words counted fewer than ``min_word_count`` times, order kept."""
    from ..kernels.count import prune_words
    from ..parallel import call_kernel
    from ..training import require_words

    rare = counts < min_word_count
    report.update(words_pruned=int(rare.sum()), occurrences_pruned=int(counts[rare].sum()),
                  min_word_count=int(min_word_count))
    if not rare.any():
        return word_bytes, offsets, counts
    word_bytes, offsets, counts = call_kernel(prune_words, word_bytes, offsets, counts,
                                              int(min_word_count))
    require_words(counts, f"no word is counted {min_word_count} times or more")
    return word_bytes, offsets, counts


def sum_read_reports(reports) -> dict:
    """The per-file read reports of ``count_file`` added up (lists joined, in order)."""
    total = {}
    for rep in reports:
        for key, value in rep.items():
            if isinstance(value, list):
                total.setdefault(key, []).extend(value)
            else:
                total[key] = total.get(key, 0) + value
    return total


def plan_encode(tok, inputs, output, options):
    """``(jobs, ignored, removed)``: what one ``encode_parquet(tok, inputs, output,
    **options)`` call would encode, planned on the client before any task runs.

    The options are checked first (the errors one process raises, before any output);
    the jobs are ``plan_jobs``' over all the inputs, so each carries its output path
    relative to the whole output folder: a task encoding one job (``encode_planned``)
    writes the files one process writes for it, training-stack shard names and
    validation split included. As one process does, the output folder is checked and
    made, and the stale temporary files of killed runs under it are removed
    (``removed``: how many).
    """
    from ..errors import ClusterError
    from ..io.atomic import check_writable, remove_stale_temps
    from ..io.encode_files import prepare
    from ..io.encode_plan import check_not_over_inputs, plan_jobs

    if options.get("count_only"):
        raise ClusterError("encode_files writes outputs: count_only is not supported on a "
                           "cluster")
    prepare(tok, output, **{k: v for k, v in options.items() if k != "resume"})
    output = os.fspath(output)
    jobs, ignored, specs = plan_jobs(inputs, output, options.get("format", "parquet"))
    check_not_over_inputs(jobs, specs, output)
    check_writable(output, create=True)
    return jobs, ignored, len(remove_stale_temps(output, recursive=True))


def encode_job(tok, job, output, options) -> dict:
    """Encode one planned job (``plan_encode``) in a task: ``encode_parquet``'s report of
    that file alone."""
    from ..io.encode_files import encode_planned

    return encode_planned(tok, [job], output, **options)


def sum_encode_reports(reports, ignored, removed=0) -> dict:
    """The reports of the tasks (one file each) added up (lists joined, in order);
    ``ignored``: the files the listing ignored, ``removed``: the stale temporary files the
    client removed before the tasks ran."""
    total = {"files": [], "rows": 0, "null_rows": 0, "tokens": 0, "bytes": 0,
             "skipped_complete": [], "reencoded": [], "ignored_files": list(ignored),
             "stale_temp_files_removed": removed, "encoder_calls": 0, "seconds": 0.0}
    for rep in reports:
        for k in ("files", "skipped_complete", "reencoded"):
            total[k].extend(rep[k])
        for k in ("rows", "null_rows", "tokens", "bytes", "encoder_calls",
                  "stale_temp_files_removed", "seconds"):
            total[k] += rep[k]
    total["task_seconds"] = total.pop("seconds")
    return total
