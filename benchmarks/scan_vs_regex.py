#!/usr/bin/env python
"""Throughput of the Numba pre-tokenizer against ``regex.findall``.

For each corpus (~4 MB each: English prose, Russian, Chinese, Python source)
and each named pattern and SuperBPE's stage-2 pattern ("superbpe"), times
``compiled_pattern.findall(text)`` and ``scan_offsets(data, None, name)`` (one
document, warm Numba cache, single thread), checks that both give the same
pieces, and prints a Markdown table of medians in MB/s of UTF-8 input.  Compile (or
cache-load) time of the kernel is measured once and reported separately.

Usage::

    python benchmarks/scan_vs_regex.py [--mb 4] [--repeat 5]

Falls back to the standard library and a synthetic multilingual sample when
``../shared/corpora`` is absent.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import regex

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fastbpe_nb._scanner import class_table, scan_offsets  # noqa: E402
from fastbpe_nb.pretokenize import SCANNED_PATTERNS as SCANNED  # noqa: E402

CORPORA = REPO.parent / "shared" / "corpora"


def take(data: bytes, n_bytes: int) -> bytes:
    """Repeat/cut ``data`` to about ``n_bytes``, ending at a line end, valid UTF-8."""
    if not data:
        return data
    while len(data) < n_bytes:
        data = data + data
    cut = data.rfind(b"\n", 0, n_bytes)
    data = data[: cut + 1] if cut > 0 else data[:n_bytes]
    return data.decode("utf-8", "ignore").encode("utf-8")


def stdlib_python(n_bytes: int) -> bytes:
    chunks, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            blob = path.read_bytes()
            blob.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        chunks.append(blob)
        total += len(blob)
        if total >= n_bytes:
            break
    return take(b"".join(chunks), n_bytes)


def synthetic(n_bytes: int) -> bytes:
    sample = (
        "The quick brown fox doesn't jump; it's 42 times LAZIER than we'd think.\n"
        "Съешь же ещё этих мягких французских булок, да выпей чаю!\n"
        "我能吞下玻璃而不伤身体。 東京は 2024 年に…\n"
        "  Καλημέρα κόσμε — naïve café 👩‍👩‍👧 ＡＢＣ１２３\n"
    )
    return take(sample.encode("utf-8"), n_bytes)


def corpora(n_bytes: int) -> dict[str, bytes]:
    out = {}
    if CORPORA.is_dir():
        for label, name in [("English (kjv)", "kjv.txt"), ("Russian", "fortunes_ru.txt"), ("Chinese", "fortunes_zh.txt")]:
            path = CORPORA / name
            if path.exists():
                out[label] = take(path.read_bytes(), n_bytes)
    if not out:
        print(f"note: {CORPORA} is absent; using a synthetic multilingual sample", file=sys.stderr)
        out["synthetic multilingual"] = synthetic(n_bytes)
    out["Python stdlib"] = stdlib_python(n_bytes)
    return out


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0, help="corpus size in MB (default 4)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell (default 5)")
    args = parser.parse_args()
    n_bytes = int(args.mb * 1e6)

    t0 = time.perf_counter()
    class_table()
    for name in SCANNED:
        scan_offsets(b"warm up 'em, 123 \n", None, name)
    warm = time.perf_counter() - t0

    print(f"machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}, "
          f"regex {regex.__version__}, numpy {np.__version__}")
    print(f"kernel compile or cache load ({len(SCANNED)} patterns, first call): {warm:.2f} s\n")
    print("| corpus | MB | pattern | regex.findall MB/s | scanner MB/s | scanner / regex |")
    print("|---|---:|---|---:|---:|---:|")
    for label, data in corpora(n_bytes).items():
        text = data.decode("utf-8")
        mb = len(data) / 1e6
        for name, pattern in SCANNED.items():
            compiled = regex.compile(pattern)
            expected = [p.encode() for p in compiled.findall(text)]
            piece_offsets, _ = scan_offsets(data, None, name)
            bounds = piece_offsets.tolist()
            got = [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            if got != expected:
                print(f"MISMATCH on {label} / {name}", file=sys.stderr)
                return 1
            t_regex = median_seconds(lambda: compiled.findall(text), args.repeat)
            t_scan = median_seconds(lambda: scan_offsets(data, None, name), args.repeat)
            print(f"| {label} | {mb:.1f} | {name} | {mb / t_regex:.1f} | {mb / t_scan:.1f} | "
                  f"{t_regex / t_scan:.1f}x |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
