"""Training speed: fastbpe_nb against bpeasy and Hugging Face tokenizers, side by side.

Same machine, same corpus file, same vocabulary size, same pattern and byte alphabet, all
cores for everyone. Prints a Markdown table of medians and ratios, and checks that our
merges equal bpeasy's (tie rule ``ids``) and Hugging Face's (``tie_break="hf"``).

    python benchmarks/compare_training.py --mb 100 --vocab-size 32768 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastbpe_nb as fb  # noqa: E402
from bench_data import chunks, corpus_path  # noqa: E402


def median_time(fn, repeat):
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=100)
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--pattern", default="gpt2")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-hf", action="store_true")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the report into PATH (e.g. docs/performance.md) between "
                        "<!-- compare_training:begin --> and <!-- compare_training:end -->")
    args = p.parse_args(argv)
    if not args.markdown:
        return run(args)
    from markdown_report import Tee, check_section, provenance, write_section

    check_section(args.markdown, "compare_training")  # bad markers fail now, not after the run
    header = provenance(["benchmarks/compare_training.py", *(sys.argv[1:] if argv is None
                                                             else argv)])
    tee = Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = run(args)
    write_section(args.markdown, "compare_training", header + "\n\n" + tee.getvalue())
    print(f"report written to {args.markdown}", file=sys.stderr)
    return status


def run(args) -> int:
    """Train with each tool on the same corpus and print the Markdown report."""
    path, what = corpus_path(int(args.mb * 1e6))
    raw = path.read_bytes()
    docs = chunks(raw)
    pattern = fb.NAMED_PATTERNS[args.pattern]
    print(f"corpus: {what}; {len(raw) / 1e6:.1f} MB in {len(docs)} documents")
    print(f"machine: {machine()}; vocab {args.vocab_size}, pattern {args.pattern}\n")

    # Warm the Numba cache and report the compile (or cache-load) time separately.
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import fastbpe_nb as fb; "
                    "fb.train(['warm up the kernels ' * 50], vocab_size=300)"], check=True)
    warm = time.perf_counter() - t0
    fb.train(["warm up the kernels " * 50], vocab_size=300)

    rows = []
    ours_t, ours_all, (tok, report) = median_time(
        lambda: fb.train_files([path], vocab_size=args.vocab_size, pattern=args.pattern,
                               return_report=True), args.repeat)
    rows.append(("fastbpe_nb `train_files` (ids)", ours_t, ours_all))
    print(f"fastbpe_nb phases: counting {report['seconds_counting']:.1f} s, merging "
          f"{report['seconds_merging']:.1f} s, peak RSS {report['peak_rss_bytes'] / 2**20:.0f} MiB")

    import bpeasy

    bpe_t, bpe_all, vocab = median_time(
        lambda: bpeasy.train_bpe(iter(docs), pattern, 10**6, args.vocab_size), args.repeat)
    rows.append(("bpeasy `train_bpe`", bpe_t, bpe_all))
    theirs = [b for b, _ in sorted(vocab.items(), key=lambda kv: kv[1])][256:]
    ours = tok.vocab[256:]
    same_bpeasy = ours == theirs
    print(f"merges identical to bpeasy's: {same_bpeasy} ({len(ours)} vs {len(theirs)} tokens)")

    hf_t = None
    if not args.skip_hf:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

        hf_pattern = pattern.replace("{1,3}+", "{1,3}")  # Oniguruma reads {n,m}+ differently

        def hf_train():
            hf = Tokenizer(models.BPE())
            hf.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(hf_pattern), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            hf.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, show_progress=False,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            hf.train_from_iterator(docs, trainer=trainer)
            return hf

        hf_t, hf_all, _ = median_time(hf_train, args.repeat)
        rows.append(("Hugging Face `BpeTrainer`", hf_t, hf_all))

    print("\n| trainer | median s | runs (s) | fastbpe_nb / peer |")
    print("|---|---:|---|---:|")
    for name, t, runs in rows:
        ratio = "1" if name.startswith("fastbpe") else f"{ours_t / t:.2f}"
        print(f"| {name} | {t:.2f} | {', '.join(f'{x:.1f}' for x in runs)} | {ratio} |")
    print(f"\nNumba compile / cache load in a fresh process (excluded above): {warm:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
