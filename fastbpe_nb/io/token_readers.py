"""Read token files back: Megatron, datatrove, nanoGPT, llm.c, MDS, litdata and ``bin``.

``read_tokens(path)`` finds the token files at ``path`` (a file, a Megatron prefix, or a
folder searched recursively), tells their format from their names and headers, and
returns a ``TokenData``: per file a memory-mapped id array and the document offsets
(int64, ``n_docs + 1``, the document as stored: with its separator / BOS tokens).

These readers are written from each format's own documentation (Megatron-Core's
``indexed_dataset.py``, datatrove's ``TokenizedFile``, nanoGPT's ``prepare.py``, llm.c's
``write_datafile``) and share no code with the writers (``token_formats``), so a test
comparing the two checks something. nanoGPT and llm.c files hold no document index: the
documents are cut at the separator (after it for nanoGPT, before it for llm.c), whose id
comes from our completeness marker when there is one, else from ``eos=``.

MosaicML MDS and litdata datasets are found by their ``index.json`` and read by
``token_readers_streaming``: an MDS dataset is one part over its shards, each sample a
document (its ``ids`` a ``SampledIds``: samples carry headers, so the ids are gathered
from the memory-mapped shards only where sliced); with ``concat_tokens`` (fixed-length
samples, recorded in its ``index.json``) it is cut after each separator instead. A litdata
chunk is one part, its items (documents) delimited by the offsets the chunk records.
Shards listed by several ``index.json`` (a merged index, streaming's ``merge_index``) are
read once.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from ..errors import OutputError
from .token_readers_streaming import index_format, litdata_chunks, mds_dataset

_MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
_MEGATRON_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64",
                    7: "float32", 8: "uint16"}
_LLMC = {(20240520, 1): "uint16", (20240801, 7): "uint32"}
_CHUNK = 1 << 24


@dataclasses.dataclass
class TokenPart:
    """One token file: ``ids`` (memory-mapped) and ``offsets`` (int64, documents + 1)."""

    path: str
    format: str
    split: str
    ids: np.ndarray
    offsets: np.ndarray
    order: tuple = ()  # the sort key when the path's name order is not the shards' order
    files: tuple = ()  # the files holding the ids, when not ``path`` itself

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1


@dataclasses.dataclass
class TokenData:
    """The token files found at a path, in name order (train before val)."""

    format: str
    parts: list

    def select(self, split: str) -> "TokenData":
        return TokenData(self.format, [p for p in self.parts if p.split == split])

    @property
    def splits(self) -> list:
        return sorted({p.split for p in self.parts}, key=lambda s: (s != "train", s))

    @property
    def ids(self) -> np.ndarray:
        """All ids: the memory map itself for one file, else a concatenated copy."""
        if len(self.parts) == 1:
            return self.parts[0].ids
        return np.concatenate([p.ids for p in self.parts]) if self.parts else np.zeros(0, np.uint16)

    @property
    def offsets(self) -> np.ndarray:
        out, base = [np.zeros(1, np.int64)], 0
        for p in self.parts:
            out.append(p.offsets[1:] + base)
            base += len(p.ids)
        return np.concatenate(out)

    @property
    def tokens(self) -> int:
        return sum(len(p.ids) for p in self.parts)

    @property
    def documents(self) -> int:
        return sum(p.documents for p in self.parts)

    def document(self, i: int) -> np.ndarray:
        for p in self.parts:
            if i < p.documents:
                return np.asarray(p.ids[p.offsets[i]: p.offsets[i + 1]])
            i -= p.documents
        raise IndexError("document index out of range")


def _memmap(path, dtype, offset=0, count=None):
    size = os.path.getsize(path) - offset
    n = size // np.dtype(dtype).itemsize if count is None else count
    if n == 0:
        out = np.zeros(0, dtype)
        out.flags.writeable = False
        return out
    return np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", offset=offset,
                     shape=(n,))


def read_megatron(prefix, split="train") -> TokenPart:
    """A Megatron-Core indexed dataset ``<prefix>.bin`` + ``<prefix>.idx``."""
    idx_path, bin_path = prefix + ".idx", prefix + ".bin"
    try:
        with open(idx_path, "rb") as f:
            head = f.read(34)
    except OSError as exc:
        raise OutputError(f"{idx_path}: cannot read ({exc.strerror or exc})") from None
    if len(head) < 34 or head[:9] != _MEGATRON_MAGIC:
        raise OutputError(f"{idx_path}: not a Megatron index (no MMIDIDX header)")
    version = int.from_bytes(head[9:17], "little")
    code = head[17]
    n_seq = int.from_bytes(head[18:26], "little")
    n_doc_idx = int.from_bytes(head[26:34], "little")
    if version != 1 or code not in _MEGATRON_DTYPES:
        raise OutputError(f"{idx_path}: version {version}, dtype code {code}: not readable")
    dtype = np.dtype(_MEGATRON_DTYPES[code])
    want = 34 + 12 * n_seq + 8 * n_doc_idx
    have = os.path.getsize(idx_path)
    if have < want:  # (a multimodal index has one more byte per sequence after this)
        raise OutputError(f"{idx_path}: {have} bytes, its counts need {want}: truncated")
    lengths = np.fromfile(idx_path, "<i4", n_seq, offset=34).astype(np.int64)
    pointers = np.fromfile(idx_path, "<i8", n_seq, offset=34 + 4 * n_seq)
    doc_idx = np.fromfile(idx_path, "<i8", n_doc_idx, offset=34 + 12 * n_seq)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if not np.array_equal(pointers, starts[:-1] * dtype.itemsize):
        raise OutputError(f"{idx_path}: sequences are not stored back to back")
    if n_doc_idx == 0 or doc_idx[0] != 0 or doc_idx[-1] != n_seq or np.any(np.diff(doc_idx) < 0):
        raise OutputError(f"{idx_path}: the document index is not 0..{n_seq}, non-decreasing")
    if os.path.getsize(bin_path) != starts[-1] * dtype.itemsize:
        raise OutputError(f"{bin_path}: {os.path.getsize(bin_path)} bytes, the index says "
                          f"{starts[-1] * dtype.itemsize}")
    return TokenPart(bin_path, "megatron", split, _memmap(bin_path, dtype), starts[doc_idx])


def read_datatrove(ds_path, split="train", token_size=None) -> TokenPart:
    """A datatrove ``.ds`` file with its ``.ds.index`` (uint64 document ends) and metadata."""
    if token_size is None:
        token_size = 2
        try:
            with open(ds_path + ".metadata", encoding="utf-8") as f:
                first = f.read().splitlines()[0]
            if "|" in first:
                token_size = int(first.rsplit("|", 1)[1])
        except (OSError, IndexError, ValueError):
            pass
    if token_size not in (2, 4):
        raise OutputError(f"{ds_path}.metadata: token size {token_size} (datatrove writes 2 or 4)")
    size = os.path.getsize(ds_path)
    if size % token_size:
        raise OutputError(f"{ds_path}: {size} bytes is not a whole number of {token_size}-byte ids")
    ids = _memmap(ds_path, "uint16" if token_size == 2 else "uint32")
    try:
        ends = np.fromfile(ds_path + ".index", "<u8").astype(np.int64)
    except OSError:
        ends = np.array([len(ids)], np.int64) if len(ids) else np.zeros(0, np.int64)
    if len(ends) and (np.any(np.diff(ends) < 0) or ends[-1] != len(ids)) or (
            not len(ends) and len(ids)):
        raise OutputError(f"{ds_path}.index: document ends do not end at the file's "
                          f"{len(ids)} tokens")
    return TokenPart(ds_path, "datatrove", split, ids, np.concatenate([[0], ends]).astype(np.int64))


def _eos_positions(ids, eos) -> np.ndarray:
    out = [np.flatnonzero(ids[a: a + _CHUNK] == eos) + a for a in range(0, len(ids), _CHUNK)]
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def _cut_after(ids, eos) -> np.ndarray:
    if eos is None or len(ids) == 0:
        return np.array([0, len(ids)] if len(ids) else [0], np.int64)
    ends = _eos_positions(ids, eos) + 1
    if not len(ends) or ends[-1] != len(ids):
        ends = np.append(ends, len(ids))
    return np.concatenate([[0], ends]).astype(np.int64)


def _cut_before(ids, eos) -> np.ndarray:
    if eos is None or len(ids) == 0:
        return np.array([0, len(ids)] if len(ids) else [0], np.int64)
    starts = _eos_positions(ids, eos)
    if not len(starts) or starts[0] != 0:
        starts = np.concatenate([[0], starts])
    return np.append(starts, len(ids)).astype(np.int64)


def read_nanogpt(path, split=None, dtype="uint16", eos=None) -> TokenPart:
    """A raw nanoGPT ``train.bin`` / ``val.bin``: documents end after each ``eos``."""
    split = split or ("val" if os.path.basename(path).startswith("val") else "train")
    ids = _memmap(path, dtype)
    if os.path.getsize(path) % ids.itemsize:
        raise OutputError(f"{path}: not a whole number of {np.dtype(dtype).name} ids")
    return TokenPart(path, "nanogpt", split, ids, _cut_after(ids, eos))


def read_llmc(path, split=None, eos=None) -> TokenPart:
    """An llm.c shard: 256 int32 header (magic, version, token count), then the ids;
    documents start at each ``eos`` (llm.c puts the end-of-text token first)."""
    split = split or ("val" if "_val_" in os.path.basename(path) else "train")
    header = np.fromfile(path, "<i4", 256)
    if len(header) < 256 or (int(header[0]), int(header[1])) not in _LLMC:
        raise OutputError(f"{path}: not an llm.c token shard (magic/version "
                          f"{header[:2].tolist() if len(header) >= 2 else None})")
    dtype = _LLMC[(int(header[0]), int(header[1]))]
    n = int(header[2])
    if os.path.getsize(path) != 1024 + n * np.dtype(dtype).itemsize:
        raise OutputError(f"{path}: the header says {n} tokens, the file holds "
                          f"{(os.path.getsize(path) - 1024) / np.dtype(dtype).itemsize:g}")
    ids = _memmap(path, dtype, offset=1024, count=n)
    return TokenPart(path, "llmc", split, ids, _cut_before(ids, eos))


def read_mds(folder, split="train") -> TokenPart:
    """A MosaicML streaming MDS dataset (``index.json`` + ``shard.*.mds``) of one
    ``ndarray`` column: one part (its ``files``: the shards), each sample a document
    (with ``concat_tokens``: cut after each separator; see the module doc)."""
    index, ids, lengths, paths, sep = mds_dataset(folder)
    if sep is not None:  # fixed-length samples: the documents end at the separators
        docs = _cut_after(ids, sep)
    else:
        docs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return TokenPart(index, "mds", split, ids, docs, files=tuple(paths))


def read_litdata(folder, split="train") -> list:
    """A litdata dataset of TokensLoader chunks (``index.json`` + ``chunk-*.bin``): one part
    per chunk, its items (one per document) delimited by the chunk's offsets."""
    return [TokenPart(path, "litdata", split, ids, docs, (folder + os.sep, k), (path,))
            for k, (path, ids, docs) in enumerate(litdata_chunks(folder))]


