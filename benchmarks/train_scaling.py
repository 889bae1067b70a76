"""Training at scale: ``fastbpe_nb.train_files`` on the first 1, 2, 5 and 10 GB of the big corpus.

    python benchmarks/build_big_corpus.py --out /work/wt/data/big10g     # once (~3 min)
    python benchmarks/train_scaling.py --corpus /work/wt/data/big10g     # 1, 2, 5, 10 GB
    python benchmarks/train_scaling.py --corpus DIR --sizes 0.1,0.2      # a quick check
    python benchmarks/train_scaling.py --corpus DIR --progress           # show the bars
    python benchmarks/train_scaling.py --corpus DIR --markdown docs/performance.md

The corpus is the folder ``build_big_corpus.py`` writes (``part-000.txt`` ...; default
``$FASTBPE_BENCH_CACHE/big``). A size is a prefix of the files in order: whole files, and
when the size ends inside a file, that file's first bytes up to the last safe boundary
(copied to a temporary file under ``--work``). Every size trains in a fresh process (the
Numba kernels loaded on a 200 KB file first, outside the timing), so its peak RSS
(``VmHWM``) is its own. Prints a Markdown table: unique words, counting and merging
time, time and peak RSS per GB, counting MB/s and merges/s.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_training import ROOT, _rss_mib, machine, run_child  # noqa: E402

if __name__ == "__main__":
    sys.path.insert(0, ROOT)  # this checkout's fastbpe_nb, not an installed one

COPY_BLOCK = 64 << 20


def corpus_files(folder: str) -> list[str]:
    """The corpus's files in order: the manifest's, else ``part-*.txt`` sorted."""
    manifest = os.path.join(folder, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            names = [e["name"] for e in json.load(f)["files"]]
        files = [os.path.join(folder, n) for n in names]
    else:
        files = sorted(glob.glob(os.path.join(folder, "part-*.txt")))
    missing = [f for f in files if not os.path.exists(f)]
    if not files or missing:
        raise SystemExit(f"{folder}: no corpus files ({missing[:1] or 'none found'}); build it "
                         "with benchmarks/build_big_corpus.py --out " + folder)
    return files


def write_prefix(src: str, n_bytes: int, dst: str) -> int:
    """Copy the first bytes of ``src`` up to the last safe boundary at or before ``n_bytes``
    (streamed); returns the bytes written."""
    from fastbpe_nb.io.text_files import safe_cut

    written = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while written < n_bytes:
            block = fin.read(min(COPY_BLOCK, n_bytes - written))
            if not block:
                break
            if written + len(block) >= n_bytes:  # the last block: end at a safe boundary
                tail = block + fin.read(4)  # safe_cut looks at the character after a newline
                cut = safe_cut(tail, 0, len(block))
                block = block[:cut] if cut > 0 else block[:block.rfind(b"\n") + 1]
                fout.write(block)
                written += len(block)
                break
            fout.write(block)
            written += len(block)
    return written


def prefix_paths(files: list[str], n_bytes: int, work: str) -> tuple[list[str], int]:
    """Paths holding the first ``n_bytes`` of ``files`` (whole files, then a partial copy)."""
    paths, total = [], 0
    for f in files:
        size = os.path.getsize(f)
        if total + size <= n_bytes * 1.001:  # files are cut a little under their nominal size
            paths.append(f)
            total += size
            continue
        need = n_bytes - total
        if need > 0.001 * n_bytes:
            dst = os.path.join(work, f"prefix-{n_bytes}-{os.path.basename(f)}")
            total += write_prefix(f, need, dst)
            paths.append(dst)
        break
    return paths, total


def child_main(spec_path: str) -> int:
    """One size in this process: warm the kernels, then time ``train_files``."""
    import fastbpe_nb as fb

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    from fastbpe_nb import merge_loop

    t0 = time.perf_counter()
    # The run's vocabulary size (the kernels' symbol type follows it) and the two-thread
    # merge loop (which the small warm-up table would not take): those kernels load here.
    saved, merge_loop.HALVES_MIN_SYMBOLS = merge_loop.HALVES_MIN_SYMBOLS, 0
    fb.train_files([spec["warm_file"]], vocab_size=spec["vocab_size"], pattern=spec["pattern"])
    merge_loop.HALVES_MIN_SYMBOLS = saved
    warm = time.perf_counter() - t0
    rss_warm = _rss_mib()
    t0 = time.perf_counter()
    tok, report = fb.train_files(spec["paths"], vocab_size=spec["vocab_size"],
                                 pattern=spec["pattern"], progress=spec["progress"],
                                 return_report=True)
    seconds = time.perf_counter() - t0
    result = {"seconds": seconds, "warm_seconds": warm, "rss_after_warm_mib": rss_warm,
              "vocab": len(tok.vocab),
              **{k: report[k] for k in ("seconds_counting", "seconds_merging", "unique_words",
                                        "pre_tokens", "merges", "bytes_read", "peak_rss_bytes")}}
    from compare_encoders import max_rss_mib

    result["peak_rss_mib"] = max_rss_mib()  # VmHWM: see compare_training.child_main
    with open(spec["result"], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


def main(argv=None) -> int:
    from bench_data import CACHE

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--corpus", default=str(CACHE / "big"), help="build_big_corpus.py's folder")
    p.add_argument("--sizes", default="1,2,5,10", help="GB (10^9 bytes), comma-separated")
    p.add_argument("--vocab-size", type=int, default=65536)
    p.add_argument("--pattern", default="gpt2")
    p.add_argument("--progress", action="store_true",
                   help="train_files(progress=True): the child's bars go to stderr")
    p.add_argument("--work", help="folder for partial-file copies (default: a temporary one)")
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds per size")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the report into PATH between <!-- train_scaling:begin --> "
                        "and <!-- train_scaling:end -->")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(args.child)
    try:
        sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--sizes: expected numbers of GB, got {args.sizes!r}") from None
    if not sizes or min(sizes) <= 0:
        raise SystemExit("--sizes: give one or more positive sizes in GB")
    if not args.markdown:
        return run(args, sizes)
    from markdown_report import Tee, check_section, provenance, write_section

    check_section(args.markdown, "train_scaling")
    header = provenance(["benchmarks/train_scaling.py", *(sys.argv[1:] if argv is None else argv)])
    tee = Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = run(args, sizes)
    write_section(args.markdown, "train_scaling", header + "\n\n" + tee.getvalue())
    print(f"report written to {args.markdown}", file=sys.stderr)
    return status


def describe_corpus(folder: str, files: list[str]) -> str:
    total = sum(os.path.getsize(f) for f in files)
    text = f"{folder}: {len(files)} files, {total / 1e9:.2f} GB"
    manifest = os.path.join(folder, "manifest.json")
    if os.path.exists(manifest):
        from build_big_corpus import describe

        with open(manifest, encoding="utf-8") as f:
            text += "\n\n" + "\n".join(f"- {line}" for line in describe(json.load(f)).splitlines())
    return text


def run(args, sizes) -> int:
    files = corpus_files(args.corpus)
    available = sum(os.path.getsize(f) for f in files)
    too_big = [s for s in sizes if s * 1e9 > available * 1.001]
    if too_big:
        raise SystemExit(f"{args.corpus} holds {available / 1e9:.2f} GB, not {max(too_big)} GB")
    print(f"corpus: {describe_corpus(args.corpus, files)}\n")
    print(f"machine: {machine()}; vocab {args.vocab_size}, pattern {args.pattern}; each size "
          "a fresh process (Numba kernels loaded first, outside the timing)\n", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-scaling-", dir=args.work) as work:
        warm_file = os.path.join(work, "warm.txt")
        write_prefix(files[0], 200_000, warm_file)
        for i, gb in enumerate(sizes):
            paths, n_bytes = prefix_paths(files, int(gb * 1e9), work)
            spec = {"paths": paths, "vocab_size": args.vocab_size, "pattern": args.pattern,
                    "progress": args.progress, "warm_file": warm_file}
            print(f"  {gb:g} GB: {len(paths)} file(s), {n_bytes:,} bytes ...", file=sys.stderr,
                  flush=True)
            res = run_child("size", spec, work, i, args.timeout, script=__file__,
                            stdout=sys.stderr if args.progress else None)
            for p in paths:  # partial copies are only needed for their own size
                if p.startswith(work):
                    os.remove(p)
            rows.append((gb, len(paths), n_bytes, res))
            shown = res.get("error") or f"{res['seconds']:.1f} s, {res['peak_rss_mib']:.0f} MiB"
            print(f"  {gb:g} GB: {shown}", file=sys.stderr, flush=True)
    print("| GB | files | unique words | counting s | merging s | total s | s per GB | "
          "peak RSS MiB | MiB per GB | counting MB/s | merges/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for gb, n_files, n_bytes, res in rows:
        if "error" in res:
            print(f"| {gb:g} | {n_files} | failed: {res['error']} | | | | | | | | |")
            continue
        real_gb = n_bytes / 1e9
        print(f"| {real_gb:.2f} | {n_files} | {res['unique_words']:,} | "
              f"{res['seconds_counting']:.1f} | {res['seconds_merging']:.1f} | "
              f"{res['seconds']:.1f} | {res['seconds'] / real_gb:.1f} | "
              f"{res['peak_rss_mib']:.0f} | {res['peak_rss_mib'] / real_gb:.0f} | "
              f"{n_bytes / 1e6 / res['seconds_counting']:.1f} | "
              f"{res['merges'] / res['seconds_merging']:,.0f} |")
    ok = [r for *_, r in rows if "warm_seconds" in r]
    if ok:
        warms = [r["warm_seconds"] for r in ok]
        base = [r["rss_after_warm_mib"] for r in ok]
        print(f"\nNumba cache load + a 200 KB warm-up training per process (excluded): "
              f"{min(warms):.1f}-{max(warms):.1f} s. Peak RSS includes the interpreter and the "
              f"loaded kernels: {min(base):.0f}-{max(base):.0f} MiB after the warm-up.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
