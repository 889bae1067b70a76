"""MosaicML streaming MDS and litdata token datasets: writers vs readers.

Each output is read back three ways that share no code with the writer: ``read_tokens``,
a decoder written here from the formats' sources (streaming's ``MDSWriter.encode_joint_shard``
/ ``encode_sample`` / ``NDArray.encode`` and ``JointWriter.flush_shard``; litdata's
``BinaryWriter._create_chunk`` and ``TokensLoader``), and (when installed, with PyTorch)
the owning projects' own readers, and their writers for byte-for-byte comparison.
"""

import json
import os

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import EncodeOptionsError, OutputError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FORMATS = ["mds", "litdata"]
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
    root = tmp_path_factory.mktemp("mdslit")
    docs = make_docs()
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), root / "in.parquet",
                   row_group_size=29)
    return root, docs


def encoded(tok, docs):
    return {i: d for i, d in enumerate(tok.encode_batch(pa.array(docs, pa.string())).to_pylist())
            if d is not None}


# -- independent decoders, from the formats' sources ------------------------------------------

def u32(raw, at):
    return int.from_bytes(raw[at: at + 4], "little")


def decode_mds(folder):
    """Every sample of an MDS dataset folder, shard by shard: ``[[ids, ...], ...]``."""
    index = json.load(open(os.path.join(folder, "index.json")))
    assert index["version"] == 2
    shards = []
    for sh in index["shards"]:
        assert sh["format"] == "mds" and sh["version"] == 2 and sh["zip_data"] is None
        assert sh["column_names"] == ["tokens"] and sh["column_sizes"] == [None]
        dtype = np.dtype(sh["column_encodings"][0].split(":")[1])
        raw = open(os.path.join(folder, sh["raw_data"]["basename"]), "rb").read()
        assert len(raw) == sh["raw_data"]["bytes"]
        n = u32(raw, 0)
        assert n == sh["samples"]
        offsets = [u32(raw, 4 + 4 * i) for i in range(n + 1)]
        config = {k: v for k, v in sh.items() if k not in ("raw_data", "samples", "zip_data")}
        text = json.dumps(config, sort_keys=True).encode()
        assert raw[4 + 4 * (n + 1): offsets[0]] == text  # the shard's config after the offsets
        assert offsets[-1] == len(raw)
        samples = []
        for a, b in zip(offsets, offsets[1:]):
            size = u32(raw, a)  # the variable-size column's byte size
            assert size == b - a - 4
            byte = raw[a + 4]
            ndim, width = byte >> 2, 1 << (byte & 3)
            assert ndim == 1
            length = int.from_bytes(raw[a + 5: a + 5 + width], "little")
            values = np.frombuffer(raw[a + 5 + width: b], dtype)
            assert len(values) == length and length > 0
            assert width == min(w for w in (1, 2, 4, 8) if length < 1 << (8 * w))
            samples.append(values.tolist())
        shards.append(samples)
    return shards


def decode_litdata(folder):
    """Every item of a litdata TokensLoader dataset folder, chunk by chunk."""
    index = json.load(open(os.path.join(folder, "index.json")))
    cfg = index["config"]
    assert cfg["item_loader"] == "TokensLoader" and cfg["compression"] is None
    kind, code = cfg["data_format"][0].split(":")
    assert kind == "no_header_numpy"
    dtype = np.dtype({2: "int32", 5: "uint16", 6: "uint32"}[int(code)])
    chunks = []
    for ch in index["chunks"]:
        raw = open(os.path.join(folder, ch["filename"]), "rb").read()
        assert len(raw) == ch["chunk_bytes"]
        n = u32(raw, 0)
        assert n == ch["chunk_size"]
        offsets = [u32(raw, 4 + 4 * i) for i in range(n + 1)]
        assert offsets[0] == 4 * (n + 2) and offsets[-1] == len(raw)
        items = [np.frombuffer(raw[a:b], dtype).tolist() for a, b in zip(offsets, offsets[1:])]
        assert sum(map(len, items)) == ch["dim"]
        chunks.append(items)
    return chunks


def decode(folder, fmt):
    return decode_mds(folder) if fmt == "mds" else decode_litdata(folder)


def stored(ids, eos, bos):
    return ([bos] if bos is not None else []) + ids + [eos]


def shard_files(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n != "index.json")