def read_fastbpe_bin(path, split="train") -> TokenPart:
    """Our ``format="bin"`` output (``read_bin``)."""
    from .bin_files import read_bin

    ids, index = read_bin(path)
    return TokenPart(path, "bin", split, ids, np.asarray(index, np.int64))


def _marker_for(path, fmt):
    """Our completeness marker of a nanoGPT / llm.c file, if it is ours."""
    folder = os.path.dirname(os.path.abspath(path))
    if fmt == "nanogpt":
        candidates = [folder + ".nanogpt.json"]
    else:
        name = os.path.basename(path)
        cut = max(name.rfind("_train_"), name.rfind("_val_"))
        candidates = [os.path.join(folder, name[:cut] + ".llmc.json")] if cut > 0 else []
    for c in candidates:
        try:
            with open(c, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            continue
    return None


def _classify(path):
    """The format of one file, or None when it is not a token file (or a part of one)."""
    name = os.path.basename(path)
    if name.startswith(".tmp-"):
        return None
    if name.endswith(".idx"):
        with open(path, "rb") as f:
            return "megatron" if f.read(9) == _MEGATRON_MAGIC else None
    if name.endswith(".ds"):
        return "datatrove"
    if name == "index.json":
        return index_format(path)
    if not name.endswith(".bin"):
        return None
    if os.path.exists(os.path.join(os.path.dirname(path), "index.json")):
        return None  # a litdata chunk: found by its index.json
    if os.path.exists(path[:-4] + ".idx"):
        return None  # the data of a Megatron prefix: found by its .idx
    if os.path.exists(path + ".json"):
        return "bin"
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) == 8 and (int.from_bytes(head[:4], "little", signed=True),
                           int.from_bytes(head[4:], "little", signed=True)) in _LLMC:
        return "llmc"
    return "nanogpt"


