"""Numba pre-tokenizer kernels: exact ``regex.findall`` boundaries for four patterns.

gpt2's, cl100k's and o200k's patterns are small automata over the characters
(:mod:`fastbpe_nb.kernels.automata`), run over the bytes in one pass by
:func:`_run_automaton`: no decode window, no per-character buffers, pieces of any length
in constant memory. Their pieces of ASCII stretches (two-byte Latin and Cyrillic
letters included) come faster from bit masks, 64 bytes at a time
(:mod:`fastbpe_nb.kernels.ascii_blocks`; :func:`_scan_automaton` hands over between the
two). SuperBPE's stage-2 pattern, whose "gap" alternative reads ahead past any number of
characters, has its own ASCII blocks (:mod:`fastbpe_nb.kernels.superbpe_blocks`, which
follow a gap from block to block); what they leave takes two passes, a window at a time:

1. :func:`decode_document` decodes its UTF-8 once into a per-character
   "class word" array (``uint32``: the ``CLS_*``/``FOLD_*`` bits of
   :mod:`fastbpe_nb.kernels.unicode_classes`, as stored in
   ``fastbpe_nb.unicode_tables``, plus the ``CH_*`` bits below for the few
   ASCII characters the patterns name) and the byte offset of each character.
   Three ``CH_END`` sentinels follow the last character, so runs stop by
   themselves and two characters of lookahead never need a bounds check.
2. A hand-written matcher (:func:`pieces_superbpe`) walks the class words and reproduces
   the ``regex`` engine's leftmost-alternative, greedy and look-ahead behaviour.

Why this shape: Numba increments/decrements array reference counts around
calls that are not inlined, which costs more than the work per character, so
the hot loops live in a handful of functions that take arrays once per
document, and the small shared helpers take scalars only.

Pattern ids (``fastbpe_nb.pretokenize.NAMED_PATTERNS`` holds the strings):
0 = gpt2, 1 = cl100k, 2 = o200k; 3 = SuperBPE's stage-2 pattern
(``pretokenize.SUPERBPE_PATTERN``, a regex string that has no name in model files).

Facts the matchers rely on (all checked by the differential tests):

* ``findall`` never skips a character for these patterns: every character is
  a letter, number, whitespace or "other" and each kind starts a non-empty
  match, so the pieces tile the text and are returned as boundaries.
* cl100k's ``\\s++$``: the possessive run swallows a final ``\\n`` too, so the
  "before a final newline" meaning of ``$`` can never apply; the branch
  matches exactly when the whitespace run reaches the end of the document.
* Invalid UTF-8: every byte that does not begin a valid, complete,
  shortest-form, non-surrogate sequence inside the document is one character
  of class "other" (no class bit), one byte long.  This equals decoding with
  ``surrogateescape``: ``regex`` puts U+DC80..U+DCFF in none of the classes.
"""

import numpy as np
from numba import njit, prange

from .ascii_blocks import (BLOCK_BYTES, cl100k_ascii_pieces, gpt2_ascii_pieces,
                           o200k_ascii_pieces)
from .automata import (
    ACTION_SHIFT,
    C1_ASCII_AT,
    C1_END,
    C1_STEP_AT,
    END_BEFORE_PREVIOUS,
    G2_ASCII_AT,
    G2_END,
    G2_STEP_AT,
    O2_ASCII_AT,
    O2_END,
    O2_STEP_AT,
    PENDING,
    SCANNER_TABLES_SIZE,
    cl100k_class,
    fill_automaton_tables,
    gpt2_class,
    o200k_class,
)
from .superbpe_blocks import superbpe_ascii_pieces
from .unicode_classes import (
    CLS_L,
    CLS_LOWERISH,
    CLS_N,
    CLS_UPPERISH,
    CLS_WS,
    FOLD_D,
    FOLD_E,
    FOLD_L,
    FOLD_M,
    FOLD_R,
    FOLD_S,
    FOLD_T,
    FOLD_V,
)
#: kernel cache stamp: 1d16a742db66d8e490a8f84cc05efd31751e8e2f78658e5c85a208c9d1243658

PATTERN_GPT2 = 0
PATTERN_CL100K = 1
PATTERN_O200K = 2
PATTERN_SUPERBPE = 3  # pretokenize.SUPERBPE_PATTERN (a regex string, not a name)

INVALID_CODE_POINT = -1

# Class-word bits above the 16 table bits, for ASCII characters the patterns
# name literally.  U+0020 only (` ?` is a literal space, not \s).
CH_SPACE = 1 << 16
CH_CRLF = 1 << 17  # \r or \n: the patterns always use them as a pair
CH_SLASH = 1 << 19
CH_END = 1 << 20  # sentinel after the last character of a document
N_SENTINELS = 3
#: Slots an automaton scan keeps free beyond one per byte it reads (see _scan_automaton);
#: every piece buffer a kernel sizes for its bytes adds them.
SCAN_SLACK = 8
# Initial decode window in bytes: the per-character buffers (12 bytes per
# char) stay in L2 instead of page-faulting fresh memory for big documents.
# A tunable: the kernels take it as ``window_bytes``; this is what the Python
# callers (fastbpe_nb._scanner) pass.
WINDOW_BYTES = 1 << 15

# Anything that is not matched by [^\s\p{L}\p{N}] ("other"); CH_END makes
# runs of "other" stop at the end of the document.
_NOT_OTHER = CLS_L | CLS_N | CLS_WS | CH_END


