"""Streaming corpus readers: text, JSON lines, Parquet and Arrow IPC files in bounded memory.

Every reader yields batches as flat arrays, ``(data uint8[n], doc_offsets int64[d+1])``,
ready for ``WordCounter.add_batch`` (one scanner call and one counting call per batch),
and records what it read and skipped in a ``ReadStats``. A file that cannot be read raises
``CorpusReadError`` naming it (and the row group, line or byte offset), unless
``on_bad_input="skip"``, which skips it and counts it.

Which files a path names (``expand_paths``)
    A file; a folder, walked in sorted order (symlinked subfolders followed, each real
    folder once: a symlink loop is detected and reported); a glob (``**`` walked the same
    way). Only regular files are read: a FIFO or a device met in a walk is left out and
    counted, one named explicitly is an error (or skipped with ``on_bad_input="skip"``), as
    is a dangling symlink. Hidden files and folders (names starting with ``.``, such as
    ``.git``) are not walked and are counted; named explicitly, a hidden file is read.
    Every real file is read once, however many paths reach it (same device and inode).
    Nothing found at all is an error (``CorpusReadError``) naming what was looked for.

What a file holds (``file_kind``, by suffix after any compression suffix)
    ``.parquet`` ``.pq``: Parquet; ``.arrow`` ``.feather`` ``.ipc`` ``.arrows``: Arrow IPC;
    ``.jsonl`` ``.ndjson`` ``.jsonlines``: one JSON object per line, the text in a field
    (``column``); anything else: UTF-8 text. ``.gz`` ``.bz2`` ``.xz`` ``.zst`` files are
    decompressed on the fly (by suffix *and* by magic bytes, so a gzip file without the
    suffix is read too; a suffix over other content is an error). A byte order mark is
    honoured: UTF-8's is dropped, UTF-16 and UTF-32 (LE/BE) text is transcoded.

Invalid UTF-8: one policy for every kind (``Utf8Policy``)
    Each maximal invalid sequence becomes one U+FFFD and is counted
    (``invalid_utf8_sequences_replaced``; lone surrogates of JSON escapes too). When the
    invalid bytes exceed ``max_invalid_utf8`` (default 1 %) of the bytes read -- measured
    over at least 4 KiB, checked once 64 KiB have been read and at the end of each file --
    the file is refused with ``CorpusReadError`` naming the first bad byte and the share:
    it is almost surely not UTF-8 text (Latin-1, binary, UTF-16 without a BOM). The same
    bound refuses a text file whose first 64 KiB are NUL bytes beyond that share.
    ``max_invalid_utf8=1`` accepts anything.

Text files are read in chunks cut at *safe* boundaries: right after a newline that follows
a non-space character and precedes a non-space character other than ``/``. For the three
named patterns no pre-token can span such a point: the only pieces that can hold a newline
are whitespace runs (which end before a non-space), and punctuation runs with a newline
tail (``[\\r\\n]*+`` in cl100k, ``[\\r\\n/]*`` in o200k, hence no ``/`` after the cut); no
piece can start before the newline and continue past it, and every pattern starts a fresh
piece at the next character, in the chunk as in the whole text. The character before the
newline must not be a space because gpt2's ``\\s+(?!\\S)`` would treat " \\n" at the end of
a chunk differently. So chunking never changes the pieces (tested for every named pattern
with tiny chunks).

No chunk grows past ``max_chunk_bytes`` (default 4 x ``chunk_bytes``, at least 64 KiB),
so that one giant line cannot take the memory: when no safe newline is found before that
limit, the chunk is cut before a single ASCII space that follows and precedes a non-space
(``cuts_at_spaces``: also exact for the named patterns, none of whose pieces continues
from a non-space into a space, and each of which starts a piece at such a space), and when
there is none either, at the last UTF-8 character boundary (``forced_cuts``: the pre-token
spanning the cut is split in two, e.g. a 100 MB run of letters without a space). With any
other pattern nothing is provably safe: a text file is one document up to the limit, and
every cut beyond it (after a newline when there is one) is a forced cut.
"""

from __future__ import annotations

import bz2
import codecs
import fnmatch
import glob
import gzip
import json
import lzma
import os
import stat as stat_module
import threading
import zlib
from dataclasses import dataclass, field

import numpy as np
import regex

from ..errors import CorpusReadError

TEXT_SUFFIXES = (".txt", ".text", ".md", ".rst", ".py", ".c", ".h", ".json", ".csv")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")
PARQUET_SUFFIXES = (".parquet", ".pq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc", ".arrows")
#: Compression suffixes -> codec (the content is checked against the codec's magic bytes).
COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz",
                        ".zst": "zstd", ".zstd": "zstd"}

#: Default of ``max_invalid_utf8``: the share of invalid UTF-8 bytes a file may hold.
DEFAULT_MAX_INVALID_UTF8 = 0.01
#: Bytes read before the share of invalid bytes (or NUL bytes) is first judged.
SNIFF_BYTES = 64 << 10
#: The share is taken over at least this many bytes (a few bad bytes in a tiny file pass).
MIN_SHARE_BASE = 4096