def _split_of(path, root, fmt):
    if fmt in ("megatron", "datatrove", "bin", "mds", "litdata"):
        rel = os.path.relpath(os.path.dirname(os.path.abspath(path)), root)
        return "val" if "val" in rel.split(os.sep) else "train"
    return None


def _read(path, fmt, root, eos, dtype):
    split = _split_of(path, root, fmt)
    if fmt == "megatron":
        return read_megatron(path[:-4], split)
    if fmt == "datatrove":
        return read_datatrove(path, split)
    if fmt == "bin":
        return read_fastbpe_bin(path, split)
    if fmt in ("mds", "litdata"):
        return (read_mds if fmt == "mds" else read_litdata)(os.path.dirname(path), split)
    meta = _marker_for(path, fmt) or {}
    sep = meta.get("separator_id", eos)
    if fmt == "llmc":
        return read_llmc(path, split, sep)
    return read_nanogpt(path, split, meta.get("dtype", dtype or "uint16"), sep)


def read_tokens(path, split=None, eos=None, dtype=None) -> TokenData:
    """The token files at ``path`` (a file, a Megatron prefix or a folder), format detected.

    ``split``: only ``"train"`` or ``"val"`` files. ``eos`` / ``dtype``: the separator id
    and id type of nanoGPT / llm.c files not written by us (ours record them).
    Raises OutputError naming the file that is inconsistent, or when several formats
    are mixed under one folder.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        root = os.path.abspath(path)
        found = []
        for where, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                full = os.path.join(where, name)
                fmt = _classify(full)
                if fmt is not None:
                    found.append((full, fmt))
    else:
        root = os.path.dirname(os.path.abspath(path))
        if not os.path.exists(path) and os.path.exists(path + ".idx"):
            path += ".idx"  # a Megatron prefix
        if path.endswith(".bin") and os.path.exists(path[:-4] + ".idx"):
            path = path[:-4] + ".idx"
        if not os.path.exists(path):
            raise OutputError(f"{path}: no such token file or folder")
        fmt = _classify(path)
        if fmt is None:
            raise OutputError(f"{path}: not a token file this reader knows")
        found = [(path, fmt)]
    formats = sorted({f for _, f in found})
    if not formats:
        raise OutputError(f"{path}: no token files found")
    if len(formats) > 1:
        raise OutputError(f"{path}: holds several token formats ({', '.join(formats)}); "
                          "read their folders one at a time")
    parts, seen = [], set()
    for p, f in found:
        got = _read(p, f, root, eos, dtype)
        for part in got if isinstance(got, list) else [got]:
            files = part.files or (part.path,)
            if not seen.intersection(files):  # a merged index lists its datasets' shards again
                seen.update(files)
                parts.append(part)
    parts.sort(key=lambda p: (p.split != "train", p.order or (p.path,)))
    data = TokenData(formats[0], parts)
    return data.select(split) if split else data


def token_stats(data: TokenData, top: int = 10) -> dict:
    """Tokens, documents, document-length percentiles and the most frequent ids."""
    lens = np.diff(data.offsets)
    counts = np.zeros(0, np.int64)
    for p in data.parts:
        for a in range(0, len(p.ids), _CHUNK):
            c = np.bincount(np.asarray(p.ids[a: a + _CHUNK]).astype(np.int64))
            if len(c) > len(counts):
                c[: len(counts)] += counts
                counts = c
            else:
                counts[: len(c)] += c
    order = np.argsort(-counts, kind="stable")[:top]
    pct = ({f"p{q}": float(np.percentile(lens, q)) for q in (50, 90, 99)} if len(lens) else {})
    return {"format": data.format, "files": len(data.parts), "tokens": data.tokens,
            "documents": data.documents,
            "splits": {s: {"tokens": data.select(s).tokens, "documents": data.select(s).documents}
                       for s in data.splits},
            "length_mean": float(lens.mean()) if len(lens) else 0.0, **pct,
            "length_max": int(lens.max()) if len(lens) else 0,
            "top_ids": [[int(i), int(counts[i])] for i in order if counts[i]]}


def format_token_stats(path, st: dict, fmt: str = "markdown") -> str:
    """``fastbpe stats --tokens``: ``token_stats`` as text (or JSON)."""
    if fmt == "json":
        return json.dumps(st, indent=2)
    lines = [f"{path}: {st['format']}, {st['files']} file(s), {st['tokens']:,} tokens, "
             f"{st['documents']:,} documents"]
    lines += [f"  {name}: {sp['tokens']:,} tokens, {sp['documents']:,} documents"
              for name, sp in st["splits"].items()]
    if st["documents"]:
        lines.append(f"document length (tokens): mean {st['length_mean']:.1f}, p50 "
                     f"{st['p50']:g}, p90 {st['p90']:g}, p99 {st['p99']:g}, max "
                     f"{st['length_max']:,}")
    lines.append("most frequent ids: " + ", ".join(f"{i} ({c:,})" for i, c in st["top_ids"]))
    return "\n".join(lines)
