"""The Dask adapter gives one process's results byte for byte (issue 21).

One ``LocalCluster`` of two one-thread worker processes on 127.0.0.1 for the module (no
dashboard, scratch space in a temporary folder), shut down by the fixture. Counts are
compared with ``fastbpe count``'s file (its bytes) and with ``count_files``' table, models
with ``fb.train_files``' model file text, encodings with one-process ``encode_parquet``
(every output file's bytes) and with ``tok.encode`` row by row. The last test kills a
worker with SIGKILL in the middle of ``encode_files``.
"""

from __future__ import annotations

import concurrent.futures
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
from fastbpe_nb.corpus import stdlib_texts  # noqa: E402
from fastbpe_nb.distributed import core  # noqa: E402
from fastbpe_nb.distributed import dask_engine as de  # noqa: E402
from fastbpe_nb.io.encode_files import encode_parquet  # noqa: E402
from fastbpe_nb.io.model_file import model_to_json  # noqa: E402
from fastbpe_nb.training import count_files, count_to_file  # noqa: E402

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


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Six Parquet files of many small row groups (one of them in a subfolder), listed in a
    shuffled order (the order is the corpus order: results must follow it)."""
    root = tmp_path_factory.mktemp("dask_corpus")
    docs = _documents()
    (root / "sub").mkdir()
    files = []
    for i in range(6):
        path = root / ("sub" if i == 4 else "") / f"part-{i}.parquet"
        pq.write_table(pa.table({"text": docs[i::6], "n": list(range(len(docs[i::6])))}),
                       path, row_group_size=37 + 11 * i)
        files.append(str(path))
    random.Random(1).shuffle(files)
    return files


def _warm_kernels_here(tokenizers):
    """Compile (or load) the kernels in this process first: the workers then load them
    from the on-disk cache instead of compiling them all at once on a cold cache."""
    texts = pa.array(["Warm up: déjà vu 42 times.", None, ""])
    tables = [core.count_batch("gpt2", texts, i) for i in range(2)]
    core.combine_partitions([core.merge_count_tables(p) for p in
                             zip(*(core.partition_counts(t, 2) for t in tables))])
    for tok in tokenizers.values():
        tok.encode_batch(texts, num_threads=1, disallowed_special=())
        tok.encode_batch(texts, num_threads=2, disallowed_special=())


@pytest.fixture(scope="module")
def client(tmp_path_factory, tokenizers):
    from distributed import Client, LocalCluster

    _warm_kernels_here(tokenizers)
    scratch = tmp_path_factory.mktemp("dask_scratch")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, local_directory=str(scratch))
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close(timeout=30)
        cluster.close(timeout=30)


def _timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread, failing the test after CALL_TIMEOUT seconds."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=CALL_TIMEOUT)


def _same_table(table, reference):
    for got, want in zip(core.table_arrays(table), reference):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n_partitions, n_tasks", [(1, None), (3, None), (2, 4), (3, 1)])
def test_counts_file_equals_fastbpe_count(client, corpus, tmp_path, n_partitions, n_tasks):
    """The counts file is byte for byte ``fastbpe count``'s, for files in a shuffled order,
    whatever the number of hash shards of the reduction and of files per counting task."""
    count_to_file(corpus, tmp_path / "one.arrow", special_tokens=["<|endoftext|>"])
    table, report = _timed(de.count_words, corpus, client=client,
                           special_tokens=["<|endoftext|>"], n_partitions=n_partitions,
                           n_tasks=n_tasks, output=tmp_path / "dask.arrow", return_report=True)
    assert (tmp_path / "dask.arrow").read_bytes() == (tmp_path / "one.arrow").read_bytes()
    _, stats = count_files(corpus)
    assert report["documents"] == stats.documents and report["files"] == len(corpus)


def test_bad_file_skipped_and_reported(client, corpus, tmp_path):
    """``on_bad_input="skip"``: the unreadable file is reported as skipped, as by one
    process, and the counts of the others are exact; with "error" the task's
    CorpusReadError reaches the caller, naming the file."""
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    files = corpus[:2] + [str(bad)] + corpus[2:]
    counter, stats = count_files(files, on_bad_input="skip")
    table, report = _timed(de.count_words, files, client=client, on_bad_input="skip",
                           n_tasks=3, return_report=True)
    assert [f["path"] for f in report["files_skipped"]] == [p for p, _ in stats.skipped_files]
    assert [f["path"] for f in report["files_skipped"]] == [str(bad)]
    _same_table(table, counter.table())
    with pytest.raises(fb.CorpusReadError, match="bad.parquet"):
        _timed(de.count_words, files, client=client)


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
    table = _timed(de.count_words, ddf, column="text", client=client)
    _same_table(table, count_files(order)[0].table())


def test_merge_is_order_free_and_shards_are_exact(corpus):
    """The core alone: merging per-file tables in any order, and reducing hash shards one by
    one, give the one-process table (so engines may finish tasks in any order)."""
    reference = count_files(corpus)[0].table()
    tables = [core.count_file(f, i)[0] for i, f in enumerate(corpus)]
    for seed in range(3):
        random.Random(seed).shuffle(tables)
        _same_table(core.merge_count_tables(tables), reference)
        shards = [core.partition_counts(t, 4) for t in tables]
        reduced = [core.merge_count_tables([s[i] for s in shards]) for i in range(4)]
        words = [set(r.column("word").to_pylist()) for r in reduced]
        assert sum(map(len, words)) == len(set().union(*words))  # disjoint
        _same_table(core.combine_partitions(reduced), reference)
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
    _same_table(core.merge_count_tables(tables[::-1]), reference)
    texts = table.column("text").to_pylist()
    assert core.table_arrays(core.count_batch("gpt2", [t for t in texts if t is not None]))[2] \
        .sum() == reference[2].sum()
    count_to_file(corpus, tmp_path / "one.arrow")
    _same_table(core.read_counts(tmp_path / "one.arrow", 0), reference)
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
    _same_table(merged, reference)
    _same_table(core.combine_partitions([core.merge_count_tables([t]) for t in
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


@pytest.mark.parametrize("tie_break", ["ids", "hf", "first", "bytes"])
def test_models_identical_to_train_files(client, corpus, tie_break):
    want = fb.train_files(corpus, 420, tie_break=tie_break, special_tokens=["<|endoftext|>"])
    got = _timed(de.train, corpus, 420, tie_break=tie_break, special_tokens=["<|endoftext|>"],
                 client=client, n_partitions=2)
    assert model_to_json(got) == model_to_json(want)


def _tree(folder):
    """``{relative path: bytes}`` of every file under ``folder``."""
    out = {}
    for where, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(where, name)
            out[os.path.relpath(path, folder)] = open(path, "rb").read()
    return out


@pytest.fixture(scope="module")
def tokenizers():
    return {"bytes": build("gpt2-bytes"), "sentencepiece": build("sp-byte-fallback")}


@pytest.mark.parametrize("fmt", ["parquet", "bin"])
@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_encode_files_equal_encode_parquet(client, corpus, tokenizers, tmp_path, fmt, kind):
    """Same files at the same relative paths (a subfolder included), same bytes; a second
    run with resume skips every file."""
    tok = tokenizers[kind]
    options = dict(format=fmt, special="text")
    encode_parquet(tok, corpus, tmp_path / "one", **options)
    report = _timed(de.encode_files, tok, corpus, tmp_path / "dask", client=client, **options)
    one, dask = _tree(tmp_path / "one"), _tree(tmp_path / "dask")
    assert sorted(dask) == sorted(one) and any(os.sep in p for p in one)
    assert dask == one
    assert report["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in corpus)
    again = _timed(de.encode_files, tok, corpus, tmp_path / "dask", client=client, **options)
    assert sorted(again["skipped_complete"]) == sorted(corpus)


@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_encode_dataframe_row_aligned(client, corpus, tokenizers, kind):
    dd = pytest.importorskip("dask.dataframe")

    tok = tokenizers[kind]
    ddf = dd.read_parquet(corpus, split_row_groups=True)
    ids = _timed(de.encode_dataframe(ddf, tok, column="text", client=client,
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


def _temp_files(folder):
    return [n for _w, _d, names in os.walk(folder) for n in names if n.startswith(".tmp-")]


def test_sigkill_worker_during_encode_files(client, corpus, tokenizers, tmp_path):
    """A worker killed by SIGKILL while it encodes a file: Dask retries the task on a
    worker, the retry removes the dead writer's temporary file, and the outputs are
    byte for byte one process's (no lost or duplicated rows, no temporary file left)."""
    tok = tokenizers["bytes"]
    # Enough work per file that a task is surely running when the worker dies.
    big = []
    for i, path in enumerate(sorted(corpus)):
        rows = pq.read_table(path).column("text").to_pylist() * 20
        out = tmp_path / "in" / f"big-{i}.parquet"
        out.parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"text": rows}), out, row_group_size=50)
        big.append(str(out))
    encode_parquet(tok, big, tmp_path / "one", special="text")
    pids = client.run(os.getpid)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(de.encode_files, tok, big, tmp_path / "dask", client=client,
                          special="text")
        # The victim: the worker writing an output now (the pid in its temporary file's
        # name), so that the kill lands in the middle of a file.
        victim, deadline = None, time.monotonic() + CALL_TIMEOUT
        while victim is None and time.monotonic() < deadline and not job.done():
            for name in _temp_files(tmp_path / "dask"):
                pid = int(name.split("-")[1])
                victim = next((w for w, p in pids.items() if p == pid), None)
            time.sleep(0.002)
        assert victim is not None, "no worker was seen writing an output"
        os.kill(pids[victim], signal.SIGKILL)
        report = job.result(timeout=CALL_TIMEOUT)
    assert not job.exception()
    one, dask = _tree(tmp_path / "one"), _tree(tmp_path / "dask")
    assert sorted(dask) == sorted(one)
    assert dask == one
    assert report["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in big)
    client.wait_for_workers(2, timeout=CALL_TIMEOUT)  # the nanny restarted it
    assert pids[victim] not in client.run(os.getpid).values()  # it did die mid-job


def test_cli_dask_flag_same_outputs(client, corpus, tokenizers, tmp_path):
    """``fastbpe count|train|encode --dask ADDRESS`` writes the files the commands write
    without it (the counts file, the model file, the encoded folder), byte for byte."""
    from fastbpe_nb.cli import main

    address = client.scheduler.address
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
        one, dask = tmp_path / f"{name}-one", tmp_path / f"{name}-dask"
        if name != "encode":
            one, dask = one.with_suffix(".arrow" if name == "count" else ".json"), \
                dask.with_suffix(".arrow" if name == "count" else ".json")
        assert main(argv(one)) == 0
        assert _timed(main, argv(dask, "--dask", address)) == 0
        if name == "encode":
            assert _tree(dask) == _tree(one)
        else:
            assert dask.read_bytes() == one.read_bytes(), name


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