WHAT_IS_READ = ("accepted: files, folders (walked; hidden names skipped) and globs; "
                ".parquet/.pq and .arrow/.feather/.ipc/.arrows as tables, .jsonl/.ndjson "
                "as JSON lines, any other file as UTF-8 text; .gz/.bz2/.xz/.zst decompressed")

_SPACE = regex.compile(r"\s")


@dataclass
class ReadStats:
    """What the readers saw: reported by training and by ``fastbpe count``."""

    files: int = 0
    bytes_read: int = 0
    documents: int = 0
    null_rows: int = 0
    invalid_utf8_replaced: int = 0
    invalid_utf8_bytes: int = 0
    forced_cuts: int = 0  # text chunks cut inside a possible pre-token (see the module doc)
    cuts_at_spaces: int = 0  # text chunks cut at a space (exact for the named patterns)
    skipped_files: list = field(default_factory=list)  # (path, reason): on_bad_input="skip"
    ignored: list = field(default_factory=list)  # (path, reason): hidden, not regular, twice

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes_read": self.bytes_read,
            "documents": self.documents,
            "null_rows_skipped": self.null_rows,
            "invalid_utf8_sequences_replaced": self.invalid_utf8_replaced,
            "invalid_utf8_bytes": self.invalid_utf8_bytes,
            "forced_cuts": self.forced_cuts,
            "cuts_at_spaces": self.cuts_at_spaces,
            "files_skipped": [{"path": p, "reason": r} for p, r in self.skipped_files],
            "files_ignored": [{"path": p, "reason": r} for p, r in self.ignored],
        }


def check_on_bad_input(on_bad_input) -> None:
    if on_bad_input not in ("error", "skip"):
        raise ValueError(f"on_bad_input must be 'error' or 'skip', not {on_bad_input!r}")


