"""Training speed: fastbpe_nb ``train_files`` against rustbpe, ffbpe, bpeasy, Hugging Face
tokenizers and sentencepiece, side by side in one run, each tool in its own process.

    python benchmarks/compare_training.py --mb 100                 # all tools, 3 runs each
    python benchmarks/compare_training.py --mb 1200 --repeat 1
    python benchmarks/compare_training.py --mb 10 --tools ours,rustbpe,bpeasy --repeat 1
    python benchmarks/compare_training.py --mb 100 --markdown docs/performance.md

Same machine, same corpus file (``bench_data.corpus_path``: the first N MB of the Linux
sources' text files; ``FASTBPE_BENCH_CACHE`` says where it is cached), same vocabulary size,
pattern and byte alphabet, all cores for every tool. Every run is a fresh child process, so
its peak RSS (``VmHWM``, see ``child_main``: interpreter and imports included) is its own;
runs are interleaved (run 1 of every tool, then run 2 ...) and the table shows medians.
The peers read the corpus from the file as a stream of ~1 MB documents cut at safe
boundaries (so they see the same pre-tokens as we do); the reading is inside their time,
as it is inside ours. sentencepiece reads the file itself.

Checks: our merges (``tie_break="ids"``) against bpeasy's, rustbpe's and ffbpe's (all three
break ties on the smallest ``(left_id, right_id)``, as read from their sources: rustbpe's
``MergeJob`` ordering, ffbpe's default ``tie_break="smallest_pair_id"``), and ours
(``tie_break="hf"``) against Hugging Face's; sentencepiece runs its own algorithm (no check).
Phases: ours from the ``train_files`` report (``seconds_counting`` / ``seconds_merging``),
ffbpe timed around its ``WordCounter.add_source`` (counting) and ``BpeTrainer`` (merging);
the other peers train in one call. ``--tools scanner`` times the pre-tokenizer alone over the
same batches (``fastbpe_nb.io.corpus.iter_batches`` + ``fastbpe_nb.pretokenize.piece_offsets``)
beside our counting phase: the issue's goal is counting <= 2x the scanner alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # run as a script: this checkout's fastbpe_nb, not an installed
    sys.path.insert(0, ROOT)  # one (imported by an asv suite: the one asv installed)

#: tool -> label, in table order.
TOOLS = {
    "ours": "fastbpe_nb `train_files` (ids)",
    "ours-hf": "fastbpe_nb `train_files` (hf)",
    "rustbpe": "rustbpe `train_from_iterator`",
    "ffbpe": "ffbpe `WordCounter` + `BpeTrainer`",
    "bpeasy": "bpeasy `train_bpe`",
    "hf": "Hugging Face `BpeTrainer`",
    "sentencepiece": "sentencepiece (BPE)",
    "scanner": "scanner alone (not a trainer)",
}
#: peer -> the fastbpe_nb variant whose merges (and time) it is compared with.
BASELINE = {"rustbpe": "ours", "ffbpe": "ours", "bpeasy": "ours", "hf": "ours-hf",
            "sentencepiece": "ours"}
#: ffbpe's native scanners recognise tiktoken's spelling of the GPT-2 pattern (the same
#: pieces: checked on the Linux corpus); ours (GPT-2's own spelling) goes to its slow regex path.
FFBPE_SPELLING = {"gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""}
#: Passes of the scanner over the corpus in one run (it is short: one pass is noisy).
SCANNER_PASSES = 3
SENTENCEPIECE_OPTIONS = dict(
    model_type="bpe", byte_fallback=True, character_coverage=1.0, max_sentence_length=1 << 20,
    input_sentence_size=0, minloglevel=2, split_digits=False,
    normalization_rule_name="identity", remove_extra_whitespaces=False)


# ---------------------------------------------------------------------------------------
# Child side: one tool, one run. Imports only what the tool needs, so that the child's peak
# RSS is the tool's.

def iter_docs(spec):
    """The corpus as ``str`` documents between the parent's safe cut offsets."""
    bounds = spec["bounds"]
    with open(spec["corpus"], "rb") as f:
        for start, end in zip(bounds, bounds[1:]):
            yield f.read(end - start).decode("utf-8", "replace")


