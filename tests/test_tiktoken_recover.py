"""Merge recovery from tiktoken ranks: the kernel against its Python twin.

``kernels.recover.recover_last_merges`` must give, for every token, the two parts that
``io.tiktoken_format._last_merge`` (tiktoken's byte-pair merge with the lower ranks) ends
with, or report that it does not end in two; flat scan (tokens up to 64 bytes) and heap
(longer tokens) alike.
"""

import base64
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb.io import tiktoken_format as tf
from fastbpe_nb.kernels.recover import FLAT_BYTES, recover_last_merges
from fastbpe_nb.model import whole_token_table

from fbtest import NOJIT

BYTES = [bytes([b]) for b in range(256)]


def kernel_parts(tokens):
    whole_keys, tok_off, tok_data = whole_token_table(tokens)
    return recover_last_merges(tok_off, tok_data, whole_keys, FLAT_BYTES)


def python_parts(tokens):
    """Row r: the ranks of the two parts ``_last_merge`` ends with, or (-1, -1)."""
    rank_of = {t: r for r, t in enumerate(tokens)}
    out = np.full((len(tokens), 2), -1, dtype=np.int64)
    longest = max(len(t) for t in tokens[:256])
    for r in range(256, len(tokens)):
        starts = tf._last_merge(tokens[r], rank_of, r, longest)
        if len(starts) == 3:
            out[r] = rank_of[tokens[r][: starts[1]]], rank_of[tokens[r][starts[1]:]]
        longest = max(longest, len(tokens[r]))
    return out


@st.composite
def vocabularies(draw):
    """Tokens in rank order: mostly concatenations of two earlier tokens over a small
    alphabet (ties and overlaps everywhere), some arbitrary strings (often unreachable),
    some long (the heap path)."""
    tokens = list(BYTES)
    known = set(tokens)
    alphabet = [b"a", b"b", b"c"]
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["concat", "concat", "concat", "junk", "long"]))
        if kind == "concat":
            pool = alphabet + [t for t in tokens[256:]]
            new = draw(st.sampled_from(pool)) + draw(st.sampled_from(pool))
        elif kind == "junk":
            new = draw(st.binary(min_size=2, max_size=6).map(lambda b: bytes(97 + x % 3 for x in b)))
        else:
            new = draw(st.sampled_from(alphabet)) * draw(st.integers(FLAT_BYTES - 2, 3 * FLAT_BYTES))
        if new not in known:
            known.add(new)
            tokens.append(new)
    return tokens


@settings(max_examples=40 if NOJIT else 300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(tokens=vocabularies())
def test_kernel_matches_python_twin(tokens):
    assert kernel_parts(tokens).tolist() == python_parts(tokens).tolist()


def test_trained_vocabulary_with_long_tokens(tmp_path):
    # Runs of spaces and of '=' make tokens longer than FLAT_BYTES (the heap path).
    rng = random.Random(1)
    corpus = ["".join(rng.choices("ab cd", k=60)) + " " * rng.randint(60, 200) + "=" * 150
              for _ in range(200)]
    tok = fb.train(corpus, vocab_size=600, pattern=None)
    assert max(len(t) for t in tok.vocab) > FLAT_BYTES
    path = tmp_path / "m.tiktoken"
    tok.to_tiktoken(path)
    tokens, lines = tf.parse_ranks(path.read_bytes())
    assert kernel_parts(tokens)[256:].tolist() == python_parts(tokens)[256:].tolist()
    loaded = fb.from_tiktoken(path, pattern=None)
    for text in corpus[:20]:
        assert loaded.encode(text) == tok.encode(text)


def test_unreachable_token_is_named(tmp_path):
    # "abc" listed before any of its two-part splits: tiktoken can never build it.
    tokens = BYTES + [b"abc", b"ab"]
    path = tmp_path / "bad.tiktoken"
    tok_lines = [base64.b64encode(t) + b" %d" % r for r, t in enumerate(tokens)]
    path.write_bytes(b"\n".join(tok_lines) + b"\n")
    assert kernel_parts(tokens)[256].tolist() == [-1, -1]
    with pytest.raises(fb.ModelFormatError, match=r"rank 256.*cannot be reached.*3 parts"):
        fb.from_tiktoken(path, pattern=None)
