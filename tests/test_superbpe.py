"""SuperBPE (``train(..., superbpe_transition=t)``) against its specification,
``reference.train_superbpe``: stage 1 is ordinary BPE up to the transition vocabulary size,
stage 2 continues on pieces that span words. Merges, ids and counts must be identical for
every tie rule, on hypothesis corpora and tie-heavy seeded ones; the model must encode as
the reference does, survive save/load, and be exported only where a format expresses it.
"""


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb.pretokenize import SUPERBPE_PATTERN

from fbtest import NOJIT, assert_same_model
from fbtest import punctuated_word_corpus as tie_heavy_corpus

TIES = ["ids", "hf", "first", "bytes"]
EXAMPLES = 30 if NOJIT else 120

# Tiny alphabets with spaces, punctuation, digits and newlines: ties everywhere, pieces of
# stage 2 that span words, and the pattern's cuts (digit groups, punctuation runs).
alphabets = st.sampled_from(["ab ", "ab .", "ab, \n", "a1 b2", "aé !?", "x中 ..", "ab  \n"])


@st.composite
def corpora(draw):
    alphabet = draw(alphabets)
    return draw(st.lists(st.text(alphabet=alphabet, min_size=0, max_size=40), min_size=1,
                         max_size=8))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), transition=st.integers(256, 275),
       extra=st.integers(0, 40), min_frequency=st.integers(0, 3),
       max_len=st.one_of(st.none(), st.integers(1, 8)),
       pattern=st.sampled_from(["gpt2", "cl100k", r"\S+|\s+"]))
def test_superbpe_matches_reference(docs, tie, transition, extra, min_frequency, max_len,
                                    pattern):
    opts = dict(vocab_size=transition + extra, tie_break=tie, min_frequency=min_frequency,
                max_token_length=max_len, pattern=pattern)
    model = ref.train_superbpe(docs, transition=transition, **opts)
    tok = fb.train(docs, superbpe_transition=transition, **opts)
    assert_same_model(tok, model)
    assert tok.pattern == SUPERBPE_PATTERN
    for doc in docs:
        assert tok.encode(doc) == ref.encode(doc, model)
        assert tok.decode(tok.encode(doc)) == doc


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), transition=st.integers(256, 270),
       num_merges=st.integers(0, 40), n_special=st.integers(0, 2))
def test_num_merges_and_special_tokens(docs, tie, transition, num_merges, n_special):
    specials = ["<|s|>", "<|e|>"][:n_special]
    docs = [d + "<|s|>" + d for d in docs]
    transition += n_special
    opts = dict(num_merges=num_merges, tie_break=tie, special_tokens=specials)
    model = ref.train_superbpe(docs, transition=transition, **opts)
    tok = fb.train(docs, superbpe_transition=transition, **opts)
    assert_same_model(tok, model)
    assert len(tok.merges) <= num_merges
    for doc in docs:
        assert tok.encode(doc, allowed_special="all") == ref.encode(doc, model, "all")


@pytest.mark.parametrize("seed", range(4 if NOJIT else 10))
@pytest.mark.parametrize("tie", TIES)
def test_tie_heavy_corpora_match_reference(seed, tie):
    docs = tie_heavy_corpus(seed)
    model = ref.train_superbpe(docs, transition=290, vocab_size=400, tie_break=tie)
    tok = fb.train(docs, vocab_size=400, superbpe_transition=290, tie_break=tie)
    # Both stages learned something, and stage 2 made tokens that span a space.
    assert len(model.merges) > 40
    assert any(b" " in t.strip(b" ") for t in model.token_bytes[290:])
    assert_same_model(tok, model)
    for doc in tie_heavy_corpus(seed + 100, 8):
        assert tok.encode(doc) == ref.encode(doc, model)


# Stage 2 trains on its table cut at pairs rarer than a threshold (superbpe.train_cut). Any
# threshold gives the reference's merges: a high one makes the merges run out above it, and
# training starts again lower (down to min_frequency).
SHARES = [0.25, 1.0, 3.0, 1e9]


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), transition=st.integers(256, 270),
       extra=st.integers(1, 40), min_frequency=st.integers(0, 3),
       share=st.sampled_from(SHARES), halves=st.booleans(), merge_halves=st.booleans(),
       block_words=st.sampled_from([1, 3, 1 << 18]), sketch_bits=st.sampled_from([1, 3, 10]))
