"""Invalid UTF-8: one policy for every kind of corpus file (``Utf8Policy``).

Each maximal invalid sequence becomes one U+FFFD and is counted
(``invalid_utf8_sequences_replaced``; lone surrogates of JSON escapes too). When the
invalid bytes exceed ``max_invalid_utf8`` (default 1 %) of the bytes read -- measured
over at least 4 KiB, checked once 64 KiB have been read and at the end of each file --
the file is refused with ``CorpusReadError`` naming the first bad byte and the share:
it is almost surely not UTF-8 text (Latin-1, binary, UTF-16 without a BOM). The same
bound refuses a text file whose first 64 KiB are NUL bytes beyond that share.
``max_invalid_utf8=1`` accepts anything.
"""

from __future__ import annotations

import codecs
import threading

from ..errors import CorpusReadError
from .read_stats import ReadStats

#: Default of ``max_invalid_utf8``: the share of invalid UTF-8 bytes a file may hold.
DEFAULT_MAX_INVALID_UTF8 = 0.01
#: Bytes read before the share of invalid bytes (or NUL bytes) is first judged.
SNIFF_BYTES = 64 << 10
#: The share is taken over at least this many bytes (a few bad bytes in a tiny file pass).
MIN_SHARE_BASE = 4096


def check_max_invalid_utf8(value) -> float:
    """``max_invalid_utf8`` as a float in [0, 1] (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"max_invalid_utf8 must be a fraction between 0 and 1, not {value!r}")
    return float(value)

# The error handler of every decode here: U+FFFD per maximal invalid sequence (as "replace"),
# counted in the calling thread's tally (set by Utf8Policy around each call).
COUNTING_ERRORS = "fastbpe-count-replace"
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


codecs.register_error(COUNTING_ERRORS, _count_and_replace)


def is_utf8(raw) -> bool:
    """Whether ``raw`` (bytes-like) is valid UTF-8, as Python's strict decoder judges it
    (surrogates, overlong forms and code points above U+10FFFF are invalid).

    Arrow's validator checks it in place, about 15x faster than ``raw.decode()``, which
    builds a ``str`` of the whole chunk only to throw it away (the read path spent more
    time there than the counting kernels took to scan the text).
    """
    import numpy as np
    import pyarrow as pa

    n = len(raw)
    text = pa.LargeStringArray.from_buffers(1, pa.py_buffer(np.array([0, n], np.int64)),
                                            pa.py_buffer(raw))
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


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

    def clean(self, raw, offset: int, where=None):
        """``raw`` (bytes-like) as valid UTF-8 (invalid sequences -> U+FFFD, counted);
        ``offset`` is its position in the file (for the message), ``where(i)`` may describe
        byte ``i``."""
        self.seen += len(raw)
        if is_utf8(raw):
            return raw
        text, tally = self._decode(lambda: bytes(raw).decode("utf-8", COUNTING_ERRORS))
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
