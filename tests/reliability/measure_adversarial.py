"""Encoding speed on adversarial text versus prose, through every entry point.

    .venv/bin/python tests/reliability/measure_adversarial.py [--sizes 1 16] [--patterns gpt2 ...]
                                                               [--entries encode_ordinary ...]

For each named pattern (a model trained by rel_harness.build_models: vocab 1200 on prose
plus code-like text), each entry point and each adversarial case, it times the call on
the text at 1 MiB and 16 MiB and on prose of the same length (best of 3 runs at each
size, after a warm-up: the same statistic on both sides of every ratio), and prints:

* ``vs prose``: time per byte of the case / time per byte of prose, at 1 MiB (bound: 5)
* ``16M/1M``: time at 16 MiB / time at 1 MiB (linear = 16; bound: 20), measured twice:

  - ``warm``: calls back to back, as a loop over texts would make them;
  - ``cold``: the tokenizer's piece cache emptied and glibc's ``malloc_trim(0)`` before
    every call, at both sizes, so every call starts from no cached piece and gets its
    memory fresh from the kernel. Why both: a 1 MiB call reuses the pages the previous
    call freed, while glibc maps every block over 32 MB afresh, so a 16 MiB call pays a
    page fault per 4 KiB it touches (about 1.5 us each on a VM). For a result list of
    16.8M ids (128 MB) that alone is 29x a warm 1 MiB list; the calibration row ``python
    list`` (``np.int32 array.tolist()``, no tokenizer) shows it. And the piece cache
    persists between calls: the pieces of a repeated 1 MiB text are all found in it,
    while 16 MiB of random letters split by o200k's case rule outgrows what one call
    publishes (its block tables' cap), so warm, 16M/1M compared a cached text with a
    merged one (31-43x there, before and after 2026-12-04). ``cold`` puts both
    sizes in the same state; a quadratic path shows in both.

Prose is the shared English corpora (kjv.txt + fortunes_en.txt, repeated) when present,
otherwise generated prose. The slow test ``test_adversarial_timing`` asserts the bounds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rel_harness import PATTERNS, REPO, adversarial_cases, build_models, prose  # noqa: E402

CORPORA = REPO.parent / "shared" / "corpora"


def prose_text(n_bytes: int, mix_bytes: int = 16 << 20) -> tuple[str, str]:
    """(text of about ``n_bytes`` UTF-8 bytes, where it came from).

    Prose of every size has the same make-up: the corpora are repeated to ``mix_bytes``
    and a smaller text is 16 evenly spaced slices of that, so 1 MiB and 16 MiB of prose
    hold the same mix of books (the first MiB alone is the start of the KJV, whose
    words repeat more than the rest: 1.6x cheaper per byte).
    """
    files = [CORPORA / "kjv.txt", CORPORA / "fortunes_en.txt"]
    if all(f.exists() for f in files):
        data, source = b"".join(f.read_bytes() for f in files), "shared corpora (kjv + fortunes_en)"
    else:
        data, source = prose(1 << 20).encode("utf-8"), "generated prose"
    total = max(n_bytes, mix_bytes)
    data = (data * (total // len(data) + 1))[:total]
    if n_bytes < total:
        step, part = total // 16, n_bytes // 16
        data = b"".join(data[k * step:k * step + part] for k in range(16))
    return data[:n_bytes].decode("utf-8", "ignore"), source


ENTRIES = ("encode", "encode_ordinary", "encode_to_numpy", "encode_batch_list",
           "encode_batch_arrow", "encode_parquet")


def _trimmer():
    """glibc's ``malloc_trim(0)`` (returns freed heap pages to the kernel), or None."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def _cold_start(tok, trim):
    """Before a cold call: empty ``tok``'s piece cache (None: no tokenizer, as for the
    calibration row) and return freed heap pages to the kernel (when glibc's
    ``malloc_trim`` is found)."""
    def reset():
        if tok is not None:
            tok.piece_cache.clear()
        if trim is not None:
            trim(0)
    return reset