def test_any_cut_threshold_gives_the_reference(docs, tie, transition, extra, min_frequency,
                                               share, halves, merge_halves, block_words,
                                               sketch_bits):
    """``halves``: stage 2's passes split the words in two halves whatever their number
    (down to halves of no word), as they do on two threads from HALVES_MIN_WORDS words.
    ``merge_halves``: its merge kernel runs on two halves of the cut table whatever its
    size (``merge_loop.HALVES_MIN_SYMBOLS``; the ``first`` rule stays on one core).
    ``block_words``: the counting blocks' tables fill up after so many words, so stage 2's
    table (``STAGE2_ROWS``: the blocks' tables end to end) repeats words across rounds.
    ``sketch_bits``: the pairs' sketch has 2, 8 or 1024 counters a row; with few, most
    counters hold several pairs, and many rare pairs are left uncut."""
    from fastbpe_nb import counting, merge_loop, superbpe

    opts = dict(vocab_size=transition + extra, tie_break=tie, min_frequency=min_frequency)
    model = ref.train_superbpe(docs, transition=transition, **opts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(superbpe, "THRESHOLD_SHARE", share)
        mp.setattr(superbpe, "HALVES_MIN_WORDS", 0 if halves else 1 << 40)
        mp.setattr(merge_loop, "HALVES_MIN_SYMBOLS", 0 if merge_halves else 1 << 62)
        mp.setattr(counting, "COUNT_BLOCK_WORDS", block_words)
        mp.setattr(superbpe, "SKETCH_MIN_BITS", sketch_bits)
        mp.setattr(superbpe, "SKETCH_MAX_BITS", sketch_bits)
        tok = fb.train(docs, superbpe_transition=transition, num_threads=2, **opts)
    assert_same_model(tok, model)


@pytest.mark.parametrize("tie", TIES)
def test_stage_two_rows_with_repeats_give_one_table_s_model(monkeypatch, tmp_path, tie):
    """Stage 2 counted as the blocks' tables end to end (``STAGE2_ROWS``), where the blocks
    fill up every 300 words: many words are several rows, and the model (merges, ids,
    counts) is the one of a single table, from documents and from a file, and the
    reference's."""
    from fastbpe_nb import counting, superbpe

    monkeypatch.setattr(counting, "COUNT_BLOCK_WORDS", 300)
    docs = [doc for seed in range(41, 44) for doc in tie_heavy_corpus(seed, 120)]
    path = tmp_path / "corpus.txt"
    path.write_text("".join(docs), encoding="utf-8")
    opts = dict(vocab_size=400, superbpe_transition=300, tie_break=tie, return_report=True)
    runs = {}
    for rows in (True, False):
        monkeypatch.setattr(superbpe, "STAGE2_ROWS", rows)
        runs[rows, "texts"] = fb.train(docs, **opts)
        runs[rows, "file"] = fb.train_files([str(path)], **opts)
    for source in ("texts", "file"):
        (with_rows, report), (one_table, one_report) = runs[True, source], runs[False, source]
        assert np.array_equal(with_rows.merges, one_table.merges)
        assert np.array_equal(with_rows.merge_counts, one_table.merge_counts)
        assert with_rows.vocab == one_table.vocab
        assert report["superbpe_stage2_words"] > one_report["superbpe_stage2_words"]
        assert report["superbpe_stage2_cut"] == one_report["superbpe_stage2_cut"]
    model = ref.train_superbpe(docs, transition=300, vocab_size=400, tie_break=tie)
    assert_same_model(runs[True, "texts"][0], model)


@pytest.mark.parametrize("tie", TIES)
def test_stage_two_on_halves_gives_the_reference(monkeypatch, tie):
    """Tie-heavy corpora with stage 2's passes on two halves of the words (the second half
    sees segments and pieces the first half numbered, and new ones)."""
    from fastbpe_nb import superbpe

    monkeypatch.setattr(superbpe, "HALVES_MIN_WORDS", 0)
    docs = [doc for seed in range(31, 35) for doc in tie_heavy_corpus(seed, 150)]
    model = ref.train_superbpe(docs, transition=300, vocab_size=380, tie_break=tie)
    tok = fb.train(docs, vocab_size=380, superbpe_transition=300, tie_break=tie,
                   num_threads=2)
    assert_same_model(tok, model)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.lists(st.binary(max_size=6), max_size=5), min_size=1, max_size=6))
def test_joined_on_two_threads_is_joined_on_one(parts):
    """Row tables end to end, the second half copied in a helper thread: the same arrays
    as on one thread, which are the concatenation (empty tables and empty rows among
    them)."""
    from fastbpe_nb.counting import joined

    tables = []
    for k, rows in enumerate(parts):
        values = np.frombuffer(b"".join(rows), dtype=np.uint8)
        offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
        tables.append((values, offsets, np.arange(len(rows), dtype=np.int64) + 10 * k))
    rows = [r for p in parts for r in p]
    want = (list(b"".join(rows)), np.cumsum([0] + [len(r) for r in rows]).tolist(),
            [i + 10 * k for k, p in enumerate(parts) for i in range(len(p))])
    for threads in (1, 2):
        got = joined(tables, 1, threads)
        assert len(got) == 3 and [g.dtype for g in got] == [np.uint8, np.int64, np.int64]
        assert tuple(g.tolist() for g in got) == want


