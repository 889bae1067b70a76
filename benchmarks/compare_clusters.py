"""One process against a Dask ``LocalCluster`` and a local Ray for counting and encoding
Parquet files.

Builds a corpus of ``--files`` Parquet files from ``.asv/data/docs-86000000.parquet``
(Linux sources and prose; its rows repeated to reach ``--count-mb`` of text; generated text
if the file is missing), then times, interleaved and ``--repeats`` times each (medians):

* counting: ``count_files`` (one process, all cores) against ``dask_engine.count_words``
  on ``--workers`` one-thread worker processes and ``ray_engine.count_words`` on a local
  Ray of ``--workers`` CPUs (one-thread tasks) (the same counts: checked);
* encoding the first files holding ``--encode-mb`` with cl100k_base (from
  ``.asv/data/cl100k_base.tiktoken``; a small trained model if missing): ``encode_parquet``
  against each engine's ``encode_files`` (the same output bytes: checked once).

Each cluster's start-up (LocalCluster + Client, or ``ray_engine.start``; then warming the
kernels on the workers) is timed separately and not included in the ratios.
``--engines dask,ray`` picks the engines (an engine that is not installed is left out). The machine may be shared: timings are
noisy; compare the medians, and run it on an idle machine for numbers to publish.

    python benchmarks/compare_clusters.py [--count-mb 1200] [--encode-mb 500] [--files 64] [--engines dask,ray]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / ".asv" / "data"
if not DATA.is_dir():
    DATA = Path("/work/main/.asv/data")


def build_corpus(folder: Path, total_mb: int, n_files: int) -> list[str]:
    """``n_files`` Parquet files of about ``total_mb`` MB of text together (16,384-row
    groups), in order; reused when already there."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    marker = folder / f"corpus-{total_mb}-{n_files}.done"
    files = [str(folder / f"part-{i:04d}.parquet") for i in range(n_files)]
    if marker.exists():
        return files
    source = DATA / "docs-86000000.parquet"
    if source.exists():
        text = pq.read_table(source, columns=["text"]).column("text").combine_chunks()
    else:  # a synthetic corpus: words of varied lengths
        import random

        rng = random.Random(0)
        words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(1, 9)))
                 for _ in range(20000)]
        text = pa.array([" ".join(rng.choice(words) for _ in range(200)) for _ in range(50000)])
    size = int(pc.sum(pc.binary_length(text)).as_py())
    reps = max(1, -(-total_mb * 10**6 // size))
    rows = pa.concat_arrays([text] * reps)
    per = -(-len(rows) // n_files)
    for i, path in enumerate(files):
        pq.write_table(pa.table({"text": rows.slice(i * per, per)}), path, row_group_size=16384)
    marker.touch()
    return files


def text_mb(files) -> float:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return sum(int(pc.sum(pc.binary_length(pq.read_table(f, columns=["text"])["text"])).as_py())
               for f in files) / 1e6


def tokenizer():
    import fastbpe_nb as fb

    ranks = DATA / "cl100k_base.tiktoken"
    if ranks.exists():
        return fb.from_tiktoken(ranks, "cl100k", ["<|endoftext|>"]), "cl100k_base"
    from fastbpe_nb.corpus import stdlib_texts

    return fb.train(list(stdlib_texts(2_000_000)), 8192, special_tokens=["<|endoftext|>"]), \
        "trained 8192"


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count-mb", type=int, default=1200)
    p.add_argument("--encode-mb", type=int, default=500)
    p.add_argument("--files", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engines", default="dask,ray", help="comma-separated: dask, ray")
    p.add_argument("--work", default=None, help="folder for the corpus and outputs (kept)")
    args = p.parse_args()

    import numpy as np

    from fastbpe_nb.distributed import core
    from fastbpe_nb.io.encode_files import encode_parquet
    from fastbpe_nb.training import count_files

    work = Path(args.work or tempfile.mkdtemp(prefix="compare_clusters-"))
    work.mkdir(parents=True, exist_ok=True)
    files = build_corpus(work, args.count_mb, args.files)
    mb = text_mb(files)
    per_file = mb / len(files)
    enc_files = files[: max(1, round(args.encode_mb / per_file))]
    enc_mb = per_file * len(enc_files)
    tok, tok_name = tokenizer()
    print(f"corpus: {len(files)} files, {mb:,.0f} MB of text; encoding {len(enc_files)} files, "
          f"{enc_mb:,.0f} MB with {tok_name}; {os.cpu_count()} cores (shared machine: noisy)")

    # Warm the kernels in this process first (compile or cache load), as the workers are.
    count_files(files[:1])
    encode_parquet(tok, files[:1], work / "warm", resume=False)

    engines = _engines(args, work, tok, files)
    names = ["one"] + list(engines)
    times = {f"{what}_{n}": [] for what in ("count", "encode") for n in names}
    try:
        for r in range(args.repeats):
            tables = {}
            for name in names:  # interleaved: every round times each variant once
                fn = (lambda: count_files(files)[0]) if name == "one" else \
                    (lambda: engines[name]["module"].count_words(files, **engines[name]["kw"]))
                t, tables[name] = timed(fn)
                times[f"count_{name}"].append(t)
            if r == 0:
                want = tables.pop("one").table()
                for name, table in tables.items():
                    same = all(np.array_equal(a, b) for a, b in
                               zip(want, core.table_arrays(table)))
                    print(f"counts identical ({name}): {same}")
            del tables
            for name in names:
                out = work / f"out_{name}"
                shutil.rmtree(out, ignore_errors=True)
                fn = (lambda: encode_parquet(tok, enc_files, out, special="text")) \
                    if name == "one" else \
                    (lambda: engines[name]["module"].encode_files(
                        tok, enc_files, out, resume=False, special="text", **engines[name]["kw"]))
                t, _ = timed(fn)
                times[f"encode_{name}"].append(t)
            if r == 0:
                for name in engines:
                    same = all((work / "out_one" / Path(f).name).read_bytes()
                               == (work / f"out_{name}" / Path(f).name).read_bytes()
                               for f in enc_files)
                    print(f"encode outputs identical ({name}): {same}")
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                  flush=True)
    finally:
        for engine in engines.values():
            engine["close"]()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedians of {args.repeats} (seconds)")
    for what, size in (("count", mb), ("encode", enc_mb)):
        one = med[f"{what}_one"]
        print(f"{what:<6} {size:>8,.0f} MB  one process {one:>7.2f} s ({size / one:,.0f} MB/s)")
        for name in engines:
            t = med[f"{what}_{name}"]
            print(f"{'':<18}{name:>11} {t:>7.2f} s ({size / t:,.0f} MB/s)  {t / one:.2f}x")
    for name, engine in engines.items():
        print(f"start-up {name} (not in the ratios): {engine['start']:.2f} s + warm "
              f"{engine['warm']:.2f} s")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _engines(args, work, tok, files) -> dict:
    """``{name: {module, kw (connection keywords), close, start, warm (seconds)}}``."""
    engines = {}
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        try:
            engines[name] = (_dask if name == "dask" else _ray)(args, work, tok, files)
        except ImportError as exc:
            print(f"{name}: not installed ({exc}), left out")
    return engines


def _dask(args, work, tok, files) -> dict:
    from fastbpe_nb.distributed import dask_engine as de

    t_start, (client, cluster) = timed(lambda: _start(args.workers, work))
    t_warm, _ = timed(lambda: (de.ship_tokenizer(client, tok, de.task_threads(client)),
                               de.count_words(files[:1], client=client)))

    def close():
        client.close()
        cluster.close()

    return {"module": de, "kw": {"client": client}, "close": close, "start": t_start,
            "warm": t_warm}


def _ray(args, work, tok, files) -> dict:
    from fastbpe_nb.distributed import ray_engine as rey

    temp = tempfile.mkdtemp(prefix="fbray-", dir="/tmp")
    t_start, env = timed(lambda: rey.start("local", temp_dir=temp, num_cpus=args.workers))
    t_warm, _ = timed(lambda: (rey.encode_files(tok, files[:1], work / "warm_ray", resume=False),
                               rey.count_words(files[:1])))

    def close():
        rey.stop(env)
        shutil.rmtree(temp, ignore_errors=True)

    return {"module": rey, "kw": {}, "close": close, "start": t_start, "warm": t_warm}


def _start(n_workers, work):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None,
                           local_directory=str(work / "dask-scratch"))
    return Client(cluster), cluster


if __name__ == "__main__":  # Dask's worker processes import this file: guard the run
    sys.exit(main())
