"""The two-thread merge kernel (kernels/merge_halves.py) against the specification.

``train_merges_halves`` keeps a pair table, word index and raised-pairs list per half of
the words, each owned by one thread (``halves_worker`` has the second), and one heap of
summed counts. Every run must learn exactly ``reference.train``'s merges, ids and counts,
wherever the words are cut in two (down to a half of one word, or every other word as
``merge_loop.kernel_table`` orders them), whichever of its paths a merge takes: the heap
rebuilt and its threshold raised (a heap floor of 1), each half's table purged and grown.
The event counters in ``progress`` prove that the cases reach those paths. The hand-overs
themselves are tested for what can go wrong: a failed worker, a stop request, a forked
child, halves that do not fit.
"""
from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import merge_loop
from fastbpe_nb import reference as ref
from fastbpe_nb.kernels.merge import (
    C_SPARE,
    N_COUNTERS,
    N_PROGRESS,
    PROG_BUDGET,
    PROG_GROWS,
    PROG_PURGES,
    PROG_RAISES,
    PROG_REBUILDS,
    TIE_BYTES,
    TIE_FIRST,
    TIE_RANKS,
    word_index_rows,
)
from fastbpe_nb.kernels.merge_halves import (
    MAILBOX_SLOTS,
    W_DONE,
    W_FAILED,
    halves_worker,
    post_exit,
    train_merges_halves,
    worker_events,
)
from fastbpe_nb.merge_loop import DENSE_BASE
from fastbpe_nb.parallel import default_threads

from fbtest import NOJIT
from test_merge_kernel import word_table, zipf_words

TIES = {"ids": TIE_RANKS, "hf": TIE_RANKS, "bytes": TIE_BYTES}
EVENTS = {"rebuilds": PROG_REBUILDS, "raises": PROG_RAISES, "purges": PROG_PURGES,
          "grows": PROG_GROWS}
NEVER = 1 << 40


def split_table(symbols, offsets, counts, mid):
    """The table's words in two halves: before and from word ``mid``, or (``mid`` None)
    every other word in each (as ``merge_loop.kernel_table`` orders a sorted table)."""
    if mid is None:
        order = np.r_[0:len(counts):2, 1:len(counts):2]
        pieces = [symbols[offsets[w]:offsets[w + 1]] for w in order]
        symbols = np.concatenate(pieces) if pieces else symbols[:0]
        offsets = np.r_[0, np.cumsum([len(p) for p in pieces])].astype(np.int64)
        counts = counts[order]
        mid = (len(counts) + 1) // 2
    cut = int(offsets[mid])
    return (symbols[:cut].copy(), offsets[:mid + 1], counts[:mid], symbols[cut:].copy(),
            offsets[mid:] - cut, counts[mid:])


def run_halves(parts, base, ranks, tie, num_merges, *, heap_floor=1, lookahead=16,
               dense_base=DENSE_BASE, max_units=NEVER, base_units=None, min_count=1,
               progress=None, worker=None):
    """``train_merges_halves`` on the halves ``parts`` with ``halves_worker`` (or
    ``worker``) on a thread beside it, as ``merge_loop._run_halves`` runs them, with the
    kernels' knobs; returns its arrays, ``progress`` and the worker's error if any."""
    tok_off = np.zeros(len(base) + 1, np.int64)
    np.cumsum([len(b) for b in base], out=tok_off[1:])
    max_len = max(int(np.diff(parts[1]).max(initial=0)), int(np.diff(parts[4]).max(initial=0)))
    nodes = [np.empty((word_index_rows(len(parts[3 * k]), len(parts[3 * k + 2]), max_len), 2),
                      np.int32) for k in (0, 1)]
    ring = 2
    while ring < max(1, lookahead) + 1:
        ring *= 2
    private = np.zeros((4, 64), np.int64)  # (rows 512 bytes apart)
    counters, rings = private[0:2, :N_COUNTERS], private[2:4, :ring]
    counters[:, C_SPARE] = -1
    mailbox = np.zeros(MAILBOX_SLOTS, np.int64)
    mailbox[W_DONE] = -1
    events = np.zeros(N_PROGRESS, np.int64)
    progress = np.zeros(N_PROGRESS, np.int64) if progress is None else progress
    failure = []

    def work():
        try:
            (worker or halves_worker)(mailbox, *parts[3:], nodes[1], len(base), dense_base,
                                      counters[1], rings[1], lookahead, 1 << 20, events, 64)
        except BaseException as exc:
            failure.append(exc)
            mailbox[W_FAILED] = 1

    thread = threading.Thread(target=work)
    thread.start()
    try:
        out = train_merges_halves(
            mailbox, *parts[:3], nodes[0], dense_base, counters[0], rings[0], tok_off,
            np.frombuffer(b"".join(base), np.uint8).copy(), np.asarray(ranks, np.int64),
            TIES[tie], num_merges, NEVER, min_count, max_units, progress, 1 << 20, lookahead,
            heap_floor, base_units, 64)
    finally:
        post_exit(mailbox)
        thread.join(timeout=600)
        assert not thread.is_alive()
    worker_events(progress, events)
    return out, progress, failure


