"""The Tokenizer: a frozen merge list, its vocabulary, and encode / decode around the kernels.

Layout (DESIGN.md section 2). Byte mode: ids 0..255 are the bytes, merge *k* produces the
next free id (or reuses the id of a token with the same bytes), and special tokens take
the ids after the last merged token. Char mode: the base ids number the alphabet (the
distinct characters seen in training, plus the end-of-word marker) in code-point order.

Text policy: ``encode(str)`` encodes the text's UTF-8 bytes. A ``str`` holding lone
surrogates (which have no UTF-8 form) has each of them replaced by U+FFFD first, as tiktoken
does; to tokenize arbitrary bytes, invalid UTF-8 included, use ``encode_bytes``, whose
output always decodes back to the same bytes with ``decode_bytes``.

Arrow string arrays (``encode_batch``, ``count_tokens``, ``encode_parquet``) are read as
bytes, and Arrow does not guarantee they hold UTF-8: a byte-level tokenizer without
normalization encodes each row exactly as ``encode_bytes`` encodes it (special tokens are
found in the bytes), so invalid bytes are kept, not replaced. A tokenizer that needs the
text (normalization, char mode) raises InvalidUTF8Error naming the row and byte offset
(and the file, from ``encode_parquet``) rather than guess.
"""

from __future__ import annotations

import codecs
import os

import numpy as np

from . import pretokenize
from .errors import (
    DisallowedSpecialTokenError,
    InvalidUTF8Error,
    ModelFormatError,
    TokenIdTypeError,
    UnknownCharacterError,
    UnknownTokenError,
)
from .text import NORMALIZATIONS, clean_text, normalize, utf8  # noqa: F401
from .validation import check_dropout, check_num_threads, check_seed, checked_ids

#: Pieces longer than this many units are merged by the windowed rank sweep (or the heap).
LONG_PIECE = 48
#: log2 of the per-block cache of encoded pieces.
CACHE_BITS = 12
#: A single text longer than this (in UTF-8 bytes) is pre-tokenized and encoded this many
#: bytes at a time (see Tokenizer._encode_huge).
SEGMENT_BYTES = 2 << 20


#: Texts of at most this many characters may be encoded from the piece memo (see
#: ``Tokenizer._encode_short``): a kernel call's fixed cost is then paid once per new piece.
SHORT_TEXT_CHARS = 256
#: The piece memo is emptied when it holds this many pieces (bounded memory, ~200 B each).
PIECE_MEMO_ENTRIES = 1 << 16

#: Decoding fewer ids than this joins their ``bytes`` in Python; more go through a kernel.
DECODE_JOIN_MAX = 4096


#: At most this many ids between the regular tokens and the largest special id may be
#: unused (real vocabularies leave a few: cl100k's specials are 100257..100260 and 100276,
#: after 100256 ranks); a far larger id is a typo that would inflate every table.
MAX_UNUSED_IDS = 1 << 16


def _check_special_tokens(special_tokens, first_id: int, entry: str = "special_tokens",
                          source=None) -> dict[str, int]:
    """Normalise ``special_tokens`` (strings, or a {token: id} mapping) to {token: id}.

    Strings are numbered from ``first_id`` (the number of regular tokens). Explicit ids may
    be any unused ids from ``first_id`` on, gaps included (tiktoken's cl100k_base and
    o200k_base have gaps): unique, not a regular token's id, below 2**31 (ids are int32),
    and leaving at most ``MAX_UNUSED_IDS`` ids unused. Raises ValueError (ModelFormatError
    naming ``source`` and ``entry`` when ``source`` is given, i.e. read from a file).
    """
    def fail(reason):
        if source is not None:
            raise ModelFormatError(reason, source, entry)
        raise ValueError(reason)

    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a sequence of strings or a {token: id} dict, not a str")
    if isinstance(special_tokens, dict):
        items = list(special_tokens.items())
    else:
        items = [(t, first_id + i) for i, t in enumerate(special_tokens)]
    out: dict[str, int] = {}
    ids = set()
    for token, tid in items:
        if not isinstance(token, str) or not token:
            fail(f"special token {token!r}: must be a non-empty str")
        if token in out:
            fail(f"special token {token!r} is given twice")
        if isinstance(tid, (bool, np.bool_)) or not isinstance(tid, (int, np.integer)):
            fail(f"special token {token!r}: id {tid!r} is not an integer")
        tid = int(tid)
        if tid in ids:
            fail(f"special token {token!r}: id {tid} is used twice")
        if not first_id <= tid < 2**31:
            where = (f"the id of a regular token (0..{first_id - 1})" if 0 <= tid < first_id
                     else "negative" if tid < 0 else "not below 2**31 (ids are int32)")
            fail(f"special token {token!r} has id {tid}, which is {where}; special token ids "
                 f"must be >= {first_id}: right after the {first_id} regular tokens, or later "
                 "(unused ids may be left between them)")
        ids.add(tid)
        out[token] = tid
    if ids:
        unused = max(ids) + 1 - first_id - len(ids)
        if unused > MAX_UNUSED_IDS:
            bad = max(out, key=out.get)
            fail(f"special token {bad!r} has id {out[bad]}, which would leave {unused:,} ids "
                 f"unused after the {first_id} regular tokens (at most {MAX_UNUSED_IDS:,} may "
                 "be): a special token id must be close to the regular ones")
    return out