def _time(fn, reps, before=None):
    """Best of ``reps`` calls of ``fn``, ``before()`` (untimed) ahead of each."""
    best = float("inf")
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _callers(tok, entries, workdir: Path):
    """{entry: function(text) -> prepared call} for the entry points to time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastbpe_nb as fb

    def parquet(text):
        src, dst = workdir / "in.parquet", workdir / "out"
        pq.write_table(pa.table({"text": pa.array([text], pa.large_string())}), src)
        return lambda: fb.encode_parquet(tok, str(src), str(dst), num_threads=2)

    def arrow(text):
        array = pa.array([text], pa.large_string())
        return lambda: tok.encode_batch(array, num_threads=2)

    makers = {
        "encode": lambda text: lambda: tok.encode(text),
        "encode_ordinary": lambda text: lambda: tok.encode_ordinary(text),
        "encode_to_numpy": lambda text: lambda: tok.encode_to_numpy(text),
        "encode_batch_list": lambda text: lambda: tok.encode_batch([text], num_threads=2),
        "encode_batch_arrow": arrow,
        "encode_parquet": parquet,
    }
    return {e: makers[e] for e in entries}


def measure(model_paths: dict, sizes=(1 << 20, 16 << 20), entries=ENTRIES,
            workdir: Path | None = None) -> list[dict]:
    """One row per (pattern, entry point, case), prose included, and the calibration rows
    (pattern ``-``, entry ``python list``)."""
    import numpy as np

    import fastbpe_nb as fb

    small, big = sizes
    trim = _trimmer()
    rows = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for pattern, path in model_paths.items():
            tok = path if isinstance(path, fb.Tokenizer) else fb.load(path)
            longest = max(tok.vocab[: tok.n_regular], key=len).decode("utf-8", "replace")
            callers = _callers(tok, entries, Path(tmp))
            cold = _cold_start(tok, trim)
            for make in callers.values():  # compile / warm up
                for text in adversarial_cases(4096, longest).values():
                    make(text)()
            timings = {}
            for n in sizes:
                texts = {"prose": prose_text(n)[0], **adversarial_cases(n, longest)}
                for name, text in texts.items():
                    nbytes = len(text.encode("utf-8"))
                    for entry, make in callers.items():
                        call = make(text)
                        timings[entry, name, n] = (_time(call, 3), _time(call, 3, cold),
                                                   nbytes)
                        del call
                del texts
            for entry in callers:
                p_t, _, p_b = timings[entry, "prose", small]
                for name in [k for e, k, n in timings if e == entry and n == small]:
                    t1, c1, b1 = timings[entry, name, small]
                    t16, c16, b16 = timings[entry, name, big]
                    rows.append({
                        "pattern": pattern, "entry": entry, "case": name,
                        "mbps_1m": b1 / 1e6 / t1, "mbps_16m": b16 / 1e6 / t16,
                        "vs_prose_1m": (t1 / b1) / (p_t / p_b),
                        "t16_over_t1": t16 / t1,
                        "cold_t16_over_t1": c16 / c1 if trim is not None else float("nan"),
                    })
    # Calibration: building a Python list of one int per byte, no tokenizer involved.
    arrays = {n: np.zeros(n, dtype=np.int32) for n in sizes}
    trim_only = _cold_start(None, trim)
    t = {n: (_time(arrays[n].tolist, 3), _time(arrays[n].tolist, 3, trim_only)) for n in sizes}
    rows.append({"pattern": "-", "entry": "python list", "case": "n ints",
                 "mbps_1m": small / 1e6 / t[small][0], "mbps_16m": big / 1e6 / t[big][0],
                 "vs_prose_1m": float("nan"), "t16_over_t1": t[big][0] / t[small][0],
                 "cold_t16_over_t1": t[big][1] / t[small][1] if trim else float("nan")})
    return ([r for r in rows if r["case"] != "prose"] + [r for r in rows if r["case"] == "prose"])


def print_table(rows, sizes, source, full_entries=("encode_ordinary",),
                models="models of vocab 1200"):
    """The full table for ``full_entries`` (and the calibration row), then the worst row
    of each entry point for each figure."""
    small, big = (s / 2**20 for s in sizes)
    ratio = f"{big:g}M/{small:g}M"
    print(f"{models}; prose = {source}; best of 3 at each size")
    print(f"{'entry':18} {'pattern':7} {'case':18} {f'MB/s {small:g}M':>9} {f'MB/s {big:g}M':>9} "
          f"{'vs prose':>8} {ratio + ' warm':>12} {ratio + ' cold':>12}")
    for r in rows:
        if r["entry"] in full_entries or r["pattern"] == "-":
            print(f"{r['entry']:18} {r['pattern']:7} {r['case']:18} {r['mbps_1m']:9.1f} "
                  f"{r['mbps_16m']:9.1f} {r['vs_prose_1m']:8.2f} {r['t16_over_t1']:12.1f} "
                  f"{r['cold_t16_over_t1']:12.1f}")
    print(f"worst per entry point (bounds: vs prose 5, {ratio} 20; linear 16):")
    for entry in dict.fromkeys(r["entry"] for r in rows if r["pattern"] != "-"):
        mine = [r for r in rows if r["entry"] == entry]
        adv = [r for r in mine if r["case"] != "prose"]
        worst = [max(adv, key=lambda r: r["vs_prose_1m"]),
                 max(mine, key=lambda r: r["t16_over_t1"]),
                 max(mine, key=lambda r: r["cold_t16_over_t1"])]
        over = sum(r["t16_over_t1"] > 20 for r in mine)
        print(f"  {entry:18} vs prose {worst[0]['vs_prose_1m']:5.2f} ({worst[0]['pattern']} "
              f"{worst[0]['case']}); warm {worst[1]['t16_over_t1']:5.1f} ({worst[1]['pattern']} "
              f"{worst[1]['case']}, {over} of {len(mine)} rows over 20); cold "
              f"{worst[2]['cold_t16_over_t1']:5.1f} ({worst[2]['pattern']} {worst[2]['case']})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs=2, default=[1, 16], help="MiB, small and big")
    ap.add_argument("--patterns", nargs="+", default=list(PATTERNS))
    ap.add_argument("--entries", nargs="+", default=list(ENTRIES), choices=ENTRIES)
    ap.add_argument("--models", help="folder of model_<pattern>.json (default: train them)")
    ap.add_argument("--tiktoken", nargs="+", metavar="PATTERN=FILE",
                    help="production vocabularies instead: .tiktoken rank files and their "
                         "patterns, e.g. cl100k=cl100k_base.tiktoken o200k=o200k_base.tiktoken")
    args = ap.parse_args(argv)
    sizes = tuple(int(s * 2**20) for s in args.sizes)
    full = ["encode_ordinary"] if "encode_ordinary" in args.entries else args.entries[:1]
    if args.tiktoken:
        import fastbpe_nb as fb

        toks = {}
        for item in args.tiktoken:
            pattern, path = item.split("=", 1)
            toks[pattern] = fb.from_tiktoken(path, pattern=pattern)
        rows = measure(toks, sizes, tuple(args.entries))
        names = ", ".join(f"{p} ({Path(f.split('=', 1)[1]).name})"
                          for p, f in zip(toks, args.tiktoken))
        print_table(rows, sizes, prose_text(1024)[1], full_entries=full,
                    models=f"production vocabularies {names}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        models = build_models(Path(tmp)) if args.models is None else {
            p: Path(args.models) / f"model_{p}.json" for p in args.patterns}
        rows = measure({p: str(models[p]) for p in args.patterns}, sizes, tuple(args.entries))
    print_table(rows, sizes, prose_text(1024)[1], full_entries=full)


if __name__ == "__main__":
    main()
