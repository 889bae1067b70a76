"""Code run inside the subprocesses of test_memory_hostile.py (hostile Arrow input, memory).

Each function runs every entry point on one kind of hostile input and returns a JSON-able
report ``{case: {entry: outcome}}``; the test asserts on it. A crash (SIGSEGV, SIGBUS) of
the child is a failed test, not a lost run.
"""

from __future__ import annotations

import os

import numpy as np

ROWS = ["a" * 1111, "b" * 1111, "c" * 1111]
#: The offsets of ROWS as int32, little-endian: a needle to find in a written IPC file.
OFFSETS = [0, 1111, 2222, 3333]


def outcome(fn):
    """``("ok", value)`` or ``(exception class names, message)``: recorded, never hidden."""
    try:
        return ["ok", fn()]
    except Exception as exc:
        names = [c.__name__ for c in type(exc).__mro__]
        return [names, str(exc)[:400]]


def patched_ipc(path, patch: str, large=False, stream=False):
    """Write ROWS as an Arrow IPC file, then overwrite offset bytes in the file itself.

    ``patch``: "last" (row 2 ends past the data), "middle" (row 0 ends past the data and
    row 1 starts there: decreasing), "negative" (row 0 ends at -10**9: decreasing). The
    IPC reader checks buffer sizes, not the offsets inside, so pyarrow reads it back.
    Returns the row the error must name.
    """
    import pyarrow as pa
    import pyarrow.ipc as ipc

    table = pa.table({"text": pa.array(ROWS, pa.large_string() if large else pa.string())})
    opener = ipc.new_stream if stream else ipc.new_file
    with opener(path, table.schema) as writer:
        writer.write_table(table)
    raw = bytearray(open(path, "rb").read())
    dtype = np.dtype("<i8" if large else "<i4")
    at = raw.find(np.array(OFFSETS, dtype).tobytes())
    assert at >= 0, "offsets not found in the file"
    w = dtype.itemsize
    slot, value, row = {"last": (3, 10**9, 2), "middle": (1, 10**9, 0),
                        "negative": (1, -10**9, 0)}[patch]
    raw[at + slot * w: at + (slot + 1) * w] = np.array([value], dtype).tobytes()
    with open(path, "wb") as f:
        f.write(raw)
    return row


def bad_array(large=False):
    """An in-memory array whose row 1 of 4 ends past the data (basic validation passes:
    it checks only the first and last offsets), and the rows it holds."""
    import pyarrow as pa

    good = pa.array(["one", "two", "three", "four"], pa.large_string() if large else pa.string())
    bufs = good.buffers()
    offsets = np.frombuffer(bufs[1], np.int64 if large else np.int32).copy()
    offsets[2] = 10**6
    return pa.Array.from_buffers(good.type, 4, [None, pa.py_buffer(offsets), bufs[2]])


def read_ipc(path):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.OSFile(path, "rb") as f:
        try:
            return ipc.open_file(f).read_all().column("text")
        except pa.ArrowInvalid:
            f.seek(0)
            return ipc.open_stream(f).read_all().column("text")


def corrupt_offsets_report(workdir: str) -> dict:
    """Every Arrow text entry point on arrays whose offsets run outside their data."""
    import pyarrow as pa

    import fastbpe_nb as fb

    toks = {"gpt2": fb.train(["hello world"] * 10, vocab_size=270),
            "none": fb.train(["hello world"] * 10, vocab_size=270, pattern=None)}
    report = {}
    for patch in ("last", "middle", "negative"):
        for large in (False, True):
            for stream in (False, True):
                name = f"{patch}-{'large' if large else 'string'}-{'stream' if stream else 'file'}"
                path = os.path.join(workdir, name + ".arrow")
                row = patched_ipc(path, patch, large, stream)
                out = {"row": row, "path": path}
                for pat, tok in toks.items():
                    out[f"encode_parquet[{pat}]"] = outcome(lambda: fb.encode_parquet(
                        tok, path, os.path.join(workdir, "out-" + name))["rows"])
                    out[f"encode_parquet_bin[{pat}]"] = outcome(lambda: fb.encode_parquet(
                        tok, path, os.path.join(workdir, "bin-" + name), format="bin",
                        separator=0)["rows"])
                out["train_files"] = outcome(lambda: len(fb.train_files([path], vocab_size=270).merges))
                col = read_ipc(path)
                for pat, tok in toks.items():
                    out[f"encode_batch[{pat}]"] = outcome(lambda: len(tok.encode_batch(col)))
                    out[f"count_tokens[{pat}]"] = outcome(lambda: tok.count_tokens(col).tolist())
                out["train"] = outcome(lambda: len(fb.train(col, vocab_size=270).merges))
                out["train_chars"] = outcome(lambda: len(fb.train(col, vocab_size=270,
                                                                  base="chars").merges))
                report[name] = out
    # In memory: a slice (slice offset 1: the bad row 1 is the slice's row 0) and a
    # chunked array (the bad chunk after 5 good rows: row 5 + 1).
    for large in (False, True):
        bad = bad_array(large)
        good = pa.array(["x"] * 5, bad.type)
        cases = {f"slice-{large}": (bad.slice(1), 0),
                 f"chunked-{large}": (pa.chunked_array([good, bad]), 6)}
        for name, (arr, row) in cases.items():
            out = {"row": row, "path": None}
            for pat, tok in toks.items():
                out[f"encode_batch[{pat}]"] = outcome(lambda: len(tok.encode_batch(arr)))
                out[f"count_tokens[{pat}]"] = outcome(lambda: tok.count_tokens(arr).tolist())
            out["train"] = outcome(lambda: len(fb.train(arr, vocab_size=270).merges))
            out["train_chars"] = outcome(lambda: len(fb.train(arr, vocab_size=270,
                                                              base="chars").merges))
            report[name] = out
    return report


