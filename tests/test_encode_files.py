"""Batch encoding of Parquet/Arrow datasets: alignment, nulls, slices, outputs, resume, faults."""

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
