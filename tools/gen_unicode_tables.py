#!/usr/bin/env python
"""Generate ``fastbpe_nb/unicode_tables.py`` by probing the ``regex`` module.

The Numba pre-tokenizer (``fastbpe_nb/kernels/scan.py``) must classify every
code point exactly as the ``regex`` module does when it runs the named
pre-tokenizer patterns.  Rather than trusting ``unicodedata`` (whose Unicode
version follows the Python build, not ``regex``), this script asks ``regex``
itself: for each character class used by the patterns it runs a one-character
pattern over a string holding every code point 0..0x10FFFF (lone surrogates
included) and records which code points match.

The result is a two-level table of ``uint16`` bitmasks:

* ``stage1[cp >> 8]`` is the index of the 256-entry block holding ``cp``;
* ``stage2[stage1[cp >> 8] * 256 + (cp & 0xFF)]`` is the class bitmask.

``uint16`` rather than ``uint8`` because, besides the five class bits, each
code point carries one bit per contraction letter (s d m t l v e r) telling
whether ``(?i:x)`` matches it; that keeps the case-insensitive contraction
test a single bit test with no ASCII special case (U+017F LATIN SMALL LETTER
LONG S matches ``(?i:s)``).

Both arrays are stored run-length encoded and base64-armoured; the encoder is
implemented here (not zlib) so that the generated file is byte-identical for a
given ``regex`` version whatever zlib build the interpreter links.

Usage::

    python tools/gen_unicode_tables.py                # writes fastbpe_nb/unicode_tables.py
    python tools/gen_unicode_tables.py --output PATH  # writes elsewhere (used by the tests)
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import sys
import textwrap
from pathlib import Path

import numpy as np
import regex

MAX_CODE_POINT = 0x10FFFF
BLOCK_SIZE = 256
N_BLOCKS = (MAX_CODE_POINT + 1) // BLOCK_SIZE  # 4352

# Bit layout: defined in the kernel module ``fastbpe_nb/kernels/unicode_classes.py`` (the
# scanner compiles them in, and as a kernel module a change to them renews the kernels'
# cache stamps); here they are only paired with the ``regex`` class each one probes. The
# module is loaded from its file so that the script runs without the package installed
# and without importing (or compiling) anything else of it.
REPO = Path(__file__).resolve().parents[1]
CLASSES_MODULE = "fastbpe_nb.kernels.unicode_classes"


def _load_bits():
    path = REPO / "fastbpe_nb" / "kernels" / "unicode_classes.py"
    spec = importlib.util.spec_from_file_location(CLASSES_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BITS = _load_bits()
CLASS_BITS = {
    # name: (bit, regex pattern probed)
    "CLS_L": (BITS.CLS_L, r"\p{L}"),
    "CLS_N": (BITS.CLS_N, r"\p{N}"),
    "CLS_WS": (BITS.CLS_WS, r"\s"),
    "CLS_UPPERISH": (BITS.CLS_UPPERISH, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
    "CLS_LOWERISH": (BITS.CLS_LOWERISH, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
}
# One bit per letter used in a case-insensitive contraction.
FOLD_LETTERS = "sdmtlver"
FOLD_BITS = {f"FOLD_{ch.upper()}": (getattr(BITS, f"FOLD_{ch.upper()}"), ch) for ch in FOLD_LETTERS}
# The table is uint16 with one bit each; the fold test ``fold_bits & (fold_bits - 1)``
# below reads the fold bits as the high byte.
_ALL_BITS = [bit for bit, _ in CLASS_BITS.values()] + [bit for bit, _ in FOLD_BITS.values()]
assert all(0 < b <= 0xFFFF and b & (b - 1) == 0 for b in _ALL_BITS), "a bit is not one uint16 bit"
assert len(set(_ALL_BITS)) == len(_ALL_BITS), "two classes share a bit"
assert all(bit >= 0x100 for bit, _ in FOLD_BITS.values()), "FOLD_* bits must be the high byte"
assert all(bit < 0x100 for bit, _ in CLASS_BITS.values()), "CLS_* bits must be the low byte"


def all_code_points_text() -> str:
    """Every code point 0..0x10FFFF, lone surrogates included, as one str."""
    return "".join(map(chr, range(MAX_CODE_POINT + 1)))


def probe(pattern: str, text: str) -> np.ndarray:
    """Boolean mask over code points matched by a one-character ``pattern``."""
    compiled = regex.compile(pattern)
    mask = np.zeros(MAX_CODE_POINT + 1, dtype=bool)
    for match in compiled.finditer(text):
        if match.end() - match.start() != 1:
            raise AssertionError(f"{pattern!r} matched {match.end() - match.start()} chars")
        mask[match.start()] = True
    return mask


def build_class_array() -> tuple[np.ndarray, dict[str, list[int]]]:
    """Probe every class; return the flat uint16 class array and fold lists."""
    text = all_code_points_text()
    classes = np.zeros(MAX_CODE_POINT + 1, dtype=np.uint16)
    masks = {}
    for name, (bit, pattern) in CLASS_BITS.items():
        masks[name] = probe(pattern, text)
        classes[masks[name]] |= bit

    # The kernel derives the patterns' negated sets from the bits above.  Check
    # that regex computes them as plain complements of the union.
    crlf = np.zeros(MAX_CODE_POINT + 1, dtype=bool)
    crlf[[0x0D, 0x0A]] = True
    not_ws_l_n = probe(r"[^\s\p{L}\p{N}]", text)
    expected = ~(masks["CLS_WS"] | masks["CLS_L"] | masks["CLS_N"])
    assert np.array_equal(not_ws_l_n, expected), r"[^\s\p{L}\p{N}] is not a complement"
    not_crlf_l_n = probe(r"[^\r\n\p{L}\p{N}]", text)
    expected = ~(crlf | masks["CLS_L"] | masks["CLS_N"])
    assert np.array_equal(not_crlf_l_n, expected), r"[^\r\n\p{L}\p{N}] is not a complement"
    assert np.array_equal(probe(r"\S", text), ~masks["CLS_WS"]), r"\S is not the complement of \s"
    assert masks["CLS_WS"][[0x0D, 0x0A, 0x20]].all()

    # Case-insensitive contraction letters: probe the literals used by the
    # patterns and also the cl100k set [sdmt] (sets and literals fold through
    # different code paths in regex, so both are checked).
    fold_lists: dict[str, list[int]] = {}
    for name, (bit, letter) in FOLD_BITS.items():
        mask = probe(f"(?i:{letter})", text)
        classes[mask] |= bit
        fold_lists[letter] = [int(cp) for cp in np.flatnonzero(mask)]
    set_mask = probe(r"(?i:[sdmt])", text)
    literal_union = np.zeros_like(set_mask)
    for letter in "sdmt":
        literal_union[fold_lists[letter]] = True
    assert np.array_equal(set_mask, literal_union), "(?i:[sdmt]) differs from its literals"
    apostrophe = np.flatnonzero(probe("(?i:')", text))
    assert apostrophe.tolist() == [0x27], "something besides U+0027 matches (?i:')"

    # Facts the kernel's matchers rely on.
    fold_bits = (classes >> 8).astype(np.uint8)
    # One contraction letter per code point, so contraction alternatives never overlap.
    assert not np.any(fold_bits & (fold_bits - 1)), "a code point folds to two contraction letters"
    # Letter, number and whitespace are disjoint (each char has one "kind").
    kinds = masks["CLS_L"].astype(int) + masks["CLS_N"] + masks["CLS_WS"]
    assert kinds.max() == 1, "L, N and \\s overlap"
    # Every o200k letter is UPPERISH or LOWERISH, so some alternative consumes it.
    assert not np.any(masks["CLS_L"] & ~(masks["CLS_UPPERISH"] | masks["CLS_LOWERISH"]))
    return classes, fold_lists


def two_level(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate 256-entry blocks; blocks numbered in first-seen order."""
    blocks = classes.reshape(N_BLOCKS, BLOCK_SIZE)
    index_of: dict[bytes, int] = {}
    stage1 = np.zeros(N_BLOCKS, dtype=np.uint16)
    unique = []
    for b in range(N_BLOCKS):
        key = blocks[b].tobytes()
        if key not in index_of:
            index_of[key] = len(unique)
            unique.append(blocks[b])
        stage1[b] = index_of[key]
    stage2 = np.concatenate(unique).astype(np.uint16)
    assert np.array_equal(stage2.reshape(-1, BLOCK_SIZE)[stage1].reshape(-1), classes)
    return stage1, stage2


