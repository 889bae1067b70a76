"""Where fastbpe_nb's encoding time goes, stage by stage, on compare_encoders.py's workloads.

Each public call is taken apart into the steps it runs, each step timed alone on the same
data (medians of ``--repeat``), in the order the library runs them:

* ``prepare``: text to UTF-8 bytes (single texts) or the Arrow buffers (``text_buffers``);
* ``Parquet read``: row groups read, decoded and sliced as ``encode_parquet`` does;
* ``scanner``: pre-tokenization alone (``_scanner.scan_prefix_offsets`` per 2 MiB segment
  for a long text, as ``Tokenizer._encode_segmented`` does; ``pretokenize.piece_offsets``
  for a batch; it runs on one thread);
* ``kernel``: the encode kernel alone on the pre-split pieces (``Tokenizer._run``);
* ``merging``: the kernel on only the pieces that reach the merge loop (the others
  removed), an estimate of the cost of merging cache misses; the rest of ``kernel`` is
  hashing, whole-token and cache lookups and copying ids;
* ``output``: the ids to the caller's form (a list, a ``pa.ListArray``, or the ``.bin``
  layout with separators);
* ``write``: the ``.bin`` and index written and fsynced;
* ``other``: the public call's time minus the stages (Python glue, checks, copies).

The piece table classifies every piece the way the kernel's ``_encode_block`` does, by
replaying its decisions exactly (same hash, same 4,096-slot direct-mapped cache per block of
documents, reset per block; a block is one ``_run`` call's document range): one byte (a
table lookup), a whole token (one hash lookup), a cache hit, or merged; merged pieces are
split into compulsory misses (first time in the block), conflict misses (seen earlier in
the block but evicted from its slot: a bigger or associative cache would catch these),
pieces of 25-48 bytes (never cached) and long pieces (over 48 bytes: the rank sweep). The
last table counts the slots each whole-token lookup reads (the kernel's linear probing,
replayed), and the longest run of occupied slots in that table.

The replay predates the short-piece path (pieces of 2-7 bytes looked up by their packed
bytes, then a direct-mapped cache of them): it models the path every piece took before,
so its categories are where the long-piece path's time would go, and its "whole token" and
"cache hit" counts overstate that path's work on pieces of up to 7 bytes.

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
from numba import njit  # noqa: E402

from fastbpe_nb.model import CACHE_UNITS  # noqa: E402
from fastbpe_nb.kernels.hashing import EMPTY, HASH_SEED, hash_slot, hash_units  # noqa: E402

CATEGORIES = ("one byte", "whole token", "cache hit", "compulsory miss", "conflict miss",
              "25-48 B (uncached)", "long > 48 B")


@njit(cache=True)
def _whole_probe(data, s, e, h, whole_keys, tok_off, tok_data):
    """``kernels.encode._whole_piece``'s lookup, counting the slots it reads: ``(id, probes)``."""
    mask = whole_keys.shape[0] - 1
    i = hash_slot(h) & mask  # the kernel's slot function
    n = e - s
    probes = 0
    while True:
        probes += 1
        t = whole_keys[i]
        if t == EMPTY:
            return -1, probes
        if tok_off[t + 1] - tok_off[t] == n:
            ts = tok_off[t]
            same = True
            for k in range(n):
                if tok_data[ts + k] != data[s + k]:
                    same = False
                    break
            if same:
                return t, probes
        i = (i + 1) & mask


@njit(cache=True)
def longest_cluster(keys):
    """Longest run of occupied slots in an open-addressing table (wrapping around)."""
    n = keys.shape[0]
    best = 0
    run = 0
    for k in range(2 * n):
        if keys[k % n] != EMPTY:
            run += 1
            if run > best:
                best = run
        else:
            run = 0
    return min(best, n)


