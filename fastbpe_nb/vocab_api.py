"""Vocabulary look-ups under the names tiktoken and Hugging Face users reach for first.

A mixin of ``Tokenizer`` built on its public attributes only (``vocab``, ``special_tokens``,
``n_regular``, ``vocab_size``, ``decode_bytes``, ``encode_batch``), so every
preset has them. Regular tokens are ``bytes`` (byte-level tokens need not be UTF-8), special
tokens are ``str``; a ``str`` that is not a special token is looked up by its UTF-8 bytes.

tiktoken's names (``n_vocab``, ``max_token_value``, ``eot_token``, ``special_tokens_set``,
``encode_single_token``, ``decode_single_token_bytes``, ``decode_tokens_bytes``,
``encode_ordinary_batch``) raise on a missing token as tiktoken does (here
``TokenLookupError``, a ``ValueError``); Hugging Face's (``token_to_id``, ``id_to_token``,
``get_vocab``, ``len()``) return None, as ``tokenizers`` does.
"""

from __future__ import annotations

from .errors import TokenLookupError
from .roles import SpecialTokenRoles


class VocabularyLookups(SpecialTokenRoles):
    """Look-ups by token and by id; see the module docstring. Built on the special-token
    roles (``roles.SpecialTokenRoles``: ``eot_token`` is the EOS role when one is set)."""

    # ------------------------------------------------------------------ tiktoken's names
    @property
    def n_vocab(self) -> int:
        """Number of ids (tiktoken's name; unused ids between special tokens included)."""
        return self.vocab_size

    @property
    def max_token_value(self) -> int:
        """The largest id."""
        return self.vocab_size - 1

    @property
    def eot_token(self) -> int:
        """The id of the EOS token when the tokenizer has one (``eos_token``), else of
        ``<|endoftext|>`` (TokenLookupError when neither is set)."""
        eot = self.eos_token_id
        if eot is None:
            eot = self.special_tokens.get("<|endoftext|>")
        if eot is None:
            raise TokenLookupError("this tokenizer has no <|endoftext|> special token "
                                   f"(its special tokens: {sorted(self.special_tokens)})")
        return eot

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens' strings."""
        return set(self.special_tokens)

    def encode_single_token(self, token) -> int:
        """The id of one token (``bytes``, or ``str``: a special token or UTF-8 bytes);
        TokenLookupError when it is not a token of this vocabulary."""
        tid = self.token_to_id(token)
        if tid is None:
            raise TokenLookupError(f"{token!r:.60} is not a token of this vocabulary")
        return tid

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes one id decodes to (byte level: the token's bytes; a special token's
        UTF-8 text; char level and SentencePiece: as ``decode_bytes`` renders markers)."""
        return self.decode_bytes([token_id])

    def decode_tokens_bytes(self, ids) -> list[bytes]:
        """The bytes of each id, each decoded alone (``decode_single_token_bytes``). Joined
        they give ``decode_bytes(ids)`` at byte level; with markers (char level's ``</w>``,
        SentencePiece's ``▁``) a token alone is a whole text, so the space its marker makes
        at the end (start) of a text is dropped (``id_to_piece`` gives the raw pieces)."""
        return [self.decode_bytes([i]) for i in ids]

    def encode_ordinary_batch(self, texts, num_threads=None) -> list[list[int]]:
        """``encode_batch`` with special tokens' text encoded as plain text."""
        return self.encode_batch(texts, num_threads, disallowed_special=())

    # ------------------------------------------------------------------ Hugging Face's names
    def token_to_id(self, token):
        """The id of ``token`` (``bytes``, or ``str``: a special token first, else its
        UTF-8 bytes), or None."""
        if isinstance(token, str):
            special = self.special_tokens.get(token)
            if special is not None:
                return special
            token = token.encode("utf-8")
        elif not isinstance(token, (bytes, bytearray, memoryview)):
            raise TypeError(f"a token is bytes or str, not {type(token).__name__}")
        return self._token_index().get(bytes(token))

    def id_to_token(self, token_id: int):
        """The token of ``token_id``: ``bytes`` (regular), ``str`` (special), None (no such id)."""
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"an id is an int, not {type(token_id).__name__}")
        if not 0 <= token_id < self.vocab_size or self.vocab[token_id] is None:
            return None  # outside the vocabulary, or an unused id
        if token_id >= self.n_regular:
            return next(t for t, i in self.special_tokens.items() if i == token_id)
        return self.vocab[token_id]

    def get_vocab(self) -> dict:
        """``{token: id}``: regular tokens as ``bytes``, special tokens as ``str``."""
        vocab = dict(self._token_index())
        vocab.update(self.special_tokens)
        return vocab

    def __len__(self) -> int:
        return self.vocab_size

    def _token_index(self) -> dict[bytes, int]:
        """``{bytes: id}`` of the regular tokens, built on first use (not pickled: the
        Tokenizer pickles its parts only)."""
        index = self.__dict__.get("_lookup_index")
        if index is None:
            index = {t: i for i, t in enumerate(self.vocab[:self.n_regular])}
            self.__dict__["_lookup_index"] = index
        return index