@njit(cache=True, nogil=True)
def decode_multibyte(b0, b1, b2, b3):
    """Decode a UTF-8 sequence whose lead byte ``b0`` is >= 0x80.

    Parameters
    ----------
    b0 : int
        Lead byte, ``0x80 <= b0 <= 0xFF``.
    b1, b2, b3 : int
        The following bytes of the document, or 0 where the document ends
        (0 is never a continuation byte, so a cut sequence is invalid).

    Returns
    -------
    code_point : int
        The code point, or ``INVALID_CODE_POINT`` (-1) when ``b0`` does not
        start a valid, complete, shortest-form, non-surrogate sequence.
    n_bytes : int
        Sequence length; 1 for an invalid byte.
    """
    if b0 < 0xC2:
        # Continuation byte, or lead of an overlong two-byte form.
        return INVALID_CODE_POINT, 1
    if b0 < 0xE0:
        if (b1 & 0xC0) == 0x80:
            return ((b0 & 0x1F) << 6) | (b1 & 0x3F), 2
        return INVALID_CODE_POINT, 1
    if b0 < 0xF0:
        # E0 needs A0..BF (no overlongs); ED needs 80..9F (no surrogates).
        lo = 0xA0 if b0 == 0xE0 else 0x80
        hi = 0x9F if b0 == 0xED else 0xBF
        if lo <= b1 and b1 <= hi and (b2 & 0xC0) == 0x80:
            return ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F), 3
        return INVALID_CODE_POINT, 1
    if b0 < 0xF5:
        # F0 needs 90..BF (no overlongs); F4 needs 80..8F (<= U+10FFFF).
        lo = 0x90 if b0 == 0xF0 else 0x80
        hi = 0x8F if b0 == 0xF4 else 0xBF
        if lo <= b1 and b1 <= hi and (b2 & 0xC0) == 0x80 and (b3 & 0xC0) == 0x80:
            code_point = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
            return code_point, 4
        return INVALID_CODE_POINT, 1
    return INVALID_CODE_POINT, 1


@njit(cache=True, nogil=True)
def ascii_class_words(stage1, stage2):
    """Class words of the 128 ASCII code points, ``CH_*`` bits included.

    Parameters
    ----------
    stage1 : numpy.ndarray
        ``uint16[4352]`` block index per 256-code-point block.
    stage2 : numpy.ndarray
        ``uint16[n_unique_blocks * 256]`` class bitmasks.

    Returns
    -------
    numpy.ndarray
        ``uint32[128]`` class word per ASCII code point.
    """
    words = np.empty(128, dtype=np.uint32)
    block = np.int64(stage1[0]) * 256
    for cp in range(128):
        words[cp] = np.uint32(stage2[block + cp])
    words[0x20] |= np.uint32(CH_SPACE)
    words[0x0D] |= np.uint32(CH_CRLF)
    words[0x0A] |= np.uint32(CH_CRLF)
    words[0x2F] |= np.uint32(CH_SLASH)
    return words


@njit(cache=True, nogil=True)
def decode_document(data, start, stop, end, stage1, stage2, ascii_words, words, char_offsets):
    """Decode the characters of a document that start in ``data[start:stop]``.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[n_bytes]`` UTF-8 bytes.
    start : int
        Byte offset of the first character to decode (a character start).
    stop : int
        Decode characters starting before ``stop`` (``start <= stop <= end``);
        the last one may extend past ``stop``.
    end : int
        End of the document: bytes at or after it are never read, so a
        sequence cut by the document end is invalid.
    stage1 : numpy.ndarray
        ``uint16[4352]`` block index per 256-code-point block.
    stage2 : numpy.ndarray
        ``uint16[n_unique_blocks * 256]`` class bitmasks.
    ascii_words : numpy.ndarray
        ``uint32[128]`` from :func:`ascii_class_words`.
    words : numpy.ndarray
        ``uint32[>= stop - start + N_SENTINELS]`` output: class word of each
        character, then ``N_SENTINELS`` entries equal to ``CH_END``.
    char_offsets : numpy.ndarray
        ``int64[>= stop - start + 1]`` output: absolute byte offset of each
        character, then the end of the last one.

    Returns
    -------
    int
        Number of characters ``n_chars``.
    """
    n_chars = 0
    pos = start
    while pos < stop:
        b0 = np.int64(data[pos])
        char_offsets[n_chars] = pos
        if b0 < 0x80:
            words[n_chars] = ascii_words[b0]
            pos += 1
        else:
            b1 = np.int64(data[pos + 1]) if pos + 1 < end else 0
            b2 = np.int64(data[pos + 2]) if pos + 2 < end else 0
            b3 = np.int64(data[pos + 3]) if pos + 3 < end else 0
            code_point, n_bytes = decode_multibyte(b0, b1, b2, b3)
            if code_point < 0:
                words[n_chars] = 0  # invalid byte: "other"
            else:
                block = np.int64(stage1[code_point >> 8])
                words[n_chars] = stage2[block * 256 + (code_point & 0xFF)]
            pos += n_bytes
        n_chars += 1
    char_offsets[n_chars] = pos
    for k in range(N_SENTINELS):
        words[n_chars + k] = CH_END
    return n_chars


