"""Peak memory of each phase of ``train_files``, against the budget's estimates.

Writes a corpus of N random 4-12 letter words (nearly all distinct, so the word table is
as large as the corpus: the hard case), then runs the phases of ``train_files`` one by one
in this process, resetting the peak RSS (VmHWM, Linux) before each, and prints what each
added at its peak, per word-table symbol and per unique word, beside
``merge_loop.PHASE_BYTES``. The figures in PHASE_BYTES' comment come from this script.

    python benchmarks/train_memory_phases.py --words 1000000 --vocab-size 5000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "reliability")]


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--words", type=int, default=1_000_000)
    p.add_argument("--vocab-size", type=int, default=5000)
    args = p.parse_args(argv)
    from memory_children import unique_words_corpus

    from fastbpe_nb import training
    from fastbpe_nb.merge_loop import kernel_table, phase_bytes

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "unique.txt")
    unique_words_corpus(path, args.words)
    # Load the kernels first (their compilation is not a phase of training).
    training.train(["warm up the kernels"] * 3, vocab_size=260)
    rows = []

    def phase(name, fn, estimate=None):
        reset_peak()
        before = status("VmRSS")
        t0 = time.perf_counter()
        out = fn()
        rows.append((name, status("VmHWM") - before, time.perf_counter() - t0, estimate))
        return out

    counter, _ = phase("counting", lambda: training.count_files([path], pattern="gpt2"))
    table = phase("word table", counter.table, counter.table_bytes())
    del counter
    n_sym, n_words = int(table[1][-1]), len(table[2])
    symbols, offsets, counts = phase(
        "kernel table", lambda: kernel_table(*table, 256, args.vocab_size, keep_order=False),
        phase_bytes("kernel table", n_sym, n_words))
    table = None  # (the kernel table replaces it)
    opts = training.TrainOptions.make(args.vocab_size)
    report = {}
    phase("merging", lambda: training.train_from_table(symbols, offsets, counts, None, opts, report),
          phase_bytes("merge setup", n_sym, n_words))
    print(f"{n_words:,} unique words, {n_sym:,} symbols ({n_sym / n_words:.1f} B/word), "
          f"{report['merges']:,} merges")
    print(f"{'phase':<14} {'peak +MiB':>10} {'B/symbol':>9} {'B/word':>8} {'seconds':>8}  estimate")
    for name, added, seconds, estimate in rows:
        est = "" if estimate is None else f"{estimate / 2**20:,.0f} MiB"
        if name == "merging":
            est += " to start (the kernel checks its growth itself)"
        print(f"{name:<14} {added / 2**20:>10,.0f} {added / n_sym:>9.1f} {added / n_words:>8.1f} "
              f"{seconds:>8.1f}  {est}")
    os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
