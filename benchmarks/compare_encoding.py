"""Encoding speed: fastbpe_nb against tiktoken on the same vocabulary, side by side.

Our tokenizer is trained on part of the corpus and exported to a ``tiktoken.Encoding`` with
the same pattern (``mergeable_ranks`` = our vocabulary), so both encode with the same
vocabulary. Measured in one run, Numba cache warm: one long document on one thread
(``encode`` vs ``encode_ordinary``), and a batch of short documents on all cores
(``encode_batch`` vs ``encode_ordinary_batch``). The ids must be identical.

    python benchmarks/compare_encoding.py --mb 20 --vocab-size 32768
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastbpe_nb as fb  # noqa: E402
from bench_data import chunks, corpus_path  # noqa: E402
from compare_training import machine  # noqa: E402


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def mixed_documents(text: str, n_docs: int, seed: int = 0) -> list[str]:
    """``n_docs`` slices of ``text`` with lengths from 20 bytes to 20 KB (log-uniform)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        length = int(10 ** rng.uniform(1.3, 4.3))
        start = rng.randrange(0, max(1, len(text) - length))
        docs.append(text[start : start + length])
    return docs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=20, help="size of the long document")
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--pattern", default="gpt2")
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)

    import tiktoken

    train_bytes = 30_000_000
    path, what = corpus_path(int(args.mb * 1e6) + train_bytes)
    raw = path.read_bytes()
    train_docs = chunks(raw[:train_bytes])
    tok = fb.train(train_docs, vocab_size=args.vocab_size, pattern=args.pattern)
    held_out = raw[train_bytes:].decode("utf-8", "replace")
    docs = mixed_documents(held_out, args.docs)
    enc = tiktoken.Encoding(
        name="fastbpe_nb-export", pat_str=fb.NAMED_PATTERNS[args.pattern],
        mergeable_ranks={bytes(t): i for i, t in enumerate(tok.vocab[: tok.n_regular])},
        special_tokens={})
    n_batch_bytes = sum(len(d.encode()) for d in docs)
    print(f"corpus: {what}; trained on {train_bytes / 1e6:.0f} MB, vocab {tok.vocab_size}, "
          f"pattern {args.pattern}")
    print(f"long document: {len(held_out.encode()) / 1e6:.1f} MB; batch: {len(docs)} documents, "
          f"{n_batch_bytes / 1e6:.1f} MB")
    print(f"machine: {machine()}\n")

    # Warm-up (Numba cache load / compile) and equality checks.
    t0 = time.perf_counter()
    tok.encode_ordinary(held_out[:10000])
    tok.encode_batch(docs[:100])
    warm = time.perf_counter() - t0
    ours_long = tok.encode_ordinary(held_out)
    theirs_long = enc.encode_ordinary(held_out)
    assert ours_long == theirs_long, "long document: ids differ from tiktoken"
    ours_batch = tok.encode_batch(docs)
    theirs_batch = enc.encode_ordinary_batch(docs, num_threads=os.cpu_count())
    assert ours_batch == theirs_batch, "batch: ids differ from tiktoken"
    print(f"ids identical to tiktoken: long document ({len(ours_long):,} tokens) and all "
          f"{len(docs):,} batch documents\n")

    long_mb = len(held_out.encode()) / 1e6
    rows = []
    t_ours, _ = best_of(lambda: tok.encode_ordinary(held_out), args.repeat)
    t_tt, _ = best_of(lambda: enc.encode_ordinary(held_out), args.repeat)
    rows.append(("one long document, 1 thread", long_mb / t_ours, long_mb / t_tt))
    t_ours_b, _ = best_of(lambda: tok.encode_batch(docs), args.repeat)
    t_tt_b, _ = best_of(lambda: enc.encode_ordinary_batch(docs, num_threads=os.cpu_count()),
                        args.repeat)
    batch_mb = n_batch_bytes / 1e6
    rows.append((f"{len(docs):,} documents, all cores", batch_mb / t_ours_b, batch_mb / t_tt_b))

    print("| workload | fastbpe_nb MB/s | tiktoken MB/s | speed-up |")
    print("|---|---:|---:|---:|")
    for name, ours, theirs in rows:
        print(f"| {name} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}x |")
    print(f"\n(medians of {args.repeat}; first call in this process incl. Numba cache load: "
          f"{warm:.2f} s, excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