def big_ipc(path, stream=False, batches=12, rows=4000):
    """An Arrow IPC file of ``batches`` record batches of ~1.6 MB of prose each."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from rel_harness import prose

    text = prose(400 * rows, seed=3)
    docs = [text[i * 400:(i + 1) * 400] for i in range(rows)]
    table = pa.table({"text": pa.array(docs, pa.string())})
    opener = ipc.new_stream if stream else ipc.new_file
    with opener(path, table.schema) as writer:
        for _ in range(batches):
            writer.write_table(table)
    return os.path.getsize(path)


def truncate_while_reading(path: str, entry: str, workdir: str, marker: str | None = None):
    """Run ``entry`` ("encode" or "train") on ``path``; the file is cut to half its size
    once the second batch is being processed: by this process (a hook, deterministic)
    when ``marker`` is None, else by the test process, which waits for the ``marker``
    file this child creates at that point. Returns the outcome."""
    import time

    import fastbpe_nb as fb
    import fastbpe_nb.counting as counting
    from fastbpe_nb.tokenizer import Tokenizer

    size = os.path.getsize(path)
    calls = [0]

    def cut():
        calls[0] += 1
        if calls[0] != 2:
            return
        if marker is None:
            os.truncate(path, size // 2)
        else:
            open(marker, "w").close()
            deadline = time.monotonic() + 30
            while os.path.getsize(path) == size and time.monotonic() < deadline:
                time.sleep(0.005)

    tok = fb.train(["hello world"] * 10, vocab_size=270)
    if entry == "encode":
        real = Tokenizer.encode_batch_flat

        def hooked(self, *args, **kwargs):
            cut()
            return real(self, *args, **kwargs)

        Tokenizer.encode_batch_flat = hooked
        return outcome(lambda: fb.encode_parquet(tok, path, os.path.join(workdir, "out"))["rows"])
    real_add = counting.WordCounter.add_batch

    def hooked_add(self, *args):
        cut()
        return real_add(self, *args)

    counting.WordCounter.add_batch = hooked_add
    return outcome(lambda: len(fb.train_files([path], vocab_size=300).merges))


def odd_types_report(workdir: str) -> dict:
    """Every entry point on text columns of unusual Arrow types; ids compared with the
    ``string`` column's (or, for invalid UTF-8, with ``encode_bytes`` of each row)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    import fastbpe_nb as fb

    docs = ["hello world", None, "naïve café 東京", "", "hello again world"] * 3
    raw = [None if d is None else d.encode() for d in docs]
    raw[3] = b"bad \xff\xfe utf-8 \xc3"  # binary columns may hold invalid UTF-8
    tok = fb.train([d for d in docs if d] * 5, vocab_size=300, special_tokens=["<|endoftext|>"])
    want_text = [None if d is None else tok.encode(d) for d in docs]
    want_raw = [None if r is None else tok.encode_bytes(r) for r in raw]
    # Training references: the same text as a string column, and the raw bytes (invalid
    # UTF-8 included) viewed as one, counted from memory.
    # Training reads files with one invalid-UTF-8 policy for every kind of input: each
    # invalid sequence becomes U+FFFD (and is counted), binary columns included.
    replaced = [None if r is None else r.decode("utf-8", "replace") for r in raw]
    refs = {"none": [], "text": fb.train(pa.array(docs, pa.string()), vocab_size=300).merges.tolist(),
            "raw": fb.train(pa.array(replaced, pa.string()), vocab_size=300).merges.tolist()}
    cols = {
        "binary": (pa.array(raw, pa.binary()), want_raw),
        "large_binary": (pa.array(raw, pa.large_binary()), want_raw),
        "dictionary": (pa.array(docs, pa.string()).dictionary_encode(), want_text),
        "dictionary_large": (pa.array(docs, pa.large_string()).dictionary_encode(), want_text),
        "string_view": (pa.array(docs, pa.string_view()), want_text),
        "binary_view": (pa.array(raw, pa.binary_view()), want_raw),
        "null": (pa.nulls(len(docs)), [None] * len(docs)),
        "int64": (pa.array(range(len(docs)), pa.int64()), None),
        "list": (pa.array([[1, 2]] * len(docs), pa.list_(pa.int32())), None),
        "list_of_string": (pa.array([["a"]] * len(docs), pa.list_(pa.string())), None),
        "struct": (pa.array([{"a": "x"}] * len(docs)), None),
        "fixed_size_binary": (pa.array([b"ab"] * len(docs), pa.binary(2)), None),
    }
    report = {}
    for name, (arr, want) in cols.items():
        out = {"want": want, "ref": "raw" if want is want_raw else "none" if name == "null" else "text"}
        arrow_path = os.path.join(workdir, name + ".arrow")
        table = pa.table({"text": arr, "n": pa.array(range(len(docs)))})
        with ipc.new_file(arrow_path, table.schema) as w:
            w.write_table(table)
        paths = {"arrow": arrow_path}
        try:
            paths["parquet"] = _write_parquet(workdir, name, arr)
            out["parquet_type"] = str(pq.read_schema(paths["parquet"]).field("text").type)
        except Exception as exc:  # pyarrow cannot store it in Parquet: nothing to test there
            out["parquet_type"] = f"unwritable: {exc}"
        out["arrow_type"] = str(arr.type)
        for kind, path in paths.items():
            dst = os.path.join(workdir, f"out-{name}-{kind}")
            out[f"encode_parquet[{kind}]"] = outcome(lambda: (
                fb.encode_parquet(tok, path, dst),
                pq.read_table(os.path.join(dst, os.path.basename(path).rsplit(".", 1)[0]
                                           + ".parquet")).column("ids").to_pylist())[1])
            out[f"train_files[{kind}]"] = outcome(lambda: fb.train_files(
                [path], vocab_size=300).merges.tolist())
        out["encode_batch"] = outcome(lambda: tok.encode_batch(arr).to_pylist())
        out["encode_batch_chunked"] = outcome(
            lambda: tok.encode_batch(pa.chunked_array([arr.slice(0, 4), arr.slice(4)])).to_pylist())
        out["count_tokens"] = outcome(lambda: tok.count_tokens(arr).tolist())
        report[name] = out
    report["_ref_merges"] = refs
    return report


