"""Adversarial and huge texts: fastbpe_nb against tiktoken on the same vocabulary, side by side.

A tokenizer is trained on the first ``--train-mb`` MB of the benchmark corpus and exported to
a ``tiktoken.Encoding`` (same vocabulary, same pattern). Both encode, in one run with the
Numba cache warm: the rest of the corpus as one long document (over 2 MiB: fastbpe_nb's
segmented path), and single huge pre-tokens (random digits, spaces then ``x``, random
letters) of ``--kib`` KiB. Ids must be identical; a peer that raises is reported as such.

    python benchmarks/compare_adversarial.py --kib 1024
"""

from __future__ import annotations

import argparse
import os
import random
import string
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastbpe_nb as fb  # noqa: E402
from bench_data import chunks, corpus_path  # noqa: E402
from compare_training import machine  # noqa: E402


def best_of(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-mb", type=float, default=8)
    p.add_argument("--long-mb", type=float, default=24, help="size of the long document")
    p.add_argument("--kib", type=int, default=1024, help="size of each adversarial text")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--pattern", default="gpt2")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)

    import tiktoken

    train_bytes = int(args.train_mb * 1e6)
    path, what = corpus_path(train_bytes + int(args.long_mb * 1e6))
    raw = path.read_bytes()
    tok = fb.train(chunks(raw[:train_bytes]), vocab_size=args.vocab_size, pattern=args.pattern)
    enc = tiktoken.Encoding(
        name="fastbpe_nb-export", pat_str=fb.NAMED_PATTERNS[args.pattern],
        mergeable_ranks={bytes(t): i for i, t in enumerate(tok.vocab[: tok.n_regular])},
        special_tokens={})
    long_doc = raw[train_bytes:train_bytes + int(args.long_mb * 1e6)].decode("utf-8", "ignore")
    rnd = random.Random(0)
    n = args.kib * 1024
    texts = {
        f"held-out corpus as one document ({len(long_doc.encode()) / 1e6:.1f} MB)": long_doc,
        f"random digits ({args.kib} KiB)": "".join(rnd.choices(string.digits, k=n)),
        f"spaces then x ({args.kib} KiB)": " " * (n - 1) + "x",
        f"random letters ({args.kib} KiB)": "".join(rnd.choices(string.ascii_letters, k=n)),
    }
    print(f"corpus: {what}; trained on {train_bytes / 1e6:.0f} MB, vocab {tok.vocab_size}, "
          f"pattern {args.pattern}; tiktoken {tiktoken.__version__}; machine: {machine()}\n")
    tok.encode_ordinary(long_doc[:100000])  # Numba cache load
    print("| text | fastbpe_nb s | tiktoken s | speed-up | ids |")
    print("|---|---:|---:|---:|---|")
    for name, text in texts.items():
        t_ours, ours = best_of(lambda: tok.encode_ordinary(text), args.repeat)
        try:
            t_tt, theirs = best_of(lambda: enc.encode_ordinary(text), args.repeat)
        except BaseException as exc:  # tiktoken's Rust panics surface as PanicException
            print(f"| {name} | {t_ours:.3f} | raised {type(exc).__name__} | — | — |")
            continue
        same = "identical" if ours == theirs else "**differ**"
        print(f"| {name} | {t_ours:.3f} | {t_tt:.3f} | {t_tt / t_ours:.1f}x | {same} |")
    print(f"\n(best of {args.repeat} runs each, one process, Numba cache warm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
