"""Text before tokenization: Unicode normalization and the UTF-8 policy for ``str``.

A Python ``str`` may hold lone surrogates, which have no UTF-8 form; every encoder replaces
each of them by U+FFFD first (tiktoken's policy). Arbitrary bytes go through
``Tokenizer.encode_bytes`` instead.
"""

from __future__ import annotations

import unicodedata


#: Unicode normalization forms a tokenizer may apply before encoding (None: identity).
NORMALIZATIONS = (None, "NFC", "NFKC")


def normalize(text: str, form) -> str:
    """``text`` in normalization ``form`` (None leaves it unchanged)."""
    if form is None:
        return text
    return unicodedata.normalize(form, text)


def utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates become U+FFFD (they have no UTF-8 form)."""
    return clean_text(text).encode("utf-8")


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by one U+FFFD (unchanged when there are none).

    The UTF-16 round trip pairs up surrogates that form a valid pair and replaces the
    others, one U+FFFD each (tiktoken's policy).
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")




def not_str(index: int, obj) -> TypeError:
    """The error for a document that is not a str (bytes: the verb that takes bytes)."""
    hint = ""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        hint = " (bytes: decode them first, or use tok.encode_bytes(data) for raw bytes)"
    return TypeError(f"document {index}: expected str, got {type(obj).__name__}{hint}")


class UnicodeNormalizer:
    """A tokenizer's normalizer part: Unicode ``form`` (None, "NFC" or "NFKC") applied to
    each text before encoding (and in training). ``identity``: it changes nothing."""

    def __init__(self, form=None):
        if form not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, not {form!r}")
        self.form = form
        self.identity = form is None

    def normalize(self, text: str) -> str:
        return normalize(text, self.form)

    def __eq__(self, other):
        return isinstance(other, UnicodeNormalizer) and self.form == other.form

    def normalize_aligned(self, text: str):
        """``(normalize(text), (src_start, src_end))``: normalized character j comes from
        ``text[src_start[j]:src_end[j]]`` (see ``normalized_segments``)."""
        import numpy as np

        if self.form is None or unicodedata.is_normalized(self.form, text):
            idx = np.arange(len(text), dtype=np.int64)
            return text, (idx, idx + 1)
        starts, ends, parts = [], [], []
        for a, b, out in normalized_segments(self.form, text):
            parts.append(out)
            starts.extend([a] * len(out))
            ends.extend([b] * len(out))
        return "".join(parts), (np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))


def normalized_segments(form: str, text: str):
    """``[(start, end, normalize(text[start:end]))]`` whose outputs join to
    ``normalize(text)``: each segment is a starter with the combining marks after it,
    merged with the next one wherever normalizing them apart would differ (Hangul jamo,
    compositions across starters), so the segments are as small as correctness allows."""
    cuts = [0] + [i for i in range(1, len(text)) if not unicodedata.combining(text[i])]
    cuts.append(len(text))
    segs = []
    a, b = cuts[0], cuts[1]
    for c in cuts[2:]:
        if (text[b - 1] < "\x80" and text[b] < "\x80"
                or unicodedata.normalize(form, text[a:c])
                == unicodedata.normalize(form, text[a:b]) + unicodedata.normalize(form, text[b:c])):
            segs.append((a, b))
            a = b
        b = c
    segs.append((a, b))
    out = [(s, e, unicodedata.normalize(form, text[s:e])) for s, e in segs]
    if "".join(o for _, _, o in out) != unicodedata.normalize(form, text):
        return [(0, len(text), unicodedata.normalize(form, text))]  # one span: never wrong
    return out
