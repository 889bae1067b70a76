"""Token files that training stacks read: Megatron, datatrove, nanoGPT and llm.c writers.

(MosaicML MDS and litdata: ``token_formats_streaming``, a ``TokenSink`` of other splits.)

``encode_parquet(format=...)`` with one of ``TOKEN_FORMATS`` streams each input file's
documents (non-null rows, in order) into that stack's own layout; for an input at
``<rel>.parquet`` under the inputs' common folder and the output folder ``O``:

* ``megatron`` (Megatron-Core ``IndexedDataset``): ``O/<rel>.bin`` + ``O/<rel>.idx``, one
  sequence per document, ``uint16`` ids (``int32`` when the vocabulary needs it; Megatron
  has no ``uint32``). The ``.idx``: ``MMIDIDX\\x00\\x00``, version 1 (uint64), the dtype code
  (uint8), the sequence count and the length of the document index (uint64 each: the
  documents + 1), int32 sequence lengths, int64 byte pointers, int64 document index.
* ``datatrove`` (``DatatroveFolderDataset``, nanotron, ``DocumentTokenizerMerger``):
  ``O/<rel>.ds`` raw little-endian ``uint16``/``uint32`` ids, ``O/<rel>.ds.index`` the uint64
  document ends, ``O/<rel>.ds.metadata`` ``"<tokenizer>|<token size>\\n<tokens>\\n<tokens, humanized>"``.
* ``nanogpt`` (nanoGPT's ``prepare.py`` / ``train.py``): ``O/<rel>/train.bin`` and
  ``O/<rel>/val.bin``, raw ``uint16`` ids (``uint32`` when the vocabulary needs it, which
  nanoGPT's ``np.memmap(..., dtype=np.uint16)`` must then be told), the separator after
  each document.
* ``llmc`` (llm.c / modded-nanogpt): ``O/<rel>_train_000000.bin`` (and ``_val_``): a header
  of 256 int32 (magic 20240520, version 1, the token count) then ``uint16`` ids; with ids
  over 65535 llm.c's llama-3 header (magic 20240801, version 7) and ``uint32`` ids. As
  llm.c does, the separator comes *before* each document.

Options: ``bos`` (a token before each document; for ``llmc`` after the leading separator),
``shard_size`` (bytes of the id file: a new shard when the next document would exceed it;
a document is never split, one larger than the limit gets a shard of its own; megatron /
datatrove / nanogpt shards are ``<name>_00000`` ...), ``val_fraction`` + ``seed`` (each
document goes to the validation split when a hash of (seed, the input's relative path,
its row number) falls under the fraction: the same split whatever the threads or slices;
megatron and datatrove then write ``O/train/<rel>...`` and ``O/val/<rel>...`` so that a
folder reader never mixes them).

Every file is written to a temporary name and fsynced; when the input is done, under an
exclusive lock of the marker's folder, the old completeness marker ``O/<rel>.<format>.json``
is removed, every shard renamed into place, the files of the previous output that this
one does not have removed, and the new marker (the identity record, the tokenizer's
SHA-256, every file with its byte size) written last. ``resume=True`` accepts an output
only with its marker, a matching record and every file at its recorded size.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..errors import EncodeOptionsError, OutputError
from .atomic import PendingFile, atomic_write, folder_lock, fsync_dir

TOKEN_FORMATS = ("megatron", "datatrove", "nanogpt", "llmc", "mds", "litdata")
#: Ids converted and written per piece (bounds the copies of a huge document).
PIECE_IDS = 4 << 20
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6,
                  "float32": 7, "uint16": 8}
LLMC_HEADERS = {"uint16": (20240520, 1), "uint32": (20240801, 7)}  # llm.c gpt-2 / llama-3
LLMC_HEADER_INTS = 256
# (the default when the vocabulary fits, the default otherwise, any other one allowed)
_DTYPES = {"megatron": ("uint16", "int32"), "datatrove": ("uint16", "uint32"),
           "nanogpt": ("uint16", "uint32"), "llmc": ("uint16", "uint32"),
           "mds": ("uint16", "int32", "uint32"), "litdata": ("uint16", "uint32", "int32")}


def marker_path(output: str, base_rel: str, fmt: str) -> str:
    """The completeness marker of the output of the input at ``base_rel`` (no extension)."""
    return os.path.join(output, base_rel + f".{fmt}.json")


def token_dtype(tok, fmt, dtype):
    """The id type of ``fmt``: ``uint16`` when the vocabulary fits, else the format's wide one."""
    narrow, wide = _DTYPES[fmt][:2]
    if dtype is None:
        dtype = narrow if tok.vocab_size <= 65536 else wide
    if dtype not in _DTYPES[fmt]:
        raise EncodeOptionsError(f"format={fmt!r} stores ids as {' or '.join(_DTYPES[fmt])}, "
                                 f"not {dtype!r}")
    if dtype == "uint16" and tok.vocab_size > 65536:
        raise EncodeOptionsError(f"dtype uint16 cannot hold {tok.vocab_size} ids; use {wide}")
    return np.dtype(dtype)


