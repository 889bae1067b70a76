"""Encoding blocks that pre-tokenize their own documents (``Encoder.run_scanning``: the
encode kernels with a ``scan_id``) against the two-step path they replace for plain
batches (``pretokenize.piece_offsets``, then ``Encoder.run`` on the pieces): the same ids
and offsets, on every scanner pattern, at every chunk size (a chunk may end anywhere a
piece ends), on one thread and two, with the piece cache cold and warm, under dropout,
on Arrow arrays (sliced, with nulls and invalid UTF-8) and in a forked child; and against
tiktoken on the real cl100k_base ranks."""

import os
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import _scanner, pretokenize

from fbtest import NOJIT, spaced_word_corpus

TRAIN = spaced_word_corpus(5) + [
    "It's 2024: naïve café, Привет мир! 東京は日本の首都です。\n\n  indented\tcode(x) = y;",
    "don't won't I'm we've 12345 67 8.9 !!! ??? ... \r\n\r\n   \n",
] * 8
PATTERNS = ("gpt2", "cl100k", "o200k", "superbpe")

pieces_of_text = st.sampled_from(
    list("ab c\n\t1.'é中!") + ["  ", "\r\n", "'s", "'T", "123456", "\U0001F600", "Привет",
                                 " ab", "\n\n  ", "   x"])
docs_strategy = st.lists(st.lists(pieces_of_text, max_size=30).map("".join), max_size=10)


@pytest.fixture(scope="module", params=PATTERNS)
def tok(request):
    if request.param == "superbpe":
        return fb.train(TRAIN, vocab_size=420, superbpe_transition=340)
    return fb.train(TRAIN, vocab_size=400, pattern=request.param)


def as_rows(docs):
    raw = [d if isinstance(d, bytes) else d.encode("utf-8") for d in docs]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offsets


def given_pieces(enc, data, doc_offsets, n_threads, dropout=0.0, seed=0):
    """The path a plain batch took before: all its pieces, then the kernel on them."""
    pieces, doc_pieces = pretokenize.piece_offsets(data, doc_offsets, enc.level.pattern,
                                                   n_threads)
    return enc.run((data, pieces, np.zeros(0, np.int32), doc_pieces), n_threads, dropout, seed)


def assert_same(a, b):
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_every_trained_pattern_is_scanned_by_the_kernel(tok):
    assert tok._encoder.scanner == pretokenize.scanner_name(tok._encoder.level.pattern)
    assert tok._encoder.scanner is not None


@settings(max_examples=150 if not NOJIT else 15, deadline=None)
@given(docs=docs_strategy, chunk=st.sampled_from([1, 2, 7, 64, 1 << 16]),
       n_threads=st.sampled_from([1, 2]), cold=st.booleans())
def test_scanning_blocks_equal_the_given_pieces(tok, docs, chunk, n_threads, cold):
    enc = tok._encoder
    data, offsets = as_rows(docs)
    want = given_pieces(enc, data, offsets, n_threads)
    if cold:
        tok.piece_cache.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_scanner, "ENCODE_CHUNK_BYTES", chunk)
        got = enc.run_scanning(data, offsets, n_threads)
    assert_same(got, want)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_long_pieces_and_long_documents(tok, n_threads):
    # Pieces far longer than a chunk or a scan window (runs of spaces, digits, one word),
    # whole documents over a chunk, empty ones, and invalid UTF-8 bytes (each its own
    # "other" character), side by side in one batch.
    rng = random.Random(3)
    words = [w for w in " ".join(TRAIN).split(" ") if w]
    docs = [" " * 200_000 + "x", "7" * 70_000, "", "ab" * 40_000,
            " ".join(rng.choice(words) for _ in range(30_000)),
            b"\xff\xfe ok \xc3 \xe6\x9d broken \x80\x80 end",
            "\n" * 5000 + "\t" * 5000, "é" * 50_000]
    data, offsets = as_rows(docs)
    want = given_pieces(tok._encoder, data, offsets, n_threads)
    for chunk in (5, 1 << 16):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_scanner, "ENCODE_CHUNK_BYTES", chunk)
            assert_same(tok._encoder.run_scanning(data, offsets, n_threads), want)


@settings(max_examples=40 if not NOJIT else 8, deadline=None)
@given(docs=docs_strategy, seed=st.integers(0, 2**31 - 1), n_threads=st.sampled_from([1, 2]))
def test_dropout_draws_are_the_same(tok, docs, seed, n_threads):
    enc = tok._encoder
    data, offsets = as_rows(docs)
    want = given_pieces(enc, data, offsets, n_threads, dropout=0.3, seed=seed)
    assert_same(enc.run_scanning(data, offsets, n_threads, dropout=0.3, seed=seed), want)


def test_arrow_rows_sliced_with_nulls_and_invalid_utf8(tok):
    # Arrow rows are bytes (invalid UTF-8 is kept, as encode_bytes keeps it); a sliced
    # array's offsets do not start at 0; null rows are invalid and have no ids.
    array = pa.array(TRAIN[-6:] + [None, "", "tail  x"] * 3, pa.string()).slice(2)
    bad = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(
        np.array([0, 4, 9, 9], np.int32).tobytes()), pa.py_buffer(b"ab\xffcd \x80\x81e")])
    for arr in (array, bad):
        rows = arr.cast(pa.binary()).to_pylist()
        want = [list(tok.encode_bytes(r or b"")) for r in rows]
        for n_threads in (1, 2):
            ids, offsets, valid = tok.encode_batch_flat(arr, n_threads, disallowed_special=())
            assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want
            assert valid.tolist() == [r is not None for r in rows]


def test_lists_of_str_take_the_scanning_path_and_agree(tok):
    docs = TRAIN[-4:] + ["", "x"]
    want = [tok.encode(d) for d in docs]
    assert tok.encode_batch(docs, num_threads=2) == want
    assert tok.encode_ordinary_batch(docs) == want


def test_the_kernel_refuses_special_tokens_when_scanning(tok):
    # Special tokens are cut out before scanning: the kernel checks that it was given
    # none rather than index arrays it was not meant to read.
    from fastbpe_nb._scanner import encode_scan_args, read_only

    enc = tok._encoder
    data, offsets = as_rows(["ab c"])
    empty = read_only(np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="scanning blocks"):
        enc._call(read_only(data), empty, read_only(np.zeros(3, np.int32)), empty,
                  encode_scan_args(enc.scanner, offsets), 1, 0.0, 0)
    assert tok.encode("ab c") == tok.encode_batch(["ab c"])[0]  # the cache is usable after


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_scans_with_the_serial_kernel(tok):
    docs = pa.array(TRAIN * 4)
    want = tok.encode_batch_flat(docs, 2, disallowed_special=())  # the pool starts here
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, never return into pytest
        try:
            got = tok.encode_batch_flat(docs, 2, disallowed_special=())
            same = all(np.array_equal(a, b) for a, b in zip(got, want))
            os.write(write, b"ok" if same else b"differ")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 100)
    os.close(read)
    assert status == 0 and message == b"ok", message
