"""Parquet output for training pipelines: the ids column's name, a token-count column,
BOS/EOS per row (nulls stay null), the separator from the tokenizer's eos role."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import EncodeOptionsError

DOCS = ["hello world", None, "", "the quick brown fox " * 50, "<s> as text"]


@pytest.fixture(scope="module")
def tok():
    t = fb.train(["hello world the quick brown fox"] * 20, vocab_size=300,
                 special_tokens=["<s>", "</s>"])
    return t.with_roles(bos="<s>", eos="</s>")


@pytest.fixture()
def src(tmp_path):
    path = tmp_path / "in" / "data.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"text": DOCS, "id": list(range(len(DOCS)))}), path,
                   row_group_size=2)
    return path


def test_named_columns_bos_eos_and_counts(tok, src, tmp_path):
    out = tmp_path / "out"
    rep = fb.encode_parquet(tok, str(src), str(out), ids_column="input_ids",
                            token_count_column="n_tokens", bos="<s>", separator="</s>",
                            keep_columns=["id"], special="text")
    table = pq.read_table(out / "data.parquet")
    assert table.column_names == ["input_ids", "n_tokens", "id"]
    bos, eos = tok.bos_token_id, tok.eos_token_id
    want = [None if d is None else [bos] + tok.encode(d, disallowed_special=()) + [eos]
            for d in DOCS]
    assert table.column("input_ids").to_pylist() == want
    assert table.column("n_tokens").to_pylist() == [None if w is None else len(w) for w in want]
    assert table.column("id").to_pylist() == list(range(len(DOCS)))
    assert rep["null_rows"] == 1
    # Resume knows the options: the same run skips, another ids column re-encodes.
    again = fb.encode_parquet(tok, str(src), str(out), ids_column="input_ids",
                              token_count_column="n_tokens", bos="<s>", separator="</s>",
                              keep_columns=["id"], special="text", resume=True)
    assert again["skipped_complete"] == [str(src)]
    other = fb.encode_parquet(tok, str(src), str(out), bos="<s>", separator="</s>",
                              keep_columns=["id"], special="text", resume=True)
    assert other["reencoded"] and "ids_column" in other["reencoded"][0]["reason"]
    assert pq.read_table(out / "data.parquet").column_names == ["ids", "id"]


def test_plain_parquet_output_is_unchanged(tok, src, tmp_path):
    fb.encode_parquet(tok, str(src), str(tmp_path / "o"), special="text")
    table = pq.read_table(tmp_path / "o" / "data.parquet")
    assert table.column_names == ["ids"]
    assert table.column("ids").to_pylist() == [
        None if d is None else tok.encode(d, disallowed_special=()) for d in DOCS]


def test_bin_separator_defaults_to_the_eos_role(tok, src, tmp_path):
    fb.encode_parquet(tok, str(src), str(tmp_path / "b"), format="bin", special="text")
    ids, index = fb.read_bin(str(tmp_path / "b" / "data.bin"))
    assert int(ids[index[1] - 1]) == tok.eos_token_id
    fb.encode_parquet(tok, str(src), str(tmp_path / "bb"), format="bin", special="text",
                      bos="<s>")
    ids, index = fb.read_bin(str(tmp_path / "bb" / "data.bin"))
    docs = [ids[a:b].tolist() for a, b in zip(index[:-1], index[1:])]
    bos, eos = tok.bos_token_id, tok.eos_token_id
    assert docs == [[bos] + tok.encode(d, disallowed_special=()) + [eos]
                    for d in DOCS if d is not None]


@pytest.mark.parametrize("kwargs, message", [
    ({"format": "bin", "ids_column": "input_ids"}, "name Parquet columns"),
    ({"token_count_column": "ids"}, "names another output column"),
    ({"ids_column": ""}, "non-empty"),
    ({"format": "bin", "shard_size": "1M"}, "shard_size and val_fraction apply"),
])
def test_bad_column_options_are_refused_before_any_output(tok, src, tmp_path, kwargs, message):
    with pytest.raises(EncodeOptionsError, match=message):
        fb.encode_parquet(tok, str(src), str(tmp_path / "x"), special="text", **kwargs)
    assert not (tmp_path / "x").exists()


def test_the_command_line_names_the_columns(tok, src, tmp_path):
    from fastbpe_nb.cli import main

    model = tmp_path / "tok.json"
    tok.save(model)
    assert main(["encode", "--model", str(model), str(src), "-o", str(tmp_path / "c"),
                 "--ids-column", "input_ids", "--token-count-column", "n", "--bos", "<s>",
                 "--separator", "</s>", "--special", "text", "-q"]) == 0
    table = pq.read_table(tmp_path / "c" / "data.parquet")
    assert table.column_names == ["input_ids", "n"]
    assert table.column("input_ids").to_pylist()[0] == (
        [tok.bos_token_id] + tok.encode("hello world") + [tok.eos_token_id])


def test_flat_outputs_map_documents_back_to_rows(tok, tmp_path):
    import json

    import numpy as np

    from fastbpe_nb.io.encode_one_file import document_rows

    docs = [None, "a", None, None, "b", "c", None, "d", None]
    src = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": docs}), src, row_group_size=2)
    fb.encode_parquet(tok, str(src), str(tmp_path / "b"), format="bin")
    meta = json.loads((tmp_path / "b" / "n.bin.json").read_text())
    assert meta["null_row_ranges"] == [[0, 1], [2, 4], [6, 7], [8, 9]]
    rows = document_rows(meta["null_row_ranges"], meta["documents"])
    assert rows.tolist() == [i for i, d in enumerate(docs) if d is not None]
    ids, index = fb.read_bin(str(tmp_path / "b" / "n.bin"))
    for doc, row in zip(np.split(ids, index[1:-1]), rows):
        assert doc[:-1].tolist() == tok.encode(docs[row])
    fb.encode_parquet(tok, str(src), str(tmp_path / "m"), format="megatron")
    marker = json.loads((tmp_path / "m" / "n.megatron.json").read_text())
    assert marker["null_row_ranges"] == meta["null_row_ranges"]
    assert document_rows([], 3).tolist() == [0, 1, 2]
    # A run of nulls that continues into the next slice stays one run.
    from fastbpe_nb.io.encode_one_file import _add_null_ranges

    runs = []
    _add_null_ranges(runs, np.array([True, False, False]), 0)
    _add_null_ranges(runs, np.array([False, True, False]), 3)
    assert runs == [[1, 4], [5, 6]]