def test_halves_on_parts_and_joined():
    import threading

    from fastbpe_nb.parallel import on_parts
    from fastbpe_nb.superbpe import halves, joined

    assert halves(5, 1) == [(0, 5)]
    with pytest.MonkeyPatch.context() as mp:
        from fastbpe_nb import superbpe

        mp.setattr(superbpe, "HALVES_MIN_WORDS", 4)
        assert halves(5, 2) == [(0, 2), (2, 5)]
        assert halves(3, 2) == [(0, 3)]
    here = threading.get_ident()
    assert on_parts(lambda k: (k, threading.get_ident() == here), 1) == [(0, True)]
    assert on_parts(lambda k: (k, threading.get_ident() == here), 2) == [(0, True), (1, False)]
    with pytest.raises(ZeroDivisionError):  # the helper's error reaches the caller
        on_parts(lambda k: 1 // (1 - k), 2)
    a = (np.array([1, 2, 3]), np.array([0, 1, 3]), np.array([7, 8]))
    b = (np.array([4, 5]), np.array([0, 2]), np.array([9]))
    values, offsets, rows = joined([a, b], 1)
    assert values.tolist() == [1, 2, 3, 4, 5] and offsets.tolist() == [0, 1, 3, 5]
    assert rows.tolist() == [7, 8, 9]
    empty = (np.array([], int), np.array([0]), np.array([], int))
    assert joined([empty, b], 1)[1].tolist() == [0, 2]
    assert joined([a, empty], 1)[1].tolist() == [0, 1, 3]


@pytest.mark.parametrize("share", SHARES)
@pytest.mark.parametrize("tie", TIES)
def test_cut_threshold_on_tie_heavy_corpora(monkeypatch, share, tie):
    from fastbpe_nb import superbpe

    monkeypatch.setattr(superbpe, "THRESHOLD_SHARE", share)
    docs = [doc for seed in range(11, 15) for doc in tie_heavy_corpus(seed, 200)]
    model = ref.train_superbpe(docs, transition=300, vocab_size=340, tie_break=tie)
    tok, report = fb.train(docs, vocab_size=340, superbpe_transition=300, tie_break=tie,
                           return_report=True)
    assert_same_model(tok, model)
    cut = report["superbpe_stage2_cut"]
    if share == 0.25:  # one run on a table really cut (the threshold is 4-6 here)
        assert cut["runs"] == 1 and cut["threshold"] > 1
        assert cut["symbols"] < report["superbpe_stage2_symbols"] / 1.1
    if share >= 3.0:  # too high: the merges ran out above it, trained again lower
        assert cut["runs"] > 1


def test_sketch_grows_with_the_merges():
    """The sketch has a counter a row for about ``SKETCH_ADJACENCIES`` adjacencies and at
    least ``SKETCH_PER_MERGE`` a merge, a power of two within the bounds."""
    from fastbpe_nb.superbpe import (SKETCH_ADJACENCIES, SKETCH_MAX_BITS, SKETCH_MIN_BITS,
                                     SKETCH_PER_MERGE, sketch_bits)

    assert sketch_bits(0, 0) == SKETCH_MIN_BITS
    assert sketch_bits(878_219, 2048) == (SKETCH_PER_MERGE * 2048 - 1).bit_length() == 16
    assert sketch_bits(878_219, 8192) == 18
    assert sketch_bits(15_189_637, 8192) == 19  # the table's rule: 100 MB of Linux sources
    assert sketch_bits(SKETCH_ADJACENCIES << 20, 1) == 20
    assert sketch_bits(10**12, 10**9) == sketch_bits(1, 1 << 62) == SKETCH_MAX_BITS
    for n in (1, 1000, 10**6, 10**8):
        for k in (0, 1, 100, 10**4):
            bits = sketch_bits(n, k)
            assert SKETCH_MIN_BITS <= bits <= SKETCH_MAX_BITS
            assert bits == SKETCH_MAX_BITS or 2 ** bits >= max(n // SKETCH_ADJACENCIES,
                                                                SKETCH_PER_MERGE * k)


@pytest.mark.parametrize("name", ["fortunes_en", "kjv"])
def test_stage_two_trains_once_on_real_text(name):
    """On real text the threshold from the sketch is low enough that stage 2's merges do
    not run out above it: one run of the merge kernel (with a sketch sized by the table
    alone, both corpora trained twice at this size)."""
    from fbtest import CORPORA

    path = CORPORA / f"{name}.txt"
    if not path.exists():
        pytest.skip("no shared corpora")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    docs = ["".join(lines[i:i + 50]) for i in range(0, len(lines), 50)]
    tok, report = fb.train(docs, vocab_size=8192, superbpe_transition=6144,
                           return_report=True)
    cut = report["superbpe_stage2_cut"]
    assert cut["runs"] == 1 and len(tok.merges) == 8192 - 256
    assert cut["symbols"] < report["superbpe_stage2_symbols"] / 2


def sketch_cells_by_hand(pair, bits):
    """The two counters of ``pair`` in a sketch of ``2**bits`` counters a row, in Python
    integers (``kernels.pair_cut.sketch_cells``' two hashes)."""
    mask = (1 << bits) - 1
    h = (pair[0] * 0x9E3779B1) ^ (pair[1] * 0x85EBCA6B)
    h ^= h >> 29
    g = (pair[0] * 0xC2B2AE3D) ^ (pair[1] * 0x27D4EB2F)
    g ^= g >> 31
    return h & mask, (g & mask) + mask + 1


def sketch_by_hand(words, counts, bits):
    """``(exact pair counts, the pairs' sketch as a list)``: every adjacency adds its word's
    count to the pair's counter in each row, capped at 2**32 - 1."""
    pair_count, sketch = {}, [0] * (2 << bits)
    for w, c in zip(words, counts):
        for pair in zip(w, w[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + c
            for cell in sketch_cells_by_hand(pair, bits):
                sketch[cell] = min(sketch[cell] + c, 2**32 - 1)
    return pair_count, sketch


def cut_by_hand(words, counts, theta, bits):
    """``(pair counts, {piece: count})``: the words cut at the pairs one of whose sketch
    counters is below ``theta`` (so rarer than ``theta``), pieces of one symbol dropped,
    in order of first appearance."""
    pair_count, sketch = sketch_by_hand(words, counts, bits)
    want = {}  # piece -> count, in order of first appearance
    for w, c in zip(words, counts):
        piece = w[:1]
        for a, b in zip(w, w[1:]):
            if min(sketch[k] for k in sketch_cells_by_hand((a, b), bits)) < min(theta,
                                                                              2**32 - 1):
                assert pair_count[a, b] < theta  # only rare pairs are cut
                if len(piece) > 1:
                    want[tuple(piece)] = want.get(tuple(piece), 0) + c
                piece = []
            piece.append(b)
        if len(piece) > 1:
            want[tuple(piece)] = want.get(tuple(piece), 0) + c
    return pair_count, want


def cut_by_kernels(words, counts, theta, bits, halves=False):
    """``(the pairs' sketch, the cut table of the kernels as {piece: count} in row
    order)``; ``halves``: the two halves of the words sketched and cut on two threads,
    their sketches added and their rows put end to end (as from 16 k words; a piece's rows
    are then added)."""
    from fastbpe_nb import superbpe
    from fastbpe_nb.kernels.pair_cut import added_sketches, pair_sketch

    symbols = np.array([x for w in words for x in w], dtype=np.int32)
    offsets = np.cumsum([0] + [len(w) for w in words]).astype(np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(superbpe, "HALVES_MIN_WORDS", 0 if halves else 1 << 40)
        counts = np.array(counts, dtype=np.int64)
        parts = [(symbols, offsets[lo:hi + 1], counts[lo:hi])
                 for lo, hi in superbpe.halves(len(counts), num_threads=2)]
        assert len(parts) == (2 if halves else 1)
        sketches = [pair_sketch(*part, bits) for part in parts]
        sketch = sketches[0] if len(parts) == 1 else added_sketches(*sketches)
        sym, off, cnt = superbpe.cut_table(parts, sketch, theta)
    assert off[0] == 0 and off[-1] == len(sym) and (np.diff(off) >= 2).all()
    assert sym.dtype == np.int32 and off.dtype == cnt.dtype == np.int64
    got, rows = {}, {}
    for a, b, c in zip(off[:-1], off[1:], cnt):
        piece = tuple(sym[a:b].tolist())
        got[piece] = got.get(piece, 0) + int(c)
        rows[piece] = rows.get(piece, 0) + 1
    # Each piece one row, or with halves one row in each half at most.
    assert max(rows.values(), default=1) <= (2 if halves else 1)
    return sketch, got


@settings(max_examples=200 if not NOJIT else 40, deadline=None)
@given(words=st.lists(st.lists(st.integers(0, 4), max_size=9), min_size=1, max_size=12),
       counts=st.lists(st.integers(1, 5), min_size=12, max_size=12), theta=st.integers(1, 8),
       bits=st.sampled_from([0, 1, 2, 3, 8]))
def test_cut_table_equals_cutting_by_hand(words, counts, theta, bits):
    """With 1 to 256 counters a row: few counters hold several pairs each, and pairs rarer
    than ``theta`` are then left uncut, which the cut by hand (by the same sketch) does too.
    """
    counts = counts[:len(words)]
    pair_count, want = cut_by_hand(words, counts, theta, bits)
    sketch, got = cut_by_kernels(words, counts, theta, bits)
    assert sketch.dtype == np.uint32
    assert sketch.tolist() == sketch_by_hand(words, counts, bits)[1]
    # The smaller of a pair's counters is at least its count: it is never cut if frequent.
    for pair, count in pair_count.items():
        assert min(int(sketch[k]) for k in sketch_cells_by_hand(pair, bits)) >= count
    assert list(got.items()) == list(want.items())
    halves_sketch, halves_got = cut_by_kernels(words, counts, theta, bits, halves=True)
    assert list(halves_got.items()) == list(want.items())
    assert halves_sketch.tolist() == sketch.tolist()  # the halves' sketches, added


def test_a_rare_pair_sharing_counters_with_a_frequent_one_is_not_cut():
    """One counter a row: every pair's counters hold the whole table's count, so nothing is
    cut, the rare pair (3, 4) included; with enough counters it is cut."""
    words, counts = [[1, 2, 3], [3, 4]], [5, 1]
    assert cut_by_kernels(words, counts, 3, 0)[1] == {(1, 2, 3): 5, (3, 4): 1}
    assert cut_by_kernels(words, counts, 3, 8)[1] == {(1, 2, 3): 5}


def test_cut_table_with_many_distinct_pieces():
    """Thousands of distinct pieces (the kernel's row table and its slots grow several
    times), repeats among them, and every piece length from 2 to 40."""
    rng = np.random.default_rng(3)
    words = [rng.integers(0, 60, rng.integers(0, 41)).tolist() for _ in range(6000)]
    words += words[:2000]  # repeated words: rows whose counts add up
    counts = rng.integers(1, 4, len(words)).tolist()
    sizes = []
    for theta in (1, 90, 110):  # no cut; about half the pairs cut; most cut
        want = cut_by_hand(words, counts, theta, 14)[1]
        for halves in (False, True):
            got = cut_by_kernels(words, counts, theta, 14, halves)[1]
            assert list(got.items()) == list(want.items())
        sizes.append(len(got))
    # Uncut, the distinct words; cut, more distinct pieces; cut nearly everywhere, few.
    assert sizes[1] > sizes[0] > 5000 and 100 < sizes[2] < sizes[0], sizes


def test_cut_table_counts_past_float_precision():
    """Counts whose sum passes 2**52 are added as integers (not through float64)."""
    words = [[1, 2, 3], [1, 2], [7, 1, 2], [3, 3]]
    counts = [2**60 + 1, 2**60 + 3, 5, 2**61 + 7]
    for halves in (False, True):  # (two halves: their full counters added stay full)
        sketch, got = cut_by_kernels(words, counts, 2, 4, halves)
        assert got == cut_by_hand(words, counts, 2, 4)[1]
        assert got[1, 2] == 2**60 + 3  # not a float64
        assert sketch.max() == 2**32 - 1  # the counters stop at their cap, never wrap
    # A full counter is at least any threshold: its pair is kept even above 2**32.
    assert cut_by_kernels([[1, 2]], [2**40], 2**35, 4)[1] == {(1, 2): 2**40}
    # A full counter of one half plus the other half's: still full, the pair kept.
    words, counts = [[1, 2], [1, 2]], [2**40, 10]
    assert cut_by_kernels(words, counts, 100, 4, halves=True)[1] == {(1, 2): 2**40 + 10}


@settings(max_examples=100 if not NOJIT else 20, deadline=None)
@given(table=st.lists(st.lists(st.integers(0, 99), max_size=5), min_size=1, max_size=8),
       data=st.data())
def test_gathered_words(table, data):
    """Words of rows (repeats, empty rows, empty words), the rows numbered directly or
    through ``renumber``; the capacity exact or larger, and a smaller one refused."""
    from fastbpe_nb.kernels.pair_cut import gathered_words

    values = np.array([x for row in table for x in row], dtype=np.int32)
    offsets = np.cumsum([0] + [len(row) for row in table]).astype(np.int64)
    numbers = data.draw(st.lists(st.integers(0, len(table) - 1), max_size=12))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(numbers)), max_size=4)))
    word_first = np.array([0] + cuts + [len(numbers)], dtype=np.int64)
    renumbered = data.draw(st.booleans())
    if renumbered:  # the rows' numbers in some other numbering
        order = data.draw(st.permutations(range(len(table))))
        renumber = np.array(order, dtype=np.int32)
        rows = np.array([order.index(r) for r in numbers], dtype=np.int32)
    else:
        renumber, rows = np.empty(0, np.int32), np.array(numbers, dtype=np.int32)
    words = [[x for r in numbers[a:b] for x in table[r]]
             for a, b in zip(word_first[:-1], word_first[1:])]
    total = sum(map(len, words))
    symbols, word_offsets = gathered_words(values, offsets, rows, word_first, renumber,
                                           total + data.draw(st.integers(0, 3)))
    assert symbols.dtype == np.int32 and word_offsets.dtype == np.int64
    assert [symbols[a:b].tolist() for a, b in zip(word_offsets[:-1], word_offsets[1:])] == \
        words
    assert word_offsets[0] == 0 and word_offsets[-1] == len(symbols) == total
    if total:
        with pytest.raises(ValueError, match="capacity"):
            gathered_words(values, offsets, rows, word_first, renumber, total - 1)


