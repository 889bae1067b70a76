"""The merge kernel's own paths (kernels/merge.py) against the specification.

The kernel keeps a thresholded heap (raised when it fills with rare pairs, lowered and
refilled from the table when it runs dry), a pair table whose records move (it grows, and
dead pairs are deleted in place), recycled word-list nodes and a read-ahead ring. Large
tables take these paths on their own; here small ones are driven into each of them (a
heap floor of 1, a read-ahead of 1 word ...) and every run must learn exactly
``reference.train``'s merges, ids and counts. The event counters in ``progress`` prove
that the cases reached each path, so this test fails if they stop doing so.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastbpe_nb import reference as ref
from fastbpe_nb.kernels.merge import (
    N_PROGRESS,
    PROG_GROWS,
    PROG_PURGES,
    PROG_RAISES,
    PROG_REBUILDS,
    TIE_BYTES,
    TIE_FIRST,
    TIE_RANKS,
    train_merges,
    word_index_rows,
)
from fastbpe_nb.merge_loop import DENSE_BASE

from fbtest import NOJIT

TIE_MODES = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST, "bytes": TIE_BYTES}
EVENTS = {"rebuilds": PROG_REBUILDS, "raises": PROG_RAISES, "purges": PROG_PURGES,
          "grows": PROG_GROWS}


def zipf_words(seed: int, n_words: int) -> dict[str, int]:
    """``{word: count}`` of ``n_words`` draws of words built from a few dozen syllables,
    Zipf-distributed: long shared pieces (many merges, many new pairs) and a long tail."""
    rng = random.Random(seed)
    syllables = ["".join(rng.choices("abcdefghij klmnop", k=rng.randint(1, 3)))
                 for _ in range(40)]
    weights = [1 / (k + 1) for k in range(len(syllables))]
    words: dict[str, int] = {}
    for _ in range(n_words):
        w = "".join(rng.choices(syllables, weights, k=rng.randint(1, 5)))
        words[w] = words.get(w, 0) + rng.choice((1, 1, 2, 7))
    return words


def word_table(words, extra_base=0, symbol_type=np.int32):
    """``words`` ({word: count}) as the kernel's table, and its base tokens: the 256 bytes,
    then ``extra_base`` more (b"\\xff" * 2, * 3 ...: no merge of the ASCII words makes
    them): a wider alphabet, whose new ids the caller shifts back."""
    raw = [w.encode("utf-8") for w in words]
    symbols = np.frombuffer(b"".join(raw), np.uint8).astype(symbol_type)
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    counts = np.array(list(words.values()), np.int64)
    base = [bytes([b]) for b in range(256)] + [b"\xff" * (k + 2) for k in range(extra_base)]
    return symbols, offsets, counts, base


def kernel_merges(words, tie, num_merges, **knobs):
    """The kernel's (merges, ids, counts) on ``words`` and its event counts."""
    extra = knobs.pop("extra_base", 0)
    symbols, offsets, counts, base = word_table(words, extra,
                                                knobs.pop("symbol_type", np.int32))
    ranks = ref.hf_byte_ranks() if tie == "hf" else list(range(256))
    rows = word_index_rows(len(symbols), len(counts), int(np.diff(offsets).max()))
    nodes = np.empty((rows, 2), knobs.pop("node_type", np.int32))
    progress = np.zeros(N_PROGRESS, np.int64)
    tok_off = np.zeros(len(base) + 1, np.int64)
    np.cumsum([len(b) for b in base], out=tok_off[1:])
    ranks = list(ranks) + list(range(256, 256 + extra))
    out = train_merges(symbols, offsets, counts, tok_off,
                       np.frombuffer(b"".join(base), np.uint8).copy(), np.asarray(ranks, np.int64),
                       TIE_MODES[tie], num_merges, 1 << 40, 1, 1 << 40, progress, nodes,
                       knobs.pop("index_check_rows", 1 << 20), knobs.pop("lookahead", 16),
                       knobs.pop("heap_floor", 1), None, 1, knobs.pop("dense_base", DENSE_BASE))
    assert not knobs, knobs
    events = {name: int(progress[slot]) for name, slot in EVENTS.items()}
    return [a.tolist() for a in out], events


