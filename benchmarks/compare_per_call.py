"""One text per call, as ``datasets.map`` without batching or a serving loop calls it:
per-call time of fastbpe_nb against tiktoken, by text size.

For each size (characters), texts of that many characters are cut one after the other
from each corpus (Linux sources, English (KJV), the European man pages) and encoded one
per call, with ``encode`` (a list) and ``encode_to_numpy`` (an array), by ours and by
tiktoken, on the same ``cl100k_base``/``o200k_base`` rank file. Every call gets a text
it has not seen (as a real job does: caches help only with the pieces texts share); the
tools get the same texts. Calls alternate between the tools in rounds, in this one
process (the machine's noise hits both alike); medians of ``--rounds`` rounds, after one
untimed round on other texts; ``encode`` and ``encode_to_numpy`` get different texts (a
text's pieces remembered by one would serve the other). "Hello world" is the same text
every call (tiktoken's per-call figure). Ids are checked equal on every round's first
text (which that first call sees twice).

    python benchmarks/compare_per_call.py --vocab o200k --rounds 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_encoders import Tiktoken, load_ours  # noqa: E402

HERE = Path(__file__).resolve().parent
CORPORA = {
    "code": HERE.parent / ".asv" / "data" / "linux-5000000.txt",
    "english": HERE.parents[1] / "shared" / "corpora" / "kjv.txt",
    "european": HERE.parent / ".asv" / "data" / "european-man-5000000.txt",
}
SIZES = (11, 30, 60, 100, 300, 1000, 3000, 10000)


def per_call(fn, texts) -> float:
    t0 = time.perf_counter()
    for text in texts:
        fn(text)
    return (time.perf_counter() - t0) / len(texts)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", default="o200k", choices=("cl100k", "o200k"))
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--corpora", default=",".join(CORPORA))
    args = p.parse_args(argv)

    ours, _ = load_ours(args.vocab)
    theirs = Tiktoken(args.vocab, 1).enc
    tools = {
        ("ours", "encode"): ours.encode_ordinary,
        ("tiktoken", "encode"): theirs.encode_ordinary,
        ("ours", "encode_to_numpy"): lambda t: ours.encode_to_numpy(t, disallowed_special=()),
        ("tiktoken", "encode_to_numpy"): lambda t: theirs.encode_to_numpy(
            t, disallowed_special=()),
    }
    print(f"vocabulary {args.vocab}; medians of {args.rounds} rounds; microseconds per call\n")
    print("| text | chars | UTF-8 bytes | ours `encode` | tiktoken | ratio "
          "| ours `encode_to_numpy` | tiktoken | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for corpus in args.corpora.split(","):
        source = CORPORA[corpus].read_text(encoding="utf-8", errors="replace")
        for size in SIZES:
            calls = max(5, 30000 // size)
            n = calls * (args.rounds + 1)
            # Per API its own texts (the piece memo of one would serve the other); within
            # an API, ours and tiktoken get the same ones.
            rounds = {}
            for j, api in enumerate(("encode", "encode_to_numpy")):
                if size == 11:
                    chunks = ["Hello world"] * n
                else:
                    start = len(source) // 4 + j * n * size
                    chunks = [source[start + k * size:start + (k + 1) * size] for k in range(n)]
                rounds[api] = [chunks[r * calls:(r + 1) * calls] for r in range(args.rounds + 1)]
            text = rounds["encode"][0][0]
            times = {key: [] for key in tools}
            for r in range(args.rounds + 1):
                for key, fn in tools.items():
                    texts = rounds[key[1]][r]
                    if key[0] == "ours" and fn(texts[0]) is not None and list(
                            fn(texts[0])) != theirs.encode_ordinary(texts[0]):
                        raise SystemExit(f"ids differ on {corpus} {size}, round {r}")
                    t = per_call(fn, texts)
                    if r > 0:
                        times[key].append(t)
            med = {key: statistics.median(v) * 1e6 for key, v in times.items()}
            row = [corpus if size != 11 else "Hello world", f"{len(text):,}",
                   f"{len(text.encode()):,}"]
            for api in ("encode", "encode_to_numpy"):
                a, b = med[("ours", api)], med[("tiktoken", api)]
                row += [f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}x"]
            print("| " + " | ".join(row) + " |", flush=True)
    print("\nratio: ours over tiktoken (below 1: ours is faster).")


if __name__ == "__main__":
    main()
