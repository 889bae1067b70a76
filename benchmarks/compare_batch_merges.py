"""Batched merges (BatchBPE, ``merge_batch=k``) vs exact BPE at equal vocabulary size:
merge-list overlap, held-out bytes/token and training time (docs/variants.md).

    PYTHONPATH=. python benchmarks/compare_batch_merges.py [--vocab 8192] [--k 4 16 64]

Corpora and the held-out split as in compare_superbpe.py.
"""

from __future__ import annotations

import argparse

import fastbpe_nb as fb
from compare_superbpe import corpus_sets, measure, split, timed


def overlap(a, b):
    """Shares of the merges (as byte strings of the tokens made) both lists hold, and
    the length of their common prefix."""
    ta = {a.vocab[i] for i in a.merge_ids.tolist()}
    tb = {b.vocab[i] for i in b.merge_ids.tolist()}
    prefix = 0
    for x, y in zip(a.merges.tolist(), b.merges.tolist()):
        if x != y:
            break
        prefix += 1
    return len(ta & tb) / max(1, len(ta)), prefix


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--corpora", default="/work/shared/corpora")
    ap.add_argument("--code-bytes", type=int, default=8_000_000)
    args = ap.parse_args()
    sets = corpus_sets(args.corpora, args.code_bytes)
    warm = split(sets[0][1])[0][:50]
    for k in [1] + args.k:
        fb.train(warm, vocab_size=300, merge_batch=k)
    print(f"vocab {args.vocab}; held-out 1/10 of the documents")
    print(f"{'corpus':16} {'k':>3} {'B/tok':>7} {'vs exact':>8} {'same tokens':>11} "
          f"{'same prefix':>11} {'merge s':>8} {'total s':>8}")
    for name, docs in sets:
        train, held = split(docs)
        exact, t_exact = timed(lambda: fb.train(train, vocab_size=args.vocab,
                                                return_report=True))
        exact, report = exact
        bpt, _ = measure(exact, held)
        print(f"{name:16} {1:3} {bpt:7.3f} {'':8} {'':11} {'':11} "
              f"{report['seconds_merging']:8.2f} {t_exact:8.2f}")
        for k in args.k:
            (tok, rep), t = timed(lambda: fb.train(train, vocab_size=args.vocab,
                                                   merge_batch=k, return_report=True))
            b, _ = measure(tok, held)
            share, prefix = overlap(exact, tok)
            print(f"{'':16} {k:3} {b:7.3f} {b / bpt - 1:8.2%} {share:11.1%} {prefix:11} "
                  f"{rep['seconds_merging']:8.2f} {t:8.2f}")


if __name__ == "__main__":
    main()
