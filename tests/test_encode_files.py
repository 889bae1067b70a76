"""Batch encoding of Parquet/Arrow datasets: alignment, nulls, slices, outputs, resume, faults."""

import io
import json
import os

import numpy as np
import pytest

import fastbpe_nb as fb

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DOCS = [
    "Hello world, it's a test.\n",
    "",
    "Grüße aus Köln — naïve café.",
    "Привет, мир! 你好，世界。 😀",
    "def f(x):\n    return x ** 2\n",
    "   spaces   ",
] * 40


@pytest.fixture(scope="module")
def tok():
    return fb.train(DOCS, vocab_size=420, special_tokens=["<|endoftext|>", "<|pad|>"])


def write(path, docs, row_group_size=37, large=False):
    col = pa.array(docs, pa.large_string() if large else pa.string())
    pq.write_table(pa.table({"text": col, "n": pa.array(range(len(docs)))}), path,
                   row_group_size=row_group_size)


def test_encode_batch_arrow_alignment_nulls_and_slices(tok):
    docs = DOCS[:30] + [None, None] + DOCS[30:60]
    for typ in (pa.string(), pa.large_string()):
        arr = pa.array(docs, typ)
        for start, length in ((0, len(docs)), (3, 20), (29, 5), (31, 0)):
            part = arr.slice(start, length)
            out = tok.encode_batch(part)
            assert out.to_pylist() == [None if d is None else tok.encode(d)
                                       for d in docs[start : start + length]]


def test_count_tokens(tok):
    assert tok.count_tokens(DOCS[0]) == len(tok.encode(DOCS[0]))
    counts = tok.count_tokens(DOCS[:12])
    assert counts.tolist() == [len(tok.encode(d)) for d in DOCS[:12]]
    arr = pa.chunked_array([pa.array(DOCS[:5]), pa.array(DOCS[5:12])])
    assert tok.count_tokens(arr).tolist() == counts.tolist()


def test_parquet_output_matches_encode(tok, tmp_path):
    docs = DOCS[:100] + [None] + DOCS[100:]
    write(tmp_path / "in.parquet", docs, large=True)
    report = fb.encode_parquet(tok, [tmp_path / "in.parquet"], tmp_path / "out",
                               keep_columns=["n"])
    assert report["rows"] == len(docs) and report["null_rows"] == 1
    out = pq.read_table(tmp_path / "out" / "in.parquet")
    assert out.column_names == ["ids", "n"]
    assert out.schema.field("ids").type == pa.list_(pa.int32())
    assert out.column("ids").to_pylist() == [None if d is None else tok.encode(d) for d in docs]
    assert out.column("n").to_pylist() == list(range(len(docs)))
    assert report["tokens"] == sum(len(tok.encode(d)) for d in docs if d is not None)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["in.parquet"]  # no temp files


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_bin_output_in_a_forked_child(tok, tmp_path):
    # A DataLoader-style child forked after the parent's parallel kernels ran: the .bin
    # writer's kernel, the per-slice sync and the slice packing give the parent's bytes,
    # and nothing hangs (the child is killed by an alarm after 120 s).
    write(tmp_path / "in.parquet", DOCS * 3 + [None])
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "parent", format="bin",
                      num_threads=2)
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            import signal

            signal.alarm(120)
            fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "child", format="bin",
                              num_threads=2)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for name in ("in.bin", "in.idx.npy"):
        assert (tmp_path / "child" / name).read_bytes() == (tmp_path / "parent" / name).read_bytes()


def test_parquet_uint16(tok, tmp_path):
    write(tmp_path / "in.parquet", DOCS[:20])
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o", dtype="uint16")
    out = pq.read_table(tmp_path / "o" / "in.parquet")
    assert out.schema.field("ids").type == pa.list_(pa.uint16())
    assert out.column("ids").to_pylist() == [tok.encode(d) for d in DOCS[:20]]


def test_bin_output_round_trip(tok, tmp_path):
    docs = DOCS[:50] + [None] + DOCS[50:90]
    write(tmp_path / "in.parquet", docs)
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "bin", format="bin")
    ids, index = fb.read_bin(tmp_path / "bin" / "in.bin")
    assert ids.dtype == np.dtype("<u2")
    real = [d for d in docs if d is not None]
    assert len(index) == len(real) + 1
    eot = tok.special_tokens["<|endoftext|>"]
    for k, doc in enumerate(real):
        piece = ids[index[k] : index[k + 1]].tolist()
        assert piece[-1] == eot
        assert tok.decode(piece[:-1]) == doc
    meta = json.loads((tmp_path / "bin" / "in.bin.json").read_text())
    assert meta["separator_id"] == eot and meta["documents"] == len(real)


