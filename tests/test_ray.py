"""The Ray adapter gives one process's results byte for byte (issue 21).

One local Ray instance for the module (2 CPUs, no dashboard, bound to 127.0.0.1, its files
in a short temporary folder, token authentication without a token file in ~/.ray), shut
down by the fixture. Counts are compared with ``fastbpe count``'s file (its bytes) and
with ``count_files``' table, models with ``fb.train_files``' model file text, encodings
with one-process ``encode_parquet`` (every output file's bytes) and with ``tok.encode``
row by row. One test kills a worker with SIGKILL in the middle of ``encode_files``.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

import fastbpe_nb as fb  # noqa: E402
from fastbpe_nb.distributed import core  # noqa: E402
from fastbpe_nb.distributed import ray_engine as re_  # noqa: E402
from fastbpe_nb.errors import ClusterError  # noqa: E402
from fastbpe_nb.io.encode_files import encode_parquet  # noqa: E402
from fastbpe_nb.io.model_file import model_to_json  # noqa: E402
from fastbpe_nb.training import count_files, count_to_file  # noqa: E402

from fastbpe_nb.corpus import stdlib_texts  # noqa: E402

from presets import SAMPLE, build  # noqa: E402

#: Seconds any one cluster call may take before the test fails (a hang is a failure).
CALL_TIMEOUT = 120


def _documents():
    """Lines-groups of standard-library sources plus the multilingual sample, with nulls
    and empty rows (about 200 KB: the whole file stays fast on two cores)."""
    docs = []
    for text in stdlib_texts(200_000):
        lines = text.split("\n")
        docs += ["\n".join(lines[i:i + 7]) for i in range(0, len(lines), 7)]
    docs += SAMPLE + ["", None, "<|endoftext|> between <|endoftext|>"]
    random.Random(5).shuffle(docs)
    return docs


def _tree(folder):
    """``{relative path: bytes}`` of every file under ``folder``."""
    out = {}
    for where, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(where, name)
            out[os.path.relpath(path, folder)] = open(path, "rb").read()
    return out


def _temp_files(folder):
    return [n for _w, _d, names in os.walk(folder) for n in names if n.startswith(".tmp-")]


def _warm_kernels_here(tokenizers):
    """Compile (or load) the kernels in this process first: the workers then load them
    from the on-disk cache instead of compiling them all at once on a cold cache."""
    texts = pa.array(["Warm up: déjà vu 42 times.", None, ""])
    tables = [core.count_batch("gpt2", texts, i) for i in range(2)]
    core.combine_partitions([core.merge_count_tables(p) for p in
                             zip(*(core.partition_counts(t, 2) for t in tables))])
    for tok in tokenizers.values():
        tok.encode_batch(texts, num_threads=1, disallowed_special=())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Six Parquet files of many small row groups (one of them in a subfolder), listed in a
    shuffled order (the order is the corpus order: results must follow it)."""
    root = tmp_path_factory.mktemp("ray_corpus")
    docs = _documents()
    (root / "sub").mkdir()
    files = []
    for i in range(6):
        path = root / ("sub" if i == 4 else "") / f"part-{i}.parquet"
        pq.write_table(pa.table({"text": docs[i::6], "n": list(range(len(docs[i::6])))}),
                       path, row_group_size=37 + 11 * i)
        files.append(str(path))
    random.Random(2).shuffle(files)
    return files


@pytest.fixture(scope="module")
def tokenizers():
    return {"bytes": build("gpt2-bytes"), "sentencepiece": build("sp-byte-fallback")}


@pytest.fixture(scope="module")
def ray_session(tokenizers):
    """A local Ray for the module: its temporary folder is short (Ray puts Unix sockets
    there) and removed afterwards; ~/.ray must not be written."""
    _warm_kernels_here(tokenizers)
    home_ray = Path.home() / ".ray"
    existed = home_ray.exists()
    temp = tempfile.mkdtemp(prefix="fbray-", dir="/tmp")
    env = re_.start("local", temp_dir=temp, num_cpus=2)
    try:
        yield temp
    finally:
        re_.stop(env)
        shutil.rmtree(temp, ignore_errors=True)
    assert existed or not home_ray.exists(), "Ray wrote ~/.ray"


def _timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread, failing the test after CALL_TIMEOUT seconds."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=CALL_TIMEOUT)


def _same_table(table, reference):
    for got, want in zip(core.table_arrays(table), reference):
        np.testing.assert_array_equal(got, want)


