"""The long-piece algorithms against the specification and against each other.

A piece longer than ``LONG_PIECE`` units is merged by the rank sweep, window by window
(``_merge_windowed``); a window where the sweep gives up (a merge made a pair of lower
rank) goes to the heap (``_merge_long``), as do BPE-dropout pieces. The windows are 8 KiB
in production; here they are a few units wide so that every path (window cuts,
resynchronisation at a shared token, the whole-piece fallback when windows do not meet,
the last window) runs on small inputs that the reference (``reference.encode_symbols``)
can check.
"""

import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb.kernels.encode import (
    _merge_long, _merge_sweep, _merge_windowed, sweep_rank_count,
)
from fastbpe_nb.model import SWEEP_MARGIN, SWEEP_WINDOW
from fastbpe_nb.kernels.hashing import build_rank_table, interleave_table

from fbtest import NOJIT

EXAMPLES = 40 if NOJIT else 200
NO_MAP = np.zeros(0, dtype=np.int32)  # units are base ids already


def tables(merges, merge_ids):
    return build_rank_table(np.asarray(merges, dtype=np.int32).reshape(-1, 2),
                            np.asarray(merge_ids, dtype=np.int32))


def run_all(symbols, keys, vals, window, margin, in_hypothesis=False):
    """(heap, sweep, windowed) results for one piece of base ids, and the heap's token
    starts; the sweep's entry is None where it gave up (a merge made a lower-rank pair)."""
    base = np.asarray(symbols, dtype=np.int32)
    n = len(base)
    pairs = interleave_table(keys, vals)  # the layout the merge kernels read
    heap = base.copy()
    heap_starts = np.empty(n, dtype=np.int32)
    m = _merge_long(heap, n, pairs, 0.0, np.ones(1, np.int64), heap_starts)
    out = [heap[:m].tolist()]
    head = np.full(sweep_rank_count(keys, vals), -1, dtype=np.int32)
    sweep = base.copy()
    starts = np.empty(n, dtype=np.int32)
    m = _merge_sweep(sweep, n, pairs, head, starts)
    assert (head == -1).all(), "the sweep must leave its list heads empty"
    if m >= 0:
        out.append(sweep[:m].tolist())
        assert starts[:m].tolist() == heap_starts[: len(out[0])].tolist()
    else:
        if in_hypothesis:
            event("the sweep gave up: the heap took over")
        out.append(None)
    windowed = np.full(n + 3, -7, dtype=np.int32)
    m = _merge_windowed(base, NO_MAP, 0, n, pairs, head, window, margin, windowed, 3)
    out.append(windowed[3:3 + m].tolist())
    assert (windowed[:3] == -7).all(), "wrote before its output offset"
    # The same through a unit -> base id map, from an offset in the units.
    shifted = np.concatenate([[5, 5], base + 1]).astype(np.int32)
    unmap = np.arange(-1, base.max(initial=0) + 1, dtype=np.int32)
    again = np.empty(n, dtype=np.int32)
    m2 = _merge_windowed(shifted, unmap, 2, n, pairs, head, window, margin, again, 0)
    assert again[:m2].tolist() == out[-1]
    assert (head == -1).all(), "the sweep must leave its list heads empty"
    return out, heap_starts[: len(out[0])]


def merges_over(draw_merges, n_base):
    """Explicit merges whose ids are defined before use (the model-file rule); a merge
    that rebuilds an existing token reuses its id, as in ``model_from_merges``."""
    tokens = [(k,) for k in range(n_base)]
    known = {t: i for i, t in enumerate(tokens)}
    pairs = []
    for a, b in draw_merges:
        a, b = a % len(tokens), b % len(tokens)
        pairs.append((a, b))
        made = tokens[a] + tokens[b]
        if made not in known:
            known[made] = len(tokens)
            tokens.append(made)
    return pairs


@st.composite
def merge_lists(draw, n_base=3):
    raw = draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=16))
    return merges_over(raw, n_base)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_lists(), text=st.lists(st.integers(0, 2), min_size=1, max_size=300),
       window=st.integers(2, 24), margin=st.integers(1, 12))