@njit(cache=True, nogil=True, inline="always")
def superbpe_piece_end(words, i, n_chars):
    """End (character index) of the SuperBPE stage-2 piece that starts at character ``i``
    (it reads the class words up to two characters past the end it returns)."""
    w = words[i]
    if (w & CLS_N) != 0:
        j = i + 1
        while j < i + 3 and (words[j] & CLS_N) != 0:
            j += 1
        return j
    start = -1  # start of a punctuation run of >= 2, the optional space before it
    if ((w & CH_SPACE) != 0 and (words[i + 1] & _NOT_OTHER) == 0
            and (words[i + 2] & _NOT_OTHER) == 0):
        start = i + 1
    elif (w & _NOT_OTHER) == 0 and (words[i + 1] & _NOT_OTHER) == 0:
        start = i
    if start >= 0:
        j = start + 2
        while (words[j] & _NOT_OTHER) == 0:
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
def pieces_superbpe(data, words, char_offsets, n_chars, truncated, piece_offsets, n_pieces):
    """Append the SuperBPE stage-2 piece ends of one decoded window.

    ``\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]{2,}[\\r\\n/]*| +(?!\\S)|[\\r\\n]+|gap``, the gap being
    ``(?:(?!<the first four>)[\\s\\S])+`` (``pretokenize.SUPERBPE_PATTERN``). A piece is
    emitted only when the window holds the two characters after its end, which is as far
    as :func:`superbpe_piece_end` looks.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[n_bytes]`` UTF-8 bytes (unused: the class words say all it reads).
    words : numpy.ndarray
        ``uint32[>= n_chars + N_SENTINELS]`` from :func:`decode_document`.
    char_offsets : numpy.ndarray
        ``int64[>= n_chars + 1]`` from :func:`decode_document`.
    n_chars : int
        Number of decoded characters.
    truncated : bool
        Whether the document continues after the decoded characters.
    piece_offsets : numpy.ndarray
        ``int64[capacity]`` output; piece ends go to ``piece_offsets[n_pieces + 1:]``.
    n_pieces : int
        Pieces written so far.

    Returns
    -------
    n_pieces : int
        Updated piece count.
    n_consumed : int
        Characters covered by the emitted pieces (``n_chars`` unless truncated).
    """
    i = 0
    while i < n_chars:
        j = superbpe_piece_end(words, i, n_chars)
        if truncated and j + 2 >= n_chars:
            break
        n_pieces += 1
        piece_offsets[n_pieces] = char_offsets[j]
        i = j
    return n_pieces, i


@njit(cache=True, nogil=True)
def scanner_tables(stage1, stage2):
    """The scanner's small tables, built once per kernel call.

    Parameters
    ----------
    stage1, stage2 : numpy.ndarray
        ``uint16`` Unicode class tables (see :func:`ascii_class_words`).

    Returns
    -------
    numpy.ndarray
        ``uint32[SCANNER_TABLES_SIZE]``: ``[:128]`` the ASCII class words (what
        :func:`decode_document` takes as ``ascii_words``), then the automata's tables
        (:func:`fastbpe_nb.kernels.automata.fill_automaton_tables`).
    """
    tables = np.zeros(SCANNER_TABLES_SIZE, dtype=np.uint32)
    tables[:128] = ascii_class_words(stage1, stage2)
    fill_automaton_tables(tables)
    return tables


@njit(cache=True, nogil=True)
def check_scanner_tables(tables):
    """Raise unless ``tables`` has :func:`scanner_tables`' size (kernels index it
    unchecked; its content is ours, built once by ``_scanner.scanner_tables``)."""
    if tables.shape[0] != SCANNER_TABLES_SIZE:
        raise ValueError("tables must be scanner_tables(stage1, stage2)")


@njit(cache=True, nogil=True)
def _window_buffers(pattern_id, window):
    """The decode window's buffers (``words``, ``char_offsets``) for ``window`` characters:
    only SuperBPE's windowed matcher uses them; the automata read the bytes themselves, so
    they get empty ones (an allocation of ~400 KB per call was a short text's cost)."""
    n = window if pattern_id == PATTERN_SUPERBPE else 0
    return np.empty(n + N_SENTINELS, dtype=np.uint32), np.empty(n + 1, dtype=np.int64)


@njit(cache=True, nogil=True, inline="always")
def _next_stretch(stretch, blocks_took, max_stretch):
    """The bytes the slower matcher takes next, after the ASCII blocks took ``blocks_took``
    bytes: back to a block once they took half a block or more, else twice the last
    stretch, up to ``max_stretch`` (at least a block)."""
    if blocks_took >= BLOCK_BYTES // 2:
        return BLOCK_BYTES
    return min(2 * stretch, max(BLOCK_BYTES, max_stretch))


