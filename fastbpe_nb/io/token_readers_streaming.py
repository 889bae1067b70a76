"""Readers of MosaicML streaming MDS and litdata datasets, from their ``index.json``.

Written from streaming's ``MDSWriter`` / ``MDSReader`` / ``NDArray`` encoding and
litdata's ``BinaryWriter._create_chunk`` / ``TokensLoader`` (no code shared with our
writers, ``token_formats_streaming``); ``token_readers`` makes ``TokenPart`` of them.

* MDS shard: uint32 sample count ``n``, uint32 offsets of the ``n + 1`` sample bounds,
  the shard's config JSON, the samples; a sample of one dynamic-shape ``ndarray`` column:
  uint32 byte size, one byte ``ndim << 2 | k`` (shape type uint8/16/32/64), the length,
  the ids. Samples carry headers, so the ids are a ``SampledIds`` (an array-like that
  copies only what is sliced) over the memory-mapped shards.
* litdata chunk: uint32 item count ``n``, uint32 offsets of the ``n + 1`` item bounds, the
  items: raw ids (TokensLoader's ``no_header_numpy`` / ``no_header_tensor``).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import OutputError


class SampledIds:
    """The ids of an MDS dataset: a read-only 1-D array-like over its memory-mapped shards
    (``len``, slicing, ``np.asarray``, ``tolist``), the samples' headers left out.
    ``raws``: the shards; sample ``i`` is ``lengths[i]`` ids at byte ``starts[i]`` of
    ``raws[shard_of[i]]``."""

    ndim = 1

    def __init__(self, raws, shard_of, starts, lengths, dtype):
        self.raws, self.shard_of = raws, np.asarray(shard_of, np.int64)
        self.starts = np.asarray(starts, np.int64)
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.ends = np.cumsum(np.asarray(lengths, np.int64))
        self.shape = (int(self.ends[-1]) if len(self.ends) else 0,)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= i < len(self):
                raise IndexError("index out of range")
            return self[i: i + 1][0]
        if not isinstance(key, slice):
            return np.asarray(self)[key]
        a, b, step = key.indices(len(self))
        if step != 1:
            return self[a:b][::step] if step > 0 else np.asarray(self)[key]
        if b <= a:
            return np.zeros(0, self.dtype)
        first = int(np.searchsorted(self.ends, a, side="right"))
        last = int(np.searchsorted(self.ends, b - 1, side="right"))
        out = []
        for s in range(first, last + 1):
            s0 = int(self.ends[s - 1]) if s else 0
            lo, hi = max(a, s0), min(b, int(self.ends[s]))
            out.append(np.frombuffer(self.raws[self.shard_of[s]], self.dtype, hi - lo,
                                     int(self.starts[s]) + (lo - s0) * self.dtype.itemsize))
        return np.concatenate(out) if len(out) > 1 else out[0].copy()

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def tolist(self) -> list:
        return self[:].tolist()


_MDS_VALUE_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")


def _load_index(folder, key):
    path = os.path.join(folder, "index.json")
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        if not isinstance(obj, dict) or not isinstance(obj.get(key), list):
            raise ValueError(f"no {key!r} list")
        return path, obj
    except (OSError, ValueError) as exc:
        raise OutputError(f"{path}: not a readable index ({exc})") from None


def index_format(path):
    """``"mds"`` or ``"litdata"`` for an ``index.json`` of theirs, else None."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return None
    if isinstance(obj, dict) and "shards" in obj and obj.get("version") == 2:
        return "mds"
    if isinstance(obj, dict) and "chunks" in obj and "config" in obj:
        return "litdata"
    return None


def _shard_header(path, n_expected, head_min):
    """A shard / chunk's item count and uint32 offsets, checked against its size."""
    size = os.path.getsize(path)
    raw = np.memmap(path, np.uint8, "r") if size else np.zeros(0, np.uint8)
    if size < 4:
        raise OutputError(f"{path}: {size} bytes, no sample count")
    n = int(np.frombuffer(raw, "<u4", 1)[0])
    if n != n_expected or size < 4 * (n + 2):
        raise OutputError(f"{path}: {n} samples, its index says {n_expected}")
    offsets = np.frombuffer(raw, "<u4", n + 1, 4).astype(np.int64)
    if offsets[0] < head_min or np.any(np.diff(offsets) < 0) or offsets[-1] != size:
        raise OutputError(f"{path}: the sample offsets do not run from the header to the "
                          f"file's end ({size} bytes)")
    return raw, offsets