def test_sweep_and_windows_match_reference(merges, text, window, margin):
    # Base ids 0..2 (so runs and ties are everywhere), merge k makes id 3 + k unless it
    # rebuilds an existing token (then the id is reused, as model files allow).
    margin = min(margin, window - 1) if window > 1 else 1
    alphabet = [chr(97 + k) for k in range(3)]
    model = ref.model_from_merges(merges, base="chars", alphabet=alphabet, pattern=None)
    keys, vals = tables(merges, model.merge_ids)
    expected = ref.encode_symbols(text, model)
    results, starts = run_all(text, keys, vals, window, margin, in_hypothesis=True)
    assert results[0] == results[2] == expected
    assert results[1] in (None, expected)
    # The token starts are the offsets of the tokens' first units.
    lengths = [len(model.token_bytes[t]) for t in expected]
    assert starts.tolist() == np.concatenate([[0], np.cumsum(lengths)[:-1]]).tolist()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)),
                      max_size=20),
       text=st.lists(st.integers(0, 3), min_size=1, max_size=200),
       window=st.integers(2, 16), margin=st.integers(1, 8))
def test_arbitrary_rank_tables(table, text, window, margin):
    # Any pair -> (rank, id) table, as a hand-made or imported file could hold: merges
    # may make ids used by lower ranks, so the sweep gives up often; the result must
    # still be the rule's (reference.encode_symbols reads only merges and merge_ids).
    margin = min(margin, window - 1)
    merges = [(a, b) for a, b, _ in table]
    made = [c for _, _, c in table]
    keys, vals = tables(merges, made)
    expected = ref.encode_symbols(text, SimpleNamespace(merges=merges, merge_ids=made))
    results, _ = run_all(text, keys, vals, window, margin, in_hypothesis=True)
    assert results[0] == results[2] == expected
    assert results[1] in (None, expected)


def trained(docs, n_merges, tie):
    model = ref.train(docs, num_merges=n_merges, pattern=None, tie_break=tie)
    keys, vals = tables(model.merges, model.merge_ids)
    return model, keys, vals


@pytest.mark.parametrize("tie", ["ids", "hf", "first", "bytes"])
@pytest.mark.parametrize("seed", range(4))
def test_trained_tables_on_runs_and_random_text(tie, seed):
    # Runs of one symbol, alternations and random text: the windows must meet (or fall
    # back) and give exactly the reference's tokens for every tie rule.
    rng = random.Random(seed)
    docs = ["a" * rng.randint(1, 40) + "b" * rng.randint(0, 9) for _ in range(30)]
    docs += ["".join(rng.choices("ab", k=30)) for _ in range(10)] + ["ab" * 20, "aab" * 9]
    model, keys, vals = trained(docs, 25, tie)
    texts = ["a" * 257, "ab" * 150 + "a", "b" + "a" * 300, "aab" * 97,
             "".join(rng.choices("ab", k=400)), "".join(rng.choices("aab", k=333))]
    for text in texts:
        symbols = list(text.encode())
        expected = ref.encode_symbols(symbols, model)
        for window, margin in [(2, 1), (5, 2), (16, 3), (64, 8), (SWEEP_WINDOW, SWEEP_MARGIN)]:
            results, _ = run_all(symbols, keys, vals, window, margin)
            # Trained tables never make the sweep give up.
            assert results == [expected] * 3, (text[:20], window, margin)


def test_sweep_gives_up_on_a_lower_rank_pair():
    # Merge 0 joins two tokens that only merges 1 and 2 make. On "abbc" the sweep merges
    # (a, b) at rank 1 and (b, c) at rank 2, which creates the pair (ab, bc) of rank 0:
    # it must stop (-1), leave its list heads empty, and the windowed merge must hand the
    # piece to the heap and still follow the rule.
    merges = [(256, 258), (97, 98), (98, 99)]
    keys, vals = tables(merges, [259, 256, 258])
    assert sweep_rank_count(keys, vals) == 3
    symbols = [97, 98, 98, 99]
    head = np.full(3, -1, dtype=np.int32)
    assert _merge_sweep(np.array(symbols, np.int32), 4, interleave_table(keys, vals), head, np.empty(4, np.int32)) == -1
    assert (head == -1).all()
    model = SimpleNamespace(merges=merges, merge_ids=[259, 256, 258])
    for text in [symbols, symbols * 40, [97] + symbols * 9 + [99]]:
        expected = ref.encode_symbols(text, model)
        for window, margin in [(3, 1), (8, 4), (SWEEP_WINDOW, SWEEP_MARGIN)]:
            results, _ = run_all(text, keys, vals, window, margin)
            assert results[0] == results[2] == expected
    assert expected[:2] == [97, 259]


