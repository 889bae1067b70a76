"""Decoders: ids -> the bytes each one stands for, joined, then UTF-8 decoded.

:class:`TableDecoder` serves byte-level and char-level tokenizers (a token's bytes; with an
end-of-word marker, the marker reads as a space and the text's last one is dropped);
SentencePiece's decoder (``sentencepiece_parts.SentencePieceDecoder``) has the same
interface. :class:`StreamDecoder` wraps either for incremental decoding.
"""

from __future__ import annotations

import codecs

import numpy as np

from .errors import TokenIdTypeError, UnknownTokenError
from .validation import checked_ids

#: Decoding fewer ids than this joins their ``bytes`` in Python; more go through a kernel.
DECODE_JOIN_MAX = 4096


class TableDecoder:
    """Decodes by a table of bytes per id (None: an unused id, an error to decode).

    ``n_regular``: ids below it are regular tokens; ``marker``: the end-of-word marker's
    bytes (char level) or None.
    """

    def __init__(self, vocab: list, n_regular: int, marker: bytes | None = None):
        self.table = vocab
        if marker is not None:
            self.table = [t.replace(marker, b" ") if i < n_regular else t
                          for i, t in enumerate(vocab)]
        self._ends_word = None
        if marker is not None:
            self._ends_word = np.array([i < n_regular and t.endswith(marker)
                                        for i, t in enumerate(vocab)], dtype=bool)
        self.unused = None
        unused = [i for i in range(n_regular, len(vocab)) if vocab[i] is None]
        if unused:
            self.unused = np.zeros(len(vocab), dtype=bool)
            self.unused[unused] = True
        self._flat = None

    def check_ids(self, ids) -> np.ndarray:
        """``ids`` as a validated int64 array (see ``validation.checked_ids``)."""
        return checked_ids(ids, len(self.table), self.unused)

    def decode_bytes(self, ids):
        """The bytes of ``ids``: ``bytes`` for a short input, else a uint8 array (gathered
        by a kernel: no per-id Python object, so the extra memory is the output plus 8
        bytes per id)."""
        if isinstance(ids, list) and len(ids) < DECODE_JOIN_MAX:
            out = self._join_list(ids)
        else:
            ids = self.check_ids(ids)
            if len(ids) < DECODE_JOIN_MAX:
                out = self._join_list(ids.tolist())
            else:
                from .kernels.decode import gather_tokens
                from .parallel import call_kernel

                out = call_kernel(gather_tokens, ids, *self._flat_table())
        if self._ends_word is not None and len(out) and out[-1] == 32 and self._ends_word[int(ids[-1])]:
            out = out[:-1]  # the last word's marker is not a space between words
        return out

    def decode(self, ids, errors: str = "replace") -> str:
        return codecs.utf_8_decode(self.decode_bytes(ids), errors, True)[0]

    def _join_list(self, ids: list) -> bytes:
        """The bytes of a short list of ids: joined directly, validated by exception.

        A float, str or None entry fails the lookup (TypeError), as does an unused id (its
        entry is None); a negative id would index from the end, and a bool is an int to
        Python, so both are looked for after the join: plain ints cost two C-level scans.
        """
        table = self.table
        try:
            out = b"".join([table[i] for i in ids])
        except (IndexError, TypeError):
            self.check_ids(ids)  # raises, naming the position
            raise
        if ids and (set(map(type, ids)) != {int} or min(ids) < 0):
            self.check_ids(ids)
        return out

    def _flat_table(self):
        """``(tok_off int64[vocab + 1], tok_data uint8[total])``: the table's bytes end to end
        (unused ids are empty; they never pass ``check_ids``)."""
        if self._flat is None:
            table = [b"" if t is None else t for t in self.table]
            tok_off = np.zeros(len(table) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, table), np.int64, len(table)), out=tok_off[1:])
            tok_data = np.frombuffer(b"".join(table), dtype=np.uint8).copy()
            self._flat = (tok_off, tok_data)
        return self._flat

    def stream(self):
        """A function id -> bytes for incremental decoding (None for an unknown id).

        With an end-of-word marker, a word's trailing space is held back until the next
        token: the text's last one is not a space between words (as ``decode_bytes``)."""
        table = self.table

        def push(token_id: int):
            return table[token_id] if 0 <= token_id < len(table) else None

        if self._ends_word is None:
            return push
        held = [b""]

        def push_words(token_id: int):
            data = push(token_id)
            if data is None:
                return None
            out, held[0] = held[0] + data, b""
            if out.endswith(b" ") and self._ends_word[token_id]:
                out, held[0] = out[:-1], b" "
            return out

        return push_words


class StreamDecoder:
    """Incremental decoder: ``push(id)`` returns only complete characters.

    A token may end in the middle of a UTF-8 sequence (an emoji's 4 bytes can span several
    tokens); those bytes are held back until the sequence completes. ``flush()`` returns
    what is left (incomplete bytes become U+FFFD with ``errors="replace"``).
    """

    def __init__(self, tokenizer, errors: str = "replace"):
        self._bytes_of = tokenizer.decoder.stream()
        self._n = tokenizer.vocab_size
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=errors)
        self._pushed = 0

    def push(self, token_id: int) -> str:
        if isinstance(token_id, (bool, np.bool_)) or not isinstance(token_id, (int, np.integer)):
            raise TokenIdTypeError(token_id, self._pushed, self._n, "is not an integer id")
        data = self._bytes_of(int(token_id))
        if data is None:
            raise UnknownTokenError(token_id, self._pushed, self._n)
        self._pushed += 1
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