def test_disallowed_special_names_file_and_row(tok, tmp_path):
    docs = DOCS[:45] + ["text with <|endoftext|> inside"] + DOCS[45:60]
    path = tmp_path / "in.parquet"
    write(path, docs)
    with pytest.raises(fb.DisallowedSpecialTokenError) as info:
        fb.encode_parquet(tok, path, tmp_path / "o")
    assert "in.parquet" in str(info.value) and "row 45" in str(info.value)
    assert not (tmp_path / "o" / "in.parquet").exists()
    fb.encode_parquet(tok, path, tmp_path / "allow", special="allow")
    ids = pq.read_table(tmp_path / "allow" / "in.parquet").column("ids").to_pylist()
    assert tok.special_tokens["<|endoftext|>"] in ids[45]
    assert ids[45] == tok.encode(docs[45], allowed_special="all")
    fb.encode_parquet(tok, path, tmp_path / "text", special="text")
    ids = pq.read_table(tmp_path / "text" / "in.parquet").column("ids").to_pylist()
    assert ids[45] == tok.encode_ordinary(docs[45])


def test_special_split_across_rows_is_not_special(tok, tmp_path):
    docs = ["first half <|endof", "text|> second half"]
    write(tmp_path / "in.parquet", docs)
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o")
    ids = pq.read_table(tmp_path / "o" / "in.parquet").column("ids").to_pylist()
    assert not set(ids[0] + ids[1]) & set(tok.special_tokens.values())


def test_non_string_column(tok, tmp_path):
    write(tmp_path / "in.parquet", DOCS[:5])
    with pytest.raises(fb.CorpusReadError, match="'n' has type int64"):
        fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o", column="n")
    with pytest.raises(fb.CorpusReadError, match="no column 'body'"):
        fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o", column="body")


