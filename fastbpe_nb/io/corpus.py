"""Streaming corpus readers: text, Parquet and Arrow IPC files in bounded memory.

Every reader yields batches as flat arrays, ``(data uint8[n], doc_offsets int64[d+1])``,
ready for ``WordCounter.add_batch`` (one scanner call and one counting call per batch),
and records what it read and skipped in a ``ReadStats``. A file that cannot be read raises
``CorpusReadError`` naming it (and the row group), unless ``on_bad_input="skip"``, which
skips it and counts it.

Text files are read in chunks cut at *safe* boundaries: right after a newline that follows
a non-space character and precedes a non-space character other than ``/``. For the three
named patterns no pre-token can span such a point: the only pieces that can hold a newline
are whitespace runs (which end before a non-space), and punctuation runs with a newline
tail (``[\\r\\n]*+`` in cl100k, ``[\\r\\n/]*`` in o200k, hence no ``/`` after the cut); no
piece can start before the newline and continue past it, and every pattern starts a fresh
piece at the next character, in the chunk as in the whole text. The character before the
newline must not be a space because gpt2's ``\\s+(?!\\S)`` would treat " \\n" at the end of
a chunk differently. So chunking never changes the pieces (tested for every named pattern
with tiny chunks). With any other pattern a text file is one document, read whole.
"""

from __future__ import annotations

import codecs
import glob
import os
from dataclasses import dataclass, field

import numpy as np
import regex

from ..errors import CorpusReadError

TEXT_SUFFIXES = (".txt", ".text", ".md", ".rst", ".py", ".c", ".h", ".json", ".jsonl", ".csv")
PARQUET_SUFFIXES = (".parquet", ".pq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc", ".arrows")

_SPACE = regex.compile(r"\s")


@dataclass
class ReadStats:
    """What the readers saw: reported by training and by ``fastbpe count``."""

    files: int = 0
    bytes_read: int = 0
    documents: int = 0
    null_rows: int = 0
    invalid_utf8_replaced: int = 0
    skipped_files: list = field(default_factory=list)  # (path, reason)

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes_read": self.bytes_read,
            "documents": self.documents,
            "null_rows_skipped": self.null_rows,
            "invalid_utf8_sequences_replaced": self.invalid_utf8_replaced,
            "files_skipped": [{"path": p, "reason": r} for p, r in self.skipped_files],
        }