# -- our writers against the decoders and read_tokens --------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_shards_and_split(tok, data, tmp_path, monkeypatch, fmt):
    from fastbpe_nb.io import arrow_text

    root, docs = data
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 3000)  # many slices per file
    eos, bos = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|bos|>"]
    expected = encoded(tok, docs)
    shard = 2048
    out = tmp_path / "o"
    rep = fb.encode_parquet(tok, root / "in.parquet", out, format=fmt, bos="<|bos|>",
                            shard_size=shard, val_fraction=0.25, seed=7, num_threads=2)
    by_ids = {tuple(stored(ids, eos, bos)): i for i, ids in expected.items() if ids}
    empty = [i for i, ids in expected.items() if not ids]
    assert len(by_ids) + len(empty) == len(expected) and empty
    rows = {}
    for split in ("train", "val"):
        folder = str(out / "in" / split)
        shards = decode(folder, fmt)
        assert len(shards) > 1 and len(shard_files(folder)) == len(shards)
        for path, got in zip(shard_files(folder), shards):
            assert os.path.getsize(path) <= shard or len(got) == 1  # the huge document alone
        rows[split] = [by_ids.get(tuple(d), -1) for got in shards for d in got]
        assert [r for r in rows[split] if r >= 0] == sorted(r for r in rows[split] if r >= 0)
        td = fb.read_tokens(folder)
        assert td.format == fmt and td.splits == ["train"]  # (a folder of its own)
        got = [td.document(i).tolist() for i in range(td.documents)]
        assert got == [d for s in shards for d in s]
    assert sorted(rows["train"] + rows["val"]) == sorted([-1] * len(empty) + list(by_ids.values()))
    assert rep["files"][0]["splits"]["val"]["documents"] == len(rows["val"])
    td = fb.read_tokens(out)
    assert td.splits == ["train", "val"] and td.select("val").documents == len(rows["val"])
    assert td.offsets[-1] == len(td.ids) == td.tokens
    # deterministic: other threads, slices and pieces give the same bytes
    from fastbpe_nb.io import token_formats_streaming

    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 50_000)
    monkeypatch.setattr(token_formats_streaming, "PIECE_IDS", 50)  # the huge document streams
    out2 = tmp_path / "o2"
    fb.encode_parquet(tok, root / "in.parquet", out2, format=fmt, bos="<|bos|>",
                      shard_size=shard, val_fraction=0.25, seed=7, num_threads=1)
    assert snapshot(out2) == snapshot(out)


def snapshot(folder):
    out = {}
    for where, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(where, n)
            body = open(p, "rb").read()
            if n.endswith(".json") and n != "index.json":  # the marker names its input's path
                body = json.dumps({k: v for k, v in json.loads(body).items()
                                   if k != "input"}).encode()
            out[os.path.relpath(p, folder)] = body
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_defaults_one_dataset_folder(tok, data, tmp_path, fmt):
    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path, format=fmt)
    names = sorted(os.path.relpath(os.path.join(w, n), tmp_path)
                   for w, _, ns in os.walk(tmp_path) for n in ns if n != "in.parquet")
    assert names == {"mds": ["in.mds.json", "in/index.json", "in/shard.00000.mds"],
                     "litdata": ["in.litdata.json", "in/chunk-0-0.bin", "in/index.json"]}[fmt]
    want = [stored(d, eos, None) for d in encoded(tok, docs).values()]
    assert decode(str(tmp_path / "in"), fmt) == [want]
    td = fb.read_tokens(tmp_path)
    assert td.documents == len(want) and td.ids.tolist() == sum(want, [])
    assert td.ids.dtype == np.uint16
    index = json.load(open(tmp_path / "in" / "index.json"))
    marker = json.load(open(tmp_path / f"in.{fmt}.json"))
    assert index["fastbpe_nb"]["tokenizer_sha256"] == marker["model_sha256"]
    assert index["fastbpe_nb"]["separator_id"] == eos
    size = {"mds": index["shards"][0]["size_limit"] if fmt == "mds" else None,
            "litdata": index["config"]["chunk_bytes"] if fmt == "litdata" else None}[fmt]
    assert size == 1 << 26  # streaming's default size_limit


@pytest.mark.parametrize("fmt,dtype", [("mds", "int32"), ("mds", "uint32"),
                                       ("litdata", "uint32"), ("litdata", "int32")])
def test_wide_dtypes(tok, data, tmp_path, fmt, dtype):
    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path, format=fmt, dtype=dtype)
    want = [stored(d, eos, None) for d in encoded(tok, docs).values()]
    assert decode(str(tmp_path / "in"), fmt) == [want]
    td = fb.read_tokens(tmp_path)
    assert td.ids.dtype == np.dtype(dtype) and td.ids.tolist() == sum(want, [])


