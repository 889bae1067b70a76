"""The pieces a cold pass has to merge, timed by length class (issue 17's cold-cache cost).

A first pass over new text finds most pieces in the vocabulary's tables; the rest (the
distinct pieces that are not one token) are merged. This collects those pieces from one
workload of ``compare_encoders.py`` (``encode_profile.distinct_merged``) and times the
encode kernel on each length class alone, with the persistent piece cache off, one thread,
CPU time, the minimum of ``--repeat`` runs: microseconds per piece and nanoseconds per byte.

    python benchmarks/cold_merge_probe.py cjk --vocab o200k
    PROBE_ROOT=/path/to/other/checkout python benchmarks/cold_merge_probe.py european  # A/B
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.environ.get("PROBE_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_data  # noqa: E402
import compare_encoders  # noqa: E402
import encode_profile  # noqa: E402

CLASSES = [(2, 8), (9, 16), (17, 24), (25, 64), (65, 256), (257, 10**9)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=["code", "european", "cjk"])
    ap.add_argument("--vocab", default="cl100k", choices=["cl100k", "o200k"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    from fastbpe_nb.pretokenize import piece_offsets

    tok, _ = compare_encoders.load_ours(args.vocab)
    raw = open(getattr(bench_data, args.workload + "_path")()[0], "rb").read()
    data = np.frombuffer(raw, np.uint8)
    pieces, doc_pieces = piece_offsets(data, np.array([0, len(data)], np.int64),
                                       tok.level.pattern)
    (merged, offsets, *_), n = encode_profile.distinct_merged(
        tok, [(data, pieces, np.zeros(0, np.int32), doc_pieces)])
    lens = np.diff(offsets)
    print(f"{args.workload}, {args.vocab} (fastbpe_nb from {ROOT}): {n:,} distinct pieces "
          f"merged, {int(lens.sum()):,} bytes; length median {np.median(lens):.0f}, 99th "
          f"percentile {np.percentile(lens, 99):.0f}, max {lens.max()}")
    enc = tok._encoder
    # As in a whole-file pass (a call of BACKTRACK_UNITS or more): a small class alone would
    # not load the backtracking tables and would time the ordinary merge paths instead.
    enc.tables().use_backtracking()
    saved = tok.piece_cache.max_bytes
    tok.piece_cache.max_bytes = 0
    try:
        for lo, hi in CLASSES:
            sel = np.nonzero((lens >= lo) & (lens <= hi))[0]
            if len(sel) == 0:
                continue
            parts = [merged[offsets[i]:offsets[i + 1]] for i in sel]
            units = np.concatenate(parts)
            bounds = np.zeros(len(parts) + 1, np.int64)
            np.cumsum([len(p) for p in parts], out=bounds[1:])
            layout = (units, bounds, np.zeros(0, np.int32), np.array([0, len(parts)], np.int64))
            enc.run(layout, 1)
            times = []
            for _ in range(args.repeat):
                t0 = time.process_time()
                enc.run(layout, 1)
                times.append(time.process_time() - t0)
            best = min(times)
            print(f"  {lo}-{hi if hi < 10**9 else ''} bytes: {len(sel):,} pieces, "
                  f"{len(units):,} bytes, {best * 1e3:.1f} ms, {best / len(sel) * 1e6:.2f} "
                  f"us/piece, {best / len(units) * 1e9:.0f} ns/byte")
    finally:
        tok.piece_cache.max_bytes = saved


if __name__ == "__main__":
    main()