def check_concat_tokens(fmt, concat_tokens):
    """``concat_tokens``: fixed-length samples, llm-foundry's concat mode: ``mds`` only."""
    if concat_tokens is None:
        return None
    if fmt != "mds":
        raise EncodeOptionsError(f"concat_tokens applies to format='mds' (llm-foundry's "
                                 f"fixed-length samples), not {fmt!r}")
    if isinstance(concat_tokens, (bool, np.bool_)) or not isinstance(
            concat_tokens, (int, np.integer)) or not 1 <= concat_tokens < 2**28:
        raise EncodeOptionsError(f"concat_tokens must be an int in [1, 2**28), not "
                                 f"{concat_tokens!r}")
    return int(concat_tokens)


def parse_size(text) -> int | None:
    """``"1G"``, ``"500M"``, ``"64k"`` (powers of 1024) or an int of bytes; None stays None."""
    if text is None:
        return None
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool):
        value = int(text)
    else:
        s = str(text).strip().upper().removesuffix("B")
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(s[-1:], 1)
        try:
            value = int(float(s[:-1] if mult > 1 else s) * mult)
        except ValueError:
            raise EncodeOptionsError(f"shard_size: cannot read {text!r} (use e.g. 1G, 500M, "
                                     "or a number of bytes)") from None
    if value <= 0:
        raise EncodeOptionsError(f"shard_size must be positive, not {text!r}")
    return value


def val_mask(seed: int, base_rel: str, rows: np.ndarray, fraction: float) -> np.ndarray:
    """Whether each row (global row numbers of the input) goes to the validation split.

    A splitmix64 hash of the row number keyed by SHA-256 of (seed, relative path): it
    depends on nothing but these, so threads and slice sizes cannot change the split.
    """
    key = int.from_bytes(hashlib.sha256(f"{seed}\0{base_rel}".encode()).digest()[:8], "little")
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53)) < fraction


def write_docs(f, ids, lens, pre, post, dtype) -> None:
    """Write the documents ``ids`` (back to back, lengths ``lens``), each preceded by the
    tokens ``pre`` and followed by ``post``, as ``dtype``, ``PIECE_IDS`` ids at a time."""
    n, n_docs = len(ids), len(lens)
    ends = np.cumsum(lens, dtype=np.int64)
    starts = ends - lens
    cols = [starts] * len(pre) + [ends] * len(post)
    if cols and n_docs:  # per document: its prefix tokens at its start, then its suffix at its end
        pos = np.stack(cols, axis=1).ravel()
        vals = np.tile(np.asarray(list(pre) + list(post), dtype=dtype), n_docs)
    else:
        pos = np.zeros(0, np.int64)
        vals = np.zeros(0, dtype)
    for a in range(0, max(n, 1), PIECE_IDS):
        b = min(n, a + PIECE_IDS)
        lo = int(np.searchsorted(pos, a, side="left"))
        hi = len(pos) if b == n else int(np.searchsorted(pos, b, side="left"))
        piece = np.insert(ids[a:b].astype(dtype), pos[lo:hi] - a, vals[lo:hi])
        f.write(piece.data)


