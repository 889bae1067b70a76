"""The Ray adapter gives one process's results byte for byte (issue 21).

One local Ray instance for the module (2 CPUs, no dashboard, bound to 127.0.0.1, its files
in a short temporary folder, token authentication without a token file in ~/.ray), shut
down by the fixture. Counts are compared with ``fastbpe count``'s file (its bytes) and
with ``count_files``' table, models with ``fb.train_files``' model file text, encodings
in every format with one-process ``encode_parquet`` (every output file's bytes) and with
``tok.encode`` row by row. One test kills a worker with SIGKILL in the middle of
``encode_files``. The corpus, the one-process references and the checks are
``cluster_fixtures``' (shared with ``test_dask.py``). Datasets are built in memory
(``from_arrow``): a Parquet read costs Ray Data 10-30 s of start-up here, so
``ray.data.read_parquet`` itself is a slow test.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

import fastbpe_nb as fb  # noqa: E402
from fastbpe_nb.distributed import core  # noqa: E402
from fastbpe_nb.distributed import ray_engine as re_  # noqa: E402
from fastbpe_nb.errors import ClusterError  # noqa: E402
from fastbpe_nb.io.encode_files import encode_parquet  # noqa: E402
from fastbpe_nb.training import count_files, count_to_file  # noqa: E402

from presets import build  # noqa: E402

from cluster_fixtures import (CALL_TIMEOUT, ENCODE_CASES, SPECIALS, big_inputs,  # noqa: E402
                              check_cli_same_outputs, check_encode_files, check_train_all_rules,
                              check_resume_after_partial_run, corpus, dead, references,
                              in_thread, same_table, small_corpus, temp_files, timed, tokenizers,
                              total_rows, tree)

_ = (corpus, references, small_corpus, tokenizers)  # module fixtures used by name

#: One Ray instance for the module: under ``pytest -n 2 --dist loadgroup`` (``make test``)
#: all its tests run in one xdist worker instead of each worker starting its own.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def ray_session(tokenizers):
    """A local Ray for the module: its temporary folder is short (Ray puts Unix sockets
    there) and removed afterwards; ~/.ray must not be written."""
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


@pytest.fixture(scope="module")
def file_dataset(ray_session, corpus):
    """The corpus as a Ray Dataset of one block per file, in the listing's order (Ray
    Data's in-memory source: a Parquet read costs Ray Data 10-30 s of start-up here, so
    the read itself is the slow test ``test_read_parquet_dataset``)."""
    return ray.data.from_arrow([pq.read_table(f, columns=["text"]) for f in corpus])


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
def test_counts_file_equals_fastbpe_count(ray_session, corpus, references, tmp_path,
                                          n_partitions, n_tasks):
    """The counts file is byte for byte ``fastbpe count``'s, for files in a shuffled order,
    whatever the number of hash shards of the reduction (one, several) and of files per
    counting task (one each, runs of files, all in one task)."""
    table, report = timed(re_.count_words, corpus, special_tokens=SPECIALS,
                          n_partitions=n_partitions, n_tasks=n_tasks,
                          output=tmp_path / "ray.arrow", return_report=True)
    assert (tmp_path / "ray.arrow").read_bytes() == references.counts_file()
    assert report["tasks"] == min(len(corpus), n_tasks or len(corpus))
    stats = references.count_stats()
    assert report["documents"] == stats.documents and report["files"] == len(corpus)


def test_bad_file_skipped_and_reported(ray_session, corpus, tmp_path):
    """``on_bad_input="skip"``: the unreadable file is reported as skipped, as by one
    process; with "error" the task's CorpusReadError reaches the caller, naming the file."""
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    files = corpus[:2] + [str(bad)] + corpus[2:]
    counter, stats = count_files(files, on_bad_input="skip")
    table, report = timed(re_.count_words, files, on_bad_input="skip", n_tasks=3,
                           return_report=True)
    assert [f["path"] for f in report["files_skipped"]] == [str(bad)]
    same_table(table, counter.table())
    with pytest.raises(fb.CorpusReadError, match="bad.parquet") as raised:
        timed(re_.count_words, files)
    assert not isinstance(raised.value, ray.exceptions.RayTaskError)  # ours, unwrapped


