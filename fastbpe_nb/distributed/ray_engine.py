"""The Ray adapter: counting, training and encoding on a Ray cluster.

A thin layer over ``core`` (which decides every result), mirroring ``dask_engine``: the
driver lists the inputs, submits Ray tasks and gathers the counts tables. Results equal one
process byte for byte:

* ``count_words(paths_or_dataset)``: one counting task per run of consecutive files
  (``core.count_file``, the reader ``fastbpe count`` uses) or per block bundle of a
  ``ray.data.Dataset`` (``core.count_batch``), keyed by its place in the listing or in the
  dataset's order; each task returns its table cut into hash shards (one Ray object each),
  shard i of every task is merged in a tree of reduction tasks, and the driver joins the
  shards in first-occurrence order.
* ``train``: the same counting, then ``core.train_from_count_tables`` on the driver.
* ``encode_files``: the driver plans one ``encode_parquet`` call over all the inputs
  (``core.plan_encode``), and one task per input file encodes its planned output
  (``encode_planned``: same files in every format, atomic writes, resume); a task whose
  worker dies is retried (``max_retries``), and the retry removes the dead writer's
  temporary files.
* ``encode_dataset``: the dataset with an ids column (``list<int32>``, nulls kept), added by
  ``map_batches`` over pyarrow batches (tasks, no fixed actor pool), so row-aligned.

Why a Dataset is counted through its block references and not ``map_batches``: Ray Data
hands blocks to tasks in no fixed order, so a ``first`` model needs each block's place in
the dataset's order as an explicit key; ``iter_internal_ref_bundles`` with
``preserve_order`` yields the blocks in that order, the counting still runs on the workers.

The tokenizer is put in the object store once (``ray.put``) and loaded once per worker
process (cached by its SHA-256), which warms its kernels before its first batch; counting
warms the workers with one small task per CPU slot. Each task reserves ``num_threads`` CPUs
of Ray's resources and runs the kernels on that many threads, so tasks do not oversubscribe
a node. ``ray`` is imported only here (the ``fastbpe_nb[ray]`` extra).
"""

from __future__ import annotations

import os

import ray

from . import core
from ..errors import ClusterError, FastBPEError

#: Tokenizers loaded by this worker process, by model SHA-256 (one ``ray.get`` each).
_WORKER_TOKENIZERS: dict = {}
#: A few documents for warming the kernels on a worker (every scanner path sees a letter,
#: a digit, a space, punctuation and a non-ASCII character).
_WARM_TEXTS = ["Hello, world! 123 déjà vu\n", "the quick brown fox\tjumps 4 times", ""]
#: Retries of a task whose worker process died (SIGKILL, out of memory, node lost).
MAX_RETRIES = 3


def _require_ray():
    if not ray.is_initialized():
        raise ClusterError("Ray is not initialized: call ray.init(...) first (or use "
                           "fastbpe_nb.distributed.ray_engine.start)")


def _node_cpus() -> list:
    """The CPU resource of every alive node."""
    return [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]


def task_threads(num_threads=None) -> int:
    """Numba threads (and Ray CPUs) per task: ``num_threads``, default 1; it must fit a node."""
    from ..validation import check_num_threads

    _require_ray()
    num_threads = check_num_threads(num_threads) or 1
    largest = max(_node_cpus(), default=0)
    if num_threads > largest:
        # A task asking more CPUs than any node has would wait for ever.
        raise ClusterError(f"num_threads={num_threads} exceeds the CPUs of every Ray node "
                           f"(largest: {largest})")
    return num_threads