def halves_merges(words, tie, num_merges, mid=None, *, extra_base=0, **knobs):
    """The two-thread kernel's (merges, ids, counts) on ``words`` cut before word ``mid``
    (None: alternate words), and its event counts."""
    symbols, offsets, counts, base = word_table(words, extra_base)
    ranks = list(ref.hf_byte_ranks() if tie == "hf" else range(256))
    ranks += list(range(256, 256 + extra_base))
    out, progress, failure = run_halves(split_table(symbols, offsets, counts, mid), base,
                                        ranks, tie, num_merges, **knobs)
    assert not failure
    events = {name: int(progress[slot]) for name, slot in EVENTS.items()}
    top = 256 + extra_base  # (new ids shifted back past the extra base tokens)
    merges = [[x - extra_base if x >= top else x for x in m] for m in out[0].tolist()]
    return [merges, [x - extra_base for x in out[1].tolist()], out[2].tolist()], events


def reference_merges(words, tie, num_merges, **options):
    model = ref.train(words=words, num_merges=num_merges, tie_break=tie, **options)
    return [[list(p) for p in model.merges], model.merge_ids, model.merge_counts]


CASES = [  # (seed, words drawn, merges, where the halves meet (a fraction; None: alternate
    # words), knobs)
    (1, 1500, 250, None, {}),
    (2, 1500, 250, 0.1, {"heap_floor": 1024}),
    (3, 1200, 200, 0.9, {"lookahead": 1}),
    (4, 1500, 250, None, {"heap_floor": 2, "extra_base": 40, "dense_base": 0}),
    (5, 600, 100, 0.3, {"heap_floor": 0, "lookahead": 0}),  # (taken as 1)
]


