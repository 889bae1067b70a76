"""Worked examples from the BPE literature: each must hold exactly, for the kernels and the reference."""

import pytest

import fastbpe_nb as fb
from fastbpe_nb import reference as ref

CORPUS = ("low low low low low lower lower newest newest newest newest newest newest "
          "widest widest widest")


def pieces(tok, ids):
    return [tok.vocab[i] for i in ids]


def test_minbpe_aaabdaaabac_ids():
    tok = fb.train(["aaabdaaabac"], vocab_size=259, pattern=None)
    assert tok.merges.tolist() == [[97, 97], [97, 98], [256, 257]]
    assert tok.merge_ids.tolist() == [256, 257, 258]
    assert tok.vocab[256:] == [b"aa", b"ab", b"aaab"]
    assert tok.encode("aaabac") == [258, 97, 99]
    assert tok.decode([258, 97, 99]) == "aaabac"


def test_minbpe_aaabdaaabac_first():
    tok = fb.train(["aaabdaaabac"], vocab_size=259, pattern=None, tie_break="first")
    assert tok.merges.tolist() == [[97, 97], [256, 97], [257, 98]]
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.decode(tok.encode("aaabdaaabac")) == "aaabdaaabac"


@pytest.mark.parametrize("tie_break", ["bytes", "first"])
def test_low_lower_newest_widest(tie_break):
    tok = fb.train([CORPUS], num_merges=12, pattern=r" ?[^\s]+|\s+", tie_break=tie_break)
    new_tokens = [tok.vocab[i] for i in tok.merge_ids]
    assert new_tokens == [b"es", b"est", b"lo", b"low", b" low", b" n", b" ne", b" new",
                          b" newest", b" w", b" wi", b" wid"]
    assert pieces(tok, tok.encode(" low")) == [b" low"]
    assert pieces(tok, tok.encode(" lower")) == [b" low", b"e", b"r"]
    assert pieces(tok, tok.encode(" widest")) == [b" wid", b"est"]
    assert len(tok.encode(" lowest")) == 2
    assert pieces(tok, tok.encode(" lowest")) == [b" low", b"est"]
    assert len(tok.encode(" slowness")) == 6
    assert len(tok.encode(" kubernetes")) == 10


def test_sennrich_char_mode_newest_widest():
    words = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    tok = fb.train(words, num_merges=6, base="chars", end_of_word="_", tie_break="first")
    merges = [(tok.vocab[a], tok.vocab[b]) for a, b in tok.merges.tolist()]
    assert merges == [(b"e", b"s"), (b"es", b"t"), (b"est", b"_"), (b"l", b"o"),
                      (b"lo", b"w"), (b"n", b"e")]
    assert pieces(tok, tok.encode("lowest")) == [b"low", b"est_"]
    assert pieces(tok, tok.encode("newer")) == [b"ne", b"w", b"e", b"r", b"_"]
    assert pieces(tok, tok.encode("wider")) == [b"w", b"i", b"d", b"e", b"r", b"_"]
    assert pieces(tok, tok.encode("slow")) == [b"s", b"low", b"_"]
    assert tok.decode(tok.encode("lowest newer")) == "lowest newer"


def test_sennrich_char_mode_low_lower_lowest():
    words = {"low": 5, "lower": 2, "lowest": 3}
    tok = fb.train(words, num_merges=4, base="chars", end_of_word="_", tie_break="first")
    merges = [(tok.vocab[a], tok.vocab[b]) for a, b in tok.merges.tolist()]
    assert merges == [(b"l", b"o"), (b"lo", b"w"), (b"low", b"_"), (b"low", b"e")]


def test_explicit_merges_slower():
    tok = fb.Tokenizer(merges=[(108, 111), (256, 119)], pattern=None)
    assert tok.merge_ids.tolist() == [256, 257]
    assert tok.encode("slower") == [115, 257, 101, 114]
    with pytest.raises(UnicodeDecodeError):
        tok.decode([230, 151], errors="strict")
    stream = tok.stream_decoder()
    assert stream.push(230) == ""
    assert stream.push(151) == ""  # two bytes of a three-byte character: held back
    assert stream.push(165) == "日"  # e6 97 a5
    assert stream.flush() == ""


@pytest.mark.parametrize("case", [
    dict(texts=["aaabdaaabac"], vocab_size=259, pattern=None),
    dict(texts=["aaabdaaabac"], vocab_size=259, pattern=None, tie_break="first"),
    dict(texts=[CORPUS], num_merges=12, pattern=r" ?[^\s]+|\s+", tie_break="bytes"),
    dict(texts=[CORPUS], num_merges=12, pattern=r" ?[^\s]+|\s+", tie_break="first"),
])
def test_reference_reproduces_golden(case):
    case = dict(case)
    texts = case.pop("texts")
    model = ref.train(texts, **case)
    tok = fb.train(texts, **case)
    assert [tuple(m) for m in tok.merges.tolist()] == model.merges