def test_local_ray_is_loopback_and_imports_this_checkout(ray_session):
    """Every port Ray listens on is on 127.0.0.1 (nothing on all interfaces), and the
    workers run this checkout's fastbpe_nb (not another installed copy)."""
    @ray.remote
    def where():
        import fastbpe_nb

        return fastbpe_nb.__file__, os.getpid()

    path, _ = ray.get(where.remote())
    assert path == fb.__file__
    assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("no ss to list the listening sockets")
    ours = {str(p) for p in _ray_pids(ray_session)}
    listening = subprocess.run([ss, "-Hltnp"], capture_output=True, text=True).stdout
    ray_lines = [line for line in listening.splitlines()
                 if any(f"pid={p}," in line for p in ours)]
    assert ray_lines, listening
    for line in ray_lines:
        host = ipaddress.ip_address(line.split()[3].rpartition(":")[0].strip("[]"))
        host = getattr(host, "ipv4_mapped", None) or host  # [::ffff:127.0.0.1]
        assert host.is_loopback, line


def _ray_pids(temp):
    """Pids of the processes of our Ray instance (their command lines name its folder or
    are its workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if temp in cmd or cmd.startswith("ray::"):
            pids.append(int(entry))
    return pids


@pytest.mark.parametrize("n_partitions, n_tasks", [(1, None), (3, 4), (2, 1)])
def test_counts_file_equals_fastbpe_count(ray_session, corpus, tmp_path, n_partitions,
                                          n_tasks):
    """The counts file is byte for byte ``fastbpe count``'s, for files in a shuffled order,
    whatever the number of hash shards of the reduction and of files per counting task."""
    count_to_file(corpus, tmp_path / "one.arrow", special_tokens=["<|endoftext|>"])
    table, report = _timed(re_.count_words, corpus, special_tokens=["<|endoftext|>"],
                           n_partitions=n_partitions, n_tasks=n_tasks,
                           output=tmp_path / "ray.arrow", return_report=True)
    assert (tmp_path / "ray.arrow").read_bytes() == (tmp_path / "one.arrow").read_bytes()
    _, stats = count_files(corpus)
    assert report["documents"] == stats.documents and report["files"] == len(corpus)


def test_bad_file_skipped_and_reported(ray_session, corpus, tmp_path):
    """``on_bad_input="skip"``: the unreadable file is reported as skipped, as by one
    process; with "error" the task's CorpusReadError reaches the caller, naming the file."""
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    files = corpus[:2] + [str(bad)] + corpus[2:]
    counter, stats = count_files(files, on_bad_input="skip")
    table, report = _timed(re_.count_words, files, on_bad_input="skip", n_tasks=3,
                           return_report=True)
    assert [f["path"] for f in report["files_skipped"]] == [str(bad)]
    _same_table(table, counter.table())
    with pytest.raises(fb.CorpusReadError, match="bad.parquet") as raised:
        _timed(re_.count_words, files)
    assert not isinstance(raised.value, ray.exceptions.RayTaskError)  # ours, unwrapped


def _dataset_order_texts(ds):
    """The dataset's texts in its own order (``preserve_order``)."""
    ctx = ds.context.execution_options
    before, ctx.preserve_order = ctx.preserve_order, True
    try:
        return [t for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)
                for t in b.column("text").to_pylist()]
    finally:
        ctx.preserve_order = before


@pytest.mark.parametrize("blocks", ["read_parquet", "row_groups", "repartition"])
def test_dataset_counts_equal_one_process(ray_session, corpus, blocks):
    """A Ray Dataset in different block sizes (Ray's Parquet read units, one block per
    row group, a repartition into a few blocks) counts its rows in its own order exactly:
    the table one ``WordCounter`` gives over the same rows in that order."""
    if blocks == "row_groups":
        tables = [pq.ParquetFile(f).read_row_group(i, columns=["text"]) for f in corpus
                  for i in range(pq.ParquetFile(f).num_row_groups)]
        ds = ray.data.from_arrow(tables)
        want = [t for tb in tables for t in tb.column("text").to_pylist()]
    else:
        ds = ray.data.read_parquet(corpus).select_columns(["text"])
        if blocks == "repartition":
            ds = ds.repartition(5)
        want = None
    texts = _dataset_order_texts(ds)
    if want is not None:
        assert texts == want
    assert sorted(map(str, texts)) == sorted(map(str, [t for f in corpus for t in
                                                       pq.read_table(f)["text"].to_pylist()]))
    table, report = _timed(re_.count_words, ds, column="text", return_report=True)
    if blocks != "read_parquet":
        assert report["tasks"] > 1
    reference = core.count_batch("gpt2", pa.array(texts, pa.large_string()), 0)
    _same_table(table, core.table_arrays(reference))
    assert report["documents"] == sum(t is not None for t in texts)