class _Shard:
    """One shard being written: its data file and the stored length of each document."""

    def __init__(self, fmt, data_path, dtype):
        self.fmt, self.dtype = fmt, dtype
        self.data = PendingFile(data_path)
        self.lens: list[np.ndarray] = []
        self.tokens = 0
        self.docs = 0
        self.side: list[PendingFile] = []  # the index / metadata files, made at close
        if fmt == "llmc":  # the header holds the token count: filled in at close
            self.data.file.write(bytes(4 * LLMC_HEADER_INTS))

    @property
    def nbytes(self) -> int:
        return self.tokens * self.dtype.itemsize + (4 * LLMC_HEADER_INTS if self.fmt == "llmc" else 0)

    def close(self, tok_label) -> None:
        lens = np.concatenate(self.lens) if self.lens else np.zeros(0, np.int64)
        if self.fmt == "llmc":
            if self.tokens >= 2**31:
                raise OutputError(f"{self.data.path}: {self.tokens} tokens: llm.c's header "
                                  "counts them in an int32; use a smaller --shard-size")
            magic, version = LLMC_HEADERS[self.dtype.name]
            self.data.file.seek(0)
            self.data.file.write(np.array([magic, version, self.tokens], "<i4").tobytes())
        self.data.finish()
        base = self.data.path
        if self.fmt == "megatron":
            if len(lens) and int(lens.max()) >= 2**31:
                raise OutputError(f"{base}: a document of {int(lens.max())} tokens does not fit "
                                  "Megatron's int32 sequence lengths")
            idx = PendingFile(base[:-4] + ".idx")
            pointers = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype("<i8") * self.dtype.itemsize
            idx.file.write(MEGATRON_HEADER + np.array([1], "<u8").tobytes()
                           + bytes([MEGATRON_CODES[self.dtype.name]])
                           + np.array([len(lens), len(lens) + 1], "<u8").tobytes())
            idx.file.write(lens.astype("<i4").tobytes())
            idx.file.write(pointers[: len(lens)].tobytes())
            idx.file.write(np.arange(len(lens) + 1, dtype="<i8").tobytes())
            self.side.append(idx)
        elif self.fmt == "datatrove":
            index = PendingFile(base + ".index")
            index.file.write(np.cumsum(lens, dtype=np.int64).astype("<u8").tobytes())
            meta = PendingFile(base + ".metadata", "w")
            meta.file.write("\n".join([f"{tok_label}|{self.dtype.itemsize}", str(self.tokens),
                                       _humanize_tokens(self.tokens)]))
            self.side += [index, meta]
        for p in self.side:
            p.finish()

    def files(self):
        return [self.data] + self.side

    def discard(self) -> None:
        for p in self.files():
            p.discard()


def _humanize_tokens(n: int) -> str:
    """``humanize.metric(n, unit="T")`` style: 3 significant digits and an SI prefix."""
    for div, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g} {prefix}T"
    return f"{n} T"


