"""SuperBPE's stage-2 pieces of ASCII text, from bit masks of 64 bytes at a time.

The windowed matcher (:func:`fastbpe_nb.kernels.scan.pieces_superbpe`) first decodes every
character into a class word and a byte offset (12 bytes written per byte read), then walks
them a character at a time: 240 MB/s on one core of the team's VM (Linux sources), a third
of the gpt2 scanner's speed, and half of stage 2's counting. On ASCII a block of 64 bytes
is classified at once (``superbpe_masks``: one vector load and a compare or two per kind),
and each piece is found with a few bit operations.

The pattern is ``\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]{2,}[\\r\\n/]*| +(?!\\S)|[\\r\\n]+|gap``, the
gap being the text up to the first place where one of the others matches
(``pretokenize.SUPERBPE_PATTERN``). On ASCII its kinds are L (``A-Z a-z``), N (``0-9``),
S (U+0020), W (``\\t \\n \\v \\f \\r``; ``\\x1c-\\x1f`` are not ``\\s`` in ``regex``), O (all
else: "other"), and the line breaks and ``/`` that a run of others takes after it. A gap
that starts at ``i`` ends at the first ``j > i`` where

* ``j`` is N or a line break;
* ``j`` and ``j + 1`` are O, or ``j`` is S and ``j + 1``, ``j + 2`` are O (a run of others);
* ``j`` is S and ``j + 1`` is whitespace (`` +(?!\\S)``: a run of spaces, less its last
  before a non-space, or a space before other whitespace).

Every other alternative is decided at the piece's start by the kinds of its first three
bytes, and ends where a run ends. The matcher never reads more than two bytes past the end
of the piece it finds, so a piece is stored only when those bytes are in the block and
before its first byte >= 0x80; a gap that goes on past its block is followed block by
block. What this leaves (non-ASCII text, long runs, a document's last 64 bytes) the caller
scans with the windowed matcher, from a piece start, and comes back here.
"""

import numpy as np
from numba import njit

from .ascii_blocks import BLOCK_BYTES, _numpy_masks, _vector_masks, low_bit
#: kernel cache stamp: 9c7c56d92c0e61011a0782ff113437d48651d8e6cce86ece08475405bf82bfed

_SUPERBPE_KINDS = (((0x41, 0x5A), (0x61, 0x7A)), ((0x30, 0x39),), ((0x20, 0x20),),
                   ((0x09, 0x0D),), ((0x0A, 0x0A), (0x0D, 0x0D)), ((0x2F, 0x2F),),
                   ((0x80, 0xFF),))


@_vector_masks(_SUPERBPE_KINDS)
def superbpe_masks(data, pos):
    """``(letters, digits, space, other_ws, line_breaks, slashes, non_ascii)``: ``uint64``
    masks of the 64 bytes ``data[pos:pos + 64]``, bit ``k`` for byte ``pos + k``: ``A-Z
    a-z``, ``0-9``, U+0020, ``\\t \\n \\v \\f \\r``, ``\\r \\n``, ``/`` and bytes >= 0x80."""
    return _numpy_masks(_SUPERBPE_KINDS, data, pos)


@njit(cache=True, nogil=True, inline="always")
def _run_end(x, k):
    """The first bit at or above ``k`` (0..63) that ``x`` does not hold; 64 if none."""
    rest = ~x & ~((np.uint64(1) << np.uint64(k)) - np.uint64(1))
    return 64 if rest == 0 else np.int64(low_bit(rest))


@njit(cache=True, nogil=True, inline="always")
def _block_kinds(data, pos):
    """``(others, space, ws, taken, digits, breaks, cuts, top)`` of the block at ``pos``
    (masks): the kinds the pieces are read from (``taken``: the line breaks and slashes
    after a run of others), ``cuts`` the places where a gap ends (valid up to bit ``top``),
    and ``top`` the last bit a piece may end at (the two bytes after it are in the block
    and ASCII); ``top < 1`` when none may."""
    one = np.uint64(1)
    letters, digits, space, other_ws, breaks, slashes, non_ascii = superbpe_masks(data, pos)
    ws = space | other_ws
    others = ~(letters | digits | ws | non_ascii)
    cuts = (digits | breaks | (others & (others >> one)) | (space & (ws >> one))
            | (space & (others >> one) & (others >> np.uint64(2))))
    top = 61 if non_ascii == 0 else np.int64(low_bit(non_ascii)) - 3
    return others, space, ws, breaks | slashes, digits, breaks, cuts, top


