"""Where fastbpe_nb's encoding time goes, stage by stage, on compare_encoders.py's workloads.

Each public call is taken apart into the steps it runs, each step timed alone on the same
data (medians of ``--repeat``, CPU time of the thread that runs it where one thread does
the work, wall time otherwise), with the piece cache **cold** (``tok.piece_cache.clear()``
before every timed call: a first pass over new text) and **warm** (after one untimed call
on the same data: a long job's steady state on repeated text):

* ``prepare``: text to UTF-8 bytes (single texts) or the Arrow buffers (``text_buffers``);
* ``read``: Parquet row groups read, decoded and sliced as ``encode_parquet`` does;
* ``scanner``: pre-tokenization alone (per ``SEGMENT_BYTES`` segment for a long text, as
  ``Encoder.encode_segmented`` does; ``pretokenize.piece_offsets`` for a batch; one thread);
* ``kernel``: the encode kernel alone on the pre-split pieces (``Encoder.run``);
* ``merging``: the kernel on only the distinct pieces that one pass had to merge, with the
  cache off: the cost of cache misses; the rest of ``kernel`` is lookups and copying ids;
* ``output``: the ids to the caller's form (a ``pa.ListArray``; single texts: an array);
* ``write``: the ``.bin`` written (``bin_files.write_bin``, to a temporary file);
* ``other``: the public call's time minus the stages (Python glue, checks, copies).

The piece table says what the kernel did with the pieces in one pass (its own counters,
``tok.piece_cache.info()``): found in the vocabulary's short-token table or a block's front
table, found in the persistent cache, found in the call's own block tables, or merged.

    python benchmarks/encode_profile.py --vocab cl100k --workloads code,mixed --scale 0.1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

STAGES = ("prepare", "read", "scanner", "kernel", "merging", "output", "write")
PIECE_KINDS = ("vocabulary or front table", "piece cache", "own call's table", "merged")


def timed(fn, repeat, before=None, cpu=False):
    """Median seconds of ``repeat`` calls of ``fn`` (``before()`` untimed before each)."""
    clock = time.thread_time if cpu else time.perf_counter
    times, out = [], None
    for _ in range(repeat):
        if before is not None:
            before()
        out = None
        t0 = clock()
        out = fn()
        times.append(clock() - t0)
    return statistics.median(times), out


def counters(tok) -> np.ndarray:
    info = tok.piece_cache.info()
    return np.array([info["hits"], info["call_hits"], info["merged"]], dtype=np.int64)


def distinct_merged(tok, layouts):
    """Layouts of the distinct pieces one cold pass merges (each piece a document), found by
    running the kernel with an empty cache and keeping pieces that are not vocabulary
    tokens; approximated by "not one token and not in the short-token table"."""
    seen, order = set(), []
    for data, pieces, _, _ in layouts:
        raw = data.tobytes()
        for a, b in zip(pieces[:-1].tolist(), pieces[1:].tolist()):
            if b - a > 1:
                piece = raw[a:b]
                if piece not in seen:
                    seen.add(piece)
                    order.append(piece)
    vocab = set(tok.vocab)
    order = [p for p in order if p not in vocab]  # whole tokens are never merged
    if not order:
        return None, 0
    data = np.frombuffer(b"".join(order), dtype=np.uint8)
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, order), np.int64, len(order)), out=offsets[1:])
    docs = np.arange(len(order) + 1, dtype=np.int64)
    return (data, offsets, np.zeros(0, np.int32), docs), len(order)


class Profile:
    def __init__(self, name, threads, n_bytes):
        self.name, self.threads, self.n_bytes = name, threads, n_bytes
        self.stages = {"cold": {}, "warm": {}}
        self.pieces = 0
        self.kinds = None
        self.n_merged_distinct = 0


def kernel_stages(prof, tok, layouts, n_threads, repeat):
    """``kernel`` cold and warm, the piece table, and ``merging``."""
    enc = tok._encoder
    cpu = n_threads == 1

    def run_all():
        return [enc.run(lay, n_threads) for lay in layouts]

    tok.piece_cache.clear()
    before = counters(tok)
    run_all()
    hits, call_hits, merged = counters(tok) - before
    prof.pieces = sum(len(lay[1]) - 1 for lay in layouts)
    prof.kinds = (prof.pieces - hits - call_hits - merged, hits, call_hits, merged)
    prof.stages["cold"]["kernel"] = timed(run_all, repeat, tok.piece_cache.clear, cpu)[0]
    run_all()
    prof.stages["warm"]["kernel"] = timed(run_all, repeat, None, cpu)[0]
    sub, prof.n_merged_distinct = distinct_merged(tok, layouts)
    if sub is not None:
        saved = tok.piece_cache.max_bytes
        tok.piece_cache.max_bytes = 0  # off: every distinct piece is merged
        try:
            t = timed(lambda: enc.run(sub, 1), repeat, None, True)[0]
        finally:
            tok.piece_cache.max_bytes = saved
        prof.stages["cold"]["merging"] = t


def profile_text(tok, text: str, repeat: int) -> Profile:
    """One text, ``encode_to_numpy`` (1 thread), as ``Encoder.encode_one`` runs it."""
    from fastbpe_nb._scanner import scan_prefix_offsets
    from fastbpe_nb.encoder import SEGMENT_BYTES
    from fastbpe_nb.pretokenize import piece_offsets

    raw = text.encode("utf-8")
    prof = Profile("", 1, len(raw))
    call = lambda: tok.encode_to_numpy(text, disallowed_special=())  # noqa: E731
    prof.stages["cold"]["total"] = timed(call, repeat, tok.piece_cache.clear)[0]
    call()
    prof.stages["warm"]["total"] = timed(call, repeat)[0]
    t = timed(lambda: text.encode("utf-8"), repeat, None, True)[0]
    data = np.frombuffer(raw, dtype=np.uint8)
    pattern = tok.level.pattern

    def scan():
        if len(raw) <= SEGMENT_BYTES:
            pieces, doc_pieces = piece_offsets(data, np.array([0, len(data)], np.int64), pattern)
            return [(data, pieces, np.zeros(0, np.int32), doc_pieces)]
        layouts, start = [], 0
        while start < len(data):
            pieces, end = scan_prefix_offsets(data, start, start + SEGMENT_BYTES, pattern)
            layouts.append((data[start:end], pieces - start, np.zeros(0, np.int32),
                            np.array([0, len(pieces) - 1], dtype=np.int64)))
            start = end
        return layouts

    ts, layouts = timed(scan, repeat)
    for state in ("cold", "warm"):
        prof.stages[state]["prepare"] = t
        prof.stages[state]["scanner"] = ts
    kernel_stages(prof, tok, layouts, 1, repeat)
    return prof


def profile_arrow(tok, array, n_threads: int, repeat: int) -> Profile:
    """A ``pa.StringArray`` through ``encode_batch`` (no special tokens in the rows)."""
    import pyarrow as pa

    from fastbpe_nb.io.arrow_text import text_buffers
    from fastbpe_nb.pretokenize import piece_offsets

    data, doc_offsets, _ = text_buffers(array)
    prof = Profile("", n_threads, int(doc_offsets[-1] - doc_offsets[0]))
    call = lambda: tok.encode_batch(array, num_threads=n_threads, disallowed_special=())  # noqa
    prof.stages["cold"]["total"] = timed(call, repeat, tok.piece_cache.clear)[0]
    call()
    prof.stages["warm"]["total"] = timed(call, repeat)[0]
    t = timed(lambda: text_buffers(array), repeat)[0]
    ts, (pieces, doc_pieces) = timed(lambda: piece_offsets(data, doc_offsets, tok.level.pattern),
                                     repeat)
    layout = (data, pieces, np.zeros(0, np.int32), doc_pieces)
    ids, offsets = tok._encoder.run(layout, n_threads)

    def output():  # as Encoder.encode_arrow builds its result
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(ids),
                                        type=pa.list_(pa.int32()))

    to = timed(output, repeat)[0]
    for state in ("cold", "warm"):
        prof.stages[state].update(prepare=t, scanner=ts, output=to)
    kernel_stages(prof, tok, [layout], n_threads, repeat)
    return prof


def profile_parquet(tok, path: str, n_threads: int, repeat: int, sep: int) -> Profile:
    """``encode_parquet(format="bin")`` end to end, and its stages on the file's slices."""
    import pyarrow.parquet as pq

    import fastbpe_nb as fb
    from fastbpe_nb.io.arrow_text import text_buffers
    from fastbpe_nb.io.bin_files import write_bin
    from fastbpe_nb.io.encode_inputs import open_input, text_slices
    from fastbpe_nb.pretokenize import piece_offsets

    n_bytes = sum(pq.read_metadata(path).row_group(i).column(0).total_uncompressed_size
                  for i in range(pq.read_metadata(path).num_row_groups))
    with tempfile.TemporaryDirectory() as out:
        def call():
            fb.encode_parquet(tok, path, out, format="bin", dtype="uint32", special="text",
                              separator=sep, num_threads=n_threads)
            for name in os.listdir(out):
                os.unlink(os.path.join(out, name))

        def read():
            return [tab for _, tab in text_slices(open_input(path, ["text"])[1], "text", path)]

        prof = Profile("", n_threads, n_bytes)
        prof.stages["cold"]["total"] = timed(call, repeat, tok.piece_cache.clear)[0]
        call()
        prof.stages["warm"]["total"] = timed(call, repeat)[0]
        tr, tables = timed(read, repeat)
        cols = [t.column("text").combine_chunks() for t in tables]
        tp, bufs = timed(lambda: [text_buffers(c) for c in cols], repeat)
        prof.n_bytes = sum(int(o[-1] - o[0]) for _, o, _ in bufs)
        ts, split = timed(lambda: [piece_offsets(d, o, tok.level.pattern) for d, o, _ in bufs],
                          repeat)
        layouts = [(d, p, np.zeros(0, np.int32), dp) for (d, _, _), (p, dp) in zip(bufs, split)]
        results = [tok._encoder.run(lay, n_threads) for lay in layouts]

        def write():
            with open(os.path.join(out, "w.bin"), "wb") as f:
                for ids, offsets in results:
                    write_bin(f, ids, offsets[1:], sep, np.dtype("<u4"))

        tw = timed(write, repeat)[0]
    for state in ("cold", "warm"):
        prof.stages[state].update(read=tr, prepare=tp, scanner=ts, write=tw)
    kernel_stages(prof, tok, layouts, n_threads, repeat)
    return prof


