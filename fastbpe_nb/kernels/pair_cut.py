"""Cutting a word table where no merge can ever join two symbols.

BPE merges the most frequent adjacent pair. A pair whose weighted count is below ``theta``
in the whole table can never be merged while merges of count ``theta`` or more remain, and
neither can any pair a merge makes across it: such a pair holds the same adjacency, so its
count is at most that pair's. Every merge down to count ``theta`` is therefore the same in
the table with its words cut at those adjacencies. SuperBPE's stage 2 (``superbpe.py``)
uses this on a table whose words are mostly unique lines: cut at rare adjacencies, the
pieces repeat, and identical pieces are one row with their counts added.

The cut need not find every rare pair: leaving some uncut keeps the merges the same (the
argument above holds for any set of cut adjacencies whose pairs are rarer than ``theta``).
So the pairs are not counted exactly but in a count-min sketch (``pair_sketch``): two rows
of counters, each pair added to one counter of each row, so that each counter is at least
the count of every pair in it. A pair one of whose counters is below ``theta`` is rarer
than ``theta``: only those are cut. The sketch stays in the CPU's cache where an exact
table of the pairs did not (1.4 M pairs on 100 MB of Linux sources, a miss per adjacency).
"""

import numpy as np
from numba import njit

from .count import LONG_KEY, _key_slot, _piece_key, _rehash_slots, _same
from .hashing import EMPTY, HASH_SEED, _mix, grow, pair_key, prefetch
#: kernel cache stamp: ac6912a7b0f149294043b87d6f1e53f185dc21f0562e5d316582af7bb424d585
#: The largest value of a sketch counter (uint32): a sum that would pass it stays there
#: (still at least the count of every pair in the counter).
SKETCH_CAP = 0xFFFFFFFF
#: ``cut_rows`` finds this many pieces, prefetching their row slots, before it looks them
#: up.
PIECE_BATCH = 64


@njit(cache=True, nogil=True, inline="always")
def sketch_cells(key, mask):
    """The counters of pair ``key`` (``pair_key``), one in each row of a sketch of
    ``mask + 1`` counters a row: two independent hashes of it (the second row's counter is
    ``mask + 1`` further on). The products stay below 2**63 (no overflow, compiled or not).
    """
    hi = key >> 32
    lo = key & 0xFFFFFFFF
    g = (hi * 0xC2B2AE3D) ^ (lo * 0x27D4EB2F)
    g ^= g >> 31
    return _mix(key) & mask, (g & mask) + mask + 1


@njit(cache=True, nogil=True)
def pair_sketch(symbols, offsets, counts, bits):
    """Every pair of adjacent symbols inside a word, counted in a count-min sketch.

    Parameters
    ----------
    symbols : int32[n]
        The words' symbols, end to end (ids below 2**31).
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols`` (rising, within it; validated by the caller). A
        slice of a table's offsets serves: the words it spans.
    counts : int64[n_words]
        How often each word occurs (>= 0).
    bits : int
        log2 of the counters a row (>= 0).

    Returns
    -------
    sketch : uint32[2 << bits]
        Two rows of counters (``sketch_cells``); each adjacency adds its word's count to
        the pair's counter in each row, up to ``SKETCH_CAP``. A counter is at least the
        count of every pair in it, so the smaller of a pair's two counters is at least its
        count.
    """
    mask = (1 << bits) - 1
    sketch = np.zeros(2 << bits, dtype=np.uint32)
    for w in range(offsets.shape[0] - 1):
        c = min(counts[w], SKETCH_CAP)
        for i in range(offsets[w] + 1, offsets[w + 1]):
            a, b = sketch_cells(pair_key(symbols[i - 1], symbols[i]), mask)
            sketch[a] = min(np.int64(sketch[a]) + c, SKETCH_CAP)
            sketch[b] = min(np.int64(sketch[b]) + c, SKETCH_CAP)
    return sketch


@njit(cache=True, nogil=True)
def added_sketches(sketch, other):
    """``other``'s counters added to ``sketch``'s, up to ``SKETCH_CAP`` (the two halves of
    a table's words sketched on two threads).

    Parameters
    ----------
    sketch, other : uint32[2 << bits]
        ``pair_sketch``'s of the same ``bits``; ``sketch`` is written.

    Returns
    -------
    uint32[2 << bits]
        ``sketch`` itself.
    """
    for i in range(sketch.shape[0]):
        sketch[i] = min(np.int64(sketch[i]) + np.int64(other[i]), SKETCH_CAP)
    return sketch


