"""SuperBPE vs classic BPE at equal vocabulary size: held-out bytes/token, tokens/char and
training time (docs/variants.md).

    PYTHONPATH=. python benchmarks/compare_superbpe.py [--vocab 8192] [--transition 6144]
        [--corpora /work/shared/corpora] [--code-bytes 8000000] [--only kjv,python-stdlib]
        [--linux-mb 100]

Each corpus is cut into documents of 50 lines (the stdlib: one per file); every tenth
document is held out and measured, the rest is trained on with ``fb.train`` (one warm-up
run first, so compile time is not counted; training times are the best of 3 runs).
``--linux-mb N`` adds N MB of the Linux sources (``bench_data``: Debian's
``linux-source-6.1``) trained from the file with ``fb.train_files``, as at scale
(training time only: there is no held-out part).
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import fastbpe_nb as fb


def documents(path, lines_per_doc=50):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    return ["".join(lines[i:i + lines_per_doc]) for i in range(0, len(lines), lines_per_doc)]


def split(docs):
    train = [d for i, d in enumerate(docs) if i % 10 != 9]
    held = [d for i, d in enumerate(docs) if i % 10 == 9]
    return train, held


def measure(tok, held):
    n_tokens = sum(tok.count_tokens(held))
    n_bytes = sum(len(d.encode("utf-8")) for d in held)
    n_chars = sum(len(d) for d in held)
    return n_bytes / n_tokens, n_tokens / n_chars


def timed(fn, repeat=3):
    """``fn()``'s result and its best time of ``repeat`` runs (this machine is shared)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def corpus_sets(corpora, code_bytes=None):
    """``[(name, documents)]``: each ``*.txt`` of ``corpora`` in 50-line documents, then
    ``code_bytes`` of this Python's standard-library sources (one document per file)."""
    sets = [(os.path.basename(p)[:-4], documents(p))
            for p in sorted(glob.glob(os.path.join(corpora, "*.txt")))]
    if code_bytes:
        from fastbpe_nb.corpus import stdlib_texts

        sets.append(("python-stdlib", list(stdlib_texts(code_bytes))))
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--transition", type=int, default=6144)
    ap.add_argument("--corpora", default="/work/shared/corpora")
    ap.add_argument("--code-bytes", type=int, default=8_000_000)
    ap.add_argument("--only", help="comma-separated corpus names (default: all)")
    ap.add_argument("--linux-mb", type=int, default=0,
                    help="also train_files on this many MB of the Linux sources")
    args = ap.parse_args()
    sets = corpus_sets(args.corpora, args.code_bytes)
    if args.only:
        sets = [(name, docs) for name, docs in sets if name in args.only.split(",")]
    warm = split(sets[0][1])[0][:50]
    fb.train(warm, vocab_size=300)
    # (Again with stage 2 on two cores, as large stage-2 tables merge: those kernels load.)
    from fastbpe_nb import merge_loop

    saved, merge_loop.HALVES_MIN_SYMBOLS = merge_loop.HALVES_MIN_SYMBOLS, 0
    fb.train(warm, vocab_size=300, superbpe_transition=280)
    merge_loop.HALVES_MIN_SYMBOLS = saved
    print(f"vocab {args.vocab}, transition {args.transition}; held-out 1/10 of the documents")
    print(f"{'corpus':16} {'MB':>5} {'B/tok BPE':>9} {'B/tok Super':>11} {'tok/char BPE':>12} "
          f"{'tok/char Super':>14} {'fewer tokens':>12} {'train s BPE':>11} {'Super':>7} {'ratio':>6}")
    for name, docs in sets:
        train, held = split(docs)
        mb = sum(len(d.encode("utf-8")) for d in train) / 1e6
        classic, t_classic = timed(lambda: fb.train(train, vocab_size=args.vocab))
        superbpe, t_super = timed(lambda: fb.train(train, vocab_size=args.vocab,
                                                   superbpe_transition=args.transition))
        bpt_c, tpc_c = measure(classic, held)
        bpt_s, tpc_s = measure(superbpe, held)
        print(f"{name:16} {mb:5.1f} {bpt_c:9.3f} {bpt_s:11.3f} {tpc_c:12.4f} {tpc_s:14.4f} "
              f"{1 - tpc_s / tpc_c:12.1%} {t_classic:11.3f} {t_super:7.3f} "
              f"{t_super / t_classic:6.2f}")
    if args.linux_mb:
        from bench_data import corpus_path

        path, what = corpus_path(args.linux_mb * 1_000_000)
        path = str(path)
        print(f"train_files on {what}:")
        _, t_classic = timed(lambda: fb.train_files([path], vocab_size=args.vocab))
        _, t_super = timed(lambda: fb.train_files([path], vocab_size=args.vocab,
                                                  superbpe_transition=args.transition))
        print(f"{'linux (files)':16} {args.linux_mb:5d} {'':9} {'':11} {'':12} {'':14} {'':12} "
              f"{t_classic:11.3f} {t_super:7.3f} {t_super / t_classic:6.2f}")


if __name__ == "__main__":
    main()
