"""Word counting kernels: pre-token byte ranges -> a growing table of unique words.

The corpus arrives in batches (a chunk of a text file, a Parquet row group, ...). With a
named pattern, ``count_text_batch`` scans and counts in one pass: the batch is cut into
``n_blocks`` byte ranges (at documents or safe points inside them), each scanned a chunk at
a time and counted into a private table. With any other pattern the batch arrives already
cut into pieces (``piece_offsets``) and ``count_batch`` counts ``n_blocks`` contiguous
ranges of pieces into private tables. Either way the private tables (one per block, no
sharing) are then merged serially, in block order, into the global table (with a named
pattern, after ``look_up_blocks`` has found the words the table already holds, in
parallel: the serial merge then adds their counts and probes only the new words). Counts
are sums and first occurrences are minima, so the result does not depend on the number of
blocks or threads.

The global table keeps each unique word's bytes in a growable byte store (the batch
buffer is transient), its count, and the global index of its first occurrence (for the
``first`` tie rule). All arrays are passed in and returned, grown when needed.
"""

import numpy as np
from numba import njit, prange

from .hashing import EMPTY, grow, hash_slot, load8, prefetch
from .scan import SCAN_SLACK, _scan_document, _window_buffers, check_scanner_tables
#: kernel cache stamp: 28cac721296f8d926893d0b4549165da6fb5ee30fe170eaa9c5d596b5e8c5aec


@njit(cache=True, nogil=True, inline="always")
def _same(a, a0, b, b0, n):
    for k in range(n):
        if a[a0 + k] != b[b0 + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _count_block(data, piece_offsets, p0, p1, keys, u_piece, u_count, u_key):
    """Count pieces ``p0 .. p1-1`` into a private table; returns the number of unique pieces.

    ``keys`` (int64[cap], EMPTY-filled) maps hash slots to local unique indices; for each
    unique piece ``u_piece`` holds the index of its first occurrence, ``u_count`` its count
    and ``u_key`` its ``_piece_key``.
    """
    mask = keys.shape[0] - 1
    n_unique = 0
    for p in range(p0, p1):
        s = piece_offsets[p]
        e = piece_offsets[p + 1]
        if e <= s:
            continue
        key = _piece_key(data, s, e)
        i = _key_slot(key) & mask
        while True:
            u = keys[i]
            if u == EMPTY:
                keys[i] = n_unique
                u_piece[n_unique] = p
                u_count[n_unique] = 1
                u_key[n_unique] = key
                n_unique += 1
                break
            q = u_piece[u]
            if u_key[u] == key and (key < LONG_KEY or (
                    piece_offsets[q + 1] - piece_offsets[q] == e - s
                    and _same(data, piece_offsets[q], data, s, e - s))):
                u_count[u] += 1
                break
            i = (i + 1) & mask
    return n_unique


@njit(cache=True, nogil=True, parallel=True)
def count_batch(data, piece_offsets, n_blocks, first_index, g_keys, g_store, g_store_len,
                g_off, g_count, g_first, g_wkey, g_n):
    """Add one batch of pieces to the global word table.

    Parameters
    ----------
    data : uint8[n_bytes]
        The batch's UTF-8 bytes.
    piece_offsets : int64[n_pieces + 1]
        Piece boundaries in ``data`` (empty pieces are ignored).
    n_blocks : int
        Number of contiguous piece ranges counted in parallel.
    first_index : int
        Global index of this batch's first piece (pieces of earlier batches come first).
    g_keys : int64[2 * cap]
        Global hash slots, a word's piece key (EMPTY when free) beside its index; ``cap``
        a power of two.
    g_store : uint8[m]
        Bytes of the unique words, concatenated (``g_store_len`` bytes used).
    g_store_len : int
        Bytes used in ``g_store``.
    g_off : int64[k + 1]
        ``g_off[w] .. g_off[w+1]``: word w's bytes in ``g_store`` (``g_n + 1`` entries used).
    g_count : int64[k]
        Occurrences of each word.
    g_first : int64[k]
        Global piece index of each word's first occurrence.
    g_wkey : int64[k]
        The piece key (``_piece_key``) of each word (the slots are rebuilt from it).
    g_n : int
        Number of words in the table.

    Returns
    -------
    tuple
        The (possibly reallocated) ``g_keys, g_store, g_store_len, g_off, g_count, g_first,
        g_wkey, g_n``.
    """
    n_blocks, block_start, u_base, u_piece, u_count, u_key, n_unique = _blocks(piece_offsets,
                                                                              n_blocks)
    for b in prange(n_blocks):
        _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_key, n_unique)
    return _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_key,
                         n_unique, first_index, g_keys, g_store, g_store_len, g_off, g_count,
                         g_first, g_wkey, g_n)


@njit(cache=True, nogil=True)
def count_batch_serial(data, piece_offsets, n_blocks, first_index, g_keys, g_store, g_store_len,
                       g_off, g_count, g_first, g_wkey, g_n):
    """``count_batch`` on the calling thread only (no thread pool is touched).

    Same parameters and results. Used where Numba's thread pool cannot be trusted: in a
    process forked from one whose pool had started (see ``parallel.py``).
    """
    n_blocks, block_start, u_base, u_piece, u_count, u_key, n_unique = _blocks(piece_offsets,
                                                                              n_blocks)
    for b in range(n_blocks):
        _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_key, n_unique)
    return _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_key,
                         n_unique, first_index, g_keys, g_store, g_store_len, g_off, g_count,
                         g_first, g_wkey, g_n)


@njit(cache=True, nogil=True)
def _blocks(piece_offsets, n_blocks):
    """Block boundaries and the per-block private arrays of ``count_batch``."""
    n_pieces = piece_offsets.shape[0] - 1
    n_blocks = max(1, min(n_blocks, n_pieces))
    # Per-block private tables, sized for the block's pieces (load factor <= 1/2).
    block_start = np.empty(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks + 1):
        block_start[b] = b * n_pieces // n_blocks
    u_base = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks):
        u_base[b + 1] = u_base[b] + (block_start[b + 1] - block_start[b])
    u_piece = np.empty(max(1, n_pieces), dtype=np.int64)
    u_count = np.empty(max(1, n_pieces), dtype=np.int64)
    u_key = np.empty(max(1, n_pieces), dtype=np.int64)
    n_unique = np.zeros(n_blocks, dtype=np.int64)
    return n_blocks, block_start, u_base, u_piece, u_count, u_key, n_unique


@njit(cache=True, nogil=True)
def _count_one(data, piece_offsets, b, block_start, u_base, u_piece, u_count, u_key, n_unique):
    """Count block ``b`` into its own slices of the private arrays (no sharing)."""
    p0 = block_start[b]
    p1 = block_start[b + 1]
    cap = 16
    while cap < 2 * (p1 - p0):
        cap *= 2
    keys = np.full(cap, EMPTY, dtype=np.int64)
    lo = u_base[b]
    hi = u_base[b + 1]
    n_unique[b] = _count_block(data, piece_offsets, p0, p1, keys, u_piece[lo:hi],
                               u_count[lo:hi], u_key[lo:hi])