def check_max_invalid_utf8(value) -> float:
    """``max_invalid_utf8`` as a float in [0, 1] (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"max_invalid_utf8 must be a fraction between 0 and 1, not {value!r}")
    return float(value)


# ---------------------------------------------------------------------- listing the files
def _has_magic(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def _file_type(mode: int) -> str:
    for test, name in ((stat_module.S_ISFIFO, "a FIFO"), (stat_module.S_ISCHR, "a character device"),
                       (stat_module.S_ISBLK, "a block device"), (stat_module.S_ISSOCK, "a socket"),
                       (stat_module.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


class _Lister:
    """Collects the files named by paths (see the module docstring); one per real file."""

    def __init__(self, on_bad_input, ignored, skipped):
        self.on_bad_input = on_bad_input
        self.ignored = ignored if ignored is not None else []
        self.skipped = skipped if skipped is not None else []
        self.files: list[str] = []
        self._seen: dict[tuple, str] = {}

    def bad(self, path, reason):
        """An input that cannot be read: an error, or skipped and counted."""
        if self.on_bad_input == "error":
            raise CorpusReadError(f"{path}: {reason}")
        self.skipped.append((str(path), reason))

    def add(self, path: str) -> None:
        """One argument: a file, a folder or a glob."""
        if _has_magic(path) and not os.path.lexists(path):
            n_before = len(self.files) + len(self.ignored) + len(self.skipped)
            matches = self._glob(path)
            for m in matches:
                if not os.path.isdir(m):  # a glob names files: folders it matches are not walked
                    self.entry(m, named=False)
            if not matches or n_before == len(self.files) + len(self.ignored) + len(self.skipped):
                raise CorpusReadError(f"{path}: no file matches this pattern (no input files; "
                                      f"{WHAT_IS_READ})")
            return
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if os.path.islink(path):
                self.bad(path, f"dangling symlink (to {os.readlink(path)!r})")
                return
            raise CorpusReadError(f"{path}: no such file or folder") from None
        except OSError as exc:
            self.bad(path, f"cannot stat ({exc.strerror or exc})")
            return
        if stat_module.S_ISDIR(st.st_mode):
            self.walk(path)
        else:
            self.entry(path, named=True, st=st)

    def entry(self, path: str, named: bool, st=None) -> None:
        """A file met in a walk or a glob (``named=False``) or named explicitly."""
        if st is None:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if os.path.islink(path):
                    self.bad(path, f"dangling symlink (to {os.readlink(path)!r})")
                else:
                    self.bad(path, "vanished while listing")
                return
            except OSError as exc:
                self.bad(path, f"cannot stat ({exc.strerror or exc})")
                return
        if not stat_module.S_ISREG(st.st_mode):
            reason = f"{_file_type(st.st_mode)}, not a regular file: only regular files are read"
            if named:
                self.bad(path, reason)  # never opened: a FIFO would block, /dev/zero never ends
            else:
                self.ignored.append((path, reason))
            return
        key = (st.st_dev, st.st_ino)
        if key in self._seen:
            self.ignored.append((path, f"same file as {self._seen[key]} (read once)"))
            return
        self._seen[key] = path
        self.files.append(path)

    def _dirs(self, root: str, hidden_ignored: bool):
        """``os.walk(root, followlinks=True)``, each real folder once, hidden ones pruned."""
        visited = set()
        try:
            st = os.stat(root)
            visited.add((st.st_dev, st.st_ino))
        except OSError:
            pass

        def onerror(exc):
            self.bad(exc.filename, f"cannot list folder ({exc.strerror or exc})")

        for folder, dirs, names in os.walk(root, onerror=onerror, followlinks=True):
            keep = []
            for d in sorted(dirs):
                full = os.path.join(folder, d)
                if d.startswith("."):
                    if hidden_ignored:
                        self.ignored.append((full, "hidden folder, not walked"))
                    continue
                try:
                    st = os.stat(full)
                except OSError as exc:
                    self.bad(full, f"cannot stat ({exc.strerror or exc})")
                    continue
                key = (st.st_dev, st.st_ino)
                if key in visited:
                    self.ignored.append((full, "folder already walked (a symlink loop, or a "
                                               "second link to it)"))
                    continue
                visited.add(key)
                keep.append(d)
            dirs[:] = keep
            yield folder, sorted(names)

    def walk(self, root: str) -> None:
        for folder, names in self._dirs(root, hidden_ignored=True):
            for n in names:
                full = os.path.join(folder, n)
                if n.startswith("."):
                    self.ignored.append((full, "hidden file"))
                else:
                    self.entry(full, named=False)

    def _glob(self, pattern: str) -> list[str]:
        """``glob.glob``; a ``**`` pattern is matched over a loop-safe walk instead (glob's
        own ``**`` follows symlink loops: the same files many times, or no end)."""
        parts = pattern.split(os.sep)
        if "**" not in parts:
            return sorted(glob.glob(pattern))
        first = next(i for i, p in enumerate(parts) if _has_magic(p) or p == "**")
        root = os.sep.join(parts[:first]) or ("" if not pattern.startswith(os.sep) else os.sep)
        rest = parts[first:]
        if not os.path.isdir(root or "."):
            return []
        out = []
        for folder, names in self._dirs(root or ".", hidden_ignored=False):
            rel = os.path.relpath(folder, root or ".")
            rel_parts = [] if rel == "." else rel.split(os.sep)
            for n in names:
                if not n.startswith(".") and _glob_match(rest, rel_parts + [n]):
                    out.append(os.path.join(root, *rel_parts, n) if root else
                               os.path.join(*rel_parts, n))
        return sorted(out)


def _glob_match(pattern_parts, path_parts) -> bool:
    """Component-wise glob match; ``**`` matches any number of folders."""
    if not pattern_parts:
        return not path_parts
    head = pattern_parts[0]
    if head == "**":
        return any(_glob_match(pattern_parts[1:], path_parts[k:])
                   for k in range(len(path_parts) + 1))
    return bool(path_parts) and fnmatch.fnmatchcase(path_parts[0], head) and _glob_match(
        pattern_parts[1:], path_parts[1:])


def expand_paths(paths, on_bad_input="error", ignored=None, skipped=None) -> list[str]:
    """The files named by ``paths`` (files, globs, folders): see the module docstring.

    ``ignored`` and ``skipped``, when given, are lists that receive ``(path, reason)`` of the
    entries left out (hidden, not regular, the same file again) and of the bad inputs
    skipped with ``on_bad_input="skip"``. Raises ``CorpusReadError`` when no file is found.
    """
    check_on_bad_input(on_bad_input)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    lister = _Lister(on_bad_input, ignored, skipped)
    for p in paths:
        lister.add(p)
    if not lister.files:
        looked = ", ".join(repr(p) for p in paths) or "nothing (an empty list of paths)"
        left_out = ""
        if lister.ignored or lister.skipped:
            hidden = sum(1 for _, r in lister.ignored if r.startswith("hidden"))
            left_out = (f"; left out: {hidden} hidden, {len(lister.ignored) - hidden} other, "
                        f"{len(lister.skipped)} skipped as bad")
        raise CorpusReadError(f"no input files: looked in {looked}{left_out} ({WHAT_IS_READ})")
    return lister.files


def file_kind(path: str) -> str:
    """``"parquet"``, ``"arrow"``, ``"jsonl"`` or ``"text"``, by suffix (after a compression
    suffix: ``data.jsonl.zst`` is JSON lines)."""
    lower = os.fspath(path).lower()
    base, ext = os.path.splitext(lower)
    if ext in COMPRESSION_SUFFIXES:
        lower = base
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(ARROW_SUFFIXES):
        return "arrow"
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return "text"


def _compression_suffix(path: str) -> str | None:
    return COMPRESSION_SUFFIXES.get(os.path.splitext(os.fspath(path).lower())[1])


# ------------------------------------------------------------------- opening and decoding
def open_regular(path: str):
    """Open ``path`` for binary reading, refusing anything but a regular file.

    Opened non-blocking and checked with ``fstat`` before any read, so that a FIFO that
    replaced a file after listing cannot block, nor a device feed bytes without end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            raise CorpusReadError(f"{path}: {_file_type(st.st_mode)}, not a regular file: "
                                  "only regular files are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _magic_compression(head: bytes) -> str | None:
    if head.startswith(b"\x1f\x8b\x08"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    # bzip2: "BZh" + block size digit + the block (or end-of-stream) magic; strict, as
    # plain text may start with "BZh".
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bzip2"
    return None


def _decompressor(f, codec: str):
    if codec == "gzip":
        return gzip.GzipFile(fileobj=f, mode="rb")
    if codec == "bzip2":
        return bz2.BZ2File(f, "rb")
    if codec == "xz":
        return lzma.LZMAFile(f, "rb")
    import pyarrow as pa  # zstd: pyarrow's codec (a dependency already)

    return pa.CompressedInputStream(pa.PythonFile(f, mode="r"), "zstd")


def byte_blocks(path: str, block_bytes: int, stats: ReadStats | None = None):
    """Yield the (decompressed) bytes of the regular file ``path`` in blocks."""
    f = open_regular(path)
    with f:
        try:
            head = f.read(16)
            f.seek(0)
        except OSError as exc:
            raise CorpusReadError(f"{path}: read error ({exc.strerror or exc})") from None
        codec = _magic_compression(head)
        named = _compression_suffix(path)
        if named is not None and codec != named:
            raise CorpusReadError(f"{path}: named {os.path.splitext(path)[1]} but not {named} "
                                  f"data (it starts with {head[:8]!r})")
        if codec is not None and file_kind(path) in ("parquet", "arrow"):
            raise CorpusReadError(f"{path}: a {codec}-compressed {file_kind(path)} file: "
                                  "decompress it first (Parquet and Arrow compress inside)")
        stream = f if codec is None else _decompressor(f, codec)
        total = 0
        while True:
            try:
                block = stream.read(block_bytes)
            except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
                if codec is None:
                    raise CorpusReadError(f"{path}: read error ({exc})") from None
                raise CorpusReadError(f"{path}: corrupt or truncated {codec} data after "
                                      f"{total:,} decompressed bytes ({exc})") from None
            if not block:
                return
            total += len(block)
            if stats is not None:
                stats.bytes_read += len(block)
            yield bytes(block)


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def text_blocks(path: str, block_bytes: int, stats: ReadStats, policy: "Utf8Policy"):
    """Yield the UTF-8 bytes of a text file in blocks: decompressed, the BOM honoured.

    A UTF-8 BOM is dropped; UTF-16/UTF-32 text (by its BOM) is transcoded to UTF-8, its
    invalid units counted by ``policy``. Plain UTF-8 blocks are returned as read (the
    caller cleans them at its cut points, where no sequence is split); the first 64 KiB
    are checked for NUL bytes (a binary file, or UTF-16 without a BOM).
    """
    blocks = byte_blocks(path, block_bytes, stats)
    head = []
    for block in blocks:
        head.append(block)
        if sum(map(len, head)) >= SNIFF_BYTES:
            break
    first = b"".join(head)
    encoding = None
    for bom, name in _BOMS:
        if first.startswith(bom):
            encoding = name
            first = first[len(bom):]
            break
    if encoding in (None, "utf-8"):
        policy.check_nul(first[:SNIFF_BYTES])
        for start in range(0, len(first), block_bytes):  # as read (the caller's block size)
            yield first[start : start + block_bytes]
        yield from blocks
        return
    decoder = codecs.getincrementaldecoder(encoding)(errors=_COUNTING_ERRORS)
    raw_offset = 0  # offsets after the BOM
    for raw in _chain(first, blocks):
        yield policy.transcode(decoder, raw, raw_offset, final=False, encoding=encoding)
        raw_offset += len(raw)
    tail = policy.transcode(decoder, b"", raw_offset, final=True, encoding=encoding)
    if tail:
        yield tail


def _chain(first, blocks):
    if first:
        yield first
    yield from blocks


# The error handler of every decode here: U+FFFD per maximal invalid sequence (as "replace"),
# counted in the calling thread's tally (set by Utf8Policy around each call).
_COUNTING_ERRORS = "fastbpe-count-replace"
_tally = threading.local()


def _count_and_replace(exc):
    tally = _tally.current
    n = exc.end - exc.start
    tally[0] += 1
    tally[1] += n
    if tally[2] is None:
        tally[2] = exc.start
    if isinstance(exc, UnicodeEncodeError):  # lone surrogates: one U+FFFD each
        tally[0] += n - 1
        return "\ufffd" * n, exc.end
    return "\ufffd", exc.end


codecs.register_error(_COUNTING_ERRORS, _count_and_replace)


class Utf8Policy:
    """The invalid-UTF-8 policy of one file: replace (U+FFFD), count, refuse above a share.

    Parameters
    ----------
    path : str
        Named in the error.
    max_invalid : float
        The share of invalid bytes accepted (``max_invalid_utf8``).
    stats : ReadStats
        Receives the counts (``invalid_utf8_replaced``, ``invalid_utf8_bytes``).
    """

    def __init__(self, path: str, max_invalid: float, stats: ReadStats):
        self.path = path
        self.max_invalid = check_max_invalid_utf8(max_invalid)
        self.stats = stats
        self.seen = 0  # bytes judged so far
        self.bad = 0  # invalid bytes so far
        self.first_bad = None  # where the first one is (text for the message)

    def _decode(self, fn):
        """Run ``fn`` (a decode/encode with the counting handler); returns (result, tally)."""
        saved = getattr(_tally, "current", None)
        _tally.current = tally = [0, 0, None]
        try:
            return fn(), tally
        finally:
            _tally.current = saved

    def _record(self, tally, where: str):
        sequences, n_bad, _ = tally
        self.stats.invalid_utf8_replaced += sequences
        self.stats.invalid_utf8_bytes += n_bad
        self.bad += n_bad
        if self.first_bad is None and sequences:
            self.first_bad = where

    def clean(self, raw: bytes, offset: int, where=None) -> bytes:
        """``raw`` as valid UTF-8 (invalid sequences -> U+FFFD, counted); ``offset`` is its
        position in the file (for the message), ``where(i)`` may describe byte ``i``."""
        self.seen += len(raw)
        try:
            raw.decode("utf-8")
            return raw
        except UnicodeDecodeError:
            pass
        text, tally = self._decode(lambda: raw.decode("utf-8", _COUNTING_ERRORS))
        self._record(tally, where(tally[2]) if where else f"byte offset {offset + tally[2]:,}")
        return text.encode("utf-8")

    def clean_str(self, text: str, where: str) -> str:
        """A str with lone surrogates (from JSON escapes): each one U+FFFD, counted."""
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
        from ..text import clean_text

        cleaned = clean_text(text)
        n = cleaned.count("\ufffd") - text.count("\ufffd")
        self._record([n, n, 0], where)
        return cleaned

    def transcode(self, decoder, raw: bytes, offset: int, final: bool, encoding: str) -> bytes:
        """UTF-16/32 -> UTF-8 with an incremental decoder; invalid units counted (the
        share is then judged over the UTF-8 bytes, when the caller cleans them)."""
        text, tally = self._decode(lambda: decoder.decode(raw, final))
        if tally[0]:
            self._record(tally, f"byte offset {offset + tally[2]:,} ({encoding})")
            self.check()
        return text.encode("utf-8")

    def check_nul(self, head: bytes) -> None:
        """Refuse a file whose first bytes are NUL-heavy (binary, or UTF-16 without a BOM)."""
        nul = head.count(0)
        if nul and nul > self.max_invalid * max(len(head), MIN_SHARE_BASE):
            raise CorpusReadError(
                f"{self.path}: not UTF-8 text: {nul:,} NUL bytes in its first {len(head):,} "
                f"bytes ({nul / len(head):.1%}; the first at byte offset {head.index(0):,}) -- "
                f"a binary file, or UTF-16/32 without a byte order mark? Pass "
                f"max_invalid_utf8=1 (--max-invalid-utf8 1) to read it anyway")

    def check(self, final: bool = False) -> None:
        """Raise when the invalid share is over the bound (after 64 KiB, or at the end)."""
        if not self.bad or (not final and self.seen < SNIFF_BYTES):
            return
        if self.bad > self.max_invalid * max(self.seen, MIN_SHARE_BASE):
            share = self.bad / max(self.seen, 1)
            raise CorpusReadError(
                f"{self.path}: {share:.1%} of the bytes read are invalid UTF-8 "
                f"({self.bad:,} of {self.seen:,}; the first at {self.first_bad}): not UTF-8 "
                f"text? Re-encode it, or pass max_invalid_utf8={min(1.0, share * 1.1 + 1e-4):.4g}"
                f" (--max-invalid-utf8) to read it with each invalid sequence as U+FFFD "
                f"(now {self.max_invalid:g})")


# ------------------------------------------------------------------------------ text files
def safe_cut(buf: bytes, start: int = 0, end: int | None = None) -> int:
    """The last safe chunk boundary in ``buf[start:end]`` (see the module docstring), or -1."""
    idx = len(buf) if end is None else min(end, len(buf))
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


def _char_before_is_text(buf: bytes, i: int) -> bool:
    """The character ending just before ``buf[i]`` exists and is not whitespace."""
    q = i - 1
    while q > 0 and q > i - 4 and 0x80 <= buf[q] < 0xC0:
        q -= 1
    if q < 0:
        return False
    prev = buf[q:i].decode("utf-8", "ignore")
    return bool(prev) and not _SPACE.match(prev[-1])


def space_cut(buf: bytes, start: int, end: int) -> int:
    """The last cut in ``buf[start:end]`` right before a single ASCII space between two
    non-space characters, or -1 (exact for the named patterns: see the module docstring)."""
    idx = min(end, len(buf) - 1)
    while True:
        idx = buf.rfind(b" ", start, idx)
        if idx < 1:
            return -1
        nxt = buf[idx + 1 : idx + 5].decode("utf-8", "ignore")[:1]
        if nxt and not _SPACE.match(nxt) and _char_before_is_text(buf, idx):
            return idx


def char_cut(buf: bytes, end: int) -> int:
    """The last UTF-8 character boundary at or before ``end`` (never 0 unless it must)."""
    q = min(end, len(buf))
    floor = max(1, q - 3)
    while q < len(buf) and q > floor and 0x80 <= buf[q] < 0xC0:
        q -= 1
    return q


def _forced_cut(buf: bytes, limit: int, window: int, splittable: bool, stats: ReadStats) -> int:
    """Where to cut ``buf`` (longer than ``limit``) at or before ``limit``; counts the kind."""
    lo = max(0, limit - window)
    if splittable:
        cut = safe_cut(buf, lo, limit)
        if cut > 0:
            return cut
        cut = space_cut(buf, lo, limit)
        if cut > 0:
            stats.cuts_at_spaces += 1
            return cut
    else:
        nl = buf.rfind(b"\n", lo, limit)
        if nl >= 0:
            stats.forced_cuts += 1
            return nl + 1
    stats.forced_cuts += 1
    return char_cut(buf, limit)


def default_max_chunk_bytes(chunk_bytes: int) -> int:
    """The default hard limit of one text chunk (see the module docstring)."""
    return max(4 * chunk_bytes, 64 << 10)


def read_text(path: str, stats: ReadStats, chunk_bytes: int = 16 << 20, splittable=True,
              max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8,
              max_chunk_bytes: int | None = None):
    """Yield ``(data, doc_offsets)`` batches of one text file (each chunk one document).

    Chunks end at safe boundaries and never exceed ``max_chunk_bytes`` (see the module
    docstring); the bytes are decompressed, BOM-decoded and cleaned by the UTF-8 policy.
    """
    limit = max_chunk_bytes or default_max_chunk_bytes(chunk_bytes)
    if limit < 8:
        raise ValueError(f"max_chunk_bytes must be at least 8, not {limit}")
    window = min(chunk_bytes, 1 << 20, limit)
    policy = Utf8Policy(path, max_invalid_utf8, stats)
    offset = 0  # of ``pending`` in the (decoded) file

    def emit(raw):
        nonlocal offset
        clean = policy.clean(raw, offset)
        offset += len(raw)
        policy.check()
        return _one_doc(clean)

    pending = b""
    for block in text_blocks(path, chunk_bytes, stats, policy):
        buf = pending + block if pending else block
        while len(buf) > limit:
            cut = _forced_cut(buf, limit, window, splittable, stats)
            yield emit(buf[:cut])
            buf = buf[cut:]
        if splittable:
            cut = safe_cut(buf, max(0, len(buf) - len(block) - 4))
            if cut > 0:
                yield emit(buf[:cut])
                buf = buf[cut:]
        pending = buf
    if pending:
        yield emit(pending)
    policy.check(final=True)
    stats.documents += 1


def _one_doc(raw: bytes):
    return np.frombuffer(raw, dtype=np.uint8), np.array([0, len(raw)], dtype=np.int64)


# ------------------------------------------------------------------------------ JSON lines
_JSON_KINDS = {dict: "an object", list: "an array", bool: "a boolean", int: "a number",
               float: "a number", str: "a string", type(None): "null"}


def _json_kind(value) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def jsonl_records(path: str, columns, stats: ReadStats, max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8,
                  block_bytes: int = 8 << 20):
    """Yield ``(first_row, {column: [values]})`` per block of whole lines of a JSONL file.

    ``columns[0]`` is the text column: its values are str or None (null or absent); any
    other type is an error naming the file and line, as is a line that is not a JSON
    object. Other columns are taken as parsed. Blank lines are not rows. Memory: one block
    of lines (a single line longer than a block is read whole). Raises ``CorpusReadError``
    when no row has the text field at all.
    """
    policy = Utf8Policy(path, max_invalid_utf8, stats)
    text_col = columns[0]
    state = {"line": 1, "row": 0, "offset": 0, "present": False, "first_keys": None}
    loads = json.loads

    newline = b"\n"

    def parse(raw: bytes):
        line0 = state["line"]
        base = state["offset"]
        text = policy.clean(raw, base, lambda i: (
            f"line {line0 + raw.count(newline, 0, i)} (byte offset {base + i:,})"))
        policy.check()
        state["offset"] += len(raw)
        lines = text.decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        values = {c: [] for c in columns}
        row0 = state["row"]
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            where = f"{path}: line {line0 + i}"
            try:
                obj = loads(line)
            except ValueError as exc:
                msg = getattr(exc, "msg", str(exc))
                col = getattr(exc, "colno", None)
                raise CorpusReadError(f"{where}: not valid JSON ({msg}"
                                      + (f" at column {col})" if col else ")")) from None
            if not isinstance(obj, dict):
                raise CorpusReadError(f"{where}: not a JSON object (it is {_json_kind(obj)})")
            if state["first_keys"] is None:
                state["first_keys"] = (line0 + i, list(obj)[:20])
            value = obj.get(text_col)
            if text_col in obj:
                state["present"] = True
            if value is not None and not isinstance(value, str):
                raise CorpusReadError(f"{where}: field {text_col!r} is {_json_kind(value)}, "
                                      "not a string")
            if value is not None:
                value = policy.clean_str(value, f"line {line0 + i} (a lone surrogate escape)")
            values[text_col].append(value)
            for c in columns[1:]:
                values[c].append(obj.get(c))
        state["line"] += text.count(b"\n")
        state["row"] += len(values[text_col])
        return row0, values

    pending = b""
    for block in text_blocks(path, block_bytes, stats, policy):
        buf = pending + block if pending else block
        end = buf.rfind(b"\n", max(0, len(buf) - len(block))) + 1
        if end == 0:
            pending = buf  # a line longer than the block: read on
            continue
        yield parse(buf[:end])
        pending = buf[end:]
    if pending:
        yield parse(pending)
    policy.check(final=True)
    if state["row"] and not state["present"]:
        line, keys = state["first_keys"]
        raise CorpusReadError(f"{path}: no row has a field {text_col!r} (the fields of line "
                              f"{line}: {keys})")


def read_jsonl(path: str, column: str, stats: ReadStats,
               max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8, block_bytes: int = 8 << 20):
    """Yield ``(data, doc_offsets)`` batches of the ``column`` field of a JSONL file."""
    for _, values in jsonl_records(path, [column], stats, max_invalid_utf8, block_bytes):
        texts = values[column]
        encoded = [t.encode("utf-8") for t in texts if t is not None]
        stats.null_rows += len(texts) - len(encoded)
        stats.documents += len(encoded)
        if not encoded:
            continue
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        yield np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def jsonl_tables(path: str, columns, max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8,
                 block_bytes: int = 8 << 20):
    """Yield ``(first_row, pa.Table)`` of the ``columns`` of a JSONL file, block by block
    (``columns[0]``, the text column, typed ``string``; the others inferred, then held to
    the first block's types)."""
    import pyarrow as pa

    schema = None
    stats = ReadStats()
    for row0, values in jsonl_records(path, columns, stats, max_invalid_utf8, block_bytes):
        arrays = [pa.array(values[columns[0]], pa.string())]
        for c in columns[1:]:
            try:
                arrays.append(pa.array(values[c], None if schema is None else schema.field(c).type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise CorpusReadError(f"{path}: rows {row0}..{row0 + len(values[c]) - 1}: "
                                      f"field {c!r} cannot be one column ({exc})") from None
        tbl = pa.Table.from_arrays(arrays, names=list(columns))
        if schema is None or any(pa.types.is_null(f.type) for f in schema):
            schema = tbl.schema if schema is None else _widen(schema, tbl.schema)
        yield row0, tbl


def _widen(schema, new):
    """The first block's schema with its all-null columns typed by a later block."""
    import pyarrow as pa

    return pa.schema([n if pa.types.is_null(o.type) else o for o, n in zip(schema, new)])


# ----------------------------------------------------------------------- Parquet and Arrow
def _column_of(table_or_batch, column: str, path: str, where: str):
    names = table_or_batch.schema.names
    if column not in names:
        raise CorpusReadError(f"{path}: {where}: no column {column!r} (columns: {names})")
    return table_or_batch.column(names.index(column))


def _clean_rows(chunk, data, offsets, r0, r1, policy: Utf8Policy, where):
    """Rows ``r0..r1`` of a string chunk as (data, offsets), invalid UTF-8 replaced per row.

    Arrow validates each value on its own (rows are never decoded across a boundary: two
    halves of a character in two rows are two invalid rows). Returns the input untouched
    in the usual case of valid text.
    """
    import pyarrow as pa

    d = data[offsets[r0] : offsets[r1]]
    o = offsets[r0 : r1 + 1] - offsets[r0]
    try:
        chunk.slice(r0, r1 - r0).validate(full=True)
        policy.seen += len(d)
        return d, o
    except pa.ArrowInvalid:
        pass
    raw = d.tobytes()
    parts = []
    for r in range(r1 - r0):
        a, b = int(o[r]), int(o[r + 1])
        parts.append(policy.clean(raw[a:b], a, lambda i, r=r, a=a: where(r0 + r, i)))
    lengths = np.fromiter(map(len, parts), np.int64, len(parts))
    new_o = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_o[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), new_o


def _arrow_batches(array, stats: ReadStats, policy: Utf8Policy, where, prefix=None, row_base=0):
    """Batches of a text column, sliced so that one batch holds at most ~8 MB of text.

    ``where(row, byte)`` describes a position for the invalid-UTF-8 message.
    ``string_chunks`` checks each chunk (offsets, type) before it is read; ``prefix`` and
    ``row_base`` name the file, column and row in its errors (CorpusReadError).
    """
    from .arrow_text import row_slices, string_chunks, text_buffers

    base = 0
    for chunk in string_chunks(array, prefix, row_base):
        stats.documents += len(chunk) - chunk.null_count
        stats.null_rows += chunk.null_count
        data, offsets, valid = text_buffers(chunk)
        stats.bytes_read += int(offsets[-1])
        if chunk.null_count:  # null slots may hold any bytes: validate what is read
            import pyarrow.compute as pc

            chunk = pc.fill_null(chunk, "")
        for r0, r1 in row_slices(offsets):
            yield _clean_rows(chunk, data, offsets, r0, r1, policy,
                              lambda r, i, b=base: where(b + r, i))
            policy.check()
        base += len(chunk)


def read_parquet(path: str, column: str, stats: ReadStats,
                 max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8):
    """Yield batches of one Parquet file, one row group at a time."""
    import pyarrow.parquet as pq

    if _compression_suffix(path) is not None:
        raise CorpusReadError(f"{path}: a compressed Parquet file: decompress it first "
                              "(Parquet compresses inside)")
    open_regular(path).close()  # a FIFO or device is refused before pyarrow opens it
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for bad files
        raise CorpusReadError(f"{path}: not a readable Parquet file ({exc})") from None
    from .arrow_text import describe_row_groups, parquet_read_plan, row_group_batches

    policy = Utf8Policy(path, max_invalid_utf8, stats)
    columns = [column] if column in pf.schema_arrow.names else None
    row = 0
    for row_groups, batch_rows in parquet_read_plan(pf):
        # Record batches of ~8 MB: a row group of huge documents is never decoded whole (and
        # its pages are freed before a big batch is used); runs of small row groups are
        # read together.
        where = describe_row_groups(row_groups)
        if len(row_groups) == 1:
            batches = row_group_batches(pf, row_groups[0], columns)
        else:
            batches = pf.iter_batches(batch_size=batch_rows, row_groups=row_groups,
                                      columns=columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:
                raise CorpusReadError(f"{path}: {where}: cannot read ({exc})") from None
            col = _column_of(batch, column, path, where)
            yield from _arrow_batches(col, stats, policy, lambda r, i, b=row, g=where: (
                f"row {b + r:,} ({g}), byte {i:,} of the value"), f"{path}: column {column!r}", row)
            row += batch.num_rows
    policy.check(final=True)


def read_arrow(path: str, column: str, stats: ReadStats,
               max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8):
    """Yield batches of one Arrow IPC file (random-access file or stream format).

    Read record batch by record batch into our memory, not memory-mapped (see
    ``arrow_text.ipc_batches``): a file truncated meanwhile raises CorpusReadError.
    """
    from .arrow_text import ipc_batches

    if _compression_suffix(path) is not None:
        raise CorpusReadError(f"{path}: a compressed Arrow file: decompress it first")
    open_regular(path).close()  # a FIFO or device is refused before it is opened for reading
    policy = Utf8Policy(path, max_invalid_utf8, stats)
    row = 0
    try:
        for i, batch in enumerate(ipc_batches(path)):
            col = _column_of(batch, column, path, f"record batch {i}")
            yield from _arrow_batches(col, stats, policy, lambda r, b, base=row, k=i: (
                f"row {base + r:,} (record batch {k}), byte {b:,} of the value"),
                f"{path}: column {column!r}", row)
            row += batch.num_rows
    except CorpusReadError:
        raise
    except FileNotFoundError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    except Exception as exc:
        raise CorpusReadError(f"{path}: not a readable Arrow IPC file ({exc})") from None
    policy.check(final=True)


def iter_batches(paths, column="text", stats: ReadStats | None = None, splittable=True,
                 on_bad_input="error", chunk_bytes=16 << 20,
                 max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8,
                 max_chunk_bytes: int | None = None):
    """Yield ``(data, doc_offsets)`` batches over every file of ``paths``, in order."""
    check_on_bad_input(on_bad_input)
    check_max_invalid_utf8(max_invalid_utf8)
    stats = stats if stats is not None else ReadStats()
    for path in expand_paths(paths, on_bad_input, stats.ignored, stats.skipped_files):
        kind = file_kind(path)
        if kind == "parquet":
            gen = read_parquet(path, column, stats, max_invalid_utf8)
        elif kind == "arrow":
            gen = read_arrow(path, column, stats, max_invalid_utf8)
        elif kind == "jsonl":
            gen = read_jsonl(path, column, stats, max_invalid_utf8)
        else:
            gen = read_text(path, stats, chunk_bytes, splittable, max_invalid_utf8,
                            max_chunk_bytes)
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