@njit(cache=True, nogil=True)
def _scan_automaton(data, pos, end, limit, pattern_id, tables, stage1, stage2, piece_offsets,
                    n_pieces, max_stretch):
    """gpt2's, cl100k's or o200k's pieces of the document ``data[:end]`` from ``pos`` (a
    piece start) until a piece ends at or after ``limit`` (or the document does), as
    :func:`_run_automaton` returns them.

    The pieces of ASCII stretches come from bit masks, 64 bytes at a time
    (:mod:`fastbpe_nb.kernels.ascii_blocks`); the automaton scans what those leave, from a
    piece start, a stretch at a time (no pattern looks behind, so a scan started at a
    piece start finds the same pieces as a scan of the whole document).
    A stretch ends at the first piece end ``stretch`` bytes on. It doubles, up to
    ``max_stretch`` (the callers pass their ``stream_bytes``), each time the blocks
    scanned less than half a block, and is back to a block after they scanned more: on
    text that is mostly not ASCII (Chinese, or Russian man pages with ASCII options), a
    try of the blocks every 64 bytes, mostly for a few bytes of ASCII, made the scan a
    third slower than the automaton alone.
    """
    stretch = BLOCK_BYTES
    while True:
        start = pos
        if pattern_id == PATTERN_GPT2:
            pos, n_pieces, piece_offsets = gpt2_ascii_pieces(data, pos, end, limit,
                                                             piece_offsets, n_pieces)
        elif pattern_id == PATTERN_CL100K:
            pos, n_pieces, piece_offsets = cl100k_ascii_pieces(data, pos, end, limit,
                                                               piece_offsets, n_pieces)
        else:
            pos, n_pieces, piece_offsets = o200k_ascii_pieces(data, pos, end, limit,
                                                              piece_offsets, n_pieces)
        if pos >= limit:
            return pos, n_pieces, piece_offsets
        if pos + BLOCK_BYTES > end:  # the document's last bytes
            return _run_automaton(data, pos, end, limit, pattern_id, tables, stage1, stage2,
                                  piece_offsets, n_pieces)
        stretch = _next_stretch(stretch, pos - start, max_stretch)
        pos, n_pieces, piece_offsets = _run_automaton(
            data, pos, end, min(limit, pos + stretch), pattern_id, tables, stage1, stage2,
            piece_offsets, n_pieces)
        if pos >= limit or pos >= end:
            return pos, n_pieces, piece_offsets


@njit(cache=True, nogil=True)
def _run_automaton(data, pos, end, limit, pattern_id, tables, stage1, stage2, piece_offsets,
                   n_pieces):
    """gpt2's, cl100k's or o200k's pieces of the document ``data[:end]`` from ``pos`` (a piece
    start), by its automaton (:mod:`fastbpe_nb.kernels.automata`), until a piece ends at
    or after ``limit`` (or the document does).

    Returns ``(pos, n_pieces, piece_offsets)`` as :func:`_scan_document` does: the end of
    the last piece emitted, the count, and the buffer (grown if it had to be). Characters
    read past the last piece's end are read again by the next call, from the start state.
    """
    if pattern_id == PATTERN_GPT2:
        ascii_at, step_at, end_class = G2_ASCII_AT, G2_STEP_AT, G2_END
    elif pattern_id == PATTERN_CL100K:
        ascii_at, step_at, end_class = C1_ASCII_AT, C1_STEP_AT, C1_END
    else:
        ascii_at, step_at, end_class = O2_ASCII_AT, O2_STEP_AT, O2_END
    u_ascii_at = np.uint64(ascii_at)
    n_first = n_pieces
    row = np.uint64(step_at)  # the start state's actions (state 0)
    act = np.uint64(0)
    prev = pos  # where the previous character starts
    stop = min(end, max(limit, pos + 1))
    # Past limit, read on in rounds of 256 bytes, doubling up to the first round's size: the
    # next end is usually a few bytes on, and a long run never needs a larger buffer.
    round_bytes = 256
    max_round = max(stop - pos, 256)
    while True:
        # The ends stored while reading pos..stop are distinct character starts from the
        # previous character's on (an end is stored at most one character back), so they
        # take at most stop - pos + 5 slots, and the branch-free stores write one past the
        # count: SCAN_SLACK covers both. Sized by what is read, not by the document: a
        # long run stores no end until it ends.
        if n_pieces + SCAN_SLACK + (stop - pos) > piece_offsets.shape[0]:
            grown = np.empty(max(2 * piece_offsets.shape[0],
                                 n_pieces + SCAN_SLACK + (stop - pos)), dtype=np.int64)
            grown[: n_pieces + 1] = piece_offsets[: n_pieces + 1]
            piece_offsets = grown
        # The loop counts in unsigned integers: Numba then adds no negative-index fix-ups,
        # which were a third of its instructions.
        one = np.uint64(1)
        u_pos, u_stop, u_prev, u_n = np.uint64(pos), np.uint64(stop), np.uint64(prev), \
            np.uint64(n_pieces)
        while u_pos < u_stop:
            b0 = np.uint64(data[u_pos])
            n_bytes = one
            if b0 < 0x80:
                c = np.uint64(tables[u_ascii_at + b0])
            else:
                p = np.int64(u_pos)
                b1 = np.int64(data[p + 1]) if p + 1 < end else 0
                b2 = np.int64(data[p + 2]) if p + 2 < end else 0
                b3 = np.int64(data[p + 3]) if p + 3 < end else 0
                code_point, n_char_bytes = decode_multibyte(np.int64(b0), b1, b2, b3)
                n_bytes = np.uint64(n_char_bytes)
                word = 0  # an undecodable byte is "other"
                if code_point >= 0:
                    word = stage2[np.int64(stage1[code_point >> 8]) * 256 + (code_point & 0xFF)]
                if pattern_id == PATTERN_GPT2:
                    c = np.uint64(gpt2_class(word))
                elif pattern_id == PATTERN_CL100K:
                    c = np.uint64(cl100k_class(word))
                else:
                    c = np.uint64(o200k_class(word))
            act = np.uint64(tables[row + c])
            # Branch-free: take back a candidate end, write both ends, count the ones the
            # action asks for.
            u_n -= (act >> np.uint64(2)) & one
            piece_offsets[u_n + one] = u_prev
            u_n += act & one
            piece_offsets[u_n + one] = u_pos
            u_n += (act >> one) & one
            row = act >> np.uint64(ACTION_SHIFT)
            u_prev = u_pos
            u_pos += n_bytes
        pos, prev, n_pieces = np.int64(u_pos), np.int64(u_prev), np.int64(u_n)
        if pos >= end:
            last = np.int64(tables[row + np.uint64(end_class)])
            n_pieces -= (last >> 2) & 1
            piece_offsets[n_pieces + 1] = prev
            n_pieces += last & END_BEFORE_PREVIOUS
            piece_offsets[n_pieces + 1] = end
            n_pieces += (last >> 1) & 1
            return end, n_pieces, piece_offsets
        # Stop at the last end that is final (not a candidate) once it reaches limit.
        n_final = n_pieces - (1 if (np.int64(act) & PENDING) != 0 else 0)
        if n_final > n_first and piece_offsets[n_final] >= limit:
            return piece_offsets[n_final], n_final, piece_offsets
        # No final end at or after limit yet (a long run): read on, a round at a time.
        stop = min(end, pos + round_bytes)
        round_bytes = min(2 * round_bytes, max_round)


