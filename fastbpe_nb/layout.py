"""Base alphabets with their pre-tokenizer: texts -> the flat arrays the encode kernels read.

Every alphabet turns a batch of (normalized) texts into one *layout*:
``(data, piece_offsets int64[n_pieces + 1], piece_special int32[n_pieces] or int32[0],
doc_piece_offsets int64[n_docs + 1])``, where ``data`` holds the units (UTF-8 bytes, or
int32 base-symbol ids), pieces tile each document's units, and a piece that is a special
token carries its id. The kernels never see text.

* :class:`ByteLevel`: units are UTF-8 bytes (base id of a byte given by a byte order),
  split by a named pattern (the Numba scanner), any regex or none. Any text encodes.
* :class:`CharLevel`: units are the alphabet's characters (classic Sennrich BPE), split
  by a pattern into words, each ending in an optional end-of-word marker; a character
  outside the alphabet raises UnknownCharacterError.

SentencePiece's alphabet (code points with byte fallback or an unknown piece) lives in
``sentencepiece_parts``.
"""

from __future__ import annotations

import numpy as np

from . import pretokenize
from .errors import ModelFormatError, UnknownCharacterError
from .specials import SpecialTokens
from .text import clean_text, not_str


def resolve_pattern(pattern, base: str) -> str | None:
    """The canonical pattern (``"default"``: gpt2 for bytes, words for chars); raises
    PatternError on an unknown name or a bad regex."""
    if pattern == "default":
        pattern = "gpt2" if base == "bytes" else pretokenize.WHITESPACE_WORDS_PATTERN
    pattern = pretokenize.resolve_pattern(pattern)
    pretokenize.compiled_pattern(pattern)
    return pattern


def make_level(base, pattern, alphabet=None, end_of_word=None, byte_order=None, source=None):
    """The ByteLevel (``base="bytes"``) or CharLevel (``"chars"``) of a Tokenizer's arguments."""
    if base not in ("bytes", "chars"):
        raise ValueError(f"base must be 'bytes' or 'chars', not {base!r}")
    if base == "bytes":
        for name, value in (("alphabet", alphabet), ("end_of_word", end_of_word)):
            if value is not None:
                raise ValueError(f"{name} is only for base='chars'")
        return ByteLevel(pattern, byte_order, source)
    if byte_order is not None:
        raise ValueError("byte_order is only for base='bytes'")
    return CharLevel(pattern, alphabet, end_of_word, source)


def byte_sym_map(byte_order) -> np.ndarray:
    """``int32[256]``: the base id of each byte value, when base id i is the byte
    ``byte_order[i]`` (the identity for ``range(256)``)."""
    sym_map = np.empty(256, dtype=np.int32)
    sym_map[np.asarray(byte_order, dtype=np.int64)] = np.arange(256, dtype=np.int32)
    return sym_map


class ByteLevel:
    """UTF-8 bytes as base symbols, split by ``pattern``; ``byte_order[i]`` is the byte value
    of base id i (None: id = byte value)."""

    kind = "bytes"

    def __init__(self, pattern, byte_order=None, source=None):
        self.pattern = resolve_pattern(pattern, "bytes")
        if byte_order is not None:
            order = [int(b) for b in byte_order]
            if sorted(order) != list(range(256)):
                raise ModelFormatError("byte_order must list each byte value 0..255 once",
                                       source, "byte_order")
            byte_order = None if order == list(range(256)) else order
        self.byte_order = byte_order
        self.base_bytes = [bytes([b]) for b in (byte_order or range(256))]
        self.sym_map = byte_sym_map(byte_order or range(256))

    def __eq__(self, other):
        return (isinstance(other, ByteLevel) and self.pattern == other.pattern
                and self.byte_order == other.byte_order)

    def scanned(self) -> bool:
        """Whether the named-pattern scanner splits this text (it can stop and resume at a
        piece, and it equals ``regex.findall`` of the pattern)."""
        return pretokenize.uses_scanner(self.pattern)

    def layout(self, texts, specials: SpecialTokens, allowed, disallowed, normalizer,
               where=None, errors: str = "strict", n_threads: int = 1):
        """The layout of ``texts`` (see the module docstring); the scanner runs on
        ``n_threads`` threads for a big enough batch.

        Documents are cut at allowed special tokens into segments; every segment's UTF-8
        bytes go through one pre-tokenizer call as its own document, and each special
        segment then becomes a single piece carrying its id. ``where`` names documents in
        errors (``SpecialTokens.check_disallowed``). ``errors="surrogateescape"`` (no
        normalization): the texts were decoded from bytes with it and encode back to
        exactly those bytes (invalid UTF-8 included, as ``encode_bytes`` takes it).
        """
        allowed_m = specials.matcher(allowed)
        disallowed_m = specials.matcher(disallowed)
        plain = self._plain_layout(texts, allowed_m, disallowed_m, normalizer, errors, n_threads)
        if plain is not None:
            return plain
        encoded = []
        seg_special = []
        doc_segments = [0]
        for doc_index, text in enumerate(texts):
            if not isinstance(text, str):
                raise not_str(doc_index, text)
            if not normalizer.identity:
                text = normalizer.normalize(clean_text(text))
            try:
                raw = text.encode("utf-8", errors)
            except UnicodeEncodeError:
                text = clean_text(text)
                raw = text.encode("utf-8")
            if disallowed_m is not None and disallowed_m.maybe_in(text):
                specials.check_disallowed(text, disallowed_m, doc_index, where)
            if allowed_m is not None and allowed_m.maybe_in(text):
                segments = pretokenize.split_special(text, allowed_m)
                for segment, is_special in segments:
                    encoded.append(segment.encode("utf-8", errors))
                    seg_special.append(specials.ids[segment] if is_special else -1)
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
        pieces, seg_pieces = pretokenize.piece_offsets(data, seg_offsets, self.pattern, n_threads)
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

    def _plain_layout(self, texts, allowed_m, disallowed_m, normalizer, errors, n_threads):
        """``layout`` of a list of ``str`` without normalization and without any special
        token's prefix in the batch (the common case), with no Python work per document
        but one ``encode`` each; None for any other batch (``layout`` then goes document
        by document, and names the bad one in its errors)."""
        if not normalizer.identity or not isinstance(texts, list):
            return None
        try:
            encoded = [text.encode("utf-8", errors) for text in texts]
        except (AttributeError, TypeError, UnicodeEncodeError):
            return None  # a non-str item (bytes too) or lone surrogates
        if allowed_m is not None or disallowed_m is not None:
            try:
                joined = "".join(texts)
            except TypeError:
                return None
            if any(m is not None and m.maybe_in(joined) for m in (allowed_m, disallowed_m)):
                return None  # (a token across two documents only costs the slow path)
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        seg_offsets = np.zeros(int(np.count_nonzero(lengths)) + 1, dtype=np.int64)
        np.cumsum(lengths[lengths > 0], out=seg_offsets[1:])
        doc_segments = np.zeros(len(encoded) + 1, dtype=np.int64)  # empty docs: no segment
        np.cumsum(lengths > 0, out=doc_segments[1:])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        pieces, seg_pieces = pretokenize.piece_offsets(data, seg_offsets, self.pattern, n_threads)
        return data, pieces, np.zeros(0, dtype=np.int32), seg_pieces[doc_segments]

    def layout_bytes(self, data: bytes):
        """The layout of one document of arbitrary bytes (no special tokens): each invalid
        byte is one "other" character for pre-tokenization."""
        text = data.decode("utf-8", "surrogateescape")
        pieces = pretokenize.split(text, self.pattern)
        lengths = [len(p.encode("utf-8", "surrogateescape")) for p in pieces]
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return (np.frombuffer(data, dtype=np.uint8), offsets,
                np.full(len(lengths), -1, dtype=np.int32), np.array([0, len(lengths)], np.int64))