@pytest.mark.parametrize("tie", list(TIES))
def test_every_path_learns_the_reference_merges(tie):
    seen = dict.fromkeys(EVENTS, 0)
    for seed, n_words, num_merges, at, knobs in CASES[: 2 if NOJIT else None]:
        words = zipf_words(seed, n_words // (4 if NOJIT else 1))
        mid = None if at is None else min(max(1, int(at * len(words))), len(words) - 1)
        got, events = halves_merges(words, tie, num_merges, mid, **knobs)
        assert got == reference_merges(words, tie, num_merges), (tie, seed, knobs)
        assert len(got[0]) == num_merges
        for name, n in events.items():
            seen[name] += n
    if not NOJIT:  # the cases must keep reaching every path
        assert all(seen.values()), seen


@settings(max_examples=150, deadline=None)
@given(words=st.dictionaries(st.text("ab c", min_size=1, max_size=9), st.integers(1, 9),
                             min_size=2, max_size=40),
       data=st.data())
def test_any_cut_learns_the_reference_merges(words, data):
    """Tie-heavy tables (three letters, small counts), cut anywhere, down to a half of one
    word, or in alternate words."""
    tie = data.draw(st.sampled_from(list(TIES)))
    mid = data.draw(st.one_of(st.none(), st.integers(1, len(words) - 1)))
    got, _ = halves_merges(words, tie, 60, mid,
                           heap_floor=data.draw(st.sampled_from([1, 1024])))
    assert got == reference_merges(words, tie, 60)


@pytest.mark.parametrize("tie", list(TIES))
def test_token_length_limit_and_min_count(tie):
    """``max_units`` (``max_token_length``), with the base tokens' units given
    (``base_units``: one per byte, as the reference counts them), and ``min_count``
    (``min_frequency``, a table whose merges run out above it): as the reference."""
    words = zipf_words(8, 1200)
    for max_units, min_count in ((3, 1), (NEVER, 9)):
        got, _ = halves_merges(words, tie, 400, len(words) // 2, max_units=max_units,
                               base_units=np.ones(256, np.int64), min_count=min_count)
        want = reference_merges(words, tie, 400, min_frequency=min_count,
                                max_token_length=None if max_units == NEVER else max_units)
        assert got == want


def test_first_tie_rule_and_a_budget_are_refused():
    """The ``first`` rule would need each half's first occurrences joined, and a byte
    budget the halves' tables counted: both are refused (``run_merge_kernel`` takes one
    core for them), and the worker still ends."""
    words = zipf_words(1, 200)
    symbols, offsets, counts, base = word_table(words)
    parts = split_table(symbols, offsets, counts, None)
    for tie, budget in ((TIE_FIRST, 0), (TIE_RANKS, 1 << 30)):
        progress = np.zeros(N_PROGRESS, np.int64)
        progress[PROG_BUDGET] = budget
        TIES["refused"] = tie
        try:
            with pytest.raises(ValueError, match="not supported"):
                run_halves(parts, base, range(256), "refused", 10, progress=progress)
        finally:
            del TIES["refused"]


def test_a_failed_worker_stops_the_merge_loop():
    """A worker that raises (here at once) makes the merge loop raise, not wait for ever."""
    words = zipf_words(2, 300)
    symbols, offsets, counts, base = word_table(words)

    def broken(*args):
        raise MemoryError("worker")

    with pytest.raises(RuntimeError, match="worker thread failed"):
        run_halves(split_table(symbols, offsets, counts, None), base, range(256), "ids", 50,
                   worker=broken)


def test_a_stop_request_ends_both_threads():
    """``progress[1]`` set (Ctrl-C, ``run_merge_kernel``'s ``ask_to_stop``): the loop stops
    before its next merge, says so, and the worker ends."""
    from fastbpe_nb.kernels.merge import STOPPED_ASKED

    words = zipf_words(3, 300)
    symbols, offsets, counts, base = word_table(words)
    progress = np.zeros(N_PROGRESS, np.int64)
    progress[1] = 1
    out, progress, failure = run_halves(split_table(symbols, offsets, counts, None), base,
                                        range(256), "ids", 50, progress=progress)
    assert len(out[0]) == 0 and progress[2] == STOPPED_ASKED and not failure


def _run_kernel(words, tie, halves, num_merges=300):
    symbols, offsets, counts, base = word_table(words)
    ranks = np.asarray(ref.hf_byte_ranks() if tie == "hf" else range(256), np.int64)
    out = merge_loop.run_merge_kernel(
        symbols, offsets, counts, base, ranks, {**TIES, "first": TIE_FIRST}[tie], num_merges,
        NEVER, 1, NEVER, halves=halves)
    return [a.tolist() for a in out]


@pytest.mark.skipif(default_threads() < 2, reason="two threads wanted")
@pytest.mark.parametrize("tie", ["ids", "hf", "bytes", "first"])
def test_run_merge_kernel_on_halves(tie, monkeypatch):
    """``run_merge_kernel(halves=True)`` learns what one core learns; it took the two-core
    kernel (except for the ``first`` rule, which stays on one core) only from
    ``HALVES_MIN_SYMBOLS`` symbols."""
    from fastbpe_nb.kernels import merge_halves

    calls = []
    kernel = merge_halves.train_merges_halves
    monkeypatch.setattr(merge_halves, "train_merges_halves",
                        lambda *args: calls.append(1) or kernel(*args))
    words = zipf_words(3, 1500)
    want = _run_kernel(words, tie, False)
    assert _run_kernel(words, tie, True) == want and not calls  # (below the threshold)
    monkeypatch.setattr(merge_loop, "HALVES_MIN_SYMBOLS", 0)
    assert _run_kernel(words, tie, True) == want
    assert len(calls) == (0 if tie == "first" else 1)


def _merges_in_child(words, tie):
    merge_loop.HALVES_MIN_SYMBOLS = 0
    return _run_kernel(words, tie, True)


@pytest.mark.skipif(NOJIT, reason="the thread pool's fork hazard needs the JIT")
def test_halves_in_a_forked_child():
    """A child forked after the parent merged on two threads does too (its worker is a new
    thread; no thread pool is involved) and learns the parent's merges."""
    words = zipf_words(4, 1500)
    want = _run_kernel(words, "ids", False)
    merge_loop.HALVES_MIN_SYMBOLS, saved = 0, merge_loop.HALVES_MIN_SYMBOLS
    try:
        assert _run_kernel(words, "ids", True) == want  # (the pool has run here)
    finally:
        merge_loop.HALVES_MIN_SYMBOLS = saved
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_merges_in_child, (words, "ids")).get(timeout=600) == want