@njit(cache=True, nogil=True)
def _merge_blocks(data, piece_offsets, n_blocks, u_base, u_piece, u_count, u_key, n_unique,
                  first_index, g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n):
    """Serial merge in block order: a word's first occurrence is in the earliest block."""
    unlimited = np.array([-1, 0, 0], dtype=np.int64)  # count_batch's caller bounds it
    for b in range(n_blocks):
        lo = u_base[b]
        for j in range(n_unique[b]):
            p = u_piece[lo + j]
            (g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n) = _add_word(
                data, piece_offsets[p], piece_offsets[p + 1], u_key[lo + j], u_count[lo + j],
                first_index + p, g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey,
                g_n, unlimited)
    return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n


# ---------------------------------------------------------------------------------------
# Scanning and counting in one pass (named patterns): no piece array for the batch.
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _safe_cut(data, lo, hi):
    """The first ``i`` in ``[lo, hi)`` just after a newline that an ASCII graphic character
    precedes and an ASCII graphic character other than ``/`` follows, or -1.

    No piece of the named patterns spans such a point (``io/text_files.py`` says why; this
    is the ASCII part of its ``safe_cut`` rule), nor of SuperBPE's stage-2 pattern (its
    pieces hold a newline only in a run of them or at the end of a punctuation run, whose
    ``[\\r\\n/]*`` tail stops at a graphic character other than ``/``), so the text on
    either side can be scanned as two documents with the same pieces. ``lo - 2`` must lie
    in the same document.
    """
    for i in range(lo, hi):
        if data[i - 1] == 10:
            a = data[i - 2]
            c = data[i]
            if 0x21 <= a <= 0x7E and 0x21 <= c <= 0x7E and c != 0x2F:
                return i
    return -1