def test_sweep_sees_a_lower_rank_pair_hidden_by_a_later_chain():
    # Found by hypothesis (test_arbitrary_rank_tables). Merge 0 is (2, 1) -> 0, merge 1 is
    # (1, 0) -> 2. On 1 0 1 0 the rule merges the left (1, 0) first, which makes (2, 1) of
    # rank 0: the answer is 0 0. The sweep takes its rank-1 list in push order, the right
    # pair first; the left merge then sees (2, 2), not (2, 1), and the sweep used to
    # return 2 2. It must see the pair with the right token's old left part and give up.
    keys, vals = tables([(2, 1), (1, 0)], [0, 2])
    model = SimpleNamespace(merges=[(2, 1), (1, 0)], merge_ids=[0, 2])
    head = np.full(sweep_rank_count(keys, vals), -1, dtype=np.int32)
    text = [1, 0, 1, 0]
    assert _merge_sweep(np.array(text, np.int32), 4, interleave_table(keys, vals), head, np.empty(4, np.int32)) == -1
    assert (head == -1).all()
    for text in [[1, 0, 1, 0], [1, 0] * 9, [0] + [1, 0] * 5 + [1], [1, 0, 0, 1, 0, 1, 0]]:
        expected = ref.encode_symbols(text, model)
        for window, margin in [(2, 1), (3, 1), (5, 2), (SWEEP_WINDOW, SWEEP_MARGIN)]:
            results, _ = run_all(text, keys, vals, window, margin)
            assert results[0] == results[2] == expected, (text, window, margin)
    assert ref.encode_symbols([1, 0, 1, 0], model) == [0, 0]


def test_rank_heads_size():
    keys, vals = tables([(97, 98), (256, 99)], [256, 257])
    assert sweep_rank_count(keys, vals) == 2
    keys, vals = tables(np.zeros((0, 2)), [])
    assert sweep_rank_count(keys, vals) == 0


def test_tokenizer_long_pieces_end_to_end():
    # Pieces longer than a production window through the public API: digits, spaces and
    # letters with gpt2 pre-tokenization, against the heap path on the same tokenizer.
    rng = random.Random(5)
    corpus = ["".join(rng.choices("0123456789", k=60)) for _ in range(40)]
    corpus += [" " * rng.randint(1, 30) + "x" for _ in range(40)]
    corpus += ["".join(rng.choices("abcde", k=50)) for _ in range(40)]
    tok = fb.train(corpus, num_merges=120, pattern="gpt2")
    n = 3 * (SWEEP_WINDOW + SWEEP_MARGIN) + 17
    texts = ["".join(rng.choices("0123456789", k=n)), " " * n + "x",
             "".join(rng.choices("abcde", k=n)), "ab" * n]
    tables = tok._tables()
    keys, vals = tables.keys, tables.vals
    for text in texts:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        for piece in fb.pretokenize.split(text, "gpt2"):
            base = tok.level.sym_map[np.frombuffer(piece.encode(), np.uint8)].astype(np.int32)
            heap = base.copy()
            m = _merge_long(heap, len(base), tables.pairs, 0.0, np.ones(1, np.int64), heap[:0])
            assert tok.encode(piece) == heap[:m].tolist()
        assert tok.encode_batch([text, text[:100]], num_threads=2)[0] == ids


def test_ranks_mode_tables_sweep_like_the_heap(tmp_path):
    # A tiktoken export reloads in "ranks" mode: every two-token split of a token is a
    # pair ranked by the token, so a merge can make a pair ranked below it (the sweep
    # gives up on that window and the heap takes it): same tokens as the pairs model.
    rng = random.Random(9)
    corpus = ["".join(rng.choices("ab", k=40)) + " " + "".join(rng.choices("xyz", k=30))
              for _ in range(50)]
    tok = fb.train(corpus, num_merges=80, pattern="gpt2")
    path = tmp_path / "m.tiktoken"
    tok.to_tiktoken(path)
    ranked = fb.from_tiktoken(path, pattern="gpt2")
    assert ranked.merge_mode == "ranks"
    tables = ranked._tables()
    keys, vals = tables.keys, tables.vals
    for text in ["".join(rng.choices("ab", k=700)), "".join(rng.choices("xyz", k=900)), "a" * 999]:
        symbols = ranked.level.sym_map[np.frombuffer(text.encode(), np.uint8)].astype(np.int32)
        results, _ = run_all(symbols, keys, vals, 7, 3)
        assert results[0] == results[2] and results[1] in (None, results[0])
        assert ranked.encode(text) == tok.encode(text)


