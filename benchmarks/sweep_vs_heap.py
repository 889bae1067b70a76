"""One long pre-token merged by the heap and by the windowed rank sweep, kernel alone.

    .venv/bin/python benchmarks/sweep_vs_heap.py [--model tok.json]

The figures in docs/reliability.md (adversarial encoding speed): a gpt2 model of
vocabulary 1,200 (the reliability suite's, trained here when no model is given), pieces of
1 M and 16 M random digits and 16 M spaces; best of 3 each, kernels compiled (and timed
apart) first. Both must give the same ids.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_adversarial import best_of  # noqa: E402
from compare_training import machine  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a model file (default: train the suite's gpt2 model)")
    args = ap.parse_args(argv)

    import fastbpe_nb as fb
    from fastbpe_nb.kernels.encode import _merge_long, _merge_windowed
    from fastbpe_nb.model import SWEEP_MARGIN, SWEEP_WINDOW

    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
            from rel_harness import build_models

            args.model = str(build_models(Path(tmp))["gpt2"])
        tok = fb.load(args.model)
    keys, vals = tok._rank_table()
    head = np.full(tok._sweep_rank_count(), -1, dtype=np.int32)
    sym_map = tok._sym_map

    def heap(units):
        buf = sym_map[units]
        return buf[:_merge_long(buf, len(buf), keys, vals, 0.0, np.ones(1, np.int64),
                                np.empty(len(buf), np.int32))]

    def sweep(units):
        out = np.empty(len(units), dtype=np.int32)
        return out[:_merge_windowed(units, sym_map, 0, len(units), keys, vals, head,
                                    SWEEP_WINDOW, SWEEP_MARGIN, out, 0)]

    tiny = np.frombuffer(b"1234567890" * 100, dtype=np.uint8)
    t0 = time.perf_counter()
    heap(tiny), sweep(tiny)
    print(f"model {args.model}: vocab {tok.vocab_size}; compile/load {time.perf_counter() - t0:.2f} s; "
          f"machine: {machine()}")
    rnd = random.Random(0)
    pieces = {
        "1 M random digits": "".join(rnd.choices("0123456789", k=1 << 20)),
        "16 M random digits": "".join(rnd.choices("0123456789", k=16 << 20)),
        "16 M spaces": " " * (16 << 20),
    }
    print(f"{'piece':20} {'heap s':>8} {'sweep s':>8} {'speed-up':>8}  ids")
    for name, text in pieces.items():
        units = np.frombuffer(text.encode(), dtype=np.uint8)
        t_heap, ids_heap = best_of(lambda: heap(units), 3)
        t_sweep, ids_sweep = best_of(lambda: sweep(units), 3)
        same = "identical" if np.array_equal(ids_heap, ids_sweep) else "DIFFER"
        print(f"{name:20} {t_heap:8.3f} {t_sweep:8.3f} {t_heap / t_sweep:7.1f}x  {same}")


if __name__ == "__main__":
    main()
