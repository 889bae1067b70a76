"""One process against a Dask ``LocalCluster`` for counting and encoding Parquet files.

Builds a corpus of ``--files`` Parquet files from ``.asv/data/docs-86000000.parquet``
(Linux sources and prose; its rows repeated to reach ``--count-mb`` of text; generated text
if the file is missing), then times, interleaved and ``--repeats`` times each (medians):

* counting: ``count_files`` (one process, all cores) against ``dask_engine.count_words``
  on ``--workers`` one-thread worker processes (the same counts: checked);
* encoding the first files holding ``--encode-mb`` with cl100k_base (from
  ``.asv/data/cl100k_base.tiktoken``; a small trained model if missing): ``encode_parquet``
  against ``dask_engine.encode_files`` (the same output bytes: checked once).

The cluster's start-up (LocalCluster + Client + warming the kernels on the workers) is
timed separately and not included in the ratios. The machine may be shared: timings are
noisy; compare the medians, and run it on an idle machine for numbers to publish.

    python benchmarks/compare_clusters.py [--count-mb 1200] [--encode-mb 500] [--files 64]
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
    p.add_argument("--work", default=None, help="folder for the corpus and outputs (kept)")
    args = p.parse_args()

    import numpy as np
    from distributed import Client, LocalCluster

    from fastbpe_nb.distributed import core
    from fastbpe_nb.distributed import dask_engine as de
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

    t_start, (client, cluster) = timed(lambda: _start(args.workers, work))
    t_warm, _ = timed(lambda: (de.ship_tokenizer(client, tok, de.task_threads(client)),
                               de.count_words(files[:1], client=client)))
    print(f"start-up: LocalCluster({args.workers} workers) + Client {t_start:.2f} s, "
          f"warming the workers (tokenizer shipped, kernels loaded) {t_warm:.2f} s")

    times = {k: [] for k in ("count_one", "count_dask", "encode_one", "encode_dask")}
    try:
        for r in range(args.repeats):
            t, counter = timed(lambda: count_files(files)[0])
            times["count_one"].append(t)
            t, table = timed(lambda: de.count_words(files, client=client))
            times["count_dask"].append(t)
            if r == 0:
                same = all(np.array_equal(a, b) for a, b in
                           zip(counter.table(), core.table_arrays(table)))
                print(f"counts identical: {same}")
            del counter, table
            for name in ("one", "dask"):
                shutil.rmtree(work / f"out_{name}", ignore_errors=True)
            t, _ = timed(lambda: encode_parquet(tok, enc_files, work / "out_one", special="text"))
            times["encode_one"].append(t)
            t, _ = timed(lambda: de.encode_files(tok, enc_files, work / "out_dask", client=client,
                                                 resume=False, special="text"))
            times["encode_dask"].append(t)
            if r == 0:
                same = all((work / "out_one" / Path(f).name).read_bytes()
                           == (work / "out_dask" / Path(f).name).read_bytes() for f in enc_files)
                print(f"encode outputs identical: {same}")
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                  flush=True)
    finally:
        client.close()
        cluster.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedians of {args.repeats} (seconds)      one process    dask    dask / one")
    for what, size in (("count", mb), ("encode", enc_mb)):
        one, dask = med[f"{what}_one"], med[f"{what}_dask"]
        print(f"{what:<6} {size:>8,.0f} MB            {one:>8.2f}  {dask:>8.2f}    "
              f"{dask / one:.2f}x   ({size / one:,.0f} vs {size / dask:,.0f} MB/s)")
    print(f"start-up (not in the ratios): {t_start:.2f} s + warm {t_warm:.2f} s")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _start(n_workers, work):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None,
                           local_directory=str(work / "dask-scratch"))
    return Client(cluster), cluster


if __name__ == "__main__":  # Dask's worker processes import this file: guard the run
    sys.exit(main())
