"""The Dask adapter: counting, training and encoding on a ``dask.distributed`` cluster.

A thin layer over ``core`` (which decides every result): this module lists the inputs on
the client, ships one task per input file (or dataframe partition) to the workers, and
gathers the counts tables. Results equal one process byte for byte:

* ``count_words(paths_or_ddf)``: one counting task per file (``core.count_file``, the reader
  ``fastbpe count`` uses) or per dataframe partition (``core.count_batch``), keyed by its
  place in the listing; each task's table is cut into hash shards, shard i of every task is
  merged by reduction task i, and the client joins the shards in first-occurrence order.
* ``train``: the same counting, then ``core.train_from_count_tables`` on the client.
* ``encode_files``: the client plans one ``encode_parquet`` call over all the inputs
  (``core.plan_encode``), and one task per input file encodes its planned output
  (``encode_planned``: same files in every format, atomic writes, resume, stale temporary
  files of killed workers removed by the retry).
* ``encode_dataframe``: an ids column (``list<int32>``, nulls kept) per partition.

The tokenizer reaches each worker once, in a worker plugin (also on workers that join or
restart later), which warms the kernels there before any task runs; counting warms them
with ``client.run``. Tasks get ``num_threads`` explicitly: by default the cores of a host
divided among the worker threads on it. ``dask`` and ``distributed`` are imported only
here (the ``fastbpe_nb[dask]`` extra).
"""

from __future__ import annotations

import os

from distributed.diagnostics.plugin import WorkerPlugin

from . import core

#: Tokenizers installed on this worker process by ``TokenizerPlugin``, by model SHA-256.
_WORKER_TOKENIZERS: dict = {}
#: A few documents for warming the kernels on a worker (every scanner path sees a letter,
#: a digit, a space, punctuation and a non-ASCII character).
_WARM_TEXTS = ["Hello, world! 123 déjà vu\n", "the quick brown fox\tjumps 4 times", ""]


def _client(client):
    if client is not None:
        return client
    from distributed import get_client

    return get_client()  # the current default client; ValueError if there is none