def _slots(num_threads) -> int:
    """How many tasks of ``num_threads`` CPUs run at once on the cluster (at least 1)."""
    return max(1, sum(c // num_threads for c in _node_cpus()))


def _get(refs):
    """``ray.get`` that re-raises our own errors as themselves (the task's exception, not
    Ray's wrapper with the remote traceback), so the CLI prints their message."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, FastBPEError):
            raise cause from None
        raise


def _bar(refs, progress, desc):
    """Wait for ``refs`` with a tqdm bar when ``progress`` (per finished task)."""
    if not progress:
        return
    from tqdm.auto import tqdm

    pending = list(refs)
    with tqdm(total=len(pending), desc=desc, unit="task", dynamic_ncols=True) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            bar.update(len(done))


@ray.remote
def _warm_counting(pattern, special_tokens, num_threads):
    """Count a few documents (compiles or loads the kernels once in this worker)."""
    import pyarrow as pa

    core.count_batch(pattern, pa.array(_WARM_TEXTS), 0, special_tokens=special_tokens,
                     num_threads=num_threads)
    return os.getpid()


@ray.remote
def _count_files_task(paths, key, n_partitions, options):
    table, report = core.count_file(paths, key, **options)
    return (*core.partition_counts(table, n_partitions), report)


@ray.remote
def _count_blocks_task(key, column, n_partitions, pattern, special_tokens, num_threads,
                       *blocks):
    texts = _block_texts(blocks, column)
    table = core.count_batch(pattern, texts, key, special_tokens=special_tokens,
                             num_threads=num_threads)
    report = {"documents": len(texts) - texts.null_count, "null_rows_skipped": texts.null_count}
    return (*core.partition_counts(table, n_partitions), report)


def _block_texts(blocks, column):
    """The ``column`` of a bundle's blocks (Arrow tables or pandas frames) as one chunked
    string array, in block order."""
    import pyarrow as pa

    from ..errors import CorpusReadError

    chunks = []
    for block in blocks:
        if not isinstance(block, pa.Table):
            block = pa.Table.from_pandas(block, preserve_index=False)
        if column not in block.schema.names:
            raise CorpusReadError(f"the dataset has no column {column!r} (columns: "
                                  f"{block.schema.names})")
        chunks += block.column(column).chunks
    types = {c.type for c in chunks}
    if not chunks:
        return pa.chunked_array([], pa.large_string())
    if len(types) == 1 and (pa.types.is_string(chunks[0].type)
                            or pa.types.is_large_string(chunks[0].type)):
        return pa.chunked_array(chunks)
    # Mixed blocks, or an all-null block's null type: one string type for all.
    return pa.chunked_array([c.cast(pa.large_string()) for c in chunks], pa.large_string())


@ray.remote
def _merge_shards(*shards):
    return core.merge_count_tables(shards)


def _tree_reduce(refs, num_threads, fan_in=8):
    """Merge shard tables in a tree of ``fan_in``-way merge tasks (merging starts while
    other files are still counted)."""
    merge = _merge_shards.options(num_cpus=num_threads)
    while len(refs) > 1:
        refs = [merge.remote(*refs[i:i + fan_in]) for i in range(0, len(refs), fan_in)]
    return refs[0]


def _is_dataset(data) -> bool:
    return hasattr(data, "iter_internal_ref_bundles") and hasattr(data, "map_batches")


def _dataset_bundles(ds):
    """The dataset's block reference lists, in the dataset's order (``preserve_order`` set
    on its context for the run, then restored)."""
    context = getattr(ds, "context", None) or ray.data.DataContext.get_current()
    options = context.execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        for bundle in ds.iter_internal_ref_bundles():
            yield list(bundle.block_refs)
    finally:
        options.preserve_order = before


def count_words(data, column="text", *, pattern="gpt2", special_tokens=(), num_threads=None,
                n_partitions=None, n_tasks=None, output=None, progress=False,
                return_report=False, **read_options):
    """Count the pre-tokens of files or of a ``ray.data.Dataset`` on the Ray cluster.

    Parameters
    ----------
    data : paths (files, globs, folders; read on the workers: shared storage) or a
        ``ray.data.Dataset`` (``column`` names its text column; counted in its own order)
    pattern, special_tokens : as ``fastbpe count``
    num_threads : int, optional
        Numba threads and Ray CPUs per task (default 1).
    n_partitions : int, optional
        Hash shards of the reduction (default: the tasks that run at once).
    n_tasks : int, optional
        Files: counting tasks, each a run of consecutive files of about equal size
        (default: 4 per task slot).
    output : path, optional
        Also write the counts file (byte for byte ``fastbpe count``'s for the same files).
    read_options : on_bad_input, max_invalid_utf8, chunk_bytes, max_chunk_bytes (files).

    Returns
    -------
    pa.Table (or ``(table, report)``)
        The counts table in first-occurrence order, with its order columns.
    """
    from ..errors import CorpusReadError
    from ..io.input_files import expand_paths

    pattern, specials = core.resolve_counting(pattern, special_tokens)
    num_threads = task_threads(num_threads)
    slots = _slots(num_threads)
    n_partitions = slots if n_partitions is None else n_partitions
    if isinstance(n_partitions, bool) or not isinstance(n_partitions, int) or n_partitions < 1:
        raise ValueError(f"n_partitions must be an int >= 1, not {n_partitions!r}")
    n_tasks = 4 * slots if n_tasks is None else n_tasks
    _get([_warm_counting.options(num_cpus=num_threads).remote(pattern, specials, num_threads)
          for _ in range(slots)])
    returns = n_partitions + 1
    ignored, skipped = [], []  # found while listing: reported, never dropped silently
    if _is_dataset(data):
        if read_options:  # not silently ignored
            raise ClusterError(f"{sorted(read_options)} apply to files, not to a Ray Dataset")
        task = _count_blocks_task.options(num_cpus=num_threads, num_returns=returns)
        results = [task.remote(i, column, n_partitions, pattern, specials, num_threads, *refs)
                   for i, refs in enumerate(_dataset_bundles(data))]
    else:
        files = expand_paths(data, read_options.get("on_bad_input", "error"), ignored, skipped)
        options = dict(read_options, column=column, pattern=pattern, special_tokens=specials,
                       num_threads=num_threads)
        task = _count_files_task.options(num_cpus=num_threads, num_returns=returns)
        results = [task.remote(group, i, n_partitions, options)
                   for i, group in enumerate(core.file_groups(files, n_tasks))]
    if not results:
        raise CorpusReadError(f"no input to count in {data!r}")
    _bar([r[-1] for r in results], progress, "counting")
    reduced = [_tree_reduce([r[i] for r in results], num_threads) for i in range(n_partitions)]
    reports = _get([r[-1] for r in results])
    table = core.combine_partitions(_get(reduced))
    report = core.sum_read_reports(reports)
    for key, listed in (("files_ignored", ignored), ("files_skipped", skipped)):
        report[key] = [{"path": p, "reason": r} for p, r in listed] + report.get(key, [])
    report.update(unique_words=table.num_rows, tasks=len(results), n_partitions=n_partitions)
    if output is not None:
        core.write_counts(table, output)
    return (table, report) if return_report else table


def train(data, vocab_size=None, **options):
    """Train on the Ray cluster: a model byte-identical to ``fb.train_files`` on the same
    files (every tie rule). Counting runs in tasks (``count_words``), the merge loop on the
    driver. ``options``: ``core.train_by``'s (``column``, ``min_word_count``,
    ``counts_output``, ``n_partitions``, ``return_report``, ``num_threads``, ``progress``,
    ``read_options``) and ``train_files``' (``tie_break``, ``special_tokens``, ...)."""
    return core.train_by(count_words, data, vocab_size, **options)


def ship_tokenizer(tok):
    """``(key, holder)``: the tokenizer put in the object store once; tasks load it with
    ``_worker_tokenizer(key, holder, ...)``. The reference travels inside a list so that Ray
    does not fetch and unpickle the tokenizer for every task, only once per worker."""
    from ..io.encode_identity import model_sha256

    return model_sha256(tok), [ray.put(tok)]


def _worker_tokenizer(key, holder, num_threads):
    """This worker's copy of the shipped tokenizer: fetched and warmed on first use."""
    tok = _WORKER_TOKENIZERS.get(key)
    if tok is None:
        import pyarrow as pa

        tok = ray.get(holder[0])
        # Compiles (or loads from the cache) the encode kernels now, before real work.
        tok.encode_batch(pa.array(_WARM_TEXTS), num_threads=num_threads)
        _WORKER_TOKENIZERS[key] = tok
    return tok


@ray.remote
def _warm_tokenizer(key, holder, num_threads):
    _worker_tokenizer(key, holder, num_threads)
    return os.getpid()


def _prime(key, holder, num_threads):
    """Load and warm the tokenizer in as many workers as tasks run at once."""
    warm = _warm_tokenizer.options(num_cpus=num_threads)
    _get([warm.remote(key, holder, num_threads) for _ in range(_slots(num_threads))])


@ray.remote
def _encode_file_task(key, holder, job, output, options):
    tok = _worker_tokenizer(key, holder, options["num_threads"])
    return core.encode_job(tok, job, output, options)


def encode_files(tok, inputs, output, *, format="parquet", resume=True, num_threads=None,
                 progress=False, max_retries=MAX_RETRIES, **options):
    """Encode Parquet/Arrow files on the Ray cluster, one task per input file.

    The files are ``encode_parquet(tok, inputs, output, format=format, **options)``'s, byte
    for byte, in every format (training-stack shards and validation split included, inputs
    in subfolders too): the driver plans the whole call (``core.plan_encode``) and each
    task encodes one planned file (``encode_planned``) with its atomic writes and
    ``resume``. A task whose worker dies mid-file is retried up to ``max_retries`` times;
    the retry removes the dead writer's temporary files. Returns the report of
    ``encode_parquet``, summed over the files (in input order).
    """
    num_threads = task_threads(num_threads)
    options = dict(options, format=format, resume=resume, num_threads=num_threads)
    jobs, ignored, removed = core.plan_encode(tok, inputs, output, options)
    key, holder = ship_tokenizer(tok)
    _prime(key, holder, num_threads)
    # retry_exceptions=False: a task that raises (bad input) fails at once; only a dead
    # worker is retried.
    task = _encode_file_task.options(num_cpus=num_threads, max_retries=max_retries,
                                     retry_exceptions=False)
    refs = [task.remote(key, holder, job, os.fspath(output), options) for job in jobs]
    _bar(refs, progress, "encoding")
    return core.sum_encode_reports(_get(refs), ignored, removed)


def _encode_batch(batch, *, key, holder, column, output_column, num_threads, allowed,
                  disallowed):
    """One pyarrow batch with its ids column appended (same rows, same order)."""
    import pyarrow as pa

    texts = _block_texts([batch], column)
    ids = _worker_tokenizer(key, holder, num_threads).encode_batch(
        texts, num_threads=num_threads, allowed_special=allowed, disallowed_special=disallowed)
    if not isinstance(ids, pa.ChunkedArray):
        ids = pa.chunked_array([ids], pa.list_(pa.int32()))
    return batch.append_column(output_column, ids)


def encode_dataset(ds, tok, column="text", *, output_column="ids", num_threads=None,
                   allowed_special=(), disallowed_special="all", batch_size=4096):
    """``ds`` with an ``output_column`` of ids (``list<int32>``) appended: row-aligned with
    its ``column`` (each batch gets its own ids), nulls kept as nulls. Lazy, as Ray Data is.

    Runs as Ray Data tasks (``map_batches`` with a function: no fixed actor pool, which can
    starve Ray Data's own tasks); the tokenizer is shipped once (``ray.put``) and loaded
    once per worker process.
    """
    num_threads = task_threads(num_threads)
    tok.special_sets(allowed_special, disallowed_special)  # a bad spec fails here, not later
    key, holder = ship_tokenizer(tok)
    _prime(key, holder, num_threads)
    return ds.map_batches(_encode_batch, batch_format="pyarrow", batch_size=batch_size,
                          num_cpus=num_threads, zero_copy_batch=True,
                          fn_kwargs=dict(key=key, holder=holder, column=column,
                                         output_column=output_column, num_threads=num_threads,
                                         allowed=allowed_special, disallowed=disallowed_special))


_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _local_env() -> dict:
    """Environment of a local Ray started by ``start("local")``: loopback only (without
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 Ray binds its ports to every interface), no usage
    statistics sent, and (unless the caller chose an authentication) token authentication
    with a fresh token held in the environment: Ray then turns token mode on itself and
    does not generate one into ~/.ray/auth_token."""
    import secrets

    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    if not any(name in os.environ for name in _AUTH):
        env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        env["RAY_AUTH_MODE"] = None  # set by ray.init: removed again by stop
    return env


def start(spec: str, temp_dir=None, num_cpus=None):
    """Connect this process to Ray for a ``--ray`` argument; returns the environment
    variables it set (``stop`` removes them). ``local`` starts a Ray instance on 127.0.0.1
    with ``num_cpus`` (default: the machine's cores), no dashboard, its files in
    ``temp_dir`` (keep the path short: Ray puts sockets there); anything else is the
    address of a running cluster (``ray://host:10001``, ``host:6379``, ``auto``)."""
    if ray.is_initialized():
        raise ClusterError("Ray is already initialized in this process")
    if spec != "local":
        ray.init(address=spec)
        return {}
    env = {k: v for k, v in _local_env().items() if k not in os.environ}
    os.environ.update({k: v for k, v in env.items() if v is not None})
    try:
        with _loopback_only():
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                     include_dashboard=False, _node_ip_address="127.0.0.1",
                     _temp_dir=None if temp_dir is None else os.fspath(temp_dir))
    except BaseException:
        stop(env)
        raise
    return env


class _loopback_only:
    """Keep ``ray.init`` on 127.0.0.1 in this process. Ray turns "127.0.0.1" (even an
    explicit ``_node_ip_address``) into the machine's address unless its
    ``ENABLE_RAY_CLUSTER`` constant is false, and that constant is read from
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when ray is imported: set it for the call
    (the child processes get the variable from the environment)."""

    def __enter__(self):
        from ray._private import ray_constants

        self.constants, self.before = ray_constants, ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False

    def __exit__(self, *exc):
        self.constants.ENABLE_RAY_CLUSTER = self.before


def stop(env=None) -> None:
    """Disconnect (and stop a local Ray), then remove the variables ``start`` set."""
    ray.shutdown()
    for name in env or {}:
        os.environ.pop(name, None)
