"""What the cluster tests share (``test_dask.py``, ``test_ray.py``): both engines are held to
the same one-process results on the same inputs, so they use one corpus, one set of
tokenizers, one set of one-process references and the same comparisons.

Fixtures (session-scoped, so both modules share them; a test module imports the ones it
uses): ``tokenizers``, ``corpus``
(six Parquet files, one in a subfolder, in a shuffled order), ``small_corpus`` (three small
files at three depths, for the encoding formats: the layout matters there, the size does
not), ``references`` (one-process outputs, each computed once).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastbpe_nb as fb
from fastbpe_nb.corpus import stdlib_texts
from fastbpe_nb.distributed import core
from fastbpe_nb.io.encode_files import encode_parquet
from fastbpe_nb.io.model_file import model_to_json
from fastbpe_nb.io.token_formats import TOKEN_FORMATS, val_mask
from fastbpe_nb.training import count_files, count_to_file

from presets import SAMPLE, build

#: Seconds any one cluster call may take before the test fails (a hang is a failure).
CALL_TIMEOUT = 120
SPECIALS = ["<|endoftext|>"]


def documents(max_bytes=120_000):
    """Line groups of standard-library sources plus the multilingual sample, with nulls,
    empty rows and special-token text (about ``max_bytes``: enough words for ties and
    shards, small enough that the cluster tests stay fast on two cores)."""
    docs = []
    for text in stdlib_texts(max_bytes):
        lines = text.split("\n")
        docs += ["\n".join(lines[i:i + 7]) for i in range(0, len(lines), 7)]
    docs += SAMPLE + ["", None, "<|endoftext|> between <|endoftext|>", None]
    random.Random(5).shuffle(docs)
    return docs


#: Fixture values by name: a fixture function imported into two test modules is two
#: fixtures to pytest (one value each, even session-scoped), so the values are kept here,
#: once per process, for both modules.
_SHARED: dict = {}


def _shared(name, make):
    if name not in _SHARED:
        _SHARED[name] = make()
    return _SHARED[name]


def write_parquet(path, texts, row_group_size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"text": pa.array(texts, pa.string()),
                             "n": list(range(len(texts)))}), path, row_group_size=row_group_size)
    return str(path)


@pytest.fixture(scope="session")
def tokenizers():
    """A byte-level and a SentencePiece-style tokenizer, kernels warmed in this process
    first: the workers then load them from the on-disk cache instead of all compiling
    them at once on a cold cache."""
    return _shared("tokenizers", _warmed_tokenizers)


def _warmed_tokenizers():
    toks = {"bytes": build("gpt2-bytes"), "sentencepiece": build("sp-byte-fallback")}
    texts = pa.array(["Warm up: déjà vu 42 times.", None, ""])
    tables = [core.count_batch("gpt2", texts, i) for i in range(2)]
    core.combine_partitions([core.merge_count_tables(p) for p in
                             zip(*(core.partition_counts(t, 2) for t in tables))])
    for tok in toks.values():
        for threads in (1, 2):
            tok.encode_batch(texts, num_threads=threads, disallowed_special=())
    return toks


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """Six Parquet files of many small row groups (one of them in a subfolder), listed in a
    shuffled order (the order is the corpus order: results must follow it)."""
    def make():
        root = tmp_path_factory.mktemp("cluster_corpus")
        docs = documents()
        files = [write_parquet(root / ("sub" if i == 4 else "") / f"part-{i}.parquet",
                               docs[i::6], 37 + 11 * i) for i in range(6)]
        random.Random(1).shuffle(files)
        return files
    return _shared("corpus", make)


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """Three small Parquet files at three depths (``a``, ``sub/b``, ``sub/deeper/c``) with
    nulls, empty rows and special-token text: the training-stack formats name their
    shards and draw their validation split by the path under the output folder."""
    def make():
        root = tmp_path_factory.mktemp("cluster_small")
        docs = documents(30_000)
        where = ["a", os.path.join("sub", "b"), os.path.join("sub", "deeper", "c")]
        return [write_parquet(root / f"{name}.parquet", docs[i::3], 29 + 7 * i)
                for i, name in enumerate(where)]
    return _shared("small_corpus", make)


class References:
    """One-process results, each computed once (several tests of both engines compare
    with them)."""

    def __init__(self, folder, corpus):
        self.folder, self.corpus = folder, corpus
        self._done = {}

    def _once(self, key, make):
        if key not in self._done:
            self._done[key] = make()
        return self._done[key]

    def counts_file(self):
        """``fastbpe count``'s file of the corpus (with ``<|endoftext|>``): its bytes."""
        def make():
            path = self.folder / "counts.arrow"
            count_to_file(self.corpus, path, special_tokens=SPECIALS)
            return path.read_bytes()
        return self._once("counts", make)

    def count_stats(self):
        return self._once("stats", lambda: count_files(self.corpus)[1])

    def encoded(self, tok_kind, tok, inputs, **options):
        """``{relative path: bytes}`` of one ``encode_parquet`` call."""
        key = ("encode", tok_kind, tuple(inputs), json.dumps(options, sort_keys=True))

        def make():
            out = self.folder / f"enc-{len(self._done)}"
            encode_parquet(tok, inputs, out, **options)
            return tree(out)
        return self._once(key, make)