CASES = [  # (seed, unique-ish words drawn, merges, knobs)
    (1, 1500, 250, {}),
    (2, 1500, 250, {"lookahead": 1}),
    (5, 600, 100, {"lookahead": 0, "heap_floor": 0}),  # taken as 1
    (3, 1200, 200, {"lookahead": 3, "node_type": np.int64}),
    (4, 1500, 250, {"heap_floor": 2}),
    (6, 1500, 250, {"symbol_type": np.int16}),  # (merge_loop.symbol_dtype: ids < 2**15)
]


@pytest.mark.parametrize("tie", list(TIE_MODES))
def test_kernel_paths_learn_the_reference_merges(tie):
    seen = dict.fromkeys(EVENTS, 0)
    for seed, n_words, num_merges, knobs in CASES[: 2 if NOJIT else None]:
        words = zipf_words(seed, n_words // (4 if NOJIT else 1))
        model = ref.train(words=words, num_merges=num_merges, tie_break=tie)
        got, events = kernel_merges(words, tie, num_merges, **dict(knobs))
        want = [[list(p) for p in model.merges], model.merge_ids, model.merge_counts]
        assert got == want, (tie, seed, knobs)
        assert len(got[0]) == num_merges
        for name, n in events.items():
            seen[name] += n
    if not NOJIT:  # the cases must keep reaching every path
        assert all(seen.values()), seen


@pytest.mark.parametrize("tie", list(TIE_MODES))
@pytest.mark.parametrize("extra_base, dense_base", [(0, 0), (40, 0), (40, 296), (40, 295)])
def test_first_pairs_counted_densely_or_by_probing(tie, extra_base, dense_base):
    """Alphabets up to ``dense_base`` (merge_loop.DENSE_BASE: bytes) count their first pairs
    in a dense array, wider ones (SuperBPE's stage 2, characters) by probing the pair table
    as it grows: the reference's merges either way, for the bytes and for 296 base tokens."""
    for seed, n_words, num_merges in ((1, 1500, 250), (7, 400, 120)):
        words = zipf_words(seed, n_words // (4 if NOJIT else 1))
        model = ref.train(words=words, num_merges=num_merges, tie_break=tie)
        want = [[list(p) for p in model.merges], model.merge_ids, model.merge_counts]
        (merges, ids, counts), _ = kernel_merges(words, tie, num_merges, extra_base=extra_base,
                                                 dense_base=dense_base)
        top = 256 + extra_base
        back = [[[x - extra_base if x >= top else x for x in m] for m in merges],
                [x - extra_base for x in ids], counts]
        assert back == want, (tie, seed)


def test_small_heap_floor_and_read_ahead_change_nothing():
    """The knobs that only change speed give the same merges on a table of real text."""
    from fbtest import CORPORA

    import fastbpe_nb as fb

    files = sorted(CORPORA.glob("*.txt"))[:1] if CORPORA.exists() else []
    text = files[0].read_text(encoding="utf-8")[:300_000] if files else (
        " ".join(zipf_words(9, 3000)) * 3)
    counter = fb.word_table.count_corpus([text], "gpt2")
    data, offsets, counts = counter.table()
    words = {data[offsets[i]:offsets[i + 1]].tobytes().decode("utf-8", "surrogateescape"):
             int(counts[i]) for i in range(len(counts))}
    results = [kernel_merges(words, "ids", 2000, **knobs)[0]
               for knobs in ({"heap_floor": 1024}, {"heap_floor": 1, "lookahead": 1},
                             {"heap_floor": 7, "lookahead": 64})]
    assert results[0] == results[1] == results[2]
    assert len(results[0][0]) > 500


@pytest.mark.skipif(NOJIT, reason="32 k merges: minutes without the JIT")
@pytest.mark.parametrize("tie", ["ids", "first"])
def test_int16_symbols_up_to_the_last_id_they_hold(tie):
    """``symbol_dtype``'s int16 up to its limit: a vocabulary of 32768 makes ids up to 32767,
    the largest int16, and learns what int32 symbols learn (merges, ids and counts)."""
    from fbtest import CORPORA

    import fastbpe_nb as fb
    from fastbpe_nb.merge_loop import symbol_dtype

    assert symbol_dtype(1 << 15) == np.int16 and symbol_dtype((1 << 15) + 1) == np.int32
    files = sorted(CORPORA.glob("fortunes_*.txt"))
    if not files:
        pytest.skip("the shared corpora are not here")
    texts = [f.read_text(encoding="utf-8") for f in files]
    counter = fb.word_table.count_corpus(texts, "gpt2")
    data, offsets, counts = counter.table()
    words = {data[offsets[i]:offsets[i + 1]].tobytes().decode("utf-8", "surrogateescape"):
             int(counts[i]) for i in range(len(counts))}
    narrow, _ = kernel_merges(words, tie, (1 << 15) - 256, symbol_type=np.int16)
    wide, _ = kernel_merges(words, tie, (1 << 15) - 256)
    assert narrow == wide
    assert max(narrow[1]) == (1 << 15) - 1  # the last id made is int16's largest


@pytest.mark.parametrize("seed", range(20))
def test_purge_keeps_every_live_record_findable(seed):
    """Dead records deleted in place (backward shift, runs that wrap past the table's
    end included): every live pair is still found with its record, no dead one is."""
    from fastbpe_nb.kernels.merge import R_COUNT, R_HEAD, R_KEY, _init_record, _new_table, \
        _pair_hash, _probe, _purge

    rng = random.Random(seed)
    rec = _new_table(16, 4)
    mask = 15
    keys = []
    while len(keys) < 12:  # 3/4 full, homes crowded near the end so that runs wrap
        key = (rng.randrange(1 << 31) << 32) | rng.randrange(1 << 31)
        if (_pair_hash(key) & mask) >= 11 or rng.random() < 0.2:
            q = _probe(rec, key)
            if rec[q, R_KEY] == -1:
                _init_record(rec, q, key)
                keys.append(key)
    counts = {k: rng.choice((0, 0, 1, 5)) for k in keys}
    for k in keys:
        q = _probe(rec, k)
        rec[q, R_COUNT] = counts[k]
        rec[q, R_HEAD] = counts[k] * 1000 + 7  # the record's other columns move with it
    assert _purge(rec) == sum(1 for c in counts.values() if c == 0)
    for k, c in counts.items():
        q = _probe(rec, k)
        if c:
            assert rec[q, R_KEY] == k and rec[q, R_COUNT] == c and rec[q, R_HEAD] == c * 1000 + 7
        else:
            assert rec[q, R_KEY] == -1


def test_too_many_words_is_a_training_error():
    """The kernel numbers words in 32 bits: 2**31 of them are refused with a clear error
    before anything is allocated (read-only broadcast views: no memory behind them)."""
    from fastbpe_nb.errors import TrainingError
    from fastbpe_nb.merge_loop import UNLIMITED, run_merge_kernel

    n = 2**31
    counts = np.broadcast_to(np.int64(1), (n,))
    offsets = np.broadcast_to(np.int64(0), (n + 1,))
    with pytest.raises(TrainingError, match="2,147,483,648 unique words"):
        run_merge_kernel(np.zeros(0, np.int32), offsets, counts, [bytes([b]) for b in range(256)],
                         np.arange(256, dtype=np.int64), TIE_RANKS, UNLIMITED, UNLIMITED, 1,
                         UNLIMITED)


@pytest.mark.parametrize("bad", [0, -3])
def test_a_count_below_one_is_a_training_error(bad):
    """A word table with a count of 0 or less (no caller of ours builds one) is refused,
    naming the row, before the kernel sees it."""
    from fastbpe_nb.errors import TrainingError
    from fastbpe_nb.merge_loop import UNLIMITED, run_merge_kernel

    symbols = np.frombuffer(b"abcabcab", np.uint8).astype(np.int32)
    with pytest.raises(TrainingError, match=f"word 1: count {bad} is not positive"):
        run_merge_kernel(symbols, np.array([0, 3, 6, 8], np.int64),
                         np.array([2, bad, 1], np.int64), [bytes([b]) for b in range(256)],
                         np.arange(256, dtype=np.int64), TIE_RANKS, UNLIMITED, UNLIMITED, 1,
                         UNLIMITED)



@pytest.mark.parametrize("symbols,offsets,match", [
    ([97, 98, -1, 99], [0, 2, 4], "base token ids in 0..255, got -1..99"),
    ([97, 256, 99, 98], [0, 2, 4], "base token ids in 0..255, got 97..256"),
    ([97, 98, 99, 98], [0, 3, 2], "offsets must rise"),
    ([97, 98, 99, 98], [0, 2, 5], "offsets must rise"),
    ([97, 98, 99, 98], [1, 2, 4], "offsets must rise"),
])
def test_a_malformed_word_table_is_a_training_error(symbols, offsets, match):
    """Symbols outside the base tokens or offsets that do not tile the symbols (the kernel
    reads both without bounds checks; a symbol of -1 once crashed it) are refused first."""
    from fastbpe_nb.errors import TrainingError
    from fastbpe_nb.merge_loop import UNLIMITED, run_merge_kernel

    with pytest.raises(TrainingError, match=match):
        run_merge_kernel(np.array(symbols, np.int32), np.array(offsets, np.int64),
                         np.array([1, 1], np.int64), [bytes([b]) for b in range(256)],
                         np.arange(256, dtype=np.int64), TIE_RANKS, UNLIMITED, UNLIMITED, 1,
                         UNLIMITED)


@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.integers(1, 6), min_size=1, max_size=300), data=st.data())
def test_the_heap_pops_in_priority_order(counts, data):
    """``_push`` then ``_pop_root`` (Floyd's bottom-up removal of the root) give the entries
    in priority order: count first (higher), then the tie key (lower; TIE_BYTES: the
    pair's token bytes compared), with pops and pushes interleaved as the kernel does.
    Counts are drawn from a few values, so almost every comparison goes to the tie key."""
    from fastbpe_nb.kernels.merge import N_HCOLS, _pop_root, _push

    tie_mode = data.draw(st.sampled_from([TIE_RANKS, TIE_BYTES]))
    n_tokens = 64
    tokens = [bytes(data.draw(st.lists(st.integers(97, 100), min_size=1, max_size=3)))
              + bytes([t]) for t in range(n_tokens)]  # distinct, many sharing a prefix
    tok_off = np.zeros(n_tokens + 1, np.int64)
    np.cumsum([len(t) for t in tokens], out=tok_off[1:])
    tok_data = np.frombuffer(b"".join(tokens), np.uint8).copy()
    keys = data.draw(st.lists(st.integers(0, n_tokens * n_tokens - 1), min_size=len(counts),
                              max_size=len(counts), unique=True))
    entries = [(c, (k // n_tokens) << 32 | (k % n_tokens)) for c, k in zip(counts, keys)]

    def priority(entry):
        count, key = entry
        if tie_mode == TIE_BYTES:
            return (-count, tokens[key >> 32], tokens[key & 0xFFFFFFFF])
        return (-count, key)

    heap = np.empty((len(entries), N_HCOLS), np.int64)
    hn, popped = 0, []
    pops_between = data.draw(st.lists(st.integers(0, 3), min_size=len(entries),
                                      max_size=len(entries)))
    for entry, n_pops in zip(entries, pops_between):
        hn = _push(heap, hn, entry[0], entry[1], entry[1], tie_mode, tok_off, tok_data)
        for _ in range(min(n_pops, hn)):
            best = min((tuple(heap[i]) for i in range(hn)),
                       key=lambda row: priority((row[0], row[2])))
            assert tuple(heap[0]) == best
            popped.append((int(heap[0, 0]), int(heap[0, 2])))
            hn -= 1
            _pop_root(heap, hn, tie_mode, tok_off, tok_data)
    drained = len(popped)
    while hn:
        popped.append((int(heap[0, 0]), int(heap[0, 2])))
        hn -= 1
        _pop_root(heap, hn, tie_mode, tok_off, tok_data)
    assert sorted(popped) == sorted(entries)  # each entry once
    assert popped[drained:] == sorted(popped[drained:], key=priority)  # the rest in order