@pytest.mark.parametrize("tie", list(TIES))
def test_superbpe_stage2_on_halves(tie, monkeypatch):
    """SuperBPE's stage 2 merges on two cores (``halves=True``) and learns the
    reference's merges, ids and counts."""
    from test_superbpe import tie_heavy_corpus

    from fbtest import assert_same_model

    monkeypatch.setattr(merge_loop, "HALVES_MIN_SYMBOLS", 0)
    docs = [doc for seed in range(21, 24) for doc in tie_heavy_corpus(seed, 120)]
    tok = fb.train(docs, vocab_size=420, superbpe_transition=330, tie_break=tie,
                   num_threads=2)
    assert_same_model(tok, ref.train_superbpe(docs, vocab_size=420, transition=330,
                                              tie_break=tie))


@pytest.mark.skipif(default_threads() < 2, reason="two threads wanted")
@pytest.mark.parametrize("tie", list(TIES))
def test_training_on_two_threads(tie, monkeypatch):
    """``train`` merges on two threads when it may (here from any size) and learns the
    reference's model; with ``num_threads=1`` it keeps to one."""
    from fastbpe_nb.kernels import merge_halves
    from test_superbpe import tie_heavy_corpus

    from fbtest import assert_same_model

    calls = []
    kernel = merge_halves.train_merges_halves
    monkeypatch.setattr(merge_halves, "train_merges_halves",
                        lambda *args: calls.append(1) or kernel(*args))
    monkeypatch.setattr(merge_loop, "HALVES_MIN_SYMBOLS", 0)
    docs = [doc for seed in range(31, 34) for doc in tie_heavy_corpus(seed, 120)]
    model = ref.train(docs, vocab_size=400, tie_break=tie)
    assert_same_model(fb.train(docs, vocab_size=400, tie_break=tie, num_threads=2), model)
    assert calls == [1]
    assert_same_model(fb.train(docs, vocab_size=400, tie_break=tie, num_threads=1), model)
    assert calls == [1]


@pytest.mark.skipif(default_threads() < 2, reason="two threads wanted")
def test_halves_that_do_not_fit_merge_on_one_thread(monkeypatch):
    """When the halves' word indexes cannot be allocated (too little address space),
    ``run_merge_kernel`` merges on one thread, with the same merges."""
    from fastbpe_nb.kernels import merge_halves

    def no_room(*args):
        raise MemoryError

    words = zipf_words(6, 1500)
    want = _run_kernel(words, "ids", False)
    monkeypatch.setattr(merge_loop, "HALVES_MIN_SYMBOLS", 0)
    from fastbpe_nb.kernels import merge

    # (16 TiB of index: np.empty fails; the one-thread path then starts small and grows)
    monkeypatch.setattr(merge, "word_index_rows", lambda *args: 1 << 40)
    monkeypatch.setattr(merge_halves, "train_merges_halves", no_room)  # (never reached)
    assert _run_kernel(words, "ids", True) == want
