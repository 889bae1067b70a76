"""Vocabulary pruning vs classic BPE: held-out bytes/token, tokens/char, training time and
freed ids (docs/variants.md, "Vocabulary pruning").

    PYTHONPATH=. python benchmarks/compare_pruning.py [--vocab 8192] [--corpora DIR]
        [--rules "ratio=0.1" "min_count=20"]

Each corpus is cut into documents of 50 lines; every tenth document is held out and
measured, the rest is trained on (the split of compare_superbpe.py). For each pruning rule:

* **same training vocab**: classic BPE trained to ``--vocab`` vs the same training with
  pruning (which ends ``removed`` ids smaller), and classic BPE trained straight to the
  pruned tokenizer's final size;
* **same final size**: pruning after training to ``--vocab`` plus the ids it removed there
  (a short search, ``same_final``), so that it ends as close to ``--vocab`` ids as it
  can, vs classic BPE trained to ``--vocab``.

Times are of ``fb.train`` after a warm-up (compile time not counted), best of ``--repeat``
("prune s": the pruning step of the first run, from its report);
encode speed is ``count_tokens`` on the held-out documents, one thread, best of three.
"""

from __future__ import annotations

import argparse

import fastbpe_nb as fb
from compare_superbpe import corpus_sets, split, timed


def measure(tok, held):
    n_tokens = sum(tok.count_tokens(held, num_threads=1))
    n_bytes = sum(len(d.encode("utf-8")) for d in held)
    n_chars = sum(len(d) for d in held)
    best = min(timed(lambda: tok.count_tokens(held, num_threads=1))[1] for _ in range(3))
    return n_bytes / n_tokens, n_tokens / n_chars, n_bytes / best / 1e6


def best_train(train, repeat, **opts):
    """``(tokenizer, best seconds, report)`` of ``repeat`` runs of ``fb.train``."""
    runs = [timed(lambda: fb.train(train, return_report=True, **opts)) for _ in range(repeat)]
    (tok, report), _ = runs[0]
    return tok, min(t for _, t in runs), report


def same_final(train, V, rule, guess, tries=6):
    """``(training vocab, pruned tokenizer)`` whose final size is closest to ``V`` of a
    few trainings (a search: the final size need not grow with the training vocab, and a
    small corpus may have too few frequent tokens to reach ``V`` at all)."""
    lo, hi, v, best = V, None, guess, None
    for _ in range(tries):
        tok = fb.train(train, vocab_size=v, **rule)
        if best is None or abs(tok.vocab_size - V) < abs(best[1].vocab_size - V):
            best = (v, tok)
        if tok.vocab_size == V:
            break
        if tok.vocab_size < V:
            lo = v
            v = v + (V - tok.vocab_size) if hi is None else (v + hi) // 2
        else:
            hi = v
            v = (lo + v) // 2
    return best


def parse_rule(text):
    key, value = text.split("=")
    if key == "min_count":
        return {"prune_min_count": int(value)}
    return {"prune_ratio": float(value)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--corpora", default="/work/shared/corpora")
    ap.add_argument("--rules", nargs="+", default=["ratio=0.1", "min_count=5", "min_count=20"])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    sets = corpus_sets(args.corpora)
    warm = split(sets[0][1])[0][:50]
    fb.train(warm, vocab_size=300, prune_ratio=0.5).count_tokens(warm)
    V = args.vocab
    print(f"vocab {V}; held-out 1/10 of the documents; rules {args.rules}")
    head = (f"{'corpus':12} {'rule':13} {'MB':>4} {'removed':>7} {'final':>6} "
            f"{'B/tok BPE':>9} {'pruned':>7} {'BPE@final':>9} {'tok/ch BPE':>10} {'pruned':>7} "
            f"{'BPE@final':>9} {'s BPE':>6} {'pruned':>6} {'ratio':>5} {'prune s':>7} {'enc MB/s':>8} "
            f"{'pruned':>6} | {'same final: train':>17} {'final':>6} {'B/tok':>6} "
            f"{'tok/ch':>7} {'vs BPE':>7}")
    print(head)
    for name, docs in sets:
        train, held = split(docs)
        mb = sum(len(d.encode("utf-8")) for d in train) / 1e6
        classic, t_c, _ = best_train(train, args.repeat, vocab_size=V)
        bpt_c, tpc_c, enc_c = measure(classic, held)
        for rule_text in args.rules:
            rule = parse_rule(rule_text)
            pruned, t_p, report = best_train(train, args.repeat, vocab_size=V, **rule)
            bpt_p, tpc_p, enc_p = measure(pruned, held)
            at_final = fb.train(train, vocab_size=pruned.vocab_size)
            bpt_f, tpc_f, _ = measure(at_final, held)
            v_train, same = same_final(train, V, rule, V + pruned.n_pruned)
            bpt_s, tpc_s, _ = measure(same, held)
            print(f"{name:12} {rule_text:13} {mb:4.1f} {pruned.n_pruned:7d} "
                  f"{pruned.vocab_size:6d} {bpt_c:9.3f} {bpt_p:7.3f} {bpt_f:9.3f} "
                  f"{tpc_c:10.4f} {tpc_p:7.4f} {tpc_f:9.4f} {t_c:6.2f} {t_p:6.2f} "
                  f"{t_p / t_c:5.2f} {report['pruned']['seconds']:7.3f} {enc_c:8.1f} "
                  f"{enc_p:6.1f} | {v_train:17d} "
                  f"{same.vocab_size:6d} {bpt_s:6.3f} {tpc_s:7.4f} {tpc_s / tpc_c - 1:+7.2%}")


if __name__ == "__main__":
    main()