def test_dataset_without_the_column(ray_session):
    ds = ray.data.from_arrow(pa.table({"body": ["a b", "c"]}))
    with pytest.raises(fb.CorpusReadError, match="no column 'text'"):
        _timed(re_.count_words, ds, column="text")
    with pytest.raises(ClusterError, match="on_bad_input"):
        re_.count_words(ds, column="body", on_bad_input="skip")


@pytest.mark.parametrize("tie_break", ["ids", "hf", "first", "bytes"])
def test_models_identical_to_train_files(ray_session, corpus, tie_break):
    want = fb.train_files(corpus, 420, tie_break=tie_break, special_tokens=["<|endoftext|>"])
    got = _timed(re_.train, corpus, 420, tie_break=tie_break, special_tokens=["<|endoftext|>"],
                 n_partitions=2)
    assert model_to_json(got) == model_to_json(want)


@pytest.mark.parametrize("fmt", ["parquet", "bin"])
@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_encode_files_equal_encode_parquet(ray_session, corpus, tokenizers, tmp_path, fmt,
                                           kind):
    """Same files at the same relative paths (a subfolder included), same bytes; a second
    run with resume skips every file."""
    tok = tokenizers[kind]
    options = dict(format=fmt, special="text")
    encode_parquet(tok, corpus, tmp_path / "one", **options)
    report = _timed(re_.encode_files, tok, corpus, tmp_path / "ray", **options)
    one, got = _tree(tmp_path / "one"), _tree(tmp_path / "ray")
    assert sorted(got) == sorted(one) and any(os.sep in p for p in one)
    assert got == one
    assert report["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in corpus)
    again = _timed(re_.encode_files, tok, corpus, tmp_path / "ray", **options)
    assert sorted(again["skipped_complete"]) == sorted(corpus)


@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_encode_dataset_row_aligned(ray_session, corpus, tokenizers, kind):
    """The ids column sits beside its text, row by row, in small batches; nulls stay null."""
    tok = tokenizers[kind]
    ds = ray.data.read_parquet(corpus)
    out = re_.encode_dataset(ds, tok, column="text", disallowed_special=(), batch_size=500)
    rows = _timed(out.take_all)
    assert len(rows) == sum(pq.ParquetFile(f).metadata.num_rows for f in corpus)
    assert any(r["text"] is None for r in rows)
    for row in rows:
        if row["text"] is None:
            assert row["ids"] is None
        else:
            assert list(row["ids"]) == tok.encode(row["text"], disallowed_special=())
    schema = out.schema()
    assert schema.base_schema.field("ids").type == pa.list_(pa.int32())


def test_sigkill_worker_during_encode_files(ray_session, corpus, tokenizers, tmp_path):
    """A worker killed by SIGKILL while it encodes a file: Ray retries the task, the retry
    removes the dead writer's temporary file, and the outputs are byte for byte one
    process's (no lost or duplicated rows, no temporary file left)."""
    tok = tokenizers["bytes"]
    big = []
    for i, path in enumerate(sorted(corpus)):
        rows = pq.read_table(path).column("text").to_pylist() * 20
        out = tmp_path / "in" / f"big-{i}.parquet"
        out.parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"text": rows}), out, row_group_size=50)
        big.append(str(out))
    encode_parquet(tok, big, tmp_path / "one", special="text")
    me = os.getpid()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(re_.encode_files, tok, big, tmp_path / "ray", special="text")
        # The victim: the worker writing an output now (the pid in its temporary file's
        # name), so that the kill lands in the middle of a file.
        victim, deadline = None, time.monotonic() + CALL_TIMEOUT
        while victim is None and time.monotonic() < deadline and not job.done():
            for name in _temp_files(tmp_path / "ray"):
                pid = int(name.split("-")[1])
                if pid != me:
                    victim = pid
            time.sleep(0.002)
        assert victim is not None, "no worker was seen writing an output"
        os.kill(victim, signal.SIGKILL)
        report = job.result(timeout=CALL_TIMEOUT)
    one, got = _tree(tmp_path / "one"), _tree(tmp_path / "ray")
    assert sorted(got) == sorted(one)
    assert got == one
    assert report["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in big)
    assert report["stale_temp_files_removed"] >= 1  # the retry cleaned the dead writer's file
    with pytest.raises(ProcessLookupError):
        os.kill(victim, 0)  # it did die mid-job


def test_num_threads_beyond_a_node_refused(ray_session, corpus):
    """A task asking more CPUs than any node has would wait for ever: refused at once."""
    with pytest.raises(ClusterError, match="num_threads=3"):
        re_.count_words(corpus, num_threads=3)


def test_cli_ray_flag_same_outputs(ray_session, corpus, tokenizers, tmp_path, monkeypatch):
    """``fastbpe count|train|encode --ray ADDRESS`` writes the files the commands write
    without it (the counts file, the model file, the encoded folder), byte for byte. The
    CLI connects to the module's Ray (``start``/``stop`` patched: one Ray per process)."""
    from fastbpe_nb.cli import main

    seen = []
    monkeypatch.setattr(re_, "start", lambda spec, temp_dir=None: seen.append(spec) or {})
    monkeypatch.setattr(re_, "stop", lambda env=None: None)
    tok_path = tmp_path / "tok.json"
    tokenizers["bytes"].save(tok_path)
    runs = {
        "count": lambda out, *flag: ["count", *corpus, "-o", str(out), "-q", *flag],
        "train": lambda out, *flag: ["train", *corpus, "-o", str(out), "--vocab-size", "400",
                                     "--tie-break", "first", "-q", *flag],
        "encode": lambda out, *flag: ["encode", "--model", str(tok_path), *corpus, "-o",
                                      str(out), "--format", "bin", "--special", "text", "-q",
                                      *flag],
    }
    for name, argv in runs.items():
        one, got = tmp_path / f"{name}-one", tmp_path / f"{name}-ray"
        if name != "encode":
            suffix = ".arrow" if name == "count" else ".json"
            one, got = one.with_suffix(suffix), got.with_suffix(suffix)
        assert main(argv(one)) == 0
        assert _timed(main, argv(got, "--ray", "auto")) == 0
        if name == "encode":
            assert _tree(got) == _tree(one)
        else:
            assert got.read_bytes() == one.read_bytes(), name
    assert seen == ["auto"] * 3


def test_cli_ray_flag_refusals(capsys, corpus, tmp_path):
    """Refused before Ray starts: --dask with --ray, and options the cluster path lacks."""
    from fastbpe_nb.cli import main

    with pytest.raises(SystemExit):
        main(["count", *corpus, "-o", str(tmp_path / "c.arrow"), "--dask", "local:1",
              "--ray", "local"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["train", *corpus, "-o", str(tmp_path / "t.json"), "--max-memory", "1G",
                 "--ray", "local"]) == 2
    assert "--max-memory is not supported with --ray" in capsys.readouterr().err
    # Not silently ignored: options the cluster training does not take.
    for flags, message in ((["--whitespace", "\u2581"], "--whitespace is not supported"),
                           (["--num-merges", "10"], "--num-merges is not supported"),
                           (["--base", "chars"], "byte-level models"),
                           (["--normalization", "NFKC"], "--normalization is not supported")):
        assert main(["train", *corpus, "-o", str(tmp_path / "t.json"), *flags,
                     "--ray", "local"]) == 2
        assert message in capsys.readouterr().err, flags


@pytest.mark.slow  # a second Ray start-up (about 10 s); the fixture covers start/stop
def test_cli_ray_local_for_real(corpus, tmp_path):
    """``fastbpe count --ray local`` for real, in a subprocess (one Ray per process): the
    counts file is ``fastbpe count``'s, and the run leaves neither its temporary folder
    nor a ~/.ray behind (HOME is a fresh folder)."""
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    before = set(os.listdir("/tmp"))
    count_to_file(corpus, tmp_path / "one.arrow")
    cmd = [sys.executable, "-m", "fastbpe_nb", "count", *corpus, "-o", str(tmp_path / "r.arrow"),
           "-q", "--ray", "local"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CALL_TIMEOUT,
                         cwd=Path(fb.__file__).parents[1])
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "r.arrow").read_bytes() == (tmp_path / "one.arrow").read_bytes()
    assert not (home / ".ray").exists()
    assert not [n for n in set(os.listdir("/tmp")) - before if n.startswith("fbray-")]
