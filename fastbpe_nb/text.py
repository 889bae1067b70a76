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