@settings(max_examples=100 if not NOJIT else 20, deadline=None)
@given(data=st.binary(max_size=40), draw=st.data())
def test_gather_ranges(data, draw):
    """The ranges of the bytes end to end (repeats, empty and overlapping ranges)."""
    from fastbpe_nb.superbpe import gathered_bytes

    ranges = draw.draw(st.lists(st.tuples(st.integers(0, len(data)), st.integers(0, len(data))),
                                max_size=8))
    ranges = [(min(a, b), max(a, b)) for a, b in ranges]
    raw = np.frombuffer(data, np.uint8)
    offsets, out = gathered_bytes(raw, np.array([a for a, _ in ranges], np.int64),
                                  np.array([b for _, b in ranges], np.int64))
    assert out.tobytes() == b"".join(data[a:b] for a, b in ranges)
    assert offsets.tolist() == np.cumsum([0] + [b - a for a, b in ranges]).tolist()
    assert out.dtype == np.uint8 and offsets.dtype == np.int64


@settings(max_examples=200 if not NOJIT else 40, deadline=None)
@given(words=st.lists(st.binary(max_size=12), min_size=1, max_size=8),
       joinable=st.lists(st.booleans(), min_size=9, max_size=9))
def test_distinct_segments(words, joinable):
    """Words cut between bytes no token holds side by side; segments numbered in order of
    first appearance. Bytes 0..2 (pairs repeat), segments of 1 to 12 bytes (short keys are
    exact, 8+ bytes are compared; the last ones are keyed a byte at a time)."""
    words = [bytes(b % 3 for b in w) for w in words]
    table = np.zeros((256, 256), dtype=bool)
    table[:3, :3] = np.array(joinable).reshape(3, 3)
    _check_distinct_segments(words, table)