@pytest.fixture(scope="session")
def references(tmp_path_factory, corpus):
    return _shared("references",
                   lambda: References(tmp_path_factory.mktemp("one_process"), corpus))


def in_thread(fn, *args, **kwargs) -> concurrent.futures.Future:
    """``fn(*args, **kwargs)`` started in a daemon thread; its Future.

    Not a ThreadPoolExecutor: leaving its ``with`` block (and the interpreter's exit) joins
    the thread, so a cluster call that never returns hung the whole run although
    ``result(timeout=...)`` had raised. Nobody joins this thread: the timeout fails the
    test and the session goes on."""
    import threading

    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=run, name="cluster-call", daemon=True).start()
    return future


def timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread, failing the test after CALL_TIMEOUT seconds."""
    return in_thread(fn, *args, **kwargs).result(timeout=CALL_TIMEOUT)


def same_table(table, reference):
    """A counts table holds exactly ``reference`` (``(word_bytes, offsets, counts)``)."""
    for got, want in zip(core.table_arrays(table), reference):
        np.testing.assert_array_equal(got, want)


def tree(folder):
    """``{relative path: bytes}`` of every file under ``folder``."""
    out = {}
    for where, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(where, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def temp_files(folder):
    return [n for _w, _d, names in os.walk(folder) for n in names if n.startswith(".tmp-")]


def dead(pid) -> bool:
    """The process is gone or a zombie (killed, not reaped yet by its parent)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def total_rows(files):
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def big_inputs(corpus, folder, times=8):
    """The corpus' files with their rows repeated: enough work per file that an encoding
    task is surely running when a test kills its worker."""
    out = []
    for i, path in enumerate(sorted(corpus)):
        rows = pq.read_table(path).column("text").to_pylist() * times
        out.append(write_parquet(folder / f"big-{i}.parquet", rows, 50))
    return out


#: Options of the training-stack formats on a cluster: every format with a validation
#: split and small shards (several per file) and a BOS; mds also in llm-foundry's concat
#: mode. ``bos`` is the tokenizer's id 7 (any id in the vocabulary is accepted).
FORMAT_OPTIONS = {
    "megatron": dict(shard_size=3000, val_fraction=0.3, seed=3),
    "datatrove": dict(shard_size=3000, val_fraction=0.3, seed=4),
    "nanogpt": dict(shard_size=3000, val_fraction=0.3, seed=5),
    "llmc": dict(shard_size=4000, val_fraction=0.3, seed=6),
    "mds": dict(shard_size=3000, val_fraction=0.3, seed=7, concat_tokens=100),
    "litdata": dict(shard_size=3000, val_fraction=0.3, seed=8),
}
assert sorted(FORMAT_OPTIONS) == sorted(TOKEN_FORMATS)  # a new format must be listed here


def format_options(fmt, kind):
    """The byte-level tokenizer gets the options above, the SentencePiece-style one the
    format's defaults (one shard, no split) with a BOS: both layouts are compared."""
    base = dict(format=fmt, special="text", bos=7)
    return dict(base, **FORMAT_OPTIONS[fmt]) if kind == "bytes" else base