def task_threads(client) -> int:
    """Numba threads per task: a host's cores divided among the worker threads on it (at
    least 1), the smallest over the hosts, so that the tasks do not oversubscribe a node."""
    workers = _workers(client)
    cores = client.run(os.cpu_count)
    per_host, host_cores = {}, {}
    for address, info in workers.items():
        host = info.get("host", address)
        per_host[host] = per_host.get(host, 0) + int(info.get("nthreads", 1))
        host_cores[host] = int(cores.get(address) or 1)
    if not per_host:
        return 1
    return max(1, min(host_cores[h] // per_host[h] for h in per_host))


def _workers(client) -> dict:
    """Every worker's info (recent ``scheduler_info`` lists only 5 unless asked for all)."""
    import inspect

    try:
        takes = "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        takes = False
    info = client.scheduler_info(n_workers=-1) if takes else client.scheduler_info()
    return info["workers"]


def _warm_counting(pattern, special_tokens, num_threads):
    """Run on each worker: count a few documents (compiles or loads the kernels once)."""
    import pyarrow as pa

    core.count_batch(pattern, pa.array(_WARM_TEXTS), 0, special_tokens=special_tokens,
                     num_threads=num_threads)
    return True


def _bar(futures, progress, desc):
    """Wait for ``futures`` with a tqdm bar when ``progress`` (per finished task)."""
    if not progress:
        return
    from distributed import as_completed
    from tqdm.auto import tqdm

    with tqdm(total=len(futures), desc=desc, unit="task", dynamic_ncols=True) as bar:
        for _ in as_completed(futures):
            bar.update(1)


def _count_file_task(path, key, n_partitions, options):
    table, report = core.count_file(path, key, **options)
    return core.partition_counts(table, n_partitions), report


def _count_frame_task(frame, key, column, n_partitions, pattern, special_tokens, num_threads):
    import pyarrow as pa

    texts = pa.array(frame[column] if column is not None else frame, from_pandas=True)
    table = core.count_batch(pattern, texts, key, special_tokens=special_tokens,
                             num_threads=num_threads)
    return core.partition_counts(table, n_partitions), {"documents": len(texts) - texts.null_count,
                                                        "null_rows_skipped": texts.null_count}


def _pick(result, i):
    return result[0][i]


def _report_of(result):
    return result[1]


def _is_dataframe(data) -> bool:
    module = type(data).__module__ or ""
    return module.startswith("dask") and hasattr(data, "to_delayed")


def count_words(data, column="text", *, client=None, pattern="gpt2", special_tokens=(),
                num_threads=None, n_partitions=None, n_tasks=None, output=None,
                progress=False, return_report=False, **read_options):
    """Count the pre-tokens of files or of a Dask dataframe on the cluster.

    Parameters
    ----------
    data : paths (files, globs, folders; read on the workers: shared storage) or a
        ``dask.dataframe`` DataFrame/Series (``column`` names its text column)
    client : distributed.Client, optional
        Default: the current client.
    pattern, special_tokens : as ``fastbpe count``
    num_threads : int, optional
        Numba threads per task (default: ``task_threads``).
    n_partitions : int, optional
        Hash shards of the reduction (default: the number of workers).
    n_tasks : int, optional
        Files: counting tasks, each a run of consecutive files of about equal size
        (default: 4 per worker thread; fewer, bigger tasks merge less, more balance better).
    output : path, optional
        Also write the counts file (byte for byte ``fastbpe count``'s for the same files).
    read_options : on_bad_input, max_invalid_utf8, chunk_bytes, max_chunk_bytes (files).

    Returns
    -------
    pa.Table (or ``(table, report)``)
        The counts table in first-occurrence order, with its order columns.
    """
    from ..io.input_files import expand_paths
    from ..validation import check_num_threads

    client = _client(client)
    pattern, specials = core.resolve_counting(pattern, special_tokens)
    num_threads = check_num_threads(num_threads) or task_threads(client)
    workers = _workers(client)
    if n_partitions is None:
        n_partitions = max(1, len(workers))
    if n_tasks is None:
        n_tasks = 4 * max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
    client.run(_warm_counting, pattern, specials, num_threads)
    if _is_dataframe(data):
        import dask

        series = data[column] if hasattr(data, "columns") else data
        parts = series.to_delayed()
        task = dask.delayed(_count_frame_task, pure=True)
        results = client.compute([task(p, i, None, n_partitions, pattern, specials, num_threads)
                                  for i, p in enumerate(parts)])
        ignored = skipped = []
    else:
        ignored, skipped = [], []  # found while listing: reported, never dropped silently
        files = expand_paths(data, read_options.get("on_bad_input", "error"), ignored, skipped)
        options = dict(read_options, column=column, pattern=pattern, special_tokens=specials,
                       num_threads=num_threads)
        # pure=False: a file counted again (it may have changed) is a new task.
        results = [client.submit(_count_file_task, group, i, n_partitions, options, pure=False)
                   for i, group in enumerate(core.file_groups(files, n_tasks))]
    _bar(results, progress, "counting")
    if not results:
        from ..errors import CorpusReadError

        raise CorpusReadError(f"no input to count in {data!r}")
    reduced = [_tree_reduce(client, [client.submit(_pick, r, i, pure=False) for r in results])
               for i in range(n_partitions)]
    reports = client.gather([client.submit(_report_of, r) for r in results])
    table = core.combine_partitions(client.gather(reduced))
    report = core.sum_read_reports(reports)
    for key, listed in (("files_ignored", ignored), ("files_skipped", skipped)):
        report[key] = [{"path": p, "reason": r} for p, r in listed] + report.get(key, [])
    report.update(unique_words=table.num_rows, tasks=len(results), n_partitions=n_partitions)
    if output is not None:
        core.write_counts(table, output)
    return (table, report) if return_report else table


def _merge_shard(shards):
    return core.merge_count_tables(shards)


def _tree_reduce(client, futures, fan_in=8):
    """Merge shard tables in a tree of ``fan_in``-way merges: merging starts while other
    files are still counted, near the data (Dask runs a task where its inputs are)."""
    while len(futures) > 1:
        futures = [client.submit(_merge_shard, futures[i:i + fan_in], pure=False)
                   for i in range(0, len(futures), fan_in)]
    return futures[0]


def train(data, vocab_size=None, *, client=None, **options):
    """Train on the cluster: a model byte-identical to ``fb.train_files`` on the same files
    (every tie rule). Counting runs on the workers (``count_words``), the merge loop on the
    client. ``options``: ``core.train_by``'s (``column``, ``min_word_count``,
    ``counts_output``, ``n_partitions``, ``return_report``, ``num_threads``, ``progress``,
    ``read_options``) and ``train_files``' (``tie_break``, ``special_tokens``, ...)."""
    import functools

    return core.train_by(functools.partial(count_words, client=client), data, vocab_size,
                         **options)


class TokenizerPlugin(WorkerPlugin):
    """A worker plugin holding one tokenizer: each worker unpickles it once (workers that
    join or restart later too) and warms its encode kernels before running tasks."""

    #: Named by the model's SHA-256: registering the same tokenizer again (another
    #: ``encode_files`` call) keeps the installed one instead of shipping and warming it anew.
    idempotent = True

    def __init__(self, tok, key, num_threads):
        self.tok, self.key, self.num_threads = tok, key, num_threads
        self.name = f"fastbpe-tokenizer-{key}"

    def setup(self, worker=None):
        _WORKER_TOKENIZERS[self.key] = self.tok
        import pyarrow as pa

        # Compiles (or loads from the cache) the encode kernels now, not mid-job.
        self.tok.encode_batch(pa.array(_WARM_TEXTS), num_threads=self.num_threads)

    def teardown(self, worker=None):
        _WORKER_TOKENIZERS.pop(self.key, None)


def ship_tokenizer(client, tok, num_threads) -> str:
    """Install ``tok`` on every worker (once) and return its key for the tasks."""
    from ..io.encode_identity import model_sha256

    key = model_sha256(tok)
    client.register_plugin(TokenizerPlugin(tok, key, num_threads))
    return key


def _worker_tokenizer(key):
    tok = _WORKER_TOKENIZERS.get(key)
    if tok is None:
        from ..errors import ClusterError

        raise ClusterError(f"tokenizer {key[:16]} is not installed on this worker (it is "
                           "shipped by ship_tokenizer's TokenizerPlugin)")
    return tok


def _encode_file_task(key, job, output, options):
    return core.encode_job(_worker_tokenizer(key), job, output, options)


def encode_files(tok, inputs, output, *, format="parquet", resume=True, client=None,
                 num_threads=None, progress=False, **options):
    """Encode Parquet/Arrow files on the cluster, one task per input file.

    The files are ``encode_parquet(tok, inputs, output, format=format, **options)``'s, byte
    for byte, in every format (training-stack shards and validation split included, inputs
    in subfolders too): the client plans the whole call (``core.plan_encode``: options
    checked, output paths relative to the whole output folder) and each task encodes one
    planned file (``encode_planned``) with its atomic writes and ``resume``. A worker
    killed mid-file is retried by Dask; the retry removes the dead writer's temporary
    files. Returns the report of ``encode_parquet``, summed over the files (in input order).
    """
    from ..validation import check_num_threads

    client = _client(client)
    num_threads = check_num_threads(num_threads) or task_threads(client)
    options = dict(options, format=format, resume=resume, num_threads=num_threads)
    jobs, ignored, removed = core.plan_encode(tok, inputs, output, options)
    key = ship_tokenizer(client, tok, num_threads)
    futures = [client.submit(_encode_file_task, key, job, os.fspath(output), options,
                             pure=False) for job in jobs]
    _bar(futures, progress, "encoding")
    return core.sum_encode_reports(client.gather(futures), ignored, removed)


def _encode_frame_task(series, key, num_threads, allowed, disallowed):
    import pandas as pd
    import pyarrow as pa

    texts = pa.array(series, from_pandas=True, type=None)
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)
            or pa.types.is_null(texts.type)):
        texts = texts.cast(pa.large_string())
    ids = _worker_tokenizer(key).encode_batch(texts, num_threads=num_threads,
                                              allowed_special=allowed,
                                              disallowed_special=disallowed)
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    return pd.Series(pd.arrays.ArrowExtensionArray(ids), index=series.index, name="ids")