@njit(cache=True, nogil=True)
def superbpe_ascii_pieces(data, pos, end, limit, piece_offsets, n_pieces):
    """Store SuperBPE's stage-2 piece ends of ``data[:end]`` from ``pos`` (a piece start),
    while the blocks of 64 bytes they lie in are ASCII.

    Parameters
    ----------
    data : uint8[n]
        The bytes (``end <= n``).
    pos : int
        A piece start of the document that ends at ``end``.
    end : int
        The document's end (exclusive); blocks stop 64 bytes before it.
    limit : int
        Stop once a piece ends at or after it.
    piece_offsets : int64[m]
        Piece ends are stored at ``piece_offsets[n_pieces + 1]`` on (grown when needed:
        the buffer is returned).
    n_pieces : int
        Pieces stored so far (``piece_offsets[n_pieces]`` is ``pos``).

    Returns
    -------
    tuple
        ``(pos, n_pieces, piece_offsets)``: ``pos`` is the last end stored (a piece start),
        or the ``pos`` given when no piece could be found here; ``pos >= limit`` when the
        limit was reached.
    """
    one = np.uint64(1)
    while pos + BLOCK_BYTES <= end and pos < limit:
        others, space, ws, taken, digits, breaks, cuts, top = _block_kinds(data, pos)
        if top < 1:
            break
        if n_pieces + BLOCK_BYTES + 2 > piece_offsets.shape[0]:
            grown = np.empty(2 * piece_offsets.shape[0] + BLOCK_BYTES + 2, dtype=np.int64)
            grown[: n_pieces + 1] = piece_offsets[: n_pieces + 1]
            piece_offsets = grown
        i = 0  # the piece start, a bit of this block
        while True:
            b = np.uint64(i)
            e = 64  # the piece's end; above top: not decided in this block
            gap = False
            if (digits >> b) & one:
                e = i + 1 + np.int64((digits >> (b + one)) & one)
                e += np.int64((digits >> (b + one)) & (digits >> (b + np.uint64(2))) & one)
            else:
                run = -1  # where a run of two others or more starts (after ' ?')
                if (space >> b) & (others >> (b + one)) & (others >> (b + np.uint64(2))) & one:
                    run = i + 1
                elif (others >> b) & (others >> (b + one)) & one:
                    run = i
                if run >= 0:
                    e = _run_end(others, min(63, run + 2))
                    if e < 64:
                        e = _run_end(taken, e)
                elif (space >> b) & one:
                    r = _run_end(space, i + 1)
                    if r < 64 and (ws >> np.uint64(r)) & one:
                        e = r
                    elif r < 64 and r - 1 > i:
                        e = r - 1
                    elif r < 64:
                        gap = True
                elif (breaks >> b) & one:
                    e = _run_end(breaks, i + 1)
                else:
                    gap = True
                if gap:
                    later = cuts & ~((one << (b + one)) - one)
                    e = 64 if later == 0 else np.int64(low_bit(later))
            if e > top:
                if gap and i == 0 and top == 61:
                    # A gap longer than the block: its end, block by block (or back to
                    # the caller at a byte >= 0x80 or the document's last bytes).
                    e = _gap_end(data, pos + 62, end)
                    if e < 0:
                        return pos, n_pieces, piece_offsets
                    n_pieces += 1
                    piece_offsets[n_pieces] = e
                    pos = e
                    break
                if i == 0:
                    return pos, n_pieces, piece_offsets
                pos += i  # the next block starts at this piece
                break
            n_pieces += 1
            piece_offsets[n_pieces] = pos + e
            i = e
            if pos + i >= limit:
                return pos + i, n_pieces, piece_offsets
    return pos, n_pieces, piece_offsets


@njit(cache=True, nogil=True, inline="always")
def _gap_end(data, q, end):
    """Where a gap that began before ``q`` (and holds no place where it ends below ``q``)
    ends: the first such place at or after ``q``, found in blocks of 64 bytes (each decides
    the places up to its bit 61); -1 at a byte >= 0x80 or the document's last 64 bytes."""
    while q + BLOCK_BYTES <= end:
        _, _, _, _, _, _, cuts, top = _block_kinds(data, q)
        if top < 0:
            return -1
        found = cuts & ((np.uint64(2) << np.uint64(top)) - np.uint64(1))
        if found != 0:
            return q + np.int64(low_bit(found))
        if top < 61:
            return -1
        q += 62
    return -1
