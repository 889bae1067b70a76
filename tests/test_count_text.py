"""Scanning and counting in one pass (``kernels.count.count_text_blocks`` and
``merge_text_blocks``, or ``block_rows``) against the
specification and against the two-step path (scan the whole batch, then count).

The one-pass kernel cuts a batch into blocks at document boundaries and at safe points
inside documents, scans each block a chunk at a time, counts into private tables of bounded
size (a full table resumes at the next piece in a serial round) and merges the tables in
block order. None of that may change a count, a first occurrence or the number of pieces:
hypothesis draws texts dense in what the cuts look at (newlines, ``/``, spaces, punctuation,
multi-byte characters) and the tunables down to one byte and one word.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastbpe_nb import pretokenize
from fastbpe_nb import reference as ref
from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
from fastbpe_nb.counting import WordCounter
from fastbpe_nb.kernels.count import (_plan_blocks, block_rows, count_text_blocks,
                                      first_round_rows, first_round_rows_serial,
                                      count_text_blocks_serial, joined_runs,
                                      joined_runs_serial, look_up_blocks,
                                      look_up_blocks_serial, merge_text_blocks)
from fastbpe_nb.kernels.scan import STREAM_BYTES, WINDOW_BYTES

from fbtest import NOJIT

#: The scanner's patterns: the named ones and SuperBPE's stage-2 regex (scanned, not named).
PATTERNS = ["gpt2", "cl100k", "o200k", pretokenize.SUPERBPE_PATTERN]
PATTERN_IDS_FOR_TESTS = [pretokenize.scanner_name(p) for p in PATTERNS]
EXAMPLES = 40 if NOJIT else 200
CORPORA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpora")

cut_heavy = st.text(alphabet=st.sampled_from(list("ab/.;X1 \n\n\n\r\t'é中😀") + ["\u00a0", "\u3000"]),
                    max_size=200)


def _batch(docs):
    raw = [d.encode("utf-8", "surrogatepass") for d in docs]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), np.uint8).copy(), offsets


def _state(counter):
    words, offsets, counts = counter.table()
    raw = words.tobytes()
    return ([raw[offsets[i]:offsets[i + 1]] for i in range(len(counts))], counts.tolist(),
            counter.n_pieces)


def _one_pass(data, offsets, pattern, n_blocks, block_words, chunk_bytes, serial=False,
              counter=None, start_slots=4096, keep_runs=False):
    """Call the kernels directly (any n_blocks), into ``counter`` (a fresh one by default):
    the words already in a non-empty table are looked up first, as ``add_batch`` does."""
    counter = counter or WordCounter(pattern)
    stage1, stage2 = class_table()
    kernel = count_text_blocks_serial if serial else count_text_blocks
    scan = (data, offsets, PATTERN_IDS[pretokenize.scanner_name(pattern)], stage1, stage2,
            scanner_tables(), WINDOW_BYTES, STREAM_BYTES, chunk_bytes, start_slots)
    runs = np.empty(2 * len(data), np.int32) if keep_runs else None
    bounds, done, *tables = kernel(*scan, n_blocks, block_words, runs)
    g_of = np.empty(n_blocks * block_words if keep_runs else 0, np.int32)
    known = np.empty(0, np.int64)
    if counter._n > 0:
        look_up = look_up_blocks_serial if serial else look_up_blocks
        known = look_up(data, done, block_words, tables[0], tables[1], tables[4], counter._keys,
                        counter._store, counter._off)
    (counter._keys, counter._store, counter._store_len, counter._off, counter._count,
     counter._first, counter._wkey, counter._n, n_pieces) = merge_text_blocks(
        data, offsets, bounds, done, *scan[2:], block_words, runs, g_of, *tables, known,
        counter.n_pieces,
        counter._keys, counter._store, counter._store_len, counter._off, counter._count,
        counter._first, counter._wkey, counter._n, np.array([-1, 0, 0], np.int64))
    counter.n_pieces += n_pieces
    if keep_runs:
        join = joined_runs_serial if serial else joined_runs
        counter._word_runs = (counter._word_runs or []) + [
            join(runs, bounds, done, int(offsets[0]), g_of, block_words)]
    return counter


def _two_step(data, offsets, pattern, counter=None):
    counter = counter or WordCounter(pattern)
    counter._add_pieces(data, pretokenize.piece_offsets(data, offsets, pattern)[0])
    return counter


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(cut_heavy, min_size=1, max_size=6), pattern=st.sampled_from(PATTERNS),
       n_blocks=st.integers(1, 9), block_words=st.integers(1, 40),
       chunk_bytes=st.integers(1, 80), serial=st.booleans(), split=st.integers(0, 6),
       small=st.booleans(), start_slots=st.sampled_from([2, 4, 64, 4096]))
def test_one_pass_matches_the_reference(docs, pattern, n_blocks, block_words, chunk_bytes,
                                        serial, split, small, start_slots):
    """In one or two batches (the second's words partly in the table: looked up first).
    ``small``: the global table starts at 2 slots, so it doubles (rehashing in slot order,
    clusters wrapping around its end) every few words. ``start_slots``: the private
    tables start that small, and double as often."""
    counter = None
    if small:
        counter = WordCounter(pattern)
        counter._keys = np.full(4, -1, np.int64)
    for batch in (docs[:split], docs[split:]):
        if batch:
            counter = _one_pass(*_batch(batch), pattern, n_blocks, block_words, chunk_bytes,
                                serial, counter, start_slots)
    want = ref.count_words(docs, pattern)
    words, counts, n_pieces = _state(counter)
    assert [w.decode() for w in words] == list(want)  # first-occurrence order
    assert counts == list(want.values())
    assert n_pieces == sum(want.values())


def _word_like(piece: bytes) -> bool:
    """A letter (ASCII, or any UTF-8 lead byte) first, or a space and then one."""
    b = piece[1] if piece[:1] == b" " and len(piece) > 1 else piece[0]
    return piece != b" " and (b >= 0xC0 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A)


def runs_by_hand(batches, pattern, special_tokens=()):
    """The runs of two word-like pieces or more, as bytes, from the reference's pieces of
    each document (cut at special tokens as counting cuts them): what
    ``WordCounter(keep_runs=True).word_runs()`` names."""
    runs = []
    for docs in batches:
        for doc in docs:
            run = []
            for segment, is_special in ref.split_special_tokens(doc, special_tokens):
                pieces = [] if is_special else ref.pretokenize(segment, pattern)
                for piece in [p.encode("utf-8", "surrogatepass") for p in pieces] + [None]:
                    if piece is not None and _word_like(piece):
                        run.append(piece)
                        continue
                    if len(run) >= 2:
                        runs.append(run)
                    run = []
    return runs


def runs_as_bytes(counter):
    """``counter.word_runs()`` with each word index replaced by the word's bytes."""
    store, offsets = counter.indexed_words()
    raw = store.tobytes()
    runs, run = [], []
    for w in counter.word_runs().tolist():
        if w < 0:
            assert len(run) >= 2  # only runs of two or more are kept
            runs.append(run)
            run = []
        else:
            run.append(raw[offsets[w]:offsets[w + 1]])
    assert run == []  # every run is closed
    return runs


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(cut_heavy, min_size=1, max_size=6), pattern=st.sampled_from(PATTERNS),
       n_blocks=st.integers(1, 9), block_words=st.integers(1, 40),
       chunk_bytes=st.integers(1, 80), serial=st.booleans(), split=st.integers(0, 6),
       start_slots=st.sampled_from([2, 4096]))