@njit(cache=True, nogil=True)
def kept_pairs(sketch, theta):
    """A bit per counter of ``sketch``: whether it is ``theta`` or more, or full
    (``SKETCH_CAP``: its pairs may count more than any ``theta``). ``cut_rows`` keeps the
    adjacencies of a pair whose two counters are both set; a bitmap of 2**21 counters is
    512 KiB, which the cache holds where the counters did not.

    Parameters
    ----------
    sketch : uint32[2 << bits]
        ``pair_sketch``'s counters (of the whole table).
    theta : int
        The least count kept.

    Returns
    -------
    int64[(2 << bits) / 32, rounded up]
        32 bits to a word: counter ``i`` is bit ``i & 31`` of word ``i >> 5``.
    """
    bitmap = np.zeros((sketch.shape[0] + 31) >> 5, dtype=np.int64)
    for i in range(sketch.shape[0]):
        if sketch[i] >= theta or sketch[i] == SKETCH_CAP:
            bitmap[i >> 5] |= np.int64(1) << (i & 31)
    return bitmap


@njit(cache=True, nogil=True, inline="always")
def _kept(bitmap, key, mask):
    """Whether both counters of pair ``key`` are set in ``bitmap`` (``kept_pairs``)."""
    a, b = sketch_cells(key, mask)
    return ((bitmap[a >> 5] >> (a & 31)) & (bitmap[b >> 5] >> (b & 31)) & 1) != 0


@njit(cache=True, nogil=True)
def _symbols_hash(symbols, start, end):
    """A 40-bit hash of the ids ``symbols[start:end]`` (``_mix`` makes it a slot).

    Not ``hash_units``: its base 31 suits bytes, but with ids of up to 2**31 the pieces
    ``(a, b)`` and ``(a + 1, b - 31)`` get one hash, and the table's probe runs grew long
    (160 ns a piece on 100 MB of code). A base near 2**20 keeps ids of real vocabularies
    apart; masked to 40 bits, products stay below 2**60 (no overflow, compiled or not)."""
    h = HASH_SEED
    for k in range(start, end):
        h = ((h * 1000003) ^ (np.int64(symbols[k]) + 1)) & 0xFFFFFFFFFF
    return h


@njit(cache=True, nogil=True)
def cut_rows(symbols, offsets, counts, bitmap, bits):
    """The words cut between adjacent symbols whose pair is not kept (``kept_pairs``: one of
    its sketch counters below the threshold), pieces of one symbol dropped, equal pieces
    one row with their counts added, rows in order of first appearance: the cut table
    itself. (Before, every kept piece was copied out and
    Arrow's ``dictionary_encode`` merged equal ones: on 1 GB of code the copy held 56 M
    symbols for 2.7 M distinct rows of 17 M.)

    A row's slot holds what a look-up needs in one cache line: the row's key (a piece of
    two symbols: the pair itself; a longer one: a 40-bit hash, compared symbol by symbol on
    a match; the lengths keep the two kinds apart), its count, where its symbols start in
    ``rows`` and its number << 31 | its length (a piece is shorter than 2**31 symbols:
    offsets index an int32 array of words). Counts kept beside the rows cost a second
    cache miss per repeated piece. At most half full.

    Parameters
    ----------
    symbols : int32[n]
        The words' symbols, end to end.
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols`` (rising, within it; validated by the caller). A
        slice of a table's offsets serves: the words it spans.
    counts : int64[n_words]
        How often each word occurs.
    bitmap : int64[(2 << bits) / 32]
        ``kept_pairs``' bits of the pairs' sketch.
    bits : int
        log2 of the sketch's counters a row.

    Returns
    -------
    rows : int32[m]
        The rows' symbols, end to end.
    row_offsets : int64[n_rows + 1]
        Row boundaries in ``rows``.
    row_counts : int64[n_rows]
        Each row's count: the counts of the words it was cut from, once per occurrence.
    """
    rows = np.empty(1 << 12, dtype=np.int32)
    row_offsets = np.empty((1 << 10) + 1, dtype=np.int64)
    row_offsets[0] = 0
    slots = np.full(4 << 11, EMPTY, dtype=np.int64)
    # (word, piece start or -1 at the word's start, cut point, rows, symbols used, next
    # buffered piece, buffered pieces)
    state = np.array([0, -1, 0, 0, 0, 0, 0], dtype=np.int64)
    pieces = np.empty(4 * PIECE_BATCH, dtype=np.int64)
    while not _rows_until_full(rows, row_offsets, slots, symbols, offsets, counts, bitmap,
                               (1 << bits) - 1, state, pieces):
        n_rows, at, n = state[3], state[4], pieces[4 * state[5] + 1]
        if 2 * (n_rows + 1) > slots.shape[0] // 4:
            slots = _doubled_row_slots(slots)
        if at + n > rows.shape[0]:
            rows = grow(rows, at + n)
        if n_rows + 2 > row_offsets.shape[0]:
            row_offsets = grow(row_offsets, n_rows + 2)
    return _finished_rows(rows, row_offsets, slots, state[3], state[4])