def _write_parquet(workdir, name, arr):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(workdir, name + ".parquet")
    pq.write_table(pa.table({"text": arr, "n": pa.array(range(len(arr)))}), path)
    return path


def unique_words_corpus(path: str, n_words: int, seed: int = 0) -> int:
    """A text file of ``n_words`` random 4-12 letter words, nearly all distinct (a word
    table as large as the corpus: the hard case for training memory). Returns its size."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 13, size=n_words)
    ends = np.cumsum(lengths + 1)
    buf = np.full(int(ends[-1]), 32, dtype=np.uint8)
    is_letter = np.ones(len(buf), dtype=bool)
    is_letter[ends - 1] = False
    buf[is_letter] = rng.integers(97, 123, size=int(lengths.sum()), dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(buf.tobytes())
    return len(buf)


def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def train_under_budget(path: str, vocab_size: int, max_memory=None) -> dict:
    """``train_files`` on ``path`` with ``max_memory``; the outcome, the merges, and the
    peak RSS of the whole run and of its counting phase (VmHWM when counting returned)."""
    import hashlib

    import fastbpe_nb as fb
    from fastbpe_nb import training

    real_count = training.count_files
    seen = {}

    def count_files(*args, **kwargs):
        out = real_count(*args, **kwargs)
        seen["count_peak"] = _vm("VmHWM")
        return out

    training.count_files = count_files
    status, value = outcome(lambda: fb.train_files([path], vocab_size=vocab_size,
                                                   max_memory=max_memory).merges.tolist())
    return {"status": status, "value": value if status != "ok" else len(value),
            "merges_hash": (hashlib.sha256(str(value).encode()).hexdigest()
                            if status == "ok" else None),
            "count_peak": seen.get("count_peak"), "peak": _vm("VmHWM"), "max_memory": max_memory}


def huge_row_peak(workdir: str, mib: int, source: str, fmt: str) -> dict:
    """``encode_parquet`` of one file holding one row of ``mib`` MiB of prose (``source``:
    "parquet", written with pyarrow's defaults, or "arrow" IPC) into ``fmt``; the peak RSS
    it added (VmHWM reset just before the call), the row and ids sizes, the time. The
    file is written by an earlier call (returns None): memory freed after writing it would
    be reused by the encoder and hide part of its peak."""
    import time

    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    import fastbpe_nb as fb
    from rel_harness import prose

    path = os.path.join(workdir, f"huge.{source}")
    if not os.path.exists(path):
        block = prose(1 << 20, seed=1)
        table = pa.table({"text": pa.array([block * mib], pa.large_string())})
        if source == "parquet":
            pq.write_table(table, path)
        else:
            with ipc.new_file(path, table.schema) as w:
                w.write_table(table)
        return None
    tok = fb.train([prose(200_000, seed=2)], vocab_size=2000, special_tokens=["<|endoftext|>"])
    tok.encode_batch(pa.array(["warm up the kernels " * 100]))  # compile before measuring
    # The same call on a small file of the same kind, with one row just over a segment
    # (the segmented scan of long rows): on a cold Numba cache the kernels of this path
    # compile here, not in the measured call, whose peak their compiler memory would raise
    # by about 25 MB (CI once saw 168.8 MB against 149 MB warm). The row's few MiB, freed
    # and reusable, hide less than that.
    from fastbpe_nb._scanner import SEGMENT_BYTES

    small = os.path.join(workdir, f"small.{source}")
    long_row = prose(SEGMENT_BYTES + (64 << 10), seed=3)
    small_table = pa.table({"text": pa.array(["warm up " * 50, long_row], pa.large_string())})
    if source == "parquet":
        pq.write_table(small_table, small)
    else:
        with ipc.new_file(small, small_table.schema) as w:
            w.write_table(small_table)
    if fmt == "train":
        fb.train_files([small], vocab_size=300)
    else:
        fb.encode_parquet(tok, small, os.path.join(workdir, f"warm-{source}-{fmt}"), format=fmt)
    del small_table, long_row
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _vm("VmRSS")
    t0 = time.perf_counter()
    if fmt == "train":  # train_files instead: counting one huge row
        fb.train_files([path], vocab_size=1000)
        rep = {"tokens": 0}
    else:
        rep = fb.encode_parquet(tok, path, os.path.join(workdir, f"out-{source}-{fmt}"),
                                format=fmt)
    return {"added": _vm("VmHWM") - before, "row": mib << 20, "tokens": rep["tokens"],
            "seconds": time.perf_counter() - t0}


def _free_heap_bytes() -> int:
    """Bytes glibc's malloc holds free in its arenas (``mallinfo2().fordblks``, all arenas;
    0 where it cannot be asked): mapped already, so reusable under an address-space cap."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        return int(libc.mallinfo2().fordblks)
    except (OSError, AttributeError):
        return 0


