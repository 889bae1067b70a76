"""Token files of training stacks (megatron, datatrove, nanogpt, llmc): writers vs readers.

Each output is read back three ways that share no code with the writer: ``read_tokens``,
a minimal decoder written here from the format's documentation, and (when installed)
the owning project's own reader. All must give exactly ``tok.encode_batch``'s ids, with the
separator/BOS where configured, the documents in input order, shards within the size,
and a seeded validation split that is deterministic and disjoint from train.
"""

import json
import os
import struct

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import EncodeOptionsError, OutputError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FORMATS = ["megatron", "datatrove", "nanogpt", "llmc"]
BASE = ["Hello world, it's a test.\n", "Grüße aus Köln — naïve café.",
        "Привет, мир! 你好，世界。 😀", "def f(x):\n    return x ** 2\n"]


def make_docs(n=240):
    """Distinct documents (each names its row), with nulls, empty strings and a huge row."""
    docs = []
    for i in range(n):
        if i % 17 == 3:
            docs.append(None)
        elif i % 23 == 5:
            docs.append("")
        else:
            docs.append(f"{BASE[i % 4]} row {i} " + "word " * (i % 9))
    docs[100] = "".join(f"huge {k} " + BASE[k % 4] for k in range(3000))  # ~130 kB
    return docs


@pytest.fixture(scope="module")
def tok():
    return fb.train(BASE * 20, vocab_size=400, special_tokens=["<|endoftext|>", "<|bos|>"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokfmt")
    docs = make_docs()
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), root / "in.parquet",
                   row_group_size=29)
    return root, docs


# -- independent decoders, from each format's documentation -------------------------------

def decode_megatron(prefix):
    with open(prefix + ".idx", "rb") as f:
        raw = f.read()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    version, code, n_seq, n_doc = struct.unpack_from("<QBQQ", raw, 9)
    assert version == 1
    dtype = {8: np.uint16, 4: np.int32}[code]
    lens = np.frombuffer(raw, np.int32, n_seq, 34)
    ptrs = np.frombuffer(raw, np.int64, n_seq, 34 + 4 * n_seq)
    doc_idx = np.frombuffer(raw, np.int64, n_doc, 34 + 12 * n_seq)
    assert len(raw) == 34 + 12 * n_seq + 8 * n_doc
    assert doc_idx.tolist() == list(range(n_seq + 1))  # one sequence per document
    data = open(prefix + ".bin", "rb").read()
    return [np.frombuffer(data, dtype, int(n), int(p)).tolist() for n, p in zip(lens, ptrs)]


def decode_datatrove(ds):
    name, size = open(ds + ".metadata").read().splitlines()[0].rsplit("|", 1)
    assert name.startswith("fastbpe_nb-sha256-")
    ids = np.fromfile(ds, {"2": np.uint16, "4": np.uint32}[size])
    ends = np.fromfile(ds + ".index", np.uint64).astype(np.int64)
    assert int(open(ds + ".metadata").read().splitlines()[1]) == len(ids)
    return [ids[a:b].tolist() for a, b in zip(np.r_[0, ends[:-1]], ends)]


def decode_nanogpt(path, eos):
    ids = np.memmap(path, dtype=np.uint16, mode="r").tolist() if os.path.getsize(path) else []
    docs, cur = [], []
    for t in ids:
        cur.append(t)
        if t == eos:
            docs.append(cur)
            cur = []
    assert not cur
    return docs


def decode_llmc(path, eos):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        assert header[0] == 20240520 and header[1] == 1
        ids = np.frombuffer(f.read(), dtype=np.uint16)
    assert len(ids) == header[2]
    docs = []
    for t in ids.tolist():
        if t == eos:
            docs.append([])
        docs[-1].append(t)
    return docs


def data_files(out, fmt):
    """The id files of ``out`` per split, in shard order."""
    found = {"train": [], "val": []}
    for where, _, names in os.walk(out):
        for n in names:
            p = os.path.join(where, n)
            split = "val" if ("val" in os.path.relpath(where, out).split(os.sep)
                              or n.startswith("val") or "_val_" in n) else "train"
            if fmt in ("megatron", "nanogpt", "llmc") and n.endswith(".bin") or (
                    fmt == "datatrove" and n.endswith(".ds")):
                found[split].append(p)
    return {k: sorted(v) for k, v in found.items()}


def decode(path, fmt, eos):
    if fmt == "megatron":
        return decode_megatron(path[:-4])
    if fmt == "datatrove":
        return decode_datatrove(path)
    return decode_nanogpt(path, eos) if fmt == "nanogpt" else decode_llmc(path, eos)


