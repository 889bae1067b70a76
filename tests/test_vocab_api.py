"""Vocabulary look-ups under tiktoken's and Hugging Face's names (``fastbpe_nb/vocab_api.py``),
for every preset, checked against tiktoken and ``tokenizers`` where they hold the same model."""

import pickle

import pytest

from fastbpe_nb.errors import TokenLookupError

from presets import FACTORIES, build


@pytest.mark.parametrize("name", [name for name, _ in FACTORIES])
def test_lookups_agree_with_the_vocabulary_every_preset(name):
    tok = build(name)
    assert len(tok) == tok.n_vocab == tok.vocab_size == tok.max_token_value + 1
    vocab = tok.get_vocab()
    assert len(vocab) == tok.vocab_size - len(tok.unused_ids)
    for token, tid in list(vocab.items())[::97] + list(tok.special_tokens.items()):
        assert tok.token_to_id(token) == tid
        assert tok.id_to_token(tid) == token
        assert tok.encode_single_token(token) == tid
        # What the token contributes to decoded text (char level: "</w>" is a space;
        # SentencePiece: "<unk>" is " ⁇ "); byte level: the token's own bytes.
        assert tok.decode_single_token_bytes(tid) == tok.decode_bytes([tid])
        if tok.base == "bytes":
            assert tok.decode_single_token_bytes(tid) == (
                token.encode() if isinstance(token, str) else token)
    assert tok.special_tokens_set == set(tok.special_tokens)
    assert tok.token_to_id(b"\xff\xfe not a token \x00") is None
    assert tok.id_to_token(tok.vocab_size) is None and tok.id_to_token(-1) is None
    with pytest.raises(TokenLookupError):
        tok.encode_single_token("no such token, surely \x00\x01")
    with pytest.raises(TypeError):
        tok.token_to_id(42)
    with pytest.raises(TypeError):
        tok.id_to_token(True)
    ids = tok.encode_ordinary("Hello world, hello again")
    if tok.base == "bytes":  # markers: a token alone is a whole text (see vocab_api)
        assert b"".join(tok.decode_tokens_bytes(ids)) == tok.decode_bytes(ids)
    else:
        assert tok.decode_tokens_bytes(ids) == [tok.decode_bytes([i]) for i in ids]
    texts = ["a <|endoftext|> b", "plain"]
    assert tok.encode_ordinary_batch(texts) == [tok.encode_ordinary(t) for t in texts]
    copy = pickle.loads(pickle.dumps(tok))  # the look-up index is not pickled, rebuilt
    assert copy.get_vocab() == vocab


def test_tiktoken_names_match_tiktoken_on_cl100k():
    from peers import tiktoken_encoding

    tok = build("cl100k-tiktoken")
    enc = tiktoken_encoding(list(tok.vocab[:tok.n_regular]), "cl100k", dict(tok.special_tokens))
    assert tok.n_vocab == enc.n_vocab and tok.max_token_value == enc.max_token_value
    assert tok.eot_token == enc.eot_token == 100257
    assert tok.special_tokens_set == enc.special_tokens_set
    for token in (b" the", b"hello", "<|endoftext|>", b"\n\n"):
        assert tok.encode_single_token(token) == enc.encode_single_token(token)
    ids = enc.encode("Grüße, 東京! <|endoftext|>", allowed_special="all")
    assert tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)
    assert tok.decode_single_token_bytes(ids[0]) == enc.decode_single_token_bytes(ids[0])


def test_eot_token_missing_is_a_clear_error():
    tok = build("chars-eow")
    if "<|endoftext|>" in tok.special_tokens:
        pytest.skip("this preset registers <|endoftext|>")
    with pytest.raises(TokenLookupError, match="endoftext"):
        tok.eot_token