def test_run_writes_into_the_callers_buffer_and_checks_it():
    # The segmented path passes the rest of its result array (Encoder.run(out=...)); the
    # kernel does not bounds-check, so run refuses any buffer it could write past.
    from fastbpe_nb.encoder import NO_SPECIAL

    tok = fb.train(["the cat sat on the mat " * 20], num_merges=30)
    enc = tok._encoder
    data = np.frombuffer(b"the cat sat on the mat, the end", dtype=np.uint8)
    pieces = np.array([0, 3, 7, 11, 14, 18, 22, 23, 27, 31], dtype=np.int64)
    layout = (data, pieces, NO_SPECIAL, np.array([0, len(pieces) - 1], dtype=np.int64))
    want = enc.run(layout)[0].tolist()
    buffer = np.full(len(data) + 5, -7, dtype=np.int32)
    ids, offsets = enc.run(layout, out=buffer)
    assert ids.tolist() == want and offsets.tolist() == [0, len(want)]
    assert np.shares_memory(ids, buffer) and buffer[:len(want)].tolist() == want
    assert (buffer[len(data):] == -7).all()  # nothing past a slot per byte
    for bad in (np.empty(len(data) - 1, np.int32), np.empty(len(data), np.int64),
                np.empty(2 * len(data), np.int32)[::2]):
        with pytest.raises(ValueError, match="out must be"):
            enc.run(layout, out=bad)
    # Several documents on two threads: each block's ids moved down in the buffer.
    docs = ["the cat", "sat on", "the mat, the end", "", "the", "cat sat on the mat"] * 50
    want = enc.encode_texts(docs, frozenset(), frozenset(), n_threads=1)
    layout = enc.layout(docs, frozenset(), frozenset())
    buffer = np.full(len(layout[0]), -7, dtype=np.int32)
    ids, offsets = enc.run(layout, n_threads=2, out=buffer)
    assert ids.tolist() == want[0].tolist() and offsets.tolist() == want[1].tolist()
    assert np.shares_memory(ids, buffer) and buffer[:len(ids)].tolist() == ids.tolist()
    # Without a buffer, a batch on two threads gets one of its own, shrunk to its ids.
    ids, offsets = enc.run(layout, n_threads=2)
    assert ids.tolist() == want[0].tolist() and ids.base is None and len(ids) == offsets[-1]


@pytest.mark.parametrize("forked", [False, True])
def test_a_batch_whose_pieces_start_after_unit_0_gets_its_ids_first(monkeypatch, forked):
    # The batch's own buffer is shrunk to its first n ids: the parallel kernel moves every
    # block's ids to the front, and so must the path of its serial twin (what a forked
    # child runs instead of the pool) when the layout's first piece is not at unit 0.
    import fastbpe_nb.parallel as par
    from fastbpe_nb.encoder import NO_SPECIAL

    tok = fb.train(["the cat sat on the mat " * 20], num_merges=30)
    enc = tok._encoder
    data = np.frombuffer(b"XXXthe cat sat on the mat", dtype=np.uint8)
    pieces = np.array([3, 6, 10, 14, 17, 21, 25], dtype=np.int64)
    layout = (data, pieces, NO_SPECIAL, np.array([0, 3, 6], dtype=np.int64))
    want = [tok.encode(t) for t in ("the cat sat", " on the mat")]
    monkeypatch.setattr(par, "_pool_inherited", forked)
    ids, offsets = enc.run(layout, n_threads=2)
    got = ids.tolist()
    assert [got[a:b] for a, b in zip(offsets[:-1], offsets[1:])] == want
    assert len(ids) == offsets[-1] and ids.base is None


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_huge_texts_are_encoded_in_segments_with_the_same_ids(monkeypatch, pattern):
    # Texts over SEGMENT_BYTES are scanned and encoded a segment at a time; with 64-byte
    # segments every piece kind crosses a segment limit, including pieces longer than a
    # segment. The ids must be those of the one-shot path, for every entry point.
    import fastbpe_nb.encoder as tk

    rng = random.Random(3)
    corpus = ["".join(rng.choices("ab cd\n12'  .", k=80)) for _ in range(60)]
    tok = fb.train(corpus, num_merges=60, pattern=pattern, special_tokens=["<|s|>"])
    texts = ["".join(rng.choices("ab cd\n12'  .é中", k=3000)),
             "x" * 500 + " " * 300 + "7" * 400 + "\n" * 200,
             "ab" * 700 + "<|s|" + "a" * 90,
             "ab \ud800 cd " * 100]  # lone surrogates: U+FFFD, as everywhere
    one_shot = [tok._encoder.id_list(tok._encoder.encode_texts([t], frozenset(), frozenset())[0]) for t in texts]
    assert tok._encoder.encode_huge(texts[0], frozenset(), frozenset()) is None  # under 2 MiB
    monkeypatch.setattr(tk, "SEGMENT_BYTES", 64)
    for text, expected in zip(texts, one_shot):
        huge, capacity = tok._encoder.encode_huge(text, frozenset(), frozenset())
        # The ids own exactly their memory (the result array shrunk in place, no copy).
        assert capacity == len(huge) and huge.base is None
        assert huge.dtype == np.int32 and huge.tolist() == expected
        assert tok.encode_ordinary(text) == expected
        assert tok.encode(text) == expected
        as_array = tok.encode_to_numpy(text)
        assert as_array.dtype == np.uint32 and as_array.tolist() == expected
    assert tok.decode(one_shot[3]) == texts[3].replace("\ud800", "\ufffd")
    with pytest.raises(fb.DisallowedSpecialTokenError):
        tok.encode(texts[2] + "<|s|>")
    special = texts[2] + "<|s|>"
    assert tok._encoder.encode_huge(special, frozenset({"<|s|>"}), frozenset()) is None
    assert tok.encode(special, allowed_special="all")[-1] == tok.special_tokens["<|s|>"]
    assert tok.encode_to_numpy(special, allowed_special="all").tolist() == tok.encode(
        special, allowed_special="all")
    with pytest.raises(fb.DisallowedSpecialTokenError):
        tok.encode_to_numpy(special)


