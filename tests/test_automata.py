"""Exhaustive checks of the scanner's automata (``fastbpe_nb.kernels.automata``) on short
texts: every string of up to 4 characters over an alphabet that has one character of each
class the automata tell apart (and up to 6 over the letter cases and apostrophes where
o200k backtracks), each a document of one batch, against ``regex.findall``. The
hypothesis tests of test_scan.py sample long texts; these leave no short case out.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import regex

from fastbpe_nb._scanner import scan_offsets
from fastbpe_nb.pretokenize import NAMED_PATTERNS

# One of each: lower, upper, Lm ("both" for o200k), a combining mark, the apostrophe and
# contraction letters of each kind and case, space, line break, tab, slash, digit, other.
ALPHABET = ["a", "A", "\u02b0", "\u0301", "'", "s", "R", "e", "l", " ", "\n", "\t", "/", "1",
            "."]
LETTERS = ["A", "\u02b0", "a", "'", "s", "\u0301"]


def _texts(alphabet, max_len):
    for n in range(1, max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


@pytest.mark.parametrize("name", sorted(NAMED_PATTERNS))
@pytest.mark.parametrize("alphabet,max_len", [(ALPHABET, 4), (LETTERS, 6)],
                         ids=["all-classes-4", "letters-6"])
def test_every_short_text_matches_regex(name, alphabet, max_len):
    texts = list(_texts(alphabet, max_len))
    encoded = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    doc_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    doc_offsets[1:] = np.cumsum([len(e) for e in encoded])
    pieces, doc_pieces = scan_offsets(data, doc_offsets, name)
    compiled = regex.compile(NAMED_PATTERNS[name])
    wrong = []
    for d, text in enumerate(texts):
        ends = pieces[doc_pieces[d] + 1:doc_pieces[d + 1] + 1] - doc_offsets[d]
        expected = np.cumsum([len(p.encode()) for p in compiled.findall(text)])
        if ends.tolist() != expected.tolist():
            wrong.append(text)
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[:5]!r}"
