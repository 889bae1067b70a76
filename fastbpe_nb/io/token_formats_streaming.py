"""MosaicML streaming (MDS) and Lightning litdata token datasets: ``format="mds" | "litdata"``.

The writers of ``token_formats`` (``TokenSink``: splits, seeded validation split, atomic
commit under the folder lock, the marker ``O/<rel>.<format>.json`` written last,
``resume``) with these two layouts. For an input at ``<rel>.parquet`` the dataset folder
is ``D = O/<rel>`` (``O/<rel>/train`` and ``O/<rel>/val`` with a validation split: the
``split=`` subfolders of streaming's ``StreamingDataset(local=O/<rel>, split="train")``;
litdata: ``StreamingDataset("O/<rel>/train", item_loader=TokensLoader(block))``). Each
dataset folder holds its shards and one ``index.json``; several inputs give several
datasets (``streaming.base.util.merge_index`` / litdata's ``merge_datasets`` join them,
or list them as streams).

* ``mds`` (what llm-foundry's ``convert_dataset_hf/json`` makes with
  ``MDSWriter(columns={"tokens": "ndarray:<dtype>"})``): ``D/shard.00000.mds`` ... Each
  shard: uint32 sample count ``n``, uint32 byte offsets of the ``n + 1`` sample bounds
  (from the file start), the shard's config JSON (``sort_keys``), then the samples. A
  sample: the uint32 byte size of its one variable-size column, then the ``ndarray``
  encoding with the dtype fixed by the column and a dynamic shape: one byte
  ``ndim << 2 | k`` (the shape's type: uint8/16/32/64 for k = 0..3, the smallest that
  holds the length), the length, the ids. ``index.json``: ``{"version": 2, "shards": [...]}``
  with per shard its config (``column_encodings/names/sizes``, ``compression`` null,
  ``format`` "mds", ``hashes`` [], ``size_limit``, ``version`` 2), ``raw_data``
  (basename, bytes, hashes), ``samples``, ``zip_data`` null; plus our key ``fastbpe_nb``
  (the tokenizer's SHA-256, separator, BOS, concat length), which streaming ignores.
  One sample per document (separator / BOS included); ``concat_tokens=N`` instead cuts
  the stream of documents (each with its BOS and separator) into samples of exactly N
  tokens, as llm-foundry's ``ConcatTokensDataset`` does, except that the last sample of a
  split holds the remainder (llm-foundry drops it; we keep every token). Ids ``uint16``
  when the vocabulary fits, else ``int32`` (llm-foundry's type); ``uint32`` on request.
  No compression: a compressed shard must be inflated whole before it is read.
* ``litdata`` (``litdata.optimize(fn, ..., item_loader=TokensLoader())`` with ``fn``
  yielding one 1-D array per document): ``D/chunk-0-0.bin`` ... Each chunk: uint32 item
  count ``n``, uint32 byte offsets of the ``n + 1`` item bounds, then the items: the raw
  ids of one document each (serializer ``no_header_numpy:<numpy dtype index>``). Its
  ``index.json``: ``chunks`` (chunk_bytes, chunk_size = documents, dim = tokens,
  filename) and ``config`` (chunk_bytes = the shard size, chunk_size null, compression
  null, data_format, data_spec of one leaf, encryption null, item_loader "TokensLoader"),
  ``updated_at`` (a digest of the index: litdata names its cache by it) and our
  ``fastbpe_nb`` key. TokensLoader itself reads blocks of ``block_size`` tokens, none across
  a chunk's end (a chunk's last ``dim % block_size`` tokens are not served), and sees no
  documents: only the separator marks them. The item offsets do record them, and
  ``read_tokens`` gives the documents from them.

Shards: ``shard_size`` counts the whole file (header, offsets and, for mds, the config
and the sample headers); default 64 MiB (streaming's ``size_limit`` default); both formats
address a shard with uint32 offsets, so shards stay under 4 GiB and a document that would
need more is refused (``OutputError``). Shard bodies are written to a temporary file as
they come and the final shard (its offset table first) assembled from it at close.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np

from ..errors import EncodeOptionsError, OutputError
from .atomic import PendingFile
from .token_formats import PIECE_IDS, TokenSink, write_docs

STREAM_FORMATS = ("mds", "litdata")
DEFAULT_SHARD_BYTES = 1 << 26
MAX_SHARD_BYTES = 2**32 - 1
#: litdata's ``_NUMPY_DTYPES_MAPPING``: the index of a numpy type in ``data_format``.
LITDATA_NUMPY_INDEX = {"int32": 2, "uint16": 5, "uint32": 6}
#: litdata's ``data_spec`` of an item that is one array (``treespec_dumps`` of a leaf).
LITDATA_LEAF_SPEC = '[1, {"type": null, "context": null, "children_spec": []}]'


def stream_shard_bytes(shard_bytes):
    """The shard size of mds/litdata: the default, or the given one if uint32 offsets allow."""
    if shard_bytes is None:
        return DEFAULT_SHARD_BYTES
    if shard_bytes > MAX_SHARD_BYTES:
        raise EncodeOptionsError(f"shard_size {shard_bytes}: mds and litdata shards address "
                                 "their samples with uint32 offsets; use less than 4G")
    return shard_bytes


def _shape_width(n):
    """The bytes of the smallest unsigned type holding ``n`` (streaming's shape dtype)."""
    n = np.asarray(n, np.int64)
    return np.where(n < 1 << 8, 1, np.where(n < 1 << 16, 2, np.where(n < 1 << 32, 4, 8)))


def mds_sample_headers(stored, itemsize) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, lengths)``: the header bytes of samples of ``stored`` ids each, back to
    back, and each header's length (uint32 column size, the shape byte, the length)."""
    stored = np.asarray(stored, np.int64)
    width = _shape_width(stored)
    hlen = 5 + width
    out = np.zeros(int(hlen.sum()), np.uint8)
    starts = np.cumsum(hlen) - hlen
    code = {1: 0, 2: 1, 4: 2, 8: 3}
    for w in (1, 2, 4, 8):
        sel = np.flatnonzero(width == w)
        if not len(sel):
            continue
        rows = np.zeros((len(sel), 5 + w), np.uint8)
        rows[:, :4] = (1 + w + stored[sel] * itemsize).astype("<u4").view(np.uint8).reshape(-1, 4)
        rows[:, 4] = (1 << 2) | code[w]  # one axis, the shape's type
        rows[:, 5:] = stored[sel].astype(f"<u{w}").view(np.uint8).reshape(-1, w)
        out[(starts[sel][:, None] + np.arange(5 + w)).ravel()] = rows.ravel()
    return out, hlen


