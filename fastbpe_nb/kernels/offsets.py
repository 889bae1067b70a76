"""Offsets: where each token of an encoded batch lies in its (normalized) text.

Every token has a *surface*: the bytes of the normalized text it stands for (a byte-level
token's bytes, a SentencePiece piece with its ``▁``, a byte-fallback token's one byte, a
char-level token without its end-of-word marker). Walking a document's tokens and its
bytes together gives each token's byte span; the lead bytes (not ``10xxxxxx``) before a
position count its characters, so a token that splits a character gets that character's
whole span, as Hugging Face's offsets do.

Text the pre-tokenizer drops (the whitespace between char-level words) is skipped: a
token's surface is looked for from the current position on. An ``<unk>`` token has no
surface; it covers the run of bytes up to where the next token's surface starts.
"""

import numpy as np
from numba import njit, prange

from .hashing import same_units
#: kernel cache stamp: f61736dfda6e18e2bc4664aedc29c401524c0df661f343da5017c51fb214b6bf


@njit(cache=True, nogil=True)
def _find(data, pos, end, surf, s, e):
    """The first position >= pos where the surface ``surf[s:e]`` starts, or -1."""
    while pos <= end - (e - s):
        if same_units(data, pos, surf, s, e - s):
            return pos
        pos += 1
    return -1


@njit(cache=True, nogil=True)
def _doc_spans(ids, i0, i1, surf_off, surf, unk_id, data, d0, d1, spans):
    """Spans of the tokens ``ids[i0:i1]`` in ``data[d0:d1]``; False if they do not fit."""
    pos = d0
    chars = 0  # lead bytes in data[d0:cpos]
    cpos = d0
    for k in range(i0, i1):
        t = ids[k]
        if t == unk_id:
            start = pos
            if k + 1 < i1 and ids[k + 1] != unk_id:
                nt = ids[k + 1]
                # At least one byte is unknown: the next surface starts after it.
                nxt = _find(data, pos + 1, d1, surf, surf_off[nt], surf_off[nt + 1])
                if nxt < 0:
                    return False
                end = nxt
            elif k + 1 < i1:  # two unknown runs in a row: one character each
                end = pos + 1
                while end < d1 and (data[end] & 0xC0) == 0x80:
                    end += 1
            else:
                end = d1
        else:
            s = surf_off[t]
            e = surf_off[t + 1]
            start = _find(data, pos, d1, surf, s, e)  # at pos, unless text was dropped
            if start < 0:
                return False
            end = start + (e - s)
        # L(p) = lead bytes in data[d0:p], counted forward only (starts never go back).
        # The character holding byte `start` is L(start + 1) - 1; the one holding byte
        # `end - 1` ends at L(end): a token that splits a character gets all of it.
        if end > start:
            while cpos < start + 1:
                chars += data[cpos] & 0xC0 != 0x80
                cpos += 1
            c_start = chars - 1
            while cpos < end:
                chars += data[cpos] & 0xC0 != 0x80
                cpos += 1
            c_end = chars
        else:  # an empty surface sits between two characters
            while cpos < start:
                chars += data[cpos] & 0xC0 != 0x80
                cpos += 1
            c_start = chars
            c_end = chars
        spans[k, 0] = start - d0
        spans[k, 1] = end - d0
        spans[k, 2] = c_start
        spans[k, 3] = c_end
        pos = end
    return True


@njit(cache=True, nogil=True)
def _first_false(ok):
    """The index of the first False in ``ok``, or -1."""
    for d in range(ok.shape[0]):
        if not ok[d]:
            return d
    return -1


@njit(cache=True, nogil=True, parallel=True)
def token_spans(ids, id_offsets, surf_off, surf, unk_id, data, data_offsets):
    """Byte and character spans of every token of a batch, relative to its document.

    Parameters
    ----------
    ids : int32[n]
        The batch's token ids, document after document (each a valid id).
    id_offsets : int64[n_docs + 1]
        ``ids[id_offsets[d]:id_offsets[d + 1]]`` are document d's tokens.
    surf_off : int64[vocab + 1]
        ``surf[surf_off[i]:surf_off[i + 1]]`` is token i's surface.
    surf : uint8[total]
        Every token's surface bytes, end to end.
    unk_id : int64
        The unknown token's id (its surface is found from its neighbours), or -1.
    data : uint8[m]
        The documents' normalized texts in UTF-8, end to end.
    data_offsets : int64[n_docs + 1]
        Document d's bytes are ``data[data_offsets[d]:data_offsets[d + 1]]``.

    Returns
    -------
    spans : int64[n, 4]
        Per token: byte start, byte end, character start, character end in its document.
    bad : int64
        The first document whose tokens do not fit its text (-1: none; a caller's bug).
    """
    n_docs = id_offsets.shape[0] - 1
    spans = np.zeros((ids.shape[0], 4), dtype=np.int64)
    ok = np.ones(n_docs, dtype=np.bool_)
    for d in prange(n_docs):  # each document writes only its own rows of spans
        ok[d] = _doc_spans(ids, id_offsets[d], id_offsets[d + 1], surf_off, surf, unk_id,
                           data, data_offsets[d], data_offsets[d + 1], spans)
    return spans, _first_false(ok)


@njit(cache=True, nogil=True)
def token_spans_serial(ids, id_offsets, surf_off, surf, unk_id, data, data_offsets):
    """``token_spans`` on the calling thread only (one thread, or a forked child)."""
    n_docs = id_offsets.shape[0] - 1
    spans = np.zeros((ids.shape[0], 4), dtype=np.int64)
    ok = np.ones(n_docs, dtype=np.bool_)
    for d in range(n_docs):
        ok[d] = _doc_spans(ids, id_offsets[d], id_offsets[d + 1], surf_off, surf, unk_id,
                           data, data_offsets[d], data_offsets[d + 1], spans)
    return spans, _first_false(ok)