class _Split:
    """The shards of one split (train or val) of one input."""

    def __init__(self, sink, split):
        self.sink, self.split = sink, split
        self.done: list[_Shard] = []
        self.shard: _Shard | None = None

    def folder_path(self) -> str:
        """The folder of this split's shards."""
        return os.path.dirname(self.sink.data_file(self.split, 0))

    def _open(self):
        self.shard = _Shard(self.sink.fmt, self.sink.data_path(self.split, len(self.done)),
                            self.sink.dtype)

    def _close(self):
        self.shard.close(self.sink.tok_label)
        self.done.append(self.shard)
        self.shard = None

    def add(self, ids, lens) -> None:
        """Append documents (``ids`` back to back, ``lens`` tokens each), cutting shards."""
        sink = self.sink
        stored = lens + sink.extra
        limit = sink.shard_bytes
        a = 0  # first document not written yet
        id0 = 0  # its first id
        while a < len(lens) or self.shard is None:
            if self.shard is None:
                self._open()
            if a >= len(lens):
                break
            if limit is None:
                k = len(lens) - a
            else:
                room = (limit - self.shard.nbytes) // sink.dtype.itemsize
                k = int(np.searchsorted(np.cumsum(stored[a:]), room, side="right"))
                if k == 0:
                    if self.shard.docs:  # full: the next document starts a new shard
                        self._close()
                        continue
                    k = 1  # a document larger than a shard gets one of its own
            n_ids = int(lens[a: a + k].sum())
            write_docs(self.shard.data.file, ids[id0: id0 + n_ids], lens[a: a + k],
                       sink.pre, sink.post, sink.dtype)
            self.shard.lens.append(stored[a: a + k].astype(np.int64))
            self.shard.tokens += int(stored[a: a + k].sum())
            self.shard.docs += k
            a += k
            id0 += n_ids

    def finish(self) -> list[_Shard]:
        if self.shard is None:
            self._open()
        self._close()
        return self.done

    def files(self) -> list:
        """Every file of this split (after ``finish``), in commit order."""
        return [p for sh in self.done for p in sh.files()]

    def discard(self) -> None:
        for s in self.done + ([self.shard] if self.shard is not None else []):
            s.discard()


class TokenSink:
    """The writer of one input's output in a ``TOKEN_FORMATS`` layout (see the module doc).

    ``write_slice`` takes the encoder's output for a slice of rows; ``commit`` puts every
    file in place and the marker last; ``discard`` removes the temporary files.
    ``token_formats_streaming.StreamTokenSink`` (mds, litdata) changes the splits' class.
    """

    split_class = _Split

    def __init__(self, fmt, output, base_rel, dtype, sep_id, bos_id=None, shard_bytes=None,
                 val_fraction=0.0, seed=0, tok_sha256=""):
        self.fmt, self.output, self.base_rel = fmt, os.fspath(output), base_rel
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.sep_id, self.bos_id = sep_id, bos_id
        self.shard_bytes, self.val_fraction, self.seed = shard_bytes, val_fraction, seed
        self.tok_sha256 = tok_sha256
        self.tok_label = f"fastbpe_nb-sha256-{tok_sha256}"
        bos = [] if bos_id is None else [bos_id]
        self.pre, self.post = ((([sep_id] + bos), []) if fmt == "llmc" else (bos, [sep_id]))
        self.extra = len(self.pre) + len(self.post)
        self.marker = marker_path(self.output, base_rel, fmt)
        names = ("train", "val") if val_fraction > 0 else ("train",)
        self.splits = {s: self.split_class(self, s) for s in names}

    def data_path(self, split: str, k: int) -> str:
        """The id file of shard ``k`` of ``split`` (its folder created)."""
        path = self.data_file(split, k)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def data_file(self, split: str, k: int) -> str:
        """The path of the id file of shard ``k`` of ``split``."""
        sharded = self.shard_bytes is not None
        if self.fmt == "nanogpt":
            name = split + (f"_{k:05d}" if sharded else "") + ".bin"
            path = os.path.join(self.output, self.base_rel, name)
        elif self.fmt == "llmc":
            path = os.path.join(self.output, f"{self.base_rel}_{split}_{k:06d}.bin")
        else:
            root = os.path.join(self.output, split) if self.val_fraction > 0 else self.output
            ext = ".bin" if self.fmt == "megatron" else ".ds"
            path = os.path.join(root, self.base_rel + (f"_{k:05d}" if sharded else "") + ext)
        return path

    def folders(self) -> list[str]:
        """Every folder this output writes into: its marker's and each split's shards'."""
        found = {os.path.dirname(os.path.abspath(self.marker))}
        found.update(os.path.abspath(s.folder_path()) for s in self.splits.values())
        return sorted(found)

    def write_slice(self, ids, offsets, valid, row0) -> None:
        """Write a slice's documents (``encode_batch_flat`` output; rows from ``row0``)."""
        lens = np.diff(offsets)[valid].astype(np.int64)
        if self.val_fraction <= 0:
            self.splits["train"].add(ids, lens)
            return
        rows = np.flatnonzero(valid) + row0
        to_val = val_mask(self.seed, self.base_rel, rows, self.val_fraction)
        for name, mask in (("train", ~to_val), ("val", to_val)):
            if mask.all():
                self.splits[name].add(ids, lens)
            elif mask.any():
                self.splits[name].add(ids[np.repeat(mask, lens)], lens[mask])

    def commit(self, record) -> dict:
        """Close every shard, rename all into place and write the marker last."""
        shards = {name: s.finish() for name, s in self.splits.items()}
        files = [{"path": os.path.relpath(p.path, self.output), "split": name,
                  "bytes": os.path.getsize(p.tmp)}
                 for name, split in self.splits.items() for p in split.files()]
        meta = dict(record, base=self.base_rel, files=files, tokenizer_sha256=self.tok_sha256,
                    dtype=self.dtype.name, separator_id=self.sep_id, bos_id=self.bos_id,
                    splits={name: {"shards": len(done), "documents": sum(s.docs for s in done),
                                   "tokens": sum(s.tokens for s in done)}
                            for name, done in shards.items()})
        folder = os.path.dirname(os.path.abspath(self.marker))
        os.makedirs(folder, exist_ok=True)
        with folder_lock(folder, exclusive=True):
            old = _old_files(self.marker)
            try:
                os.unlink(self.marker)
                fsync_dir(folder)
            except FileNotFoundError:
                pass
            for split in self.splits.values():
                for p in split.files():
                    p.commit()
            new = {f["path"] for f in files}
            for rel in old - new:  # a previous output's shards this one does not have
                try:
                    os.unlink(os.path.join(self.output, rel))
                except OSError:
                    pass
            with atomic_write(self.marker, "w") as g:
                g.write(json.dumps(meta, indent=2) + "\n")
        return meta

    def discard(self) -> None:
        for s in self.splits.values():
            s.discard()