def expand_paths(paths) -> list[str]:
    """Files named by ``paths`` (files, globs, folders), each folder walked in sorted order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            for folder, dirs, names in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(folder, n) for n in sorted(names) if not n.startswith("."))
        elif any(ch in p for ch in "*?["):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise CorpusReadError(f"{p}: no file matches this pattern")
            out.extend(m for m in matches if os.path.isfile(m))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise CorpusReadError(f"{p}: no such file or folder")
    return out


def file_kind(path: str) -> str:
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(ARROW_SUFFIXES):
        return "arrow"
    return "text"


def safe_cut(buf: bytes, start: int = 0) -> int:
    """The last safe chunk boundary in ``buf[start:]`` (see the module docstring), or -1."""
    idx = len(buf)
    while True:
        idx = buf.rfind(b"\n", start, idx)
        if idx < 1:
            return -1
        p = idx + 1
        if p >= len(buf):
            continue
        nxt = buf[p : p + 4].decode("utf-8", "ignore")[:1]
        if not nxt or nxt == "/" or _SPACE.match(nxt):
            continue
        # The character before the newline (walk back over UTF-8 continuation bytes).
        q = idx - 1
        while q > 0 and q > idx - 4 and 0x80 <= buf[q] < 0xC0:
            q -= 1
        prev = buf[q:idx].decode("utf-8", "ignore")
        if prev and not _SPACE.match(prev[-1]):
            return p


class _CountingDecoder:
    """UTF-8 decoding that replaces invalid sequences and counts them."""

    def __init__(self):
        self.replaced = 0
        self._name = f"fastbpe-count-{id(self)}"

        def handler(exc):
            self.replaced += 1
            return ("\ufffd", exc.end)

        codecs.register_error(self._name, handler)

    def clean(self, chunk: bytes) -> bytes:
        try:
            chunk.decode("utf-8")
            return chunk
        except UnicodeDecodeError:
            return chunk.decode("utf-8", self._name).encode("utf-8")


def read_text(path: str, stats: ReadStats, chunk_bytes: int = 16 << 20, splittable=True):
    """Yield ``(data, doc_offsets)`` batches of one text file (each chunk one document)."""
    decoder = _CountingDecoder()
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    with f:
        pending = b""
        while True:
            try:
                block = f.read(chunk_bytes)
            except OSError as exc:
                raise CorpusReadError(f"{path}: read error ({exc.strerror or exc})") from None
            stats.bytes_read += len(block)
            buf = pending + block
            if not block:
                if buf:
                    yield _one_doc(decoder.clean(buf))
                break
            if not splittable:
                pending = buf
                continue
            cut = safe_cut(buf, max(0, len(buf) - chunk_bytes))
            if cut <= 0:
                pending = buf  # no safe boundary yet (e.g. one giant line): read on
                continue
            yield _one_doc(decoder.clean(buf[:cut]))
            pending = buf[cut:]
        stats.invalid_utf8_replaced += decoder.replaced
        stats.documents += 1


def _one_doc(raw: bytes):
    return np.frombuffer(raw, dtype=np.uint8), np.array([0, len(raw)], dtype=np.int64)


def _column_of(table_or_batch, column: str, path: str, where: str):
    names = table_or_batch.schema.names
    if column not in names:
        raise CorpusReadError(f"{path}: {where}: no column {column!r} (columns: {names})")
    return table_or_batch.column(names.index(column))


def _arrow_batches(array, stats: ReadStats, where=None, row_base=0):
    """Batches of a text column, sliced so that one batch holds at most ~8 MB of text.

    ``string_chunks`` checks each chunk (offsets, type) before it is read; ``where`` and
    ``row_base`` name the file, column and row in its errors (CorpusReadError)."""
    from .arrow_text import row_slices, string_chunks, text_buffers

    for chunk in string_chunks(array, where, row_base):
        stats.documents += len(chunk) - chunk.null_count
        stats.null_rows += chunk.null_count
        data, offsets, valid = text_buffers(chunk)
        stats.bytes_read += int(offsets[-1])
        for r0, r1 in row_slices(offsets):
            yield data[offsets[r0] : offsets[r1]], offsets[r0 : r1 + 1] - offsets[r0]


def read_parquet(path: str, column: str, stats: ReadStats):
    """Yield batches of one Parquet file, one row group at a time."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for bad files
        raise CorpusReadError(f"{path}: not a readable Parquet file ({exc})") from None
    from .arrow_text import row_group_batches

    columns = [column] if column in pf.schema_arrow.names else None
    row = 0
    for rg in range(pf.num_row_groups):
        # Record batches of ~8 MB: a row group of huge documents is never decoded whole.
        batches = row_group_batches(pf, rg, columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:
                raise CorpusReadError(f"{path}: row group {rg}: cannot read ({exc})") from None
            col = _column_of(batch, column, path, f"row group {rg}")
            yield from _arrow_batches(col, stats, f"{path}: column {column!r}", row)
            row += batch.num_rows


def read_arrow(path: str, column: str, stats: ReadStats):
    """Yield batches of one Arrow IPC file (random-access file or stream format).

    Read record batch by record batch into our memory, not memory-mapped (see
    ``arrow_text.ipc_batches``): a file truncated meanwhile raises CorpusReadError.
    """
    from .arrow_text import ipc_batches

    row = 0
    try:
        for i, batch in enumerate(ipc_batches(path)):
            col = _column_of(batch, column, path, f"record batch {i}")
            yield from _arrow_batches(col, stats, f"{path}: column {column!r}", row)
            row += batch.num_rows
    except CorpusReadError:
        raise
    except FileNotFoundError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    except Exception as exc:
        raise CorpusReadError(f"{path}: not a readable Arrow IPC file ({exc})") from None


def iter_batches(paths, column="text", stats: ReadStats | None = None, splittable=True,
                 on_bad_input="error", chunk_bytes=16 << 20):
    """Yield ``(data, doc_offsets)`` batches over every file of ``paths``, in order."""
    if on_bad_input not in ("error", "skip"):
        raise ValueError(f"on_bad_input must be 'error' or 'skip', not {on_bad_input!r}")
    stats = stats if stats is not None else ReadStats()
    for path in expand_paths(paths):
        kind = file_kind(path)
        if kind == "parquet":
            gen = read_parquet(path, column, stats)
        elif kind == "arrow":
            gen = read_arrow(path, column, stats)
        else:
            gen = read_text(path, stats, chunk_bytes, splittable)
        try:
            # Batches of a file that fails midway were already counted: with "skip" the
            # report says so (the file is listed as skipped after a partial read).
            for batch in gen:
                yield batch
        except CorpusReadError as exc:
            if on_bad_input == "error":
                raise
            stats.skipped_files.append((path, str(exc)))
            continue
        stats.files += 1