@njit(cache=True)
def classify_pieces(data, piece_offsets, block_pieces, whole_keys, tok_off, tok_data,
                    cache_bits, cache_units, long_piece):
    """Category (index into CATEGORIES) of each piece, replaying ``_encode_block``, and
    the number of whole-token table slots its lookup read (0: no lookup, one-byte pieces).

    ``block_pieces[b]:block_pieces[b+1]`` are the pieces of block ``b`` (the cache is reset
    per block, as each kernel block starts with an empty one). No special-token pieces.
    """
    n_pieces = piece_offsets.shape[0] - 1
    cat = np.zeros(n_pieces, dtype=np.int8)
    probes = np.zeros(n_pieces, dtype=np.int32)
    use_whole = whole_keys.shape[0] > 0
    n_cache = 1 << cache_bits
    cmask = n_cache - 1
    c_hash = np.full(n_cache, EMPTY, dtype=np.int64)
    c_len = np.zeros(n_cache, dtype=np.int64)
    c_start = np.zeros(n_cache, dtype=np.int64)
    for b in range(block_pieces.shape[0] - 1):
        c_hash[:] = EMPTY
        seen = dict()
        seen[np.int64(-1)] = True  # fixes the dict's types
        for p in range(block_pieces[b], block_pieces[b + 1]):
            s = piece_offsets[p]
            e = piece_offsets[p + 1]
            n = e - s
            if n == 1:
                cat[p] = 0
                continue
            h = hash_units(data, s, e, HASH_SEED)
            if use_whole:
                t, probes[p] = _whole_probe(data, s, e, h, whole_keys, tok_off, tok_data)
                if t >= 0:
                    cat[p] = 1
                    continue
            if n > cache_units:
                cat[p] = 5 if n <= long_piece else 6
                continue
            slot = hash_slot(h) & cmask
            if c_hash[slot] == h and c_len[slot] == n:
                same = True
                t = c_start[slot]
                for k in range(n):
                    if data[t + k] != data[s + k]:
                        same = False
                        break
                if same:
                    cat[p] = 2
                    continue
            key = h | (np.int64(n) << 48)
            if key in seen:
                cat[p] = 4
            else:
                cat[p] = 3
                seen[key] = True
            c_hash[slot] = h
            c_len[slot] = n
            c_start[slot] = s
    return cat, probes