def test_mds_concat_tokens(tok, data, tmp_path, monkeypatch):
    """llm-foundry's concat mode: samples of exactly N ids of the stream of documents
    (BOS + ids + EOS each), the last one the remainder; read_tokens cuts at EOS."""
    from fastbpe_nb.io import arrow_text

    root, docs = data
    monkeypatch.setattr(arrow_text, "SLICE_BYTES", 3000)
    eos, bos = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|bos|>"]
    n = 97
    rep = fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="mds",
                            concat_tokens=n, bos="<|bos|>", shard_size=5000)
    want = [stored(d, eos, bos) for d in encoded(tok, docs).values()]
    stream = sum(want, [])
    shards = decode_mds(str(tmp_path / "o" / "in"))
    samples = [s for sh in shards for s in sh]
    assert len(shards) > 3 and all(len(s) == n for s in samples[:-1])
    assert 0 < len(samples[-1]) <= n and sum(samples, []) == stream
    td = fb.read_tokens(tmp_path / "o")
    assert [td.document(i).tolist() for i in range(td.documents)] == want
    assert rep["files"][0]["splits"]["train"]["documents"] == len(want)
    index = json.load(open(tmp_path / "o" / "in" / "index.json"))
    assert index["fastbpe_nb"]["concat_tokens"] == n
    # pieces of every size (the huge document in many) give the same bytes
    from fastbpe_nb.io import token_formats, token_formats_streaming

    monkeypatch.setattr(token_formats, "PIECE_IDS", 40)
    monkeypatch.setattr(token_formats_streaming, "PIECE_IDS", 70)
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "p", format="mds",
                      concat_tokens=n, bos="<|bos|>", shard_size=5000)
    assert snapshot(tmp_path / "p") == snapshot(tmp_path / "o")
    # resume knows the option: another length is encoded again
    rep = fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="mds",
                            concat_tokens=n + 1, bos="<|bos|>", shard_size=5000, resume=True)
    assert "concat_tokens" in rep["reencoded"][0]["reason"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_resume_redoes_damaged_or_missing_shard(tok, data, tmp_path, fmt):
    root, _ = data
    out = tmp_path / "o"
    kw = dict(format=fmt, shard_size=3000, val_fraction=0.2, seed=3)
    fb.encode_parquet(tok, root / "in.parquet", out, **kw)
    ref = snapshot(out)
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, **kw)
    assert rep["skipped_complete"] == [str(root / "in.parquet")] and not rep["files"]
    victims = shard_files(str(out / "in" / "train"))
    with open(victims[1], "r+b") as f:
        f.truncate(os.path.getsize(victims[1]) - 2)
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, **kw)
    assert "incomplete" in rep["reencoded"][0]["reason"] and snapshot(out) == ref
    os.unlink(victims[2])
    os.unlink(out / "in" / "val" / "index.json")
    rep = fb.encode_parquet(tok, root / "in.parquet", out, resume=True, **kw)
    assert "missing" in rep["reencoded"][0]["reason"] and snapshot(out) == ref
    # other options: the old shards and split folders it no longer has are gone
    fb.encode_parquet(tok, root / "in.parquet", out, resume=True, format=fmt)
    left = sorted(os.path.relpath(os.path.join(w, n), out) for w, _, ns in os.walk(out) for n in ns)
    assert left == [f"in.{fmt}.json"] + (["in/index.json", "in/shard.00000.mds"] if fmt == "mds"
                                         else ["in/chunk-0-0.bin", "in/index.json"])
    assert not [n for _, _, ns in os.walk(out) for n in ns if n.startswith(".tmp-")]


def test_options_are_checked_before_any_output(tok, data, tmp_path):
    root, _ = data
    bad = [dict(format="llmc", concat_tokens=8), dict(format="litdata", concat_tokens=8),
           dict(format="mds", concat_tokens=0), dict(format="mds", concat_tokens=True),
           dict(format="mds", concat_tokens=2.5), dict(format="mds", shard_size="4G"),
           dict(format="litdata", shard_size=2**32), dict(format="litdata", dtype="int64"),
           dict(format="parquet", concat_tokens=8)]
    for kw in bad:
        with pytest.raises(EncodeOptionsError):
            fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.json"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_document_too_large_for_uint32_offsets(tok, data, tmp_path, monkeypatch, fmt):
    """A sample no shard can address (4 GiB here made 20 kB) is refused before it is
    written, naming the dataset; nothing of the output is left."""
    from fastbpe_nb.io import token_formats_streaming

    root, _ = data
    monkeypatch.setattr(token_formats_streaming, "MAX_SHARD_BYTES", 20_000)
    with pytest.raises(OutputError, match="uint32 offsets"):
        fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format=fmt,
                          shard_size=4000)
    assert [n for _, _, ns in os.walk(tmp_path / "o") for n in ns] == []