@njit(cache=True, nogil=True)
def scan_batch(data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
               stream_bytes):
    """Pre-token boundaries of every document of a batch.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[n_bytes]`` C-contiguous UTF-8 bytes of all documents.
    doc_offsets : numpy.ndarray
        ``int64[n_docs + 1]`` (``n_docs >= 0``) non-decreasing byte offsets
        into ``data``; document ``d`` is ``data[doc_offsets[d]:doc_offsets[d + 1]]``.
        Each document is matched as its own text (``$`` and lookaheads see
        its end; a UTF-8 sequence cut by a document end is invalid).  Not
        bounds-checked here: validate at the Python boundary.
    pattern_id : int
        0 = gpt2, 1 = cl100k, 2 = o200k, 3 = SuperBPE's stage 2.
    stage1 : numpy.ndarray
        ``uint16[4352]`` from ``fastbpe_nb.unicode_tables.load_class_table``.
    stage2 : numpy.ndarray
        ``uint16[n_unique_blocks * 256]`` from the same loader.
    tables : numpy.ndarray
        ``uint32[SCANNER_TABLES_SIZE]``, :func:`scanner_tables` of ``stage1, stage2``
        (``_scanner.scanner_tables()``: built once per process, not per call, which cost
        ~10 us, most of a short text's scan).
    window_bytes : int
        Initial decode window in bytes (``>= 1``; ``WINDOW_BYTES`` in production, tests
        use tiny windows to exercise the refill logic).
    stream_bytes : int
        Bytes decoded at a time while streaming over a long stretch of one character
        class (``>= 1``; ``STREAM_BYTES`` in production).

    Returns
    -------
    piece_offsets : numpy.ndarray
        ``int64[n_pieces + 1]``: piece ``k`` is
        ``data[piece_offsets[k]:piece_offsets[k + 1]]``.
        ``piece_offsets[0] == doc_offsets[0]`` and the pieces tile all
        documents contiguously (``findall`` never skips a character for
        these patterns); an empty document contributes no piece.
    doc_piece_offsets : numpy.ndarray
        ``int64[n_docs + 1]``: document ``d`` owns pieces
        ``doc_piece_offsets[d]:doc_piece_offsets[d + 1]``;
        ``doc_piece_offsets[n_docs] == n_pieces``.
    """
    if pattern_id < 0 or pattern_id > 3:
        raise ValueError("pattern_id must be 0 (gpt2), 1 (cl100k), 2 (o200k) or 3 (superbpe)")
    if window_bytes < 1 or stream_bytes < 1:
        raise ValueError("window_bytes and stream_bytes must be positive")
    n_docs = doc_offsets.shape[0] - 1
    if n_docs < 0:
        raise ValueError("doc_offsets must have at least one entry")
    doc_piece_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    # Every piece holds at least one byte, which bounds the piece count
    # (pages of this buffer that are never written are never touched).
    piece_offsets = np.empty(doc_offsets[n_docs] - doc_offsets[0] + SCAN_SLACK,
                             dtype=np.int64)
    piece_offsets[0] = doc_offsets[0]
    # Documents are decoded through a window of at most `window` bytes so the
    # per-character buffers stay in cache; it grows when one piece needs more.
    check_scanner_tables(tables)
    window = window_bytes
    words, char_offsets = _window_buffers(pattern_id, window)
    n_pieces = 0
    for d in range(n_docs):
        doc_piece_offsets[d] = n_pieces
        end = doc_offsets[d + 1]
        _, n_pieces, piece_offsets, window, words, char_offsets = _scan_document(
            data, doc_offsets[d], end, end, pattern_id, stage1, stage2, tables, window,
            stream_bytes, words, char_offsets, piece_offsets, n_pieces
        )
    doc_piece_offsets[n_docs] = n_pieces
    # A view, not a copy: pages past the last piece were never touched (no memory), and
    # copying would touch as much fresh memory again (page faults cost more than scanning).
    return piece_offsets[: n_pieces + 1], doc_piece_offsets


