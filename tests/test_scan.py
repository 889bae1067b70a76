"""Differential tests: the Numba pre-tokenizer against ``regex.findall``.

Acceptance is zero differences: for every pattern the scanner's pieces must
equal ``[p.encode() for p in regex.findall(pattern, text)]`` byte for byte.
Runs under ``NUMBA_DISABLE_JIT=1`` too, with smaller sizes.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastbpe_nb._scanner import scan_offsets, split
from fastbpe_nb.pretokenize import SCANNED_PATTERNS

REPO = Path(__file__).resolve().parents[1]
CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
NOJIT = os.environ.get("NUMBA_DISABLE_JIT") == "1"

N_EXAMPLES = 300 if NOJIT else 500
CORPUS_BYTES = 100_000 if NOJIT else None  # None: whole file
#: The scanner's patterns by its names: the named ones and SuperBPE's stage 2 ("superbpe").
SCANNED = SCANNED_PATTERNS
PATTERN_NAMES = sorted(SCANNED)
COMPILED = {name: regex.compile(pattern) for name, pattern in SCANNED.items()}

# Characters that exercise every branch and class boundary of the patterns.
HARD_CHARS = (
    list("'sStTdDmMlLvVeErR")
    + ["\u017f", "\u212a"]  # LONG S matches (?i:s); KELVIN SIGN folds to k
    + list("aZ \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85/!.,;-_(")
    + ["\u00a0", "\u3000", "\u2028", "\u2029", "\u200b", "\u1680", "\u202f"]
    + ["\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u05d0", "\u4e2d", "\u0436", "\u0416"]  # Ll Lu Lt Lm Lo
    + ["\u0301", "\u0903", "\u20dd", "\u0489"]  # Mn Mc Me
    + list("0123456789")
    + ["\u0660", "\u0969", "\uff11", "\u00b2", "\u2163", "\u00bd", "\U0001d7ce"]  # Nd Nl No
    + ["\U0001f600", "\u200d", "\U0001f468", "\ufe0f", "\U0001f3fd"]  # emoji, ZWJ, VS16, skin tone
    + ["\U00010400", "\U00010428", "\ufffd", "\x00", "\x7f"]
)
FRAGMENTS = [
    "'s", "'S", "'t", "'re", "'RE", "'Re", "'ve", "'vE", "'m", "'ll", "'Ll", "'LL", "'d", "'D",
    "'\u017f", "'x", "''", " '", "I'm", "DON'T", "they'Re", " \n", "\n ", " \r\n", "\r\n", "\n\n",
    "  ", "\t\n", "\u00a0\n", "123", "1234567", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "e\u0301", "\u0301\u0301A", "A\u0301b", "HTTPServer", "CamelCase", "//", "\n/", "!\n/\n",
    "\u4e2d\u6587\uff0c", "\u0416\u0436", "x'\u017f",
]
hard_text = st.lists(
    st.one_of(
        st.sampled_from(HARD_CHARS),
        st.sampled_from(FRAGMENTS),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
).map("".join)
# End-of-text cases matter for $ and (?!\S): append a mixed whitespace tail.
tail = st.sampled_from(["", " ", "\n", " \n", "\n ", " \r\n", "\r\n ", "  ", "\t", "\u3000", "\n\n "])
texts = st.builds(lambda body, end: body + end, hard_text, tail)

HYPOTHESIS = settings(
    max_examples=N_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pieces_of(data: bytes, piece_offsets: np.ndarray, lo: int, hi: int) -> list[bytes]:
    bounds = piece_offsets[lo : hi + 1].tolist()
    return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def expected_pieces(name: str, text: str, errors: str = "strict") -> list[bytes]:
    found = COMPILED[name].findall(text)
    # The scanner returns boundaries, which is only faithful if findall
    # never skips a character: check that claim on every input.
    assert "".join(found) == text, "findall left characters unmatched"
    return [p.encode("utf-8", errors) for p in found]


def assert_matches_regex(name: str, text: str) -> None:
    data = text.encode("utf-8")
    piece_offsets, doc_piece_offsets = scan_offsets(data, None, name)
    assert piece_offsets.dtype == np.int64 and doc_piece_offsets.dtype == np.int64
    assert doc_piece_offsets.tolist() == [0, len(piece_offsets) - 1]
    assert pieces_of(data, piece_offsets, 0, len(piece_offsets) - 1) == expected_pieces(name, text)


def assert_batch_matches_regex(name: str, docs: list[bytes], errors: str = "strict") -> None:
    data = b"".join(docs)
    doc_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    doc_offsets[1:] = np.cumsum([len(d) for d in docs])
    piece_offsets, doc_piece_offsets = scan_offsets(data, doc_offsets, name)
    assert len(doc_piece_offsets) == len(docs) + 1
    assert piece_offsets[0] == 0 and piece_offsets[-1] == len(data)
    assert doc_piece_offsets[-1] == len(piece_offsets) - 1
    for d, doc in enumerate(docs):
        lo, hi = int(doc_piece_offsets[d]), int(doc_piece_offsets[d + 1])
        assert piece_offsets[lo] == doc_offsets[d]
        text = doc.decode("utf-8", errors)
        assert pieces_of(data, piece_offsets, lo, hi) == expected_pieces(name, text, errors), d


# (a) hypothesis strings weighted toward the hard cases ----------------------


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=texts)
def test_hypothesis_matches_regex(name, text):
    assert_matches_regex(name, text)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\n",
        "a \n",
        "a \n ",
        " \r\n",
        "\n \n",
        "  \tword",
        "Hello world's 'LL 'll 'Ve x'\u017f I'M",
        "HeLLo HTTPServer CamelCase \u01c5ab",
        "\u0301A \u0301\u0301 e\u0301 A\u0301b",
        "\u4e2d\u6587\uff0c\u6d4b\u8bd5\u3002",
        "12345 \u0661\u0662\u0663\u0664 \u00b2\u00b3 \u2163\u2164",
        "!!\n/\n/x ?!\r\n\r\n",
        "\u00a0a \u3000b\u200bc \x1c d \x85e",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467 ok \U0001f600\U0001f600",
        "def f(x):\n    return x  # c\n\n\n",
    ],
)
def test_examples_match_regex(name, text):
    assert_matches_regex(name, text)
    assert split(text, name) == COMPILED[name].findall(text)


# (b) shared corpora, whole files and line batches --------------------------


def corpus_files() -> list[Path]:
    if not CORPORA.is_dir():
        return []
    return sorted(CORPORA.glob("*.txt"))


@pytest.fixture(params=corpus_files() or [None], ids=lambda p: p.name if p else "absent")
def corpus(request) -> bytes:
    if request.param is None:
        pytest.skip(f"{CORPORA} is absent (the shared corpora exist only on the team's machines)")
    data = request.param.read_bytes()
    if CORPUS_BYTES is not None:
        data = data[: data.rfind(b"\n", 0, CORPUS_BYTES) + 1]
    return data


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_corpus_whole_file(name, corpus):
    assert_matches_regex(name, corpus.decode("utf-8"))


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_corpus_lines_as_documents(name, corpus):
    assert_batch_matches_regex(name, corpus.splitlines(keepends=True))


# (c) invalid UTF-8 ------------------------------------------------------------


def test_regex_classifies_escaped_bytes_as_other():
    # The invalid-byte policy ("one 'other' char per byte") equals
    # surrogateescape decoding only if regex sees U+DC80..U+DCFF as other.
    for cp in range(0xDC80, 0xDD00):
        ch = chr(cp)
        for cls in (r"\p{L}", r"\p{N}", r"\s", r"\p{M}"):
            assert not regex.fullmatch(cls, ch), (hex(cp), cls)
        assert regex.fullmatch(r"[^\s\p{L}\p{N}]", ch)


VALID_BYTES = [t.encode() for t in ["a", " ", "'", "s", "\n", "\u00e9", "\u4e2d", "\U0001f600", "1", "'s"]]
INVALID_BYTES = [
    b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\x81", b"\xc3", b"\xe2\x82", b"\xe0\x80\xaf", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xfe",
    b"\xf0\x9f\x98", b"\xe2", b"\xc2\x20",
]
messy_bytes = st.lists(
    st.one_of(st.sampled_from(VALID_BYTES), st.sampled_from(INVALID_BYTES), st.binary(max_size=4)),
    max_size=30,
).map(b"".join)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(docs=st.lists(messy_bytes, max_size=4))
def test_invalid_utf8_follows_policy(name, docs):
    # Documents are scanned separately, so a sequence cut by a document
    # boundary is invalid on both sides, exactly like decoding each alone.
    assert_batch_matches_regex(name, docs, errors="surrogateescape")


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_truncated_sequence_at_document_end(name):
    euro = "\u20ac".encode()
    assert_batch_matches_regex(name, [b"ab" + euro[:2], euro[2:] + b"cd", euro[:1]], errors="surrogateescape")


# (d) the committed table is what the generator produces ----------------------


def test_unicode_table_is_regenerated_identically(tmp_path):
    from fastbpe_nb import unicode_tables

    assert unicode_tables.REGEX_VERSION == regex.__version__, (
        f"fastbpe_nb/unicode_tables.py was probed with regex {unicode_tables.REGEX_VERSION}, "
        f"installed is {regex.__version__}: run python tools/gen_unicode_tables.py"
    )
    out = tmp_path / "unicode_tables.py"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_unicode_tables.py"), "--output", str(out)],
        check=True,
        capture_output=True,
    )
    assert filecmp.cmp(out, REPO / "fastbpe_nb" / "unicode_tables.py", shallow=False)


def test_unicode_table_shape_and_small_file():
    from fastbpe_nb import unicode_tables

    stage1, stage2 = unicode_tables.load_class_table()
    assert stage1.dtype == np.uint16 and stage1.shape == (0x110000 // 256,)
    assert stage2.dtype == np.uint16 and stage2.shape[0] % 256 == 0
    assert int(stage1.max()) * 256 < stage2.shape[0]
    assert (REPO / "fastbpe_nb" / "unicode_tables.py").stat().st_size < 200_000
    assert unicode_tables.CASE_INSENSITIVE_MATCHES["s"] == (0x53, 0x73, 0x17F)


# (e) multi-document batches --------------------------------------------------


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(docs=st.lists(st.one_of(st.just(""), texts), max_size=6))
def test_batches_match_per_document_findall(name, docs):
    assert_batch_matches_regex(name, [d.encode() for d in docs])


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(docs=st.lists(st.one_of(st.just(""), texts), max_size=4), window=st.integers(1, 12))
def test_tiny_decode_windows_give_the_same_boundaries(name, docs, window):
    # Long documents are decoded through a window that is refilled (and grown
    # when one piece does not fit); tiny windows put every piece across a cut.
    from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
    from fastbpe_nb.kernels.scan import STREAM_BYTES, scan_batch

    encoded = [d.encode() for d in docs]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    doc_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    doc_offsets[1:] = np.cumsum([len(d) for d in encoded])
    stage1, stage2 = class_table()
    expected = scan_offsets(data, doc_offsets, name)
    got = scan_batch(data, doc_offsets, PATTERN_IDS[name], stage1, stage2,
                     scanner_tables(), window, STREAM_BYTES)
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tolist() == expected[1].tolist()


RUN_CHARS = [" ", "\n", "\r\n", "\t", "a", "s", "S", "x", "X", "1", "\u4e2d", "\U0001F600",
             "'", ".", "\u3000", "\x00", "\u0301"]
run_texts = st.one_of(
    st.lists(st.tuples(st.sampled_from(RUN_CHARS), st.integers(1, 70)),
             min_size=1, max_size=8).map(lambda parts: "".join(c * k for c, k in parts)),
    # Mixed-case letters: one stretch for gpt2 and cl100k, many pieces for o200k.
    st.text(alphabet="aAsStTxX\u00e9\u00c9'", min_size=10, max_size=200),
)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=run_texts, window=st.integers(8, 48))
def test_long_runs_through_small_windows_match_regex(name, text, window):
    # A piece longer than the decode window ending in a run of one class of character is
    # matched on a shortened copy of the run (_first_piece_shortened); windows of 8-48
    # bytes against runs of up to 70 characters take that path again and again.
    from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
    from fastbpe_nb.kernels.scan import STREAM_BYTES, scan_batch

    data = np.frombuffer(text.encode(), dtype=np.uint8)
    doc_offsets = np.array([0, len(data)], dtype=np.int64)
    stage1, stage2 = class_table()
    got, _ = scan_batch(data, doc_offsets, PATTERN_IDS[name], stage1, stage2,
                         scanner_tables(), window, STREAM_BYTES)
    assert pieces_of(data.tobytes(), got, 0, len(got) - 1) == expected_pieces(name, text)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=run_texts, window=st.integers(8, 24), stream=st.integers(1, 9))
def test_long_runs_streamed_in_tiny_chunks_match_regex(name, text, window, stream):
    # The rest of a long run is streamed over ``stream_bytes`` at a time (an argument of
    # the kernels, STREAM_BYTES in production): chunks of 1-9 bytes cut every run, and
    # multi-byte characters, at every place.
    from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
    from fastbpe_nb.kernels.scan import scan_batch, scan_prefix

    data = np.frombuffer(text.encode(), dtype=np.uint8)
    doc_offsets = np.array([0, len(data)], dtype=np.int64)
    stage1, stage2 = class_table()
    got, _ = scan_batch(data, doc_offsets, PATTERN_IDS[name], stage1, stage2, scanner_tables(),
                        window, stream)
    assert pieces_of(data.tobytes(), got, 0, len(got) - 1) == expected_pieces(name, text)
    whole, _ = scan_prefix(data, 0, len(data), len(data), PATTERN_IDS[name], stage1, stage2,
                           scanner_tables(), window, stream)
    assert whole.tolist() == got.tolist()


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=texts, steps=st.lists(st.integers(1, 9), min_size=1, max_size=40))
def test_scan_prefix_chains_to_the_whole_scan(name, text, steps):
    # A huge text is scanned a segment at a time (Tokenizer._encode_huge): chained
    # scan_prefix calls, whatever the limits, give exactly the pieces of one whole scan.
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    if len(data) == 0:
        return
    assert _chained_scan(data, steps, name) == scan_offsets(data, None, name)[0].tolist()


def _chained_scan(data, steps, name):
    """Piece boundaries of ``data`` from chained ``scan_prefix_offsets`` calls, the k-th
    with a limit ``steps[k % len(steps)]`` bytes ahead, each call checked on its own. Every
    other call passes one reused buffer (written to when a step is at most 64 bytes)."""
    from fastbpe_nb._scanner import prefix_buffer, scan_prefix_offsets

    buffer = prefix_buffer(64)
    got, start, k = [0], 0, 0
    while start < len(data):
        step = steps[k % len(steps)]
        if k % 2:
            pieces, end = scan_prefix_offsets(data, start, start + step, name, buffer)
            assert np.shares_memory(pieces, buffer) == (step <= 64)
        else:
            pieces, end = scan_prefix_offsets(data, start, start + step, name)
        assert pieces[0] == start and pieces[-1] == end > start
        assert end >= min(len(data), start + steps[k % len(steps)])
        got.extend(pieces[1:].tolist())
        start = end
        k += 1
    return got


def test_scan_prefix_validates_input():
    from fastbpe_nb._scanner import scan_prefix_offsets

    data = np.frombuffer(b"hello world", dtype=np.uint8)
    for start, limit in [(-1, 3), (11, 12), (3, 3)]:
        with pytest.raises(ValueError):
            scan_prefix_offsets(data, start, limit, "gpt2")
    for buffer in (np.empty(100, np.int32), np.empty(100, np.int64)[::2], [0] * 100,
                   np.empty(100, np.int64).view(np.int64).reshape(10, 10)):
        with pytest.raises(ValueError, match="buffer"):
            scan_prefix_offsets(data, 0, 5, "gpt2", buffer)
    frozen = np.empty(100, np.int64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="buffer"):
        scan_prefix_offsets(data, 0, 5, "gpt2", frozen)


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_batch_edge_cases(name):
    assert_batch_matches_regex(name, [])
    assert_batch_matches_regex(name, [b""])
    assert_batch_matches_regex(name, [b"", b"a ", b"", b" \n", b""])
    # A document that does not start at byte 0 of data.
    data = b"xx hello  world \n"
    piece_offsets, doc_piece_offsets = scan_offsets(data, np.array([3, 8, len(data)]), name)
    assert piece_offsets[0] == 3 and piece_offsets[-1] == len(data)
    first = pieces_of(data, piece_offsets, 0, int(doc_piece_offsets[1]))
    assert first == expected_pieces(name, "hello")


# front end ---------------------------------------------------------------------


def test_scan_offsets_validates_input():
    with pytest.raises(ValueError):
        scan_offsets(b"abc", np.array([0, 4]), "gpt2")
    with pytest.raises(ValueError):
        scan_offsets(b"abc", np.array([2, 1, 3]), "gpt2")
    with pytest.raises(ValueError):
        scan_offsets(b"abc", np.array([-1, 3]), "gpt2")
    with pytest.raises(ValueError):
        scan_offsets(b"abc", np.array([], dtype=np.int64), "gpt2")
    with pytest.raises(TypeError):
        scan_offsets(np.zeros(3, dtype=np.int32), None, "gpt2")
    with pytest.raises(ValueError):
        scan_offsets(b"abc", None, "p50k")
    # uint8 arrays and int32 offsets are accepted and converted.
    piece_offsets, _ = scan_offsets(np.frombuffer(b"a b", np.uint8), np.array([0, 3], np.int32), "gpt2")
    assert piece_offsets.tolist() == [0, 1, 3]


@pytest.mark.skipif(NOJIT, reason="compilation does not exist with NUMBA_DISABLE_JIT=1")
def test_import_compiles_nothing():
    code = (
        "import fastbpe_nb._scanner as s, fastbpe_nb.kernels.scan as k\n"
        "assert s._class_table is None\n"
        "assert not any(getattr(k, n).signatures for n in dir(k) if hasattr(getattr(k, n), 'signatures'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# (f) ASCII next to non-ASCII at every boundary ----------------------------------------
# A scanner that treats stretches of ASCII bytes specially must hand over exactly at the
# first character its match depends on that is not ASCII: lookaheads (\s+(?!\S)), the
# contractions, cl100k/o200k's optional prefix before letters, o200k's case rules and
# digit groups all straddle the boundary in these texts, in windows of 1-12 bytes.

ASCII_PARTS = [
    "a", "abc", "Ab", "ABC", "HTTPServer", "s", "'", "'s", "'S", "'ll", "'Re", "'ve", "x'",
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", " \n", "\x0b", "\x1c", "1", "12", "1234",
    "(", ".", "/", "//", "!\n", "_", "\x00", "\x7f",
]
NON_ASCII_PARTS = [
    "\u00e9", "\u00c9", "\u00fc", "\u0436", "\u0416", "\u4e2d", "\u3042", "\u01c5", "\u02b0",
    "\u0301", "\u0903", "\u0663", "\uff11", "\u00b2", "\u2163", "\u00a0", "\u3000", "\u2028",
    "\u0085", "\u200b", "\U0001f600", "\U00010428", "\u017f", "\u212a", "\u2019", "\uff0c",
]
boundary_texts = st.lists(
    st.one_of(st.sampled_from(ASCII_PARTS), st.sampled_from(NON_ASCII_PARTS)),
    max_size=24,
).map("".join)


def scan_with(data: np.ndarray, doc_offsets: np.ndarray, name: str, window: int,
              stream: int) -> tuple[np.ndarray, np.ndarray]:
    from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
    from fastbpe_nb.kernels.scan import scan_batch

    stage1, stage2 = class_table()
    return scan_batch(data, doc_offsets, PATTERN_IDS[name], stage1, stage2, scanner_tables(),
                      window, stream)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=boundary_texts, window=st.integers(1, 12), stream=st.integers(1, 9))
def test_ascii_next_to_non_ascii_matches_regex(name, text, window, stream):
    assert_matches_regex(name, text)
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    got, _ = scan_with(data, np.array([0, len(data)], dtype=np.int64), name, window, stream)
    assert pieces_of(data.tobytes(), got, 0, len(got) - 1) == expected_pieces(name, text)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=boundary_texts, window=st.integers(1, 12))
def test_documents_cut_at_every_byte_match_regex(name, text, window):
    # The text cut in two documents at every byte, each head followed in the batch by its
    # own tail: each run, lookahead and multi-byte character is cut by a document end at
    # every place, with the bytes that would complete it right behind the end (a cut
    # character is invalid UTF-8: one "other" byte per byte, as surrogateescape decodes it).
    encoded = text.encode()
    docs = [half for k in range(len(encoded) + 1) for half in (encoded[:k], encoded[k:])]
    assert_batch_matches_regex(name, docs, errors="surrogateescape")
    data = np.frombuffer(b"".join(docs), dtype=np.uint8)
    doc_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    doc_offsets[1:] = np.cumsum([len(d) for d in docs])
    expected = scan_offsets(data, doc_offsets, name)
    got = scan_with(data, doc_offsets, name, window, 4096)
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tolist() == expected[1].tolist()


ASCII_BYTES = [p.encode() for p in ASCII_PARTS]
mixed_invalid_bytes = st.lists(
    st.one_of(st.sampled_from(ASCII_BYTES), st.sampled_from(INVALID_BYTES),
              st.sampled_from([p.encode() for p in NON_ASCII_PARTS])),
    max_size=20,
).map(b"".join)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(docs=st.lists(mixed_invalid_bytes, max_size=4), window=st.integers(1, 12))
def test_ascii_next_to_invalid_utf8_follows_policy(name, docs, window):
    assert_batch_matches_regex(name, docs, errors="surrogateescape")
    data = np.frombuffer(b"".join(docs), dtype=np.uint8)
    doc_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    doc_offsets[1:] = np.cumsum([len(d) for d in docs])
    expected = scan_offsets(data, doc_offsets, name)
    got = scan_with(data, doc_offsets, name, window, 4096)
    assert got[0].tolist() == expected[0].tolist()


@pytest.mark.parametrize("name", PATTERN_NAMES)
@HYPOTHESIS
@given(text=boundary_texts, steps=st.lists(st.integers(1, 9), min_size=1, max_size=20))
def test_scan_prefix_across_ascii_boundaries_chains_to_the_whole_scan(name, text, steps):
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    if len(data) == 0:
        return
    got = _chained_scan(data, steps, name)
    assert got == scan_offsets(data, None, name)[0].tolist()
    assert pieces_of(data.tobytes(), np.array(got), 0, len(got) - 1) == expected_pieces(name, text)