@njit(cache=True, nogil=True)
def _plan_blocks(data, doc_offsets, n_blocks):
    """Cut a batch into ``n_blocks`` byte ranges of about equal size, at document
    boundaries or safe cuts inside documents; ``(bounds int64[n_blocks + 1], first_doc
    int64[n_blocks])``, ``first_doc[b]`` the first document that block ``b`` touches.

    A cut is looked for at most one block's size past the ideal point; where a document
    has none there, the block ends with the document (or is empty), so that a text with
    no newline costs one search, not one per block.
    """
    n_docs = doc_offsets.shape[0] - 1
    start = doc_offsets[0]
    end = doc_offsets[n_docs]
    total = end - start
    step = max(1, total // n_blocks)
    bounds = np.empty(n_blocks + 1, dtype=np.int64)
    first_doc = np.zeros(n_blocks, dtype=np.int64)
    bounds[0] = start
    bounds[n_blocks] = end
    d = 0
    for b in range(1, n_blocks):
        x = max(start + b * total // n_blocks, bounds[b - 1])
        while d < n_docs and doc_offsets[d + 1] <= x:
            d += 1
        if d == n_docs or x <= doc_offsets[d]:
            bounds[b] = x
            continue
        ds = doc_offsets[d]
        de = doc_offsets[d + 1]
        cut = _safe_cut(data, max(x, ds + 2), min(de, x + step))
        if cut >= 0:
            bounds[b] = cut
        elif de - x <= step:
            bounds[b] = de
        else:
            bounds[b] = bounds[b - 1]
    d = 0
    for b in range(n_blocks):
        while d < n_docs and doc_offsets[d + 1] <= bounds[b]:
            d += 1
        first_doc[b] = d
    return bounds, first_doc


#: Piece keys of the private tables of ``_count_range``: a piece of at most 7 bytes is its
#: bytes (little-endian) with its length in bits 56-58; a longer one is LONG_KEY | its
#: length (capped at 255) << 48 | 48 bits mixed from its first and last 8 bytes, and is
#: compared byte by byte on a match.
LONG_KEY = np.int64(1) << 62
#: Slot values are ``(word << 32) | count``: a block's count stays below 2**32 because the
#: caller keeps blocks under 2**31 bytes.
COUNT_MASK = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _piece_key(data, s, e):
    """The private-table key of the piece ``data[s:e]`` (see LONG_KEY), without a loop
    over its bytes: piece lengths vary too much for a loop's exit to be predicted."""
    n = e - s
    if n >= 8:
        # First and last 8 bytes and the length: words that share all three are compared
        # byte by byte on a match.
        x = np.uint64(load8(data, s))
        y = np.uint64(load8(data, e - 8))
        f = x ^ ((y << np.uint64(13)) | (y >> np.uint64(51)))
        f ^= f >> np.uint64(40)
        return LONG_KEY | (np.int64(min(n, 255)) << 48) | (np.int64(f) & 0xFFFFFFFFFFFF)
    if s + 8 <= data.shape[0]:
        low = (np.int64(1) << (8 * n)) - 1
        return (load8(data, s) & low) | (np.int64(n) << 56)
    key = np.int64(n) << 56  # the last bytes of the batch: the same key, a byte at a time
    for k in range(n):
        key |= np.int64(data[s + k]) << (8 * k)
    return key


@njit(cache=True, nogil=True, inline="always")
def _word_like(data, s, e):
    """Whether the piece ``data[s:e]`` may be a ``boundless.BOUNDLESS_WORD`` (`` ?\\p{L}+``):
    it starts with an ASCII letter or a UTF-8 lead byte, or with a space and one of those
    (a cheap superset: the look-up of its word decides). Written without branches (a
    lone space reads itself again: no letter)."""
    b0 = np.int64(data[s])
    b = np.int64(data[s + ((b0 == 0x20) & (e - s >= 2))])
    c = b | 0x20  # ASCII letters folded to lower case
    return (b >= 0xC0) | ((c >= 0x61) & (c <= 0x7A))


@njit(cache=True, nogil=True, inline="always")
def _key_slot(key):
    """Slot hash of a private-table key (products stay below 2**63: no overflow)."""
    return hash_slot((key & 0xFFFFFFFFFFFF) ^ ((key >> 48) * 0x9E37))


@njit(cache=True, nogil=True, inline="always")
def _matches(key, store, off, w, data, s, n):
    """Whether word ``w`` of a table (its bytes ``store[off[w]:off[w + 1]]``), whose key is
    ``key``, is ``data[s:s + n]``: a short piece's key is its bytes, a long one's bytes are
    compared (see LONG_KEY)."""
    return key < LONG_KEY or (off[w + 1] - off[w] == n and _same(store, off[w], data, s, n))


@njit(cache=True, nogil=True, inline="always")
def _find_word(table, mask, key, store, off, data, s, n):
    """The word of ``data[s:s + n]`` (key ``key``) in a table of ``(key, word)`` slot pairs
    (``table[2 i]``, ``table[2 i + 1]``; ``mask``: slots - 1) whose words' bytes are
    ``store``/``off``, or -1."""
    i = _key_slot(key) & mask
    while True:
        k = table[2 * i]
        if k == EMPTY:
            return -1
        if k == key:
            w = table[2 * i + 1]
            if _matches(key, store, off, w, data, s, n):
                return w
        i = (i + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _same_long(data, a, b, n):
    """Whether ``data[a:a+n]`` and ``data[b:b+n]`` are equal, 8 bytes at a time (n >= 8).

    Inlined, as every helper called per piece: a call that takes an array changes the
    array's reference count, an atomic write to a cache line that all the threads share,
    which made the parallel kernel no faster than one thread."""
    j = 0
    while j + 8 < n:
        if load8(data, a + j) != load8(data, b + j):
            return False
        j += 8
    return load8(data, a + n - 8) == load8(data, b + n - 8)


@njit(cache=True, nogil=True, inline="always")
def _add_word(data, s, e, key, count, first, g_keys, g_store, g_store_len, g_off, g_count,
              g_first, g_wkey, g_n, budget):
    """Add ``count`` occurrences of the word ``data[s:e]`` (piece key ``key``, first seen at
    piece ``first``) to the global table; returns its (possibly grown) arrays.

    The global slots hold a word's key beside its index (``g_keys[2 i]``, ``g_keys[2 i +
    1]``): a short word is found with one cache line, without reading the store.
    ``budget`` (int64[3]): the bytes the table may allocate (-1: no limit), the bytes it
    has allocated, and, set when a growth would pass the limit, the bytes that growth
    needed (nothing is added then: the caller stops and reports it).
    """
    n_slots = g_keys.shape[0] // 2
    n = e - s
    if budget[0] >= 0:  # the growths this word could cause (as if it were new)
        need = 16 * 2 * n_slots if 2 * (g_n + 1) > n_slots else 0
        if g_store_len + n > g_store.shape[0]:
            need += max(g_store_len + n, 2 * g_store.shape[0])
        if g_n + 2 > g_off.shape[0]:
            need += 8 * max(g_n + 2, 2 * g_off.shape[0])
        if g_n + 1 > g_count.shape[0]:
            need += 3 * 8 * max(g_n + 1, 2 * g_count.shape[0])
        if budget[1] + need > budget[0]:
            budget[2] = need
            return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n
    if 2 * (g_n + 1) > n_slots:
        budget[1] += 16 * 2 * n_slots
        n_slots *= 2
        # In the old table's slot order, not the words' order: a slot's keys go to one of
        # two places in the doubled table (its slot bits gain one), so the writes stream
        # instead of missing the cache once per word.
        g_keys = _rehash_slots(g_keys, n_slots, g_wkey[:0])
    mask = n_slots - 1
    i = _key_slot(key) & mask
    while True:
        k = g_keys[2 * i]
        if k == key:
            w = g_keys[2 * i + 1]
            if _matches(key, g_store, g_off, w, data, s, n):
                g_count[w] += count
                return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n
        elif k == EMPTY:
            g_keys[2 * i] = key
            g_keys[2 * i + 1] = g_n
            # grow() only when full: a call per array and word cost more than the rest.
            if g_store_len + n > g_store.shape[0]:
                budget[1] += max(g_store_len + n, 2 * g_store.shape[0])
                g_store = grow(g_store, g_store_len + n)
            for k2 in range(n):
                g_store[g_store_len + k2] = data[s + k2]
            if g_n + 2 > g_off.shape[0]:
                budget[1] += 8 * max(g_n + 2, 2 * g_off.shape[0])
                g_off = grow(g_off, g_n + 2)
            if g_n + 1 > g_count.shape[0]:
                budget[1] += 3 * 8 * max(g_n + 1, 2 * g_count.shape[0])
                g_count = grow(g_count, g_n + 1)
            if g_n + 1 > g_first.shape[0]:
                g_first = grow(g_first, g_n + 1)
            if g_n + 1 > g_wkey.shape[0]:
                g_wkey = grow(g_wkey, g_n + 1)
            g_off[g_n] = g_store_len
            g_store_len += n
            g_off[g_n + 1] = g_store_len
            g_count[g_n] = count
            g_first[g_n] = first
            g_wkey[g_n] = key
            return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n + 1
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _count_range(data, doc_offsets, d, pos, hi, pattern_id, stage1, stage2, tables,
                 window_bytes, stream_bytes, chunk_bytes, start_slots, u_start, u_end, u_count,
                 u_first, u_key, runs, n_run):
    """Scan the bytes ``pos .. hi`` (documents from ``d`` on, each cut to the range) and
    count their pieces into a private table, until it holds ``u_start.shape[0]`` words.

    The pieces of ``chunk_bytes`` of text at a time are scanned into a small buffer and
    counted at once, while they are in cache. The table's slots hold a piece key and
    ``(word << 32) | count`` side by side (``slots[2 i]``, ``slots[2 i + 1]``), so a piece
    seen before costs one cache line. For each unique piece ``u_start``/``u_end`` hold its
    bytes in ``data``, ``u_count`` its count, ``u_first`` the ordinal of its first
    occurrence among the pieces counted by this call, ``u_key`` its ``_piece_key``. The
    slots start at ``start_slots`` (a power of two >= 2) and double at half full.

    ``runs`` (int32, or None: not kept) receives, from ``runs[n_run]`` on, the word-like
    pieces (``_word_like``) in order as their words' private indices (``u``), each run of
    them closed by a -1 before the next other piece and at each document's end
    (BoundlessBPE's supermerges join neighbours of those; ``word_runs``). At most two
    entries a piece: a -1 follows a word's entry. A resumed call (the table was full)
    reads whether a run is open from the last entry. (``runs is None`` is decided when
    Numba compiles: classic counting's code has no trace of the runs, which cost it 4%.)

    Returns
    -------
    tuple
        ``(n_unique, n_pieces, d, pos, n_run)``: ``pos == hi`` when the range is done, else
        the start of the first piece not counted (the table was full; pieces resume there);
        ``n_run``: the entries in ``runs`` now.
    """
    # A run is open when the last entry is a word's (a resumed round continues it).
    run_open = False
    if runs is not None:
        run_open = n_run > 0 and runs[n_run - 1] >= 0
    cap = u_start.shape[0]
    n_docs = doc_offsets.shape[0] - 1
    window = window_bytes
    words, char_offsets = _window_buffers(pattern_id, window)
    pieces = np.empty(chunk_bytes + window + SCAN_SLACK, dtype=np.int64)
    n_slots = start_slots
    slots = np.full(2 * n_slots, EMPTY, dtype=np.int64)
    u_slot = np.empty(cap, dtype=np.int64)  # where each word's count is (u_count at the end)
    mask = n_slots - 1
    n_unique = 0
    n_pieces = 0
    while d < n_docs and doc_offsets[d] < hi:
        seg_end = min(doc_offsets[d + 1], hi)
        pos = max(pos, doc_offsets[d])
        while pos < seg_end:
            pieces[0] = pos
            next_pos, n, pieces, window, words, char_offsets = _scan_document(
                data, pos, seg_end, pos + chunk_bytes, pattern_id, stage1, stage2,
                tables, window, stream_bytes, words, char_offsets, pieces, 0)
            for k in range(n):
                s = pieces[k]
                e = pieces[k + 1]
                key = _piece_key(data, s, e)
                h = _key_slot(key)
                i = h & mask
                while True:
                    sk = slots[2 * i]
                    if sk == key:
                        if key < LONG_KEY:
                            slots[2 * i + 1] += 1
                            break
                        u = slots[2 * i + 1] >> 32
                        if u_end[u] - u_start[u] == e - s and _same_long(data, u_start[u],
                                                                         s, e - s):
                            slots[2 * i + 1] += 1
                            break
                    elif sk == EMPTY:
                        if n_unique == cap:
                            _counts_out(slots, u_slot, u_count, n_unique)
                            return n_unique, n_pieces, d, s, n_run
                        if 2 * (n_unique + 1) > n_slots:
                            slots, n_slots, i = _doubled_slots(slots, n_slots, u_slot, h)
                            mask = n_slots - 1
                        slots[2 * i] = key
                        slots[2 * i + 1] = (np.int64(n_unique) << 32) | 1
                        u_slot[n_unique] = i
                        u_start[n_unique] = s
                        u_end[n_unique] = e
                        u_first[n_unique] = n_pieces
                        u_key[n_unique] = key
                        n_unique += 1
                        break
                    i = (i + 1) & mask
                n_pieces += 1
                if runs is not None:
                    # Without branches: whether a piece is word-like is a coin toss to the
                    # branch predictor (branches cost 0.1 s of two threads on 100 MB). A
                    # word's entry, or a -1 after an open run; the slot is written anyway.
                    word = _word_like(data, s, e)
                    runs[n_run] = (slots[2 * i + 1] >> 32) if word else -1  # (its word)
                    n_run += word | run_open
                    run_open = word
            pos = next_pos
        if runs is not None:
            if run_open:  # no run spans documents
                runs[n_run] = -1
                n_run += 1
                run_open = False
        d += 1
    _counts_out(slots, u_slot, u_count, n_unique)
    return n_unique, n_pieces, d, hi, n_run


@njit(cache=True, nogil=True)
def _doubled_slots(slots, n_slots, u_slot, h):
    """``(slots, n_slots, i)``: the table doubled (``_rehash_slots``, ``u_slot`` following
    the words) and ``i``, the free slot where a new key of slot hash ``h`` now goes."""
    n_slots *= 2
    slots = _rehash_slots(slots, n_slots, u_slot)
    mask = n_slots - 1
    i = h & mask
    while slots[2 * i] != EMPTY:
        i = (i + 1) & mask
    return slots, n_slots, i


@njit(cache=True, nogil=True)
def _rehash_slots(slots, n_slots, u_slot):
    """``slots`` moved into a table of ``n_slots`` slots; ``u_slot`` follows the words
    (slot values ``(word << 32) | count``; an empty ``u_slot``: nobody follows)."""
    out = np.full(2 * n_slots, EMPTY, dtype=np.int64)
    mask = n_slots - 1
    for j in range(slots.shape[0] // 2):
        key = slots[2 * j]
        if key == EMPTY:
            continue
        i = _key_slot(key) & mask
        while out[2 * i] != EMPTY:
            i = (i + 1) & mask
        out[2 * i] = key
        out[2 * i + 1] = slots[2 * j + 1]
        if u_slot.shape[0] > 0:
            u_slot[slots[2 * j + 1] >> 32] = i
    return out


@njit(cache=True, nogil=True)
def _counts_out(slots, u_slot, u_count, n_unique):
    for u in range(n_unique):
        u_count[u] = slots[2 * u_slot[u] + 1] & COUNT_MASK


@njit(cache=True, nogil=True)
def _merge_range(data, n_unique, u_start, u_end, u_count, u_first, u_key, known, first_index,
                 g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n, budget,
                 g_of):
    """Add a private table of ``_count_range`` to the global table (words new to it get
    first occurrence ``first_index + u_first``); stops where ``budget`` refuses a growth.

    ``known`` (int64[n_unique], or empty when not looked up): each word's index in the
    global table as ``look_up_blocks`` found it, or -1; a known word is a count added,
    without a probe. The words go through ``_add_words`` until one needs a growth, which
    ``_add_word`` makes here: a loop that reassigned the table's arrays at every word would
    pay an atomic reference count per array and word. ``g_of`` (int32[>= n_unique], or
    empty): receives each word's index in the global table."""
    state = np.array([g_store_len, g_n], dtype=np.int64)
    j = 0
    while True:
        j = _add_words(data, j, n_unique, u_start, u_end, u_count, u_first, u_key, known,
                       first_index, g_keys, g_store, g_off, g_count, g_first, g_wkey, state,
                       g_of)
        g_store_len, g_n = state[0], state[1]
        if j == n_unique:
            break
        (g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n) = _add_word(
            data, u_start[j], u_end[j], u_key[j], u_count[j], first_index + u_first[j], g_keys,
            g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n, budget)
        if budget[2] > 0:
            break
        if g_of.shape[0] > 0:  # (a growth: rare, so found again rather than returned)
            s = u_start[j]
            g_of[j] = _find_word(g_keys, g_keys.shape[0] // 2 - 1, u_key[j], g_store, g_off,
                                 data, s, u_end[j] - s)
        state[0], state[1] = g_store_len, g_n
        j += 1
    return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n


@njit(cache=True, nogil=True, _nrt=False)
def _add_words(data, j, n_unique, u_start, u_end, u_count, u_first, u_key, known, first_index,
               g_keys, g_store, g_off, g_count, g_first, g_wkey, state, g_of):
    """``_add_word`` for words ``j ..`` of a private table while the global table has room
    (``state``: its bytes used and words, updated); returns the first word that needs a
    growth (or ``n_unique``). Never allocates (compiled without reference counting)."""
    looked_up = known.shape[0] > 0
    keep = g_of.shape[0] > 0
    n_slots = g_keys.shape[0] // 2
    mask = n_slots - 1
    g_store_len = state[0]
    g_n = state[1]
    while j < n_unique:
        # The global table outgrows the caches and a row's probe does not depend on the
        # rows before it: request the slot (or the count) of the row LOOKUP_AHEAD on now.
        ahead = j + LOOKUP_AHEAD
        if ahead < n_unique:
            if looked_up and known[ahead] >= 0:
                prefetch(g_count, known[ahead])
            else:
                prefetch(g_keys, 2 * (_key_slot(u_key[ahead]) & mask))
        if looked_up and known[j] >= 0:
            g_count[known[j]] += u_count[j]
            if keep:
                g_of[j] = known[j]
            j += 1
            continue
        key = u_key[j]
        s = u_start[j]
        n = u_end[j] - s
        if (2 * (g_n + 1) > n_slots or g_store_len + n > g_store.shape[0]
                or g_n + 2 > g_off.shape[0] or g_n + 1 > g_count.shape[0]
                or g_n + 1 > g_first.shape[0] or g_n + 1 > g_wkey.shape[0]):
            break  # a growth, if the word is new
        i = _key_slot(key) & mask
        while True:
            k = g_keys[2 * i]
            if k == key:
                w = g_keys[2 * i + 1]
                if _matches(key, g_store, g_off, w, data, s, n):
                    g_count[w] += u_count[j]
                    if keep:
                        g_of[j] = w
                    break
            elif k == EMPTY:
                if keep:
                    g_of[j] = g_n
                g_keys[2 * i] = key
                g_keys[2 * i + 1] = g_n
                for k2 in range(n):
                    g_store[g_store_len + k2] = data[s + k2]
                g_off[g_n] = g_store_len
                g_store_len += n
                g_off[g_n + 1] = g_store_len
                g_count[g_n] = u_count[j]
                g_first[g_n] = first_index + u_first[j]
                g_wkey[g_n] = key
                g_n += 1
                break
            i = (i + 1) & mask
        j += 1
    state[0] = g_store_len
    state[1] = g_n
    return j


@njit(cache=True, nogil=True)
def _check_start_slots(start_slots):
    """A private table's first slot count must be a power of two >= 2 (its mask)."""
    if start_slots < 2 or (start_slots & (start_slots - 1)) != 0:
        raise ValueError("start_slots must be a power of two >= 2")


@njit(cache=True, nogil=True, parallel=True)
def count_text_blocks(data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
                      stream_bytes, chunk_bytes, start_slots, n_blocks, block_words, runs):
    """Pre-tokenize a batch with a named pattern and count its pieces, in one pass: the
    batch's blocks are scanned and counted in parallel into private tables, which
    ``merge_text_blocks`` then adds to the global table (the caller may check its memory
    budget in between, knowing how many words the tables hold).

    Parameters
    ----------
    data : uint8[n_bytes]
        The batch's UTF-8 bytes.
    doc_offsets : int64[n_docs + 1]
        Document boundaries in ``data`` (validated, non-decreasing).
    pattern_id, stage1, stage2, tables, window_bytes, stream_bytes
        As ``kernels.scan.scan_batch``.
    chunk_bytes : int
        Bytes of text scanned between counting passes (``>= 1``).
    start_slots : int
        Hash slots a block's private table starts with (a power of two, ``>= 2``; it
        doubles at half full): ``WordCounter`` passes about twice the words it expects a
        block to hold, from the batches before, so that the table seldom doubles.
    n_blocks : int
        Byte ranges counted in parallel (``>= 1``; cut by ``_plan_blocks``; each under
        2**31 bytes, so that a block's counts fit their 32-bit field).
    block_words : int
        Capacity of a block's private table (``>= 1``). A block with more unique words
        stops there; ``merge_text_blocks`` counts the rest, a table at a time.
    runs : int32[>= 2 * n_bytes], or None
        Where each block writes its runs of word-like pieces (``_count_range``), block
        ``b``'s at ``2 * (bounds[b] - doc_offsets[0])``, as private indices of its table
        (``joined_runs`` makes them global ones); None: none are kept. The caller's
        buffer, reused from batch to batch (fresh pages for every batch cost about 0.05 s
        of two threads on 100 MB: the page faults of the entries written).

    Returns
    -------
    bounds : int64[n_blocks + 1]
        The blocks' byte ranges.
    done : int64[n_blocks, 6]
        Per block: unique words in its table, pieces counted, the document and byte where
        it stopped (``done[b, 3] == bounds[b + 1]`` when it is complete), the entries of
        its runs, and 0 (``merge_text_blocks`` sets it when they are global indices).
    u_start, u_end, u_count, u_first, u_key : int64[n_blocks * block_words]
        The private tables, block ``b``'s at ``b * block_words`` (see ``_count_range``).
    """
    bounds, first_doc = _plan_blocks(data, doc_offsets, n_blocks)
    check_scanner_tables(tables)
    _check_start_slots(start_slots)
    u_start, u_end, u_count, u_first, u_key, done = _private_tables(n_blocks, block_words)
    _check_runs(runs, doc_offsets)
    for b in prange(n_blocks):
        _count_text_one(data, doc_offsets, b, bounds, first_doc, pattern_id, stage1, stage2,
                        tables, window_bytes, stream_bytes, chunk_bytes, start_slots, block_words,
                        u_start, u_end, u_count, u_first, u_key, done, runs)
    return bounds, done, u_start, u_end, u_count, u_first, u_key


@njit(cache=True, nogil=True)
def count_text_blocks_serial(data, doc_offsets, pattern_id, stage1, stage2, tables,
                             window_bytes, stream_bytes, chunk_bytes, start_slots, n_blocks,
                             block_words, runs):
    """``count_text_blocks`` on the calling thread only (a forked child, see
    ``parallel.py``). Same parameters and results."""
    bounds, first_doc = _plan_blocks(data, doc_offsets, n_blocks)
    check_scanner_tables(tables)
    _check_start_slots(start_slots)
    u_start, u_end, u_count, u_first, u_key, done = _private_tables(n_blocks, block_words)
    _check_runs(runs, doc_offsets)
    for b in range(n_blocks):
        _count_text_one(data, doc_offsets, b, bounds, first_doc, pattern_id, stage1, stage2,
                        tables, window_bytes, stream_bytes, chunk_bytes, start_slots, block_words,
                        u_start, u_end, u_count, u_first, u_key, done, runs)
    return bounds, done, u_start, u_end, u_count, u_first, u_key


@njit(cache=True, nogil=True)
def _count_text_one(data, doc_offsets, b, bounds, first_doc, pattern_id, stage1, stage2,
                    tables, window_bytes, stream_bytes, chunk_bytes, start_slots, block_words,
                    u_start, u_end, u_count, u_first, u_key, done, runs):
    """Count block ``b`` into its own slices of the private tables, its region of ``runs``
    and its row of ``done`` (no sharing)."""
    lo = b * block_words
    hi = lo + block_words
    done[b, 0], done[b, 1], done[b, 2], done[b, 3], done[b, 4] = _count_range(
        data, doc_offsets, first_doc[b], bounds[b], bounds[b + 1], pattern_id, stage1, stage2,
        tables, window_bytes, stream_bytes, chunk_bytes, start_slots, u_start[lo:hi], u_end[lo:hi],
        u_count[lo:hi], u_first[lo:hi], u_key[lo:hi], _runs_region(runs, bounds, b, doc_offsets[0]),
        0)


@njit(cache=True, nogil=True)
def _private_tables(n_blocks, block_words):
    """The blocks' private table arrays (pages a block never fills are never touched)."""
    size = n_blocks * block_words
    return (np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64),
            np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64),
            np.empty(size, dtype=np.int64), np.zeros((n_blocks, 6), dtype=np.int64))


@njit(cache=True, nogil=True)
def _check_runs(runs, doc_offsets):
    """``count_text_blocks``' runs need two entries a byte of the batch (a piece is a byte
    or more, and gives at most two), or are None."""
    if runs is not None:
        if runs.shape[0] < 2 * (doc_offsets[doc_offsets.shape[0] - 1] - doc_offsets[0]):
            raise ValueError("runs must hold two entries per byte of the batch")


@njit(cache=True, nogil=True)
def _runs_region(runs, bounds, b, start):
    """Block ``b``'s region of ``runs`` (None when no runs are kept)."""
    if runs is None:
        return runs
    return runs[2 * (bounds[b] - start):2 * (bounds[b + 1] - start)]


#: Words ahead of the one looked up whose global hash slot ``_look_up_range`` prefetches:
#: the global table outgrows the caches, and its probes are independent of each other.
LOOKUP_AHEAD = 8


@njit(cache=True, nogil=True, parallel=True)
def look_up_blocks(data, done, block_words, u_start, u_end, u_key, g_keys, g_store, g_off):
    """Find the words of ``count_text_blocks``' private tables in the global table, the
    blocks in parallel (the table is only read): the probing half of the merge, which
    ``merge_text_blocks`` then finishes serially with a count added per known word and
    only the new words probed again (in block order, for their first occurrences).

    Parameters
    ----------
    data : uint8[n_bytes]
        The batch's bytes, as given to ``count_text_blocks``.
    done : int64[n_blocks, 4]
        Its per-block results (``done[b, 0]`` words in block ``b``'s table).
    block_words : int
        Capacity of a block's table, as given to it.
    u_start, u_end, u_key : int64[n_blocks * block_words]
        Its private tables.
    g_keys, g_store, g_off
        The global table (``count_batch``), read only.

    Returns
    -------
    known : int64[n_blocks * block_words]
        For each word of a block's table, its index in the global table, or -1 (new);
        entries past a block's ``done[b, 0]`` are not written.
    """
    n_blocks = done.shape[0]
    known = np.empty(n_blocks * block_words, dtype=np.int64)
    for b in prange(n_blocks):
        _look_up_one(data, done, b, block_words, u_start, u_end, u_key, g_keys, g_store,
                     g_off, known)
    return known


@njit(cache=True, nogil=True)
def look_up_blocks_serial(data, done, block_words, u_start, u_end, u_key, g_keys, g_store,
                          g_off):
    """``look_up_blocks`` on the calling thread only (a forked child, see ``parallel.py``).
    Same parameters and result."""
    n_blocks = done.shape[0]
    known = np.empty(n_blocks * block_words, dtype=np.int64)
    for b in range(n_blocks):
        _look_up_one(data, done, b, block_words, u_start, u_end, u_key, g_keys, g_store,
                     g_off, known)
    return known


@njit(cache=True, nogil=True)
def _look_up_one(data, done, b, block_words, u_start, u_end, u_key, g_keys, g_store, g_off,
                 known):
    """Look up block ``b``'s words into its own slice of ``known`` (no sharing)."""
    lo = b * block_words
    hi = lo + block_words
    _look_up_range(data, done[b, 0], u_start[lo:hi], u_end[lo:hi], u_key[lo:hi], g_keys,
                   g_store, g_off, known[lo:hi])


@njit(cache=True, nogil=True)
def _look_up_range(data, n_unique, u_start, u_end, u_key, g_keys, g_store, g_off, known):
    """``known[j]``: the global index of word ``j`` of a private table, or -1."""
    mask = g_keys.shape[0] // 2 - 1
    for j in range(min(n_unique, LOOKUP_AHEAD)):
        prefetch(g_keys, 2 * (_key_slot(u_key[j]) & mask))
    for j in range(n_unique):
        if j + LOOKUP_AHEAD < n_unique:
            prefetch(g_keys, 2 * (_key_slot(u_key[j + LOOKUP_AHEAD]) & mask))
        key = u_key[j]
        s = u_start[j]
        known[j] = _find_word(g_keys, mask, key, g_store, g_off, data, s, u_end[j] - s)


@njit(cache=True, nogil=True)
def merge_text_blocks(data, doc_offsets, bounds, done, pattern_id, stage1, stage2, tables,
                      window_bytes, stream_bytes, chunk_bytes, start_slots, block_words, runs,
                      g_of, u_start, u_end, u_count, u_first, u_key, known, first_index, g_keys,
                      g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n, budget):
    """Add the private tables of ``count_text_blocks`` to the global table, in block order
    (a word's first occurrence is in the earliest block that has it); a block whose table
    filled up counts the rest of its range here, a table at a time, before the next block
    is merged.

    Parameters
    ----------
    data ... start_slots
        As given to ``count_text_blocks``.
    bounds, done, runs, u_start, u_end, u_count, u_first, u_key
        Its results (``block_words`` as given to it).
    g_of : int32[n_blocks * block_words] (or int32[0]: no runs kept, ``runs`` None)
        Receives the global index of each word of the blocks' tables (block ``b``'s at
        ``b * block_words``), for ``joined_runs``. A block that resumes (its table filled
        up) has its runs made global indices here, round by round, and ``done[b, 5]`` set
        (``done[b, 4]``: its entries, all rounds).
    known : int64[n_blocks * block_words] or int64[0]
        ``look_up_blocks``' result on the same tables and global table, or empty (every
        word is probed here).
    first_index, g_keys ... g_n
        As ``count_batch``.
    budget : int64[3]
        The bytes the global table may allocate (-1: no limit), the bytes allocated so far
        (0 at the call), and, on return, the bytes of a growth refused (0 if none). A refusal
        leaves the table part-merged: the caller raises (the counts are not to be used).

    Returns
    -------
    tuple
        ``count_batch``'s results, then the number of pieces counted.
    """
    check_scanner_tables(tables)
    _check_start_slots(start_slots)
    n_pieces = 0
    for b in range(done.shape[0]):
        lo = b * block_words
        hi = lo + block_words
        n_unique, n, d, pos = done[b, 0], done[b, 1], done[b, 2], done[b, 3]
        region = _runs_region(runs, bounds, b, doc_offsets[0])
        block_g_of = g_of[lo:hi] if g_of.shape[0] > 0 else g_of
        r0, r1 = 0, done[b, 4]
        first_round = True
        block_known = known[lo:hi] if known.shape[0] > 0 else known
        while True:
            (g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey,
             g_n) = _merge_range(data, n_unique, u_start[lo:hi], u_end[lo:hi],
                                 u_count[lo:hi], u_first[lo:hi], u_key[lo:hi], block_known,
                                 first_index + n_pieces, g_keys, g_store, g_store_len, g_off,
                                 g_count, g_first, g_wkey, g_n, budget, block_g_of)
            n_pieces += n
            block_known = known[:0]  # a further round's words were not looked up
            if budget[2] > 0:
                return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n, n_pieces
            if pos >= bounds[b + 1] and first_round:
                break  # one round: joined_runs makes its runs global, in parallel
            # A further round reuses the private table: this round's runs are made global
            # now (rare: a table fills up at block_words words).
            if runs is not None:  # (an argument: Numba drops the branch for None)
                _translated(region, r0, r1, block_g_of)
                done[b, 5] = 1
            if pos >= bounds[b + 1]:
                break
            first_round = False
            r0 = r1
            n_unique, n, d, pos, r1 = _count_range(
                data, doc_offsets, d, pos, bounds[b + 1], pattern_id, stage1, stage2,
                tables, window_bytes, stream_bytes, chunk_bytes, start_slots, u_start[lo:hi],
                u_end[lo:hi], u_count[lo:hi], u_first[lo:hi], u_key[lo:hi], region, r0)
        done[b, 4] = r1
    return g_keys, g_store, g_store_len, g_off, g_count, g_first, g_wkey, g_n, n_pieces


@njit(cache=True, nogil=True, parallel=True)
def joined_runs(runs, bounds, done, start, g_of, block_words):
    """The blocks' runs of word-like pieces as global word indices, end to end, only the
    runs of two or more, each followed by one -1 (a piece alone has no neighbour to join).
    Each block's runs are made global and filtered in place, the blocks in parallel, then
    put end to end.

    Parameters
    ----------
    runs : int32[2 * n_bytes]
        ``count_text_blocks``' runs (block ``b``'s ``done[b, 4]`` entries at
        ``2 * (bounds[b] - start)``; rewritten here).
    bounds : int64[n_blocks + 1], done : int64[n_blocks, 6]
        Its block bounds and per-block results, after ``merge_text_blocks``.
    start : int
        The batch's first byte (``doc_offsets[0]``).
    g_of : int32[n_blocks * block_words], block_words : int
        ``merge_text_blocks``' global index of each private word.

    Returns
    -------
    int32[n]
        Word indices, each run closed by a -1.
    """
    n_blocks = done.shape[0]
    lengths = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in prange(n_blocks):
        lengths[b + 1] = _block_runs(runs, bounds, done, start, g_of, block_words, b)
    return _copied_runs(runs, bounds, start, lengths)


@njit(cache=True, nogil=True)
def joined_runs_serial(runs, bounds, done, start, g_of, block_words):
    """``joined_runs`` on the calling thread only (a forked child, see ``parallel.py``).
    Same parameters and result."""
    n_blocks = done.shape[0]
    lengths = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks):
        lengths[b + 1] = _block_runs(runs, bounds, done, start, g_of, block_words, b)
    return _copied_runs(runs, bounds, start, lengths)


@njit(cache=True, nogil=True)
def _block_runs(runs, bounds, done, start, g_of, block_words, b):
    """Block ``b``'s runs made global (unless ``merge_text_blocks`` did) and cut to those of
    two words or more, in place at the start of its region; returns their entries."""
    at = 2 * (bounds[b] - start)
    lo = b * block_words
    translate = done[b, 5] == 0
    n = first = at  # (the open run starts at first)
    for r in range(at, at + done[b, 4]):
        w = runs[r]
        n, first = _run_entry(runs, n, first, g_of[lo + w] if translate and w >= 0 else w)
    # (A block's runs end closed, at a document's end or at a safe cut after a newline.)
    return first - at


@njit(cache=True, nogil=True, inline="always")
def _run_entry(out, n, first, v):
    """One entry of runs being written to ``out`` (``n``: their end; ``first``: where the
    open run starts): ``v >= 0`` (a word or unit) extends the open run; -1 closes it, kept
    with one -1 after it when it holds two or more, dropped when it holds one (alone, it is
    in no pair). Returns ``(n, first)``. Serves ``_block_runs`` and BoundlessBPE's
    ``units_of_runs`` and ``_units_range``."""
    if v >= 0:
        out[n] = v
        return n + 1, first
    if n - first >= 2:
        out[n] = -1
        return n + 1, n + 1
    return first, first


@njit(cache=True, nogil=True)
def _copied_runs(runs, bounds, start, lengths):
    """The blocks' filtered runs (``lengths[b + 1]`` entries at the start of block b's
    region) end to end, in a new array (``lengths`` becomes their offsets)."""
    n_blocks = lengths.shape[0] - 1
    for b in range(n_blocks):
        lengths[b + 1] += lengths[b]
    out = np.empty(lengths[n_blocks], dtype=np.int32)
    for b in range(n_blocks):
        at = 2 * (bounds[b] - start)
        out[lengths[b]:lengths[b + 1]] = runs[at:at + lengths[b + 1] - lengths[b]]
    return out


@njit(cache=True, nogil=True)
def _translated(region, r0, r1, g_of):
    """``region[r0:r1]``'s private word indices made global ones (``g_of``), in place."""
    for r in range(r0, r1):
        if region[r] >= 0:
            region[r] = g_of[region[r]]


@njit(cache=True, nogil=True, parallel=True)
def first_round_rows(done, block_words, data, u_start, u_end, u_count):
    """``block_rows``' rows when every block counted its whole range in its first round
    (``done[b, 3] == bounds[b + 1]``; SuperBPE's stage 2 of 1.2 GB: all 144 blocks): each
    block's rows copied to their place, the blocks in parallel (one thread copied 378 MB in
    14 M rows in 0.7-0.8 s). Same results as ``block_rows`` then.

    Parameters
    ----------
    done : int64[n_blocks, 4]
        ``count_text_blocks``' per-block results (``done[b, 0]`` words, ``done[b, 1]``
        pieces).
    block_words, data, u_start, u_end, u_count
        As given to and returned by ``count_text_blocks``.

    Returns
    -------
    word_bytes, offsets, counts, n_pieces
        As ``block_rows``.
    """
    n_blocks = done.shape[0]
    block_bytes = np.zeros(n_blocks, dtype=np.int64)
    for b in prange(n_blocks):
        _block_bytes(b, done, block_words, u_start, u_end, block_bytes)
    byte_at, row_at, n_pieces, word_bytes, offsets, counts = _first_round_outputs(
        done, block_bytes)
    for b in prange(n_blocks):
        _copy_block_rows(b, done, block_words, data, u_start, u_end, u_count, byte_at, row_at,
                         word_bytes, offsets, counts)
    return word_bytes, offsets, counts, n_pieces


@njit(cache=True, nogil=True)
def first_round_rows_serial(done, block_words, data, u_start, u_end, u_count):
    """``first_round_rows`` on the calling thread only (a forked child, see
    ``parallel.py``). Same parameters and results."""
    n_blocks = done.shape[0]
    block_bytes = np.zeros(n_blocks, dtype=np.int64)
    for b in range(n_blocks):
        _block_bytes(b, done, block_words, u_start, u_end, block_bytes)
    byte_at, row_at, n_pieces, word_bytes, offsets, counts = _first_round_outputs(
        done, block_bytes)
    for b in range(n_blocks):
        _copy_block_rows(b, done, block_words, data, u_start, u_end, u_count, byte_at, row_at,
                         word_bytes, offsets, counts)
    return word_bytes, offsets, counts, n_pieces


@njit(cache=True, nogil=True)
def _first_round_outputs(done, block_bytes):
    """Where each block's rows go (``byte_at``, ``row_at``: int64[n_blocks + 1]), the
    pieces counted, and the outputs (offsets' last entry set)."""
    n_blocks = done.shape[0]
    byte_at = np.zeros(n_blocks + 1, dtype=np.int64)
    row_at = np.zeros(n_blocks + 1, dtype=np.int64)
    n_pieces = 0
    for b in range(n_blocks):
        byte_at[b + 1] = byte_at[b] + block_bytes[b]
        row_at[b + 1] = row_at[b] + done[b, 0]
        n_pieces += done[b, 1]
    word_bytes = np.empty(byte_at[n_blocks], dtype=np.uint8)
    offsets = np.empty(row_at[n_blocks] + 1, dtype=np.int64)
    counts = np.empty(row_at[n_blocks], dtype=np.int64)
    offsets[row_at[n_blocks]] = byte_at[n_blocks]
    return byte_at, row_at, n_pieces, word_bytes, offsets, counts


@njit(cache=True, nogil=True)
def _block_bytes(b, done, block_words, u_start, u_end, block_bytes):
    """The bytes of block ``b``'s words, into ``block_bytes[b]`` (its own slot)."""
    total = 0
    for u in range(b * block_words, b * block_words + done[b, 0]):
        total += u_end[u] - u_start[u]
    block_bytes[b] = total


@njit(cache=True, nogil=True)
def _copy_block_rows(b, done, block_words, data, u_start, u_end, u_count, byte_at, row_at,
                     word_bytes, offsets, counts):
    """Block ``b``'s rows into its own stretch of the outputs (``byte_at[b]``,
    ``row_at[b]`` on)."""
    at = byte_at[b]
    r = row_at[b]
    for u in range(b * block_words, b * block_words + done[b, 0]):
        offsets[r] = at
        counts[r] = u_count[u]
        n = u_end[u] - u_start[u]
        word_bytes[at:at + n] = data[u_start[u]:u_end[u]]
        at += n
        r += 1


@njit(cache=True, nogil=True)
def block_rows(data, doc_offsets, bounds, done, pattern_id, stage1, stage2, tables,
               window_bytes, stream_bytes, chunk_bytes, start_slots, block_words, u_start,
               u_end, u_count, u_first, u_key):
    """The private tables of ``count_text_blocks`` as rows, end to end in block order,
    without a global table: a word counted in several blocks is a row in each. A block
    whose table filled up counts the rest of its range here, a table at a time (its rows
    follow). For consumers whose result does not change when a word's occurrences are
    split over several rows in corpus order (SuperBPE's stage 2, whose words are mostly
    unique: its global table's serial merge took 8 s of 14 on 1 GB of code).

    Parameters
    ----------
    data ... start_slots, block_words, u_start, u_end, u_count, u_first, u_key
        As given to and returned by ``count_text_blocks`` (the tables are reused for a
        block's further rounds).

    Returns
    -------
    word_bytes : uint8[total]
        The rows' words, end to end: each block's in order of first occurrence in it.
    offsets : int64[n_rows + 1]
        Row boundaries in ``word_bytes``.
    counts : int64[n_rows]
        Occurrences of each row's word in its block (or round).
    n_pieces : int
        Pieces counted.
    """
    n_blocks = done.shape[0]
    # The first round's bytes and rows of the blocks from b on (a later round of block b
    # needs room on top of what the blocks after it will write).
    rest_bytes = np.zeros(n_blocks + 1, dtype=np.int64)
    rest_rows = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks - 1, -1, -1):
        lo = b * block_words
        total = 0
        for u in range(lo, lo + done[b, 0]):
            total += u_end[u] - u_start[u]
        rest_bytes[b] = rest_bytes[b + 1] + total
        rest_rows[b] = rest_rows[b + 1] + done[b, 0]
    word_bytes = np.empty(rest_bytes[0], dtype=np.uint8)
    offsets = np.empty(rest_rows[0] + 1, dtype=np.int64)
    counts = np.empty(rest_rows[0], dtype=np.int64)
    offsets[0] = 0
    at = 0
    r = 0
    n_pieces = 0
    check_scanner_tables(tables)
    _check_start_slots(start_slots)
    for b in range(n_blocks):
        lo = b * block_words
        hi = lo + block_words
        n_unique, n, d, pos = done[b, 0], done[b, 1], done[b, 2], done[b, 3]
        while True:
            for u in range(lo, lo + n_unique):
                for k in range(u_start[u], u_end[u]):
                    word_bytes[at] = data[k]
                    at += 1
                counts[r] = u_count[u]
                r += 1
                offsets[r] = at
            n_pieces += n
            if pos >= bounds[b + 1]:
                break
            n_unique, n, d, pos, _ = _count_range(
                data, doc_offsets, d, pos, bounds[b + 1], pattern_id, stage1, stage2,
                tables, window_bytes, stream_bytes, chunk_bytes, start_slots, u_start[lo:hi],
                u_end[lo:hi], u_count[lo:hi], u_first[lo:hi], u_key[lo:hi], None, 0)
            # Room for this round's rows besides the later blocks' (rare: a table fills up
            # at ``block_words`` distinct words; capacities double, as for any table).
            more = 0
            for u in range(lo, lo + n_unique):
                more += u_end[u] - u_start[u]
            word_bytes = grow(word_bytes, at + more + rest_bytes[b + 1])
            offsets = grow(offsets, r + n_unique + rest_rows[b + 1] + 1)
            counts = grow(counts, r + n_unique + rest_rows[b + 1])
    return word_bytes[:at], offsets[:r + 1], counts[:r], n_pieces