def _rss_mib() -> float:
    """This process's resident set size now (VmRSS), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _ours(spec, tie_break):
    import fastbpe_nb as fb

    from fastbpe_nb import merge_loop

    t0 = time.perf_counter()  # load the cached kernels before the clock starts
    # (The merge loop on two threads too, which the small warm-up table would not take.)
    saved, merge_loop.HALVES_MIN_SYMBOLS = merge_loop.HALVES_MIN_SYMBOLS, 0
    fb.train_files([spec["warm_file"]], vocab_size=300, pattern=spec["pattern"],
                   tie_break=tie_break)
    merge_loop.HALVES_MIN_SYMBOLS = saved
    # A second batch into a counter calls the look-up of the words it holds
    # (``look_up_blocks``: 5-14 ms to load from the cache), which the one batch of the
    # small warm-up file does not.
    from fastbpe_nb.counting import WordCounter

    counter = WordCounter(spec["pattern"])
    for text in ("warm up", "warm up again"):
        counter.add_texts([text])
    warm = time.perf_counter() - t0
    rss_warm = _rss_mib()
    t0 = time.perf_counter()
    tok, report = fb.train_files([spec["corpus"]], vocab_size=spec["vocab_size"],
                                 pattern=spec["pattern"], tie_break=tie_break,
                                 return_report=True)
    seconds = time.perf_counter() - t0
    vocab = tok.vocab
    return {"seconds": seconds, "seconds_counting": report["seconds_counting"],
            "seconds_merging": report["seconds_merging"], "warm_seconds": warm,
            "rss_after_warm_mib": rss_warm,
            "unique_words": report["unique_words"], "tokens": [t.hex() for t in vocab[256:]],
            "pairs": [[vocab[a].hex(), vocab[b].hex()] for a, b in tok.merges.tolist()]}


def run_ours(spec):
    return _ours(spec, "ids")


def run_ours_hf(spec):
    return _ours(spec, "hf")


def run_rustbpe(spec):
    import rustbpe

    tok = rustbpe.Tokenizer()
    t0 = time.perf_counter()
    tok.train_from_iterator(iter_docs(spec), spec["vocab_size"], pattern=spec["pattern_str"])
    seconds = time.perf_counter() - t0
    ranks = sorted(tok.get_mergeable_ranks(), key=lambda kv: kv[1])
    return {"seconds": seconds, "tokens": [bytes(t).hex() for t, _ in ranks[256:]]}


def run_ffbpe(spec):
    import ffbpe

    pattern = FFBPE_SPELLING.get(spec["pattern"], spec["pattern_str"])
    t0 = time.perf_counter()
    counter = ffbpe.PreTokenizer([], pat_str=pattern).word_counter()
    counter.add_source(iter_docs(spec))
    t1 = time.perf_counter()
    unique = counter.len
    trainer = ffbpe.BpeTrainer([])
    trainer.add_word_counter(counter)
    trainer.train(spec["vocab_size"])
    model = trainer.validate_model()
    t2 = time.perf_counter()
    ranks = sorted(model.vocab.items(), key=lambda kv: kv[1])
    return {"seconds": t2 - t0, "seconds_counting": t1 - t0, "seconds_merging": t2 - t1,
            "unique_words": unique, "tokens": [t.hex() for t, _ in ranks[256:]]}


def run_bpeasy(spec):
    import bpeasy

    t0 = time.perf_counter()
    ranks = bpeasy.train_bpe(iter_docs(spec), spec["pattern_str"], 10**6, spec["vocab_size"])
    seconds = time.perf_counter() - t0
    order = sorted(ranks.items(), key=lambda kv: kv[1])
    note = "" if [r for _, r in order] == list(range(len(order))) else \
        "ranks collide (a merge re-created an existing token)"
    return {"seconds": seconds, "tokens": [t.hex() for t, _ in order[256:]], "note": note}


def run_hf(spec):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        # Oniguruma reads {n,m}+ as a repeated interval, not a possessive one.
        pre_tokenizers.Split(Regex(spec["pattern_str"].replace("{1,3}+", "{1,3}")),
                             behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec["vocab_size"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t0 = time.perf_counter()
    hf.train_from_iterator(iter_docs(spec), trainer=trainer)
    seconds = time.perf_counter() - t0
    # GPT-2 byte-to-unicode characters back to bytes (the same table as reference.py's).
    chars = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {b: b for b in chars}
    table.update({b: 256 + n for n, b in enumerate(b for b in range(256) if b not in table)})
    inverse = {chr(c): b for b, c in table.items()}
    to_hex = lambda s: bytes(inverse[c] for c in s).hex()  # noqa: E731
    merges = json.loads(hf.to_str())["model"]["merges"]
    pairs = [[to_hex(x) for x in (m.split(" ") if isinstance(m, str) else m)] for m in merges]
    return {"seconds": seconds, "pairs": pairs}


def run_sentencepiece(spec):
    import sentencepiece as spm

    prefix = os.path.join(spec["work"], f"sp-{os.getpid()}")
    t0 = time.perf_counter()
    spm.SentencePieceTrainer.train(input=spec["corpus"], model_prefix=prefix,
                                   vocab_size=spec["vocab_size"], num_threads=os.cpu_count(),
                                   **SENTENCEPIECE_OPTIONS)
    seconds = time.perf_counter() - t0
    for suffix in (".model", ".vocab"):
        with contextlib.suppress(OSError):
            os.remove(prefix + suffix)
    return {"seconds": seconds}


def run_scanner(spec):
    """The scanner alone over ``iter_batches``' batches, ``SCANNER_PASSES`` passes (medians):
    each batch as it comes (a text file's batch is one document, which the scanner runs on
    one thread) and cut at safe boundaries into 4 documents per core (which all cores can
    scan); ``seconds`` is the faster of the two, the scanner's best on these cores."""
    import numpy as np

    from fastbpe_nb.io.corpus import iter_batches
    from fastbpe_nb.io.text_files import safe_cut
    from fastbpe_nb.pretokenize import piece_offsets

    n = os.cpu_count()

    def cut_up(data):
        """Offsets of ``data`` cut at safe boundaries into 4 documents per core."""
        buf, cuts = data.tobytes(), [0]
        for k in range(1, 4 * n):
            cut = safe_cut(buf, cuts[-1], k * len(buf) // (4 * n))
            if cut > cuts[-1]:
                cuts.append(cut)
        return np.array(cuts + [len(buf)], np.int64)

    # Both the serial and the parallel kernel, loaded on the first batch before any timing.
    t0 = time.perf_counter()
    data, doc_offsets = next(iter_batches([spec["corpus"]]))
    piece_offsets(data, doc_offsets, spec["pattern"], n_threads=n)
    piece_offsets(data, cut_up(data), spec["pattern"], n_threads=n)
    warm = time.perf_counter() - t0
    passes = []
    for _ in range(SCANNER_PASSES):
        as_given = split = reading = 0.0
        n_pieces = n_bytes = 0
        batches = iter_batches([spec["corpus"]])
        while True:
            t0 = time.perf_counter()
            batch = next(batches, None)
            reading += time.perf_counter() - t0
            if batch is None:
                break
            data, doc_offsets = batch
            t0 = time.perf_counter()
            pieces, _ = piece_offsets(data, doc_offsets, spec["pattern"], n_threads=n)
            as_given += time.perf_counter() - t0
            n_pieces += len(pieces) - 1
            n_bytes += len(data)
            cuts = cut_up(data)
            t0 = time.perf_counter()
            piece_offsets(data, cuts, spec["pattern"], n_threads=n)
            split += time.perf_counter() - t0
        passes.append((as_given, split, reading))
    as_given, split, reading = (statistics.median(p[i] for p in passes) for i in range(3))
    return {"seconds": min(as_given, split), "seconds_as_given": as_given,
            "seconds_split": split, "seconds_reading": reading, "warm_seconds": warm,
            "pieces": n_pieces, "bytes": n_bytes, "threads": n}


RUNNERS = {"ours": run_ours, "ours-hf": run_ours_hf, "rustbpe": run_rustbpe,
           "ffbpe": run_ffbpe, "bpeasy": run_bpeasy, "hf": run_hf,
           "sentencepiece": run_sentencepiece, "scanner": run_scanner}


def child_main(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    result = RUNNERS[spec["tool"]](spec)
    from compare_encoders import max_rss_mib  # (stdlib imports only: no RSS of its own)

    # The child's own peak (VmHWM): a child's ru_maxrss from wait4 carries its parent's
    # peak across fork + exec (a 1.2 GB run showed ~900 MiB for a training whose own peak
    # is ~510), and this script's parent grows.
    result["peak_rss_mib"] = max_rss_mib()
    with open(spec["result"], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


# ---------------------------------------------------------------------------------------
# Parent side.

def doc_bounds(path, size: int = 1 << 20) -> list[int]:
    """Offsets of ~``size``-byte documents of ``path``, cut at safe boundaries (no
    pre-token of a named pattern spans one), found without reading the file into memory."""
    import mmap

    from fastbpe_nb.io.text_files import safe_cut

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        n, out = len(m), [0]
        while out[-1] < n:
            start = out[-1]
            if start + size >= n:
                out.append(n)
                break
            cut = safe_cut(m, start, start + size)
            if cut <= start:
                cut = safe_cut(m, start, start + 8 * size)
            out.append(cut if cut > start else n)
    return out


def _limit_memory(n_bytes):
    """A ``preexec_fn`` capping the child's address space (``ulimit -v``) at ``n_bytes``."""
    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (n_bytes, n_bytes))

    return limit


def run_child(tool: str, spec: dict, work: str, run: int, timeout: float,
              script: str = __file__, stdout=None, memory_limit: int | None = None) -> dict:
    """Run one tool once in a fresh process (``script --child SPEC``, which writes its
    result to ``spec["result"]``); the result with ``peak_rss_mib`` (the child's own
    ``VmHWM``) added, or ``{"error": ...}``. The child's output goes to a log file in
    ``work``, or to ``stdout`` when given (e.g. ``sys.stderr``, to see progress bars).
    ``memory_limit`` (bytes) caps the child's address space: a tool that needs more fails
    with its own out-of-memory error instead of pushing the machine into the OOM killer."""
    spec = dict(spec, tool=tool, result=os.path.join(work, f"{tool}-{run}.json"))
    spec_path = os.path.join(work, f"{tool}-{run}.spec.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    log_path = os.path.join(work, f"{tool}-{run}.log")
    with open(log_path, "wb") as log:
        out = log if stdout is None else stdout
        proc = subprocess.Popen([sys.executable, os.path.abspath(script), "--child", spec_path],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                preexec_fn=None if memory_limit is None
                                else _limit_memory(memory_limit))
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                return {"error": f"timed out after {timeout:.0f} s"}
            time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        with open(log_path, "rb") as f:
            tail = f.read()[-1500:].decode("utf-8", "replace").strip().splitlines()[-2:]
        return {"error": f"exit {proc.returncode}: {' / '.join(tail)}"}
    with open(spec["result"], encoding="utf-8") as f:
        result = json.load(f)
    os.remove(spec["result"])
    result.setdefault("peak_rss_mib", usage.ru_maxrss / 1024)  # KiB on Linux
    return result


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


def parse_tools(text: str) -> list[str]:
    tools = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise SystemExit(f"unknown tool(s) {unknown}; choose from {', '.join(TOOLS)}")
    return [t for t in TOOLS if t in tools]  # table order


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--mb", type=float, default=100, help="corpus size (MB, first N of Linux)")
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--pattern", default="gpt2", help="gpt2, cl100k or o200k")
    p.add_argument("--repeat", type=int, default=3, help="runs per tool (medians shown)")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of: "
                   f"{', '.join(TOOLS)} (default: all)")
    p.add_argument("--skip-hf", action="store_true", help="leave out hf and ours-hf")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--memory-limit-gb", type=float,
                   help="cap each run's address space (ulimit -v): a tool that needs more "
                        "fails cleanly instead of calling in the OOM killer")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the report into PATH (e.g. docs/performance.md) between "
                        "<!-- compare_training:begin --> and <!-- compare_training:end -->")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(args.child)
    args.tools = parse_tools(args.tools)
    if args.skip_hf:
        args.tools = [t for t in args.tools if t not in ("hf", "ours-hf")]
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
    """Run every tool ``args.repeat`` times, interleaved, and print the Markdown report."""
    import fastbpe_nb as fb
    from bench_data import corpus_path

    path, what = corpus_path(int(args.mb * 1e6))
    size = os.path.getsize(path)
    bounds = doc_bounds(path)
    # Read the corpus once, so that it is in the page cache for every run: otherwise the
    # first tool's first run read it from disk (a run of ours took 2.4-2.9 s instead of 0.9).
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass
    print(f"corpus: {what}; {size / 1e6:.1f} MB ({len(bounds) - 1} documents of ~1 MB for "
          f"the peers that take an iterator)")
    print(f"machine: {machine()}; vocab {args.vocab_size}, pattern {args.pattern}; "
          f"fastbpe_nb from {os.path.dirname(fb.__file__)}\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="compare-training-") as work:
        warm_file = os.path.join(work, "warm.txt")
        with open(path, "rb") as src, open(warm_file, "wb") as dst:
            dst.write(src.read(200_000).rsplit(b"\n", 1)[0] + b"\n")
        spec = {"corpus": str(path), "bounds": bounds, "vocab_size": args.vocab_size,
                "pattern": args.pattern, "pattern_str": fb.NAMED_PATTERNS.get(args.pattern,
                                                                              args.pattern),
                "warm_file": warm_file, "work": work}
        # Compile (or load from the cache) every kernel once, before anything is timed.
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import fastbpe_nb as fb; fb.train_files([sys.argv[2]], vocab_size=300, "
                        "pattern=sys.argv[3]); fb.train_files([sys.argv[2]], vocab_size=300, "
                        "pattern=sys.argv[3], tie_break='hf')", ROOT, warm_file, args.pattern],
                       check=True, cwd=ROOT)
        warm = time.perf_counter() - t0
        print(f"Numba compile / cache warm-up in a fresh process (excluded below): {warm:.1f} s\n",
              flush=True)
        results: dict[str, list[dict]] = {t: [] for t in args.tools}
        for r in range(args.repeat):
            for tool in args.tools:
                res = run_child(tool, spec, work, r, args.timeout, memory_limit=None
                                if args.memory_limit_gb is None else int(args.memory_limit_gb * 2**30))
                results[tool].append(res)
                shown = res.get("error") or f"{res['seconds']:.1f} s, {res['peak_rss_mib']:.0f} MiB"
                print(f"  run {r + 1}/{args.repeat} {tool}: {shown}", file=sys.stderr, flush=True)
    report(args, results, size)
    return 0