class _Pieces:
    """A file-like ``write`` target handing ``write_docs``' pieces to ``fn(ids)``."""

    def __init__(self, fn, dtype):
        self.fn, self.dtype = fn, dtype

    def write(self, data):
        self.fn(np.frombuffer(data, self.dtype))


class _StreamShard:
    """One mds shard / litdata chunk: sample bodies go to a temporary file as they come;
    ``close`` writes the final file (count, offsets, [config], bodies)."""

    def __init__(self, sink, path):
        self.sink, self.path = sink, path
        self.body = PendingFile(path + ".body")  # never committed: copied, then removed
        self.sizes: list[np.ndarray] = []  # bytes of each sample (mds: with its header)
        self.samples = 0
        self.body_bytes = 0
        self.tokens = 0
        self.docs = 0
        self.final: PendingFile | None = None

    @property
    def nbytes(self) -> int:
        """The file's size with the samples so far."""
        return self.sink.shard_overhead + 4 * self.samples + self.body_bytes

    def add(self, body: np.ndarray | None, sizes, tokens, docs, file_writer=None) -> None:
        """Append samples: their bytes ``body`` (or written by ``file_writer(f)``)."""
        if body is not None:
            self.body.file.write(body.data)
        else:
            file_writer(self.body.file)
        sizes = np.asarray(sizes, np.int64)
        self.sizes.append(sizes)
        self.samples += len(sizes)
        self.body_bytes += int(sizes.sum())
        self.tokens += int(tokens)
        self.docs += int(docs)

    def close(self) -> None:
        if self.nbytes > MAX_SHARD_BYTES:
            raise OutputError(f"{self.path}: {self.nbytes} bytes: a shard's uint32 offsets "
                              "cannot address more than 4 GiB (a document this large does "
                              "not fit the format)")
        self.body.finish()
        sizes = np.concatenate(self.sizes) if self.sizes else np.zeros(0, np.int64)
        head = self.sink.shard_overhead + 4 * self.samples
        offsets = np.concatenate([[0], np.cumsum(sizes)]) + head
        self.final = PendingFile(self.path)
        f = self.final.file
        f.write(np.array([self.samples], "<u4").tobytes() + offsets.astype("<u4").tobytes()
                + self.sink.shard_config)
        f.flush()
        with open(self.body.tmp, "rb") as src:
            _copy(src, f, self.body_bytes)
        self.final.finish()
        self.body.discard()

    def files(self):
        return [self.final]

    def discard(self) -> None:
        self.body.discard()
        if self.final is not None:
            self.final.discard()

    def index_entry(self) -> dict:
        """This shard's entry in its dataset's ``index.json``."""
        name = os.path.basename(self.path)
        size = self.nbytes
        if self.sink.fmt == "mds":
            return dict(json.loads(self.sink.shard_config),
                        raw_data={"basename": name, "bytes": size, "hashes": {}},
                        samples=self.samples, zip_data=None)
        return {"chunk_bytes": size, "chunk_size": self.samples, "dim": self.tokens,
                "filename": name}