def _check_distinct_segments(words, table):
    """The kernel's segments, numbers and first appearances against cutting by hand;
    returns the number of distinct segments."""
    from fastbpe_nb.kernels.pair_cut import distinct_segments

    segments, word_first = [], [0]
    for w in words:
        start = 0
        for i in range(1, len(w) + 1):
            if i == len(w) or not table[w[i - 1], w[i]]:
                segments.append(w[start:i])
                start = i
        word_first.append(len(segments))
    number = {}
    for seg in segments:
        number.setdefault(seg, len(number))
    raw = b"".join(words)
    data = np.frombuffer(raw, dtype=np.uint8)
    offsets = np.cumsum([0] + [len(w) for w in words]).astype(np.int64)
    ids, first, d_start, d_end = distinct_segments(data, offsets, table)
    assert ids.tolist() == [number[seg] for seg in segments]
    assert first.tolist() == word_first
    assert [raw[a:b] for a, b in zip(d_start, d_end)] == list(number)
    return len(number)


def test_distinct_segments_table_grows():
    """Tens of thousands of distinct segments (the slots rehash several times), long ones
    that share their length and first and last 8 bytes."""
    from fastbpe_nb.kernels.pair_cut import distinct_segments

    rng = np.random.default_rng(7)
    words = [b"%d" % x for x in rng.integers(0, 40_000, 60_000)]
    words += [b"abcdefgh" + b"%03d" % k + b"ijklmnop" for k in range(300)] * 2
    table = np.zeros((256, 256), dtype=bool)
    table[:, :] = True  # no cut: every word is one segment
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    offsets = np.cumsum([0] + [len(w) for w in words]).astype(np.int64)
    ids, first, d_start, d_end = distinct_segments(data, offsets, table)
    number = {}
    for w in words:
        number.setdefault(w, len(number))
    assert ids.tolist() == [number[w] for w in words] and len(number) > 30_000
    assert first.tolist() == list(range(len(words) + 1))


def test_distinct_segments_grow_inside_words():
    """Words cut into many segments, thousands of them distinct: the slots and the segment
    arrays grow while a word is half done (the kernel resumes at the segment that needed
    the room), and every segment keeps its number."""
    rng = np.random.default_rng(11)
    table = rng.random((256, 256)) < 0.7  # about one cut in three adjacencies
    words = [bytes(rng.integers(97, 123, rng.integers(0, 60)).tolist()) for _ in range(3000)]
    # Past the first 1024 segments and 4096 slots.
    assert _check_distinct_segments(words, table) > 5000


def _superbpe_in_child(docs, halves_min_words=None):
    from fastbpe_nb import superbpe

    if halves_min_words is not None:  # stage 2's passes on two halves (helper threads)
        superbpe.HALVES_MIN_WORDS = halves_min_words
    tok, report = fb.train(docs, vocab_size=340, superbpe_transition=300, num_threads=2,
                           return_report=True)
    return tok.merges.tolist(), report["superbpe_stage2_cut"]


def test_training_in_a_forked_child():
    """The stage-2 matcher runs on parallel blocks for a corpus this size, and stage 2 on
    a cut table: a child forked after the parent's thread pool ran learns the parent's
    merges (it runs the serial twins)."""
    import multiprocessing

    docs = [doc for seed in range(11, 15) for doc in tie_heavy_corpus(seed, 200)]
    want = _superbpe_in_child(docs)
    assert want[1]["threshold"] > 1  # the cut table really was used
    with multiprocessing.get_context("fork").Pool(1) as pool:
        # A timeout: a child that hangs fails the test instead of stalling the run. In the
        # child too, stage 2 counts in a helper thread while stage 1 merges, and (second
        # call) runs its passes on two halves of the words in helper threads.
        assert pool.apply_async(_superbpe_in_child, (docs,)).get(timeout=600) == want
        merges, cut = pool.apply_async(_superbpe_in_child, (docs, 0)).get(timeout=600)
    # (Two halves' cut rows are put end to end: a piece in both is a row in each.)
    assert merges == want[0] and cut["threshold"] == want[1]["threshold"]
    assert cut["rows"] >= want[1]["rows"] and cut["symbols"] >= want[1]["symbols"]


