"""The Dask adapter gives one process's results byte for byte (issue 21).

One ``LocalCluster`` of two one-thread worker processes on 127.0.0.1 for the module (no
dashboard, scratch space in a temporary folder), shut down by the fixture. Counts are
compared with ``fastbpe count``'s file (its bytes) and with ``count_files``' table, models
with ``fb.train_files``' model file text, encodings in every format with one-process
``encode_parquet`` (every output file's bytes) and with ``tok.encode`` row by row. One
test kills a worker with SIGKILL in the middle of ``encode_files``. The corpus, the
one-process references and the checks are ``cluster_fixtures``' (shared with
``test_ray.py``).
"""

from __future__ import annotations

import functools
import os
import random
import signal
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

import fastbpe_nb as fb  # noqa: E402
from fastbpe_nb.distributed import core  # noqa: E402
from fastbpe_nb.distributed import dask_engine as de  # noqa: E402
from fastbpe_nb.io.encode_files import encode_parquet  # noqa: E402
from fastbpe_nb.io.model_file import model_to_json  # noqa: E402
from fastbpe_nb.training import count_files, count_to_file  # noqa: E402

from cluster_fixtures import (CALL_TIMEOUT, ENCODE_CASES, SPECIALS, big_inputs,  # noqa: E402
                              check_cli_same_outputs, check_encode_files, check_train_all_rules,
                              check_resume_after_partial_run, corpus, dead, references,
                              in_thread, same_table, small_corpus, temp_files, timed, tokenizers,
                              total_rows, tree)

_ = (corpus, references, small_corpus, tokenizers)  # module fixtures used by name

#: One LocalCluster for the module: under ``pytest -n 2 --dist loadgroup`` (``make test``)
#: all its tests run in one xdist worker instead of each worker starting its own.
pytestmark = pytest.mark.xdist_group("dask")


@pytest.fixture(scope="module")
def client(tmp_path_factory, tokenizers):
    """A LocalCluster of two one-thread worker processes on 127.0.0.1 for the module."""
    from distributed import Client, LocalCluster

    scratch = tmp_path_factory.mktemp("dask_scratch")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, local_directory=str(scratch))
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close(timeout=30)
        cluster.close(timeout=30)


@pytest.mark.parametrize("n_partitions, n_tasks", [(1, None), (3, 4), (2, 1)])
def test_counts_file_equals_fastbpe_count(client, corpus, references, tmp_path, n_partitions,
                                          n_tasks):
    """The counts file is byte for byte ``fastbpe count``'s, for files in a shuffled order,
    whatever the number of hash shards of the reduction (one, several) and of files per
    counting task (one each, runs of files, all in one task)."""
    table, report = timed(de.count_words, corpus, client=client, special_tokens=SPECIALS,
                          n_partitions=n_partitions, n_tasks=n_tasks,
                          output=tmp_path / "dask.arrow", return_report=True)
    assert (tmp_path / "dask.arrow").read_bytes() == references.counts_file()
    assert report["tasks"] == min(len(corpus), n_tasks or len(corpus))
    stats = references.count_stats()
    assert report["documents"] == stats.documents and report["files"] == len(corpus)


def test_bad_file_skipped_and_reported(client, corpus, tmp_path):
    """``on_bad_input="skip"``: the unreadable file is reported as skipped, as by one
    process, and the counts of the others are exact; with "error" the task's
    CorpusReadError reaches the caller, naming the file."""
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    files = corpus[:2] + [str(bad)] + corpus[2:]
    counter, stats = count_files(files, on_bad_input="skip")
    table, report = timed(de.count_words, files, client=client, on_bad_input="skip",
                          n_tasks=3, return_report=True)
    assert [f["path"] for f in report["files_skipped"]] == [p for p, _ in stats.skipped_files]
    assert [f["path"] for f in report["files_skipped"]] == [str(bad)]
    same_table(table, counter.table())
    with pytest.raises(fb.CorpusReadError, match="bad.parquet"):
        timed(de.count_words, files, client=client)


@pytest.mark.parametrize("blocks", ["row_groups", "files", 3])
def test_dataframe_counts_equal_one_process(client, corpus, blocks):
    """A Dask dataframe in different block sizes (a row group, a file, a few files per
    partition) counts the words of the same files in the same order exactly."""
    dd = pytest.importorskip("dask.dataframe")

    ddf = dd.read_parquet(corpus, split_row_groups=blocks == "row_groups", columns=["text"])
    if blocks == 3:
        ddf = ddf.repartition(npartitions=3)
    assert ddf.npartitions > 1
    # dask lists the files sorted by path: that is this dataframe's corpus order.
    order = sorted(corpus)
    assert pa.array(ddf["text"].compute(), from_pandas=True).to_pylist() == [t for f in order
                                              for t in pq.read_table(f)["text"].to_pylist()]
    table = timed(de.count_words, ddf, column="text", client=client)
    same_table(table, count_files(order)[0].table())