def huge_row_out_of_memory(workdir: str, mib: int, fmt: str, spare: int) -> list:
    """The same encode with the address space capped so that about ``spare`` bytes are
    left for it (RLIMIT_AS): what the process has mapped now, less what malloc holds free
    in it (reusable without a new mapping: after Numba compiled kernels in this process,
    on a cold cache, that was enough for the encode to fit, and no error was raised), plus
    ``spare``. The outcome: a clear error, not a bare one."""
    import resource

    import pyarrow as pa
    import pyarrow.ipc as ipc

    import fastbpe_nb as fb
    from rel_harness import prose

    path = os.path.join(workdir, "huge.arrow")
    block = prose(1 << 20, seed=1)
    table = pa.table({"text": pa.array(["small row", block * mib], pa.large_string())})
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table)
    del table, block
    tok = fb.train([prose(200_000, seed=2)], vocab_size=2000, special_tokens=["<|endoftext|>"])
    tok.encode_batch(pa.array(["warm up the kernels " * 100]))
    fb.encode_parquet(tok, path, os.path.join(workdir, "warm"), format=fmt)  # all code paths
    limit = _vm("VmSize") - _free_heap_bytes() + spare
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return outcome(lambda: fb.encode_parquet(tok, path, os.path.join(workdir, "out"), format=fmt))