def _encoded_in_child(model_path, docs):
    return [ids.tolist() for ids in map(np.asarray,
                                        fb.load(model_path).encode_batch(docs, num_threads=2))]


def test_encoding_in_a_forked_child(tmp_path):
    """Encoding with a SuperBPE tokenizer pre-tokenizes with the stage-2 pattern: ASCII
    blocks, the windowed matcher for the rest. A child forked after the parent encoded on
    its thread pool gets the parent's ids (those of encode_ordinary), and nothing hangs."""
    import multiprocessing

    from fbtest import CORPORA

    text = (CORPORA / "fortunes_en.txt").read_text(encoding="utf-8")[:60_000]
    tok = fb.train([text], vocab_size=600, superbpe_transition=450)
    assert tok.pattern == SUPERBPE_PATTERN
    docs = [text[i:i + 3_000] + " caf\u00e9 \u4e2d\u6587 " + "*" * 90 + "\n"
            for i in range(0, len(text), 3_000)]
    path = str(tmp_path / "superbpe.json")
    tok.save(path)
    want = _encoded_in_child(path, docs)
    assert want == [tok.encode_ordinary(d) for d in docs]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_encoded_in_child, (path, docs)).get(timeout=600) == want


@pytest.mark.parametrize("entry", ["train", "train_files"])
def test_stage_two_counts_while_stage_one_merges(monkeypatch, tmp_path, entry):
    """With more than one thread and no memory budget, stage 2 counts the corpus in a
    background thread while stage 1 merges; one thread or a budget keeps them in turn. The
    merges are the reference's either way."""
    from fastbpe_nb import superbpe

    docs = [doc for seed in range(21, 24) for doc in tie_heavy_corpus(seed, 200)]
    model = ref.train_superbpe(docs, transition=300, vocab_size=360)
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(docs), encoding="utf-8")
    whole = ref.train_superbpe([corpus.read_text(encoding="utf-8")], transition=300,
                               vocab_size=360)  # train_files' one document
    started = []

    class Spy(superbpe.BackgroundCount):
        def __init__(self, count):
            started.append(1)
            super().__init__(count)

    monkeypatch.setattr(superbpe, "BackgroundCount", Spy)
    # Stage 2's passes on two halves of the words (whatever their number here), except
    # with one thread or under a budget.
    monkeypatch.setattr(superbpe, "HALVES_MIN_WORDS", 0)
    parts, real_halves = [], superbpe.halves

    def halves(*args):
        out = real_halves(*args)
        parts.append(len(out))
        return out

    monkeypatch.setattr(superbpe, "halves", halves)
    for options, overlapped in (({"num_threads": 2}, True), ({"num_threads": 1}, False),
                                ({"num_threads": 2, "max_memory": 8 << 30}, False)):
        if entry == "train":
            if "max_memory" in options:
                continue  # train() has no budget
            tok = fb.train(docs, vocab_size=360, superbpe_transition=300, **options)
            assert_same_model(tok, model)
        else:
            tok = fb.train_files([str(corpus)], vocab_size=360, superbpe_transition=300,
                                 **options)
            assert_same_model(tok, whole)
        assert started == ([1] if overlapped else []), options
        assert set(parts) == ({2} if overlapped else {1}), options
        started.clear()
        parts.clear()


@pytest.mark.parametrize("threads", [1, 2])
def test_report_gives_stage_two_seconds(threads):
    """The report times stage 2's phases: counting (and what of it stage 1's merge did not
    hide), encoding the words, pair counting and the cut, the merge kernel."""
    docs = [doc for seed in range(41, 44) for doc in tie_heavy_corpus(seed, 200)]
    _, report = fb.train(docs, vocab_size=360, superbpe_transition=300, num_threads=threads,
                         return_report=True)
    seconds = report["superbpe_stage2_seconds"]
    assert set(seconds) == {"counting", "counting_after_stage1", "encoding", "pairs_and_cut",
                            "merging"}
    assert all(isinstance(v, float) and v >= 0 for v in seconds.values())
    assert seconds["counting"] > 0 and seconds["merging"] > 0
    if threads == 1:  # in turn: all of the count came after stage 1
        assert seconds["counting_after_stage1"] == seconds["counting"]


def test_stage_one_failure_cancels_the_stage_two_count(monkeypatch):
    """An error (or Ctrl-C) in stage 1's merge cancels the background count: it stops
    before its next batch instead of reading the rest of the corpus for nothing."""
    from fastbpe_nb import superbpe, training
    from fastbpe_nb.errors import Cancelled

    import threading

    cancelled, go = [], threading.Event()
    real_cancel, real_count = superbpe.BackgroundCount.cancel, superbpe.Stage2.count_texts
    monkeypatch.setattr(superbpe.BackgroundCount, "cancel",
                        lambda self: cancelled.append(self) or real_cancel(self) or go.set())
    # The count starts only once cancel() ran: the order is fixed, not a race.
    monkeypatch.setattr(superbpe.Stage2, "count_texts",
                        lambda self, texts, cancel: go.wait(60) and real_count(self, texts,
                                                                                cancel))

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train_from_table", fail)
    with pytest.raises(KeyboardInterrupt):
        fb.train(tie_heavy_corpus(3, 60), vocab_size=360, superbpe_transition=300,
                 num_threads=2)
    assert len(cancelled) == 1
    with pytest.raises(Cancelled):  # stopped before its first batch
        cancelled[0].result(timeout=60)