def test_merge_is_order_free_and_shards_are_exact(corpus):
    """The core alone: merging per-file tables in any order, and reducing hash shards one by
    one, give the one-process table (so engines may finish tasks in any order)."""
    reference = count_files(corpus)[0].table()
    tables = [core.count_file(f, i)[0] for i, f in enumerate(corpus)]
    for seed in range(3):
        random.Random(seed).shuffle(tables)
        same_table(core.merge_count_tables(tables), reference)
        shards = [core.partition_counts(t, 4) for t in tables]
        reduced = [core.merge_count_tables([s[i] for s in shards]) for i in range(4)]
        words = [set(r.column("word").to_pylist()) for r in reduced]
        assert sum(map(len, words)) == len(set().union(*words))  # disjoint
        same_table(core.combine_partitions(reduced), reference)
    no_order = core.merge_count_tables([t.select(["word", "count"]).replace_schema_metadata(
        t.schema.metadata) for t in tables])
    with pytest.raises(fb.TrainingError, match="first"):
        core.train_from_count_tables(no_order, 300, tie_break="first")


def test_count_batch_and_counts_files(corpus, tmp_path):
    """``count_batch`` over record batches keyed by their index is the one-process table;
    a table without order is written as merged counts (``order: "bytes"``), which
    ``train_files`` refuses for ``first``, and ``read_counts`` gives a key only to a file
    in corpus order."""
    table = pa.concat_tables(pq.read_table(f) for f in corpus)
    reference = count_files(corpus)[0].table()
    batches = table.to_batches(max_chunksize=97)
    tables = [core.count_batch("gpt2", b, i) for i, b in enumerate(batches)]
    same_table(core.merge_count_tables(tables[::-1]), reference)
    texts = table.column("text").to_pylist()
    assert core.table_arrays(core.count_batch("gpt2", [t for t in texts if t is not None]))[2] \
        .sum() == reference[2].sum()
    count_to_file(corpus, tmp_path / "one.arrow")
    same_table(core.read_counts(tmp_path / "one.arrow", 0), reference)
    unordered = core.merge_count_tables([t.drop_columns(list(core.ORDER_COLUMNS))
                                         for t in tables])
    core.write_counts(unordered, tmp_path / "merged.arrow")
    with pytest.raises(fb.TrainingError, match="first"):
        fb.train_files([tmp_path / "merged.arrow"], 300, tie_break="first")
    with pytest.raises(fb.ModelFormatError, match="order"):
        core.read_counts(tmp_path / "merged.arrow", 0)
    a = fb.train_files([tmp_path / "merged.arrow"], 300, tie_break="bytes")
    b = core.train_from_count_tables(unordered, 300, tie_break="bytes")
    assert model_to_json(a) == model_to_json(b)


def test_merge_exact_when_words_share_a_hash(corpus, monkeypatch):
    """Different words with one hash are told apart by their bytes: with an 8-bit hash
    (thousands of collisions) the merge still equals one process's table."""
    reference = count_files(corpus)[0].table()
    tables = [core.count_file(f, i)[0] for i, f in enumerate(corpus)]
    real = core.word_hashes
    monkeypatch.setattr(core, "word_hashes", lambda words: real(words) >> np.uint64(56))
    merged = core.merge_count_tables(tables[::-1])
    assert len(set(core.word_hashes(merged).tolist())) < merged.num_rows // 2
    same_table(merged, reference)
    same_table(core.combine_partitions([core.merge_count_tables([t]) for t in
                                         core.partition_counts(merged, 3)]), reference)


def test_word_hashes_are_stable():
    """The shard of a word must not depend on the process (PYTHONHASHSEED, machine): these
    values are FNV-1a 64 + splitmix64 of the bytes, fixed once for all."""
    def spec(word: bytes) -> int:
        mask, h = 2**64 - 1, 14695981039346656037
        for byte in word:
            h = ((h ^ byte) * 1099511628211) & mask
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) & mask
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) & mask
        return h ^ (h >> 31)

    words = [b"a", b"hello", b" world", "déjà".encode(), bytes(range(256))]
    got = core.word_hashes(pa.array(words, pa.large_binary())).tolist()
    assert got == [spec(w) for w in words]
    assert got[0] == 198367012849983736  # pinned: a changed hash moves words between shards


def test_models_identical_to_train_files(client, corpus, references, tmp_path):
    """Models byte-identical to ``fb.train_files`` for all four tie rules."""
    check_train_all_rules(functools.partial(de.train, client=client), corpus, references,
                          tmp_path)