def stored(fmt, ids, eos, bos):
    pre = [bos] if bos is not None else []
    return [eos] + pre + ids if fmt == "llmc" else pre + ids + [eos]


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_round_trip_shards_and_split(tok, data, tmp_path, monkeypatch, fmt):
    from fastbpe_nb.io import arrow_text

    root, docs = data
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 3000)  # many slices per file
    eos, bos = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|bos|>"]
    expected = {i: d for i, d in enumerate(tok.encode_batch(pa.array(docs, pa.string())).to_pylist()) if d is not None}
    shard = 2048
    out = tmp_path / "o"
    rep = fb.encode_parquet(tok, root / "in.parquet", out, format=fmt, bos="<|bos|>",
                            shard_size=shard, val_fraction=0.25, seed=7, num_threads=2)
    by_ids = {tuple(stored(fmt, ids, eos, bos)): i for i, ids in expected.items() if ids}
    empty = [i for i, ids in expected.items() if not ids]
    assert len(by_ids) + len(empty) == len(expected) and empty  # the others are distinct
    files = data_files(str(out), fmt)
    rows = {}
    for split, paths in files.items():
        assert paths, split
        rows[split] = []
        for p in paths:
            got = decode(p, fmt, eos)
            size = os.path.getsize(p)
            assert size <= shard or len(got) == 1, (p, size, len(got))  # one huge document
            rows[split] += [by_ids.get(tuple(d), -1) for d in got]  # -1: an empty document
        assert [r for r in rows[split] if r >= 0] == sorted(r for r in rows[split] if r >= 0)
    assert sorted(rows["train"] + rows["val"]) == sorted([-1] * len(empty) + list(by_ids.values()))
    # (disjoint and nothing lost; input order kept within a split)
    assert 0.1 < len(rows["val"]) / len(expected) < 0.4
    assert rep["files"][0]["splits"]["val"]["documents"] == len(rows["val"])
    # our reader: the same documents, shard by shard
    for split in ("train", "val"):
        td = fb.read_tokens(out, split=split)
        assert td.format == fmt and [p.path for p in td.parts] == files[split]
        got = [td.document(i).tolist() for i in range(td.documents)]
        assert got == [stored(fmt, expected[r] if r >= 0 else [], eos, bos) for r in rows[split]]
        assert td.offsets[-1] == len(td.ids) == td.tokens
    # deterministic: other threads and slices give the same bytes
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 50_000)
    out2 = tmp_path / "o2"
    fb.encode_parquet(tok, root / "in.parquet", out2, format=fmt, bos="<|bos|>",
                      shard_size=shard, val_fraction=0.25, seed=7, num_threads=1)
    assert snapshot(out2) == snapshot(out)
    # another seed, another split
    out3 = tmp_path / "o3"
    fb.encode_parquet(tok, root / "in.parquet", out3, format=fmt, shard_size=shard,
                      val_fraction=0.25, seed=8)
    td3 = fb.read_tokens(out3, split="val")
    assert td3.documents != len(rows["val"]) or td3.tokens != fb.read_tokens(out, "val").tokens


def snapshot(folder):
    out = {}
    for where, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(where, n)
            body = open(p, "rb").read()
            if n.endswith(".json"):  # the marker names its input's absolute path
                body = json.dumps({k: v for k, v in json.loads(body).items()
                                   if k != "input"}).encode()
            out[os.path.relpath(p, folder)] = body
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_defaults_one_file_per_split(tok, data, tmp_path, fmt):
    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path, format=fmt)
    names = sorted(os.path.relpath(os.path.join(w, n), tmp_path)
                   for w, _, ns in os.walk(tmp_path) for n in ns if n != "in.parquet")
    assert names == {"megatron": ["in.bin", "in.idx", "in.megatron.json"],
                     "datatrove": ["in.datatrove.json", "in.ds", "in.ds.index", "in.ds.metadata"],
                     "nanogpt": ["in.nanogpt.json", "in/train.bin"],
                     "llmc": ["in.llmc.json", "in_train_000000.bin"]}[fmt]
    want = [stored(fmt, d, eos, None) for d in tok.encode_batch(pa.array(docs, pa.string())).to_pylist() if d is not None]
    path = os.path.join(tmp_path, {"megatron": "in.bin", "datatrove": "in.ds",
                                   "nanogpt": "in/train.bin", "llmc": "in_train_000000.bin"}[fmt])
    assert decode(path, fmt, eos) == want
    td = fb.read_tokens(tmp_path)
    assert td.documents == len(want) and td.ids.tolist() == sum(want, [])
    marker = json.load(open(tmp_path / f"in.{fmt}.json"))
    assert marker["tokenizer_sha256"] == marker["model_sha256"] and marker["separator_id"] == eos