def _dataset_order_texts(ds):
    """The dataset's texts in its own order (``preserve_order`` set on the dataset's own
    context, which is where execution reads it, not on the current one)."""
    ctx = ds.context.execution_options
    before, ctx.preserve_order = ctx.preserve_order, True
    try:
        return [t for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)
                for t in b.column("text").to_pylist()]
    finally:
        ctx.preserve_order = before


def _check_dataset_counts(ds, corpus, want=None, several=True):
    """``count_words(ds)`` is the table one ``WordCounter`` gives over the dataset's rows
    in its own order (``want``: that order, when the test knows it)."""
    texts = _dataset_order_texts(ds)
    if want is not None:
        assert texts == want
    assert sorted(map(str, texts)) == sorted(map(str, [t for f in corpus for t in
                                                       pq.read_table(f)["text"].to_pylist()]))
    table, report = timed(re_.count_words, ds, column="text", return_report=True)
    if several:
        assert report["tasks"] > 1
    reference = core.count_batch("gpt2", pa.array(texts, pa.large_string()), 0)
    same_table(table, core.table_arrays(reference))
    assert report["documents"] == sum(t is not None for t in texts)


@pytest.mark.parametrize("blocks", ["files", "row_groups", "repartition"])
def test_dataset_counts_equal_one_process(file_dataset, corpus, blocks):
    """A Ray Dataset in different block sizes (a file, a row group, a repartition into a
    few blocks run lazily inside ``count_words``) counts its rows in its own order
    exactly: the table one ``WordCounter`` gives over the same rows in that order."""
    if blocks == "row_groups":
        tables = [pq.ParquetFile(f).read_row_group(i, columns=["text"]) for f in corpus
                  for i in range(pq.ParquetFile(f).num_row_groups)]
        ds = ray.data.from_arrow(tables)
        want = [t for tb in tables for t in tb.column("text").to_pylist()]
    elif blocks == "files":
        ds, want = file_dataset, [t for f in corpus for t in pq.read_table(f)["text"].to_pylist()]
    else:
        ds, want = file_dataset.repartition(5), None
    _check_dataset_counts(ds, corpus, want)


@pytest.mark.slow  # Ray Data's Parquet start-up (10-30 s); the block handling is the fast cases'
def test_read_parquet_dataset(ray_session, corpus):
    """``ray.data.read_parquet`` as users write it (lazy: read inside ``count_words``, in
    Ray's Parquet read units), counted and encoded."""
    ds = ray.data.read_parquet(corpus).select_columns(["text"])
    _check_dataset_counts(ds, corpus, several=False)
    tok = build("gpt2-bytes")
    rows = timed(re_.encode_dataset(ds, tok, column="text", disallowed_special=()).take_all)
    assert len(rows) == total_rows(corpus)
    for row in rows:
        assert (row["ids"] is None if row["text"] is None else
                list(row["ids"]) == tok.encode(row["text"], disallowed_special=()))


def test_dataset_without_the_column(ray_session):
    ds = ray.data.from_arrow(pa.table({"body": ["a b", "c"]}))
    with pytest.raises(fb.CorpusReadError, match="no column 'text'"):
        timed(re_.count_words, ds, column="text")
    with pytest.raises(ClusterError, match="on_bad_input"):
        re_.count_words(ds, column="body", on_bad_input="skip")


def test_models_identical_to_train_files(ray_session, corpus, references, tmp_path):
    """Models byte-identical to ``fb.train_files`` for all four tie rules."""
    check_train_all_rules(re_.train, corpus, references, tmp_path)


@pytest.mark.parametrize("fmt, kind", ENCODE_CASES)
def test_encode_files_equal_encode_parquet(ray_session, small_corpus, tokenizers, references,
                                           tmp_path, fmt, kind):
    """Every format, byte-level and SentencePiece-style: the files of one
    ``encode_parquet`` call (inputs at three depths; training-stack formats with small
    shards, a validation split and a BOS), byte for byte; ids equal ``tok.encode`` row by
    row."""
    check_encode_files(re_.encode_files, tokenizers[kind], kind, small_corpus,
                       tmp_path / "ray", references, fmt)