@pytest.mark.parametrize("fmt, kind", ENCODE_CASES)
def test_encode_files_equal_encode_parquet(client, small_corpus, tokenizers, references,
                                           tmp_path, fmt, kind):
    """Every format, byte-level and SentencePiece-style: the files of one
    ``encode_parquet`` call (inputs at three depths; training-stack formats with small
    shards, a validation split and a BOS), byte for byte; ids equal ``tok.encode`` row by
    row."""
    run = functools.partial(de.encode_files, client=client)
    check_encode_files(run, tokenizers[kind], kind, small_corpus, tmp_path / "dask",
                       references, fmt)


def test_resume_after_partial_run(client, small_corpus, tokenizers, references, tmp_path):
    run = functools.partial(de.encode_files, client=client)
    check_resume_after_partial_run(run, tokenizers["bytes"], small_corpus, tmp_path / "dask",
                                   references)


@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_encode_dataframe_row_aligned(client, corpus, tokenizers, kind):
    dd = pytest.importorskip("dask.dataframe")

    tok = tokenizers[kind]
    ddf = dd.read_parquet(corpus, split_row_groups=True)
    ids = timed(de.encode_dataframe(ddf, tok, column="text", client=client,
                                    disallowed_special=()).compute)
    frame = ddf.compute()
    assert list(ids.index) == list(frame.index) and len(ids) == len(frame)
    texts = pa.array(frame["text"], from_pandas=True).to_pylist()
    got = pa.array(ids.array).to_pylist()
    assert pa.array(ids.array).type == pa.list_(pa.int32())
    assert any(t is None for t in texts)
    for text, row in zip(texts, got):
        if text is None:
            assert row is None
        else:
            assert list(row) == tok.encode(text, disallowed_special=())


def test_cli_dask_flag_same_outputs(client, corpus, tokenizers, tmp_path):
    """``fastbpe count|train|encode --dask ADDRESS`` writes the files the commands write
    without it (the counts file, the model file, a Megatron folder with a validation
    split), byte for byte."""
    check_cli_same_outputs(corpus, tokenizers, tmp_path, "--dask", client.scheduler.address)


def test_cli_dask_flag_refusals(capsys, corpus, tmp_path):
    from fastbpe_nb.cli import main

    assert main(["count", *corpus, "-o", str(tmp_path / "c.arrow"), "--dask", "local:x"]) == 2
    assert "local:N" in capsys.readouterr().err
    assert main(["train", *corpus, "-o", str(tmp_path / "t.json"), "--max-memory", "1G",
                 "--dask", "local:1"]) == 2
    assert "--max-memory is not supported with --dask" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--normalization", "NFC"], "--normalization is not supported with --dask"),
    (["--whitespace", "\u2581"], "--whitespace is not supported with --dask"),
    (["--base", "chars"], "--dask trains byte-level models"),
])
def test_cli_dask_refuses_what_it_cannot_run(tmp_path, capsys, flags, message):
    from fastbpe_nb.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    assert main(["train", str(corpus), "-o", str(tmp_path / "t.json"), "--dask", "local:1",
                 *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_sigkill_worker_during_encode_files(client, corpus, tokenizers, tmp_path):
    """A worker killed by SIGKILL while it encodes a file: Dask retries the task on a
    worker, the retry removes the dead writer's temporary file, and the outputs are
    byte for byte one process's (no lost or duplicated rows, no temporary file left).
    Last in the module: the nanny restarts the worker meanwhile (nothing waits for it)."""
    tok = tokenizers["bytes"]
    big = big_inputs(corpus, tmp_path / "in")
    encode_parquet(tok, big, tmp_path / "one", special="text")
    pids = client.run(os.getpid)
    # in_thread: a job that never ends fails the test at the timeout, not the whole run.
    job = in_thread(de.encode_files, tok, big, tmp_path / "dask", client=client,
                    special="text")
    # The victim: the worker writing an output now (the pid in its temporary file's
    # name), so that the kill lands in the middle of a file.
    victim, deadline = None, time.monotonic() + CALL_TIMEOUT
    while victim is None and time.monotonic() < deadline and not job.done():
        for name in temp_files(tmp_path / "dask"):
            pid = int(name.split("-")[1])
            victim = next((w for w, p in pids.items() if p == pid), None)
        time.sleep(0.002)
    assert victim is not None, "no worker was seen writing an output"
    os.kill(pids[victim], signal.SIGKILL)
    report = job.result(timeout=CALL_TIMEOUT)
    assert not job.exception()
    one, dask = tree(tmp_path / "one"), tree(tmp_path / "dask")
    assert sorted(dask) == sorted(one)
    assert dask == one
    assert report["rows"] == total_rows(big)
    assert dead(pids[victim])  # it did die mid-job