def test_a_cancelled_count_stops_before_its_next_batch(tmp_path):
    import threading

    from fastbpe_nb.errors import Cancelled
    from fastbpe_nb.superbpe import BackgroundCount
    from fastbpe_nb.training import count_files
    from fastbpe_nb.word_table import count_corpus

    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        count_corpus(["a b c"] * 10, "gpt2", cancel=stop)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\n" * 10, encoding="utf-8")
    with pytest.raises(Cancelled):
        count_files([str(corpus)], "text", pattern="gpt2", cancel=stop)
    assert count_corpus(["a b c"] * 10, "gpt2", cancel=threading.Event()).n_unique == 3
    # The thread's error reaches the caller of result().
    job = BackgroundCount(lambda cancel: count_corpus(["x"], "gpt2", cancel=stop))
    with pytest.raises(Cancelled):
        job.result()
    assert BackgroundCount(lambda cancel: 42).result() == 42


def test_max_token_length_counts_the_bytes_of_stage_one_tokens():
    # Stage 2's base tokens are merged already: a limit of 6 bytes must count their bytes
    # (the kernel's base_units), not one unit per stage-1 token.
    docs = tie_heavy_corpus(3, 60)
    model = ref.train_superbpe(docs, transition=300, vocab_size=420, max_token_length=6)
    tok = fb.train(docs, vocab_size=420, superbpe_transition=300, max_token_length=6)
    assert_same_model(tok, model)
    assert max(len(t) for t in tok.vocab) == 6


def test_transition_at_vocab_size_is_stage_one_with_the_stage_two_pattern():
    docs = tie_heavy_corpus(5)
    plain = fb.train(docs, vocab_size=266)
    tok = fb.train(docs, vocab_size=266, superbpe_transition=266)
    assert len(plain.merges) == 10 and np.array_equal(tok.merges, plain.merges)
    assert tok.pattern == SUPERBPE_PATTERN


def test_iterator_and_arrow_inputs_and_train_files(tmp_path):
    import pyarrow as pa

    docs = tie_heavy_corpus(7)
    want = fb.train(docs, vocab_size=350, superbpe_transition=300)
    assert np.array_equal(fb.train(iter(docs), vocab_size=350, superbpe_transition=300).merges,
                          want.merges)
    assert np.array_equal(fb.train(pa.array(docs), vocab_size=350,
                                   superbpe_transition=300).merges, want.merges)
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"{i:03}.txt")
        paths[-1].write_text(doc, encoding="utf-8")
    from_files = fb.train_files([str(p) for p in paths], vocab_size=350, superbpe_transition=300)
    assert np.array_equal(from_files.merges, want.merges)
    assert from_files.pattern == want.pattern


def test_own_stage_two_pattern():
    docs = tie_heavy_corpus(8)
    pattern = r"[^\n]+|\n"
    model = ref.train_superbpe(docs, transition=290, vocab_size=380, superbpe_pattern=pattern)
    tok = fb.train(docs, vocab_size=380, superbpe_transition=290, superbpe_pattern=pattern)
    assert_same_model(tok, model)
    assert tok.pattern == pattern


def test_save_load_gives_the_same_encoder(tmp_path):
    docs = tie_heavy_corpus(9)
    tok = fb.train(docs, vocab_size=380, superbpe_transition=290)
    tok.save(tmp_path / "m.json")
    back = fb.load(tmp_path / "m.json")
    assert back.pattern == tok.pattern and np.array_equal(back.merges, tok.merges)
    for doc in tie_heavy_corpus(10, 10):
        assert back.encode(doc) == tok.encode(doc)


def encoded_all(tok, other, docs):
    return all(tok.encode(d) == other.encode(d) for d in docs)


def test_exports(tmp_path):
    """tokenizer.json expresses SuperBPE (a Split regex before ByteLevel); a .tiktoken file
    holds the ranks and, as for every tokenizer, the caller passes the pattern; a
    SentencePiece .model cannot hold a byte-level model and is refused by name."""
    docs = tie_heavy_corpus(11, 80)
    tok = fb.train(docs, vocab_size=420, superbpe_transition=300)
    held = tie_heavy_corpus(12, 20)
    tok.to_huggingface(tmp_path / "tokenizer.json")
    assert encoded_all(tok, fb.from_huggingface(tmp_path / "tokenizer.json"), held)
    tok.to_tiktoken(tmp_path / "t.tiktoken")
    ranks = fb.from_tiktoken(tmp_path / "t.tiktoken", pattern=tok.pattern)
    assert encoded_all(tok, ranks, held)
    with pytest.raises(fb.LossyExportError, match="bytes"):
        tok.to_sentencepiece(tmp_path / "x.model")


def test_huggingface_tokenizers_encodes_the_export_alike(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    docs = tie_heavy_corpus(13, 80)
    tok = fb.train(docs, vocab_size=420, superbpe_transition=300)
    tok.to_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for doc in tie_heavy_corpus(14, 20):
        assert hf.encode(doc).ids == tok.encode(doc)


def test_tiktoken_encodes_the_export_alike(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    docs = tie_heavy_corpus(15, 80)
    tok = fb.train(docs, vocab_size=420, superbpe_transition=300)
    tok.to_tiktoken(tmp_path / "t.tiktoken")
    enc = tiktoken.Encoding("superbpe", pat_str=tok.pattern,
                            mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "t.tiktoken")),
                            special_tokens={})
    for doc in tie_heavy_corpus(16, 20):
        assert enc.encode_ordinary(doc) == tok.encode(doc)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(vocab_size=300, superbpe_transition=301), fb.TrainingError, "above vocab_size"),
    (dict(vocab_size=300, superbpe_transition=255), fb.TrainingError, "256 bytes"),
    (dict(vocab_size=300, superbpe_transition=257, special_tokens=["<s>", "</s>"]),
     fb.TrainingError, "special tokens"),
    (dict(vocab_size=300, superbpe_transition=-1), ValueError, "non-negative"),
    (dict(vocab_size=300, superbpe_transition=True), ValueError, "non-negative"),
    (dict(vocab_size=300, superbpe_transition=280, base="chars"), fb.TrainingError,
     "byte-level"),
    (dict(vocab_size=300, superbpe_transition=280, whitespace="\u2581"), TypeError,
     "superbpe_transition"),
    (dict(vocab_size=300, superbpe_transition=280, superbpe_pattern="gtp2"), fb.PatternError,
     "gpt2"),
])
def test_refused_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        fb.train(["ab ab, ab"], **kwargs)