class CharLevel:
    """Characters of ``alphabet`` (sorted by code point: id = position) as base symbols,
    split into words by ``pattern``, each word ending in ``end_of_word`` when given."""

    kind = "chars"

    def __init__(self, pattern, alphabet, end_of_word=None, source=None):
        self.pattern = resolve_pattern(pattern, "chars")
        alphabet = list(alphabet or ())
        if any(not isinstance(s, str) or not s for s in alphabet):
            raise ModelFormatError("alphabet entries must be non-empty strings", source, "alphabet")
        if alphabet != sorted(set(alphabet)):
            raise ModelFormatError("alphabet must be unique and sorted by code point",
                                   source, "alphabet")
        if end_of_word is not None and end_of_word not in alphabet:
            raise ModelFormatError(f"end_of_word {end_of_word!r} is not in the alphabet",
                                   source, "end_of_word")
        self.alphabet = alphabet
        self.end_of_word = end_of_word
        self.base_bytes = [s.encode("utf-8") for s in alphabet]
        self.sym_map = np.arange(max(1, len(alphabet)), dtype=np.int32)
        self._ids = {s: i for i, s in enumerate(alphabet)}
        self._marker = alphabet.index(end_of_word) if end_of_word is not None else -1

    def __eq__(self, other):
        return (isinstance(other, CharLevel) and self.pattern == other.pattern
                and self.alphabet == other.alphabet and self.end_of_word == other.end_of_word)

    def scanned(self) -> bool:
        return False

    def layout(self, texts, specials: SpecialTokens, allowed, disallowed, normalizer,
               where=None, errors: str = "strict", n_threads: int = 1):
        """The layout of ``texts`` with base symbol ids as the units (int32; one thread)."""
        allowed_m = specials.matcher(allowed)
        disallowed_m = specials.matcher(disallowed)
        chunks = []  # int32 symbol arrays, one per piece
        piece_lengths = []
        piece_special = []
        doc_pieces = [0]
        for doc_index, text in enumerate(texts):
            if not isinstance(text, str):
                raise not_str(doc_index, text)
            text = normalizer.normalize(clean_text(text))
            if disallowed_m is not None:
                specials.check_disallowed(text, disallowed_m, doc_index, where)
            segments = (pretokenize.split_special(text, allowed_m) if allowed_m is not None
                        else ([(text, False)] if text else []))
            n_pieces = 0
            char_pos = 0
            for segment, is_special in segments:
                if is_special:
                    # One placeholder unit; the kernel emits the special id for this piece.
                    chunks.append(np.zeros(1, np.int32))
                    piece_lengths.append(1)
                    piece_special.append(specials.ids[segment])
                    n_pieces += 1
                else:
                    # Pieces need not tile the segment (char mode drops whitespace), so
                    # find each one to report the offset of an unknown character.
                    pieces = pretokenize.split(segment, self.pattern, keep_gaps=False)
                    at = 0
                    for piece in pieces:
                        at = segment.find(piece, at)
                        ids = self._symbols(piece, char_pos + at)
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

    def _symbols(self, piece: str, offset: int) -> np.ndarray:
        out = np.empty(len(piece) + (self._marker >= 0), dtype=np.int32)
        for k, ch in enumerate(piece):
            tid = self._ids.get(ch)
            if tid is None:
                raise UnknownCharacterError(ch, offset + k)
            out[k] = tid
        if self._marker >= 0:
            out[-1] = self._marker
        return out
