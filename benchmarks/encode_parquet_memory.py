"""Peak memory and throughput of ``fastbpe encode`` on a large Parquet dataset.

Builds (once, cached under .asv/data) a Parquet dataset of real text: the Linux kernel
sources from Debian's linux-source package (one row per source file, 4 files of row
groups of 2,000 rows), or the stdlib sources repeated when that package is absent. Then it
runs the CLI in a child process and reports the child's peak RSS (``ru_maxrss``), the time,
and the throughput, and checks a sample of rows against ``Tokenizer.encode``.

    python benchmarks/encode_parquet_memory.py --mb 500
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastbpe_nb as fb  # noqa: E402
from bench_data import CACHE, TEXT_SUFFIXES, linux_tarball  # noqa: E402
from fastbpe_nb.corpus import stdlib_texts  # noqa: E402


def source_texts(n_bytes):
    tarball = linux_tarball()
    total = 0
    if tarball:
        with tarfile.open(tarball, "r:xz") as tar:
            for member in tar:
                if member.isfile() and member.name.endswith(TEXT_SUFFIXES):
                    text = tar.extractfile(member).read().decode("utf-8", "replace")
                    total += len(text)
                    yield text
                    if total >= n_bytes:
                        return
    while total < n_bytes:
        for text in stdlib_texts():
            total += len(text)
            yield text
            if total >= n_bytes:
                return


def build_dataset(n_bytes: int, n_files: int = 4):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = CACHE / f"parquet-{n_bytes}"
    if (folder / "done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    per_file = n_bytes // n_files
    texts, size, index = [], 0, 0
    writer = None
    for text in source_texts(n_bytes):
        texts.append(text)
        size += len(text)
        if len(texts) == 2000 or size >= per_file:
            table = pa.table({"text": pa.array(texts, pa.large_string())})
            if writer is None:
                writer = pq.ParquetWriter(folder / f"part-{index}.parquet", table.schema)
            writer.write_table(table)
            texts = []
            if size >= per_file:
                writer.close()
                writer, size, index = None, 0, index + 1
    if texts:
        table = pa.table({"text": pa.array(texts, pa.large_string())})
        if writer is None:
            writer = pq.ParquetWriter(folder / f"part-{index}.parquet", table.schema)
        writer.write_table(table)
    if writer is not None:
        writer.close()
    (folder / "done").write_text("ok")
    return folder


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=500)
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--format", default="parquet", choices=["parquet", "bin"])
    args = p.parse_args(argv)
    import pyarrow.parquet as pq

    folder = build_dataset(int(args.mb * 1e6))
    files = sorted(str(f) for f in folder.glob("*.parquet"))
    n_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    model = CACHE / f"encode-model-{args.vocab_size}.json"
    if not model.exists():
        sample = pq.read_table(files[0]).column("text").to_pylist()[:3000]
        fb.train(sample, vocab_size=args.vocab_size, special_tokens=["<|endoftext|>"]).save(model)
    out = CACHE / f"encoded-{args.format}"
    for f in out.glob("*") if out.exists() else []:
        f.unlink()
    cmd = [sys.executable, "-m", "fastbpe_nb", "encode", "--model", str(model), *files, "-o",
           str(out), "--format", args.format, "--special", "text", "-q"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    text_bytes = sum(pq.ParquetFile(f).metadata.row_group(i).column(0).total_uncompressed_size
                     for f in files for i in range(pq.ParquetFile(f).metadata.num_row_groups))
    print(f"dataset: {len(files)} Parquet files, {n_rows:,} rows, ~{text_bytes / 1e6:.0f} MB of "
          f"text (uncompressed column size)")
    print(f"fastbpe encode ({args.format}): {seconds:.1f} s (incl. start-up and Numba cache load), "
          f"peak RSS {peak / 2**20:.0f} MiB")
    if args.format == "parquet":
        tok = fb.load(model)
        first = pq.read_table(files[0]).column("text").to_pylist()[:200]
        got = pq.read_table(out / os.path.basename(files[0])).column("ids").to_pylist()[:200]
        assert got == [tok.encode_ordinary(t) for t in first], "rows differ from Tokenizer.encode"
        print("first 200 rows equal Tokenizer.encode_ordinary row by row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