def check_token_ids(tok, out, fmt):
    """Every document in the token files under ``out`` (read by ``fb.read_tokens``, which
    shares no code with the writers) is ``tok.encode`` of its input row with the
    recorded BOS and separator, every non-null row is there once, in its input's order,
    and in the split the seeded hash of (seed, the input's relative path, the row) picks.
    Returns the number of documents checked."""
    markers = [os.path.join(w, n) for w, _d, names in os.walk(out) for n in names
               if n.endswith(f".{fmt}.json")]
    owner = {}
    for path in markers:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        for entry in meta["files"]:
            owner[os.path.normpath(os.path.join(out, entry["path"]))] = (path, meta)
    data = fb.read_tokens(out)
    assert data.format == fmt
    got = {}  # (marker, split) -> documents, in the order the marker lists its files
    for part in data.parts:
        marker, meta = owner[os.path.normpath(part.path)]
        paths = [os.path.normpath(os.path.join(out, e["path"])) for e in meta["files"]]
        docs = [np.asarray(part.ids[part.offsets[i]:part.offsets[i + 1]]).tolist()
                for i in range(part.documents)]
        got.setdefault((marker, part.split), []).append((paths.index(os.path.normpath(part.path)),
                                                         docs))
    checked = 0
    for marker in markers:
        with open(marker, encoding="utf-8") as f:
            meta = json.load(f)
        texts = pq.read_table(meta["input"]["path"], columns=["text"]).column("text").to_pylist()
        rows = [i for i, t in enumerate(texts) if t is not None]
        pre = [] if meta["bos_id"] is None else [meta["bos_id"]]
        sep = [meta["separator_id"]]
        want = {"train": [], "val": []}
        to_val = (val_mask(meta["seed"], meta["base"], np.array(rows, np.int64),
                           meta["val_fraction"]) if meta["val_fraction"] else
                  np.zeros(len(rows), bool))
        for row, val in zip(rows, to_val):
            ids = tok.encode(texts[row], disallowed_special=())
            doc = sep + pre + ids if fmt == "llmc" else pre + ids + sep
            want["val" if val else "train"].append(doc)
        for split, docs in want.items():
            found = [d for _k, ds in sorted(got.get((marker, split), [])) for d in ds]
            if meta.get("concat_tokens"):  # fixed-length samples: the same token stream
                assert sum(found, []) == sum(docs, []), (marker, split)
            else:
                assert found == docs, (marker, split)
            checked += len(docs)
    return checked


#: (format, tokenizer) cases of ``encode_files``: every format, byte-level and
#: SentencePiece-style.
ENCODE_CASES = [pytest.param(fmt, kind, id=f"{fmt}-{kind}")
                for fmt in ("parquet", "bin", *TOKEN_FORMATS)
                for kind in ("bytes", "sentencepiece")]


def encode_options(fmt, kind):
    if fmt in TOKEN_FORMATS:
        return format_options(fmt, kind)
    return dict(format=fmt, special="text")


def check_ids(tok, inputs, out, fmt):
    """The ids in ``out`` are ``tok.encode`` of each input row (nulls kept as nulls in
    Parquet, left out of the flat formats), read back by ``pq`` / ``fb.read_tokens``.
    Returns the number of non-null rows checked."""
    from fastbpe_nb.io.encode_plan import plan_jobs

    if fmt in TOKEN_FORMATS:
        return check_token_ids(tok, out, fmt)
    checked = 0
    for job in plan_jobs(inputs, out, fmt)[0]:
        texts = pq.read_table(job.path, columns=["text"]).column("text").to_pylist()
        want = [None if t is None else tok.encode(t, disallowed_special=()) for t in texts]
        if fmt == "parquet":
            assert pq.read_table(job.outs[0]).column("ids").to_pylist() == want, job.path
        else:
            with open(job.outs[2], encoding="utf-8") as f:
                sep = json.load(f)["separator_id"]
            data = fb.read_tokens(job.outs[0])
            got = [data.document(i).tolist() for i in range(data.documents)]
            assert got == [w + [sep] for w in want if w is not None], job.path
        checked += sum(w is not None for w in want)
    return checked


def check_encode_files(run, tok, kind, inputs, out, references, fmt):
    """``run(tok, inputs, out, **options)`` (an engine's ``encode_files``) writes the files
    of one ``encode_parquet`` call byte for byte (inputs in subfolders), and their ids are
    ``tok.encode`` row by row. (Resuming is ``check_resume_after_partial_run``'s: with the
    same bytes, a cluster output resumes as one process's does in every format.)"""
    options = encode_options(fmt, kind)
    one = references.encoded(kind, tok, inputs, **options)
    report = timed(run, tok, inputs, out, **options)
    got = tree(out)
    assert sorted(got) == sorted(one)
    assert any(os.sep in p for p in one)  # outputs in subfolders
    assert got == one
    assert report["rows"] == total_rows(inputs)
    non_null = sum(t is not None for f in inputs
                   for t in pq.read_table(f, columns=["text"]).column("text").to_pylist())
    assert check_ids(tok, inputs, out, fmt) == non_null


