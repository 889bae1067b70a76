"""gpt2's, cl100k's and o200k's pieces of ASCII text (and of the commonest two-byte
letters), 64 bytes at a time, from bit masks.

The automaton (:func:`fastbpe_nb.kernels.scan._run_automaton`) reads one byte per step
through a chain of dependent table loads: about 210 MB/s on one core of the team's VM
(Linux sources). On ASCII text gpt2's piece starts depend only on each byte's kind and its
neighbours', so a block of 64 bytes is classified at once (``class_masks``: one vector
load, a compare or two per kind, each result taken as a 64-bit mask, bit ``k`` for byte
``pos + k``); a dozen mask operations then give the piece starts, which are stored one
set bit at a time.

gpt2's pattern is ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|
\\s+(?!\\S)|\\s+``. On ASCII its kinds are L (``A-Z a-z``), N (``0-9``), S (the space
U+0020, the only character ``' ?'`` takes), W (``\\t \\n \\v \\f \\r``: the rest of
``\\s``; ``\\x1c-\\x1f`` are not ``\\s`` in ``regex``) and O (all else). With a piece
starting at bit 0, a piece starts at ``k`` exactly when

* ``k`` starts a whitespace run (``k - 1`` is not whitespace);
* ``k`` and ``k - 1`` are both L, N or O, of different kinds;
* ``k`` is not whitespace and ``k - 1`` is W (after S it is not: the space is the ``' ?'``
  of the piece that ``k`` continues);
* ``k`` and ``k - 1`` are whitespace and ``k + 1`` is not: ``\\s+(?!\\S)`` leaves a run's
  last character to the next match (the ``' ?'`` of the next piece if it is a space,
  ``\\s+`` alone if not);
* or a contraction ends at ``k``. A contraction is tried where an apostrophe starts a
  piece: after L, N or W, or at bit 0 (after O it is inside a run of others, after S it
  is the ``' ?'`` of one). Apostrophes are few, so each one is checked by hand, and the
  starts inside a contraction are cleared.

Starts are stored for ``k <= 62`` only (the rule at ``k`` reads ``k + 1``), and only up
to two bytes before the block's first other byte >= 0x80 (whose character may be a letter,
a digit or whitespace, or an invalid byte). The caller scans whatever this leaves
(non-ASCII text, pieces of 63 bytes or more, a document's last 64 bytes) with the
automaton, from a piece start, and comes back here.
"""

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

#: Bits 1..62: where starts may be stored (bit 0 is the piece start the block begins at).
STORABLE = np.uint64(0x7FFFFFFFFFFFFFFE)
#: The bytes a block covers.
BLOCK_BYTES = 64
APOSTROPHE = 0x27


def low_bit(x):
    """Index of the lowest set bit of ``x`` (a nonzero ``uint64``)."""
    x = int(x)
    return np.uint64((x & -x).bit_length() - 1)


def high_bit(x):
    """Index of the highest set bit of ``x`` (a nonzero ``uint64``)."""
    return np.uint64(int(x).bit_length() - 1)


@overload(low_bit, jit_options={"cache": True, "nogil": True}, inline="always")
def _low_bit_jit(x):
    from numba.cpython.unsafe.numbers import trailing_zeros

    def impl(x):
        return np.uint64(trailing_zeros(x))
    return impl


@overload(high_bit, jit_options={"cache": True, "nogil": True}, inline="always")
def _high_bit_jit(x):
    from numba.cpython.unsafe.numbers import leading_zeros

    def impl(x):
        return np.uint64(63) - np.uint64(leading_zeros(x))
    return impl


def _bits(where):
    """A ``uint64`` with bit ``k`` set where ``where[k]`` (64 booleans)."""
    return np.uint64(sum(1 << k for k in range(BLOCK_BYTES) if where[k]))


def _numpy_masks(kinds, data, pos):
    """For each kind (a tuple of inclusive byte ranges ``(lo, hi)``), the ``uint64`` mask
    of the 64 bytes ``data[pos:pos + 64]`` that fall in one of its ranges, bit ``k`` for
    byte ``pos + k``: the definition of every ``@_vector_masks`` function."""
    b = np.asarray(data[pos:pos + BLOCK_BYTES]).astype(np.int64)
    return tuple(_bits(np.logical_or.reduce([(b >= lo) & (b <= hi) for lo, hi in kind]))
                 for kind in kinds)


