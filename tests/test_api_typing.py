"""The public verbs spell out their options: no ``**options``, errors in the caller's words."""

from __future__ import annotations

import inspect

import pytest

import fastbpe_nb as fb


@pytest.mark.parametrize("verb", [fb.train, fb.train_files])
def test_every_option_is_a_named_keyword(verb):
    params = inspect.signature(verb).parameters.values()
    assert not [p for p in params if p.kind is p.VAR_KEYWORD]
    doc = verb.__doc__
    for name in ("pattern", "special_tokens", "tie_break", "num_merges", "roles"):
        assert name in inspect.signature(verb).parameters
    assert "pattern" in doc and "roles" in doc


def test_a_misspelled_option_names_train():
    with pytest.raises(TypeError, match=r"train\(\) got an unexpected keyword argument 'vocab_sise'"):
        fb.train(["hello"], vocab_sise=300)
    with pytest.raises(TypeError, match=r"train_files\(\) got an unexpected keyword"):
        fb.train_files(["x.txt"], patern="gpt2")


def test_sentencepiece_options_need_whitespace():
    with pytest.raises(TypeError, match=r"train\(\): byte_fallback is an option of "
                                        "SentencePiece-style training"):
        fb.train(["hello"], vocab_size=300, byte_fallback=True)


def test_options_left_at_their_defaults_change_nothing():
    texts = ["the cat sat on the mat"] * 5
    assert fb.train(texts, vocab_size=270) == fb.train(
        texts, vocab_size=270, pattern="default", special_tokens=(), tie_break="ids",
        min_frequency=0, progress=False)
    # pattern=None is a choice (no split), not "not given".
    whole = fb.train(texts, vocab_size=290, pattern=None)
    assert whole.pattern is None and whole != fb.train(texts, vocab_size=290)
    sp = fb.train(texts * 40 + ["abcdefghijklmnopqrstuvwxyz"], vocab_size=400, base="chars",
                  whitespace="\u2581", byte_fallback=True)
    assert sp.decode(sp.encode("the cat")) == "the cat"
