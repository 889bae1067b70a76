"""Freed memory goes back to the system after each file ``encode_parquet`` encodes."""

import platform

import pytest

import fastbpe_nb as fb
from fastbpe_nb.io import encode_one_file, heap

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_release_free_memory_trims_where_glibc_is():
    # glibc has malloc_trim (it trims: True); another C library has none (False); a second
    # call gives the same answer.
    glibc = platform.libc_ver()[0] == "glibc"
    assert heap.release_free_memory() is glibc
    assert heap.release_free_memory() is glibc


def test_each_file_releases_memory_even_when_it_fails(tmp_path, monkeypatch):
    tok = fb.train(["hello world"] * 20, vocab_size=270, special_tokens=["<|endoftext|>"])
    calls = []
    monkeypatch.setattr(encode_one_file, "release_free_memory", lambda: calls.append(1))
    for name in ("a", "b"):
        pq.write_table(pa.table({"text": ["hello world"] * 5}), tmp_path / f"{name}.parquet")
    fb.encode_parquet(tok, [tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "o")
    assert len(calls) == 2
    (tmp_path / "c.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(fb.CorpusReadError):
        fb.encode_parquet(tok, [tmp_path / "c.parquet"], tmp_path / "o2")
    assert len(calls) == 3