def print_profile(rows, vocab):
    print(f"\n### fastbpe_nb per-stage profile, {vocab}\n")
    print("Seconds (share of the public call's time). Cold: the piece cache emptied before "
          "each call; warm: after one call on the same data. `merging` is the kernel on the "
          "distinct pieces a cold pass merges, alone (part of cold `kernel`).\n")
    head = ["workload", "cache", "threads", "MB", "public call s (MB/s)", *STAGES, "other"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---", "---", "---:"] + ["---:"] * (len(head) - 3)) + "|")
    for prof in rows:
        for state in ("cold", "warm"):
            st = prof.stages[state]
            total = st["total"]
            other = total - sum(v for k, v in st.items() if k not in ("total", "merging"))

            def cell(x):
                return "—" if x is None else f"{x:.3f} ({100 * x / total:.0f}%)"

            row = [prof.name, state, str(prof.threads), f"{prof.n_bytes / 1e6:.1f}",
                   f"{total:.3f} ({prof.n_bytes / total / 1e6:.1f})"]
            row += [cell(st.get(k)) for k in STAGES] + [cell(other)]
            print("| " + " | ".join(row) + " |")
    print("\nWhat one cold pass did with each piece of 2+ bytes and of one byte (share of "
          "pieces), and the distinct pieces it merged:\n")
    print("| workload | pieces | " + " | ".join(PIECE_KINDS) + " | distinct merged | "
          "merging MB/s |")
    print("|---|---:|" + "---:|" * (len(PIECE_KINDS) + 2))
    for prof in rows:
        n = max(prof.pieces, 1)
        cells = [f"{100 * k / n:.1f}%" for k in prof.kinds]
        merging = prof.stages["cold"].get("merging")
        print(f"| {prof.name} | {prof.pieces:,} | " + " | ".join(cells) +
              f" | {prof.n_merged_distinct:,} | "
              f"{'—' if not merging else f'{prof.n_bytes / 1e6 / merging:.0f} (of the text)'} |")


def main(argv=None):
    from compare_encoders import (TEXT_WORKLOADS, WORKLOADS, load_ours, read_arrow_text,
                                  text_bytes, workload_data)

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", default="cl100k", choices=("cl100k", "o200k"))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    tok, note = load_ours(args.vocab)
    sep = tok.special_tokens.get("<|endoftext|>", 0)
    tok.encode_ordinary("warm up the kernels")
    rows = []
    for w in args.workloads.split(","):
        path, what = workload_data(w, args.scale)
        if w in TEXT_WORKLOADS:
            text = path.read_text(encoding="utf-8")
            tok.encode_to_numpy(text)  # loads every kernel this path uses
            prof = profile_text(tok, text, args.repeat)
        elif w == "mixed":
            array = read_arrow_text(path)
            tok.encode_batch(array[:1000], num_threads=args.threads, disallowed_special=())
            prof = profile_arrow(tok, array, args.threads, args.repeat)
        else:
            prof = profile_parquet(tok, str(path), args.threads, args.repeat, sep)
        prof.name = w
        rows.append(prof)
        print(f"{w}: {what} ({text_bytes(w, path) / 1e6:.1f} MB)", file=sys.stderr, flush=True)
    print_profile(rows, args.vocab)
    if note:
        print(f"\n({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