def test_readers_refuse_inconsistent_files(tok, data, tmp_path):
    root, _ = data
    for fmt in FORMATS:
        fb.encode_parquet(tok, root / "in.parquet", tmp_path / fmt, format=fmt)
    with open(tmp_path / "mds" / "in" / "shard.00000.mds", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(OutputError, match="shard.00000.mds"):
        fb.read_tokens(tmp_path / "mds")
    with open(tmp_path / "litdata" / "in" / "chunk-0-0.bin", "r+b") as f:
        f.seek(0)
        f.write(b"\1")  # the item count
    with pytest.raises(OutputError, match="chunk-0-0.bin"):
        fb.read_tokens(tmp_path / "litdata")
    # a sample whose shape byte lies
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "m2", format="mds")
    shard = tmp_path / "m2" / "in" / "shard.00000.mds"
    raw = bytearray(shard.read_bytes())
    first = int.from_bytes(raw[4:8], "little")
    raw[first + 4] = (2 << 2) | 1
    shard.write_bytes(bytes(raw))
    with pytest.raises(OutputError, match="1-D array"):
        fb.read_tokens(tmp_path / "m2")
    with pytest.raises(OutputError, match="several token formats"):
        fb.read_tokens(tmp_path)


def test_stats_tokens_cli(tok, data, tmp_path, capsys):
    from fastbpe_nb.cli import main

    root, _ = data
    tok.save(tmp_path / "m.json")
    assert main(["encode", "--model", str(tmp_path / "m.json"), str(root / "in.parquet"), "-o",
                 str(tmp_path / "o"), "--format", "mds", "--val-fraction", "0.2",
                 "--concat-tokens", "64", "--shard-size", "4k", "-q"]) == 0
    assert main(["stats", "--tokens", str(tmp_path / "o"), "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)
    td = fb.read_tokens(tmp_path / "o")
    assert st["format"] == "mds" and st["tokens"] == td.tokens and st["documents"] == td.documents
    counts = np.bincount(np.asarray(td.ids, np.int64))
    assert [c for _, c in st["top_ids"]] == sorted(counts, reverse=True)[:10]
    assert st["splits"]["val"]["documents"] == td.select("val").documents > 0


def test_merged_index_is_read_once(tok, data, tmp_path):
    """A root index.json listing the datasets' shards (streaming's merge_index layout:
    basenames with the subfolder) reads as the same documents, not twice."""
    root, docs = data
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="mds", shard_size=4000)
    sub = json.load(open(tmp_path / "o" / "in" / "index.json"))
    merged = {"version": 2, "shards": [dict(s, raw_data=dict(s["raw_data"], basename="in/"
                                                              + s["raw_data"]["basename"]))
                                       for s in sub["shards"]]}
    (tmp_path / "o" / "index.json").write_text(json.dumps(merged))
    td = fb.read_tokens(tmp_path / "o")
    assert td.documents == len(encoded(tok, docs)) and len(td.parts) == 1


# -- the owning projects' own readers and writers (need PyTorch: make test-formats) ---------

def test_streaming_reads_our_mds(tok, data, tmp_path):
    pytest.importorskip("torch")
    streaming = pytest.importorskip("streaming")
    root, docs = data
    eos, bos = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|bos|>"]
    want = [stored(d, eos, bos) for d in encoded(tok, docs).values()]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="mds", bos="<|bos|>",
                      shard_size=3000, val_fraction=0.3, seed=5)
    got = {}
    for split in ("train", "val"):
        ds = streaming.StreamingDataset(local=str(tmp_path / "o" / "in"), split=split,
                                        shuffle=False, batch_size=1)
        got[split] = [ds[i]["tokens"].tolist() for i in range(len(ds))]
        td = fb.read_tokens(tmp_path / "o" / "in" / split)
        assert got[split] == [td.document(i).tolist() for i in range(td.documents)]
    assert sorted(map(tuple, got["train"] + got["val"])) == sorted(map(tuple, want))
    # the shard reader directly
    from streaming.base.format.mds.reader import MDSReader

    index = json.load(open(tmp_path / "o" / "in" / "train" / "index.json"))
    reader = MDSReader.from_json(str(tmp_path / "o" / "in"), "train", index["shards"][0])
    assert reader.get_item(0)["tokens"].tolist() == got["train"][0]
    # concat mode, llm-foundry's int32
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "c", format="mds", dtype="int32",
                      concat_tokens=128)
    ds = streaming.StreamingDataset(local=str(tmp_path / "c" / "in"), shuffle=False,
                                    batch_size=1)
    samples = [ds[i]["tokens"] for i in range(len(ds))]
    assert samples[0].dtype == np.int32 and all(len(s) == 128 for s in samples[:-1])
    want = sum([stored(d, eos, None) for d in encoded(tok, docs).values()], [])
    assert np.concatenate(samples).tolist() == want