def median_time(fn, repeat):
    """Median seconds of ``repeat`` calls after one untimed call (compiles, warms caches)."""
    times, out = [], fn()
    for _ in range(repeat):
        out = None
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def kernel_blocks(doc_pieces: np.ndarray, n_threads: int) -> np.ndarray:
    """Piece bounds of the kernel's blocks for one ``_run`` call (see ``Tokenizer._run``)."""
    n_docs = len(doc_pieces) - 1
    if n_threads <= 1 or n_docs <= 1:
        return np.array([doc_pieces[0], doc_pieces[-1]], dtype=np.int64)
    n_blocks = max(1, min(n_docs, 8 * n_threads))
    docs = np.array([b * n_docs // n_blocks for b in range(n_blocks + 1)])
    return doc_pieces[docs].astype(np.int64)


def merged_only(data, pieces, doc_pieces, cat):
    """A layout of only the pieces that reach the merge loop (per document, in order)."""
    keep = cat >= 3
    starts, ends = pieces[:-1][keep], pieces[1:][keep]
    lengths = ends - starts
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(lengths):
        idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        sub = data[idx]
    else:
        sub = np.zeros(0, dtype=np.uint8)
    # The kernels compile one specialization per array flag: match the library's input.
    sub.flags.writeable = data.flags.writeable
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    return sub, offsets, np.zeros(0, np.int32), kept_before[doc_pieces].astype(np.int64)


class Profile:
    """Stage times (seconds) and piece categories, accumulated over a workload's calls."""

    def __init__(self):
        self.stages = {}
        self.cats = np.zeros(len(CATEGORIES), dtype=np.int64)
        self.cat_bytes = np.zeros(len(CATEGORIES), dtype=np.int64)
        self.probes = []  # slots read per whole-token lookup
        self.cluster = None

    def add(self, stage, seconds):
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def classify(self, tok, data, pieces, doc_pieces, n_threads):
        from fastbpe_nb.model import LONG_PIECE, CACHE_BITS

        whole_keys, tok_off, tok_data = tok._whole_table()
        cat, probes = classify_pieces(data, pieces, kernel_blocks(doc_pieces, n_threads),
                                      whole_keys, tok_off, tok_data, CACHE_BITS, CACHE_UNITS,
                                      LONG_PIECE)
        self.probes.append(probes[probes > 0])
        if self.cluster is None and len(whole_keys):
            self.cluster = (int(longest_cluster(whole_keys)), len(whole_keys),
                            int((whole_keys != EMPTY).sum()))
        lengths = np.diff(pieces)
        self.cats += np.bincount(cat, minlength=len(CATEGORIES))
        self.cat_bytes += np.bincount(cat, weights=lengths, minlength=len(CATEGORIES)).astype(np.int64)
        return cat


def profile_text(tok, text: str, repeat: int) -> Profile:
    """A single text, ``encode_ordinary`` (1 thread), as ``_encode_array`` runs it."""
    from fastbpe_nb._scanner import scan_prefix_offsets
    from fastbpe_nb.pretokenize import piece_offsets
    from fastbpe_nb.encoder import SEGMENT_BYTES

    prof = Profile()
    prof.add("total", median_time(lambda: tok.encode_ordinary(text), repeat)[0])
    t, raw = median_time(lambda: text.encode("utf-8"), repeat)
    prof.add("prepare", t)
    data = np.frombuffer(raw, dtype=np.uint8)
    huge = tok._may_be_huge(text) and len(raw) > SEGMENT_BYTES

    def scan():
        if not huge:
            pieces, doc_pieces = piece_offsets(data, np.array([0, len(data)], np.int64), tok.pattern)
            return [(data, pieces, doc_pieces)]
        segments, start = [], 0
        while start < len(data):
            pieces, end = scan_prefix_offsets(data, start, start + SEGMENT_BYTES, tok.pattern)
            segments.append((data[start:end], pieces - start,
                             np.array([0, len(pieces) - 1], dtype=np.int64)))
            start = end
        return segments

    t, segments = median_time(scan, repeat)
    prof.add("scanner", t)
    no_special = np.zeros(0, dtype=np.int32)
    layouts = [(d, p, no_special, dp) for d, p, dp in segments]
    t, parts = median_time(lambda: [tok._run(lay)[0] for lay in layouts], repeat)
    prof.add("kernel", t)
    merged = []
    for d, p, _, dp in layouts:
        cat = prof.classify(tok, d, p, dp, 1)
        merged.append(merged_only(d, p, dp, cat))
    prof.add("merging", median_time(lambda: [tok._run(lay) for lay in merged], repeat)[0])
    ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
    prof.add("output", median_time(lambda: tok._id_list(ids), repeat)[0])
    return prof


def profile_arrow(tok, array, n_threads: int, repeat: int) -> Profile:
    """A ``pa.StringArray`` through ``encode_batch`` (no special tokens in the rows)."""
    import pyarrow as pa

    from fastbpe_nb.io.arrow_text import text_buffers
    from fastbpe_nb.pretokenize import piece_offsets

    prof = Profile()
    prof.add("total", median_time(lambda: tok.encode_batch(array, num_threads=n_threads,
                                                           disallowed_special=()), repeat)[0])
    t, (data, doc_offsets, _) = median_time(lambda: text_buffers(array), repeat)
    prof.add("prepare", t)
    t, (pieces, doc_pieces) = median_time(lambda: piece_offsets(data, doc_offsets, tok.pattern),
                                          repeat)
    prof.add("scanner", t)
    layout = (data, pieces, np.zeros(0, np.int32), doc_pieces)
    t, (ids, offsets) = median_time(lambda: tok._run(layout, n_threads), repeat)
    prof.add("kernel", t)
    cat = prof.classify(tok, data, pieces, doc_pieces, n_threads)
    sub = merged_only(data, pieces, doc_pieces, cat)
    prof.add("merging", median_time(lambda: tok._run(sub, n_threads), repeat)[0])

    def output():  # as Tokenizer._encode_arrow builds its result
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(ids),
                                        type=pa.list_(pa.int32()))

    prof.add("output", median_time(output, repeat)[0])
    return prof


def profile_parquet(tok, path: str, n_threads: int, repeat: int, sep: int) -> Profile:
    """``encode_parquet(format="bin")`` of one file, stage by stage."""
    import fastbpe_nb as fb
    from fastbpe_nb.io.arrow_text import text_buffers
    from fastbpe_nb.io.encode_inputs import open_input, text_slices
    from fastbpe_nb.pretokenize import piece_offsets

    prof = Profile()
    out_dir = tempfile.mkdtemp(prefix="fastbpe-profile-")
    prof.add("total", median_time(lambda: fb.encode_parquet(
        tok, path, out_dir, format="bin", dtype="uint32", special="text", separator=sep,
        num_threads=n_threads), repeat)[0])

    def read():
        out = []
        for _, table in text_slices(open_input(path, ["text"])[1], "text", path):
            col = table.column("text")
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            out.append(text_buffers(col)[:2])
        return out

    t, slices = median_time(read, repeat)
    prof.add("Parquet read", t)
    t, scanned = median_time(lambda: [piece_offsets(d, o, tok.pattern) for d, o in slices], repeat)
    prof.add("scanner", t)
    no_special = np.zeros(0, dtype=np.int32)
    layouts = [(d, p, no_special, dp) for (d, _), (p, dp) in zip(slices, scanned)]
    t, encoded = median_time(lambda: [tok._run(lay, n_threads) for lay in layouts], repeat)
    prof.add("kernel", t)
    merged = []
    for d, p, _, dp in layouts:
        merged.append(merged_only(d, p, dp, prof.classify(tok, d, p, dp, n_threads)))
    prof.add("merging", median_time(lambda: [tok._run(lay, n_threads) for lay in merged],
                                    repeat)[0])

    def output():  # as _encode_one lays out the .bin and its index
        flats, idx, written = [], [], 0
        for ids, offsets in encoded:
            ends = offsets[1:]
            flat = np.insert(ids.astype("<u4"), ends, sep)
            flats.append(flat)
            idx.append((offsets[:-1] + np.arange(len(ends))).astype(np.int64) + written)
            written += len(flat)
        return flats, np.concatenate(idx + [np.array([written], np.int64)])

    t, (flats, index) = median_time(output, repeat)
    prof.add("output", t)

    def write():
        with open(os.path.join(out_dir, "profile.bin"), "wb") as f:
            for flat in flats:
                f.write(flat.data)
            f.flush()
            os.fsync(f.fileno())
        with open(os.path.join(out_dir, "profile.idx.npy"), "wb") as f:
            np.save(f, index)
            f.flush()
            os.fsync(f.fileno())

    prof.add("write", median_time(write, repeat)[0])
    import shutil

    shutil.rmtree(out_dir, ignore_errors=True)
    return prof


STAGES = ("prepare", "Parquet read", "scanner", "kernel", "merging", "output", "write")


def print_profile(rows, vocab):
    print(f"\n### fastbpe_nb per-stage profile, {vocab}\n")
    print("Seconds (share of the public call's time); `merging` is part of `kernel`, "
          "`lookups` = kernel - merging.\n")
    head = ["workload", "threads", "MB", "public call s (MB/s)", "prepare", "Parquet read",
            "scanner", "kernel", "merging (est.)", "lookups", "output", "write", "other"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---", "---:"] + ["---:"] * (len(head) - 2)) + "|")
    for name, threads, n_bytes, prof in rows:
        st = prof.stages
        total = st["total"]
        parts = {k: st.get(k) for k in STAGES}
        parts["lookups"] = st["kernel"] - st["merging"]
        other = total - sum(v for k, v in parts.items() if v is not None and k not in
                            ("merging", "lookups"))

        def cell(x):
            return "—" if x is None else f"{x:.3f} ({100 * x / total:.0f}%)"

        row = [name, str(threads), f"{n_bytes / 1e6:.1f}",
               f"{total:.3f} ({n_bytes / total / 1e6:.1f})"]
        row += [cell(parts[k]) for k in ("prepare", "Parquet read", "scanner", "kernel")]
        row += [cell(parts["merging"]), cell(parts["lookups"]), cell(parts["output"]),
                cell(parts["write"]), cell(other)]
        print("| " + " | ".join(row) + " |")
    print("\nPieces by what the kernel does with them (share of pieces; share of bytes):\n")
    print("| workload | pieces | bytes/piece | " + " | ".join(CATEGORIES) + " |")
    print("|---|---:|---:|" + "---:|" * len(CATEGORIES))
    for name, _, n_bytes, prof in rows:
        n = prof.cats.sum()
        nb = max(1, prof.cat_bytes.sum())
        cells = [f"{100 * c / n:.1f}%; {100 * b / nb:.1f}%" for c, b in zip(prof.cats, prof.cat_bytes)]
        print(f"| {name} | {n:,} | {nb / max(n, 1):.2f} | " + " | ".join(cells) + " |")
    print("\nWhole-token lookups (every piece of 2+ bytes first looks itself up in the "
          "token table, `kernels.encode._whole_piece`: linear probing keyed by "
          "`hashing.hash_units`): slots read per lookup.\n")
    print("| workload | lookups | mean slots read | median | 99th percentile | max | "
          "longest occupied run in the table |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, _, _, prof in rows:
        pr = np.concatenate(prof.probes) if prof.probes else np.zeros(0, np.int32)
        if not len(pr):
            continue
        run, cap, used = prof.cluster
        print(f"| {name} | {len(pr):,} | {pr.mean():.1f} | {np.median(pr):.0f} | "
              f"{np.percentile(pr, 99):.0f} | {pr.max():,} | {run:,} slots ({used:,} tokens in "
              f"{cap:,} slots) |")


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
        n_bytes = text_bytes(w, path)
        if w in TEXT_WORKLOADS:
            text = path.read_text(encoding="utf-8")
            tok.encode_ordinary(text)  # warm every kernel this path uses
            rows.append((w, 1, n_bytes, profile_text(tok, text, args.repeat)))
        elif w == "mixed":
            array = read_arrow_text(path)
            tok.encode_batch(array[:1000], num_threads=args.threads, disallowed_special=())
            rows.append((w, args.threads, n_bytes, profile_arrow(tok, array, args.threads,
                                                                 args.repeat)))
        else:
            rows.append((w, args.threads, n_bytes, profile_parquet(tok, str(path), args.threads,
                                                                   args.repeat, sep)))
        print(f"{w}: {what}", file=sys.stderr, flush=True)
    print_profile(rows, args.vocab)
    if note:
        print(f"\n({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
