"""The Tokenizer: one class composed of parts, with the verbs users call.

Parts (see docs/architecture.md): a **normalizer** (``text.UnicodeNormalizer`` or
SentencePiece's), a **level** -- the base alphabet with its pre-tokenizer
(``layout.ByteLevel``, ``layout.CharLevel``, SentencePiece's code points) -- a **model**
(``model.MergeModel`` by merge pairs or token ranks, SentencePiece's by piece scores),
**special tokens** (``specials.SpecialTokens``, tiktoken's allowed/disallowed policy) and a
**decoder**. Every preset -- byte-level GPT style, tiktoken files, char-level with an
end-of-word marker, SentencePiece -- is a Tokenizer of such parts, and every verb goes
through the one encode path (``encoder.Encoder``: layout -> ``parallel.run_encode`` ->
kernel).

Text policy: ``encode(str)`` encodes the text's UTF-8 bytes. A ``str`` holding lone
surrogates (which have no UTF-8 form) has each of them replaced by U+FFFD first, as tiktoken
does; to tokenize arbitrary bytes, invalid UTF-8 included, use ``encode_bytes`` (byte
level), whose output always decodes back to the same bytes with ``decode_bytes``.
"""

from __future__ import annotations

import os

import numpy as np

from .decoder import StreamDecoder, TableDecoder
from .encoder import Encoder
from .layout import make_level
from .model import MergeModel
from .specials import SpecialTokens, check_special_tokens
from .text import UnicodeNormalizer
from .validation import check_dropout, check_num_threads, check_seed
from .file_verbs import FileVerbs
from .framing import encode_framed, frame_one
from .offsets import OffsetsMixin
from .pruning import PruningMixin, encoder_specials
from .vocab_api import VocabularyLookups