@njit(cache=True, nogil=True, parallel=True)
def scan_batch_parallel(data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
                        stream_bytes, n_blocks, regions=None):
    """``scan_batch`` with the documents cut into ``n_blocks`` contiguous blocks scanned in
    parallel; the same results.

    Each block writes its pieces into its own region of one buffer: the block's bytes plus
    ``SCAN_SLACK`` slots (every piece holds at least a byte, so a block never outgrows its
    region);
    the regions are then joined in block order, each block copying its own in parallel.
    Parameters as ``scan_batch``, plus ``n_blocks >= 1`` and ``regions``: None, or that
    buffer given (``int64[m]``, ``m >=`` the batch's bytes ``+ SCAN_SLACK * n_blocks``),
    allocated by the caller with NumPy (large NumPy arrays get transparent huge pages, the
    kernels' own do not: an Arrow batch of 42 MB took 31,000 fresh 4 KiB pages for its
    regions and joined offsets). Then the regions are joined in place, moved down block
    after block (a block's pieces never start after its region), and ``piece_offsets`` is
    a view of the buffer.
    """
    if pattern_id < 0 or pattern_id > 3:
        raise ValueError("pattern_id must be 0 (gpt2), 1 (cl100k), 2 (o200k) or 3 (superbpe)")
    if window_bytes < 1 or stream_bytes < 1 or n_blocks < 1:
        raise ValueError("window_bytes, stream_bytes and n_blocks must be positive")
    n_docs = doc_offsets.shape[0] - 1
    if n_docs < 0:
        raise ValueError("doc_offsets must have at least one entry")
    base = doc_offsets[0]
    need = doc_offsets[n_docs] - base + SCAN_SLACK * n_blocks
    if regions is None:
        buf = np.empty(need, dtype=np.int64)
    elif regions.shape[0] < need:
        raise ValueError("regions must have a slot per byte plus SCAN_SLACK per block")
    else:
        buf = regions
    doc_piece_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    counts = np.zeros(n_blocks, dtype=np.int64)
    check_scanner_tables(tables)
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        r0 = doc_offsets[d0] - base + SCAN_SLACK * blk
        region = buf[r0:r0 + doc_offsets[d1] - doc_offsets[d0] + SCAN_SLACK]
        region[0] = doc_offsets[d0]
        window = window_bytes
        words, char_offsets = _window_buffers(pattern_id, window)
        n_pieces = 0
        pieces = region
        for d in range(d0, d1):
            doc_piece_offsets[d] = n_pieces  # block-local; made global below
            end = doc_offsets[d + 1]
            _, n_pieces, pieces, window, words, char_offsets = _scan_document(
                data, doc_offsets[d], end, end, pattern_id, stage1, stage2, tables, window,
                stream_bytes, words, char_offsets, pieces, n_pieces
            )
        # _scan_document never grows a region (n_pieces <= bytes scanned): if it ever did,
        # the pieces are in its new array; they still fit the region.
        region[1:n_pieces + 1] = pieces[1:n_pieces + 1]
        counts[blk] = n_pieces
    # The regions joined in block order, each block copying its own in parallel.
    firsts = np.zeros(n_blocks + 1, dtype=np.int64)
    for blk in range(n_blocks):
        firsts[blk + 1] = firsts[blk] + counts[blk]
    if regions is not None:
        # In place, in block order: block b's pieces move from r0 + 1 to firsts[b] + 1 <=
        # r0 + 1 (pieces never outnumber bytes), a forward copy that never overwrites what
        # it has still to read, nor the next block's region (it ends at firsts[b + 1]).
        for blk in range(n_blocks):
            d0 = blk * n_docs // n_blocks
            d1 = (blk + 1) * n_docs // n_blocks
            r0 = doc_offsets[d0] - base + SCAN_SLACK * blk
            at = firsts[blk]
            if at != r0:
                for i in range(1, counts[blk] + 1):
                    buf[at + i] = buf[r0 + i]
            for d in range(d0, d1):
                doc_piece_offsets[d] += at
        buf[0] = base
        doc_piece_offsets[n_docs] = firsts[n_blocks]
        return buf[:firsts[n_blocks] + 1], doc_piece_offsets
    piece_offsets = np.empty(firsts[n_blocks] + 1, dtype=np.int64)
    piece_offsets[0] = base
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        r0 = doc_offsets[d0] - base + SCAN_SLACK * blk
        at = firsts[blk]
        piece_offsets[at + 1:at + 1 + counts[blk]] = buf[r0 + 1:r0 + 1 + counts[blk]]
        for d in range(d0, d1):
            doc_piece_offsets[d] += at
    doc_piece_offsets[n_docs] = firsts[n_blocks]
    return piece_offsets, doc_piece_offsets