def test_resume_after_partial_run(ray_session, small_corpus, tokenizers, references, tmp_path):
    check_resume_after_partial_run(re_.encode_files, tokenizers["bytes"], small_corpus,
                                   tmp_path / "ray", references)


def test_encode_dataset_row_aligned(file_dataset, corpus, tokenizers):
    """The ids columns sit beside their text, row by row, in small batches; nulls stay
    null. Both tokenizers in one pipeline (one Ray Data run): ``ids`` (the default
    name) byte-level, ``sp_ids`` SentencePiece-style."""
    names = {"bytes": "ids", "sentencepiece": "sp_ids"}
    out = file_dataset
    for kind, name in names.items():
        out = re_.encode_dataset(out, tokenizers[kind], column="text", disallowed_special=(),
                                 batch_size=500, **({} if name == "ids" else
                                                    {"output_column": name}))
    rows = timed(out.take_all)
    assert len(rows) == total_rows(corpus)
    assert any(r["text"] is None for r in rows)
    for kind, name in names.items():
        tok = tokenizers[kind]
        for row in rows:
            if row["text"] is None:
                assert row[name] is None
            else:
                assert list(row[name]) == tok.encode(row["text"], disallowed_special=()), kind
        assert out.schema().base_schema.field(name).type == pa.list_(pa.int32())


def test_sigkill_worker_during_encode_files(ray_session, corpus, tokenizers, tmp_path):
    """A worker killed by SIGKILL while it encodes a file (Megatron shards with a
    validation split): Ray retries the task, the retry removes the dead writer's
    temporary files, and the outputs are byte for byte one process's (no lost or
    duplicated rows, no temporary file left)."""
    tok = tokenizers["bytes"]
    big = big_inputs(corpus, tmp_path / "in")
    options = dict(special="text", format="megatron", shard_size="64k", val_fraction=0.1)
    encode_parquet(tok, big, tmp_path / "one", **options)
    me = os.getpid()
    # in_thread: a job that never ends fails the test at the timeout, not the whole run.
    job = in_thread(re_.encode_files, tok, big, tmp_path / "ray", **options)
    # The victim: the worker writing an output now (the pid in its temporary file's
    # name), so that the kill lands in the middle of a file.
    victim, deadline = None, time.monotonic() + CALL_TIMEOUT
    while victim is None and time.monotonic() < deadline and not job.done():
        for name in temp_files(tmp_path / "ray"):
            pid = int(name.split("-")[1])
            if pid != me:
                victim = pid
        time.sleep(0.002)
    assert victim is not None, "no worker was seen writing an output"
    os.kill(victim, signal.SIGKILL)
    report = job.result(timeout=CALL_TIMEOUT)
    one, got = tree(tmp_path / "one"), tree(tmp_path / "ray")
    assert sorted(got) == sorted(one)
    assert got == one
    assert report["rows"] == total_rows(big)
    assert report["stale_temp_files_removed"] >= 1  # the retry cleaned the dead writer's files
    assert dead(victim)  # it did die mid-job


def test_num_threads_beyond_a_node_refused(ray_session, corpus):
    """A task asking more CPUs than any node has would wait for ever: refused at once."""
    with pytest.raises(ClusterError, match="num_threads=3"):
        re_.count_words(corpus, num_threads=3)


def test_cli_ray_flag_same_outputs(ray_session, corpus, tokenizers, tmp_path, monkeypatch):
    """``fastbpe count|train|encode --ray ADDRESS`` writes the files the commands write
    without it (the counts file, the model file, a Megatron folder with a validation
    split), byte for byte. The CLI connects to the module's Ray (``start``/``stop``
    patched: one Ray per process)."""
    seen = []
    monkeypatch.setattr(re_, "start", lambda spec, temp_dir=None: seen.append(spec) or {})
    monkeypatch.setattr(re_, "stop", lambda env=None: None)
    check_cli_same_outputs(corpus, tokenizers, tmp_path, "--ray", "auto")
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
