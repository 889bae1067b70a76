"""Framing a batch (``framing.py``): BOS/EOS, ``max_length`` windows with a stride,
padding with an attention mask; against a naive per-document reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb.errors import EncodeOptionsError
from fastbpe_nb.framing import add_special, pad, windows


def flat(docs):
    ids = np.array([i for d in docs for i in d], dtype=np.int32)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return ids, offsets


def rows(ids, offsets):
    return [ids[offsets[r]:offsets[r + 1]].tolist() for r in range(len(offsets) - 1)]


def reference_windows(doc, max_length, stride, bos, eos):
    frame = lambda w: ([bos] if bos >= 0 else []) + w + ([eos] if eos >= 0 else [])  # noqa: E731
    content = max_length - (bos >= 0) - (eos >= 0)
    if stride is None:
        return [frame(doc[:content])]
    out, start = [], 0
    while True:
        out.append(frame(doc[start:start + content]))
        if start + content >= len(doc):
            return out
        start += content - stride


docs_strategy = st.lists(st.lists(st.integers(0, 50), max_size=30), max_size=8)


@settings(max_examples=200, deadline=None)
@given(docs_strategy, st.integers(-1, 0), st.integers(-1, 0), st.integers(3, 12),
       st.one_of(st.none(), st.integers(0, 9)))
def test_windows_equal_the_reference(docs, bos, eos, max_length, stride):
    bos = 98 if bos == 0 else -1
    eos = 99 if eos == 0 else -1
    content = max_length - (bos >= 0) - (eos >= 0)
    if stride is not None and stride >= content:
        stride = content - 1
    ids, offsets = flat(docs)
    got, got_off, doc_of = windows(ids, offsets, max_length, stride, bos, eos)
    want = [reference_windows(d, max_length, stride, bos, eos) for d in docs]
    assert rows(got, got_off) == [w for ws in want for w in ws]
    assert doc_of.tolist() == [d for d, ws in enumerate(want) for _ in ws]
    framed, framed_off = add_special(ids, offsets, bos, eos)
    assert rows(framed, framed_off) == [([bos] if bos >= 0 else []) + d + ([eos] if eos >= 0 else [])
                                        for d in docs]


@settings(max_examples=100, deadline=None)
@given(docs_strategy, st.booleans())
def test_padding_equals_the_reference(docs, left):
    ids, offsets = flat(docs)
    out, mask = pad(ids, offsets, 7, None, left)
    width = max((len(d) for d in docs), default=0)
    assert out.shape == mask.shape == (len(docs), width)
    for d, row, m in zip(docs, out.tolist(), mask.tolist()):
        fill = [7] * (width - len(d))
        assert row == (fill + d if left else d + fill)
        assert m == ([0] * len(fill) + [1] * len(d) if left else [1] * len(d) + [0] * len(fill))


@pytest.fixture(scope="module")
def tok():
    t = fb.train(["hello world " * 50, "the quick brown fox jumps"], vocab_size=300,
                 special_tokens=["<s>", "</s>", "<pad>"])
    return t.with_roles(bos="<s>", eos="</s>", pad="<pad>")


def test_batch_framing_through_the_tokenizer(tok):
    docs = ["hello world " * 20, "the fox", ""]
    plain = tok.encode_batch(docs)
    bos, eos, pad_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    assert tok.encode(docs[1], add_bos=True, add_eos=True) == [bos] + plain[1] + [eos]
    assert tok.encode_batch(docs, add_eos=True) == [d + [eos] for d in plain]
    assert tok.encode_batch(docs, add_bos=True, max_length=5) == [([bos] + d)[:5] for d in plain]
    wins = tok.encode_batch(docs, add_bos=True, add_eos=True, max_length=8, stride=2)
    assert wins == [reference_windows(d, 8, 2, bos, eos) for d in plain]
    out = tok.encode_batch(docs, add_bos=True, add_eos=True, max_length=8, stride=2,
                           padding="max_length", return_numpy=True)
    assert out["input_ids"].shape == (sum(map(len, wins)), 8)
    assert out["overflow_to_sample_mapping"].tolist() == [d for d, w in enumerate(wins) for _ in w]
    assert (out["input_ids"][out["attention_mask"] == 0] == pad_id).all()
    rows = [r[m == 1].tolist() for r, m in zip(out["input_ids"], out["attention_mask"])]
    assert rows == [w for ws in wins for w in ws]


@pytest.mark.parametrize("kwargs, message", [
    ({"max_length": 2, "add_bos": True, "add_eos": True}, "max_length"),
    ({"stride": 1}, "stride needs max_length"),
    ({"max_length": 4, "stride": 4}, "stride must be"),
    ({"padding": True}, "return_numpy"),
    ({"padding": "longestt", "return_numpy": True}, "padding must be"),
    ({"padding": "max_length", "return_numpy": True}, "needs max_length"),
    ({"add_bos": 1}, "add_bos must be"),
])
def test_bad_framing_options_are_refused(tok, kwargs, message):
    with pytest.raises(EncodeOptionsError, match=message):
        tok.encode_batch(["hello"], **kwargs)


def test_a_missing_role_is_named():
    plain = fb.train(["hello world"], vocab_size=270)
    with pytest.raises(EncodeOptionsError, match="no eos_token"):
        plain.encode("hello", add_eos=True)
    with pytest.raises(EncodeOptionsError, match="no pad_token"):
        plain.encode_batch(["hello"], padding=True, return_numpy=True)


def test_batch_dropout_is_per_document_and_thread_free():
    tok = fb.train(["hello world, the quick brown fox " * 30], vocab_size=320)
    docs = ["hello world the quick brown fox"] * 6 + ["fox " * 40]
    one = tok.encode_batch(docs, num_threads=1, dropout=0.3, seed=11)
    assert tok.encode_batch(docs, num_threads=2, dropout=0.3, seed=11) == one
    assert tok.encode(docs[0], dropout=0.3, seed=11) == one[0]
    assert len({tuple(r) for r in one[:6]}) > 1  # each document draws its own merges
    assert one != tok.encode_batch(docs, dropout=0.3, seed=12)
    assert [tok.decode(r) for r in one] == docs
    assert tok.encode_batch(docs, dropout=0.0) == tok.encode_batch(docs)


def test_bytes_point_to_encode_bytes():
    tok = fb.train(["hello world"], vocab_size=270)
    with pytest.raises(TypeError, match="encode_bytes"):
        tok.encode(b"hello")
    with pytest.raises(TypeError, match="encode_bytes"):
        tok.encode_batch(["ok", b"hello"])


def test_the_package_declares_its_types():
    from pathlib import Path

    root = Path(fb.__file__).parent
    assert (root / "py.typed").is_file()
    text = (root.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert 'fastbpe_nb = ["py.typed"]' in text  # shipped in the wheel


def test_batch_verbs_share_one_argument_order():
    import inspect

    def head(fn):
        return list(inspect.signature(fn).parameters)[:4]

    assert head(fb.Tokenizer.encode_batch) == head(fb.Tokenizer.count_tokens) == [
        "self", "texts", "num_threads", "allowed_special"]
    tok = fb.train(["hello world"], vocab_size=270)
    assert tok.count_tokens(["hello", "world"], 1, ()).tolist() == [
        len(i) for i in tok.encode_batch(["hello", "world"], 1, ())]


@settings(max_examples=100, deadline=None)
@given(docs_strategy, st.data())
def test_framing_skips_null_rows(docs, data):
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=len(docs), max_size=len(docs))),
                     dtype=bool)
    docs = [d if v else [] for d, v in zip(docs, valid)]  # a null row has no ids
    ids, offsets = flat(docs)
    got, got_off = add_special(ids, offsets, 98, 99, valid)
    assert rows(got, got_off) == [[98] + d + [99] if v else [] for d, v in zip(docs, valid)]