@njit(cache=True, nogil=True)
def _scan_document(data, pos, end, limit, pattern_id, stage1, stage2, tables, window,
                   stream_bytes, words, char_offsets, piece_offsets, n_pieces):
    """Emit the pieces of the document ``data[:end]`` from ``pos`` (a piece start) until
    ``pos >= limit`` (or the end), one decode window at a time.

    The pieces are those of a scan of the whole document: a piece is emitted only once
    its window saw everything its match depends on. ``words``/``char_offsets`` (the
    window buffers, ``words.shape[0] - N_SENTINELS`` characters) and ``piece_offsets``
    grow when needed and are returned with ``pos``, ``n_pieces`` and ``window``.
    """
    if pattern_id != PATTERN_SUPERBPE:
        if pos < end and pos < limit:
            pos, n_pieces, piece_offsets = _scan_automaton(data, pos, end, limit, pattern_id,
                                                           tables, stage1, stage2,
                                                           piece_offsets, n_pieces,
                                                           stream_bytes)
        return pos, n_pieces, piece_offsets, window, words, char_offsets
    capacity = words.shape[0] - N_SENTINELS
    # ASCII text comes from bit masks (superbpe_ascii_pieces); the windowed matcher takes
    # what they leave, a stretch at a time from a piece start, the stretch doubling (up to
    # stream_bytes and the window) while the blocks give little, as in _scan_automaton.
    stretch = BLOCK_BYTES
    retry = 0  # a span to decode from pos again: the last one held no whole piece
    while pos < end and pos < limit:
        span = window
        if retry > 0:
            span = retry
            retry = 0
        elif pos + BLOCK_BYTES <= end:
            start = pos
            pos, n_pieces, piece_offsets = superbpe_ascii_pieces(data, pos, end, limit,
                                                                 piece_offsets, n_pieces)
            if pos >= limit or pos + BLOCK_BYTES > end:
                continue
            stretch = _next_stretch(stretch, pos - start, stream_bytes)
            span = min(window, stretch)
        stop = min(end, pos + span)
        if stop - pos > capacity:
            # Sized to what this window needs (a grown window is often capped by
            # the document's end): fresh pages cost more than the decoding.
            capacity = stop - pos
            words = np.empty(capacity + N_SENTINELS, dtype=np.uint32)
            char_offsets = np.empty(capacity + 1, dtype=np.int64)
        if n_pieces + 1 + (stop - pos) > piece_offsets.shape[0]:
            # Each byte ends at most one piece; scan_batch sizes for the whole batch.
            grown = np.empty(max(2 * piece_offsets.shape[0], n_pieces + 1 + (stop - pos)),
                             dtype=np.int64)
            grown[: n_pieces + 1] = piece_offsets[: n_pieces + 1]
            piece_offsets = grown
        n_chars = decode_document(
            data, pos, stop, end, stage1, stage2, tables, words, char_offsets
        )
        truncated = char_offsets[n_chars] < end
        n_pieces, n_consumed = pieces_superbpe(data, words, char_offsets, n_chars, truncated,
                                      piece_offsets, n_pieces)
        if n_consumed > 0:
            pos = char_offsets[n_consumed]
            continue
        if span < window:
            # A piece longer than the stretch (a line of 70 '*'): 8x the bytes (not the
            # whole window, which the slow matcher would then scan to its end).
            retry = min(window, 8 * span)
            continue
        # A single piece (or its lookahead) spans the whole window. Where the window ends
        # in a stretch of one class of character that goes on past it (a megabyte of
        # spaces), match a shortened copy of the stretch instead of decoding all of it.
        if n_pieces + 1 + (end - pos) > piece_offsets.shape[0]:
            # The shortened window may reach further than this one (scan_prefix's buffer).
            grown = np.empty(max(2 * piece_offsets.shape[0], n_pieces + 1 + min(end - pos,
                                                                              3 * window)),
                             dtype=np.int64)
            grown[: n_pieces + 1] = piece_offsets[: n_pieces + 1]
            piece_offsets = grown
        ends_at = _first_piece_shortened(data, pos, end, stage1, stage2,
                                         tables, window, stream_bytes, words,
                                         char_offsets, n_chars, piece_offsets, n_pieces)
        if ends_at > pos:
            n_pieces += 1
            piece_offsets[n_pieces] = ends_at
            pos = ends_at
        else:
            # Decode it again in a window 8x larger (a piece of n bytes is decoded
            # < 1.15 n times over, not 2 n as with doubling).
            window *= 8
    return pos, n_pieces, piece_offsets, window, words, char_offsets


#: Characters kept at each end of a shortened stretch (the matcher looks 2 ahead).
KEEP_CHARS = 4
#: Bytes decoded at a time while streaming over the rest of a stretch. A tunable: the
#: kernels take it as ``stream_bytes``; this is what the Python callers pass.
STREAM_BYTES = 4096
#: Class-word bits a stretch may vary in: the contraction letters and letter case, which
#: SuperBPE's pattern never reads (a run of letters of any case is one stretch).
_STRETCH_BITS = ~np.uint32(FOLD_S | FOLD_D | FOLD_M | FOLD_T | FOLD_L | FOLD_V | FOLD_E | FOLD_R
                           | CLS_UPPERISH | CLS_LOWERISH)