def _old_files(marker) -> set:
    try:
        with open(marker, encoding="utf-8") as f:
            return {e["path"] for e in json.load(f).get("files", ())
                    if not os.path.isabs(e["path"]) and ".." not in e["path"].split(os.sep)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def output_root(marker: str, found: dict) -> str:
    """The output folder of a marker: its path without ``<base>.<format>.json``."""
    tail = f"{found['base']}.{found['format']}.json"
    path = os.path.abspath(marker)
    if not path.endswith(os.sep + tail):
        raise ValueError(f"the marker records the input {found['base']!r}, not its own name")
    return path[: -len(tail) - 1]


def token_output_complete(marker, expected, mismatch):
    """``(complete, reason)`` of a ``TOKEN_FORMATS`` output (reason None: no output at all).

    ``mismatch(found, expected)`` compares the identity records (``encode_identity``).
    """
    folder = os.path.dirname(os.path.abspath(marker))
    if not os.path.isdir(folder):
        return False, None
    with folder_lock(folder, exclusive=False):
        if not os.path.exists(marker):
            return False, None
        try:
            with open(marker, encoding="utf-8") as f:
                found = json.load(f)
            reason = mismatch(found, expected)
            if reason is not None:
                return False, reason
            output = output_root(marker, found)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return False, f"incomplete ({exc})"
        for entry in found.get("files") or ():
            path = os.path.join(output, entry["path"])
            try:
                size = os.path.getsize(path)
            except OSError:
                return False, f"incomplete ({entry['path']} is missing)"
            if size != entry["bytes"]:
                return False, (f"incomplete ({entry['path']} is {size} bytes, the marker says "
                               f"{entry['bytes']})")
        if not found.get("files"):
            return False, "incomplete (the marker lists no file)"
        return True, None