def encode_dataframe(data, tok, column="text", *, client=None, num_threads=None,
                     allowed_special=(), disallowed_special="all"):
    """The ids of a Dask dataframe's text column: a Dask Series named ``ids`` of
    ``list<int32>`` (pyarrow dtype), row-aligned with ``data`` (same index), nulls kept."""
    import pandas as pd
    import pyarrow as pa

    from ..validation import check_num_threads

    client = _client(client)
    num_threads = check_num_threads(num_threads) or task_threads(client)
    tok.special_sets(allowed_special, disallowed_special)  # a bad spec fails here, not later
    key = ship_tokenizer(client, tok, num_threads)
    series = data[column] if hasattr(data, "columns") else data
    meta = pd.Series([], dtype=pd.ArrowDtype(pa.list_(pa.int32())), name="ids")
    return series.map_partitions(_encode_frame_task, key, num_threads, allowed_special,
                                 disallowed_special, meta=meta)


def open_client(spec: str, local_directory=None):
    """``(client, cluster)`` for a ``--dask`` argument: ``local:N`` starts a LocalCluster of
    N one-thread worker processes on 127.0.0.1 (``cluster`` is it; close both), anything
    else is a scheduler address (``cluster`` is None)."""
    from distributed import Client, LocalCluster

    if spec.startswith("local:") or spec == "local":
        n = spec.partition(":")[2] or str(os.cpu_count() or 1)
        if not n.isdigit() or int(n) < 1:
            from ..errors import ClusterError

            raise ClusterError(f"--dask local:N needs a number of workers >= 1, not {n!r}")
        cluster = LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               local_directory=local_directory)
        return Client(cluster), cluster
    return Client(spec), None
