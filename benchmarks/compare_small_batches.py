"""Many small batches, as ``datasets.map(batched=True)`` sends them: per-call cost.

A loop of ``encode_batch`` calls on batches of KJV lines (100 and 1,000 lines a call;
``datasets``' default batch is 1,000), cl100k_base, two threads, every tool in this one
process: ours as lists (``encode_batch``) and flat (``encode_batch_flat``: ids and
offsets, what quicktok returns), tiktoken's ``encode_ordinary_batch`` and quicktok-v1's
``encode_batch`` (each skipped if not installed). Each tool runs in a process of its own
(a tool's threads would otherwise pay for another's: a thread that ends unwinds through
every frame table Numba registered). Medians of ``--repeat`` passes over 40,000 lines after
one untimed pass; ids checked equal to ours (a hash of all of them).

    python benchmarks/compare_small_batches.py [--repeat 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_encoders import VOCABS, load_ours, rank_file  # noqa: E402

KJV = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "kjv.txt"


TOOLS = ["fastbpe_nb (lists)", "fastbpe_nb (flat)", "tiktoken", "quicktok-v1"]


def tools(threads: int) -> dict:
    import fastbpe_nb as fb

    ours, _ = load_ours("cl100k")  # cl100k_base from the bpe-openai wheel
    out = {"fastbpe_nb (lists)": lambda b: ours.encode_batch(b, num_threads=threads),
           "fastbpe_nb (flat)": lambda b: ours.encode_batch_flat(b, num_threads=threads)[:2]}
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        enc = tiktoken.Encoding("cl100k_base", pat_str=fb.NAMED_PATTERNS["cl100k"],
                                mergeable_ranks=load_tiktoken_bpe(str(rank_file("cl100k")[0])),
                                special_tokens=VOCABS["cl100k"]["specials"])
        out["tiktoken"] = lambda b: enc.encode_ordinary_batch(b, num_threads=threads)
    except ImportError:
        pass
    try:
        import quicktok

        qt = quicktok.get_encoding("cl100k_base")
        out["quicktok-v1"] = lambda b: qt.encode_batch(b, threads=threads)
    except ImportError:
        pass
    return out


def as_lists(result) -> list[list[int]]:
    if isinstance(result, tuple):  # (flat ids, offsets)
        ids, offsets = result
        return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]
    return [list(map(int, r)) for r in result]


def run_tool(name: str, threads: int, repeat: int, lines: list[str]) -> list[dict]:
    """This process: one tool, both batch sizes."""
    fn = tools(threads).get(name)
    if fn is None:
        return []
    rows = []
    for size in (100, 1000):
        batches = [lines[i:i + size] for i in range(0, len(lines), size)]
        got = [fn(b) for b in batches]  # untimed pass (caches, compile)
        digest = hashlib.sha256(json.dumps([d for r in got for d in as_lists(r)]).encode())
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for b in batches:
                fn(b)
            times.append(time.perf_counter() - t0)
        rows.append({"tool": name, "size": size, "calls": len(batches),
                     "seconds": statistics.median(times), "ids": digest.hexdigest()})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tool", help="(internal) run one tool in this process")
    args = parser.parse_args()
    lines = KJV.read_text(encoding="utf-8").splitlines()[:40000]
    if args.tool:
        print(json.dumps(run_tool(args.tool, args.threads, args.repeat, lines)))
        return 0
    mb = sum(len(line.encode()) for line in lines) / 1e6
    rows = []
    for name in TOOLS:
        out = subprocess.run([sys.executable, __file__, "--tool", name, "--threads",
                              str(args.threads), "--repeat", str(args.repeat)],
                             capture_output=True, text=True, check=True)
        rows += json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{len(lines):,} KJV lines, {mb:.2f} MB, cl100k_base, {args.threads} threads, "
          f"median of {args.repeat}, each tool in its own process\n")
    print("| tool | lines a call | calls | us a call | MB/s | ids as ours |")
    print("|---|---:|---:|---:|---:|---|")
    for size in (100, 1000):
        want = next(r["ids"] for r in rows if r["size"] == size)
        for r in (r for r in rows if r["size"] == size):
            print(f"| {r['tool']} | {size:,} | {r['calls']} | "
                  f"{r['seconds'] / r['calls'] * 1e6:,.0f} | {mb / r['seconds']:.1f} | "
                  f"{'yes' if r['ids'] == want else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
