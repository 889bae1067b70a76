"""Pieces of SCAN_PIECE + 1 .. LONG_PIECE units are merged by ``_merge_mid`` (a heap whose
entries are checked against the current pair values instead of a second lookup); the
thresholds between the three merge paths must not change any id.

Oracles: ``reference.encode_symbols`` / ``reference.encode`` (pairs mode, hand-made and
tie-heavy tables over tiny alphabets) and tiktoken itself (ranks mode, where every
two-token split of a token shares its rank, so equal ranks are everywhere).
"""

import base64
import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb.kernels.encode import _merge_long, _merge_mid, _merge_short
from fastbpe_nb.kernels.hashing import build_rank_table, interleave_table
from fastbpe_nb.model import LONG_PIECE, SCAN_PIECE

from fbtest import NOJIT, merges_over_bytes

EXAMPLES = 30 if NOJIT else 150
NO_PAIRS = np.zeros(0, dtype=np.int64)  # no dense byte-pair table: every pair is looked up


def pair_table(merges, made):
    keys, vals = build_rank_table(np.asarray(merges, dtype=np.int32).reshape(-1, 2),
                                  np.asarray(made, dtype=np.int32))
    return interleave_table(keys, vals)


def mid(symbols, pairs):
    n = len(symbols)
    buf = np.asarray(symbols, dtype=np.int32).copy()
    m = _merge_mid(buf, n, np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.int32),
                   np.empty(3 * n, np.int64), pairs, NO_PAIRS)
    return buf[:m].tolist()


def short(symbols, pairs):
    n = len(symbols)
    buf = np.asarray(symbols, dtype=np.int32).copy()
    return buf[:_merge_short(buf, n, np.empty(n, np.int64), pairs, NO_PAIRS)].tolist()


def heap(symbols, pairs):
    n = len(symbols)
    buf = np.asarray(symbols, dtype=np.int32).copy()
    return buf[:_merge_long(buf, n, pairs, 0.0, np.ones(1, np.int64), buf[:0])].tolist()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)),
                      max_size=20),
       text=st.lists(st.integers(0, 3), min_size=2, max_size=120))
def test_mid_matches_the_rule_on_arbitrary_tables(table, text):
    # Any pair -> id table (merges may make ids that lower ranks use, an id may be made
    # twice): runs and ties over 4 symbols, the rule's tokens from every merge function.
    merges = [(a, b) for a, b, _ in table]
    made = [c for _, _, c in table]
    pairs = pair_table(merges, made)
    expected = ref.encode_symbols(text, SimpleNamespace(merges=merges, merge_ids=made))
    assert mid(text, pairs) == expected
    assert short(text, pairs) == expected == heap(text, pairs)


@pytest.mark.parametrize("seed", range(3))
def test_mid_on_trained_tables_runs_and_alternations(seed):
    rng = random.Random(seed)
    docs = ["a" * rng.randint(1, 40) + "b" * rng.randint(0, 9) for _ in range(30)]
    docs += ["".join(rng.choices("ab", k=30)) for _ in range(10)] + ["ab" * 20, "aab" * 9]
    for tie in ["ids", "hf", "first", "bytes"]:
        model = ref.train(docs, num_merges=25, pattern=None, tie_break=tie)
        pairs = pair_table(model.merges, model.merge_ids)
        for n in [SCAN_PIECE, SCAN_PIECE + 1, 2 * SCAN_PIECE + 3, LONG_PIECE, LONG_PIECE + 1]:
            for text in ["a" * n, ("ab" * n)[:n], ("aab" * n)[:n], "".join(rng.choices("ab", k=n))]:
                symbols = list(text.encode())
                assert mid(symbols, pairs) == ref.encode_symbols(symbols, model), (tie, text)


lengths = st.sampled_from([2, SCAN_PIECE - 1, SCAN_PIECE, SCAN_PIECE + 1, SCAN_PIECE + 7,
                           LONG_PIECE - 1, LONG_PIECE, LONG_PIECE + 1, LONG_PIECE + 40])
words = st.tuples(lengths, st.integers(0, 2**32 - 1))


def _text(spec):
    """Words of letters 'a'/'b' of the sampled lengths, one piece each (gpt2 split)."""
    out = []
    for n, seed in spec:
        rng = random.Random(seed)
        kind = seed % 3
        word = "a" * n if kind == 0 else ("ab" * n)[:n] if kind == 1 else "".join(
            rng.choices("ab", k=n))
        out.append(word)
    return " ".join(out)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=30),
       spec=st.lists(words, min_size=1, max_size=5))
def test_pieces_around_the_thresholds_pairs_mode(raw, spec):
    merges = merges_over_bytes(raw, b"ab")
    tok = fb.Tokenizer(merges=merges, pattern="gpt2")
    model = ref.model_from_merges(merges, pattern="gpt2")
    text = _text(spec)
    assert tok.encode_ordinary(text) == ref.encode(text, model)


@settings(max_examples=EXAMPLES // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(raw=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=30),
       spec=st.lists(words, min_size=1, max_size=5))
def test_pieces_around_the_thresholds_ranks_mode_against_tiktoken(tmp_path, raw, spec):
    # Reloaded from a tiktoken file the model is in ranks mode: all two-token splits of a
    # token are pairs of the token's rank, so equal ranks (leftmost first) are the rule.
    tiktoken = pytest.importorskip("tiktoken")
    from fastbpe_nb.pretokenize import NAMED_PATTERNS

    tok = fb.Tokenizer(merges=merges_over_bytes(raw, b"ab"), pattern="gpt2")
    path = tmp_path / "m.tiktoken"
    tok.to_tiktoken(path)
    try:
        ranked = fb.from_tiktoken(path, pattern="gpt2")
    except fb.ModelFormatError:
        assume(False)  # a token tiktoken's rule cannot make: not a ranks-mode vocabulary
    assert ranked.merge_mode == "ranks"
    # Read here: tiktoken's loader caches a file by its name, and tmp_path is reused.
    ranks = {base64.b64decode(tok_b64): int(rank) for tok_b64, rank in
             (line.split() for line in path.read_text().splitlines() if line)}
    enc = tiktoken.Encoding(name="t", pat_str=NAMED_PATTERNS["gpt2"], mergeable_ranks=ranks,
                            special_tokens={})
    text = _text(spec)
    assert ranked.encode_ordinary(text) == enc.encode_ordinary(text)