@njit(cache=True, nogil=True, _nrt=False)
def _rows_until_full(rows, row_offsets, slots, symbols, offsets, counts, bitmap, sketch_mask,
                     state, pieces):
    """``cut_rows``' pass from where ``state`` says until done (True) or until a new row
    needs room that the arrays lack (False, ``state[5]`` at that piece: the caller grows
    them and calls again). Never allocates, and no array is reassigned here: a loop that
    reassigned them paid atomic reference counts per piece (compiled without them).

    The pieces are found ``PIECE_BATCH`` at a time (``_next_pieces``: start, length, count
    and key of each in ``pieces``), their slots prefetched, then looked up in turn: the
    slots outgrow the caches (550 k rows on 100 MB of code), and one piece at a time
    each look-up waited on memory."""
    n_slots = slots.shape[0] // 4
    mask = n_slots - 1
    n_rows = state[3]
    at = state[4]
    while True:
        if state[5] == state[6]:
            if not _next_pieces(symbols, offsets, counts, bitmap, sketch_mask, state, pieces,
                                slots):
                break
        for k in range(state[5], state[6]):
            start = pieces[4 * k]
            n = pieces[4 * k + 1]
            c = pieces[4 * k + 2]
            h = pieces[4 * k + 3]
            j = _mix(h) & mask
            while True:
                key = slots[4 * j]
                if key == EMPTY:
                    break
                if key == h and (slots[4 * j + 3] & 0x7FFFFFFF) == n and (
                        n == 2 or _same(rows, slots[4 * j + 2], symbols, start, n)):
                    break
                j = (j + 1) & mask
            if key != EMPTY:
                slots[4 * j + 1] += c
            elif (2 * (n_rows + 1) > n_slots or at + n > rows.shape[0]
                  or n_rows + 2 > row_offsets.shape[0]):
                state[3], state[4], state[5] = n_rows, at, k
                return False
            else:
                for t in range(n):
                    rows[at + t] = symbols[start + t]
                slots[4 * j] = h
                slots[4 * j + 1] = c
                slots[4 * j + 2] = at
                slots[4 * j + 3] = (np.int64(n_rows) << 31) | n
                at += n
                n_rows += 1
                row_offsets[n_rows] = at
        state[5] = state[6]
    state[3] = n_rows
    state[4] = at
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _next_pieces(symbols, offsets, counts, bitmap, sketch_mask, state, pieces, slots):
    """Up to ``PIECE_BATCH`` more pieces of two symbols or more, from word ``state[0]`` at
    ``state[1:3]`` (piece start, or -1 at the word's start; cut point), into ``pieces``
    (start, length, count, key: a piece of two symbols is the pair itself, a longer one a
    40-bit hash), each one's row slot prefetched. ``state`` is left after them,
    ``state[5:7]`` the pieces found; False when the words are done and none was found."""
    n_words = offsets.shape[0] - 1
    mask = slots.shape[0] // 4 - 1
    w = state[0]
    if w >= n_words:
        return False
    start = state[1]
    i = state[2]
    if start < 0:
        start = offsets[w]
        i = start + 1
    found = 0
    while True:
        b = offsets[w + 1]
        c = counts[w]
        while i <= b and found < PIECE_BATCH:
            if i < b and _kept(bitmap, pair_key(symbols[i - 1], symbols[i]), sketch_mask):
                i += 1
                continue
            n = i - start
            if n >= 2:
                if n == 2:
                    h = pair_key(symbols[start], symbols[start + 1])
                else:
                    h = _symbols_hash(symbols, start, i)
                pieces[4 * found] = start
                pieces[4 * found + 1] = n
                pieces[4 * found + 2] = c
                pieces[4 * found + 3] = h
                prefetch(slots, 4 * (_mix(h) & mask))
                found += 1
            start = i
            i += 1
        if i <= b:  # the buffer is full inside the word
            break
        w += 1
        if w >= n_words or found == PIECE_BATCH:
            start = -1
            break
        start = offsets[w]
        i = start + 1
    state[0], state[1], state[2], state[5], state[6] = w, start, i, 0, found
    return found > 0