def rle_encode(values: np.ndarray) -> bytes:
    """Run-length encode uint16 values as little-endian (uint16 value, uint16 run) pairs."""
    values = values.astype(np.uint16)
    change = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], change])
    lengths = np.diff(np.concatenate([starts, [len(values)]]))
    pairs = []
    for start, length in zip(starts.tolist(), lengths.tolist()):
        while length > 0:
            run = min(length, 0xFFFF)
            pairs.append((int(values[start]), run))
            length -= run
    return np.array(pairs, dtype="<u2").tobytes()


def rle_decode(payload: bytes) -> np.ndarray:
    pairs = np.frombuffer(payload, dtype="<u2").reshape(-1, 2)
    return np.repeat(pairs[:, 0], pairs[:, 1].astype(np.int64)).astype(np.uint16)


def b64_literal(name: str, payload: bytes) -> str:
    encoded = base64.b64encode(payload).decode("ascii")
    lines = textwrap.wrap(encoded, 76)
    body = "\n".join(f'    "{line}"' for line in lines)
    return f"{name} = (\n{body}\n)\n"


def render(stage1: np.ndarray, stage2: np.ndarray, fold_lists: dict[str, list[int]]) -> str:
    stage1_rle = rle_encode(stage1)
    stage2_rle = rle_encode(stage2)
    assert np.array_equal(rle_decode(stage1_rle), stage1)
    assert np.array_equal(rle_decode(stage2_rle), stage2)

    out = []
    out.append(
        "# This file is GENERATED by tools/gen_unicode_tables.py -- do not edit by hand.\n"
        "# Regenerate with:  python tools/gen_unicode_tables.py\n"
        f"# Probed with regex {regex.__version__}.\n"
    )
    out.append(
        'r"""Unicode class tables for the Numba pre-tokenizer, probed from ``regex``.\n'
        "\n"
        "Two-level lookup of a uint16 bitmask for code point ``cp``::\n"
        "\n"
        "    stage2[stage1[cp >> 8] * 256 + (cp & 0xFF)]\n"
        "\n"
        "Class bits say which character classes of the named patterns match the\n"
        "code point; ``FOLD_*`` bits say which contraction letter it matches\n"
        "under ``(?i:...)``.  Negated classes are complements: ``[^\\s\\p{L}\\p{N}]``\n"
        "is ``not (CLS_WS | CLS_L | CLS_N)`` and ``[^\\r\\n\\p{L}\\p{N}]`` is\n"
        "``not (CLS_L | CLS_N)`` minus CR and LF (both verified by the generator).\n"
        '"""\n'
    )
    out.append("import base64\n\nimport numpy as np\n\n")
    out.append(
        "# The bits (CLS_* character classes, FOLD_* contraction letters) are defined in the\n"
        "# kernel module, which the scanner compiles in; re-exported for the table's readers.\n"
        f"from {CLASSES_MODULE} import (  # noqa: F401\n"
    )
    for name in sorted([*CLASS_BITS, *FOLD_BITS]):
        out.append(f"    {name},\n")
    out.append(")\n\n")
    out.append(f'REGEX_VERSION = "{regex.__version__}"\n')
    out.append(f"MAX_CODE_POINT = 0x{MAX_CODE_POINT:X}\n")
    out.append(f"BLOCK_SIZE = {BLOCK_SIZE}\n")
    out.append(f"N_STAGE1 = {len(stage1)}\n")
    out.append(f"N_UNIQUE_BLOCKS = {len(stage2) // BLOCK_SIZE}\n")
    out.append("\n# Code points matched by (?i:x) for each contraction letter x.\n")
    out.append("CASE_INSENSITIVE_MATCHES = {\n")
    for letter in FOLD_LETTERS:
        cps = ", ".join(f"0x{cp:04X}" for cp in fold_lists[letter])
        out.append(f'    "{letter}": ({cps},),\n')
    out.append("}\n\n")
    out.append("# (uint16 value, uint16 run length) little-endian pairs, base64.\n")
    out.append(b64_literal("_STAGE1_RLE", stage1_rle))
    out.append(b64_literal("_STAGE2_RLE", stage2_rle))
    out.append(
        "\n\n"
        "def _rle_decode(text):\n"
        "    pairs = np.frombuffer(base64.b64decode(text), dtype=\"<u2\").reshape(-1, 2)\n"
        "    return np.repeat(pairs[:, 0], pairs[:, 1].astype(np.int64)).astype(np.uint16)\n"
        "\n\n"
        "def load_class_table():\n"
        '    """Decode the two-level class table.\n'
        "\n"
        "    Returns\n"
        "    -------\n"
        "    stage1 : numpy.ndarray\n"
        "        ``uint16[4352]``, C-contiguous: block index of each 256-code-point block.\n"
        "    stage2 : numpy.ndarray\n"
        "        ``uint16[N_UNIQUE_BLOCKS * 256]``, C-contiguous: class bitmask of each\n"
        "        code point within the unique blocks.\n"
        '    """\n'
        "    stage1 = _rle_decode(_STAGE1_RLE)\n"
        "    stage2 = _rle_decode(_STAGE2_RLE)\n"
        "    assert stage1.shape == (N_STAGE1,) and stage2.shape == (N_UNIQUE_BLOCKS * BLOCK_SIZE,)\n"
        "    return np.ascontiguousarray(stage1), np.ascontiguousarray(stage2)\n"
    )
    return "".join(out)


def generate() -> str:
    classes, fold_lists = build_class_array()
    stage1, stage2 = two_level(classes)
    return render(stage1, stage2, fold_lists)


def main(argv: list[str] | None = None) -> int:
    default = Path(__file__).resolve().parents[1] / "fastbpe_nb" / "unicode_tables.py"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=default, help=f"default: {default}")
    args = parser.parse_args(argv)
    source = generate()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(source.encode("utf-8"))
    print(f"wrote {args.output} ({len(source)} bytes, regex {regex.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
