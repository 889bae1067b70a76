"""Token offsets: each token's start and end in its text, in characters and in bytes.

``encode_with_offsets`` / ``encode_batch(..., return_offsets=True)`` encode as usual, then
one kernel (``kernels/offsets.token_spans``) walks every document's tokens along its
normalized UTF-8 and gives each token's byte and character span there; a token that
splits a character (a byte-level token, a byte-fallback piece) gets that whole character,
as Hugging Face's offsets do. When the normalizer changes the text (NFC/NFKC, SentencePiece's
``▁`` and whitespace rules), the spans are mapped back to the text as given through the
normalizer's alignment (its ``normalize_aligned``): offsets always index the caller's string.

Spans are half-open ``(start, end)``; a special token's span is its text.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import FastBPEError
from .text import clean_text
from .validation import check_num_threads


def surface_table(tok):
    """``(surf_off int64[vocab + 1], surf uint8[total], unk_id)``: the bytes of the
    normalized text each id stands for (see kernels/offsets.py), cached on ``tok``."""
    cached = tok.__dict__.get("_offset_surfaces")
    if cached is not None:
        return cached
    unk_id = -1
    if tok.level.kind == "pieces":
        from .io.sentencepiece_model import BYTE, CONTROL, UNKNOWN
        from .sentencepiece_parts import BYTE_PIECES

        model = tok.model
        surfaces = []
        for piece, kind in zip(model.pieces, model.types.tolist()):
            if kind == BYTE:
                surfaces.append(bytes([BYTE_PIECES[piece]]))
            elif kind in (CONTROL, UNKNOWN):
                surfaces.append(b"")
            else:
                surfaces.append(piece.encode("utf-8"))
        unk_id = int(model.unk_id)
    else:
        marker = getattr(tok.level, "end_of_word", None)
        marker = marker.encode("utf-8") if marker else None
        surfaces = []
        for i, t in enumerate(tok.vocab):
            if t is None:
                t = b""
            elif marker is not None and i < tok.n_regular and t.endswith(marker):
                t = t[:-len(marker)]
            surfaces.append(t)
    lengths = np.fromiter((len(s) for s in surfaces), dtype=np.int64, count=len(surfaces))
    surf_off = np.zeros(len(surfaces) + 1, dtype=np.int64)
    np.cumsum(lengths, out=surf_off[1:])
    surf = np.frombuffer(b"".join(surfaces), dtype=np.uint8)
    tok.__dict__["_offset_surfaces"] = cached = (surf_off, surf, np.int64(unk_id))
    return cached


def batch_spans(tok, texts: list, ids: np.ndarray, id_offsets: np.ndarray,
                n_threads: int = 1) -> np.ndarray:
    """``spans int64[n, 4]`` (byte start, byte end, char start, char end) of every token of
    ``ids`` (the encoding of ``texts``), in the texts as given."""
    from .kernels.offsets import token_spans, token_spans_serial
    from .parallel import call_kernel, run_parallel

    normalizer = tok.normalizer
    given = texts
    texts = [clean_text(t) for t in texts]
    if getattr(normalizer, "identity", False):
        normalized, aligns = texts, None
    else:
        pairs = [normalizer.normalize_aligned(t) for t in texts]
        normalized = [p[0] for p in pairs]
        aligns = [p[1] for p in pairs]
    encoded = [t.encode("utf-8") for t in normalized]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    data_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=data_offsets[1:])
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    surf_off, surf, unk_id = surface_table(tok)
    args = (np.ascontiguousarray(ids, dtype=np.int32),
            np.ascontiguousarray(id_offsets, dtype=np.int64), surf_off, surf, unk_id, data,
            data_offsets)
    if n_threads <= 1 or len(texts) <= 1:
        spans, bad = call_kernel(token_spans_serial, *args)
    else:
        spans, bad = run_parallel(token_spans, n_threads, *args, serial=(token_spans_serial, args))
    if bad >= 0:
        raise FastBPEError(f"document {bad}: its tokens do not spell its text, so their "
                           "offsets are undefined (please report this as a bug)")
    if aligns is not None:
        for d, (text, align) in enumerate(zip(texts, aligns)):
            rows = spans[id_offsets[d]:id_offsets[d + 1]]
            _map_to_source(rows, text, align)
    for d, (text, original) in enumerate(zip(texts, given)):
        if len(text) != len(original):  # a surrogate pair was joined into one character
            rows = spans[id_offsets[d]:id_offsets[d + 1]]
            rows[:, 2:4] = _surrogate_map(original)[rows[:, 2:4]]
    return spans


def _surrogate_map(original: str) -> np.ndarray:
    """``int64[len(clean_text(original)) + 1]``: where each character of the cleaned text
    starts in ``original``, where a high and a low surrogate were joined into one (char
    offsets index the caller's string; byte offsets index the UTF-8 that was encoded)."""
    starts = []
    i, n = 0, len(original)
    while i < n:
        starts.append(i)
        pair = ("\ud800" <= original[i] <= "\udbff" and i + 1 < n
                and "\udc00" <= original[i + 1] <= "\udfff")
        i += 2 if pair else 1
    starts.append(n)
    return np.array(starts, dtype=np.int64)


def _map_to_source(rows: np.ndarray, text: str, align) -> None:
    """Rewrite the spans ``rows`` (of a normalized text) into spans of ``text``, in place.

    ``align = (src_start int64[m], src_end int64[m])``: the characters of ``text`` that
    normalized character j came from.
    """
    src_start, src_end = align
    if len(rows) == 0:
        return
    a, b = rows[:, 2], rows[:, 3]
    m = len(src_start)
    empty = b <= a
    start = np.where(a < m, src_start[np.minimum(a, m - 1)], len(text))
    end = np.where(empty, start, src_end[np.clip(b - 1, 0, max(m - 1, 0))])
    char_bytes = np.zeros(len(text) + 1, dtype=np.int64)
    if text:
        widths = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        widths = 1 + (widths >= 0x80) + (widths >= 0x800) + (widths >= 0x10000)
        np.cumsum(widths, out=char_bytes[1:])
    rows[:, 2], rows[:, 3] = start, end
    rows[:, 0], rows[:, 1] = char_bytes[start], char_bytes[end]


def check_unit(unit) -> str:
    if unit not in ("chars", "bytes"):
        raise ValueError(f"unit must be 'chars' or 'bytes', not {unit!r}")
    return unit


def as_pairs(spans: np.ndarray, unit: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` tuples of ``spans`` in ``unit`` ("chars" or "bytes")."""
    cols = spans[:, 2:4] if unit == "chars" else spans[:, 0:2]
    return list(map(tuple, cols.tolist()))


class OffsetsMixin:
    """The offset verbs of the Tokenizer (see the module docstring)."""

    def encode_with_offsets(self, text: str, allowed_special=(), disallowed_special="all", *,
                            unit: str = "chars"):
        """``(ids, offsets)``: ``encode``'s ids and each token's ``(start, end)`` in ``text``
        (``unit="chars"``: indices into the str, as Hugging Face's ``offsets``; ``"bytes"``:
        into its UTF-8)."""
        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets expects a str, not {type(text).__name__}")
        check_unit(unit)
        ids = self.encode_to_numpy(text, allowed_special, disallowed_special).astype(np.int32)
        spans = batch_spans(self, [text], ids, np.array([0, len(ids)], dtype=np.int64))
        return ids.tolist(), as_pairs(spans, unit)

    def encode_batch_with_offsets(self, texts, num_threads=None, allowed_special=(),
                                  disallowed_special="all", *, unit: str = "chars"):
        """``(ids_per_text, offsets_per_text)``: ``encode_batch``'s lists and each token's
        ``(start, end)`` in its text (see ``encode_with_offsets``)."""
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a list of str, not one str")
        check_unit(unit)
        texts = texts.to_pylist() if type(texts).__module__.startswith("pyarrow") else list(texts)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"document {row}: offsets need a str, not {type(text).__name__}")
        ids, id_offsets, _ = self.encode_batch_flat(texts, num_threads, allowed_special,
                                                    disallowed_special)
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        pairs = as_pairs(batch_spans(self, texts, ids, id_offsets, n_threads), unit)
        flat = ids.tolist()
        bounds = id_offsets.tolist()
        return ([flat[bounds[d]:bounds[d + 1]] for d in range(len(texts))],
                [pairs[bounds[d]:bounds[d + 1]] for d in range(len(texts))])

    def decode_with_offsets(self, ids, errors: str = "replace"):
        """``(text, offsets)``: ``decode``'s text and each token's ``(start, end)`` in it
        (a token that splits a character gets that character; one that decodes to nothing,
        a control piece, an empty span where it stands)."""
        ids = self.decoder.check_ids(ids)
        decoded = self.decode_bytes(ids)
        text = decoded.decode("utf-8", errors)
        # Each id's bytes as the decoder emits them in sequence (SentencePiece drops the
        # text's first ``▁``, char level holds a word's space back until the next word).
        push = self.decoder.stream()
        ends = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(push(i) or b"") for i in ids.tolist()], out=ends[1:])
        ends = np.minimum(ends, len(decoded))
        char_at = _char_index_of_bytes(decoded, errors)
        starts, stops = ends[:-1], ends[1:]
        m = len(decoded)
        c_start = np.where(starts < m, char_at[np.minimum(starts, max(m - 1, 0))], len(text))
        c_end = np.where(stops > starts, char_at[np.clip(stops - 1, 0, max(m - 1, 0))] + 1, c_start)
        return text, list(zip(c_start.tolist(), c_end.tolist()))


def _char_index_of_bytes(data: bytes, errors: str) -> np.ndarray:
    """``char_at int64[len(data)]``: the index in ``data.decode("utf-8", errors)`` of the
    character that byte k belongs to."""
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        import codecs

        dec = codecs.getincrementaldecoder("utf-8")(errors)
        char_at = np.empty(len(data), dtype=np.int64)
        made = 0
        pending = []
        for k in range(len(data)):
            out = dec.decode(data[k:k + 1])
            pending.append(k)
            if out:
                for j in pending:
                    char_at[j] = made
                made += len(out)
                pending = []
        for j in pending:
            char_at[j] = made
        return char_at
    lead = (buf & 0xC0) != 0x80
    return np.cumsum(lead) - 1