def test_mdswriter_writes_the_same_bytes(tok, data, tmp_path):
    pytest.importorskip("torch")
    streaming = pytest.importorskip("streaming")
    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    for dtype in ("uint16", "int32"):
        out = tmp_path / dtype
        fb.encode_parquet(tok, root / "in.parquet", out, format="mds", shard_size=6000,
                          dtype=dtype)
        ref = tmp_path / f"ref-{dtype}"
        with streaming.MDSWriter(columns={"tokens": f"ndarray:{dtype}"}, out=str(ref),
                                 size_limit=6000) as w:
            for d in encoded(tok, docs).values():
                w.write({"tokens": np.array(stored(d, eos, None), dtype)})
        mine = sorted(os.listdir(out / "in"))
        assert mine == sorted(os.listdir(ref)) and len(mine) > 3
        for name in mine:
            a, b = (out / "in" / name).read_bytes(), (ref / name).read_bytes()
            if name == "index.json":
                a, b = json.loads(a), json.loads(b)
                a.pop("fastbpe_nb")
            assert a == b, name


def test_litdata_reads_our_chunks(tok, data, tmp_path):
    pytest.importorskip("torch")
    litdata = pytest.importorskip("litdata")
    from litdata.streaming.item_loader import TokensLoader

    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="litdata",
                      shard_size=3000, val_fraction=0.3, seed=5, dtype="uint32")
    block = 16
    for split in ("train", "val"):
        folder = str(tmp_path / "o" / "in" / split)
        td = fb.read_tokens(folder)
        ds = litdata.StreamingDataset(folder, item_loader=TokensLoader(block_size=block),
                                      shuffle=False)
        got = [np.asarray(ds[i]) for i in range(len(ds))]
        # TokensLoader: blocks within each chunk, a chunk's tail short of a block unserved
        want = []
        for part in td.parts:
            ids = np.asarray(part.ids)
            want += [ids[k: k + block] for k in range(0, len(ids) - block + 1, block)]
        assert len(got) == len(want) > 10
        assert all(g.dtype == np.uint32 and np.array_equal(g, w) for g, w in zip(got, want))
    td = fb.read_tokens(tmp_path / "o")  # (documents: from the chunks' item offsets)
    got = [tuple(td.document(i).tolist()) for i in range(td.documents)]
    assert sorted(got) == sorted(tuple(stored(d, eos, None)) for d in encoded(tok, docs).values())


def test_litdata_writer_writes_the_same_chunk(tok, data, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("litdata")
    from litdata.streaming.item_loader import TokensLoader
    from litdata.streaming.writer import BinaryWriter

    root, docs = data
    eos = tok.special_tokens["<|endoftext|>"]
    fb.encode_parquet(tok, root / "in.parquet", tmp_path / "o", format="litdata")
    ref = tmp_path / "ref"
    w = BinaryWriter(str(ref), chunk_bytes=1 << 26, item_loader=TokensLoader())
    for i, d in enumerate(encoded(tok, docs).values()):
        w[i] = np.array(stored(d, eos, None), np.uint16)
    w.done()
    w.merge()
    mine = (tmp_path / "o" / "in" / "chunk-0-0.bin").read_bytes()
    assert (ref / "chunk-0-0.bin").read_bytes() == mine
    a = json.load(open(ref / "index.json"))
    b = json.load(open(tmp_path / "o" / "in" / "index.json"))
    assert a["chunks"] == b["chunks"]
    assert {k: v for k, v in a["config"].items() if k != "types"} == b["config"]