def test_kept_runs_are_the_pieces_runs(docs, pattern, n_blocks, block_words, chunk_bytes,
                                       serial, split, start_slots):
    """``keep_runs``: the counting pass also writes the runs of word-like pieces, as the
    global table's word indices, whatever the blocks, the chunks, private tables that fill
    up (a block resumes in further rounds, whose indices are another table's) and a second
    batch whose words are partly in the table. The counts are unchanged."""
    counter = None
    batches = [b for b in (docs[:split], docs[split:]) if b]
    for batch in batches:
        counter = _one_pass(*_batch(batch), pattern, n_blocks, block_words, chunk_bytes,
                            serial, counter, start_slots, keep_runs=True)
    assert runs_as_bytes(counter) == runs_by_hand(batches, pattern)
    want = ref.count_words(docs, pattern)
    words, counts, n_pieces = _state(counter)
    assert [w.decode() for w in words] == list(want) and counts == list(want.values())


def _real_documents():
    """KJV, Russian and Chinese prose from the shared corpora and Python source code, in
    documents of 20 k characters."""
    import argparse
    import inspect
    import typing

    texts = [inspect.getsource(argparse), inspect.getsource(typing)]
    for name, size in (("kjv.txt", 300_000), ("fortunes_ru.txt", 100_000),
                       ("fortunes_zh.txt", 60_000)):
        path = os.path.join(CORPORA, name)
        if not os.path.exists(path):
            pytest.skip("../shared/corpora is not here")
        texts.append(open(path, encoding="utf-8").read()[:size])
    return [t[i:i + 20_000] for t in texts for i in range(0, len(t), 20_000)]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
