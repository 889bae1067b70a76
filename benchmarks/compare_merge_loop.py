"""The merge phase alone: fastbpe_nb's merge loop against ffbpe's (and bpeasy's) on one table.

Loads a word-count table written by ``fastbpe count`` and learns ``--vocab-size`` tokens
from it with each trainer:

* fastbpe_nb: ``merge_loop.run_merge_kernel`` on the table's bytes (tie rule ``ids``):
  their conversion to the kernel's symbols (``symbol_dtype``: 16-bit where the ids fit; a
  fresh copy each run, which the kernel rewrites), the pair count, the word index and
  every merge.
* ffbpe: ``BpeTrainer.add_words`` with the same (word, count) rows, not timed (the table's
  hand-over, like our load), then ``init_training()`` + ``train()`` timed: ffbpe's own
  pair count, index and merges. Its merges are checked equal to ours.
* bpeasy (``--bpeasy``): it trains only from documents, counting them itself, so its merge
  phase cannot be run alone. Its memory is measured on documents that are the table's
  unique words, each once (it counts exactly the table's words, all with count 1), counting
  included; ours is measured on that same all-ones table.

Times: ``--repeat`` runs of ours and ffbpe's, interleaved in this process; wall seconds
and CPU seconds of the process (all threads). Memory: the peak RSS each run added (VmHWM
reset before it, Linux), measured in a fresh child process per trainer (in a process that
already ran, freed memory kept by the allocator would hide part of a later peak), and per
unique word. Medians are printed as Markdown.

    python benchmarks/compare_merge_loop.py --counts linux1200M.counts.arrow --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fastbpe_nb.io.counts_file import load_counts  # noqa: E402
from fastbpe_nb.merge_loop import UNLIMITED, run_merge_kernel  # noqa: E402

TRAINERS = ("fastbpe_nb", "ffbpe", "fastbpe_nb, all counts 1", "bpeasy, all counts 1")


def status(field: str) -> int:
    """A /proc/self/status field in bytes (0 when absent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def measured(fn):
    """``(result, wall s, cpu s, peak bytes added)`` of ``fn()``; VmHWM is reset first."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return out, wall, cpu, max(0, status("VmHWM") - before)


def ours(data, offsets, counts, vocab_size):
    """Our merge phase on the table: (merges as byte strings in rank order, wall, cpu, peak)."""
    base = [bytes([b]) for b in range(256)]

    def run():
        return run_merge_kernel(data, offsets, counts, base, np.arange(256, dtype=np.int64),
                                0, UNLIMITED, vocab_size, 1, UNLIMITED)

    (merges, _, _), wall, cpu, peak = measured(run)
    tokens = base[:]
    for a, b in merges.tolist():
        tokens.append(tokens[a] + tokens[b])
    return tokens[256:], wall, cpu, peak


def ffbpe(words, vocab_size):
    """ffbpe's merge phase on the (word, count) rows: (its tokens past the bytes, ...)."""
    import ffbpe as ff

    trainer = ff.BpeTrainer([], unit="byte")
    trainer.add_words(words)

    def run():
        trainer.init_training()
        trainer.train(vocab_size)

    _, wall, cpu, peak = measured(run)
    vocab = trainer.vocab
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])][256:], wall, cpu, peak


def bpeasy(texts, vocab_size):
    """bpeasy trained on ``texts`` (documents), counting included: (None, wall, cpu, peak)."""
    import bpeasy as bp

    from fastbpe_nb.pretokenize import NAMED_PATTERNS

    def run():
        return bp.train_bpe(iter(texts), NAMED_PATTERNS["gpt2"], 10**6, vocab_size)

    _, wall, cpu, peak = measured(run)
    return None, wall, cpu, peak


def table_words(data, offsets, counts):
    """The rows as (str, count), and how many rows are not UTF-8 (ffbpe takes str)."""
    words, bad = [], 0
    raw = data.tobytes()
    for i in range(len(counts)):
        try:
            words.append((raw[offsets[i]:offsets[i + 1]].decode("utf-8"), int(counts[i])))
        except UnicodeDecodeError:
            bad += 1
    return words, bad


