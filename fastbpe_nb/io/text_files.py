"""Text corpus files as chunks cut where no pre-token can span the cut (``read_text``).

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

import numpy as np
import regex

from .file_bytes import text_blocks
from .read_stats import ReadStats
from .utf8_policy import DEFAULT_MAX_INVALID_UTF8, Utf8Policy

_SPACE = regex.compile(r"\s")
#: Bytes of a block's head that ``read_text`` joins to the previous block's tail to find
#: their first safe cut (the tail is a partial line: usually a few dozen bytes).
HEAD_BYTES = 1 << 16


def _safe_after(buf: bytes, idx: int) -> bool:
    """Whether the newline ``buf[idx]`` ends a safe chunk (see the module docstring)."""
    p = idx + 1
    if idx < 1 or p >= len(buf):
        return False
    nxt = buf[p : p + 4].decode("utf-8", "ignore")[:1]
    if not nxt or nxt == "/" or _SPACE.match(nxt):
        return False
    # The character before the newline (walk back over UTF-8 continuation bytes).
    q = idx - 1
    while q > 0 and q > idx - 4 and 0x80 <= buf[q] < 0xC0:
        q -= 1
    prev = buf[q:idx].decode("utf-8", "ignore")
    return bool(prev) and not _SPACE.match(prev[-1])


def safe_cut(buf: bytes, start: int = 0, end: int | None = None) -> int:
    """The last safe chunk boundary in ``buf[start:end]`` (see the module docstring), or -1."""
    idx = len(buf) if end is None else min(end, len(buf))
    while True:
        idx = buf.rfind(b"\n", start, idx)
        if idx < 1:
            return -1
        if _safe_after(buf, idx):
            return idx + 1


def first_safe_cut(buf: bytes, start: int = 0, end: int | None = None) -> int:
    """The first safe chunk boundary in ``buf[start:end]``, or -1."""
    end = len(buf) if end is None else min(end, len(buf))
    idx = start - 1
    while True:
        idx = buf.find(b"\n", idx + 1, end)
        if idx < 0:
            return -1
        if _safe_after(buf, idx):
            return idx + 1


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


def chunk_limits(chunk_bytes, max_chunk_bytes=None, max_memory=None):
    """``(chunk_bytes, max_chunk_bytes)`` for the text reader, held within ``max_memory``.

    Counting one chunk holds about 10-15 bytes per text byte (the chunk and its copies,
    its pre-token offsets, the kernel's tables) on top of the ~230 MiB that the loaded
    kernels take, and the next batch's need is checked against the budget before it is
    counted (``check_budget``, at PHASE_BYTES' pessimistic rate): under a budget no chunk may
    exceed 1/200 of it (2 MiB of 400 MiB), which leaves that check room.
    """
    for name, value in (("chunk_bytes", chunk_bytes), ("max_chunk_bytes", max_chunk_bytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 8):
            raise ValueError(f"{name} must be an int >= 8, got {value!r}")
    limit = max_chunk_bytes or default_max_chunk_bytes(chunk_bytes)
    if max_memory is not None:
        limit = min(limit, max(1 << 20, max_memory // 200))
        chunk_bytes = min(chunk_bytes, max(1 << 16, limit // 2))
    return chunk_bytes, limit


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
        if splittable and len(block) <= limit:
            # Most blocks: the pending tail is joined only to the block's head, up to its
            # first safe cut, and the block is emitted up to its last one as a view. Joining
            # and slicing whole blocks copied every byte twice, which cost the reader thread
            # as much CPU as a quarter of the counting.
            start = 0
            if pending:
                joint = pending + block[:HEAD_BYTES]
                first = first_safe_cut(joint, max(0, len(pending) - 1))  # (cut in the block)
                if first > 0 and len(joint) <= limit:
                    yield emit(joint[:first])
                    start, pending = first - len(pending), b""
            if not pending:
                cut = safe_cut(block, start)
                if cut > start:
                    yield emit(memoryview(block)[start:cut])
                    start = cut
                pending = block[start:]
                continue
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