def _copy(src, dst, n) -> None:
    """Copy ``n`` bytes from ``src`` to ``dst`` (in the kernel when it can)."""
    left = n
    try:
        while left > 0:
            done = os.copy_file_range(src.fileno(), dst.fileno(), min(left, 1 << 30))
            if done == 0:
                break
            left -= done
    except (AttributeError, OSError):
        pass
    if left:  # no copy_file_range here (or across these file systems): through Python
        src.seek(n - left)
        dst.seek(0, os.SEEK_END)
        shutil.copyfileobj(src, dst, 1 << 24)


class _StreamSplit:
    """The shards of one split of one input in the mds / litdata layout, and its index."""

    def __init__(self, sink, split):
        self.sink, self.split = sink, split
        self.done: list[_StreamShard] = []
        self.shard: _StreamShard | None = None
        self.index: PendingFile | None = None
        self.carry = np.zeros(0, sink.dtype)  # concat mode: the ids of the unfinished sample
        self.carry_docs = 0  # documents whose separator is in ``carry``

    def folder_path(self) -> str:
        """The dataset folder of this split: its shards and its ``index.json``."""
        sink = self.sink
        parts = [sink.output, sink.base_rel] + ([self.split] if sink.val_fraction > 0 else [])
        return os.path.join(*parts)

    def folder(self) -> str:
        """``folder_path``, created."""
        path = self.folder_path()
        os.makedirs(path, exist_ok=True)
        return path

    def _open(self):
        k = len(self.done)
        name = f"shard.{k:05d}.mds" if self.sink.fmt == "mds" else f"chunk-0-{k}.bin"
        self.shard = _StreamShard(self.sink, os.path.join(self.folder(), name))

    def _close(self):
        self.shard.close()
        self.done.append(self.shard)
        self.shard = None

    def _room(self) -> int:
        if self.shard is None:
            self._open()
        return self.sink.shard_bytes - self.shard.nbytes

    def add(self, ids, lens) -> None:
        """Append documents (``ids`` back to back, ``lens`` tokens each)."""
        sink = self.sink
        stored = lens + sink.extra
        a = id0 = 0
        while a < len(lens):
            # documents in groups of at most PIECE_IDS stored ids (a huge one alone), so
            # that what is built in memory stays bounded
            k = max(1, int(np.searchsorted(np.cumsum(stored[a:]), PIECE_IDS, side="right")))
            n_ids = int(lens[a: a + k].sum())
            part, part_lens, part_stored = ids[id0: id0 + n_ids], lens[a: a + k], stored[a: a + k]
            if sink.concat:
                ends = np.cumsum(part_stored)
                pos = [0]

                def feed(piece, ends=ends, pos=pos):
                    lo, hi = pos[0], pos[0] + len(piece)
                    inside = ends[(ends > lo) & (ends <= hi)] - lo
                    pos[0] = hi
                    self._concat(piece, inside)

                write_docs(_Pieces(feed, sink.dtype), part, part_lens, sink.pre, sink.post,
                           sink.dtype)
            elif k == 1 and part_stored[0] > PIECE_IDS:
                self._huge(part, part_lens, int(part_stored[0]))
            else:
                pieces = []
                write_docs(_Pieces(pieces.append, sink.dtype), part, part_lens, sink.pre,
                           sink.post, sink.dtype)
                data = np.concatenate(pieces) if len(pieces) != 1 else pieces[0]
                self._samples(data, part_stored, np.ones(k, np.int64))
            a += k
            id0 += n_ids

    def _samples(self, data, lengths, docs) -> None:
        """Write samples (``data``: their ids back to back, ``lengths`` each, ``docs``:
        the documents ending in each), cutting shards by size."""
        item = self.sink.dtype.itemsize
        mds = self.sink.fmt == "mds"
        lengths = np.asarray(lengths, np.int64)
        cost = 4 + lengths * item + (5 + _shape_width(lengths) if mds else 0)
        if len(cost):
            self._check_fits(int(cost.max()), int(lengths[int(np.argmax(cost))]))
        a = off = 0
        while a < len(lengths):
            room = self._room()
            k = int(np.searchsorted(np.cumsum(cost[a:]), room, side="right"))
            if k == 0:
                if self.shard.samples:  # full: the next sample starts a new shard
                    self._close()
                    continue
                k = 1  # a sample larger than a shard gets one of its own
            n = int(lengths[a: a + k].sum())
            body = data[off: off + n].view(np.uint8)
            sizes = lengths[a: a + k] * item
            if mds:  # each sample's header before its ids
                heads, hlen = mds_sample_headers(lengths[a: a + k], item)
                body = np.insert(body, np.repeat(np.cumsum(sizes) - sizes, hlen), heads)
                sizes = sizes + hlen
            self.shard.add(body, sizes, n, int(docs[a: a + k].sum()))
            a += k
            off += n

    def _check_fits(self, cost, n) -> None:
        """Refuse, before writing it, a sample that no shard can address."""
        if self.sink.shard_overhead + cost > MAX_SHARD_BYTES:
            raise OutputError(f"{self.folder()}: a sample of {n} ids needs {cost} bytes; "
                              f"{self.sink.fmt} shards address theirs with uint32 offsets "
                              "(4 GiB at most)")

    def _huge(self, ids, lens, n) -> None:
        """One document of more than PIECE_IDS ids: its sample streamed piece by piece."""
        sink = self.sink
        heads, hlen = (mds_sample_headers([n], sink.dtype.itemsize) if sink.fmt == "mds"
                       else (np.zeros(0, np.uint8), np.zeros(1, np.int64)))
        size = int(hlen[0]) + n * sink.dtype.itemsize
        self._check_fits(4 + size, n)
        if 4 + size > self._room() and self.shard.samples:
            self._close()
            self._open()

        def stream(f):
            f.write(heads.data)
            write_docs(f, ids, lens, sink.pre, sink.post, sink.dtype)

        self.shard.add(None, [size], n, 1, stream)

    def _concat(self, piece, ends) -> None:
        """llm-foundry's concat mode: ``piece`` of the stream of stored documents (``ends``:
        the documents ending in it, relative to it) in samples of exactly N ids."""
        n = self.sink.concat
        data = np.concatenate([self.carry, piece]) if len(self.carry) else piece
        ends = ends + len(self.carry)
        m = len(data) // n
        if not m:
            self.carry, self.carry_docs = data.copy(), self.carry_docs + len(ends)
            return
        cut = m * n
        per = np.bincount((ends[ends <= cut] - 1) // n, minlength=m).astype(np.int64)
        per[0] += self.carry_docs
        self._samples(data[:cut], np.full(m, n, np.int64), per)
        self.carry, self.carry_docs = data[cut:].copy(), int((ends > cut).sum())

    def finish(self) -> list[_StreamShard]:
        if self.sink.concat and len(self.carry):  # the remainder: one shorter sample
            self._samples(self.carry, [len(self.carry)], np.array([self.carry_docs]))
            self.carry = np.zeros(0, self.sink.dtype)
        if self.shard is not None and self.shard.samples:
            self._close()
        elif self.shard is not None:  # opened, never used
            self.shard.discard()
            self.shard = None
        # (a split without documents is an index.json listing no shard: both stacks' own
        # writers refuse to write an empty shard)
        self.index = PendingFile(os.path.join(self.folder(), "index.json"), "w")
        self.index.file.write(json.dumps(self.sink.index_json(self.done), sort_keys=True))
        self.index.finish()
        return self.done

    def files(self) -> list:
        return [p for sh in self.done for p in sh.files()] + [self.index]

    def discard(self) -> None:
        for s in self.done + ([self.shard] if self.shard is not None else []):
            s.discard()
        if self.index is not None:
            self.index.discard()


class StreamTokenSink(TokenSink):
    """``TokenSink`` for ``mds`` and ``litdata`` (see the module docstring)."""

    split_class = _StreamSplit

    def __init__(self, fmt, output, base_rel, dtype, sep_id, bos_id=None, shard_bytes=None,
                 val_fraction=0.0, seed=0, tok_sha256="", concat_tokens=None):
        self.concat = concat_tokens
        self.shard_bytes = stream_shard_bytes(shard_bytes)
        super().__init__(fmt, output, base_rel, dtype, sep_id, bos_id, self.shard_bytes,
                         val_fraction, seed, tok_sha256)
        if fmt == "mds":
            config = {"column_encodings": [f"ndarray:{self.dtype.name}"],
                      "column_names": ["tokens"], "column_sizes": [None], "compression": None,
                      "format": "mds", "hashes": [], "size_limit": self.shard_bytes,
                      "version": 2}
            self.shard_config = json.dumps(config, sort_keys=True).encode("utf-8")
            self.shard_overhead = 8 + len(self.shard_config)  # the count, the first offset
        else:
            self.shard_config = b""
            self.shard_overhead = 8

    def ours(self) -> dict:
        """Our metadata in ``index.json`` (both readers ignore keys they do not know)."""
        return {"tokenizer": self.tok_label, "tokenizer_sha256": self.tok_sha256,
                "separator_id": self.sep_id, "bos_id": self.bos_id,
                "concat_tokens": self.concat, "dtype": self.dtype.name}

    def index_json(self, shards) -> dict:
        entries = [s.index_entry() for s in shards]
        if self.fmt == "mds":
            return {"version": 2, "shards": entries, "fastbpe_nb": self.ours()}
        config = {"chunk_bytes": self.shard_bytes, "chunk_size": None, "compression": None,
                  "compression_batch_size": None, "compression_level": None,  # litdata 0.2.7x
                  "data_format": [f"no_header_numpy:{LITDATA_NUMPY_INDEX[self.dtype.name]}"],
                  "data_spec": LITDATA_LEAF_SPEC, "encryption": None, "ipc_compression": None,
                  "item_loader": "TokensLoader"}
        obj = {"chunks": entries, "config": config, "fastbpe_nb": self.ours()}
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]
        return dict(obj, updated_at=digest)  # litdata names its cache of a dataset by this
