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
    tmp = tempfile.mkdtemp(prefix="fmt-bench-")
    try:
        for _ in range(args.rounds):
            for fmt in times:  # interleaved: the machine's load hits every format alike
                out = os.path.join(tmp, fmt)
                t0 = time.perf_counter()
                rep = fb.encode_parquet(tok, args.input, None if fmt == "count_only" else out,
                                        format="parquet" if fmt == "count_only" else fmt,
                                        count_only=fmt == "count_only")
                times[fmt].append(time.perf_counter() - t0)
                shutil.rmtree(out, ignore_errors=True)
        n_bytes = rep["bytes"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = sorted(times["count_only"])[len(times["count_only"]) // 2] if "count_only" in times else None
    print(f"{args.input}: {n_bytes / 1e6:.1f} MB of text, {rep['tokens']:,} tokens")
    for fmt, ts in times.items():
        t = sorted(ts)[len(ts) // 2]
        extra = f"  {100 * (t / base - 1):+.0f}% over count_only" if base else ""
        print(f"{fmt:>10}: {t:6.2f} s  {n_bytes / 1e6 / t:6.1f} MB/s{extra}")


if __name__ == "__main__":
    main()