@njit(cache=True, nogil=True)
def _finished_rows(rows, row_offsets, slots, n_rows, at):
    """The cut table of ``cut_rows``' arrays: ``(rows int32[at], row_offsets
    int64[n_rows + 1], row_counts int64[n_rows])``, copies (the merge kernel rewrites the
    rows)."""
    row_counts = np.empty(n_rows, dtype=np.int64)
    for j in range(slots.shape[0] // 4):
        if slots[4 * j] != EMPTY:
            row_counts[slots[4 * j + 3] >> 31] = slots[4 * j + 1]
    return rows[:at].copy(), row_offsets[:n_rows + 1].copy(), row_counts


@njit(cache=True, nogil=True)
def _doubled_row_slots(slots):
    """``cut_rows``' slots with twice the room, every row placed again."""
    n_slots = slots.shape[0] // 4
    out = np.full(8 * n_slots, EMPTY, dtype=np.int64)
    mask = 2 * n_slots - 1
    for i in range(n_slots):
        h = slots[4 * i]
        if h != EMPTY:
            j = _mix(h) & mask
            while out[4 * j] != EMPTY:
                j = (j + 1) & mask
            for f in range(4):
                out[4 * j + f] = slots[4 * i + f]
    return out


@njit(cache=True, nogil=True)
def gathered_words(values, offsets, rows, word_first, renumber, capacity):
    """Words made of rows of a CSR table: each word's rows' values end to end (SuperBPE's
    stage-2 words from the ids of their distinct segments, ``distinct_segments``' output
    for some of the words).

    Parameters
    ----------
    values : int32[m]
        The table's values, row after row.
    offsets : int64[n_rows + 1]
        Row boundaries in ``values`` (rising; validated by the caller).
    rows : int32[k]
        Row numbers, word after word (repeats allowed); below ``n_rows``, or below
        ``len(renumber)`` when it is given.
    word_first : int64[n_words + 1]
        Index in ``rows`` of each word's first row (``k`` last; rising).
    renumber : int32[r]
        Empty, or the table's row of each number in ``rows`` (the second half of the words
        numbered its segments on its own).
    capacity : int
        At least the number of values gathered (the words' bytes: a row's values are ids
        of one byte or more). Only the pages written become resident.

    Returns
    -------
    symbols : int32[total]
        The words' values, end to end (a view of an array of ``capacity``).
    word_offsets : int64[n_words + 1]
        Word boundaries in ``symbols``.
    """
    n_words = word_first.shape[0] - 1
    symbols = np.empty(capacity, dtype=np.int32)
    word_offsets = np.empty(n_words + 1, dtype=np.int64)
    direct = renumber.shape[0] == 0
    at = 0
    for w in range(n_words):
        word_offsets[w] = at
        for i in range(word_first[w], word_first[w + 1]):
            r = rows[i] if direct else renumber[rows[i]]
            if at + offsets[r + 1] - offsets[r] > capacity:
                raise ValueError("gathered_words: more values than capacity")
            for j in range(offsets[r], offsets[r + 1]):
                symbols[at] = values[j]
                at += 1
    word_offsets[n_words] = at
    return symbols[:at], word_offsets


@njit(cache=True, nogil=True)
def gather_ranges(data, starts, ends):
    """``(offsets int64[k + 1], bytes uint8[total])``: the ranges ``data[starts[i]:ends[i]]``
    end to end (SuperBPE's distinct stage-2 segments; NumPy's gather built two int64 index
    arrays per byte for it).

    Parameters
    ----------
    data : uint8[n]
        The bytes the ranges are in.
    starts, ends : int64[k]
        Each range's bounds in ``data`` (``starts[i] <= ends[i]``; validated by the caller).
    """
    k = starts.shape[0]
    offsets = np.empty(k + 1, dtype=np.int64)
    offsets[0] = 0
    for i in range(k):
        offsets[i + 1] = offsets[i] + ends[i] - starts[i]
    out = np.empty(offsets[k], dtype=np.uint8)
    at = 0
    for i in range(k):
        for j in range(starts[i], ends[i]):
            out[at] = data[j]
            at += 1
    return offsets, out


@njit(cache=True, nogil=True, _nrt=False)
def _segments_until_full(data, offsets, joinable, segment_ids, word_first, d_start, d_end,
                         slots, state):
    """``distinct_segments``' pass from where ``state`` says until done (True) or until a
    new segment needs room that the slots or ``d_start``/``d_end`` lack (False, ``state``
    at that segment: the caller grows them and calls again). Never allocates, and no
    array is reassigned here (compiled without reference counting, see ``cut_rows``)."""
    n_words = offsets.shape[0] - 1
    n_slots = slots.shape[0] // 2
    mask = n_slots - 1
    m = state[3]
    n_distinct = state[4]
    w0 = state[0]
    for w in range(w0, n_words):
        a = offsets[w]
        b = offsets[w + 1]
        s = a
        i = a + 1
        if w == w0 and state[1] >= 0:  # resumed inside the word, at a cut
            s = state[1]
            i = state[2]
        else:
            word_first[w] = m
        while i <= b:
            if i < b and joinable[data[i - 1], data[i]]:
                i += 1
                continue
            key = _piece_key(data, s, i)
            j = _key_slot(key) & mask
            while True:
                k = slots[2 * j]
                if k == key:
                    u = slots[2 * j + 1] >> 32
                    if key < LONG_KEY or (d_end[u] - d_start[u] == i - s
                                          and _same(data, d_start[u], data, s, i - s)):
                        break
                elif k == EMPTY:
                    if 2 * (n_distinct + 1) > n_slots or n_distinct == d_start.shape[0]:
                        state[0], state[1], state[2], state[3], state[4] = (w, s, i, m,
                                                                            n_distinct)
                        return False
                    u = n_distinct
                    d_start[u] = s
                    d_end[u] = i
                    slots[2 * j] = key
                    slots[2 * j + 1] = np.int64(u) << 32
                    n_distinct += 1
                    break
                j = (j + 1) & mask
            segment_ids[m] = u
            m += 1
            s = i
            i += 1
    state[0] = n_words
    state[3] = m
    state[4] = n_distinct
    return True


@njit(cache=True, nogil=True)
def distinct_segments(data, offsets, joinable):
    """Words of bytes cut between two bytes that no token holds side by side, and their
    segments numbered by first appearance (SuperBPE's stage-2 words before they are
    encoded with the stage-1 merges: only the distinct segments are encoded).

    Parameters
    ----------
    data : uint8[n]
        The words' bytes, end to end.
    offsets : int64[n_words + 1]
        Word boundaries in ``data`` (rising, within it; validated by the caller). A slice
        of a table's offsets serves: the words it spans.
    joinable : bool[256, 256]
        ``joinable[a, b]``: some token holds byte ``a`` followed by byte ``b``.

    Returns
    -------
    segment_ids : int32[n_segments]
        Each segment's distinct number, segments in order (a view of an array of a
        segment per byte of ``data``).
    word_first : int64[n_words + 1]
        Index of each word's first segment (``n_segments`` last; an empty word has none).
    distinct_start, distinct_end : int64[n_distinct]
        Where each distinct segment first occurs in ``data``.
    """
    n_words = offsets.shape[0] - 1
    segment_ids = np.empty(data.shape[0], dtype=np.int32)
    word_first = np.empty(n_words + 1, dtype=np.int64)
    d_start = np.empty(1024, dtype=np.int64)
    d_end = np.empty(1024, dtype=np.int64)
    n_distinct = 0
    # Slots hold a segment's key (count.py's piece key: its bytes when they are 7 or
    # fewer, else its length and first and last 8 bytes, compared on a match) beside its
    # number << 32 (count.py's slot layout, so its rehash serves); at most half full.
    n_slots = 1 << 12
    slots = np.full(2 * n_slots, EMPTY, dtype=np.int64)
    no_words = np.empty(0, dtype=np.int64)
    # (word, segment start or -1 at a word's start, cut point, segments, distinct ones)
    state = np.array([0, -1, 0, 0, 0], dtype=np.int64)
    while not _segments_until_full(data, offsets, joinable, segment_ids, word_first, d_start,
                                   d_end, slots, state):
        if 2 * (state[4] + 1) > n_slots:
            n_slots *= 2
            slots = _rehash_slots(slots, n_slots, no_words)
        if state[4] == d_start.shape[0]:
            d_start = grow(d_start, state[4] + 1)
            d_end = grow(d_end, state[4] + 1)
    m = state[3]
    n_distinct = state[4]
    word_first[n_words] = m
    # A view: the array is sized for a segment per byte, and only the pages written are
    # resident (a copy wrote 600 MB more of fresh memory on 1.2 GB of Linux sources).
    return (segment_ids[:m], word_first, d_start[:n_distinct].copy(),
            d_end[:n_distinct].copy())