def warm_up():
    """Compile (or load) our kernel on a tiny table, outside every measurement."""
    table = np.frombuffer(b"warm up the kernels", np.uint8)
    ours(table, np.array([0, len(table)], np.int64), np.ones(1, np.int64), 260)


def child(name, args) -> int:
    """One run of one trainer in this fresh process; prints its measures as JSON."""
    data, offsets, counts, _ = load_counts(args.counts)
    if name.startswith("fastbpe_nb"):
        warm_up()
        if name.endswith("1"):
            counts = np.ones(len(counts), np.int64)
        out = ours(data, offsets, counts, args.vocab_size)
    else:
        words, _ = table_words(data, offsets, counts)
        del data, offsets, counts
        if name == "ffbpe":
            out = ffbpe(words, args.vocab_size)
        else:
            out = bpeasy([w for w, _ in words], args.vocab_size)
    print(json.dumps(dict(zip(("wall", "cpu", "peak"), out[1:]))))
    return 0


def memory(name, args):
    """``child(name)`` in a fresh process: its measures, or None when it failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--counts", args.counts,
           "--vocab-size", str(args.vocab_size)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if run.returncode or not lines:
        print(f"{name}: the child failed ({run.returncode}): {run.stderr[-500:]}")
        return None
    return json.loads(lines[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--counts", required=True, help="an Arrow counts file (fastbpe count)")
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-ffbpe", action="store_true")
    p.add_argument("--bpeasy", action="store_true", help="also bpeasy's memory (see above)")
    p.add_argument("--child", choices=TRAINERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args)

    data, offsets, counts, meta = load_counts(args.counts)
    n_words = len(counts)
    print(f"table: {args.counts}: {n_words:,} unique words, {int(offsets[-1]):,} bytes, "
          f"pattern {meta.get('pattern')!r}; vocab {args.vocab_size}; {os.cpu_count()} cores")
    words, bad = table_words(data, offsets, counts)
    if bad:
        print(f"{bad:,} rows are not UTF-8: ffbpe gets the other {len(words):,} rows and "
              "its merges are not compared")
    warm_up()

    times = {"fastbpe_nb": [], "ffbpe": []}
    same = None
    for _ in range(args.repeat):
        our_tokens, *m = ours(data, offsets, counts, args.vocab_size)
        times["fastbpe_nb"].append(m)
        if not args.skip_ffbpe:
            their_tokens, *m = ffbpe(words, args.vocab_size)
            times["ffbpe"].append(m)
            same = (our_tokens == their_tokens) if not bad else None
    if same is not None:
        print(f"merges identical to ffbpe's: {same} ({len(our_tokens):,} merges)")
    del words

    names = [n for n in TRAINERS if (n != "ffbpe" or not args.skip_ffbpe)
             and ("counts 1" not in n or args.bpeasy)]
    peaks = {name: memory(name, args) for name in names}
    ours_wall = statistics.median(r[0] for r in times["fastbpe_nb"])
    print("\n| merge phase | median wall s | median CPU s | runs (wall s) | fastbpe_nb / this "
          "| peak MiB (fresh process) | peak B / unique word |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for name in names:
        rs, peak = times.get(name, []), peaks[name]
        if rs:
            wall = statistics.median(r[0] for r in rs)
            cells = [f"{wall:.2f}", f"{statistics.median(r[1] for r in rs):.2f}",
                     ", ".join(f"{r[0]:.2f}" for r in rs),
                     "1" if name == "fastbpe_nb" else f"{ours_wall / wall:.2f}"]
        elif peak:  # measured once, in its child (bpeasy: counting included)
            cells = [f"{peak['wall']:.2f}", f"{peak['cpu']:.2f}", "1 run", ""]
        else:
            cells = ["", "", "", ""]
        mem = ["failed", ""] if not peak else [f"{peak['peak'] / 2**20:,.0f}",
                                               f"{peak['peak'] / n_words:,.0f}"]
        print(f"| {name} | " + " | ".join(cells + mem) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