def merge_array(merges, source=None) -> np.ndarray:
    """``merges`` as an int64 array of shape (n, 2), every id checked to be an integer.

    Strict on purpose: a Python int or a NumPy integer only. A float (even ``97.0``), a
    bool, a string of digits or a NumPy float array raises ModelFormatError naming
    ``merges[i]`` (NumPy would silently truncate ``97.5`` to 97 and read ``"98"`` as 98).
    Ids outside ``0 .. 2**31 - 1`` are named too (the exact "defined before use" check is
    ``derive_vocab``'s).
    """
    if isinstance(merges, np.ndarray) and merges.dtype.kind in "iu":
        arr = merges
        if arr.size == 0:
            arr = arr.reshape(-1, 2) if arr.ndim == 1 else arr
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"merges must have shape (n, 2), got {arr.shape}")
        bad = (arr < 0) | (arr >= 2**31)
        if bad.any():
            k = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ModelFormatError(f"merge {arr[k].tolist()} has an id outside 0..2**31-1",
                                   source, f"merges[{k}]")
        return arr.astype(np.int64)
    if isinstance(merges, np.ndarray):
        if merges.dtype.kind != "O":
            if merges.size == 0:
                return np.zeros((0, 2), dtype=np.int64)
            raise ModelFormatError(f"merge ids must be integers, got a {merges.dtype} array",
                                   source, "merges[0]")
        merges = merges.tolist()
    if isinstance(merges, (str, bytes)):
        raise TypeError("merges must be a sequence of (left, right) id pairs, not a string")
    rows = list(merges)
    for k, m in enumerate(rows):
        if isinstance(m, (str, bytes)) or not hasattr(m, "__len__") or len(m) != 2:
            raise ModelFormatError(f"merges must have shape (n, 2): expected a (left, right) "
                                   f"pair of integer ids, got {m!r:.60}", source, f"merges[{k}]")
        for x in m:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise ModelFormatError(
                    f"merge {tuple(m)!r:.60}: id {x!r:.30} is a {type(x).__name__}, not an "
                    "integer (a Python int or a NumPy integer)", source, f"merges[{k}]")
            if not 0 <= x < 2**31:
                raise ModelFormatError(f"merge {tuple(m)!r:.60}: id {x} is outside 0..2**31-1",
                                       source, f"merges[{k}]")
    if not rows:
        return np.zeros((0, 2), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def derive_vocab(merges: np.ndarray, base_bytes: list[bytes], source=None):
    """Replay ``merges`` to derive the vocabulary, validating every id on the way.

    Returns ``(merge_ids, token_bytes, units)``: the id each merge produces, the bytes of
    every regular token, and each token's length in base units. Raises ModelFormatError
    naming ``merges[k]`` for an id that is not defined when merge k is applied.
    """
    token_bytes = list(base_bytes)
    units = [1] * len(token_bytes)
    id_of = {b: i for i, b in enumerate(token_bytes)}
    merge_ids = np.empty(len(merges), dtype=np.int32)
    for k, (a, b) in enumerate(merges.tolist()):
        n = len(token_bytes)
        if not (0 <= a < n and 0 <= b < n):
            bad = a if not 0 <= a < n else b
            raise ModelFormatError(
                f"merge ({a}, {b}) uses id {bad}, which is not defined before rank {k} "
                f"(ids 0..{n - 1} exist at that point)",
                source, f"merges[{k}]",
            )
        new = token_bytes[a] + token_bytes[b]
        tid = id_of.get(new)
        if tid is None:
            tid = n
            token_bytes.append(new)
            units.append(units[a] + units[b])
            id_of[new] = tid
        merge_ids[k] = tid
    return merge_ids, token_bytes, units


class StreamDecoder:
    """Incremental decoder: ``push(id)`` returns only complete characters.

    A token may end in the middle of a UTF-8 sequence (an emoji's 4 bytes can span several
    tokens); those bytes are held back until the sequence completes. ``flush()`` returns
    what is left (incomplete bytes become U+FFFD with ``errors="replace"``).
    """

    def __init__(self, tokenizer: "Tokenizer", errors: str = "replace"):
        self._table = tokenizer._decode_table
        self._n = len(self._table)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=errors)
        self._pushed = 0

    def push(self, token_id: int) -> str:
        if isinstance(token_id, (bool, np.bool_)) or not isinstance(token_id, (int, np.integer)):
            raise TokenIdTypeError(token_id, self._pushed, self._n, "is not an integer id")
        if not 0 <= token_id < self._n or self._table[int(token_id)] is None:
            raise UnknownTokenError(token_id, self._pushed, self._n)
        self._pushed += 1
        return self._decoder.decode(self._table[int(token_id)])

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class Tokenizer:
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
        the round trip gives ``unicodedata.normalize(form, t)``: lossless up to
        normalization, which NFKC makes visible (e.g. "ﬁ" comes back as "fi").
    merge_mode : {"pairs", "ranks"}
        ``pairs`` (ours, Hugging Face's): merge the adjacent pair with the lowest *merge*
        rank. ``ranks`` (tiktoken's): a piece that is a token is that token; otherwise
        merge the adjacent pair whose *concatenation* is the lowest-ranked token. They
        agree on trained vocabularies and differ on some hand-made ones.
    """

    def __init__(self, merges=(), pattern="gpt2", special_tokens=(), *, base="bytes",
                 alphabet=None, end_of_word=None, tie_break=None, merge_counts=None,
                 byte_order=None, merge_mode="pairs", normalization=None, _source=None):
        if base not in ("bytes", "chars"):
            raise ValueError(f"base must be 'bytes' or 'chars', not {base!r}")
        if merge_mode not in ("pairs", "ranks"):
            raise ValueError(f"merge_mode must be 'pairs' or 'ranks', not {merge_mode!r}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, not {normalization!r}")
        self.normalization = normalization
        if merge_mode == "ranks" and base != "bytes":
            raise ValueError("merge_mode='ranks' (tiktoken's rule) needs base='bytes'")
        merges = merge_array(merges, _source)
        if base == "bytes":
            if alphabet is not None:
                raise ValueError("alphabet is only for base='chars'")
            if end_of_word is not None:
                raise ValueError("end_of_word is only for base='chars'")
            if byte_order is None:
                self.byte_order = None
            else:
                order = [int(b) for b in byte_order]
                if sorted(order) != list(range(256)):
                    raise ModelFormatError("byte_order must list each byte value 0..255 once",
                                           _source, "byte_order")
                self.byte_order = None if order == list(range(256)) else order
            base_bytes = [bytes([b]) for b in (self.byte_order or range(256))]
            self.alphabet = None
        else:
            alphabet = list(alphabet or ())
            if any(not isinstance(s, str) or not s for s in alphabet):
                raise ModelFormatError("alphabet entries must be non-empty strings", _source, "alphabet")
            if alphabet != sorted(set(alphabet)):
                raise ModelFormatError("alphabet must be unique and sorted by code point",
                                       _source, "alphabet")
            if end_of_word is not None and end_of_word not in alphabet:
                raise ModelFormatError(f"end_of_word {end_of_word!r} is not in the alphabet",
                                       _source, "end_of_word")
            if byte_order is not None:
                raise ValueError("byte_order is only for base='bytes'")
            self.byte_order = None
            base_bytes = [s.encode("utf-8") for s in alphabet]
            self.alphabet = alphabet
        if pattern == "default":
            pattern = "gpt2" if base == "bytes" else pretokenize.WHITESPACE_WORDS_PATTERN
        # "GPT2", "o200k_base" -> the canonical name; raises on an unknown name or bad regex.
        pattern = pretokenize.resolve_pattern(pattern)
        pretokenize.compiled_pattern(pattern)
        self.base = base
        self.merge_mode = merge_mode
        self.pattern = pattern
        self.end_of_word = end_of_word
        self.tie_break = tie_break
        self.n_base = len(base_bytes)
        merge_ids, token_bytes, _ = derive_vocab(merges, base_bytes, _source)
        self.merges = merges.astype(np.int32)
        self.merges.setflags(write=False)
        self.merge_ids = merge_ids
        self.merge_ids.setflags(write=False)
        self.merge_counts = None if merge_counts is None else np.asarray(merge_counts, np.int64)
        self._token_bytes = token_bytes
        self.special_tokens = _check_special_tokens(special_tokens, len(token_bytes),
                                                    source=_source)
        self._rank_keys = None
        self._rank_vals = None
        self._sweep_ranks = None
        self._whole = None
        self._short = None
        self._pairs0 = None
        self._piece_memo = {}  # piece (str) -> its ids, for short texts (_encode_short)
        self._id_objects = None  # object array: the int of each id, shared by id lists
        self._build_tables()

    # ------------------------------------------------------------------ tables
    def _build_tables(self):
        n_regular = len(self._token_bytes)
        size = max([n_regular] + [tid + 1 for tid in self.special_tokens.values()])
        # Ids no token has (gaps between special ids) hold None: decoding one is an error.
        self._vocab = list(self._token_bytes) + [None] * (size - n_regular)
        for token, tid in self.special_tokens.items():
            self._vocab[tid] = token.encode("utf-8")
        n_unused = size - n_regular - len(self.special_tokens)
        self._unused = None
        if n_unused:
            self._unused = np.zeros(size, dtype=bool)
            self._unused[[i for i in range(n_regular, size) if self._vocab[i] is None]] = True
        self._flat = None  # decode's flat token bytes (built on demand)
        self._decode_table = self._vocab
        if self.base == "chars" and self.end_of_word is not None:
            marker = self.end_of_word.encode("utf-8")
            self._decode_table = [
                t.replace(marker, b" ") if i < len(self._token_bytes) else t
                for i, t in enumerate(self._decode_table)
            ]
            self._marker_id = self.alphabet.index(self.end_of_word)
        self._char_ids = (
            {s: i for i, s in enumerate(self.alphabet)} if self.base == "chars" else None
        )
        if self.base == "chars":
            self._sym_map = np.arange(max(1, self.n_base), dtype=np.int32)
        else:
            # Base id of each byte value: the identity unless byte_order permutes the bytes.
            self._sym_map = np.arange(256, dtype=np.int32)
            if self.byte_order is not None:
                self._sym_map[np.asarray(self.byte_order)] = np.arange(256, dtype=np.int32)
        self._all_specials = pretokenize.SpecialTokenMatcher(self.special_tokens)
        self._matchers = {}

    def _rank_table(self):
        """The encoder's pair -> (rank, new id) table.

        ``pairs`` mode: the merge list itself. ``ranks`` mode (tiktoken's rule): every split
        of every token into two tokens, ranked by the token it makes, so that merging the
        lowest-ranked pair is merging into the lowest-ranked concatenation.
        """
        if self._rank_keys is None:
            from .kernels.hashing import build_rank_table

            if self.merge_mode == "pairs":
                merges, merge_ids = self.merges, self.merge_ids
            else:
                merges, merge_ids = self._split_pairs()
            from .parallel import call_kernel

            self._rank_keys, self._rank_vals = call_kernel(
                build_rank_table,
                np.ascontiguousarray(merges, dtype=np.int32), np.ascontiguousarray(merge_ids, np.int32),
            )
        return self._rank_keys, self._rank_vals

    def _sweep_rank_count(self) -> int:
        """Size of the list heads the encoder's rank sweep needs (1 + the largest rank)."""
        if self._sweep_ranks is None:
            from .kernels.encode import sweep_rank_count
            from .parallel import call_kernel

            self._sweep_ranks = int(call_kernel(sweep_rank_count, *self._rank_table()))
        return self._sweep_ranks

    def _split_pairs(self):
        """``ranks`` mode: (left, right) -> token for every two-token split, in token order.

        The position in this list is the rank the kernel sees; it grows with the token id,
        so the lowest rank is the lowest-ranked concatenation (tiktoken's rule). One kernel
        call (``kernels.recover.split_pairs``); ``_split_pairs_py`` is its specification.
        """
        from .kernels.recover import split_pairs
        from .parallel import call_kernel

        whole_keys, tok_off, tok_data = self._whole_table()
        lefts, rights, results = call_kernel(split_pairs, tok_off, tok_data, whole_keys,
                                             int(self.n_base))
        return np.stack([lefts, rights], axis=1).reshape(-1, 2), results

    def _split_pairs_py(self):
        """The Python twin of ``_split_pairs`` (the specification its tests compare with)."""
        id_of = {b: i for i, b in enumerate(self._token_bytes)}
        lefts, rights, results = [], [], []
        for tid in range(self.n_base, len(self._token_bytes)):
            data = self._token_bytes[tid]
            for k in range(1, len(data)):
                a = id_of.get(data[:k])
                if a is None:
                    continue
                b = id_of.get(data[k:])
                if b is not None:
                    lefts.append(a)
                    rights.append(b)
                    results.append(tid)
        merges = np.stack([np.asarray(lefts, np.int32), np.asarray(rights, np.int32)], axis=1)
        return merges.reshape(-1, 2), np.asarray(results, dtype=np.int32)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_rank_keys"] = state["_rank_vals"] = state["_whole"] = None  # rebuilt on demand
        state["_short"] = state["_pairs0"] = None
        state["_piece_memo"] = {}
        state["_sweep_ranks"] = state["_id_objects"] = state["_flat"] = None
        state["_matchers"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Tables a tokenizer pickled by an earlier version did not have: built on demand.
        for name in ("_short", "_pairs0"):
            self.__dict__.setdefault(name, None)
        self.__dict__.setdefault("_piece_memo", {})
        if "_unused" not in state:  # pickled by a version without unused ids
            self._build_tables()

    def __eq__(self, other):
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return (
            self.base == other.base and self.pattern == other.pattern
            and self.alphabet == other.alphabet and self.end_of_word == other.end_of_word
            and self.special_tokens == other.special_tokens
            and self.byte_order == other.byte_order and self.merge_mode == other.merge_mode
            and self.normalization == other.normalization
            and np.array_equal(self.merges, other.merges)
        )

    __hash__ = None

    def __repr__(self):
        return (f"Tokenizer(base={self.base!r}, pattern={self.pattern!r}, "
                f"merges={len(self.merges)}, vocab_size={self.vocab_size}, "
                f"special_tokens={len(self.special_tokens)})")

    # --------------------------------------------------------------- properties
    @property
    def vocab(self) -> list[bytes]:
        """Bytes of every id (index = id), special tokens included (as their UTF-8 text);
        None for an unused id (see ``unused_ids``).

        Built once and shared (``tok.vocab[i]`` in a loop costs nothing): do not modify it.
        """
        return self._vocab

    @property
    def vocab_size(self) -> int:
        """Number of ids: base symbols + distinct merged tokens + special tokens, plus the
        unused ids between special token ids when they have gaps (``max id + 1``)."""
        return len(self._vocab)

    @property
    def unused_ids(self) -> list[int]:
        """Ids below ``vocab_size`` that no token has (gaps between special token ids)."""
        return [] if self._unused is None else np.flatnonzero(self._unused).tolist()

    @property
    def n_regular(self) -> int:
        """Number of non-special ids."""
        return len(self._token_bytes)

    # ---------------------------------------------------------------- encoding
    def _special_sets(self, allowed_special, disallowed_special):
        names = set(self.special_tokens)
        if allowed_special == "all":
            allowed = names
        else:
            allowed = set(allowed_special)
            unknown = allowed - names
            if unknown:
                raise ValueError(f"allowed_special names unregistered tokens: {sorted(unknown)[:5]}")
        if disallowed_special == "all":
            disallowed = names - allowed
        else:
            disallowed = set(disallowed_special)
        return frozenset(allowed), frozenset(disallowed)

    def _matcher(self, tokens: frozenset):
        matcher = self._matchers.get(tokens)
        if matcher is None:
            if tokens == frozenset(self.special_tokens):
                matcher = self._all_specials
            else:
                matcher = pretokenize.SpecialTokenMatcher(tokens)
            if len(self._matchers) < 32:
                self._matchers[tokens] = matcher
        return matcher

    def _check_disallowed(self, text, disallowed_m, index, where):
        """Raise DisallowedSpecialTokenError for the first disallowed token in ``text``.

        ``where`` is None for a single text, else ``(label, base)``: the error then names
        the ``label`` (document or row) ``base + index``.
        """
        hit = disallowed_m.first(text)
        if hit is not None:
            err = DisallowedSpecialTokenError(hit[1], hit[0])
            if where is not None:
                label, base = where
                err.args = (f"{label} {base + index}: {err.args[0]}",)
                setattr(err, label, base + index)
            raise err

    def _layout(self, texts, allowed: frozenset, disallowed: frozenset, where=None,
                errors: str = "strict"):
        """Pre-tokenize ``texts`` into the kernel's flat arrays (special tokens cut out first).

        Returns ``(data, piece_offsets, piece_special, doc_piece_offsets)``. Byte mode: the
        documents are cut at allowed special tokens into segments, every segment's UTF-8
        bytes go through one pre-tokenizer call as its own document, and each special
        segment then becomes a single piece carrying its id. ``where``: see
        ``_check_disallowed``. ``errors="surrogateescape"`` (byte mode, no normalization):
        the texts were decoded from bytes with it, and are encoded back to exactly those
        bytes (invalid UTF-8 included, as ``encode_bytes`` takes it).
        """
        if self.base == "chars":
            return self._layout_chars(texts, allowed, disallowed, where)
        allowed_m = self._matcher(allowed) if allowed else None
        disallowed_m = self._matcher(disallowed) if disallowed else None
        encoded = []
        seg_special = []
        doc_segments = [0]
        for doc_index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"document {doc_index}: expected str, got {type(text).__name__}")
            if self.normalization is not None:
                text = normalize(clean_text(text), self.normalization)
            try:
                raw = text.encode("utf-8", errors)
            except UnicodeEncodeError:
                text = clean_text(text)
                raw = text.encode("utf-8")
            if disallowed_m is not None and disallowed_m.maybe_in(text):
                self._check_disallowed(text, disallowed_m, doc_index, where)
            if allowed_m is not None and allowed_m.maybe_in(text):
                segments = pretokenize.split_special(text, allowed_m)
                for segment, is_special in segments:
                    encoded.append(segment.encode("utf-8", errors))
                    seg_special.append(self.special_tokens[segment] if is_special else -1)
                doc_segments.append(doc_segments[-1] + len(segments))
            elif raw:
                encoded.append(raw)
                seg_special.append(-1)
                doc_segments.append(doc_segments[-1] + 1)
            else:
                doc_segments.append(doc_segments[-1])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        seg_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=seg_offsets[1:])
        pieces, seg_pieces = pretokenize.piece_offsets(data, seg_offsets, self.pattern)
        seg_special = np.asarray(seg_special, dtype=np.int32).reshape(-1)
        doc_segments = np.asarray(doc_segments, dtype=np.int64)
        if not (seg_special >= 0).any():
            special = np.zeros(0, dtype=np.int32)  # no special token in this batch
            return data, pieces, special, seg_pieces[doc_segments]
        # Collapse each special segment's pieces into one piece carrying the special id.
        per_seg = np.diff(seg_pieces)
        seg_of_piece = np.repeat(np.arange(len(per_seg)), per_seg)
        is_first = np.zeros(len(pieces) - 1, dtype=bool)
        is_first[seg_pieces[:-1][per_seg > 0]] = True
        keep = (seg_special[seg_of_piece] < 0) | is_first
        special = np.where(is_first, seg_special[seg_of_piece], -1)[keep].astype(np.int32)
        new_pieces = np.append(pieces[:-1][keep], pieces[-1]).astype(np.int64)
        kept_per_seg = np.bincount(seg_of_piece[keep], minlength=len(per_seg))
        new_seg_pieces = np.zeros(len(per_seg) + 1, dtype=np.int64)
        np.cumsum(kept_per_seg, out=new_seg_pieces[1:])
        return data, new_pieces, special, new_seg_pieces[doc_segments]

    def _layout_chars(self, texts, allowed: frozenset, disallowed: frozenset, where=None):
        """Char mode: the same arrays, with base symbol ids as the units."""
        allowed_m = self._matcher(allowed) if allowed else None
        disallowed_m = self._matcher(disallowed) if disallowed else None
        chunks = []  # int32 symbol arrays, one per piece
        piece_lengths = []
        piece_special = []
        doc_pieces = [0]
        for doc_index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"document {doc_index}: expected str, got {type(text).__name__}")
            text = normalize(clean_text(text), self.normalization)
            if disallowed_m is not None:
                self._check_disallowed(text, disallowed_m, doc_index, where)
            segments = (
                pretokenize.split_special(text, allowed_m) if allowed_m is not None
                else ([(text, False)] if text else [])
            )
            n_pieces = 0
            char_pos = 0
            for segment, is_special in segments:
                if is_special:
                    # One placeholder unit; the kernel emits the special id for this piece.
                    chunks.append(np.zeros(1, np.int32))
                    piece_lengths.append(1)
                    piece_special.append(self.special_tokens[segment])
                    n_pieces += 1
                else:
                    # Pieces need not tile the segment (char mode drops whitespace), so
                    # find each one to report the offset of an unknown character.
                    pieces = pretokenize.split(segment, self.pattern, keep_gaps=False)
                    at = 0
                    for piece in pieces:
                        at = segment.find(piece, at)
                        ids = self._char_symbols(piece, char_pos + at)
                        at += len(piece)
                        chunks.append(ids)
                        piece_lengths.append(len(ids))
                    piece_special.extend([-1] * len(pieces))
                    n_pieces += len(pieces)
                char_pos += len(segment)
            doc_pieces.append(doc_pieces[-1] + n_pieces)
        data = np.concatenate(chunks).astype(np.int32) if chunks else np.zeros(0, np.int32)
        offsets = np.zeros(len(piece_lengths) + 1, dtype=np.int64)
        np.cumsum(piece_lengths, out=offsets[1:])
        return (data, offsets, np.asarray(piece_special, dtype=np.int32).reshape(-1),
                np.asarray(doc_pieces, dtype=np.int64))

    def _char_symbols(self, piece: str, offset: int) -> np.ndarray:
        ids = self._char_ids
        out = np.empty(len(piece) + (self.end_of_word is not None), dtype=np.int32)
        for k, ch in enumerate(piece):
            tid = ids.get(ch)
            if tid is None:
                raise UnknownCharacterError(ch, offset + k)
            out[k] = tid
        if self.end_of_word is not None:
            out[-1] = self._marker_id
        return out

    def _run(self, layout, n_threads=1, dropout=0.0, seed=0):
        from .kernels.encode import encode_batch, encode_serial
        from .parallel import run_encode

        data, offsets, special, doc_pieces = layout
        keys, vals = self._rank_table()
        whole_keys, tok_off, tok_data = self._whole_table()
        n_docs = len(doc_pieces) - 1
        args = (data, self._sym_map, offsets, special, doc_pieces, keys, vals, whole_keys,
                tok_off, tok_data, self._short_table(), self._byte_pairs(), float(dropout),
                int(seed), LONG_PIECE, self._sweep_rank_count(), CACHE_BITS)
        return run_encode(encode_batch, encode_serial, n_threads, n_docs, args, 8)

    def _byte_pairs(self):
        """``kernels.encode.build_byte_pairs`` of the rank table (built once)."""
        if self._pairs0 is None:
            from .kernels.encode import build_byte_pairs
            from .parallel import call_kernel

            self._pairs0 = call_kernel(build_byte_pairs, *self._rank_table())
        return self._pairs0

    def _short_table(self):
        """Byte mode: packed bytes -> packed ids of every token of 2-15 bytes (SHORT_BYTES).

        Each such token is encoded as a piece of its own by the encoder itself (one kernel
        call), so a hit gives what merging would give, in either merge mode. Empty in char
        mode and for vocabularies of 2**20 ids or more (the ids are packed in 20 bits).
        """
        if self._short is None:
            from .kernels.encode import SHORT_BYTES, SHORT_ID_BITS, build_short_table, encode_serial
            from .parallel import call_kernel

            empty = np.zeros(0, dtype=np.int64)
            short = [t for t in self._token_bytes if 2 <= len(t) <= SHORT_BYTES]
            if self.base != "bytes" or not short or self.vocab_size >= 1 << SHORT_ID_BITS:
                self._short = empty
                return self._short
            data = np.frombuffer(b"".join(short), dtype=np.uint8)
            pieces = np.zeros(len(short) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, short), np.int64, len(short)), out=pieces[1:])
            docs = np.arange(len(short) + 1, dtype=np.int64)  # a piece per document
            keys, vals = self._rank_table()
            whole_keys, tok_off, tok_data = self._whole_table()
            ids, id_offsets = call_kernel(
                encode_serial, data, self._sym_map, pieces, np.zeros(0, np.int32), docs, keys,
                vals, whole_keys, tok_off, tok_data, empty, self._byte_pairs(), 0.0, 0, LONG_PIECE,
                self._sweep_rank_count(), CACHE_BITS)
            self._short = call_kernel(build_short_table, data, pieces, ids, id_offsets)
        return self._short

    def _whole_table(self):
        """Whole-piece lookup arrays: only for ``merge_mode="ranks"`` (empty otherwise)."""
        if self._whole is None:
            if self.merge_mode == "ranks":
                from .io.tiktoken_format import whole_token_table

                self._whole = whole_token_table(self._token_bytes)
            else:
                empty8 = np.zeros(1, dtype=np.uint8)
                self._whole = (np.zeros(0, dtype=np.int64), np.zeros(2, dtype=np.int64), empty8)
        return self._whole

    def encode(self, text: str, allowed_special=(), disallowed_special="all", *,
               dropout: float = 0.0, seed: int = 0) -> list[int]:
        """Encode ``text`` to token ids (tiktoken's special-token semantics).

        By default a registered special token in ``text`` raises
        DisallowedSpecialTokenError; list it in ``allowed_special`` (or pass ``"all"``) to
        get its id, or pass ``disallowed_special=()`` to encode it as plain text.

        ``dropout=p`` (BPE-dropout, for training-time regularisation) skips each applicable
        merge with probability p, deterministically for a given ``seed``; ``p=0`` is exactly
        ordinary encoding, and every result still decodes to the input.
        """
        if (allowed_special == () and disallowed_special == "all" and type(text) is str
                and len(text) <= SHORT_TEXT_CHARS and type(dropout) in (int, float)
                and dropout == 0 and type(seed) is int and 0 <= seed < 2**31
                and not self._all_specials.maybe_in(text)):
            ids = self._encode_short(text)  # no special token in it: encode_ordinary's ids
            if ids is not None:
                return ids
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        return self._id_list(self._encode_array(text, allowed, disallowed, dropout, seed))

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` ignoring special tokens (their text is encoded as plain text)."""
        if type(text) is str and len(text) <= SHORT_TEXT_CHARS:
            ids = self._encode_short(text)
            if ids is not None:
                return ids
        return self._id_list(self._encode_array(text, frozenset(), frozenset()))

    def _encode_short(self, text: str):
        """The ids of a short text from the piece memo, or None (the caller encodes it).

        A kernel call costs ~15 us whatever the text (argument checks of ~16 arrays, the
        thread hop), which dominated ``encode("Hello world")``. Here the named pattern's
        ``regex`` twin splits the text (the scanner is exactly ``regex.findall``, tested),
        and each piece's ids come from a memo filled by the kernel itself, one call for
        all the pieces of a text it has not seen (each piece a document of its own:
        merging never crosses pieces, so a piece's ids do not depend on its context).
        Byte mode with a named pattern and no normalization only; the memo is bounded.
        """
        memo = self._piece_memo
        if memo is None or not pretokenize.uses_scanner(self.pattern) or self.base != "bytes" \
                or self.normalization is not None:
            return None
        pieces = pretokenize.compiled_pattern(self.pattern).findall(text)
        out = []
        for piece in pieces:
            ids = memo.get(piece)
            if ids is None:
                return self._memo_fill(pieces)
            out += ids
        return out

    def _memo_fill(self, pieces: list[str]):
        """Encode ``pieces`` (one kernel call), remember each one's ids; None for a text
        with lone surrogates (the caller's path replaces them first)."""
        try:
            raw = [p.encode("utf-8") for p in pieces]
        except UnicodeEncodeError:
            return None
        data = np.frombuffer(b"".join(raw), dtype=np.uint8)
        offsets = np.zeros(len(raw) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, raw), np.int64, len(raw)), out=offsets[1:])
        docs = np.arange(len(raw) + 1, dtype=np.int64)  # a piece per document
        ids, doc_offsets = self._run((data, offsets, np.zeros(0, dtype=np.int32), docs))
        memo = self._piece_memo
        if len(memo) + len(pieces) > PIECE_MEMO_ENTRIES:
            memo.clear()
        bounds = doc_offsets.tolist()
        ids = ids.tolist()
        out = []
        for k, piece in enumerate(pieces):
            piece_ids = ids[bounds[k]:bounds[k + 1]]
            memo[piece] = piece_ids
            out += piece_ids
        return out

    def encode_to_numpy(self, text: str, allowed_special=(), disallowed_special="all", *,
                        dropout: float = 0.0, seed: int = 0) -> np.ndarray:
        """``encode`` as a ``uint32`` NumPy array (the same ids; tiktoken's name and dtype).

        Use it when the ids go on to NumPy, Arrow or a ``.bin`` file: it skips building a
        Python list, about 40% of ``encode``'s time on a text of one token per byte or two
        (a 16.8M-id list is 128 MB of fresh pages) and 20% on prose.
        """
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        return self._encode_array(text, allowed, disallowed, dropout, seed, keep=True).view(np.uint32)

    def _encode_array(self, text, allowed: frozenset, disallowed: frozenset,
                      dropout: float = 0.0, seed: int = 0, keep: bool = False) -> np.ndarray:
        """The ids of one text as an int32 array (``encode``'s semantics).

        The ids are a view of a buffer with a slot per byte (or symbol) of the text;
        ``keep=True`` (the caller keeps the array) copies them out when they fill less
        than half of it, so a kept array never holds more than twice its own size.
        """
        dropout = check_dropout(dropout)
        seed = check_seed(seed)
        huge = self._encode_huge(text, allowed, disallowed) if dropout == 0 else None
        if huge is not None:
            ids, capacity = huge
        else:
            layout = self._layout([text], allowed, disallowed)
            ids, _ = self._run(layout, dropout=dropout, seed=seed)
            capacity = len(layout[0])
        return ids.copy() if keep and 2 * len(ids) < capacity else ids

    def _encode_huge(self, text, allowed: frozenset, disallowed: frozenset, index=0, where=None):
        """A text of more than ``SEGMENT_BYTES``, scanned and encoded a segment at a time
        (the same ids): ``(int32 ids, length of the buffer they are a view of)``; None when
        it is not that (or holds an allowed special token). ``index``, ``where``: see
        ``_check_disallowed``.
        """
        if not self._may_be_huge(text):
            return None
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            text = clean_text(text)
            raw = text.encode("utf-8")
        if len(raw) <= SEGMENT_BYTES:
            return None
        if disallowed:
            disallowed_m = self._matcher(disallowed)
            if disallowed_m.maybe_in(text):
                self._check_disallowed(text, disallowed_m, index, where)
        if allowed and self._matcher(allowed).maybe_in(text):
            return None
        return self._encode_segmented(np.frombuffer(raw, dtype=np.uint8))

    def _may_be_huge(self, text) -> bool:
        """Whether ``_encode_huge`` may take ``text`` (a cheap test: a str of at least
        ``SEGMENT_BYTES // 4`` characters, which UTF-8 makes at most 4x as many bytes)."""
        return isinstance(text, str) and len(text) >= SEGMENT_BYTES // 4 and self._segmentable()

    def _segmentable(self) -> bool:
        """Whether ``_encode_segmented`` gives this tokenizer's ids (byte mode, no
        normalization, a named pattern: the scanner can stop and resume at a piece)."""
        return (self.base == "bytes" and self.normalization is None
                and pretokenize.uses_scanner(self.pattern))

    def _encode_segmented(self, data: np.ndarray):
        """The ids of one document's UTF-8 bytes (no special tokens), scanned and encoded
        ``SEGMENT_BYTES`` at a time: ``(int32 ids, length of the buffer they view)``.

        Why: arrays per byte and per piece of a 16 MiB text outgrow the allocator's reuse
        (glibc maps anything over 32 MB afresh, and each new page faults); per segment,
        the scratch memory is reused, so time and peak memory grow linearly.
        """
        from ._scanner import scan_prefix_offsets

        no_special = np.zeros(0, dtype=np.int32)
        # Ids never outnumber bytes; pages past the last id are never touched. One list at
        # the end costs less than a list per segment joined (measured: 13% on 16 MiB).
        ids = np.empty(len(data), dtype=np.int32)
        n_ids = 0
        start = 0
        while start < len(data):
            pieces, end = scan_prefix_offsets(data, start, start + SEGMENT_BYTES, self.pattern)
            layout = (data[start:end], pieces - start, no_special,
                      np.array([0, len(pieces) - 1], dtype=np.int64))
            part = self._run(layout)[0]
            ids[n_ids:n_ids + len(part)] = part
            n_ids += len(part)
            start = end
        return ids[:n_ids], len(ids)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encode arbitrary bytes (invalid UTF-8 included); ``decode_bytes`` gives them back.

        Each invalid byte is one "other" character for pre-tokenization; special tokens are
        not recognised.
        """
        if self.base != "bytes":
            raise ValueError("encode_bytes needs a byte-mode tokenizer")
        data = bytes(data)
        text = data.decode("utf-8", "surrogateescape")
        pieces = pretokenize.split(text, self.pattern)
        lengths = [len(p.encode("utf-8", "surrogateescape")) for p in pieces]
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        layout = (np.frombuffer(data, dtype=np.uint8), offsets,
                  np.full(len(lengths), -1, dtype=np.int32), np.array([0, len(lengths)], np.int64))
        ids, _ = self._run(layout)
        return self._id_list(ids)

    def _id_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, with one shared int object per id (see ``_shared_ints``)."""
        return self._shared_ints(ids).tolist()

    def _shared_ints(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` as an object array of one shared int per id: its ``tolist()`` copies
        pointers instead of creating an int per token (a 4M-token list: 2x faster, half
        the memory). Short arrays, and arrays of ids below 257 (Python's cached small
        ints), are returned as they are."""
        if len(ids) < 64 or ids.max() <= 256:
            return ids
        if self._id_objects is None:
            self._id_objects = np.array(range(self.vocab_size), dtype=object)
        return self._id_objects.take(ids)

    def encode_batch(self, texts, num_threads=None, allowed_special=(), disallowed_special="all"):
        """Encode many documents at once, on all cores.

        A list of str gives a list of lists of ids; a pyarrow string array (or chunked
        array) gives a ``pa.ListArray`` of int32 (nulls stay null).
        """
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        if _is_arrow(texts):
            return self._encode_arrow(texts, allowed, disallowed, n_threads)
        texts = list(texts)
        out = []
        # Documents over SEGMENT_BYTES go alone through the segmented path (linear time,
        # bounded scratch memory); the runs of documents between them are encoded together.
        # In document order, so an error names the first bad document, as before.
        run_start = 0
        for index in self._huge_documents(texts) + [len(texts)]:
            if index > run_start:
                run = texts[run_start:index]
                ids, offsets = self._run(self._layout(run, allowed, disallowed, ("document", run_start)),
                                         n_threads)
                ids = self._shared_ints(ids)
                out.extend(part.tolist() for part in np.split(ids, offsets[1:-1]))
                run_start = index
            if index < len(texts):
                huge = self._encode_huge(texts[index], allowed, disallowed, index, ("document", 0))
                if huge is not None:  # else it starts the next run
                    out.append(self._id_list(huge[0]))
                    run_start = index + 1
        return out

    def _huge_documents(self, texts) -> list[int]:
        """Indices of the documents that may go through ``_encode_huge`` (a superset)."""
        if not self._segmentable():
            return []
        return [i for i, t in enumerate(texts) if self._may_be_huge(t)]

    def _encode_arrow(self, array, allowed, disallowed, n_threads, row_base=0):
        """Encode a pyarrow string array into a ``pa.ListArray`` (int32 ids; nulls stay null)."""
        import pyarrow as pa

        from .io.arrow_text import string_chunks

        # Chunk by chunk (each checked before it is read), not combine_chunks(): combining
        # copies the whole text and would read a corrupt chunk's offsets unchecked.
        parts, row = [], row_base
        for chunk in string_chunks(array, row_base=row_base):
            parts.append(self._encode_arrow_flat(chunk, allowed, disallowed, n_threads, row))
            row += len(chunk)
        ids, offsets, valid = _join_flat(parts)
        mask = None if valid.all() else pa.array(~valid)
        if offsets[-1] >= 2**31:  # more ids than 32-bit list offsets can address
            return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids), mask=mask)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(ids),
                                        mask=mask, type=pa.list_(pa.int32()))

    def _encode_arrow_flat(self, array, allowed, disallowed, n_threads, row_base=0,
                           dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows+1], valid bool[rows])`` of a string array.

        Byte mode reads the Arrow buffers directly: one pre-tokenizer call and one kernel
        call, no per-row Python objects. Only rows that may hold a special token (a cheap
        vectorised substring test on the tokens' prefixes) are looked at in Python: a
        disallowed one raises naming its row; when allowed ones occur, the array takes the
        general path.
        """
        from .io.arrow_text import string_chunks, text_buffers

        (array,) = list(string_chunks(array, row_base=row_base))
        data, doc_offsets, valid = text_buffers(array, row_base=row_base)
        raw = self.base == "bytes" and self.normalization is None
        if raw:
            candidates = self._special_candidate_rows(array, allowed | disallowed)
            fast = True
            if candidates.size:
                allowed_m = self._matcher(allowed) if allowed else None
                disallowed_m = self._matcher(disallowed) if disallowed else None
                for row in candidates.tolist():
                    # The row's own bytes (Arrow does not guarantee UTF-8): surrogateescape
                    # keeps invalid bytes as lone surrogates, which no special token holds.
                    text = _row_bytes(data, doc_offsets, row).decode("utf-8", "surrogateescape")
                    if disallowed_m is not None:
                        self._check_disallowed(text, disallowed_m, row, ("row", row_base))
                    if allowed_m is not None and allowed_m.first(text) is not None:
                        fast = False
            if fast:
                ids, offsets = self._encode_rows(data, doc_offsets, n_threads, dropout, seed)
                return ids, offsets, valid
        texts = _arrow_texts(array, data, doc_offsets, row_base, raw)
        ids, offsets = self._run(self._layout(texts, allowed, disallowed, ("row", row_base),
                                              errors="surrogateescape" if raw else "strict"),
                                 n_threads, dropout=dropout, seed=seed)
        return ids, offsets, valid

    def _encode_rows(self, data, doc_offsets, n_threads, dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows + 1])`` of rows of UTF-8 bytes holding no
        special token (byte mode). Rows over ``SEGMENT_BYTES`` go alone through the
        segmented path when it applies (the same ids, linear time and bounded scratch
        memory); the runs of rows between them take one scanner and one kernel call each.
        """
        special = np.zeros(0, dtype=np.int32)  # no special token in these rows
        lengths = np.diff(doc_offsets)
        huge = (np.flatnonzero(lengths > SEGMENT_BYTES).tolist()
                if dropout == 0 and self._segmentable() else [])
        if not huge:
            pieces, doc_pieces = pretokenize.piece_offsets(data, doc_offsets, self.pattern)
            return self._run((data, pieces, special, doc_pieces), n_threads, dropout=dropout, seed=seed)
        parts, counts = [], np.zeros(len(lengths), dtype=np.int64)
        run_start = 0
        for row in huge + [len(lengths)]:
            if row > run_start:
                lo, hi = doc_offsets[run_start], doc_offsets[row]
                run_offsets = doc_offsets[run_start:row + 1] - lo
                pieces, doc_pieces = pretokenize.piece_offsets(data[lo:hi], run_offsets, self.pattern)
                ids, offsets = self._run((data[lo:hi], pieces, special, doc_pieces), n_threads)
                parts.append(ids)
                counts[run_start:row] = np.diff(offsets)
            if row < len(lengths):
                ids, _ = self._encode_segmented(data[doc_offsets[row]:doc_offsets[row + 1]])
                parts.append(ids)
                counts[row] = len(ids)
            run_start = row + 1
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return parts[0] if len(parts) == 1 else np.concatenate(parts), offsets

    def _special_candidate_rows(self, array, tokens: frozenset) -> np.ndarray:
        """Rows that may contain one of ``tokens`` (a superset; empty when there are none)."""
        if not tokens:
            return np.zeros(0, dtype=np.int64)
        import pyarrow.compute as pc

        matcher = self._matcher(frozenset(tokens))
        hit = None
        for prefix in matcher._prefixes:
            found = pc.fill_null(pc.match_substring(array, prefix), False)
            hit = found if hit is None else pc.or_(hit, found)
        return np.flatnonzero(hit.to_numpy(zero_copy_only=False))

    def count_tokens(self, texts, allowed_special=(), disallowed_special="all", num_threads=None):
        """Number of tokens of a str (an int) or of each document of a batch (an int64 array).

        Cost and context budgeting: the ids are never turned into Python objects.
        """
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        if isinstance(texts, str):
            _, offsets = self._run(self._layout([texts], allowed, disallowed))
            return int(offsets[-1])
        if _is_arrow(texts):
            from .io.arrow_text import string_chunks

            counts = [np.diff(self._encode_arrow_flat(chunk, allowed, disallowed, n_threads)[1])
                      for chunk in string_chunks(texts)]
            return np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        _, offsets = self._run(self._layout(texts, allowed, disallowed, ("document", 0)), n_threads)
        return np.diff(offsets)

    # ---------------------------------------------------------------- decoding
    def _check_ids(self, ids) -> np.ndarray:
        """``ids`` as a validated int64 array (see ``validation.checked_ids``)."""
        return checked_ids(ids, len(self._decode_table), self._unused)

    def _flat_table(self):
        """``(tok_off int64[vocab + 1], tok_data uint8[total])``: the decode table's bytes
        end to end (unused ids are empty; they never pass ``_check_ids``)."""
        if self._flat is None:
            table = [b"" if t is None else t for t in self._decode_table]
            tok_off = np.zeros(len(table) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, table), np.int64, len(table)), out=tok_off[1:])
            tok_data = np.frombuffer(b"".join(table), dtype=np.uint8).copy()
            self._flat = (tok_off, tok_data)
        return self._flat

    def _decoded(self, ids):
        """The decoded bytes of ``ids``: ``bytes`` for a short input, else a uint8 array
        (gathered by a kernel: no per-id Python object, so the extra memory is the output
        plus 8 bytes per id)."""
        if isinstance(ids, list) and len(ids) < DECODE_JOIN_MAX:
            out = self._join_list(ids)
        else:
            ids = self._check_ids(ids)
            if len(ids) < DECODE_JOIN_MAX:
                out = self._join_list(ids.tolist())
            else:
                from .kernels.decode import gather_tokens
                from .parallel import call_kernel

                out = call_kernel(gather_tokens, ids, *self._flat_table())
        if self.base == "chars" and self.end_of_word is not None and len(out) and out[-1] == 32:
            last = int(ids[-1])
            if last < len(self._token_bytes) and self._token_bytes[last].endswith(
                self.end_of_word.encode("utf-8")
            ):
                out = out[:-1]
        return out

    def _join_list(self, ids: list) -> bytes:
        """The bytes of a short list of ids: joined directly, validated by exception.

        A float, str or None entry fails the lookup (TypeError), as does an unused id (its
        entry is None); a negative id would index from the end, and a bool is an int to
        Python, so both are looked for after the join: plain ints cost two C-level scans.
        """
        table = self._decode_table
        try:
            out = b"".join([table[i] for i in ids])
        except (IndexError, TypeError):
            self._check_ids(ids)  # raises, naming the position
            raise
        if ids and (set(map(type, ids)) != {int} or min(ids) < 0):
            self._check_ids(ids)
        return out

    def decode_bytes(self, ids) -> bytes:
        """The bytes of the tokens, joined (char mode: end-of-word markers become spaces).

        ``ids``: any iterable of ints, a NumPy integer array, or a pyarrow integer array.
        A bool, a float (even integral), a str or a null raises TokenIdTypeError, an id
        outside the vocabulary (or an unused one) UnknownTokenError, naming its position.
        """
        out = self._decoded(ids)
        return out if isinstance(out, bytes) else out.tobytes()

    def decode(self, ids, errors: str = "replace") -> str:
        """Decode ids to text: bytes joined, *then* UTF-8 decoded (``errors`` as in bytes.decode).

        ``ids`` as for ``decode_bytes``.
        """
        return codecs.utf_8_decode(self._decoded(ids), errors, True)[0]

    def stream_decoder(self, errors: str = "replace") -> StreamDecoder:
        """An incremental decoder whose ``push(id)`` returns only complete characters."""
        return StreamDecoder(self, errors)

    def id_to_piece(self, token_id: int) -> bytes:
        self._check_ids([token_id])
        return self.vocab[int(token_id)]

    # ------------------------------------------------------------------- files
    def save(self, path) -> None:
        """Write the model as one versioned JSON document (atomically)."""
        from .io.model_file import save_model

        save_model(self, path)

    def to_tiktoken(self, path, allow_lossy: bool = False) -> None:
        """Write the regular tokens as a tiktoken ``.tiktoken`` ranks file (rank = id).

        A normalizing tokenizer raises LossyExportError (the format cannot hold the
        normalization) unless ``allow_lossy=True``, which warns instead.
        """
        from .io.interop import to_tiktoken

        to_tiktoken(self, path, allow_lossy)

    def to_huggingface(self, path) -> None:
        """Write a Hugging Face ``tokenizer.json`` (byte mode, merge_mode="pairs")."""
        from .io.interop import to_huggingface

        to_huggingface(self, path)

    # Temporary thin wrappers (branch i16-split) so that io/ calls no private method; the
    # lead's Tokenizer provides the real ones with these signatures.
    def special_sets(self, allowed_special, disallowed_special):
        """``(allowed, disallowed)`` frozensets of special-token names for these specs."""
        return self._special_sets(allowed_special, disallowed_special)

    def encode_batch_flat(self, texts, num_threads=None, allowed_special=(),
                          disallowed_special="all", *, row_base=0, dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows+1], valid bool[rows])`` of a pyarrow string
        array; errors name rows from ``row_base``."""
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        return self._encode_arrow_flat(texts, allowed, disallowed, n_threads, row_base=row_base,
                                       dropout=dropout, seed=seed)


