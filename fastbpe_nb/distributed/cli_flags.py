"""``fastbpe count|train|encode --dask ADDRESS|local:N`` or ``--ray ADDRESS|local``: the
same outputs, on a cluster.

``add_cluster_flag(parser, command)`` adds ``--dask`` and ``--ray`` (one or the other) to a
subcommand and wraps its handler: without them the handler runs as before; with one the
command runs through ``dask_engine`` or ``ray_engine`` (the engine is imported only then).
``--dask local:N`` starts a LocalCluster of N one-thread worker processes on 127.0.0.1 for
the run (scratch space in a temporary folder); any other value is a scheduler address
(``tcp://host:8786``). ``--ray local`` starts a Ray instance on 127.0.0.1 for the run (its
files in a temporary folder); any other value is a Ray address (``ray://host:10001``,
``auto``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from ..errors import ClusterError, FastBPEError

#: Options a subcommand has that the cluster path does not honour (refused, not ignored).
_UNSUPPORTED = {
    "count": ("merge", "max_memory"),
    "train": ("from_counts", "max_memory", "end_of_word", "num_merges", "whitespace",
              "superbpe_transition", "superbpe_pattern", "prune_min_count", "prune_ratio",
              "boundless"),
    "encode": ("count_only",),
}


def add_cluster_flag(parser, command: str) -> None:
    """Add ``--dask`` and ``--ray`` to the ``command`` subparser (call after its
    ``set_defaults(func=)``)."""
    engines = parser.add_mutually_exclusive_group()
    engines.add_argument("--dask", metavar="ADDRESS|local:N",
                         help="run on a Dask cluster: a scheduler address, or local:N worker "
                         "processes on this machine (same outputs; docs/clusters.md)")
    engines.add_argument("--ray", metavar="ADDRESS|local",
                         help="run on a Ray cluster: its address, or local for a Ray "
                         "instance on this machine (same outputs; docs/clusters.md)")
    local = parser.get_default("func")

    def run(args):
        if args.dask:
            return run_on_cluster(command, args)
        if args.ray:
            return run_on_ray(command, args)
        return local(args)

    parser.set_defaults(func=run)


def _refuse_unsupported(command, args, engine="--dask") -> None:
    for name in _UNSUPPORTED[command]:
        value = getattr(args, name, None)
        if value:
            flag = "--" + name.replace("_", "-")
            raise ClusterError(f"{flag} is not supported with {engine} (run without {engine})")
    # --base defaults to None (bytes, or chars with --whitespace: refused above).
    if command == "train" and getattr(args, "merge_batch", 1) != 1:
        raise ClusterError(f"--merge-batch is not supported with {engine} (run without {engine})")
    if command == "train" and (args.base or "bytes") != "bytes":
        raise ClusterError(f"{engine} trains byte-level models (--base bytes)")
    if command == "train" and getattr(args, "normalization", None) not in (None, "none"):
        raise ClusterError(f"--normalization is not supported with {engine} (normalize the "
                           "corpus first)")
    if command == "encode" and not args.output:
        raise ClusterError(f"{engine} encodes files: give -o OUTPUT_FOLDER")


def run_on_cluster(command: str, args) -> int:
    """Run ``fastbpe <command>`` with ``args`` on the ``--dask`` cluster; the exit code."""
    _refuse_unsupported(command, args)
    try:
        from . import dask_engine
    except ImportError as exc:
        raise ClusterError(f"--dask needs dask.distributed ({exc}): pip install "
                           "'fastbpe_nb[dask]'") from None
    with tempfile.TemporaryDirectory(prefix="fastbpe-dask-") as scratch:
        client, cluster = dask_engine.open_client(args.dask, local_directory=scratch)
        try:
            return _COMMANDS[command](dask_engine, {"client": client}, args)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def run_on_ray(command: str, args) -> int:
    """Run ``fastbpe <command>`` with ``args`` on the ``--ray`` cluster; the exit code."""
    _refuse_unsupported(command, args, "--ray")
    try:
        from . import ray_engine
    except ImportError as exc:
        raise ClusterError(f"--ray needs ray ({exc}): pip install 'fastbpe_nb[ray]'") from None
    # Short and private: Ray puts its Unix sockets in its temporary folder.
    with tempfile.TemporaryDirectory(prefix="fbray-", dir="/tmp" if os.path.isdir("/tmp")
                                     else None) as scratch:
        env = ray_engine.start(args.ray, temp_dir=scratch)
        try:
            return _COMMANDS[command](ray_engine, {}, args)
        finally:
            ray_engine.stop(env)


def _progress(args) -> bool:
    """As without --dask: --progress, or a terminal; never with -q."""
    return not args.quiet and (getattr(args, "progress", False) or sys.stderr.isatty())


def _read_options(args) -> dict:
    return {"on_bad_input": args.on_bad_input, "max_invalid_utf8": args.max_invalid_utf8}


def _count(de, conn, args) -> int:
    from ..io.atomic import check_output_file

    check_output_file(args.output)
    pattern = None if args.pattern == "none" else args.pattern
    _, report = de.count_words(args.files, args.column, **conn, pattern=pattern,
                               special_tokens=args.special or (), num_threads=args.threads,
                               output=args.output, progress=_progress(args),
                               return_report=True, **_read_options(args))
    if not args.quiet:
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}: {report['unique_words']:,} unique words")
    return 0


def _train(de, conn, args) -> int:
    from ..io.atomic import check_output_file

    check_output_file(args.output)
    options = dict(special_tokens=args.special or (), tie_break=args.tie_break,
                   min_frequency=args.min_frequency, max_token_length=args.max_token_length,
                   min_word_count=args.min_word_count)
    if args.pattern != "default":
        options["pattern"] = None if args.pattern == "none" else args.pattern
    tok, report = de.train(args.files, args.vocab_size, column=args.column, **conn,
                           num_threads=args.threads, progress=_progress(args),
                           return_report=True, read_options=_read_options(args), **options)
    from ..cli_train import save_trained
    from ..inspect import print_trace

    return save_trained(tok, report, args, print_trace)


def _encode(de, conn, args) -> int:
    import fastbpe_nb as fb

    if not args.inputs:
        raise FastBPEError("no input given: name the Parquet/Arrow files, folders or globs "
                           "to encode")
    tok = fb.load(args.model)
    keep = [c for c in (args.keep_columns or "").split(",") if c]
    report = de.encode_files(tok, args.inputs, os.fspath(args.output), **conn,
                             column=args.column, format=args.format, dtype=args.dtype,
                             keep_columns=keep, special=args.special, resume=args.resume,
                             progress=_progress(args), num_threads=args.threads,
                             separator=args.separator, bos=args.bos,
                             shard_size=args.shard_size, val_fraction=args.val_fraction,
                             seed=args.seed, concat_tokens=args.concat_tokens,
                             ids_column=args.ids_column,
                             token_count_column=args.token_count_column)
    if not args.quiet:
        print(json.dumps(report, indent=2))
    return 0


_COMMANDS = {"count": _count, "train": _train, "encode": _encode}