@pytest.mark.parametrize("block_words", [None, 500])
def test_kept_runs_through_add_batch_on_real_text(pattern, block_words):
    """``WordCounter(keep_runs=True)`` over two batches of real prose and code (several
    blocks each, two threads; ``block_words=500``: the private tables fill up and blocks
    resume): the runs found by hand, and the same table as without them."""
    texts = _real_documents()
    batches = [texts[:len(texts) // 2], texts[len(texts) // 2:]]
    kept = WordCounter(pattern, num_threads=2, keep_runs=True)
    plain = WordCounter(pattern, num_threads=2)
    for counter in (kept, plain):
        counter.block_words = block_words or counter.block_words
        for batch in batches:
            counter.add_texts(batch)
    got = runs_as_bytes(kept)
    assert got == runs_by_hand(batches, pattern) and len(got) > 10_000
    assert all(np.array_equal(a, b) for a, b in zip(kept.table(), plain.table()))


def test_keep_runs_is_refused_where_it_cannot_be_kept():
    with pytest.raises(ValueError, match="keep_runs"):
        WordCounter(r"\S+", keep_runs=True)  # no scanner: pieces come from the regex
    with pytest.raises(ValueError, match="keep_runs"):
        WordCounter("gpt2", merge_blocks=False, keep_runs=True)
    counter = WordCounter("gpt2", keep_runs=True)
    counter.memory_check = lambda need: None
    with pytest.raises(ValueError, match="memory budget"):
        counter.add_texts(["some words here"])
    with pytest.raises(ValueError, match="keep_runs"):
        WordCounter("gpt2").word_runs()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(cut_heavy, min_size=1, max_size=6), pattern=st.sampled_from(PATTERNS),
       n_blocks=st.integers(1, 9), block_words=st.integers(1, 40),
       chunk_bytes=st.integers(1, 80), start_slots=st.sampled_from([2, 8, 4096]))
def test_block_rows_are_the_table_with_repeats(docs, pattern, n_blocks, block_words,
                                               chunk_bytes, start_slots):
    """``block_rows`` (WordCounter(merge_blocks=False)): the blocks' tables end to end. Its
    rows, each word's counts summed in the order of its first row, are the reference's
    table; a word is at most one row per block and round; every piece is counted once."""
    data, offsets = _batch(docs)
    stage1, stage2 = class_table()
    scan = (data, offsets, PATTERN_IDS[pretokenize.scanner_name(pattern)], stage1, stage2,
            scanner_tables(), WINDOW_BYTES, STREAM_BYTES, chunk_bytes, start_slots)
    bounds, done, *tables = count_text_blocks(*scan, n_blocks, block_words, None)
    words, row_offsets, counts, n_pieces = block_rows(data, offsets, bounds, done, *scan[2:],
                                                      block_words, *tables)
    raw = words.tobytes()
    rows = [raw[row_offsets[i]:row_offsets[i + 1]].decode() for i in range(len(counts))]
    assert row_offsets[0] == 0 and row_offsets[-1] == len(words) and len(rows) == len(counts)
    summed = {}
    for word, count in zip(rows, counts.tolist()):
        summed[word] = summed.get(word, 0) + count
    want = ref.count_words(docs, pattern)
    assert list(summed.items()) == list(want.items())
    assert n_pieces == sum(want.values()) == int(counts.sum())
    assert len(rows) <= len(want) * (n_blocks + sum(want.values()) // block_words + 1)


def test_word_counter_rows_mode_on_real_text():
    """``merge_blocks=False`` on real text cut into many blocks and batches: rows repeat
    across them, and merged they are the counter's one table, word for word."""
    text = open(os.path.join(CORPORA, "kjv.txt"), encoding="utf-8").read()[:600_000]
    docs = [text[i:i + 50_000] for i in range(0, len(text), 50_000)]
    for pattern in ("gpt2", pretokenize.SUPERBPE_PATTERN):
        merged, rows = WordCounter(pattern), WordCounter(pattern, merge_blocks=False)
        for counter in (merged, rows):
            counter.block_words = 500  # tables fill: further rounds
            for k in range(0, len(docs), 4):
                counter.add_texts(docs[k:k + 4])
        words, counts, n_pieces = _state(merged)
        row_words, row_counts, row_pieces = _state(rows)
        summed = {}
        for word, count in zip(row_words, row_counts):
            summed[word] = summed.get(word, 0) + count
        assert list(summed) == words and list(summed.values()) == counts
        assert len(row_words) > len(words) and row_pieces == n_pieces
        assert rows.n_unique == len(row_words)


@pytest.mark.parametrize("pattern", PATTERNS, ids=PATTERN_IDS_FOR_TESTS)
def test_one_pass_matches_two_steps_on_real_text(pattern):
    """The shared corpora (English, German, Russian, Chinese, KJV) as one batch of one huge
    document and as many documents, with small and production tunables, in two batches
    (first occurrences continue across batches)."""
    texts = []
    for name in sorted(os.listdir(CORPORA)) if os.path.isdir(CORPORA) else []:
        if name.endswith(".txt"):
            with open(os.path.join(CORPORA, name), "rb") as f:
                texts.append(f.read()[:150_000])
    if not texts:
        pytest.skip("../shared/corpora is not here")
    raw = b"".join(texts)
    data = np.frombuffer(raw, np.uint8)
    rng = np.random.default_rng(1)
    many = np.unique(np.concatenate([[0, len(raw)], rng.integers(0, len(raw), 300)]))
    for offsets in (np.array([0, len(raw)], np.int64), many.astype(np.int64)):
        half = len(offsets) // 2
        first = (data, offsets[: half + 1]) if half else (data[:0], np.zeros(1, np.int64))
        rest = (data, offsets[half:])
        want = _two_step(*rest, pattern, _two_step(*first, pattern))
        for n_blocks, block_words, chunk in ((8, 1 << 18, 1 << 16), (5, 300, 1000), (64, 1, 7)):
            got = _one_pass(*first, pattern, n_blocks, block_words, chunk)
            got = _one_pass(*rest, pattern, n_blocks, block_words, chunk, counter=got)
            assert _state(got) == _state(want), (n_blocks, block_words, chunk)
            assert got.words() == want.words()


@settings(max_examples=EXAMPLES, deadline=None)
@given(docs=st.lists(cut_heavy, min_size=1, max_size=5), n_blocks=st.integers(1, 12),
       pattern=st.sampled_from(PATTERNS))
def test_block_cuts_are_safe(docs, n_blocks, pattern):
    """Every block bound is a document boundary or a point inside a document where the
    pieces of the two halves are the pieces of the whole; bounds never go backwards and
    ``first_doc`` is the document holding each block's start."""
    data, offsets = _batch(docs)
    bounds, first_doc = _plan_blocks(data, offsets, n_blocks)
    assert bounds[0] == offsets[0] and bounds[-1] == offsets[-1]
    assert (np.diff(bounds) >= 0).all()
    for b, cut in enumerate(bounds[:-1]):
        d = int(first_doc[b])  # == n_docs: nothing left to scan
        assert d == len(offsets) - 1 and cut == offsets[-1] or offsets[d] <= cut < offsets[d + 1]
        assert all(offsets[k + 1] <= cut for k in range(d))
    for cut in bounds[1:-1]:
        d = int(np.searchsorted(offsets, cut, side="right")) - 1
        if cut == offsets[d]:
            continue
        doc = data[offsets[d]:offsets[d + 1]].tobytes()
        at = int(cut - offsets[d])
        whole = pretokenize.split(doc.decode("utf-8", "surrogateescape"), pattern)
        halves = [pretokenize.split(part.decode("utf-8", "surrogateescape"), pattern)
                  for part in (doc[:at], doc[at:])]
        assert halves[0] + halves[1] == whole, (doc, at)


def test_a_text_without_safe_cuts_is_one_block():
    """No newline: the batch stays one block (no cut inside a piece), the counts exact."""
    data, offsets = _batch(["word " * 5000])
    bounds, _ = _plan_blocks(data, offsets, 8)
    assert set(bounds.tolist()) == {0, len(data)}
    counter = _one_pass(data, offsets, "gpt2", 8, 2, 16)
    assert counter.words() == {"word": 1, " word": 4999, " ": 1}


@pytest.mark.parametrize("n_threads", [1, 2])
def test_word_counter_takes_the_one_pass_path(n_threads):
    """``add_batch`` with a named pattern counts through the one-pass kernels (the same
    table as two steps). Under a memory budget the private tables are checked before the
    parallel pass, and each growth of the global table inside the merge: a budget with room
    for the growth gives the same table; one without raises MemoryBudgetError naming the
    bytes, before allocating, and the part-merged counter refuses further batches."""
    from fastbpe_nb.errors import MemoryBudgetError

    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    unique = [" ".join("".join(rng.choice(letters, 9)) for _ in range(12)) for _ in range(6000)]
    docs = ["fn main() {\n    let x = 42;\n}\n" * 200, "naïve café\n" * 50, "", "東京\n" * 30,
            "\n".join(unique)]
    data, offsets = _batch(docs)
    want = _state(_two_step(data, offsets, "cl100k"))
    free = WordCounter("cl100k", num_threads=n_threads)
    before = free.nbytes
    free.add_batch(data, offsets)
    assert _state(free) == want and free.n_unique > 70_000
    grown = free.nbytes - before
    assert grown > 0
    seen = []
    roomy = WordCounter("cl100k", num_threads=n_threads)
    roomy.memory_check, roomy.memory_left = seen.append, lambda: 4 * grown
    roomy.add_batch(data, offsets)
    assert _state(roomy) == want and len(seen) == 1 and seen[0] >= roomy.n_unique * 8
    tight = WordCounter("cl100k", num_threads=n_threads)
    tight.memory_check, tight.memory_left = seen.append, lambda: grown // 4
    with pytest.raises(MemoryBudgetError, match="next growth needs"):
        tight.add_batch(data, offsets)
    assert seen[-1] > 0 and tight.broken
    with pytest.raises(RuntimeError, match="part-merged"):
        tight.add_batch(data, offsets)


def test_long_pieces_that_share_their_ends_stay_apart():
    """Pieces of 8+ bytes are keyed by length and first and last 8 bytes: ones that share
    all three must still be told apart by their bytes (and 255+ byte ones by more), in the
    private tables and in the global one."""
    words = ["abcdefghXijklmnop", "abcdefghYijklmnop", "abcdefghXijklmnop",
             "q" * 300, "q" * 150 + "r" + "q" * 149, "q" * 300, "abcdefgh", "abcdefgi"]
    docs = [" ".join(words)] * 3
    data, offsets = _batch(docs)
    want = ref.count_words(docs, "gpt2")
    for serial in (False, True):
        counter = _one_pass(data, offsets, "gpt2", 3, 4, 32, serial)
        assert counter.words() == want
        assert counter.words()[" abcdefghXijklmnop"] == 3
        # A second batch: every word looked up in the global table, then counted there.
        counter = _one_pass(data, offsets, "gpt2", 3, 4, 32, serial, counter)
        assert counter.words() == {word: 2 * count for word, count in want.items()}
    two_steps = _two_step(data, offsets, "gpt2")
    assert two_steps.words() == want


def test_table_without_copies_is_the_same_table():
    """``table(copy=False)``: the same arrays' contents, the store not copied."""
    data, offsets = _batch(["the cat and the hat\n", "a hat, the cat\n"])
    counter = WordCounter("gpt2")
    counter.add_batch(data, offsets)
    views, copies = counter.table(copy=False), counter.table()
    assert all(np.array_equal(v, c) for v, c in zip(views, copies))
    assert np.shares_memory(views[0], counter._store)
    assert not np.shares_memory(copies[0], counter._store)


def _count_in_batches(batches):
    counter = WordCounter("cl100k", num_threads=2)
    for data, offsets in batches:
        counter.add_batch(data, offsets)
    return _state(counter)


def test_batches_counted_in_a_forked_child():
    """A later batch's words are looked up in the table on all cores (``look_up_blocks``):
    in a child forked after the parent's thread pool ran, the serial twins give the
    parent's table, and nothing hangs."""
    import multiprocessing

    text = open(os.path.join(CORPORA, "kjv.txt"), encoding="utf-8").read()[:400_000]
    docs = [text[i:i + 20_000] for i in range(0, len(text), 20_000)]
    batches = [_batch(docs[k:k + 5]) for k in range(0, len(docs), 5)]
    expected = _count_in_batches(batches)  # the pool runs in the parent
    assert expected == _state(_two_step(*_batch(docs), "cl100k"))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_count_in_batches, (batches,)).get(timeout=600)
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(block_bytes=st.floats(0, 1e10), words_per_byte=st.floats(0, 2),
       block_words=st.integers(1, 1 << 20))
def test_start_slots_are_a_power_of_two_for_the_words_expected(block_bytes, words_per_byte,
                                                               block_words):
    from fastbpe_nb.counting import COUNT_MIN_SLOTS

    counter = WordCounter("gpt2")
    counter._words_per_byte = words_per_byte
    slots = counter.start_slots(block_bytes, block_words)
    expected = min(block_words, int(block_bytes * words_per_byte) + 1)
    assert slots & (slots - 1) == 0
    assert slots >= max(COUNT_MIN_SLOTS, 2 * expected)  # the words expected at half load
    assert slots == COUNT_MIN_SLOTS or slots < 4 * expected  # and not more than that


def test_private_tables_start_at_the_last_batch_s_rate(monkeypatch):
    """Each block's first slots are sized from the last large batch's words per byte (a
    batch of new words, then one of repeats, then new words again): the kernels get those
    sizes, and the counts are the reference's whatever the start."""
    import random

    from fastbpe_nb import counting

    monkeypatch.setattr(counting, "RATE_MIN_BYTES", 1 << 12)
    seen = []
    real = counting.WordCounter.start_slots

    def spy(self, block_bytes, block_words):
        seen.append((self._words_per_byte, real(self, block_bytes, block_words)))
        return seen[-1][1]

    monkeypatch.setattr(counting.WordCounter, "start_slots", spy)
    rng = random.Random(5)
    new = [" ".join("".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(9000))]
    repeats = [" the cat and the hat" * 2000]
    more_new = [" ".join("".join(rng.choice("klmnopqrst") for _ in range(6))
                         for _ in range(9000))]
    counter = WordCounter("gpt2", num_threads=1)
    for docs in (new, repeats, more_new):
        counter.add_batch(*_batch(docs))
    words, counts, n_pieces = _state(counter)
    want = ref.count_words(new + repeats + more_new, "gpt2")
    assert [w.decode() for w in words] == list(want) and counts == list(want.values())
    (rate1, first), (rate2, second), (rate3, third) = seen
    assert rate1 == 1 / counting.FIRST_BYTES_PER_WORD and first == 4096  # 63 KB / 64
    assert rate2 > 0.1 and second == 16384  # ~9,000 new words in 63 KB: 2 x 9,000 slots
    assert rate3 < 1e-3 and third == counting.COUNT_MIN_SLOTS  # after repeats


@pytest.mark.parametrize("start_slots", [0, 1, 3, 4095])
def test_start_slots_not_a_power_of_two_are_refused(start_slots):
    data, offsets = _batch(["the cat"])
    with pytest.raises(ValueError, match="power of two"):
        _one_pass(data, offsets, "gpt2", 1, 8, 16, start_slots=start_slots)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(cut_heavy, min_size=1, max_size=6), pattern=st.sampled_from(PATTERNS),
       n_blocks=st.integers(1, 9), chunk_bytes=st.integers(1, 80),
       serial=st.booleans())