def _row_bytes(data: np.ndarray, doc_offsets: np.ndarray, row: int) -> bytes:
    return data[doc_offsets[row]:doc_offsets[row + 1]].tobytes()


def _arrow_texts(array, data, doc_offsets, row_base: int, raw: bool) -> list[str]:
    """The rows of a string array as str (nulls as ""), for the per-row encoding path.

    Arrow does not guarantee that a string array holds UTF-8 (``from_buffers``, some
    Parquet writers). ``raw`` (byte mode, no normalization): rows are decoded with
    ``surrogateescape``, so that ``_layout(errors="surrogateescape")`` encodes exactly
    their bytes, as ``encode_bytes`` would. Otherwise the text itself is needed (to
    normalize it, or char mode's symbols): a row that is not UTF-8 raises InvalidUTF8Error
    naming ``row_base + row`` and the byte offset, never a bare UnicodeDecodeError.
    """
    n = len(doc_offsets) - 1
    if raw:
        return [_row_bytes(data, doc_offsets, r).decode("utf-8", "surrogateescape")
                for r in range(n)]
    try:
        return [t if t is not None else "" for t in array.to_pylist()]
    except UnicodeDecodeError:
        pass
    for r in range(n):  # find the first bad row (nulls are empty in ``data``)
        try:
            _row_bytes(data, doc_offsets, r).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUTF8Error(row_base + r, exc.start, exc.reason) from None
    raise AssertionError("to_pylist failed to decode, but every row is UTF-8")


def _join_flat(parts):
    """Concatenate ``(ids, offsets, valid)`` triples of consecutive chunks into one."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, bool)
    ids = np.concatenate([p[0] for p in parts])
    valid = np.concatenate([p[2] for p in parts])
    offsets = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(p[1]) for p in parts]), out=offsets[1:])
    return ids, offsets, valid


def _is_arrow(obj) -> bool:
    module = type(obj).__module__ or ""
    return module.startswith("pyarrow")
