"""What writing each token format costs over encoding alone (``count_only``).

Encodes one Parquet file (default: the 86 MB of text of ``.asv/data/docs-86000000.parquet``)
with a model (default: cl100k_base from ``.asv/data``, so ids are 32-bit) once per output
format, in one process, in turn, and prints MB/s of text and the overhead over
``count_only=True`` (the same reading and encoding, nothing written).

    python benchmarks/encode_token_formats.py [--input FILE] [--model FILE] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import fastbpe_nb as fb

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", ".asv", "data")
FORMATS = ["count_only", "parquet", "bin", "megatron", "datatrove", "nanogpt", "llmc", "mds",
           "litdata"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", default=os.path.join(DATA, "docs-86000000.parquet"))
    p.add_argument("--model", default=os.path.join(DATA, "cl100k_base.tiktoken"))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--formats", default=",".join(FORMATS))
    args = p.parse_args()
    if args.model.endswith(".tiktoken"):  # cl100k_base: its pattern and <|endoftext|>
        tok = fb.from_tiktoken(args.model, "cl100k", {"<|endoftext|>": 100257})
    else:
        tok = fb.load(args.model)
    fb.encode_parquet(tok, args.input, None, count_only=True)  # warm: kernels, page cache
    times = {f: [] for f in args.formats.split(",")}
    cpu = {f: [] for f in times}  # process CPU seconds: steadier than wall time under load
    tmp = tempfile.mkdtemp(prefix="fmt-bench-")
    try:
        for _ in range(args.rounds):
            for fmt in times:  # interleaved: the machine's load hits every format alike
                out = os.path.join(tmp, fmt)
                t0, c0 = time.perf_counter(), time.process_time()
                rep = fb.encode_parquet(tok, args.input, None if fmt == "count_only" else out,
                                        format="parquet" if fmt == "count_only" else fmt,
                                        count_only=fmt == "count_only")
                times[fmt].append(time.perf_counter() - t0)
                cpu[fmt].append(time.process_time() - c0)
                shutil.rmtree(out, ignore_errors=True)
        n_bytes = rep["bytes"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    def median(xs):
        return sorted(xs)[len(xs) // 2]

    base = median(times["count_only"]) if "count_only" in times else None
    cbase = median(cpu["count_only"]) if "count_only" in cpu else None
    print(f"{args.input}: {n_bytes / 1e6:.1f} MB of text, {rep['tokens']:,} tokens")
    for fmt, ts in times.items():
        t, c = median(ts), median(cpu[fmt])
        extra = (f"  {100 * (t / base - 1):+.0f}% wall, {100 * (c / cbase - 1):+.0f}% CPU over "
                 "count_only" if base else "")
        print(f"{fmt:>10}: {t:6.2f} s  {n_bytes / 1e6 / t:6.1f} MB/s  CPU {c:6.2f} s{extra}")


if __name__ == "__main__":
    main()