def test_corrupt_input_keeps_finished_outputs(tok, tmp_path):
    write(tmp_path / "a.parquet", DOCS[:30])
    (tmp_path / "b.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(fb.CorpusReadError, match="b.parquet"):
        fb.encode_parquet(tok, [tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "o")
    assert pq.read_table(tmp_path / "o" / "a.parquet").num_rows == 30
    assert sorted(os.listdir(tmp_path / "o")) == ["a.parquet"]


def test_resume_skips_complete_outputs(tok, tmp_path):
    for name in ("a", "b", "c"):
        write(tmp_path / f"{name}.parquet", DOCS[:25])
    inputs = sorted(str(p) for p in tmp_path.glob("*.parquet"))
    out = tmp_path / "o"
    fb.encode_parquet(tok, inputs[:1], out)
    # A partial output of b (as a killed run could leave under its temporary name) is ignored.
    (out / ".tmp-partial-b.parquet").write_bytes(b"partial")
    report = fb.encode_parquet(tok, inputs, out, resume=True)
    assert report["skipped_complete"] == inputs[:1]
    assert [f["path"] for f in report["files"]] == inputs[1:]
    for name in ("a", "b", "c"):
        table = pq.read_table(out / f"{name}.parquet")
        assert table.column("ids").to_pylist() == [tok.encode(d) for d in DOCS[:25]]


def test_count_only(tok, tmp_path):
    write(tmp_path / "in.parquet", DOCS[:40])
    report = fb.encode_parquet(tok, tmp_path / "in.parquet", None, count_only=True)
    assert report["tokens"] == sum(len(tok.encode(d)) for d in DOCS[:40])


def test_row_slices():
    from fastbpe_nb.io.arrow_text import row_slices

    offsets = np.array([0, 5, 10, 30, 31, 32, 100], dtype=np.int64)
    assert row_slices(offsets, 10) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    assert row_slices(offsets, 1000) == [(0, 6)]
    assert row_slices(np.array([0], dtype=np.int64), 10) == []


def test_big_row_groups_are_sliced_without_changing_rows(tok, tmp_path, monkeypatch):
    import fastbpe_nb.io.arrow_text as arrow_text

    docs = DOCS * 3 + [None] * 3
    write(tmp_path / "in.parquet", docs, row_group_size=len(docs))
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 300)
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o")
    table = pq.read_table(tmp_path / "o" / "in.parquet")
    assert pq.ParquetFile(tmp_path / "o" / "in.parquet").metadata.num_row_groups > 10
    assert table.column("ids").to_pylist() == [None if d is None else tok.encode(d) for d in docs]
    # Training reads the same sliced batches: the model does not change.
    assert fb.train_files([tmp_path / "in.parquet"], vocab_size=300).vocab == fb.train(
        [d for d in docs if d], vocab_size=300).vocab


def test_disallowed_special_row_index_on_general_path(tmp_path):
    # With normalization the Arrow fast path is not taken; the row named must still be the
    # file's row, not the index within the slice being encoded.
    tok = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>"], normalization="NFC")
    docs = DOCS[:45] + ["bad <|endoftext|> row"] + DOCS[45:50]
    write(tmp_path / "in.parquet", docs, row_group_size=20)
    with pytest.raises(fb.DisallowedSpecialTokenError) as info:
        fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o")
    assert "row 45" in str(info.value) and info.value.row == 45


# ------------------------------------------------------------------ the output side (issue 15)
def ids_of(path):
    return pq.read_table(path).column("ids").to_pylist()


def expected_ids(tok, docs):
    return [None if d is None else tok.encode(d) for d in docs]


def cli(*argv):
    from fastbpe_nb.cli import main

    return main([str(a) for a in argv])


def test_same_names_in_two_folders_are_mirrored(tok, tmp_path, capsys):
    a, b = DOCS[:30], DOCS[30:75]
    for sub, docs in (("a", a), ("b", b)):
        (tmp_path / "dup" / sub).mkdir(parents=True)
        write(tmp_path / "dup" / sub / "train.parquet", docs)
    inputs = [tmp_path / "dup" / "a" / "train.parquet", tmp_path / "dup" / "b" / "train.parquet"]
    report = fb.encode_parquet(tok, inputs, tmp_path / "out")
    assert report["rows"] == len(a) + len(b)
    assert ids_of(tmp_path / "out" / "a" / "train.parquet") == expected_ids(tok, a)
    assert ids_of(tmp_path / "out" / "b" / "train.parquet") == expected_ids(tok, b)
    assert not (tmp_path / "out" / "train.parquet").exists()
    # The CLI, and a folder given whole: the same layout (relative to the folder).
    model = tmp_path / "m.json"
    tok.save(model)
    assert cli("encode", "--model", model, *inputs, "-o", tmp_path / "cli", "-q") == 0
    assert ids_of(tmp_path / "cli" / "b" / "train.parquet") == expected_ids(tok, b)
    fb.encode_parquet(tok, tmp_path / "dup", tmp_path / "whole", format="bin")
    ids, index = fb.read_bin(tmp_path / "whole" / "a" / "train.bin")
    assert len(index) == len(a) + 1
    assert sorted(p.name for p in (tmp_path / "whole" / "b").iterdir()) == [
        "train.bin", "train.bin.json", "train.idx.npy"]


def test_inputs_mapping_to_one_output_are_refused_before_encoding(tok, tmp_path):
    write(tmp_path / "x.parquet", DOCS[:10])
    table = pa.table({"text": pa.array(DOCS[:5])})
    with pa.ipc.new_file(str(tmp_path / "x.arrow"), table.schema) as w:
        w.write_table(table)
    with pytest.raises(fb.EncodeOptionsError) as info:
        fb.encode_parquet(tok, [tmp_path / "x.parquet", tmp_path / "x.arrow"], tmp_path / "o")
    assert "x.parquet" in str(info.value) and "x.arrow" in str(info.value)
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())
    (tmp_path / "e").mkdir()
    write(tmp_path / "e" / "y.parquet", DOCS[:10])
    with pytest.raises(fb.EncodeOptionsError, match="given twice"):
        fb.encode_parquet(tok, [tmp_path / "e" / "y.parquet", tmp_path / "e"], tmp_path / "o2")
    assert not (tmp_path / "o2").exists()


