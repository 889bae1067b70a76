"""gpt2's, cl100k's and o200k's 64-byte ASCII blocks (``kernels.ascii_blocks``) and
SuperBPE's stage-2 ones (``kernels.superbpe_blocks``) against ``regex.findall``.

The scanner finds their pieces of ASCII stretches from bit masks and hands the rest
(non-ASCII characters, pieces of 63 bytes or more, a document's last 64 bytes) to the
automaton (SuperBPE: to the windowed matcher; its gaps are followed across blocks).
These texts are long enough to hold many blocks, and are built from the parts where the
mask rules are delicate: whitespace runs before letters, digits and others (``\\s+(?!\\S)``
and the ``' ?'`` prefix), contractions (after letters, digits, line breaks, spaces and
others), kinds changing at every byte, pieces longer than a block, and non-ASCII characters
at any distance from a block's end.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastbpe_nb._scanner import scan_offsets, scan_prefix_offsets
from fastbpe_nb.pretokenize import SCANNED_PATTERNS

NOJIT = os.environ.get("NUMBA_DISABLE_JIT") == "1"
#: The patterns that use the blocks ("superbpe": SuperBPE's stage 2).
BLOCK_PATTERNS = ["gpt2", "cl100k", "o200k", "superbpe"]
COMPILED = {name: regex.compile(SCANNED_PATTERNS[name]) for name in BLOCK_PATTERNS}
HYPOTHESIS = settings(max_examples=100 if NOJIT else 400, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ASCII_PARTS = [
    "a", "word", "Words", "s", "t", "e", "l", "re", "ll", "d", "m", "v", "x", "Z",
    "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'r", "'v", "'l", "'x",
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", " \n", "\n ", "\t ",
    "0", "42", "2024", ".", ",", "(", ")", "->", "==", "/*", "*/", "_", "#", "\\", '"',
    "\x00", "\x1c", "\x1f", "\x7f", "~",
    # o200k: case changes, contractions of any case, digit groups, what others take
    "HTTPServer", "camelCase", "ABC", "aBC", "I'M", "IT'S", "'Ll", "don't", "12345", "1234567",
    ";\n", ".\n/", "\n/\n", "//", "/", "\t(", " (", "'n'", "x'", "\r\n\r\n", " \n ",
    # cl100k: contractions of any case wherever an apostrophe starts a piece
    "'T", "'D", "'vE", "'lL", "\t'S", "\n'd", ".'s", "''s", "5'm",
    # superbpe: gaps of words and spaces (across blocks), runs of others with the line
    # breaks and slashes they take, spaces before whitespace and before two others
    " over the lazy dog", "the quick brown fox jumps", " a, b. c", " ==", " ->", "!!\n\n",
    "*/\n/", ")\r\n", " \t", "  \n", "x \n", " *", " *)", "a1b22c333d4444", "\x1d\x1e",
]
LONG_PARTS = [" " * 70, "\t" * 65, "=" * 80, "a" * 66, "9" * 64, "\n" * 63, " " * 62 + "x",
              "and some more words " * 9, "x y" * 50]
NON_ASCII_PARTS = ["\u00e9", "\u00a0", "\u4e2d", "\u2019", "\u0663", "\u3000", "\u0416",
                   # two-byte letters the blocks take (Latin, basic Cyrillic) ...
                   "\u00df", "\u00c4", "\u00ff", "\u0101", "\u02b0", "\u0250", "\u0451",
                   "\u0436\u0438\u0437\u043d\u044c", "stra\u00dfe", "\u00e9t\u00e9",
                   # case changes inside and across them (o200k splits lower -> upper)
                   "\u00c9t\u00c9", "\u0416\u0438\u0437\u041d\u044c", "\u00e9\u00c9", "a\u00c9",
                   "\u00e9A", "\u0430\u0410", "\u00dfX", "\u045f\u040f", "\u00de\u00df",
                   # ... and two-byte characters they leave to the automaton
                   "\u00d7", "\u00f7", "\u00b2", "\u00b5", "\u0482", "\u0301", "\u03b1",
                   "\u0387", "\u02c2", "\u0085"]

ascii_texts = st.lists(
    # ASCII parts three times as likely as long runs or non-ASCII characters.
    st.one_of(st.sampled_from(ASCII_PARTS), st.sampled_from(ASCII_PARTS),
              st.sampled_from(ASCII_PARTS), st.sampled_from(LONG_PARTS),
              st.sampled_from(NON_ASCII_PARTS)),
    min_size=20, max_size=220,
).map("".join)


def whole_scan(data: bytes, name: str = "gpt2") -> list[bytes]:
    offsets, _ = scan_offsets(data, None, name)
    bounds = offsets.tolist()
    return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def expected(text: str, name: str = "gpt2") -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in COMPILED[name].findall(text)]


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
@HYPOTHESIS
@given(text=ascii_texts)
def test_blocks_match_regex(name, text):
    assert whole_scan(text.encode(), name) == expected(text, name)


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
@HYPOTHESIS
@given(text=ascii_texts, shift=st.integers(0, 63))
def test_blocks_at_every_alignment_match_regex(name, text, shift):
    # The same text after `shift` letters: every rule meets every bit of a block.
    padded = "q" * shift + " " + text
    assert whole_scan(padded.encode(), name) == expected(padded, name)


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
@HYPOTHESIS
@given(text=ascii_texts, steps=st.lists(st.integers(1, 150), min_size=1, max_size=10))
def test_blocks_stop_at_limits_like_the_whole_scan(name, text, steps):
    # Chained scans that stop once a piece ends at or after a limit (scan_prefix, as a huge
    # text is scanned): each stops where the whole scan has a piece end, at or past its limit
    # (the automaton may store ends past it, a round of bytes at a time; the blocks stop
    # at the first).
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    whole = scan_offsets(data, None, name)[0].tolist()
    got, start, k = [0], 0, 0
    while start < len(data):
        limit = start + steps[k % len(steps)]
        pieces, end = scan_prefix_offsets(data, start, limit, name)
        assert end >= min(limit, len(data)) and end in whole
        got.extend(pieces[1:].tolist())
        start, k = end, k + 1
    assert got == whole


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
@HYPOTHESIS
@given(texts=st.lists(ascii_texts, min_size=1, max_size=4))
def test_blocks_never_cross_a_document_end(name, texts):
    docs = [t.encode() for t in texts]
    data = b"".join(docs)
    doc_offsets = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    offsets, doc_pieces = scan_offsets(data, doc_offsets, name)
    for d, text in enumerate(texts):
        bounds = offsets[doc_pieces[d]:doc_pieces[d + 1] + 1].tolist()
        assert [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])] == expected(text, name)


INVALID = [b"\xc3", b"\xd0", b"\xd1", b"\xca", b"\xbf", b"\x80", b"\xc3\xc3", b"\xc3\x97",
           b"\xc2", b"\xe4\xb8", b"\xff", b"\xc0\x80", b"\xcb\x80"]
byte_docs = st.lists(
    st.one_of(st.sampled_from([p.encode() for p in ASCII_PARTS]),
              st.sampled_from([p.encode() for p in ASCII_PARTS]),
              st.sampled_from([p.encode() for p in NON_ASCII_PARTS]),
              st.sampled_from(INVALID)),
    min_size=20, max_size=160,
).map(b"".join)


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
@HYPOTHESIS
@given(data=byte_docs)
def test_invalid_utf8_next_to_two_byte_letters_follows_policy(name, data):
    # An undecodable byte is one "other" character (surrogateescape): a lead byte without
    # its continuation, a stray continuation, overlong or truncated sequences.
    assert whole_scan(data, name) == expected(data.decode("utf-8", "surrogateescape"), name)


def test_two_byte_letters_are_letters():
    # Every two-byte code point, in a block of ASCII letters: the blocks take it as a
    # letter only if regex does, and take all of U+00C0..U+02BF (but x and /) and
    # U+0400..U+047F.
    from numba import njit

    from fastbpe_nb.kernels.ascii_blocks import class_masks, two_byte_letters

    @njit
    def letter_bits(data):
        non_ascii = class_masks(data, 0)[5]
        return two_byte_letters(data, 0, non_ascii), non_ascii

    for cp in range(0x80, 0x800):
        data = np.frombuffer(b"a" * 10 + chr(cp).encode() + b"a" * 52, dtype=np.uint8)
        letters, non_ascii = letter_bits(data)
        assert int(non_ascii) == 0b11 << 10
        taken = int(letters) == 0b11 << 10
        assert taken or int(letters) == 0, hex(cp)
        is_letter = bool(regex.match(r"\p{L}", chr(cp)))
        intended = (0xC0 <= cp <= 0x2BF and cp not in (0xD7, 0xF7)) or 0x400 <= cp <= 0x47F
        assert taken == intended and (not taken or is_letter), hex(cp)
    # A lead byte at the block's last bit: its continuation is not in the block.
    data = np.frombuffer(b"a" * 63 + "\u00e9".encode(), dtype=np.uint8)
    assert int(letter_bits(data)[0]) == 0


def test_cased_two_byte_letters_have_o200k_case():
    # Every two-byte code point, in a block of ASCII letters: o200k's blocks take it only
    # as what regex calls it (upper- or lower-ish), and take all of U+00C0..U+00FF (but x
    # and /) and U+0400..U+045F.
    from numba import njit

    from fastbpe_nb.kernels.ascii_blocks import cased_two_byte_letters, class_masks

    upperish = regex.compile(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")
    lowerish = regex.compile(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")

    @njit
    def cased(data):
        return cased_two_byte_letters(data, 0, class_masks(data, 0)[5])

    for cp in range(0x80, 0x800):
        data = np.frombuffer(b"a" * 10 + chr(cp).encode() + b"a" * 52, dtype=np.uint8)
        upper, lower = (int(m) for m in cased(data))
        assert upper in (0, 0b11 << 10) and lower in (0, 0b11 << 10) and not (upper and lower)
        intended = (0xC0 <= cp <= 0xFF and cp not in (0xD7, 0xF7)) or 0x400 <= cp <= 0x45F
        assert bool(upper or lower) == intended, hex(cp)
        if upper:
            assert upperish.match(chr(cp)) and not lowerish.match(chr(cp)), hex(cp)
        if lower:
            assert lowerish.match(chr(cp)) and not upperish.match(chr(cp)), hex(cp)


@pytest.mark.parametrize("name", BLOCK_PATTERNS)
def test_real_text_matches_regex(name):
    # Prose and code as users have them: the repository's own sources and docs.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in ("fastbpe_nb/kernels/scan.py", "README.md", "docs/performance.md"):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        assert whole_scan(text.encode(), name) == expected(text, name), path


def test_class_masks_compiled_match_their_definition():
    from numba import njit

    from fastbpe_nb.kernels.ascii_blocks import (BLOCK_BYTES, break_masks, cased_masks,
                                                 class_masks, o200k_masks, utf8_masks)
    from fastbpe_nb.kernels.superbpe_blocks import superbpe_masks

    @njit
    def compiled(data, pos):
        return class_masks(data, pos)

    @njit
    def compiled_superbpe(data, pos):
        return superbpe_masks(data, pos)

    @njit
    def compiled_utf8(data, pos):
        return (utf8_masks(data, pos), o200k_masks(data, pos), cased_masks(data, pos),
                break_masks(data, pos))

    rng = np.random.default_rng(7)
    blocks = [np.arange(256, dtype=np.uint8)[k:k + BLOCK_BYTES] for k in range(0, 193, 64)]
    blocks += [rng.integers(0, 256, BLOCK_BYTES + 5, dtype=np.uint8) for _ in range(50)]
    blocks += [rng.choice(np.frombuffer(b" \t\n\r\x0b\x0c\x08\x0e'azAZ09@[`{/:\x80\xff"
                                        b"\xc3\xc4\xca\xcb\xd0\xd1\xd2\x97\xb7\xbf\xc0", np.uint8),
                          BLOCK_BYTES + 3) for _ in range(50)]
    for data in blocks:
        for pos in range(len(data) - BLOCK_BYTES + 1):
            assert compiled(data, pos) == class_masks(data, pos)
        for pos in range(len(data) - BLOCK_BYTES + 1):
            assert compiled_utf8(data, pos) == (utf8_masks(data, pos), o200k_masks(data, pos),
                                                cased_masks(data, pos), break_masks(data, pos))
    for data in blocks:
        for pos in range(len(data) - BLOCK_BYTES + 1):
            assert compiled_superbpe(data, pos) == superbpe_masks(data, pos)
    # The definition itself, byte by byte, against regex's classes.
    for byte in range(256):
        data = np.full(BLOCK_BYTES, byte, dtype=np.uint8)
        masks = class_masks(data, 0)
        assert all(m in (0, 2**64 - 1) for m in masks)
        letter, digit, space, other_ws, apostrophe, high = (m != 0 for m in masks)
        if byte < 0x80:
            char = chr(byte)
            assert letter == bool(regex.match(r"\p{L}", char))
            assert digit == bool(regex.match(r"\p{N}", char))
            assert space == (char == " ")
            assert other_ws == (bool(regex.match(r"\s", char)) and char != " ")
            assert apostrophe == (char == "'")
        assert high == (byte >= 0x80)
        kinds = superbpe_masks(data, 0)
        assert all(m in (0, 2**64 - 1) for m in kinds)
        assert [m != 0 for m in kinds[:4] + kinds[6:]] == [letter, digit, space, other_ws, high]
        assert (kinds[4] != 0) == (byte in b"\r\n") and (kinds[5] != 0) == (byte == 0x2F)


@pytest.mark.parametrize("text", [
    "x" * 63 + "'s", "x" * 61 + "'ll and more " * 8, "don't " * 30, " 's" * 40, "\n's" * 40,
    "1's" * 40, "(('s" * 30, "'''s" * 30, "a" * 62 + "\u00e9" + "b" * 100,
    " " * 62 + "\u00a0" + "x" * 70, "abc " * 15 + "\u4e2d" * 30 + " def" * 20,
    "\t\t\treturn x;\n" * 20, "  \n  \n" * 40 + "end", "a" * 200,
    "Stra\u00dfe und Gr\u00fc\u00dfe, \u00e7a va? " * 6,
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! " * 8,
    "x" * 62 + "\u00e9" * 40, "a\u00d7b \u00f7 " * 20,
    "x;\n/\n/y " * 10, "IT'S DON'T we'LL " * 6, "1234567890" * 10, "a" * 60 + "'s" * 10,
    "x" * 60 + "\t'Ll" * 20, "'S" * 70, "\n'VE" * 30, "x" * 61 + "'d'd'd" * 12,
    # pieces longer than the stretches the blocks hand over (SuperBPE: decoded again, larger)
    ("/" + "*" * 300 + "/\n int x;\n") * 3, ("  " + "-" * 700 + "\n" + "a b " * 30) * 2,
    " " * 1000 + "x" + "\u00e9" + "y" * 70, "\n" * 500 + "z" * 100,
])
@pytest.mark.parametrize("name", BLOCK_PATTERNS)
def test_block_edges_match_regex(name, text):
    assert whole_scan(text.encode(), name) == expected(text, name)