def test_first_round_rows_are_block_rows(docs, pattern, n_blocks, chunk_bytes, serial):
    """When no block's table filled up, ``first_round_rows`` (blocks copied in parallel, or
    its serial twin) gives ``block_rows``' arrays exactly."""
    data, offsets = _batch(docs)
    stage1, stage2 = class_table()
    scan = (data, offsets, PATTERN_IDS[pretokenize.scanner_name(pattern)], stage1, stage2,
            scanner_tables(), WINDOW_BYTES, STREAM_BYTES, chunk_bytes, 4)
    block_words = 1 << 10  # more than the words of any block here: no second round
    bounds, done, *tables = count_text_blocks(*scan, n_blocks, block_words, None)
    assert (done[:, 3] == bounds[1:]).all()
    want = block_rows(data, offsets, bounds, done, *scan[2:], block_words, *tables)
    kernel = first_round_rows_serial if serial else first_round_rows
    got = kernel(done, block_words, data, tables[0], tables[1], tables[2])
    assert len(got) == 4 and got[3] == want[3]
    for g, w in zip(got[:3], want[:3]):
        assert g.dtype == w.dtype and np.array_equal(g, w)


def _rows_in_batches(batches, block_words=None):
    counter = WordCounter("gpt2", num_threads=2, merge_blocks=False)
    if block_words:
        counter.block_words = block_words
    for data, offsets in batches:
        counter.add_batch(data, offsets)
    return [a.tolist() for a in counter.table()], counter.n_pieces


