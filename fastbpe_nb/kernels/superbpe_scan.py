"""Numba pre-tokenizer of SuperBPE's stage-2 pattern (``pretokenize.SUPERBPE_PATTERN``).

The pattern is five alternatives, tried in order at each position::

    \\p{N}{1,3} | ' '?[^\\s\\p{L}\\p{N}]{2,}[\\r\\n/]* | ' '+(?!\\S) | [\\r\\n]+ | gap

where the gap is ``(?:(?!<the first four>)[\\s\\S])+``: the characters up to the next
position at which one of the first four matches. :func:`superbpe_pieces` reproduces
``regex.findall`` of it exactly (tests/test_superbpe.py compares them) on the class words of
``scan.decode_document``, whose invalid UTF-8 bytes are one "other" character each, as
``regex`` sees them after ``surrogateescape`` decoding.
"""

import numpy as np
from numba import njit, prange

from .scan import (
    _NOT_OTHER,
    CH_CRLF,
    CH_SLASH,
    CH_SPACE,
    N_SENTINELS,
    ascii_class_words,
    decode_document,
    join_block_regions,
)
from .unicode_classes import CLS_N, CLS_WS
#: kernel cache stamp: 325c6a733a5fa56a1f334979f5c40baa75dcb3b842f5f260412e65e800b350fa


@njit(cache=True, nogil=True)
def _is_other(w):
    """Whether class word ``w`` is matched by ``[^\\s\\p{L}\\p{N}]`` (not the sentinel)."""
    return (w & _NOT_OTHER) == 0


@njit(cache=True, nogil=True)
def _piece_end(words, i, n_chars):
    """End (character index) of the piece that starts at character ``i``."""
    w = words[i]
    if (w & CLS_N) != 0:
        j = i + 1
        while j < i + 3 and (words[j] & CLS_N) != 0:
            j += 1
        return j
    start = -1  # start of a punctuation run of >= 2, the optional space before it
    if (w & CH_SPACE) != 0 and _is_other(words[i + 1]) and _is_other(words[i + 2]):
        start = i + 1
    elif _is_other(w) and _is_other(words[i + 1]):
        start = i
    if start >= 0:
        j = start + 2
        while _is_other(words[j]):
            j += 1
        while (words[j] & (CH_CRLF | CH_SLASH)) != 0:
            j += 1
        return j
    if (w & CH_SPACE) != 0:
        r = i + 1
        while (words[r] & CH_SPACE) != 0:
            r += 1
        if r == n_chars or (words[r] & CLS_WS) != 0:
            return r
        if r - 1 > i:
            return r - 1  # the last space stays for the non-space after it
    if (w & CH_CRLF) != 0:
        j = i + 1
        while (words[j] & CH_CRLF) != 0:
            j += 1
        return j
    # The gap: up to the next position where one of the four cut alternatives matches (a
    # number, a line break, two "other" characters, a space before whitespace or the end, or
    # before two "other" characters). Written out here: a helper called per character with
    # the array costs its reference counting, 4x the loop's own work (60 -> 240 MB/s).
    j = i + 1
    while j < n_chars:
        w = words[j]
        if (w & (CLS_N | CH_CRLF)) != 0:
            break
        w1 = words[j + 1]
        if (w & _NOT_OTHER) == 0:
            if (w1 & _NOT_OTHER) == 0:
                break
        elif (w & CH_SPACE) != 0:
            if j + 1 == n_chars or (w1 & CLS_WS) != 0:
                break
            if (w1 & _NOT_OTHER) == 0 and (words[j + 2] & _NOT_OTHER) == 0:
                break
        j += 1
    return j


@njit(cache=True, nogil=True)
def _superbpe_block(data, doc_offsets, d0, d1, stage1, stage2, ascii_words, pieces,
                    doc_pieces):
    """Pieces of documents ``d0:d1``: their ends go to ``pieces[1:]`` (``pieces[0]`` is set
    by the caller), each document's first piece index (block-local) to ``doc_pieces[d]``;
    returns the number of pieces. ``pieces`` needs the block's bytes plus one slots (every
    piece holds at least one byte)."""
    longest = 0
    for d in range(d0, d1):
        longest = max(longest, doc_offsets[d + 1] - doc_offsets[d])
    words = np.empty(longest + N_SENTINELS, dtype=np.uint32)
    char_offsets = np.empty(longest + 1, dtype=np.int64)
    n = 0
    for d in range(d0, d1):
        doc_pieces[d] = n
        start = doc_offsets[d]
        end = doc_offsets[d + 1]
        n_chars = decode_document(data, start, end, end, stage1, stage2, ascii_words, words,
                                  char_offsets)
        i = 0
        while i < n_chars:
            i = _piece_end(words, i, n_chars)
            n += 1
            pieces[n] = char_offsets[i]
    return n


@njit(cache=True, nogil=True)
def superbpe_pieces(data, doc_offsets, stage1, stage2):
    """Piece boundaries of SuperBPE's stage-2 pattern over a batch of documents.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[n_bytes]`` UTF-8 bytes of the documents (invalid sequences allowed).
    doc_offsets : numpy.ndarray
        ``int64[n_docs + 1]`` non-decreasing document boundaries in ``data``.
    stage1, stage2 : numpy.ndarray
        The two-level code-point class table (``unicode_tables``).

    Returns
    -------
    piece_offsets : numpy.ndarray
        ``int64[n_pieces + 1]`` piece boundaries (pieces tile every document).
    doc_piece_offsets : numpy.ndarray
        ``int64[n_docs + 1]`` index of each document's first piece.
    """
    n_docs = doc_offsets.shape[0] - 1
    pieces = np.empty(doc_offsets[n_docs] - doc_offsets[0] + 1, dtype=np.int64)
    doc_pieces = np.zeros(n_docs + 1, dtype=np.int64)
    pieces[0] = doc_offsets[0]
    n = _superbpe_block(data, doc_offsets, 0, n_docs, stage1, stage2,
                        ascii_class_words(stage1, stage2), pieces, doc_pieces)
    doc_pieces[n_docs] = n
    return pieces[: n + 1].copy(), doc_pieces


@njit(cache=True, nogil=True, parallel=True)
def superbpe_pieces_parallel(data, doc_offsets, stage1, stage2, n_blocks):
    """``superbpe_pieces`` with the documents cut into ``n_blocks >= 1`` contiguous blocks
    matched in parallel; the same results.

    Each block writes its pieces into its own region of one buffer (the block's bytes plus
    one slot); the regions are joined serially, in block order.
    """
    if n_blocks < 1:
        raise ValueError("n_blocks must be positive")
    n_docs = doc_offsets.shape[0] - 1
    base = doc_offsets[0]
    regions = np.empty(doc_offsets[n_docs] - base + n_blocks, dtype=np.int64)
    doc_pieces = np.zeros(n_docs + 1, dtype=np.int64)
    counts = np.zeros(n_blocks, dtype=np.int64)
    ascii_words = ascii_class_words(stage1, stage2)
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        r0 = doc_offsets[d0] - base + blk
        region = regions[r0:r0 + doc_offsets[d1] - doc_offsets[d0] + 1]
        counts[blk] = _superbpe_block(data, doc_offsets, d0, d1, stage1, stage2, ascii_words,
                                      region, doc_pieces)
    return join_block_regions(regions, counts, doc_offsets, doc_pieces)