class Tokenizer(VocabularyLookups, OffsetsMixin, FileVerbs, PruningMixin):
    """A BPE tokenizer: frozen merges, vocabulary, pre-tokenization pattern, special tokens.

    Parameters
    ----------
    merges : array-like of int, shape (n, 2)
        Merge pairs in rank order; every id must exist before the merge that uses it.
    pattern : str or None
        ``"gpt2"``, ``"cl100k"``, ``"o200k"``, any regex string, or None (no split).
        Char mode's default (``"default"``) is whitespace-separated words.
    special_tokens : sequence of str or dict
        Strings (ids assigned after the last regular token, in order) or ``{token: id}``.
    base : {"bytes", "chars"}
        Byte-level BPE (any text encodes) or classic char-level BPE.
    alphabet : sequence of str
        Char mode only: the base symbols by id (sorted by code point).
    end_of_word : str or None
        Char mode only: the marker appended to every word (one of the alphabet's symbols).
    tie_break : str or None
        The tie rule the merges were trained with (metadata; encoding does not use it).
    byte_order : sequence of 256 ints, optional
        Byte mode: the byte value of each base id 0..255 (tiktoken files may number the
        single bytes in another order). Default: id = byte value.
    normalization : {None, "NFC", "NFKC"}
        Unicode normalization applied to text before encoding (and in training). None (the
        default) is the identity: ``decode(encode(t)) == t`` for every text. With a form,
        the round trip gives ``unicodedata.normalize(form, t)``.
    merge_mode : {"pairs", "ranks"}
        ``pairs`` (ours, Hugging Face's): merge the adjacent pair with the lowest *merge*
        rank. ``ranks`` (tiktoken's): a piece that is a token is that token; otherwise
        merge the adjacent pair whose *concatenation* is the lowest-ranked token.

    SentencePiece models are built by ``fastbpe_nb.from_sentencepiece`` and
    ``fb.train(..., whitespace="▁")`` from the same class (``Tokenizer.from_parts``).
    """

    def __init__(self, merges=(), pattern="gpt2", special_tokens=(), *, base="bytes",
                 alphabet=None, end_of_word=None, tie_break=None, merge_counts=None, roles=None,
                 byte_order=None, merge_mode="pairs", normalization=None, _source=None):
        if merge_mode not in ("pairs", "ranks"):
            raise ValueError(f"merge_mode must be 'pairs' or 'ranks', not {merge_mode!r}")
        normalizer = UnicodeNormalizer(normalization)
        if merge_mode == "ranks" and base != "bytes":
            raise ValueError("merge_mode='ranks' (tiktoken's rule) needs base='bytes'")
        level = make_level(base, pattern, alphabet, end_of_word, byte_order, _source)
        model = MergeModel(merges, level.base_bytes, merge_mode, _source)
        self._assemble(model, level, normalizer, special_tokens, None, _source, roles)
        self.tie_break = tie_break
        self.merge_counts = None if merge_counts is None else np.asarray(merge_counts, np.int64)

    @classmethod
    def from_parts(cls, model, level, normalizer, decoder=None, special_tokens=(),
                   tie_break=None, source=None, roles=None) -> "Tokenizer":
        """A tokenizer of explicit parts (the presets' constructor; see the module doc)."""
        tok = cls.__new__(cls)
        tok._assemble(model, level, normalizer, special_tokens, decoder, source, roles)
        tok.tie_break, tok.merge_counts = tie_break, None
        return tok

    def _assemble(self, model, level, normalizer, special_tokens, decoder, source, roles=None):
        self.model, self.level, self.normalizer = model, level, normalizer
        n_regular = len(model.token_bytes)
        if not isinstance(special_tokens, SpecialTokens):
            special_tokens = SpecialTokens(check_special_tokens(special_tokens, n_regular,
                                                                source=source))
        self.specials, self._roles = special_tokens, self._roles_for(roles, special_tokens, source)
        self._vocab = special_tokens.vocab(model.token_bytes)
        if decoder is None:
            eow = getattr(level, "end_of_word", None)
            decoder = TableDecoder(self._vocab, n_regular, eow.encode("utf-8") if eow else None)
        self.decoder = decoder
        self._encoder = Encoder(level, normalizer, encoder_specials(model, special_tokens),
                                self._tables, len(self._vocab), getattr(model, "postprocess",
                                None), 4 if level.kind == "pieces" else 8)
        self.piece_cache = self._encoder.cache  # merged pieces kept between calls (info())

    def _tables(self):
        return self.model.tables(self.level.sym_map, self.level.kind == "bytes", self.vocab_size)

    # ------------------------------------------------------------------ state
    def __getstate__(self):
        return {"model": self.model, "level": self.level, "normalizer": self.normalizer,
                "decoder": None if isinstance(self.decoder, TableDecoder) else self.decoder,
                "special_tokens": self.specials.ids, "tie_break": self.tie_break,
                "merge_counts": self.merge_counts, "roles": self._roles}

    def __setstate__(self, state):
        if "model" not in state:  # pickled by a version before the parts: rebuild
            kw = {k: state.get(k) for k in ("alphabet", "end_of_word", "tie_break",
                                             "merge_counts", "byte_order", "normalization")}
            self.__init__(state["merges"], state["pattern"], state["special_tokens"],
                          base=state["base"], merge_mode=state.get("merge_mode", "pairs"), **kw)
            return
        self._assemble(state["model"], state["level"], state["normalizer"],
                       state["special_tokens"], state["decoder"], None, state.get("roles"))
        self.tie_break, self.merge_counts = state["tie_break"], state["merge_counts"]

    def __eq__(self, other):
        if not isinstance(other, Tokenizer):
            return NotImplemented
        same = (self.level == other.level and self.normalizer == other.normalizer
                and self.specials.ids == other.specials.ids and self._roles == other._roles
                and type(self.model) is type(other.model) and self.model.mode == other.model.mode)
        return same and self.model == other.model  # (a MergeModel compares its merges)

    __hash__ = None

    def __repr__(self):
        return (f"Tokenizer(base={self.base!r}, pattern={self.pattern!r}, "
                f"merges={len(self.merges)}, vocab_size={self.vocab_size}, "
                f"special_tokens={len(self.special_tokens)})")

    # ------------------------------------------------------------------ properties
    base = property(lambda self: self.level.kind, doc='"bytes", "chars" or "pieces" (SentencePiece).')
    pattern = property(lambda self: self.level.pattern, doc="The pre-tokenization pattern.")
    alphabet = property(lambda self: getattr(self.level, "alphabet", None))
    end_of_word = property(lambda self: getattr(self.level, "end_of_word", None))
    byte_order = property(lambda self: getattr(self.level, "byte_order", None))
    merge_mode = property(lambda self: self.model.mode, doc='"pairs", "ranks" or "scores".')
    normalization = property(lambda self: getattr(self.normalizer, "form", None))
    special_tokens = property(lambda self: self.specials.ids, doc="{token: id}.")
    n_base = property(lambda self: self.model.n_base, doc="Number of base symbols.")

    @property
    def merges(self) -> np.ndarray:
        """int32[n, 2]: the merge pairs in rank order (SentencePiece: the pair table's)."""
        if not hasattr(self.model, "merges"):  # SentencePiece: made with its pair table
            self._tables()
        return self.model.merges

    merge_ids = property(lambda self: (self.merges, self.model.merge_ids)[1],
                         doc="int32[n]: the id each merge produces.")

    vocab = property(lambda self: self._vocab, doc="""Bytes of every id (index = id), special
        tokens as their UTF-8, None for an unused id. Shared: do not modify it.""")
    vocab_size = property(lambda self: len(self._vocab), doc="Number of ids (max id + 1).")

    @property
    def unused_ids(self) -> list[int]:
        """Ids below ``vocab_size`` that no token has (gaps between special token ids)."""
        unused = getattr(self.decoder, "unused", None)
        return [] if unused is None else np.flatnonzero(unused).tolist()

    n_regular = property(lambda self: len(self.model.token_bytes), doc="Non-special ids.")

    def normalize(self, text: str) -> str:
        """``text`` as the model sees it after the normalizer (SentencePiece: ``▁`` for spaces)."""
        return self.normalizer.normalize(text)

    def special_sets(self, allowed_special=(), disallowed_special="all"):
        """The ``(allowed, disallowed)`` frozensets of special tokens an encode call uses."""
        return self.specials.sets(allowed_special, disallowed_special)

    # ------------------------------------------------------------------ encoding
    def encode(self, text: str, allowed_special=(), disallowed_special="all", *,
               dropout: float = 0.0, seed: int = 0, add_bos: bool = False,
               add_eos: bool = False) -> list[int]:
        """Encode ``text`` to token ids (tiktoken's special-token semantics).

        By default a registered special token in ``text`` raises
        DisallowedSpecialTokenError; list it in ``allowed_special`` (or pass ``"all"``) to
        get its id, or pass ``disallowed_special=()`` to encode it as plain text.

        ``dropout=p`` (BPE-dropout, for training-time regularisation) skips each applicable
        merge with probability p, deterministically for a given ``seed``; ``p=0`` is exactly
        ordinary encoding, and every result still decodes to the input. ``add_bos`` /
        ``add_eos``: the tokenizer's ``bos_token`` / ``eos_token`` around the ids.
        """
        if add_bos is not False or add_eos is not False:
            return frame_one(self, self.encode(text, allowed_special, disallowed_special,
                                               dropout=dropout, seed=seed), add_bos, add_eos)
        if self._encoder.ordinary(text, allowed_special, disallowed_special, dropout, seed):
            ids = self._encoder.encode_short(text)  # no special token: encode_ordinary's ids
            if ids is not None:
                return ids
        allowed, disallowed = self.specials.sets(allowed_special, disallowed_special)
        ids = self._encoder.encode_one(text, allowed, disallowed, check_dropout(dropout),
                                       check_seed(seed))
        return self._encoder.id_list(ids)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` ignoring special tokens (their text is encoded as plain text)."""
        if type(text) is str:
            ids = self._encoder.encode_short(text)
            if ids is not None:
                return ids
        return self._encoder.id_list(self._encoder.encode_one(text, frozenset(), frozenset()))

    def encode_to_numpy(self, text: str, allowed_special=(), disallowed_special="all", *,
                        dropout: float = 0.0, seed: int = 0) -> np.ndarray:
        """``encode`` as a ``uint32`` NumPy array (the same ids; tiktoken's name and dtype):
        no Python list, about 40% of ``encode``'s time on a text of a token per byte or two."""
        if self._encoder.ordinary(text, allowed_special, disallowed_special, dropout, seed):
            ids = self._encoder.encode_short(text)
            if ids is not None:
                return np.array(ids, dtype=np.uint32)
        allowed, disallowed = self.specials.sets(allowed_special, disallowed_special)
        return self._encoder.encode_one(text, allowed, disallowed, check_dropout(dropout),
                                        check_seed(seed), keep=True).view(np.uint32)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encode arbitrary bytes (invalid UTF-8 included); ``decode_bytes`` gives them back.

        Byte level only. Each invalid byte is one "other" character for pre-tokenization;
        special tokens are not recognised.
        """
        return self._encoder.id_list(self._encoder.encode_bytes(bytes(data)))

    def encode_batch(self, texts, num_threads=None, allowed_special=(), disallowed_special="all",
                     *, return_offsets: bool = False, add_bos: bool = False,
                     add_eos: bool = False, max_length=None, stride=None, padding=False,
                     padding_side: str = "right", return_numpy: bool = False,
                     dropout: float = 0.0, seed: int = 0):
        """Encode many documents at once, on all cores.

        A list of str gives a list of lists of ids; a pyarrow string array (or chunked
        array) gives a ``pa.ListArray`` of int32 (nulls stay null). ``return_offsets=True``
        (a list of str): ``(ids_per_text, offsets_per_text)``, see ``encode_with_offsets``.
        Framing (``framing.py``): ``add_bos``/``add_eos`` per document, ``max_length``
        (BOS/EOS included) with an optional overlapping ``stride`` (then a list of windows
        per document), ``padding`` (True/"longest"/"max_length") with ``return_numpy=True``:
        ``{"input_ids": int32[rows, L], "attention_mask": int8[rows, L], ...}``.
        ``dropout``/``seed`` as in ``encode``: document i draws from (seed, i) whatever the
        threads, so ``encode(texts[0], dropout=p, seed=s)`` is the batch's first row.
        """
        if add_bos or add_eos or max_length is not None or stride is not None or padding \
                or return_numpy or dropout != 0:
            return encode_framed(self, texts, num_threads, allowed_special, disallowed_special,
                                 add_bos=add_bos, add_eos=add_eos, max_length=max_length,
                                 stride=stride, padding=padding, padding_side=padding_side,
                                 return_numpy=return_numpy, dropout=dropout, seed=seed)
        if return_offsets:
            return self.encode_batch_with_offsets(texts, num_threads, allowed_special,
                                                  disallowed_special)
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a list of str (or an Arrow array), not one str")
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        allowed, disallowed = self.specials.sets(allowed_special, disallowed_special)
        if _is_arrow(texts):
            return self._encoder.encode_arrow(texts, allowed, disallowed, n_threads)
        return self._encoder.encode_list(list(texts), allowed, disallowed, n_threads)

    def encode_batch_flat(self, texts, num_threads=None, allowed_special=(),
                          disallowed_special="all", *, row_base=0, dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows + 1], valid bool[rows])`` of a batch: the ids
        end to end, no list per document (the form Parquet and ``.bin`` writers take).

        ``texts``: a pyarrow string array (nulls are invalid rows with no ids) or a list
        of str. ``row_base`` numbers the rows in errors.
        """
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        allowed, disallowed = self.specials.sets(allowed_special, disallowed_special)
        dropout, seed = check_dropout(dropout), check_seed(seed)
        if _is_arrow(texts):
            return self._encoder.encode_arrow_flat(texts, allowed, disallowed, n_threads,
                                                   row_base, dropout, seed)
        texts = list(texts)
        ids, offsets = self._encoder.encode_texts(texts, allowed, disallowed, n_threads,
                                                  ("document", row_base), dropout, seed)
        return ids, offsets, np.ones(len(texts), dtype=bool)

    def count_tokens(self, texts, num_threads=None, allowed_special=(), disallowed_special="all"):
        """Number of tokens of a str (an int) or of each document of a batch (an int64
        array; ``encode_batch``'s argument order). The ids never become Python objects."""
        if isinstance(texts, str):
            if len(texts) <= 256:  # encode's per-call fast path (the piece memo)
                return len(self.encode(texts, allowed_special, disallowed_special))
            allowed, disallowed = self.specials.sets(allowed_special, disallowed_special)
            return len(self._encoder.encode_one(texts, allowed, disallowed))
        if not _is_arrow(texts):
            texts = list(texts)
            if not texts:
                return np.zeros(0, dtype=np.int64)
        _, offsets, _ = self.encode_batch_flat(texts, num_threads, allowed_special,
                                               disallowed_special)
        return np.diff(offsets)

    # ------------------------------------------------------------------ decoding
    def decode_bytes(self, ids) -> bytes:
        """The bytes of the tokens, joined (char mode: end-of-word markers become spaces).

        ``ids``: any iterable of ints, a NumPy integer array, or a pyarrow integer array.
        A bool, a float (even integral), a str or a null raises TokenIdTypeError, an id
        outside the vocabulary (or an unused one) UnknownTokenError, naming its position.
        """
        out = self.decoder.decode_bytes(ids)
        return out if isinstance(out, bytes) else out.tobytes()

    def decode(self, ids, errors: str = "replace") -> str:
        """Decode ids to text: bytes joined, *then* UTF-8 decoded (``errors`` as in
        bytes.decode). ``ids`` as for ``decode_bytes``."""
        return self.decoder.decode(ids, errors)

    def decode_batch(self, batch, errors: str = "replace") -> list[str]:
        """``decode`` of each list of ids (or each row of a pyarrow list array)."""
        if _is_arrow(batch):
            batch = batch.to_pylist()
        return [self.decode(ids, errors) for ids in batch]

    def stream_decoder(self, errors: str = "replace") -> StreamDecoder:
        """An incremental decoder whose ``push(id)`` returns only complete characters."""
        return StreamDecoder(self, errors)

    def id_to_piece(self, token_id: int) -> bytes:
        self.decoder.check_ids([token_id])
        return self.vocab[int(token_id)]


def _is_arrow(obj) -> bool:
    module = type(obj).__module__ or ""
    return module.startswith("pyarrow")