def _median(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def merge_check(tool: str, results) -> str:
    """Whether ``tool``'s merges equal those of its fastbpe_nb baseline (first runs)."""
    if tool == "sentencepiece":
        return "own algorithm: no check"
    base = BASELINE.get(tool)
    mine = next((r for r in results.get(tool, []) if "error" not in r), None)
    ours = next((r for r in results.get(base, []) if "error" not in r), None)
    if mine is None:
        return "—"
    if ours is None:
        return f"not checked (run {base} too)"
    key = "pairs" if tool == "hf" else "tokens"
    a, b = ours[key], mine[key]
    rule = "hf" if tool == "hf" else "ids"
    note = f"; {mine['note']}" if mine.get("note") else ""
    if a == b:
        return f"identical to ours ({rule}), {len(a):,} merges{note}"
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"DIFFER from rank {256 + k} ({len(a):,} vs {len(b):,} merges){note}"


def report(args, results, size) -> None:
    fmt = lambda x, spec=".1f": "—" if x is None else format(x, spec)  # noqa: E731
    trainers = [t for t in args.tools if t != "scanner"]
    print(f"Each run a fresh process; medians of {args.repeat}; peak RSS = max over runs of "
          "the process's own VmHWM (interpreter, imports and the streamed corpus included).\n")
    print("| trainer | median s | runs (s) | peak RSS MiB | fastbpe_nb / peer | counting s | "
          "merging s | unique words | merges |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    for tool in trainers:
        runs = results[tool]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            print(f"| {TOOLS[tool]} | failed | {runs[0]['error']} | | | | | | |")
            continue
        t = _median(ok, "seconds")
        base = BASELINE.get(tool)
        base_t = _median([r for r in results.get(base, []) if "error" not in r], "seconds") \
            if base else None
        ratio = "1" if tool.startswith("ours") else (f"{base_t / t:.2f}" if base_t else "—")
        unique = _median(ok, "unique_words")
        times = ", ".join(f"{r['seconds']:.1f}" for r in ok)
        print(f"| {TOOLS[tool]} | {t:.2f} | {times} | "
              f"{max(r['peak_rss_mib'] for r in ok):.0f} | {ratio} | "
              f"{fmt(_median(ok, 'seconds_counting'), '.2f')} | "
              f"{fmt(_median(ok, 'seconds_merging'), '.2f')} | "
              f"{'—' if unique is None else f'{unique:,}'} | "
              f"{'—' if tool.startswith('ours') else merge_check(tool, results)} |")
    print("\nfastbpe_nb / peer: our median time over the peer's (below 1: ours is faster); "
          "against Hugging Face the `hf` variant is ours.")
    warms = [r["warm_seconds"] for t in ("ours", "ours-hf") for r in results.get(t, [])
             if "warm_seconds" in r]
    if warms:
        base_rss = [r["rss_after_warm_mib"] for t in ("ours", "ours-hf")
                    for r in results.get(t, []) if "rss_after_warm_mib" in r]
        print(f"Numba cache load (and a 200 KB warm-up training) in each fresh fastbpe_nb "
              f"process, excluded above: median {statistics.median(warms):.2f} s; RSS after it "
              f"(NumPy, Numba, llvmlite, the loaded kernels): {statistics.median(base_rss):.0f} MiB.")
    if "scanner" in results:
        ok = [r for r in results["scanner"] if "error" not in r]
        if not ok:
            print(f"\nscanner alone: failed: {results['scanner'][0]['error']}")
            return
        scan = _median(ok, "seconds")
        counting = _median([r for r in results.get("ours", []) if "error" not in r],
                           "seconds_counting")
        mb = size / 1e6
        print(f"\n### Counting against the scanner alone ({ok[0]['threads']} threads, "
              f"{ok[0]['pieces']:,} pre-tokens; scanner: medians of {SCANNER_PASSES} passes "
              f"per run, then of the runs)\n")
        print("| what | median s | MB/s | counting / this |")
        print("|---|---:|---:|---:|")
        rows = [("scanner alone, the faster of the next two (per run)", scan),
                ("scanner alone, batches cut into 4 documents per core (all cores)",
                 _median(ok, "seconds_split")),
                ("scanner alone, `iter_batches`' batches as given (one document each)",
                 _median(ok, "seconds_as_given")),
                ("reading the batches alone (`iter_batches`)", _median(ok, "seconds_reading"))]
        if counting is not None:
            rows.append(("fastbpe_nb counting phase (`train_files`, ids)", counting))
        for name, t in rows:
            ratio = f"{counting / t:.2f}" if counting is not None and t else "—"
            print(f"| {name} | {t:.2f} | {mb / t:.0f} | {ratio} |")
        if counting is not None:
            verdict = "met" if counting <= 2 * scan else "NOT met"
            print(f"\nGoal \"counting <= 2x the scanner alone, same bytes, same cores\": "
                  f"{counting:.2f} s vs 2 x {scan:.2f} s: {verdict}.")


if __name__ == "__main__":
    sys.exit(main())