def _vector_masks(kinds):
    """Decorator: compile ``masks(data, pos)``, which returns ``_numpy_masks(kinds, data,
    pos)`` in Python (what the tests compare with, and what runs under
    ``NUMBA_DISABLE_JIT``), as one 64-byte vector load and a compare or two per range, each
    ``<64 x i1>`` result taken as a 64-bit mask (LLVM makes these ``pmovmskb`` on x86 and
    the like elsewhere). Unaligned; ``pos + 64 <= len(data)`` is the caller's."""
    result = types.UniTuple(types.uint64, len(kinds))

    @intrinsic
    def vector_masks(typingctx, data, pos):
        if not (isinstance(data, types.Array) and data.ndim == 1
                and data.dtype == types.uint8 and isinstance(pos, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ir = cgutils.ir
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            index = context.cast(builder, args[1], sig.args[1], types.intp)
            vec = ir.VectorType(ir.IntType(8), BLOCK_BYTES)
            address = builder.bitcast(builder.gep(ary.data, [index]), vec.as_pointer())
            v = builder.load(address, align=1)

            def splat(byte):
                return ir.Constant(vec, [byte] * BLOCK_BYTES)

            def in_range(lo, hi):  # lo <= v <= hi, unsigned: (v - lo) <= hi - lo
                if lo == hi:
                    return builder.icmp_unsigned("==", v, splat(lo))
                return builder.icmp_unsigned("<=", builder.sub(v, splat(lo)), splat(hi - lo))

            i64 = ir.IntType(BLOCK_BYTES)
            opaque = ir.FunctionType(i64, [i64])
            out = []
            for kind in kinds:
                bits = in_range(*kind[0])
                for lo, hi in kind[1:]:
                    bits = builder.or_(bits, in_range(lo, hi))
                # Through an empty asm statement: LLVM otherwise folds the scalar mask
                # algebra that follows back into <64 x i1> vector code, a bit-by-bit
                # extraction ~5x slower than the compares. (An empty statement: any target.)
                out.append(builder.asm(opaque, "", "=r,0", [builder.bitcast(bits, i64)], False))
            return context.make_tuple(builder, result, out)

        return result(data, pos), codegen

    def register(masks):
        @overload(masks, jit_options={"cache": True, "nogil": True}, inline="always")
        def _masks_jit(data, pos):
            if isinstance(data, types.Array) and data.ndim == 1 and data.dtype == types.uint8:
                def impl(data, pos):
                    return vector_masks(data, pos)
                return impl
            return None
        return masks

    return register


_CLASS_KINDS = (((0x41, 0x5A), (0x61, 0x7A)), ((0x30, 0x39),), ((0x20, 0x20),),
                ((0x09, 0x0D),), ((APOSTROPHE, APOSTROPHE),), ((0x80, 0xFF),))
_UTF8_KINDS = (((0xC3, 0xCA), (0xD0, 0xD1)), ((0x80, 0xBF),), ((0xC3, 0xC3),),
               ((0x97, 0x97), (0xB7, 0xB7)))
_O200K_KINDS = (((0x41, 0x5A),), ((0x0A, 0x0A), (0x0D, 0x0D)), ((0x2F, 0x2F),))
_BREAK_KINDS = (((0x0A, 0x0A), (0x0D, 0x0D)),)
_CASED_KINDS = (((0xC3, 0xC3),), ((0xD0, 0xD0),), ((0xD1, 0xD1),), ((0x80, 0xBF),),
                ((0x80, 0x9E),), ((0x80, 0xAF),), ((0x80, 0x9F),), ((0x97, 0x97), (0xB7, 0xB7)))


@_vector_masks(_CLASS_KINDS)
def class_masks(data, pos):
    """``(letters, digits, space, other_ws, apostrophes, non_ascii)``: ``uint64`` masks of
    the 64 bytes ``data[pos:pos + 64]``, bit ``k`` for byte ``pos + k``: ``A-Z a-z``,
    ``0-9``, U+0020, ``\\t \\n \\v \\f \\r``, ``'``, and bytes >= 0x80."""
    return _numpy_masks(_CLASS_KINDS, data, pos)


@_vector_masks(_UTF8_KINDS)
def utf8_masks(data, pos):
    """``(leads, continuations, c3, times_divide)``: ``uint64`` masks of the 64 bytes
    ``data[pos:pos + 64]``: the lead bytes 0xC3..0xCA, 0xD0, 0xD1; the continuation bytes
    0x80..0xBF; 0xC3; and 0x97, 0xB7 (after 0xC3: U+00D7, U+00F7, not letters)."""
    return _numpy_masks(_UTF8_KINDS, data, pos)


@_vector_masks(_O200K_KINDS)
def o200k_masks(data, pos):
    """``(upper, line_breaks, slashes)``: ``uint64`` masks of the 64 bytes ``data[pos:pos +
    64]``: ``A-Z``, ``\\r \\n`` and ``/``."""
    return _numpy_masks(_O200K_KINDS, data, pos)


@_vector_masks(_BREAK_KINDS)
def break_masks(data, pos):
    """``(line_breaks,)``: the ``uint64`` mask of ``\\r \\n`` in the 64 bytes
    ``data[pos:pos + 64]``."""
    return _numpy_masks(_BREAK_KINDS, data, pos)


@_vector_masks(_CASED_KINDS)
def cased_masks(data, pos):
    """``(c3, d0, d1, continuations, to_9e, to_af, to_9f, times_divide)``: ``uint64``
    masks of the 64 bytes ``data[pos:pos + 64]``: the bytes 0xC3, 0xD0, 0xD1, 0x80..0xBF,
    0x80..0x9E, 0x80..0xAF, 0x80..0x9F, and 0x97 or 0xB7 (see ``cased_two_byte_letters``)."""
    return _numpy_masks(_CASED_KINDS, data, pos)


@njit(cache=True, nogil=True, inline="always")
def cased_two_byte_letters(data, pos, non_ascii):
    """``(upper, lower)``: the bytes of ``data[pos:pos + 64]`` (masks) that belong to a
    two-byte letter of U+00C0..U+00FF (but U+00D7, U+00F7) or U+0400..U+045F, by o200k's
    case: U+00C0..U+00DE and U+0400..U+042F are ``\\p{Lu}``, U+00DF..U+00FF and
    U+0430..U+045F ``\\p{Ll}``. A lead at bit 63 is left out, as in ``two_byte_letters``."""
    c3, d0, d1, continuation, to_9e, to_af, to_9f, times_divide = cased_masks(data, pos)
    one = np.uint64(1)
    after = continuation >> one
    c3_letter = c3 & after & ~(times_divide >> one)
    upper = (c3_letter & (to_9e >> one)) | (d0 & (to_af >> one))
    lower = (c3_letter & ~(to_9e >> one)) | (d0 & after & ~(to_af >> one)) \
        | (d1 & (to_9f >> one))
    upper = (upper | (upper << one)) & non_ascii
    lower = (lower | (lower << one)) & non_ascii
    return upper, lower


@njit(cache=True, nogil=True, inline="always")
def two_byte_letters(data, pos, non_ascii):
    """The bytes of ``data[pos:pos + 64]`` (mask, as ``class_masks``) that belong to a
    two-byte letter of Latin-1 Supplement, Latin Extended-A and -B, the IPA extensions and
    the spacing modifier letters (U+00C0..U+02BF, but for U+00D7 and U+00F7) or of basic
    Cyrillic (U+0400..U+047F): every code point there is ``\\p{L}``. A lead byte must be
    followed by a continuation byte (else it is an invalid byte, "other"); a lead at bit
    63 is left out (its continuation is not in the block)."""
    lead, continuation, c3, times_divide = utf8_masks(data, pos)
    one = np.uint64(1)
    letter = lead & (continuation >> one) & ~(c3 & (times_divide >> one))
    return (letter | (letter << one)) & non_ascii


@njit(cache=True, nogil=True, inline="always")
def _contraction_length(c1, c2):
    """The length of the contraction an apostrophe followed by the bytes ``c1``, ``c2``
    starts: 2 for ``'s 't 'm 'd``, 3 for ``'re 've 'll`` (lower case), 0 for none."""
    if c1 == 0x73 or c1 == 0x74 or c1 == 0x6D or c1 == 0x64:
        return 2
    if (c1 == 0x72 or c1 == 0x76) and c2 == 0x65:
        return 3
    if c1 == 0x6C and c2 == 0x6C:
        return 3
    return 0


@njit(cache=True, nogil=True, inline="always")
def _standalone_contractions(data, pos, tried, starts, keep, top, fold):
    """gpt2's and cl100k's contractions, pieces of their own: for each apostrophe of
    ``tried`` (mask, low to high) followed by ``s t m d re ve ll`` (each byte OR ``fold``:
    0 for gpt2's lower case only, 0x20 for cl100k's any case), the starts inside it cleared
    and one set after it. Returns ``(starts, keep)``: an apostrophe too close to ``top``
    for its letters to be read ends ``keep`` there (the next block starts at it)."""
    one = np.uint64(1)
    while tried != 0:
        k = np.int64(low_bit(tried))
        tried &= tried - one
        if k + 3 > top:
            # Its letters would be read past the block's known bytes (or its end stored
            # past the bits that can hold it): store up to k, and the next block starts
            # at the apostrophe.
            keep &= (one << np.uint64(k + 1)) - one
            break
        length = _contraction_length(data[pos + k + 1] | fold, data[pos + k + 2] | fold)
        if length != 0:
            inside = ((one << np.uint64(length - 1)) - one) << np.uint64(k + 1)
            starts = (starts & ~inside) | (one << np.uint64(k + length))
    return starts, keep


@njit(cache=True, nogil=True, inline="always")
def _store_starts(starts, pos, top, limit, piece_offsets, n_pieces):
    """Store a block's piece starts (``starts``: a nonzero mask of bits up to ``top``, bit
    ``k`` for byte ``pos + k``) as piece ends from ``piece_offsets[n_pieces + 1]`` on,
    stopping after the first at or after ``limit`` (where the caller's chunk ends).
    Returns ``(the last start stored, n_pieces, piece_offsets)``, the buffer grown if it
    had to be."""
    one = np.uint64(1)
    if pos + top >= limit:
        past = starts & ~((one << np.uint64(max(0, limit - pos))) - one)
        if past != 0:
            starts &= (one << (low_bit(past) + one)) - one
    if n_pieces + BLOCK_BYTES + 8 > piece_offsets.shape[0]:
        grown = np.empty(2 * piece_offsets.shape[0] + BLOCK_BYTES + 8, dtype=np.int64)
        grown[: n_pieces + 1] = piece_offsets[: n_pieces + 1]
        piece_offsets = grown
    last = pos + np.int64(high_bit(starts))
    while starts != 0:
        n_pieces += 1
        piece_offsets[n_pieces] = pos + np.int64(low_bit(starts))
        starts &= starts - one
    return last, n_pieces, piece_offsets


@njit(cache=True, nogil=True)
def gpt2_ascii_pieces(data, pos, end, limit, piece_offsets, n_pieces):
    """Store gpt2's piece ends of ``data[:end]`` from ``pos`` (a piece start), a block of
    64 bytes at a time, while blocks are ASCII enough to give one.

    Parameters
    ----------
    data : uint8[n]
        The bytes (``end <= n``).
    pos : int
        A piece start of the document that ends at ``end``.
    end : int
        The document's end (exclusive); blocks stop 64 bytes before it.
    limit : int
        Stop once a piece ends at or after it (as ``scan._run_automaton``).
    piece_offsets : int64[m]
        Piece ends are stored at ``piece_offsets[n_pieces + 1]`` on (grown when needed:
        the buffer is returned).
    n_pieces : int
        Pieces stored so far (``piece_offsets[n_pieces]`` is ``pos``).

    Returns
    -------
    tuple
        ``(pos, n_pieces, piece_offsets)``: ``pos`` is the last end stored (a piece start),
        or the ``pos`` given when no block could be done; ``pos >= limit`` when the limit
        was reached.
    """
    one = np.uint64(1)
    while pos + BLOCK_BYTES <= end and pos < limit:
        letters, digits, space, other_ws, apostrophes, non_ascii = class_masks(data, pos)
        top = 62  # the highest bit a start may be stored at
        if non_ascii != 0:
            two_byte = two_byte_letters(data, pos, non_ascii)
            letters |= two_byte
            non_ascii &= ~two_byte
        if non_ascii != 0:
            top = min(top, np.int64(low_bit(non_ascii)) - 2)
            if top < 1:
                break
        ws = space | other_ws
        not_ws = ~ws
        kinds = letters | digits
        others = not_ws & ~kinds
        starts = (
            (ws & ~(ws << one))
            | (letters & ((digits | others) << one))
            | (digits & ((letters | others) << one))
            | (others & (kinds << one))
            | (not_ws & (other_ws << one))
            | (ws & (ws << one) & ~(ws >> one))
        )
        keep = STORABLE & ((one << np.uint64(top + 1)) - one)
        tried = apostrophes & (((kinds | other_ws) << one) | one) & (keep | one)
        starts, keep = _standalone_contractions(data, pos, tried, starts, keep, top, 0)
        starts &= keep
        if starts == 0:
            break  # no start in the block: a long piece, or non-ASCII close ahead
        pos, n_pieces, piece_offsets = _store_starts(starts, pos, top, limit, piece_offsets,
                                                     n_pieces)
    return pos, n_pieces, piece_offsets


@njit(cache=True, nogil=True, inline="always")
def _spread_up(x, allowed):
    """``x`` carried to higher bits through ``allowed``: bit ``k`` is set when some bit
    ``j <= k`` of ``x`` is and ``allowed`` holds on all of ``j + 1 .. k`` (six shifts)."""
    m = allowed
    for s in (1, 2, 4, 8, 16, 32):
        x |= (x << np.uint64(s)) & m
        m &= m << np.uint64(s)
    return x


@njit(cache=True, nogil=True, inline="always")
def _spread_down(x, allowed):
    """``x`` carried to lower bits through ``allowed``: bit ``k`` is set when some bit
    ``j >= k`` of ``x`` is and ``allowed`` holds on all of ``k .. j - 1``."""
    m = allowed
    for s in (1, 2, 4, 8, 16, 32):
        x |= (x >> np.uint64(s)) & m
        m &= m >> np.uint64(s)
    return x


@njit(cache=True, nogil=True, inline="always")
def _prefixed_run_starts(letters, digits, space, other_ws, breaks, others, taken):
    """The piece starts (mask) that cl100k and o200k share on a block: their letters take
    a one-character prefix (``[^\\r\\n\\p{L}\\p{N}]?``), their digits come in groups of
    three (set by ``_digit_groups``), their runs of others take ``' ?'`` before and
    ``taken`` (the line breaks, for o200k also slashes) after, and their whitespace runs
    end after their last line break (``\\s*[\\r\\n]``) or before their last character
    (``\\s+(?!\\S)``). Case splits and contractions are each pattern's own."""
    one = np.uint64(1)
    ws = space | other_ws
    tabs = other_ws & ~breaks  # \t \v \f
    free_others = others & ~taken
    # A whitespace run's line breaks that some later break of the same run follows.
    later_break = _spread_down(breaks & ~taken, ws & ~taken)
    single = free_others & ~(free_others << one) & ~(space << one)
    return (
        # whitespace: a run's start (or the first after what a run of others took),
        # after its last line break, and the last of a run before a non-space
        (ws & ~taken & (~(ws << one) | (taken << one)))
        | (ws & ~taken & (breaks << one) & ~later_break)
        | (ws & (ws << one) & ~breaks & ~(ws >> one))
        # after whitespace, unless it is the prefix of letters or ' ?' of others
        | (~ws & ~taken & (ws << one) & ~(letters & ((space | tabs) << one))
           & ~(others & (space << one)))
        # letters: a run's start (not after its one-character prefix)
        | (letters & ~(letters << one) & ~(ws << one) & ~(single << one))
        # digits: a run's start (groups of three: _digit_groups), others: a run's start
        | (digits & ~(digits << one) & ~(ws << one))
        | (free_others & ~(free_others << one) & ~(ws << one))
    )


@njit(cache=True, nogil=True, inline="always")
def _decided_top(known, letters, digits):
    """The highest bit a cl100k or o200k block may store a start at: from the last stretch
    of whitespace and others on, nothing is decided (a whitespace run's last line break,
    what a run of others takes, a prefix may lie past the block), so the block ends at its
    last letter or digit, below ``known`` (the bytes whose character is known) - 1."""
    one = np.uint64(1)
    valid = (one << np.uint64(known)) - one if known < 64 else ~np.uint64(0)
    decided = valid & (letters | digits)
    tail = np.int64(high_bit(decided)) + 1 if decided != 0 else 0
    return min(62, known - 2, tail - 1)


@njit(cache=True, nogil=True, inline="always")
def _digit_groups(starts, digits, top):
    """``starts`` with a start at every third digit of each run of four or more
    (``\\p{N}{1,3}``), up to bit ``top``."""
    one = np.uint64(1)
    run_starts = digits & ~(digits << one) & (digits >> np.uint64(3)) \
        & (digits >> np.uint64(2)) & (digits >> one)
    while run_starts != 0:
        k = np.int64(low_bit(run_starts))
        run_starts &= run_starts - one
        beyond = ~(digits >> np.uint64(k))
        run_end = k + np.int64(low_bit(beyond)) if beyond != 0 else 64
        for j in range(k + 3, min(run_end, top + 1), 3):
            starts |= one << np.uint64(j)
    return starts


@njit(cache=True, nogil=True)
def o200k_ascii_pieces(data, pos, end, limit, piece_offsets, n_pieces):
    """``gpt2_ascii_pieces`` for o200k's pattern; the same contract.

    o200k (``[^\\r\\n\\p{L}\\p{N}]?`` + upper* lower+ or upper+ lower*, then an optional
    contraction of any case ``|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|
    \\s+(?!\\S)|\\s+``) on ASCII and ``cased_two_byte_letters``: kinds upper (``A-Z``,
    two-byte capitals), lower (the other letters), digits, space, tabs (``\\t \\v \\f``),
    line breaks (``\\r \\n``) and others (all else, ``/`` and ``'`` among them). A run of
    others takes the line breaks and slashes right after it ("taken"). A piece starts at

    * a whitespace run's first character not taken, after the run's last (untaken) line
      break, and at the last of two or more before a non-space (``\\s+(?!\\S)``; unless it
      is a line break, which ``\\s*[\\r\\n]+`` ends with);
    * a non-space after whitespace, unless a space or tab is the prefix of letters, or a
      space the ``' ?'`` of others;
    * a run of letters not after its prefix: one space, tab or other (not taken, not after
      another other or a space, which ``' ?'`` takes with it); a lower letter followed by
      an upper one;
    * a run of digits, and every third digit in it;
    * a run of others (not taken) after a letter, a digit or a taken character;
    * and after a contraction (``'s 't 're 've 'm 'll 'd`` in any case) that follows a run
      of letters: the letters' piece takes it, unless those letters are themselves a
      contraction's.

    Nothing is decided from the block's last stretch of whitespace and others on (a run's
    last line break, what others take, a prefix may lie past the block): the starts stored
    end before it.
    """
    one = np.uint64(1)
    while pos + BLOCK_BYTES <= end and pos < limit:
        letters, digits, space, other_ws, apostrophes, non_ascii = class_masks(data, pos)
        known = 64  # bytes whose character is known: up to the first other byte >= 0x80
        upper2 = np.uint64(0)
        lower2 = np.uint64(0)
        if non_ascii != 0:
            upper2, lower2 = cased_two_byte_letters(data, pos, non_ascii)
            non_ascii &= ~(upper2 | lower2)
            if non_ascii != 0:
                known = np.int64(low_bit(non_ascii))
                if known < BLOCK_BYTES // 4:
                    break  # (before the rest of the masks: on CJK text most tries end here)
        upper, breaks, slashes = o200k_masks(data, pos)
        upper |= upper2
        letters |= upper2 | lower2
        ws = space | other_ws
        others = ~(letters | digits | ws)
        # Line breaks (and slashes) that a run of others takes ([\r\n/]*), from the line
        # break right after it through every line break and slash that follows.
        taken = _spread_up(breaks & (others << one), breaks | slashes) & (breaks | slashes)
        starts = _prefixed_run_starts(letters, digits, space, other_ws, breaks, others, taken)
        # A lower letter followed by an upper one (o200k's letters are upper* lower+).
        starts |= upper & ((letters & ~upper) << one)
        top = _decided_top(known, letters, digits)
        if top < 1:
            break
        keep = STORABLE & ((one << np.uint64(top + 1)) - one)
        starts = _digit_groups(starts, digits, top)
        # Contractions after letters (case-insensitive), the letters' piece going on.
        tried = apostrophes & (letters << one) & keep
        inside_until = -1
        while tried != 0:
            k = np.int64(low_bit(tried))
            tried &= tried - one
            if k - 1 <= inside_until:
                continue  # its letter is a contraction's: the apostrophe starts a piece
            if k + 3 > top:
                keep &= (one << np.uint64(k)) - one
                break
            # (any case: the two letters lowered; k + 3 <= top keeps them ASCII)
            length = _contraction_length(data[pos + k + 1] | 0x20, data[pos + k + 2] | 0x20)
            if length != 0:
                inside = ((one << np.uint64(length)) - one) << np.uint64(k)
                starts = (starts & ~inside) | (one << np.uint64(k + length))
                inside_until = k + length - 1
        starts &= keep
        if starts == 0:
            break
        pos, n_pieces, piece_offsets = _store_starts(starts, pos, top, limit, piece_offsets,
                                                     n_pieces)
    return pos, n_pieces, piece_offsets


@njit(cache=True, nogil=True)
def cl100k_ascii_pieces(data, pos, end, limit, piece_offsets, n_pieces):
    """``gpt2_ascii_pieces`` for cl100k's pattern; the same contract.

    cl100k (``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+|
    ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s``) is
    o200k's rules (``o200k_ascii_pieces``) without its case: letters are one kind (ASCII
    and ``two_byte_letters``), a run of others takes only line breaks, and a contraction
    (any case) is a piece of its own wherever an apostrophe starts a piece: after a letter,
    a digit, a tab or a line break, or at bit 0 (after a space the apostrophe is the
    ``' ?'`` run's, after another other inside a run). Where one matches, the starts inside
    it are cleared and one is set after it. The possessive quantifiers change nothing on
    these kinds: no alternative could give back what they keep. ``\\s++$`` concerns only
    a document's end, which the blocks never decide (they stop 64 bytes before it, and
    each block at its last letter or digit).
    """
    one = np.uint64(1)
    while pos + BLOCK_BYTES <= end and pos < limit:
        letters, digits, space, other_ws, apostrophes, non_ascii = class_masks(data, pos)
        known = 64  # bytes whose character is known: up to the first other byte >= 0x80
        if non_ascii != 0:
            two_byte = two_byte_letters(data, pos, non_ascii)
            letters |= two_byte
            non_ascii &= ~two_byte
            if non_ascii != 0:
                known = np.int64(low_bit(non_ascii))
                if known < BLOCK_BYTES // 4:
                    break  # (before the rest of the masks: on CJK text most tries end here)
        breaks = break_masks(data, pos)[0]
        others = ~(letters | digits | space | other_ws)
        # The line breaks a run of others takes ([\r\n]*+).
        taken = _spread_up(breaks & (others << one), breaks) & breaks
        starts = _prefixed_run_starts(letters, digits, space, other_ws, breaks, others, taken)
        top = _decided_top(known, letters, digits)
        if top < 1:
            break
        keep = STORABLE & ((one << np.uint64(top + 1)) - one)
        starts = _digit_groups(starts, digits, top)
        # Contractions where an apostrophe starts a piece (bit 0 is a piece start).
        tried = apostrophes & (starts | one) & (keep | one)
        # (any case: the two letters lowered; k + 3 <= top keeps them ASCII)
        starts, keep = _standalone_contractions(data, pos, tried, starts, keep, top, 0x20)
        starts &= keep
        if starts == 0:
            break
        pos, n_pieces, piece_offsets = _store_starts(starts, pos, top, limit, piece_offsets,
                                                     n_pieces)
    return pos, n_pieces, piece_offsets