@pytest.mark.parametrize("pattern", ["gpt2", "o200k"])
def test_batches_encode_huge_documents_in_segments_with_the_same_ids(monkeypatch, pattern, tmp_path):
    # A batch (list, Arrow, count_tokens, Parquet) sends each document over SEGMENT_BYTES
    # alone through the segmented path and encodes the runs between them together. With
    # 64-byte segments: the same ids as the one-shot path, nulls and empty rows kept, and
    # an error names the first bad document, huge or not.
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastbpe_nb.encoder as tk

    rng = random.Random(5)
    corpus = ["".join(rng.choices("ab cd\n12'  .", k=80)) for _ in range(60)]
    tok = fb.train(corpus, num_merges=60, pattern=pattern, special_tokens=["<|s|>"])
    small = ["", "ab cd", "12 . x", "é中 ab"]
    big = ["".join(rng.choices("ab cd\n12'  .é中", k=400)), "x" * 300 + " " * 200 + "7" * 100]
    docs = [big[0], small[1], small[0], big[1], big[1], small[2], small[3], big[0]]
    one_shot = [tok._encoder.id_list(tok._encoder.encode_texts([t], frozenset(), frozenset())[0]) for t in docs]
    monkeypatch.setattr(tk, "SEGMENT_BYTES", 64)
    assert [i for i, d in enumerate(docs) if tok._encoder.may_be_huge(d)] == [0, 3, 4, 7]
    for batch in (docs, docs[1:3], docs[:1], docs[3:5] + docs[:2], []):
        expected = [one_shot[docs.index(t)] for t in batch]
        assert tok.encode_batch(batch, num_threads=2) == expected
        arrow = pa.array(batch + [None], pa.large_string())
        assert tok.encode_batch(arrow, num_threads=2).to_pylist() == expected + [None]
        assert tok.count_tokens(arrow).tolist() == [len(e) for e in expected] + [0]
    # The huge rows really took the segmented path (and the small ones did not).
    seen = []
    real = tk.Encoder.encode_segmented
    monkeypatch.setattr(tk.Encoder, "encode_segmented",
                        lambda self, data: seen.append(len(data)) or real(self, data))
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), src)
    fb.encode_parquet(tok, str(src), str(tmp_path / "out"), num_threads=2)
    assert pq.read_table(tmp_path / "out" / "in.parquet").column("ids").to_pylist() == one_shot
    assert sorted(seen) == sorted(len(docs[i].encode()) for i in (0, 3, 4, 7))
    # Errors: the first document holding a disallowed special token is named.
    bad = list(docs)
    bad[1] = "ab <|s|>"
    bad[4] = big[1] + "<|s|>"
    for order, first in ((bad, 1), (bad[2:], 2), ([bad[4], bad[1]], 0)):
        with pytest.raises(fb.DisallowedSpecialTokenError, match=f"document {first}:"):
            tok.encode_batch(order)
    with_special = tok.encode_batch([bad[4], "x"], allowed_special="all")  # not segmented
    assert with_special[0][-1] == tok.special_tokens["<|s|>"]
    assert with_special == [tok.encode(bad[4], allowed_special="all"), tok.encode("x")]