def test_identity_is_recorded(tok, tmp_path):
    import hashlib

    from fastbpe_nb.io.model_file import model_to_json

    write(tmp_path / "in.parquet", DOCS[:20])
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o")
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "b", format="bin")
    st = os.stat(tmp_path / "in.parquet")
    sha = hashlib.sha256(model_to_json(tok).encode()).hexdigest()
    meta = json.loads(pq.read_schema(tmp_path / "o" / "in.parquet").metadata[b"fastbpe_nb.encode"])
    marker = json.loads((tmp_path / "b" / "in.bin.json").read_text())
    for rec in (meta, marker):
        assert rec["model_sha256"] == sha
        assert rec["input"]["size"] == st.st_size and rec["input"]["mtime_ns"] == st.st_mtime_ns
        assert rec["input"]["rows"] == 20
    assert meta["dtype"] == "int32" and marker["dtype"] == "uint16"
    assert marker["bin_bytes"] == os.path.getsize(tmp_path / "b" / "in.bin")


def test_model_hash_is_computed_once_per_tokenizer(tmp_path, monkeypatch):
    # Serializing the model costs 0.1 s for o200k: once per tokenizer, not per call. A
    # tokenizer made from another (other roles) gets its own hash.
    from fastbpe_nb.io import model_file

    tok = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>"])
    calls = []
    real = model_file.model_to_json
    monkeypatch.setattr(model_file, "model_to_json", lambda t: calls.append(t) or real(t))
    write(tmp_path / "in.parquet", DOCS[:20])
    for out in ("a", "b"):
        fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / out)
    assert calls == [tok]
    other = tok.with_roles(eos="<|endoftext|>")
    fb.encode_parquet(other, tmp_path / "in.parquet", tmp_path / "c")
    assert calls == [tok, other]
    sha = [json.loads(pq.read_schema(tmp_path / out / "in.parquet").metadata[
        b"fastbpe_nb.encode"])["model_sha256"] for out in "abc"]
    assert sha[0] == sha[1] != sha[2]


def test_resume_reencodes_what_another_model_input_or_option_made(tok, tmp_path):
    other = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>", "<|pad|>"])
    write(tmp_path / "in.parquet", DOCS[:30])
    src, out = tmp_path / "in.parquet", tmp_path / "o"
    fb.encode_parquet(other, src, out)
    rep = fb.encode_parquet(tok, src, out, resume=True)
    assert rep["skipped_complete"] == [] and "another model" in rep["reencoded"][0]["reason"]
    assert ids_of(out / "in.parquet") == expected_ids(tok, DOCS[:30])
    rep = fb.encode_parquet(tok, src, out, resume=True)
    assert rep["skipped_complete"] == [str(src)] and rep["reencoded"] == []
    opts = {}
    for change, key in (({"dtype": "uint16"}, "dtype"), ({"keep_columns": ["n"]}, "keep_columns"),
                        ({"special": "text"}, "special")):
        opts.update(change)
        rep = fb.encode_parquet(tok, src, out, resume=True, **opts)
        assert key in rep["reencoded"][0]["reason"], rep
    assert pq.read_table(out / "in.parquet").column_names == ["ids", "n"]
    # The input rewritten (same name): encoded again.
    write(src, DOCS[40:75])
    rep = fb.encode_parquet(tok, src, out, resume=True, **opts)
    assert "input changed" in rep["reencoded"][0]["reason"]
    assert ids_of(out / "in.parquet") == [tok.encode_ordinary(d) for d in DOCS[40:75]]
    # Bin: another separator, another model.
    fb.encode_parquet(tok, src, tmp_path / "b", format="bin")
    rep = fb.encode_parquet(tok, src, tmp_path / "b", format="bin", separator="<|pad|>",
                            resume=True)
    assert "separator_id" in rep["reencoded"][0]["reason"]
    rep = fb.encode_parquet(other, src, tmp_path / "b", format="bin", separator="<|pad|>",
                            resume=True)
    assert "another model" in rep["reencoded"][0]["reason"]
    ids, index = fb.read_bin(tmp_path / "b" / "in.bin")
    assert ids[index[0] : index[1] - 1].tolist() == other.encode(DOCS[40])


