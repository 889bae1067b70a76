"""The merge phase alone: fastbpe_nb's merge loop against ffbpe's (and bpeasy's) on one table.

Loads a word-count table written by ``fastbpe count`` and learns ``--vocab-size`` tokens
from it with each trainer, interleaved, ``--repeat`` times, in this one process:

* fastbpe_nb: ``merge_loop.run_merge_kernel`` on the table (tie rule ``ids``), i.e. the
  pair count, the word index and every merge; the table's conversion to int32 symbols is
  not timed (``train_files`` does it before merging).
* ffbpe: ``BpeTrainer.add_words`` with the same (word, count) rows, not timed (it is the
  table's hand-over, like our load), then ``init_training()`` + ``train()`` timed: ffbpe's
  own pair count, index and merges. Its merges are checked equal to ours.
* bpeasy (``--bpeasy``): it trains only from documents, counting them itself, so its merge
  phase cannot be timed alone. Its memory is measured on documents that are the table's
  unique words, each once (so it counts exactly the table's words, with count 1); ours is
  measured on that same all-ones table too.

Per run: wall seconds, CPU seconds of the process (all threads) and the peak RSS the run
added (VmHWM reset before it, Linux), per unique word. Medians are printed as Markdown.

    python benchmarks/compare_merge_loop.py --counts linux1200M.counts.arrow --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fastbpe_nb.io.counts_file import load_counts  # noqa: E402
from fastbpe_nb.merge_loop import UNLIMITED, run_merge_kernel  # noqa: E402


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


def our_merges(data, offsets, counts, vocab_size):
    """Our merge phase on the table: the merges as byte strings in rank order."""
    symbols = data.astype(np.int32)
    base = [bytes([b]) for b in range(256)]

    def run():
        return run_merge_kernel(symbols, offsets, counts, base, np.arange(256, dtype=np.int64),
                                0, UNLIMITED, vocab_size, 1, UNLIMITED)

    (merges, _, _), wall, cpu, peak = measured(run)
    tokens = base[:]
    for a, b in merges.tolist():
        tokens.append(tokens[a] + tokens[b])
    return tokens[256:], wall, cpu, peak


def ffbpe_merges(words, vocab_size):
    """ffbpe's merge phase on the (word, count) rows: its tokens past the 256 bytes."""
    import ffbpe

    trainer = ffbpe.BpeTrainer([], unit="byte")
    trainer.add_words(words)

    def run():
        trainer.init_training()
        trainer.train(vocab_size)

    _, wall, cpu, peak = measured(run)
    vocab = trainer.vocab
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])][256:], wall, cpu, peak


def bpeasy_memory(texts, vocab_size):
    """bpeasy trained on ``texts`` (the unique words, each a document): its peak added."""
    import bpeasy

    from fastbpe_nb.pretokenize import NAMED_PATTERNS

    def run():
        return bpeasy.train_bpe(iter(texts), NAMED_PATTERNS["gpt2"], 10**6, vocab_size)

    _, wall, cpu, peak = measured(run)
    return wall, cpu, peak


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--counts", required=True, help="an Arrow counts file (fastbpe count)")
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-ffbpe", action="store_true")
    p.add_argument("--bpeasy", action="store_true", help="also bpeasy's memory (see above)")
    args = p.parse_args(argv)

    data, offsets, counts, meta = load_counts(args.counts)
    n_words = len(counts)
    print(f"table: {args.counts}: {n_words:,} unique words, {int(offsets[-1]):,} bytes, "
          f"pattern {meta.get('pattern')!r}; vocab {args.vocab_size}; {os.cpu_count()} cores")
    words, bad = table_words(data, offsets, counts)
    if bad:
        print(f"{bad:,} rows are not UTF-8: ffbpe gets the other {len(words):,} rows and "
              "its merges are not compared")
    our_merges(data[:64], offsets[:2], counts[:1], 300)  # compile / load the kernel first

    runs = {"fastbpe_nb": [], "ffbpe": []}
    same = None
    for _ in range(args.repeat):
        ours, *m = our_merges(data, offsets, counts, args.vocab_size)
        runs["fastbpe_nb"].append(m)
        if not args.skip_ffbpe:
            theirs, *m = ffbpe_merges(words, args.vocab_size)
            runs["ffbpe"].append(m)
            same = (ours == theirs) if not bad else None
    if same is not None:
        print(f"merges identical to ffbpe's: {same} ({len(ours):,} merges)")
    if args.bpeasy:
        texts = [w for w, _ in words]
        ones = np.ones(n_words, np.int64)
        runs["fastbpe_nb, all counts 1"] = []
        runs["bpeasy, all counts 1 (counting included)"] = []
        for _ in range(max(1, args.repeat // 2)):
            runs["fastbpe_nb, all counts 1"].append(our_merges(data, offsets, ones,
                                                               args.vocab_size)[1:])
            runs["bpeasy, all counts 1 (counting included)"].append(
                bpeasy_memory(texts, args.vocab_size))

    ours_wall = statistics.median(r[0] for r in runs["fastbpe_nb"])
    print("\n| merge phase | median wall s | median CPU s | runs (wall s) | peak MiB "
          "| peak B / unique word | fastbpe_nb / this |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for name, rs in runs.items():
        if not rs:
            continue
        wall = statistics.median(r[0] for r in rs)
        cpu = statistics.median(r[1] for r in rs)
        peak = statistics.median(r[2] for r in rs)
        ratio = f"{ours_wall / wall:.2f}" if name == "ffbpe" else ""
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {', '.join(f'{r[0]:.2f}' for r in rs)} "
              f"| {peak / 2**20:,.0f} | {peak / n_words:,.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