@njit(cache=True, nogil=True)
def _first_piece_shortened(data, pos, end, stage1, stage2, ascii_words, window, stream_bytes,
                           words, char_offsets, n_chars, piece_offsets, n_pieces):
    """End of the first piece of a window it spans, found without decoding all of it; or
    ``pos`` when this does not apply (the caller then grows the window).

    Applies when the window (``words[:n_chars]``, from ``pos``) ends in a stretch of
    characters whose class words are equal (``_STRETCH_BITS`` aside) and the stretch goes
    on at least ``KEEP_CHARS`` characters past the window. The rest of the stretch is
    only streamed over; the matcher then runs on the window up to the stretch's first
    ``KEEP_CHARS`` characters, its last ``KEEP_CHARS`` and a window of what follows, with
    the real byte offsets. SuperBPE's pattern matches a run of equal characters the same
    at any length from 2 * KEEP_CHARS (greedy runs, `` +(?!\\S)``'s last space, the gap),
    except ``\\p{N}{1,3}``, whose pieces never span a window: only this first piece is
    taken from the shortened window.
    """
    unfold = _STRETCH_BITS
    last = words[n_chars - 1] & unfold
    r = n_chars - 1
    while r > 0 and (words[r - 1] & unfold) == last:
        r -= 1
    if n_chars - r < 2 * KEEP_CHARS:
        return pos
    ring_off = np.empty(KEEP_CHARS, dtype=np.int64)
    ring_word = np.empty(KEEP_CHARS, dtype=np.uint32)
    n_ring = 0
    # Stream over the rest of the stretch, decoded a small chunk at a time.
    chunk_words = np.empty(stream_bytes + N_SENTINELS, dtype=np.uint32)
    chunk_offsets = np.empty(stream_bytes + 1, dtype=np.int64)
    q = char_offsets[n_chars]
    while q < end:
        n_chunk = decode_document(data, q, min(end, q + stream_bytes), end, stage1, stage2,
                                  ascii_words, chunk_words, chunk_offsets)
        k = 0
        while k < n_chunk and (chunk_words[k] & unfold) == last:
            k += 1
        for t in range(max(0, k - KEEP_CHARS), k):  # the ring keeps the last KEEP_CHARS
            ring_off[(n_ring + t) % KEEP_CHARS] = chunk_offsets[t]
            ring_word[(n_ring + t) % KEEP_CHARS] = chunk_words[t]
        n_ring += k
        q = chunk_offsets[k]
        if k < n_chunk:
            break
    if n_ring < KEEP_CHARS:
        return pos
    # The shortened window: the window up to the stretch's first KEEP_CHARS characters,
    # its last KEEP_CHARS, then up to `window` bytes of what follows.
    base = r + KEEP_CHARS
    tail = base + KEEP_CHARS
    stop = min(end, q + window)
    short_words = np.empty(tail + (stop - q) + N_SENTINELS, dtype=np.uint32)
    short_offsets = np.empty(tail + (stop - q) + 1, dtype=np.int64)
    short_words[:base] = words[:base]
    short_offsets[:base] = char_offsets[:base]
    for k in range(KEEP_CHARS):
        at = (n_ring - KEEP_CHARS + k) % KEEP_CHARS
        short_words[base + k] = ring_word[at]
        short_offsets[base + k] = ring_off[at]
    n_tail = decode_document(data, q, stop, end, stage1, stage2, ascii_words,
                             short_words[tail:], short_offsets[tail:])
    n_short = tail + n_tail
    if n_pieces + 1 + n_short > piece_offsets.shape[0]:
        return pos
    truncated = short_offsets[n_short] < end
    _, n_consumed = pieces_superbpe(data, short_words, short_offsets, n_short, truncated,
                           piece_offsets, n_pieces)
    if n_consumed == 0:
        return pos
    return piece_offsets[n_pieces + 1]


@njit(cache=True, nogil=True)
def scan_prefix(data, start, end, limit, pattern_id, stage1, stage2, tables, window_bytes,
                stream_bytes, buffer=None):
    """The pieces of one document from ``start`` until at least ``limit``: a huge text is
    scanned and encoded a few MB at a time, in memory the allocator reuses.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[>= end]`` UTF-8 bytes; the document is ``data[:end]`` and ``start`` is the
        start of one of its pieces (0, or what a previous call returned).
    start, end, limit : int
        ``start < end``; pieces are emitted until one ends at or after ``limit``.
    pattern_id, stage1, stage2, tables, window_bytes, stream_bytes
        As for :func:`scan_batch`.
    buffer : numpy.ndarray, optional
        ``int64[m]``: the offsets are written there when it has a slot per byte up to
        ``limit`` plus a window and ``SCAN_SLACK`` (else, and when None, in a new array).
        The caller of many calls passes one buffer: fresh pages for each call's array were
        ~2,000 page faults per 10 MB scanned.

    Returns
    -------
    piece_offsets : numpy.ndarray
        ``int64[n_pieces + 1]``, absolute; ``piece_offsets[0] == start``. Exactly the
        pieces a :func:`scan_batch` of the whole document has there (a view of
        ``buffer`` when it was used).
    next_start : int
        ``piece_offsets[-1]``: where the next call starts (``end`` when done).
    """
    if pattern_id < 0 or pattern_id > 3:
        raise ValueError("pattern_id must be 0 (gpt2), 1 (cl100k), 2 (o200k) or 3 (superbpe)")
    if not 0 <= start < end <= data.shape[0] or limit <= start:
        raise ValueError("need 0 <= start < end <= len(data) and limit > start")
    if window_bytes < 1 or stream_bytes < 1:
        raise ValueError("window_bytes and stream_bytes must be positive")
    check_scanner_tables(tables)
    window = window_bytes
    words, char_offsets = _window_buffers(pattern_id, window)
    need = min(end - start, limit - start + window) + SCAN_SLACK
    if buffer is None:
        piece_offsets = np.empty(need, dtype=np.int64)
    elif buffer.shape[0] < need:
        piece_offsets = np.empty(need, dtype=np.int64)
    else:
        piece_offsets = buffer
    piece_offsets[0] = start
    pos, n_pieces, piece_offsets, _, _, _ = _scan_document(
        data, start, end, limit, pattern_id, stage1, stage2, tables,
        window, stream_bytes, words, char_offsets, piece_offsets, 0
    )
    return piece_offsets[: n_pieces + 1], pos
