"""The batch layout's fast path (``ByteLevel._plain_layout``: a list of str, no
normalization, no special token's prefix anywhere in the batch) against the document-by-
document loop it replaces: the same arrays, so the same ids; and every batch it must not
take (special tokens, lone surrogates, non-str items) goes the loop's way."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import layout as layout_module

from fbtest import NOJIT

DOCS = ["the cat sat", "", "naïve café Привет 東京 42", "  \n\n", "<|e", "|>", "x<|e|>y"]

texts = st.lists(st.lists(st.sampled_from(list("ab c\n1.é中") + ["<|e|>", "<|e", "|>",
                                                                "\U0001F600"]),
                          max_size=20).map("".join), max_size=12)


@pytest.fixture(scope="module")
def tok():
    return fb.train([d * 3 for d in DOCS] * 5, vocab_size=300, special_tokens=["<|e|>"])


def both_layouts(tok, docs, allowed, disallowed, n_threads=1):
    enc = tok._encoder
    fast = enc.layout(docs, allowed, disallowed, n_threads=n_threads)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layout_module.ByteLevel, "_plain_layout", lambda *a: None)
        slow = enc.layout(docs, allowed, disallowed, n_threads=n_threads)
    return fast, slow


@settings(max_examples=300 if not NOJIT else 40, deadline=None)
@given(docs=texts, allowed=st.sampled_from([frozenset(), frozenset({"<|e|>"})]),
       n_threads=st.sampled_from([1, 2]))
def test_fast_layout_equals_the_loop(tok, docs, allowed, n_threads):
    disallowed = frozenset() if allowed else frozenset({"<|e|>"})
    try:
        slow_error = None
        fast, slow = both_layouts(tok, docs, allowed, disallowed, n_threads=n_threads)
    except fb.DisallowedSpecialTokenError as exc:  # both must raise it, naming the same doc
        slow_error = exc
    if slow_error is not None:
        with pytest.raises(fb.DisallowedSpecialTokenError) as info:
            tok._encoder.layout(docs, allowed, disallowed)
        assert str(info.value) == str(slow_error)
        return
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_fast_path_is_taken_only_for_plain_batches(tok, monkeypatch):
    taken = []
    real = layout_module.ByteLevel._plain_layout
    monkeypatch.setattr(layout_module.ByteLevel, "_plain_layout",
                        lambda *a: taken.append(real(*a) is not None) or real(*a))
    tok.encode_batch(["the cat", "", "sat 東京"])
    tok.encode_batch(["the cat", "x<|e|>"], allowed_special="all")  # a special token
    tok.encode_batch(["the cat", "x<|e"], allowed_special="all")    # only its prefix
    tok.encode_batch(["ab \ud800 cd"])                               # a lone surrogate
    with pytest.raises(TypeError, match="document 1"):
        tok.encode_batch(["ok", b"bytes"])                          # not a str
    assert taken == [True, False, False, False, False]
    assert tok.encode_batch(["ab \ud800 cd"]) == [tok.encode("ab \ufffd cd")]


@settings(max_examples=100 if not NOJIT else 20, deadline=None)
@given(docs=texts)
def test_batch_ids_are_each_documents_ids(tok, docs):
    want = [tok.encode(d, allowed_special="all") for d in docs]
    assert tok.encode_batch(docs, allowed_special="all", num_threads=2) == want
    ids, offsets, valid = tok.encode_batch_flat(docs, num_threads=2, allowed_special="all")
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want
    assert valid.all()