def dead_pid() -> int:
    """The id of a process that has exited (a killed writer's)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def check_resume_after_partial_run(run, tok, inputs, out, references, fmt="megatron"):
    """After a run cut short (one input's output complete, one whose shards were renamed
    but whose marker was never written, one with a shard cut short, dead writers'
    temporary files beside the shards and in a folder this run does not write to),
    ``resume`` keeps the complete output, encodes the others again and removes the
    leftovers: the tree is one process's, byte for byte."""
    from fastbpe_nb.io.atomic import _HOST

    options = encode_options(fmt, "bytes")
    one = references.encoded("bytes", tok, inputs, **options)
    timed(run, tok, inputs, out, **options)
    assert tree(out) == one
    first, second, third = sorted(inputs)  # a, sub/b, sub/deeper/c

    def rel(path):
        return os.path.splitext(os.path.relpath(path, os.path.dirname(first)))[0]

    rel_b, rel_c = rel(second), rel(third)
    os.unlink(out / f"{rel_b}.{fmt}.json")  # killed before its marker was written
    with open(out / f"{rel_c}.{fmt}.json", encoding="utf-8") as f:
        shard = json.load(f)["files"][0]["path"]
    with open(out / shard, "r+b") as f:  # a shard cut short
        f.truncate(os.path.getsize(out / shard) // 2)
    pid = dead_pid()
    stale = out / os.path.dirname(shard) / f".tmp-{pid}-{_HOST}-0badc0de-x.bin"
    stale.write_bytes(b"a killed writer's partial shard")
    gone = out / "gone"  # a folder no job of this run writes into (one process cleans it too)
    gone.mkdir()
    (gone / f".tmp-{pid}-{_HOST}-0badc0df-y.bin").write_bytes(b"older leftovers")
    report = timed(run, tok, inputs, out, resume=True, **options)
    assert report["skipped_complete"] == [first]
    assert [r["path"] for r in report["reencoded"]] == [third]
    assert "incomplete" in report["reencoded"][0]["reason"]
    assert sorted(f["path"] for f in report["files"]) == sorted([second, third])
    assert report["stale_temp_files_removed"] == 2
    assert tree(out) == one


def cli_runs(corpus, tok_path):
    """``fastbpe count|train|encode`` argument lists: ``run(out, *flag)``."""
    return {
        "count": lambda out, *flag: ["count", *corpus, "-o", str(out), "-q", *flag],
        "train": lambda out, *flag: ["train", *corpus, "-o", str(out), "--vocab-size", "400",
                                     "--tie-break", "first", "-q", *flag],
        "encode": lambda out, *flag: ["encode", "--model", str(tok_path), *corpus, "-o",
                                      str(out), "--format", "megatron", "--val-fraction",
                                      "0.2", "--special", "text", "-q", *flag],
    }


def check_cli_same_outputs(corpus, tokenizers, tmp_path, *flag):
    """``fastbpe count|train|encode ... *flag`` write the files the commands write without
    it (the counts file, the model file, the encoded folder), byte for byte."""
    from fastbpe_nb.cli import main

    tok_path = tmp_path / "tok.json"
    tokenizers["bytes"].save(tok_path)
    for name, argv in cli_runs(corpus, tok_path).items():
        suffix = {"count": ".arrow", "train": ".json", "encode": ""}[name]
        one, got = tmp_path / f"{name}-one{suffix}", tmp_path / f"{name}-cluster{suffix}"
        assert main(argv(one)) == 0
        assert timed(main, argv(got, *flag)) == 0
        if name == "encode":
            assert tree(got) == tree(one)
        else:
            assert got.read_bytes() == one.read_bytes(), name


def check_train_all_rules(train, corpus, references, out):
    """``train`` (an engine's, its cluster bound) gives ``fb.train_files``' model file for
    every tie rule: end to end with ``first`` (the rule that needs the corpus order), the
    other rules from the counts that run wrote (``counts_output``: ``fastbpe count``'s
    file), as ``train`` does after counting (``core.train_by``): one cluster counting for
    the four rules."""
    want = {rule: fb.train_files(corpus, 420, tie_break=rule, special_tokens=SPECIALS)
            for rule in ("ids", "hf", "first", "bytes")}
    got = timed(train, corpus, 420, tie_break="first", special_tokens=SPECIALS,
                n_partitions=2, counts_output=out / "counts.arrow")
    assert model_to_json(got) == model_to_json(want["first"])
    assert (out / "counts.arrow").read_bytes() == references.counts_file()
    table = core.read_counts(out / "counts.arrow", 0)
    for rule in ("ids", "hf", "bytes"):
        got = core.train_from_count_tables(table, 420, tie_break=rule)
        assert model_to_json(got) == model_to_json(want[rule]), rule