def test_rows_of_batches_copied_in_parallel_or_in_rounds_and_in_a_forked_child(monkeypatch):
    """``WordCounter(merge_blocks=False)``: batches whose blocks finished in one round go
    through ``first_round_rows``, the others (tables of 64 words) through ``block_rows``'
    rounds; both give rows that add up to the reference's counts, and a child forked after
    the parent's thread pool ran gets the parent's rows (the serial twins)."""
    import multiprocessing

    from fastbpe_nb.kernels import count

    text = open(os.path.join(CORPORA, "kjv.txt"), encoding="utf-8").read()[:200_000]
    docs = [text[i:i + 20_000] for i in range(0, len(text), 20_000)]
    batches = [_batch(docs[k:k + 5]) for k in range(0, len(docs), 5)]
    calls = []
    real = count.first_round_rows
    monkeypatch.setattr(count, "first_round_rows",
                        lambda *a: calls.append(1) or real(*a))
    parallel = _rows_in_batches(batches)
    assert len(calls) == len(batches)
    rounds = _rows_in_batches(batches, block_words=64)
    assert len(calls) == len(batches)  # every block filled up: block_rows
    want = ref.count_words(docs, "gpt2")
    for (words, offsets, counts), n_pieces in (parallel, rounds):
        raw = bytes(words)
        summed = {}
        for i, c in enumerate(counts):
            w = raw[offsets[i]:offsets[i + 1]].decode()
            summed[w] = summed.get(w, 0) + c
        assert summed == dict(want) and n_pieces == sum(want.values())
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_rows_in_batches, (batches,)).get(timeout=600)
    assert got == parallel