@pytest.mark.parametrize("fmt", FORMATS)
def test_resume_skips_complete_and_redoes_damaged_or_changed(tok, data, tmp_path, fmt):
    root, _ = data
    out = tmp_path / "o"
    kw = dict(format=fmt, shard_size=1500)
    fb.encode_parquet(tok, root / "in.parquet", out, **kw)
    ref = snapshot(out)
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, **kw)
    assert rep["skipped_complete"] == [str(root / "in.parquet")] and not rep["files"]
    victim = sorted(data_files(str(out), fmt)["train"])[1]
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) - 2)
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, **kw)
    assert "incomplete" in rep["reencoded"][0]["reason"]
    assert snapshot(out) == ref
    # other options: encoded again, and the old shards it no longer has are gone
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, format=fmt)
    assert "shard_bytes" in rep["reencoded"][0]["reason"]
    assert len(data_files(str(out), fmt)["train"]) == 1
    assert not [n for _, _, ns in os.walk(out) for n in ns if n.startswith(".tmp-")]


def test_options_are_checked_before_any_output(tok, data, tmp_path):
    root, _ = data
    bad = [dict(format="megatron", dtype="uint32"), dict(format="llmc", dtype="int32"),
           dict(format="nanogpt", shard_size="lots"), dict(format="nanogpt", val_fraction=1.0),
           dict(format="bin", val_fraction=0.1), dict(format="datatrove", bos="<|nope|>"),
           dict(format="llmc", keep_columns=["text"])]
    for kw in bad:
        with pytest.raises(EncodeOptionsError):
            fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.json"))


def test_readers_refuse_inconsistent_files(tok, data, tmp_path):
    root, _ = data
    for fmt in FORMATS:
        fb.encode_parquet(tok, root / "in.parquet", tmp_path / fmt, format=fmt)
    with open(tmp_path / "megatron" / "in.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(OutputError, match="in.bin"):
        fb.read_tokens(tmp_path / "megatron")
    with open(tmp_path / "datatrove" / "in.ds", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(OutputError, match="in.ds"):
        fb.read_tokens(tmp_path / "datatrove")
    with open(tmp_path / "llmc" / "in_train_000000.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(OutputError, match="in_train_000000.bin"):
        fb.read_tokens(tmp_path / "llmc")
    with pytest.raises(OutputError, match="several token formats"):
        fb.read_tokens(tmp_path)


def test_stats_tokens_cli(tok, data, tmp_path, capsys):
    from fastbpe_nb.cli import main

    root, _ = data
    tok.save(tmp_path / "m.json")
    assert main(["encode", "--model", str(tmp_path / "m.json"), str(root / "in.parquet"), "-o",
                 str(tmp_path / "o"), "--format", "llmc", "--val-fraction", "0.2", "--seed",
                 "3", "--bos", "<|bos|>", "--shard-size", "4k", "-q"]) == 0
    assert main(["stats", "--tokens", str(tmp_path / "o"), "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)
    td = fb.read_tokens(tmp_path / "o")
    assert st["tokens"] == td.tokens and st["documents"] == td.documents
    counts = np.bincount(np.asarray(td.ids, np.int64))
    assert [c for _, c in st["top_ids"]] == sorted(counts, reverse=True)[:10]
    assert all(counts[i] == c for i, c in st["top_ids"])
    assert st["splits"]["val"]["documents"] == td.select("val").documents > 0
    assert main(["stats", "--tokens", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "llmc" in text and "p99" in text and "val:" in text


# -- the owning projects' own readers, when installed ---------------------------------------

def test_datatrove_merger_reads_our_files(tok, data, tmp_path):
    """datatrove's DocumentTokenizerMerger (its reader of .ds/.ds.index/.ds.metadata,
    torch-free) merges our shards unshuffled into exactly our documents."""
    pytest.importorskip("datatrove.pipeline.tokens.merger")
    from datatrove.pipeline.tokens.merger import DocumentTokenizerMerger

    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="datatrove",
                      shard_size=3000)
    assert len(data_files(str(tmp_path / "o"), "datatrove")["train"]) > 3
    DocumentTokenizerMerger(str(tmp_path / "o"), str(tmp_path / "m"), "all", shuffle=False,
                            progress=False).run(None)
    got = decode_datatrove(str(tmp_path / "m" / "000_all.ds"))
    assert got == [d + [eos] for d in tok.encode_batch(pa.array(docs, pa.string())).to_pylist() if d is not None]


def test_megatron_indexed_dataset_reads_our_files(tok, data, tmp_path):
    pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path, format="megatron")
    ds = indexed.IndexedDataset(str(tmp_path / "in"))
    want = [d + [eos] for d in tok.encode_batch(pa.array(docs, pa.string())).to_pylist() if d is not None]
    assert len(ds) == len(want) and [ds[i].tolist() for i in range(len(ds))] == want
    assert ds.document_indices.tolist() == list(range(len(want) + 1))
