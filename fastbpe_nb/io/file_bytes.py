"""The bytes of one corpus file: opened only if regular, decompressed, BOM decoded.

``.gz`` ``.bz2`` ``.xz`` ``.zst`` files are decompressed on the fly (by suffix *and* by
magic bytes, so a gzip file without the suffix is read too; a suffix over other content
is an error). A byte order mark is honoured: UTF-8's is dropped, UTF-16 and UTF-32
(LE/BE) text is transcoded to UTF-8, its invalid units counted by the ``Utf8Policy``.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import lzma
import os
import stat as stat_module
import zlib

from ..errors import CorpusReadError
from .input_files import compression_suffix, file_kind, file_type_name
from .read_stats import ReadStats
from .utf8_policy import COUNTING_ERRORS, SNIFF_BYTES, Utf8Policy


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
            raise CorpusReadError(f"{path}: {file_type_name(st.st_mode)}, not a regular file: "
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
        named = compression_suffix(path)
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
    decoder = codecs.getincrementaldecoder(encoding)(errors=COUNTING_ERRORS)
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
