"""BoundlessBPE vs classic BPE at equal vocabulary size: held-out bytes/token, tokens/char
and training time (docs/variants.md, "BoundlessBPE").

    PYTHONPATH=. python benchmarks/compare_boundless.py [--vocab 8192]
        [--corpora /work/shared/corpora] [--code-bytes 8000000] [--repeat 3]

Each corpus is cut into documents of 50 lines (the stdlib: one per file); every tenth
document is held out and measured, the rest is trained on with ``fb.train`` (a warm-up run
first, so compile time is not counted). Training times are the best of ``--repeat`` runs
of each, classic and BoundlessBPE alternating (the machine may be shared: the best run is
the least disturbed one).
"""

from __future__ import annotations

import argparse

import fastbpe_nb as fb
from compare_superbpe import corpus_sets, measure, split, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--corpora", default="/work/shared/corpora")
    ap.add_argument("--code-bytes", type=int, default=8_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sets = corpus_sets(args.corpora, args.code_bytes)
    warm = split(sets[0][1])[0][:50]
    fb.train(warm, vocab_size=300)
    fb.train(warm, vocab_size=300, boundless=True)
    print(f"vocab {args.vocab}; held-out 1/10 of the documents; best of {args.repeat} runs")
    print("| corpus | train MB | bytes/token BPE | Boundless | gain | tokens/char BPE | "
          "Boundless | supermerges | train s BPE | Boundless | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, docs in sets:
        train, held = split(docs)
        mb = sum(len(d.encode("utf-8")) for d in train) / 1e6
        t_classic = t_bound = float("inf")
        for _ in range(args.repeat):
            classic, t = timed(lambda: fb.train(train, vocab_size=args.vocab))
            t_classic = min(t_classic, t)
            bound, t = timed(lambda: fb.train(train, vocab_size=args.vocab, boundless=True))
            t_bound = min(t_bound, t)
        bpt_c, tpc_c = measure(classic, held)
        bpt_b, tpc_b = measure(bound, held)
        print(f"| {name} | {mb:.1f} | {bpt_c:.3f} | {bpt_b:.3f} | {bpt_b / bpt_c - 1:+.1%} | "
              f"{tpc_c:.4f} | {tpc_b:.4f} | {int(bound.model.superword.sum())} | "
              f"{t_classic:.2f} | {t_bound:.2f} | {t_bound / t_classic:.2f} |", flush=True)


if __name__ == "__main__":
    main()