@njit(cache=True, nogil=True)
def prune_words(word_bytes, offsets, counts, min_count):
    """The word table without the words counted fewer than ``min_count`` times, in order.

    Parameters
    ----------
    word_bytes : uint8[total]
        The words' bytes, concatenated.
    offsets : int64[n_words + 1]
        Word boundaries in ``word_bytes`` (validated, non-decreasing from 0).
    counts : int64[n_words]
        Occurrences of each word.
    min_count : int
        Words with ``counts < min_count`` are dropped.

    Returns
    -------
    tuple
        ``(word_bytes uint8[kept_total], offsets int64[n_kept + 1], counts int64[n_kept])``.
    """
    n = counts.shape[0]
    n_kept = 0
    total = 0
    for w in range(n):
        if counts[w] >= min_count:
            n_kept += 1
            total += offsets[w + 1] - offsets[w]
    out_bytes = np.empty(total, dtype=np.uint8)
    out_offsets = np.zeros(n_kept + 1, dtype=np.int64)
    out_counts = np.empty(n_kept, dtype=np.int64)
    k = 0
    at = 0
    for w in range(n):
        if counts[w] >= min_count:
            for i in range(offsets[w], offsets[w + 1]):
                out_bytes[at] = word_bytes[i]
                at += 1
            out_counts[k] = counts[w]
            k += 1
            out_offsets[k] = at
    return out_bytes, out_offsets, out_counts