def mds_dataset(folder):
    """``(index path, ids, sample lengths, shard paths, separator)`` of an MDS dataset
    of one ``ndarray`` column (separator: the id after which documents end when the
    samples are fixed-length ``concat_tokens`` ones, else None)."""
    index, obj = _load_index(folder, "shards")
    ours = obj.get("fastbpe_nb") or {}
    raws, paths, shard_of, starts, lengths, dtypes = [], [], [], [], [], set()
    for k, sh in enumerate(obj["shards"]):
        try:
            name, nbytes = sh["raw_data"]["basename"], sh["raw_data"]["bytes"]
            enc, samples = sh["column_encodings"], int(sh["samples"])
        except (KeyError, TypeError) as exc:
            raise OutputError(f"{index}: shard {k} has no {exc}") from None
        path = os.path.join(folder, name)
        if sh.get("zip_data") or sh.get("compression"):
            raise OutputError(f"{path}: compressed shards are not read here (decompress them "
                              "with streaming first)")
        if len(enc) != 1 or not enc[0].startswith("ndarray:") or \
                enc[0].split(":")[1] not in _MDS_VALUE_TYPES or sh.get("column_sizes") != [None]:
            raise OutputError(f"{index}: columns {enc}: token shards have one ndarray:<int type> "
                              "column of dynamic shape")
        if not os.path.exists(path) or os.path.getsize(path) != nbytes:
            raise OutputError(f"{path}: missing or not the {nbytes} bytes its index says")
        dtype = np.dtype(enc[0].split(":")[1])
        dtypes.add(dtype.name)
        raw, offsets = _shard_header(path, samples, 4 * (samples + 2))
        begin, n = _mds_samples(path, raw, offsets, dtype.itemsize)
        raws.append(raw)
        paths.append(path)
        shard_of.append(np.full(len(n), k, np.int64))
        starts.append(begin)
        lengths.append(n)
    if len(dtypes) > 1:
        raise OutputError(f"{index}: shards of several id types ({', '.join(sorted(dtypes))})")
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    ids = SampledIds(raws, np.concatenate(shard_of) if raws else [],
                     np.concatenate(starts) if raws else [], lengths,
                     dtypes.pop() if dtypes else "uint16")
    sep = ours.get("separator_id") if ours.get("concat_tokens") else None
    return index, ids, lengths, paths, sep


def _mds_samples(path, raw, offsets, itemsize):
    """The byte start and the id count of each sample (uint32 size, shape byte, length)."""
    begin = offsets[:-1]
    n = len(begin)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = np.diff(offsets)
    if np.any(span < 6):
        raise OutputError(f"{path}: a sample of fewer than 6 bytes")
    size = np.zeros(n, np.int64)
    for b in range(4):
        size |= raw[begin + b].astype(np.int64) << (8 * b)
    code = raw[begin + 4].astype(np.int64)
    width = 1 << (code & 3)
    if np.any(code >> 2 != 1) or np.any(size != span - 4) or np.any(span < 5 + width):
        raise OutputError(f"{path}: a sample that is not one 1-D array of its stated size")
    length = np.zeros(n, np.int64)
    for b in range(8):
        has = width > b
        length[has] |= raw[begin[has] + 5 + b].astype(np.int64) << (8 * b)
    if np.any(5 + width + length * itemsize != span):
        raise OutputError(f"{path}: a sample's shape does not match its size")
    return begin + 5 + width, length


_LITDATA_NUMPY = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_LITDATA_TORCH = {11: "uint8", 12: "int8", 13: "int16", 14: "int16", 15: "int32", 16: "int32",
                  17: "int64", 18: "int64"}


def litdata_chunks(folder) -> list:
    """``[(path, ids, document offsets), ...]``: the chunks of a litdata TokensLoader
    dataset, memory-mapped, each item (a document) delimited by the chunk's offsets."""
    index, obj = _load_index(folder, "chunks")
    cfg = obj.get("config") or {}
    fmt = (cfg.get("data_format") or [""])[0]
    kind, _, code = fmt.partition(":")
    try:
        dtype = np.dtype(_LITDATA_NUMPY[int(code)] if kind == "no_header_numpy"
                         else _LITDATA_TORCH[int(code)])
    except (ValueError, IndexError, KeyError):
        dtype = None
    loaders = ("no_header_numpy", "no_header_tensor")
    if cfg.get("item_loader") != "TokensLoader" or kind not in loaders or dtype is None:
        raise OutputError(f"{index}: not a TokensLoader dataset of integer ids "
                          f"(item_loader {cfg.get('item_loader')!r}, data_format {fmt!r})")
    if cfg.get("compression") or cfg.get("encryption"):
        raise OutputError(f"{index}: compressed or encrypted chunks are not read here")
    parts = []
    for k, ch in enumerate(obj["chunks"]):
        try:
            path = os.path.join(folder, ch["filename"])
            n, nbytes, dim = int(ch["chunk_size"]), int(ch["chunk_bytes"]), int(ch["dim"] or 0)
        except (KeyError, TypeError, ValueError) as exc:
            raise OutputError(f"{index}: chunk {k}: {exc}") from None
        if not os.path.exists(path) or os.path.getsize(path) != nbytes:
            raise OutputError(f"{path}: missing or not the {nbytes} bytes its index says")
        _, offsets = _shard_header(path, n, 4 * (n + 2))
        head = 4 * (n + 2)
        rel = offsets - head
        if offsets[0] != head or np.any(rel % dtype.itemsize) or rel[-1] != dim * dtype.itemsize:
            raise OutputError(f"{path}: the items are not {dim} whole {dtype.name} ids after "
                              "the header")
        ids = (np.memmap(path, dtype.newbyteorder("<"), "r", head, (dim,)) if dim
               else np.zeros(0, dtype))
        parts.append((path, ids, rel // dtype.itemsize))
    return parts