@pytest.fixture
def umask():
    """Set the process umask for a test, restoring it after."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tok, tmp_path, umask, mask):
    write(tmp_path / "in.parquet", DOCS[:10])
    umask(mask)
    out = tmp_path / "out"
    tok.save(tmp_path / "m.json")
    tok.to_tiktoken(tmp_path / "m.tiktoken")
    tok.to_huggingface(tmp_path / "tokenizer.json")
    fb.count_to_file([tmp_path / "in.parquet"], tmp_path / "counts.arrow")
    fb.train_sentencepiece(DOCS[:20], vocab_size=400).save(tmp_path / "sp.model")
    fb.encode_parquet(tok, tmp_path / "in.parquet", out / "p")
    fb.encode_parquet(tok, tmp_path / "in.parquet", out / "b", format="bin")
    files = [tmp_path / n for n in ("m.json", "m.tiktoken", "tokenizer.json", "counts.arrow",
                                    "sp.model")]
    files += [out / "p" / "in.parquet"] + list((out / "b").iterdir())
    assert len(files) == 9
    for f in files:
        assert oct(f.stat().st_mode & 0o777) == oct(0o666 & ~mask), f
    # Replacing a file keeps its mode, as open() would.
    os.chmod(tmp_path / "m.json", 0o640)
    tok.save(tmp_path / "m.json")
    assert (tmp_path / "m.json").stat().st_mode & 0o777 == 0o640


def test_kept_columns_are_checked(tok, tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": DOCS[:5], "ids": list(range(5)), "n": list(range(5))}), path)
    with pytest.raises(fb.EncodeOptionsError, match="'ids'"):
        fb.encode_parquet(tok, path, tmp_path / "o", keep_columns=["ids"])
    with pytest.raises(fb.EncodeOptionsError, match="bin"):
        fb.encode_parquet(tok, path, tmp_path / "o", keep_columns=["n"], format="bin")
    with pytest.raises(fb.EncodeOptionsError, match="twice"):
        fb.encode_parquet(tok, path, tmp_path / "o", keep_columns=["n", "n"])
    with pytest.raises(fb.CorpusReadError) as info:
        fb.encode_parquet(tok, path, tmp_path / "o", keep_columns=["n", "lang"])
    assert "in.parquet" in str(info.value) and "'lang'" in str(info.value)
    assert not (tmp_path / "o" / "in.parquet").exists()
    # The text column itself can be kept (it was silently dropped).
    fb.encode_parquet(tok, path, tmp_path / "o", keep_columns=["text", "n"])
    out = pq.read_table(tmp_path / "o" / "in.parquet")
    assert out.column_names == ["ids", "text", "n"] and out.column("text").to_pylist() == DOCS[:5]
    model = tmp_path / "m.json"
    tok.save(model)
    assert cli("encode", "--model", model, path, "-o", tmp_path / "c", "--keep-columns", "n",
               "--format", "bin", "-q") == 2


def test_output_over_the_inputs_is_refused(tok, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    write(d / "in.parquet", DOCS[:10])
    before = (d / "in.parquet").read_bytes()
    (tmp_path / "link").symlink_to(d)
    for inputs, output in ((d, d), (d, d / "encoded"), (d / "in.parquet", d),
                           (d / "in.parquet", tmp_path / "link"), (tmp_path / "link", d / "x"),
                           (str(d / "**" / "*.parquet"), d / "enc")):
        with pytest.raises(fb.EncodeOptionsError):
            fb.encode_parquet(tok, inputs, output)
    assert (d / "in.parquet").read_bytes() == before
    # A glob reaching the same file through a link lists it once (the folder walk keeps one
    # path per real file): its rows are encoded exactly once, never twice.
    report = fb.encode_parquet(tok, str(tmp_path / "*" / "*.parquet"), tmp_path / "out")
    assert report["rows"] == 10 and len(report["files"]) == 1
    outs = sorted((tmp_path / "out").rglob("*.parquet"))
    assert len(outs) == 1 and ids_of(outs[0]) == expected_ids(tok, DOCS[:10])
    # Beside the inputs is fine (a glob that cannot match the outputs).
    fb.encode_parquet(tok, str(d / "*.parquet"), d / "enc")
    assert ids_of(d / "enc" / "in.parquet") == expected_ids(tok, DOCS[:10])


def fail_fsync_of(monkeypatch, suffix):
    """os.fsync raises ENOSPC for the temporary file of an output ending in ``suffix``."""
    import errno

    real = os.fsync

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.basename(name).startswith(".tmp-") and name.endswith(suffix):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_fault_on_the_bin_marker_leaves_an_incomplete_output(tok, tmp_path, monkeypatch):
    write(tmp_path / "in.parquet", DOCS[:40])
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_fsync_of(m, ".bin.json")
        with pytest.raises(OSError) as info:
            fb.encode_parquet(tok, tmp_path / "in.parquet", out, format="bin")
    assert info.value.errno == 28 and "in.bin.json" in str(info.value)
    assert sorted(p.name for p in out.iterdir()) == ["in.bin", "in.idx.npy"]
    with pytest.raises(fb.FastBPEError, match="in.bin.*marker"):
        fb.read_bin(out / "in.bin")
    rep = fb.encode_parquet(tok, tmp_path / "in.parquet", out, format="bin", resume=True)
    assert rep["skipped_complete"] == [] and "incomplete" in rep["reencoded"][0]["reason"]
    ids, index = fb.read_bin(out / "in.bin")
    assert len(index) == 41
    # A .bin cut short after the marker was written: refused by read_bin, redone by resume.
    with open(out / "in.bin", "r+b") as f:
        f.truncate(os.path.getsize(out / "in.bin") - 2)
    with pytest.raises(fb.FastBPEError, match="inconsistent"):
        fb.read_bin(out / "in.bin")
    rep = fb.encode_parquet(tok, tmp_path / "in.parquet", out, format="bin", resume=True)
    assert "incomplete" in rep["reencoded"][0]["reason"]
    assert fb.read_bin(out / "in.bin")[1].tolist() == index.tolist()


def test_a_fault_before_the_marker_keeps_no_stale_marker(tok, tmp_path, monkeypatch):
    # A complete output from another model, then a run that fails writing the index: the
    # old marker must not vouch for the new .bin.
    other = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>"])
    write(tmp_path / "in.parquet", DOCS[:40])
    out = tmp_path / "o"
    fb.encode_parquet(other, tmp_path / "in.parquet", out, format="bin")
    with monkeypatch.context() as m:
        fail_fsync_of(m, ".idx.npy")
        with pytest.raises(OSError):
            fb.encode_parquet(tok, tmp_path / "in.parquet", out, format="bin")
    ids, _ = fb.read_bin(out / "in.bin")  # the old output is untouched and complete
    assert ids[: len(other.encode(DOCS[0]))].tolist() == other.encode(DOCS[0])
    # A fault on the new marker, after the new .bin is in place: the old marker is gone too.
    with monkeypatch.context() as m:
        fail_fsync_of(m, ".bin.json")
        with pytest.raises(OSError):
            fb.encode_parquet(tok, tmp_path / "in.parquet", out, format="bin")
    assert sorted(p.name for p in out.iterdir()) == ["in.bin", "in.idx.npy"]
    with pytest.raises(fb.OutputError, match="marker"):
        fb.read_bin(out / "in.bin")


def test_zero_rows_and_only_nulls(tok, tmp_path):
    schema = pa.schema([("text", pa.large_string()), ("n", pa.int16()), ("tag", pa.string())])
    pq.write_table(schema.empty_table(), tmp_path / "empty.parquet")
    pq.write_table(pa.table({"text": pa.array([None, None], pa.large_string()),
                             "n": pa.array([1, 2], pa.int16()), "tag": ["x", "y"]}),
                   tmp_path / "nulls.parquet")
    for name, rows in (("empty", 0), ("nulls", 2)):
        src = tmp_path / f"{name}.parquet"
        fb.encode_parquet(tok, src, tmp_path / "bin", format="bin")
        ids, index = fb.read_bin(tmp_path / "bin" / f"{name}.bin")
        assert len(ids) == 0 and index.tolist() == [0]
        fb.encode_parquet(tok, src, tmp_path / "pq", keep_columns=["n", "tag"])
        out = pq.read_table(tmp_path / "pq" / f"{name}.parquet")
        assert out.num_rows == rows and out.column_names == ["ids", "n", "tag"]
        assert out.schema.field("n").type == pa.int16() and out.schema.field("tag").type == pa.string()
        assert out.column("ids").to_pylist() == [None] * rows


def test_stale_temp_files_are_removed_live_ones_kept(tok, tmp_path):
    import subprocess
    import sys
    import time

    from fastbpe_nb.io import atomic

    write(tmp_path / "in.parquet", DOCS[:10])
    out = tmp_path / "o"
    (out / "sub").mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        def temp(folder, pid, name, host=atomic._HOST):
            p = folder / f".tmp-{pid}-{host}-0123abcd-{name}"
            p.write_bytes(b"partial")
            return p

        stale = [temp(out, dead.pid, "in.parquet"), temp(out / "sub", dead.pid, "x.bin")]
        kept = [temp(out, live.pid, "in.parquet"), temp(out, os.getpid(), "in.parquet"),
                temp(out, dead.pid, "x.bin", host="ffffffff"), out / ".tmp-partial-b.parquet",
                out / ".tmp-abcd1234-fresh.parquet", out / "notes.txt"]
        for p in kept[3:]:
            p.write_bytes(b"x")
        old = [out / ".tmp-abcd1234-old.parquet", temp(out, dead.pid, "y.bin", host="ffffffff")]
        for p in old:
            p.write_bytes(b"x")
            os.utime(p, (time.time() - 2 * 86400,) * 2)
        rep = fb.encode_parquet(tok, tmp_path / "in.parquet", out)
        assert rep["stale_temp_files_removed"] == 4
        assert not any(p.exists() for p in stale + old)
        assert all(p.exists() for p in kept)
    finally:
        live.kill()
        live.wait()
    # Our temporary files carry our pid (and leave nothing behind).
    assert atomic.temp_path(str(out / "x")).split("/")[-1].startswith(f".tmp-{os.getpid()}-")


def read_only_folder(path):
    """A folder nobody can create files in (chmod; as root, chattr +i); None if impossible."""
    import shutil
    import subprocess

    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        return lambda: path.chmod(0o755)
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                                 capture_output=True).returncode == 0:
        return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)
    return None


def test_unwritable_output_fails_before_the_work(tok, tmp_path, monkeypatch, capsys):
    import fastbpe_nb.tokenizer as tokenizer
    import fastbpe_nb.training as training

    def never(*a, **k):
        raise AssertionError("the long work started before the output was checked")

    corpus = tmp_path / "c.txt"
    corpus.write_text("some text to train on " * 20)
    write(tmp_path / "in.parquet", DOCS[:10])
    model = tmp_path / "m.json"
    tok.save(model)
    monkeypatch.setattr(training, "count_files", never)
    monkeypatch.setattr(tokenizer.Tokenizer, "encode_batch_flat", never)
    cases = [("train", corpus, "-o", "{}/model.json"), ("count", corpus, "-o", "{}/counts.arrow"),
             ("encode", "--model", model, tmp_path / "in.parquet", "-o", "{}/out")]
    missing = tmp_path / "missing" / "deeper"
    for args in cases[:2]:
        assert cli(*[str(a).format(missing) for a in args]) == 2
        assert "no such folder" in capsys.readouterr().err
    ro = tmp_path / "ro"
    restore = read_only_folder(ro)
    if restore is None:
        pytest.skip("cannot make a read-only folder here")
    try:
        for args in cases:
            assert cli(*[str(a).format(ro) for a in args]) == 2
            err = capsys.readouterr().err
            assert str(ro) in err and ("cannot write" in err or "cannot create" in err), err
        with pytest.raises(fb.OutputError):
            fb.encode_parquet(tok, tmp_path / "in.parquet", ro)
        with pytest.raises(fb.OutputError):  # the library call checks first too
            fb.count_to_file([corpus], ro / "counts.arrow")
    finally:
        restore()


def test_no_input_found_is_an_error(tok, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(fb.CorpusReadError) as info:
        fb.encode_parquet(tok, tmp_path / "empty", tmp_path / "o")
    assert str(tmp_path / "empty") in str(info.value) and ".parquet" in str(info.value)
    (tmp_path / "empty" / "notes.txt").write_text("not a table")
    with pytest.raises(fb.CorpusReadError, match="1 other file"):
        fb.encode_parquet(tok, tmp_path / "empty", tmp_path / "o", count_only=True)
    model = tmp_path / "m.json"
    tok.save(model)
    assert cli("encode", "--model", model, tmp_path / "empty", "-o", tmp_path / "o") == 2
    assert "no Parquet or Arrow input found" in capsys.readouterr().err
    assert cli("encode", "--model", model, "-o", tmp_path / "o") == 2
    # Inside a folder, files that are not tables are listed, not read.
    write(tmp_path / "empty" / "in.parquet", DOCS[:4])
    rep = fb.encode_parquet(tok, tmp_path / "empty", tmp_path / "o")
    assert rep["rows"] == 4 and rep["ignored_files"] == [str(tmp_path / "empty" / "notes.txt")]


def test_small_row_groups_are_gathered_into_few_encoder_calls(tok, tmp_path, monkeypatch):
    import fastbpe_nb.io.arrow_text as arrow_text

    docs = (DOCS * 5)[:1195] + ["bad <|endoftext|> row"] + DOCS[:4]
    write(tmp_path / "in.parquet", docs, row_group_size=10)
    assert pq.ParquetFile(tmp_path / "in.parquet").metadata.num_row_groups == 120
    calls = []
    real = type(tok).encode_batch_flat

    def counting(self, col, *a, **k):
        calls.append(len(col))
        return real(self, col, *a, **k)

    monkeypatch.setattr(type(tok), "encode_batch_flat", counting)
    rep = fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o", special="text")
    assert calls == [1200] and rep["encoder_calls"] == 1
    assert ids_of(tmp_path / "o" / "in.parquet") == [tok.encode_ordinary(d) for d in docs]
    # Row numbers stay the file's.
    with pytest.raises(fb.DisallowedSpecialTokenError, match="row 1195"):
        fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o2")
    # The slice size still bounds one call: ~2 KB slices of the ~25 KB of text.
    calls.clear()
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 2000)
    fb.encode_parquet(tok, tmp_path / "in.parquet", tmp_path / "o3", special="text")
    assert 10 < len(calls) < 40 and sum(calls) == 1200
    assert ids_of(tmp_path / "o3" / "in.parquet") == [tok.encode_ordinary(d) for d in docs]


@pytest.mark.parametrize("dtype", ["<u2", "<u4", ">u4"])
def test_write_bin_equals_one_insert_at_any_piece_size(dtype, monkeypatch):
    # The .bin writer interleaves separators piece by piece with a kernel; whatever the
    # piece size, its bytes are np.insert's of the whole (empty documents, ends on piece
    # boundaries, a separator after the last id, no ids at all, big-endian output).
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import fastbpe_nb.io.bin_files as bf

    @settings(max_examples=150, deadline=None)
    @given(ids=st.lists(st.integers(0, 65534), max_size=60),
           cuts=st.lists(st.integers(0, 60), max_size=12), piece=st.integers(1, 16))
    def check(ids, cuts, piece):
        ids = np.array(ids, dtype=np.int32)
        ends = np.sort(np.array([min(c, len(ids)) for c in cuts], dtype=np.int64))
        monkeypatch.setattr(bf, "BIN_PIECE_IDS", piece)
        f = io.BytesIO()
        written = bf.write_bin(f, ids, ends, 65535, np.dtype(dtype))
        want = np.insert(ids.astype(dtype), ends, 65535)
        assert f.getvalue() == want.tobytes() and written == len(want)

    check()
    with pytest.raises(ValueError, match="sorted"):
        bf.write_bin(io.BytesIO(), np.zeros(3, np.int32), np.array([2, 1]), 7, np.dtype(dtype))


def test_text_slices_pack_rows_across_batches(monkeypatch):
    # Rows are packed greedily as one stream whatever the batches: every row once, in
    # order, with the file's row numbers; a slice holds at most SLICE_BYTES of text unless
    # it is one row; and no slice could have taken the next slice's first row.
    import pyarrow as pa
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import fastbpe_nb.io.arrow_text as arrow_text
    from fastbpe_nb.io.encode_inputs import text_slices

    @settings(max_examples=200, deadline=None)
    @given(lengths=st.lists(st.sampled_from([0, 0, 1, 5, 10, 30]) | st.integers(0, 30),
                            max_size=40),
           cuts=st.lists(st.integers(0, 40), max_size=6), limit=st.integers(1, 60))
    def check(lengths, cuts, limit):
        monkeypatch.setattr(arrow_text, "SLICE_BYTES", limit)
        texts = ["x" * n for n in lengths]
        bounds = sorted({0, len(texts), *[min(c, len(texts)) for c in cuts]})
        batches = [(a, pa.record_batch([pa.array(texts[a:b], pa.string())], names=["text"]))
                   for a, b in zip(bounds[:-1], bounds[1:])]
        got = list(text_slices(iter(batches), "text", "f.parquet"))
        rows = [r for _, t in got for r in t.column("text").to_pylist()]
        assert rows == texts
        starts = [s for s, _ in got]
        assert starts == list(np.cumsum([0] + [t.num_rows for _, t in got])[:-1])
        sizes = [sum(map(len, t.column("text").to_pylist())) for _, t in got]
        for k, (_, t) in enumerate(got):
            assert t.num_rows > 0 and (sizes[k] <= limit or t.num_rows == 1)
            if k + 1 < len(got):
                assert sizes[k] + len(got[k + 1][1].column("text")[0].as_py()) > limit

    check()