def test_stage_two_pattern_needs_a_transition(tmp_path):
    with pytest.raises(TypeError, match="superbpe_transition"):
        fb.train(["ab ab"], vocab_size=300, superbpe_pattern=r"\S+")
    with pytest.raises(TypeError, match="superbpe_transition"):
        fb.train_files([str(tmp_path / "x.txt")], vocab_size=300, superbpe_pattern=r"\S+")


def test_word_dict_and_counts_file_are_refused(tmp_path):
    with pytest.raises(fb.TrainingError, match="dict"):
        fb.train({"ab": 3, "b a": 2}, vocab_size=300, superbpe_transition=280)
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab ab, ab\n" * 20, encoding="utf-8")
    fb.count_to_file([str(corpus)], tmp_path / "counts.arrow")
    with pytest.raises(fb.TrainingError, match="counts file"):
        fb.train_files([str(tmp_path / "counts.arrow")], vocab_size=300, superbpe_transition=280)


def test_cli_train_superbpe(tmp_path):
    from fastbpe_nb.cli import main

    corpus = tmp_path / "c.txt"
    docs = tie_heavy_corpus(17, 60)
    corpus.write_text("".join(docs), encoding="utf-8")
    out = tmp_path / "m.json"
    assert main(["train", str(corpus), "-o", str(out), "--vocab-size", "380",
                 "--superbpe-transition", "300", "-q"]) == 0
    tok = fb.load(out)
    want = fb.train_files([str(corpus)], vocab_size=380, superbpe_transition=300)
    assert np.array_equal(tok.merges, want.merges) and tok.pattern == SUPERBPE_PATTERN


# The scanner's matcher of the stage-2 pattern (kernels/scan.py, pieces_superbpe) against
# regex.findall (tests/test_scan.py runs all its window and stream tests on it too).

def matcher_pieces(texts, n_threads=1):
    from fastbpe_nb._scanner import scan_offsets

    raw = [t.encode("utf-8", "surrogateescape") for t in texts]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    data = b"".join(raw)
    pieces, doc_pieces = scan_offsets(data, offsets, "superbpe", n_threads)
    out = []
    for d in range(len(texts)):
        bounds = pieces[doc_pieces[d]:doc_pieces[d + 1] + 1]
        out.append([data[a:b].decode("utf-8", "surrogateescape")
                    for a, b in zip(bounds[:-1], bounds[1:])] if len(bounds) > 1 else [])
    return out


def findall(text):
    import regex

    return regex.findall(SUPERBPE_PATTERN, text)


@settings(max_examples=300 if not NOJIT else 60, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(
    list("ab1٣ \t\n\r/.,!?-'中é") + ["\u00a0", "\u2028", "\U0001F600", "\udc80"]),
    max_size=30), min_size=1, max_size=5))
def test_stage_two_matcher_equals_regex(texts):
    assert matcher_pieces(texts) == [findall(t) for t in texts]


def test_stage_two_matcher_on_corpora():
    from fbtest import CORPORA

    texts = [p.read_text(encoding="utf-8")[:200_000] for p in sorted(CORPORA.glob("*.txt"))]
    if not texts:
        pytest.skip("no shared corpora")
    assert matcher_pieces(texts) == [findall(t) for t in texts]


def test_stage_two_matcher_on_corpora_in_parallel_blocks():
    from fbtest import CORPORA

    texts = [line for p in sorted(CORPORA.glob("*.txt"))
             for line in p.read_text(encoding="utf-8")[:100_000].splitlines(keepends=True)]
    if not texts:
        pytest.skip("no shared corpora")
    assert matcher_pieces(texts, n_threads=2) == matcher_pieces(texts)


@settings(max_examples=150 if not NOJIT else 30, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(list("ab1 \n.,!中") + ["\udc80"]),
                              max_size=20), min_size=1, max_size=9),
       n_blocks=st.integers(1, 9), skip=st.integers(0, 3))
def test_parallel_matcher_equals_serial(texts, n_blocks, skip):
    """Every block count (up to one per document), empty documents, a batch that does not
    start at byte 0: the same pieces and document offsets as the serial kernel."""
    from fastbpe_nb._scanner import PATTERN_IDS, class_table, scanner_tables
    from fastbpe_nb.kernels.scan import (PATTERN_SUPERBPE, STREAM_BYTES, WINDOW_BYTES,
                                         scan_batch, scan_batch_parallel)

    raw = [t.encode("utf-8", "surrogateescape") for t in texts]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    data = np.frombuffer(b"#" * skip + b"".join(raw), dtype=np.uint8)
    offsets += skip
    stage1, stage2 = class_table()
    assert PATTERN_IDS["superbpe"] == PATTERN_SUPERBPE
    args = (data, offsets, PATTERN_SUPERBPE, stage1, stage2, scanner_tables(), WINDOW_BYTES,
            STREAM_BYTES)
    want = scan_batch(*args)
    got = scan_batch_parallel(*args, min(n_blocks, len(raw)))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_invalid_utf8_is_one_other_character_per_byte():
    # "\xff\xfe" is a run of two "other" characters (a punctuation run), "\xff" alone a gap.
    text = b"a\xff\xfe b \xff c".decode("utf-8", "surrogateescape")
    assert matcher_pieces([text]) == [findall(text)]
    assert findall(text) == ["a", "\udcff\udcfe", " b \udcff c"]


@pytest.mark.parametrize("text", [
    "1", "12", "123", "1234", "1234567", "a12345b", "١٢٣٤٥", "x 1 22 333 4444",
    "..", " ..", "a..b", " ...\n/x", "..//\r\n/ y", "a. b", "a.b", " . a", ".", "!?!",
    "  x", " x", "a  \n", "a   ", "\t\t x", " \t", "\r\n\r\nx", "a\nb", "a \n b",
    "by the way, I am 12 years old!! ok", "def f(x):\n    return x[0] + 1\n", "中文 字, 中",
])
def test_stage_two_matcher_cases(text):
    assert matcher_pieces([text]) == [findall(text)]
