"""Encoding speed on adversarial text versus prose: prints the table quoted in the README.

    .venv/bin/python tests/reliability/measure_adversarial.py [--sizes 1 16] [--patterns gpt2 ...]

For each named pattern (a model trained by rel_harness.build_models: vocab 1200 on prose
plus code-like text) and each adversarial case, it times ``encode_ordinary`` on the text at
1 MiB and 16 MiB (best of 3 runs at each size, after a warm-up: the same statistic on both
sides of the ratio) and prose of the same length, and prints MB/s and the two ratios the issue bounds:

* ``vs prose``: time per byte of the case / time per byte of prose, at 1 MiB (bound: 5)
* ``16M/1M``: time at 16 MiB / time at 1 MiB (linear = 16; bound: 20)

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


def _time(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(model_paths: dict, sizes=(1 << 20, 16 << 20)) -> list[dict]:
    import fastbpe_nb as fb

    small, big = sizes
    rows = []
    for pattern, path in model_paths.items():
        tok = fb.load(path)
        longest = max(tok.vocab[: tok.n_regular], key=len).decode("utf-8", "replace")
        for text in adversarial_cases(4096, longest).values():  # compile / warm up
            tok.encode_ordinary(text)
        timings = {}
        for n in sizes:
            reps = 3
            texts = {"prose": prose_text(n)[0], **adversarial_cases(n, longest)}
            for name, text in texts.items():
                nbytes = len(text.encode("utf-8"))
                timings[name, n] = (_time(lambda: tok.encode_ordinary(text), reps), nbytes)
            del texts
        p_t, p_b = timings["prose", small]
        for name in [k for k, n in timings if n == small]:
            t1, b1 = timings[name, small]
            t16, b16 = timings[name, big]
            rows.append({
                "pattern": pattern, "case": name,
                "mbps_1m": b1 / 1e6 / t1, "mbps_16m": b16 / 1e6 / t16,
                "vs_prose_1m": (t1 / b1) / (p_t / p_b),
                "t16_over_t1": t16 / t1,
            })
    return [r for r in rows if r["case"] != "prose"] + [r for r in rows if r["case"] == "prose"]


def print_table(rows, sizes, source):
    small, big = (s / 2**20 for s in sizes)
    print(f"encode_ordinary throughput, models of vocab 1200; prose = {source}")
    print(f"{'pattern':8} {'case':18} {f'MB/s {small:g}M':>10} {f'MB/s {big:g}M':>10} "
          f"{'vs prose':>9} {f'{big:g}M/{small:g}M':>8}")
    for r in rows:
        print(f"{r['pattern']:8} {r['case']:18} {r['mbps_1m']:10.1f} {r['mbps_16m']:10.1f} "
              f"{r['vs_prose_1m']:9.2f} {r['t16_over_t1']:8.1f}")
    worst_p = max((r for r in rows if r["case"] != "prose"), key=lambda r: r["vs_prose_1m"])
    worst_l = max(rows, key=lambda r: r["t16_over_t1"])
    print(f"worst vs prose: {worst_p['pattern']} {worst_p['case']} {worst_p['vs_prose_1m']:.2f}x "
          f"(bound 5); worst 16M/1M: {worst_l['pattern']} {worst_l['case']} "
          f"{worst_l['t16_over_t1']:.1f} (linear 16, bound 20)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs=2, default=[1, 16], help="MiB, small and big")
    ap.add_argument("--patterns", nargs="+", default=list(PATTERNS))
    args = ap.parse_args(argv)
    sizes = tuple(int(s * 2**20) for s in args.sizes)
    with tempfile.TemporaryDirectory() as tmp:
        models = build_models(Path(tmp))
        rows = measure({p: str(models[p]) for p in args.patterns}, sizes)
    print_table(rows, sizes, prose_text(1024)[1])


if __name__ == "__main__":
    main()
