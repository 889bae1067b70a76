"""The training kernel: learn merges from a word-frequency table.

The corpus enters as the word table (CSR): ``symbols`` (int32, the base ids of every unique
word, concatenated), ``offsets`` (int64, word boundaries) and ``counts`` (int64, how often
each word occurs), words in order of first occurrence. The kernel

1. counts every adjacent pair once, weighted by word count, into an open-addressing table
   (packed 64-bit pair keys) and records, per pair, the words that contain it;
2. repeatedly takes the best pair from a lazy max-heap, rewrites only the words that
   contain it (left to right, non-overlapping, in place) and applies the +/- count deltas
   of the neighbouring pairs. The cost of a merge is proportional to the occurrences of
   the merged pair, never to the corpus.

Pair records live in one int64 matrix ``pairs[n, 8]`` (columns ``P_*``) so that growing the
store is one reallocation. The pair -> words index is a linked list of ``(word, next)``
nodes per pair; it may hold stale or repeated words, which the rewrite step skips.

Lazy heap invariant: every pair with a positive count has at least one heap entry whose
priority is >= its true priority. Counts only fall or rise through a rewrite, and every
pair touched by a rewrite is pushed again with its new priority, so a popped entry that
equals the pair's true priority is the true maximum; a stale one is re-pushed.
"""

import numpy as np
from numba import njit

from .hashing import (
    EMPTY,
    HASH_SEED,
    grow,
    hash_slot,
    hash_units,
    pair_key,
    same_units,
    table_capacity,
    table_rehash,
    table_slot,
)
#: kernel cache stamp: f33394c68d3ee70edf8da2fc67b7abfc4d9e07a07cce73cc01d96a5c6cb1b162

# Tie rules as the kernel sees them. ``hf`` is TIE_RANKS with GPT-2's byte order in
# ``base_rank``; ``ids`` is TIE_RANKS with the identity.
TIE_RANKS = 0
TIE_FIRST = 1
TIE_BYTES = 2

# Columns of the pair matrix.
P_LEFT = 0  # left id
P_RIGHT = 1  # right id
P_COUNT = 2  # weighted occurrence count
P_FIRST = 3  # (word << 32) | unit offset of the first occurrence (TIE_FIRST only)
P_DIRTY = 4  # 1 when the recorded first occurrence may have been removed
P_HEAD = 5  # first node of this pair's word list, -1 if none
P_LASTW = 6  # last word appended to the list (skips consecutive repeats)
P_TOUCH = 7  # merge step that last changed this pair (dedupes the push list)
N_PCOLS = 8

NO_FIRST = np.int64(0x7FFFFFFFFFFFFFFF)

# ``progress`` slots beyond the first three (optional: a caller may pass int64[3]).
PROG_BUDGET = 3  # bytes the kernel's own arrays may take (0: no limit); set by the caller
PROG_NEED = 4  # set when the kernel stopped for memory: the bytes it would have held
PROG_PHASE = 5  # ... and where: 1 setting up (first pair count), 2 merging
STOPPED_ASKED = 1  # progress[2] values: stopped at the caller's request
STOPPED_MEMORY = 2  # ... or because an allocation would exceed progress[PROG_BUDGET]


def word_index_rows(n_symbols, n_words, max_word_len):
    """Rows the word index can ever need: at most one node per adjacent pair of the table
    (``n_symbols - n_words``) to start with, and two per merged occurrence, of which there
    are at most ``n_symbols - n_words`` (each removes a symbol, and every word keeps one);
    plus the room one word's rewrite asks for. Pass ``train_merges`` an index of this size
    and it never grows (no copy, no old + new peak); its pages become resident only as
    rows are used, and that is what the budget check counts."""
    return 3 * max(0, n_symbols - n_words) + max_word_len + 18


@njit(cache=True, nogil=True)
def _capacity(n, need):
    """New capacity of a growable array of ``n`` rows that must hold ``need``: +25%.

    Not x2: a growth holds the old and the new array at once, and the budget check must
    count the new one whole, so a quarter keeps what is counted (2.25x the old array)
    close to what is resident (2x: the copy); for a few more, cheap, copies."""
    return max(need, n + n // 4, 16)


@njit(cache=True, nogil=True)
def _grow_q(arr, need):
    """``arr`` with room for at least ``need`` rows (``_capacity``), first rows copied."""
    n = arr.shape[0]
    if need <= n:
        return arr
    out = np.empty((_capacity(n, need),) + arr.shape[1:], dtype=arr.dtype)
    out[:n] = arr
    return out


@njit(cache=True, nogil=True)
def _grow_bytes(arr, need):
    """Bytes ``_grow_q(arr, need)`` would allocate (0 when ``arr`` already has room)."""
    n = arr.shape[0]
    if need <= n:
        return 0
    row = arr.itemsize
    for k in range(1, arr.ndim):
        row *= arr.shape[k]
    return _capacity(n, need) * row


@njit(cache=True, nogil=True)
def _rehash_bytes(keys, need):
    """Bytes a rehash of an int64 key/value table for ``need`` items would allocate."""
    if 2 * need <= keys.shape[0]:
        return 0
    return 16 * table_capacity(need)


@njit(cache=True, nogil=True)
def _fits(progress, held, extra, phase):
    """Whether ``extra`` more bytes on top of the ``held`` bytes of the kernel's arrays stay
    within ``progress[PROG_BUDGET]``. If not, record the need and the phase and flag the
    stop (the caller raises MemoryBudgetError): checked before allocating, not after."""
    if extra <= 0 or progress.shape[0] <= PROG_PHASE or progress[PROG_BUDGET] <= 0:
        return True
    if held + extra <= progress[PROG_BUDGET]:
        return True
    progress[PROG_NEED] = held + extra
    progress[PROG_PHASE] = phase
    progress[2] = STOPPED_MEMORY
    return False


@njit(cache=True, nogil=True)
def _no_merges():
    return np.zeros((0, 2), dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def _cmp_tokens(tok_off, tok_data, x, y):
    """Lexicographic comparison of the bytes of tokens x and y: -1, 0 or 1."""
    xs, xe = tok_off[x], tok_off[x + 1]
    ys, ye = tok_off[y], tok_off[y + 1]
    n = min(xe - xs, ye - ys)
    for k in range(n):
        bx = tok_data[xs + k]
        by = tok_data[ys + k]
        if bx != by:
            return -1 if bx < by else 1
    lx = xe - xs
    ly = ye - ys
    if lx == ly:
        return 0
    return -1 if lx < ly else 1


@njit(cache=True, nogil=True)
def _higher(hc, ha, hp, i, j, tie_mode, pairs, tok_off, tok_data):
    """True when heap entry i has strictly higher priority than entry j."""
    if hc[i] != hc[j]:
        return hc[i] > hc[j]
    if tie_mode == TIE_BYTES:
        pi = hp[i]
        pj = hp[j]
        c = _cmp_tokens(tok_off, tok_data, pairs[pi, P_LEFT], pairs[pj, P_LEFT])
        if c == 0:
            c = _cmp_tokens(tok_off, tok_data, pairs[pi, P_RIGHT], pairs[pj, P_RIGHT])
        return c < 0
    return ha[i] < ha[j]


@njit(cache=True, nogil=True)
def _swap(hc, ha, hp, i, j):
    hc[i], hc[j] = hc[j], hc[i]
    ha[i], ha[j] = ha[j], ha[i]
    hp[i], hp[j] = hp[j], hp[i]


@njit(cache=True, nogil=True)
def _sift_up(hc, ha, hp, i, tie_mode, pairs, tok_off, tok_data):
    while i > 0:
        parent = (i - 1) >> 1
        if not _higher(hc, ha, hp, i, parent, tie_mode, pairs, tok_off, tok_data):
            break
        _swap(hc, ha, hp, i, parent)
        i = parent


@njit(cache=True, nogil=True)
def _sift_down(hc, ha, hp, i, n, tie_mode, pairs, tok_off, tok_data):
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n and _higher(hc, ha, hp, right, left, tie_mode, pairs, tok_off, tok_data):
            best = right
        if not _higher(hc, ha, hp, best, i, tie_mode, pairs, tok_off, tok_data):
            break
        _swap(hc, ha, hp, i, best)
        i = best


@njit(cache=True, nogil=True)
def _rank_aux(pairs, p, tie_mode, base_rank, n_base):
    """Tie key of pair p (smaller wins) for TIE_RANKS and TIE_FIRST; 0 for TIE_BYTES."""
    if tie_mode == TIE_FIRST:
        return pairs[p, P_FIRST]
    if tie_mode == TIE_BYTES:
        return np.int64(0)
    a = pairs[p, P_LEFT]
    b = pairs[p, P_RIGHT]
    ra = base_rank[a] if a < n_base else a
    rb = base_rank[b] if b < n_base else b
    return (np.int64(ra) << 32) | np.int64(rb)


@njit(cache=True, nogil=True)
def _new_pair(pairs, p, a, b):
    pairs[p, P_LEFT] = a
    pairs[p, P_RIGHT] = b
    pairs[p, P_COUNT] = 0
    pairs[p, P_FIRST] = NO_FIRST
    pairs[p, P_DIRTY] = 0
    pairs[p, P_HEAD] = -1
    pairs[p, P_LASTW] = -1
    pairs[p, P_TOUCH] = -1


@njit(cache=True, nogil=True)
def _token_slot(bkeys, tok_off, tok_data, h, a, b):
    """Slot of the token whose bytes are bytes(a) + bytes(b), or the empty slot for it."""
    mask = bkeys.shape[0] - 1
    i = hash_slot(h) & mask
    la = tok_off[a + 1] - tok_off[a]
    lb = tok_off[b + 1] - tok_off[b]
    while True:
        t = bkeys[i]
        if t == EMPTY:
            return i
        s = tok_off[t]
        if (tok_off[t + 1] - s == la + lb and same_units(tok_data, s, tok_data, tok_off[a], la)
                and same_units(tok_data, s + la, tok_data, tok_off[b], lb)):
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _token_hash(tok_off, tok_data, t):
    return hash_units(tok_data, tok_off[t], tok_off[t + 1], HASH_SEED)


@njit(cache=True, nogil=True)
def _apply_delta(keys, vals, pairs, nodes, touched, counters, a, b, delta, w, fk, step):
    """Add ``delta`` to the count of pair (a, b) seen in word ``w`` at first-key ``fk``.

    ``counters`` is int64[3]: number of pairs, list nodes and touched pairs so far; the
    caller has made room for the new rows. A positive delta records the word in the
    pair's list and may lower its first occurrence; a negative one marks the first
    occurrence stale when it removes exactly that occurrence.
    """
    key = pair_key(a, b)
    sl = table_slot(keys, key)
    if keys[sl] == EMPTY:
        keys[sl] = key
        vals[sl] = counters[0]
        _new_pair(pairs, counters[0], a, b)
        counters[0] += 1
    q = vals[sl]
    pairs[q, P_COUNT] += delta
    if delta > 0:
        if pairs[q, P_LASTW] != w:
            pairs[q, P_LASTW] = w
            n = counters[1]
            nodes[n, 0] = w
            nodes[n, 1] = pairs[q, P_HEAD]
            pairs[q, P_HEAD] = n
            counters[1] = n + 1
        if fk < pairs[q, P_FIRST]:
            pairs[q, P_FIRST] = fk
            pairs[q, P_DIRTY] = 0
    elif fk == pairs[q, P_FIRST]:
        pairs[q, P_DIRTY] = 1
    if pairs[q, P_TOUCH] != step:
        pairs[q, P_TOUCH] = step
        touched[counters[2]] = q
        counters[2] += 1


@njit(cache=True, nogil=True)
def _insert_token(bkeys, tok_off, tok_data, t):
    """Put token t (known to be absent) into the bytes -> id table."""
    h = _token_hash(tok_off, tok_data, t)
    mask = bkeys.shape[0] - 1
    i = hash_slot(h) & mask
    while bkeys[i] != EMPTY:
        i = (i + 1) & mask
    bkeys[i] = t


@njit(cache=True, nogil=True)
def _find_first(pairs, nodes, p, symbols, offsets, wlen, pos):
    """Exact first occurrence key of pair p: min over its words of (word, unit offset)."""
    a = pairs[p, P_LEFT]
    b = pairs[p, P_RIGHT]
    best = NO_FIRST
    node = pairs[p, P_HEAD]
    while node != -1:
        w = nodes[node, 0]
        node = nodes[node, 1]
        if (w << 32) >= best:
            continue
        s = offsets[w]
        e = s + wlen[w]
        for i in range(s, e - 1):
            if symbols[i] == a and symbols[i + 1] == b:
                key = (w << 32) | np.int64(pos[i])
                if key < best:
                    best = key
                break
    return best


@njit(cache=True, nogil=True)
def train_merges(symbols, offsets, counts, tok_off_base, tok_data_base, base_rank, tie_mode,
                 max_merges, max_ids, min_count, max_units, progress, nodes, index_check_rows):
    """Learn up to ``max_merges`` merges from a word-frequency table.

    Parameters
    ----------
    symbols : int32[total]
        Base ids of all words, concatenated. Rewritten in place (pass a copy).
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols``; every word shorter than 2**31 units.
    counts : int64[n_words]
        Occurrences of each word (> 0). Words are in first-occurrence order.
    tok_off_base : int64[n_base + 1]
        Offsets of the base symbols' bytes in ``tok_data_base``.
    tok_data_base : uint8[m]
        Bytes of the base symbols (byte mode: the 256 single bytes).
    base_rank : int64[n_base]
        Tie rank of each base id for TIE_RANKS (identity for ``ids``, GPT-2 order for ``hf``).
    tie_mode : int
        TIE_RANKS, TIE_FIRST or TIE_BYTES.
    max_merges : int
        Stop after this many merges.
    max_ids : int
        Stop once the number of distinct token ids reaches this.
    min_count : int
        Stop when the best pair occurs fewer times than this (>= 1).
    max_units : int
        A pair whose merged token would exceed this many base units is never merged.
    progress : int64[3] or int64[6]
        Shared with the caller while the kernel runs (it releases the GIL):
        ``progress[0]`` is set to the merges done so far; the caller sets ``progress[1]``
        to 1 to ask for an early stop, which the kernel acknowledges in ``progress[2]``.
        With 6 slots, ``progress[3]`` is a byte budget for the kernel's own arrays
        (0: none): before any allocation that would exceed it the kernel stops, sets
        ``progress[2]`` to STOPPED_MEMORY and records the bytes it would have held and
        the phase in ``progress[4]``, ``progress[5]``; the merges returned are then
        incomplete (the caller must not use them).
    nodes : int64[cap, 2]
        Scratch for the word index (contents ignored). Grown (copied) when too small:
        pass ``word_index_rows(...)`` rows, allocated with np.empty, and it never is.
    index_check_rows : int
        When the word index needs rows beyond those counted so far, the budget is checked
        (and its resident rows counted) for this many rows ahead at once (>= 1; the
        Python side passes ``merge_loop.INDEX_CHECK_ROWS``).

    Returns
    -------
    merges : int32[n, 2]
        The merged pairs in rank order.
    merge_ids : int32[n]
        The id each merge produced (a new id, or an existing token's id when the merged
        bytes already had one).
    merge_counts : int64[n]
        The pair count at the time of each merge.
    """
    n_words = counts.shape[0]
    n_base = tok_off_base.shape[0] - 1
    # Budgeted bytes: wlen and stamp (8 per word), pos (4 per symbol), and the rows of the
    # word index in use (16 each; the setup uses fewer than one per symbol).
    fixed = 16 * n_words + 4 * symbols.shape[0]
    index_rows = min(nodes.shape[0], max(16, symbols.shape[0]))
    if not _fits(progress, 0, fixed + 16 * index_rows, 1):
        return _no_merges()
    wlen = np.empty(n_words, dtype=np.int64)
    pos = np.empty(symbols.shape[0], dtype=np.int32)
    for w in range(n_words):
        wlen[w] = offsets[w + 1] - offsets[w]
        for i in range(offsets[w], offsets[w + 1]):
            pos[i] = i - offsets[w]

    # Token bytes, lengths in units, and bytes -> id table (for reusing existing ids).
    # Every merge removes at least one symbol, so there are at most len(symbols) merges.
    cap_ids = n_base + 1 + min(max_merges, symbols.shape[0], 4096)
    tok_off = np.empty(cap_ids + 1, dtype=np.int64)
    tok_off[: n_base + 1] = tok_off_base
    tok_data = np.empty(max(16, 2 * tok_data_base.shape[0]), dtype=np.uint8)
    tok_data[: tok_data_base.shape[0]] = tok_data_base
    units = np.ones(cap_ids, dtype=np.int64)
    n_ids = n_base
    bkeys = np.full(table_capacity(cap_ids), EMPTY, dtype=np.int64)
    for t in range(n_base):
        _insert_token(bkeys, tok_off, tok_data, t)

    # Pair store and word index.
    pairs = np.empty((1024, N_PCOLS), dtype=np.int64)
    keys = np.full(table_capacity(1024), EMPTY, dtype=np.int64)
    vals = np.zeros(keys.shape[0], dtype=np.int64)
    n_pairs = 0
    n_nodes = 0

    for w in range(n_words):
        s = offsets[w]
        e = offsets[w + 1]
        if e - s < 2:
            continue
        need = n_pairs + (e - s)
        extra = _grow_bytes(pairs, need) + _rehash_bytes(keys, need) + _grow_bytes(
            nodes, n_nodes + (e - s))
        if extra and not _fits(progress, fixed + pairs.nbytes + keys.nbytes + vals.nbytes
                               + 16 * index_rows, extra, 1):
            return _no_merges()
        if need > pairs.shape[0]:
            pairs = _grow_q(pairs, need)
        if 2 * need > keys.shape[0]:
            keys, vals = table_rehash(keys, vals, table_capacity(need))
        nodes = _grow_q(nodes, n_nodes + (e - s))
        c = counts[w]
        for i in range(s, e - 1):
            key = pair_key(symbols[i], symbols[i + 1])
            slot = table_slot(keys, key)
            if keys[slot] == EMPTY:
                keys[slot] = key
                vals[slot] = n_pairs
                _new_pair(pairs, n_pairs, symbols[i], symbols[i + 1])
                n_pairs += 1
            p = vals[slot]
            pairs[p, P_COUNT] += c
            if pairs[p, P_LASTW] != w:
                pairs[p, P_LASTW] = w
                nodes[n_nodes, 0] = w
                nodes[n_nodes, 1] = pairs[p, P_HEAD]
                pairs[p, P_HEAD] = n_nodes
                n_nodes += 1
            fk = (np.int64(w) << 32) | np.int64(pos[i])
            if fk < pairs[p, P_FIRST]:
                pairs[p, P_FIRST] = fk

    # The heap: one entry per eligible pair to start with.
    hcap = max(16, 2 * n_pairs)
    index_rows = max(index_rows, n_nodes)
    if not _fits(progress, fixed + pairs.nbytes + keys.nbytes + vals.nbytes + 16 * index_rows,
                 24 * hcap, 1):
        return _no_merges()
    hc = np.empty(hcap, dtype=np.int64)
    ha = np.empty(hcap, dtype=np.int64)
    hp = np.empty(hcap, dtype=np.int64)
    hn = 0
    for p in range(n_pairs):
        a = pairs[p, P_LEFT]
        b = pairs[p, P_RIGHT]
        if pairs[p, P_COUNT] > 0 and units[a] + units[b] <= max_units:
            hc[hn] = pairs[p, P_COUNT]
            ha[hn] = _rank_aux(pairs, p, tie_mode, base_rank, n_base)
            hp[hn] = p
            hn += 1
    for i in range(hn // 2 - 1, -1, -1):
        _sift_down(hc, ha, hp, i, hn, tie_mode, pairs, tok_off, tok_data)

    out_merges = np.empty((cap_ids, 2), dtype=np.int32)
    out_ids = np.empty(out_merges.shape[0], dtype=np.int32)
    out_counts = np.empty(out_merges.shape[0], dtype=np.int64)
    n_merges = 0
    touched = np.empty(1024, dtype=np.int64)
    counters = np.zeros(3, dtype=np.int64)
    stamp = np.full(n_words, -1, dtype=np.int64)
    out_of_memory = False

    while n_merges < max_merges and n_ids < max_ids:
        if progress[1] != 0:
            progress[2] = STOPPED_ASKED
            break
        # Pop until the top entry is the true priority of its pair.
        best = -1
        while hn > 0:
            c = hc[0]
            aux = ha[0]
            p = hp[0]
            hn -= 1
            if hn > 0:
                _swap(hc, ha, hp, 0, hn)
                _sift_down(hc, ha, hp, 0, hn, tie_mode, pairs, tok_off, tok_data)
            cur = pairs[p, P_COUNT]
            if cur <= 0:
                continue
            if tie_mode == TIE_FIRST and pairs[p, P_DIRTY] != 0:
                pairs[p, P_FIRST] = _find_first(pairs, nodes, p, symbols, offsets, wlen, pos)
                pairs[p, P_DIRTY] = 0
            true_aux = _rank_aux(pairs, p, tie_mode, base_rank, n_base)
            if cur != c or true_aux != aux:
                hc[hn] = cur
                ha[hn] = true_aux
                hp[hn] = p
                hn += 1
                _sift_up(hc, ha, hp, hn - 1, tie_mode, pairs, tok_off, tok_data)
                continue
            best = p
            break
        if best < 0 or pairs[best, P_COUNT] < min_count:
            break

        A = pairs[best, P_LEFT]
        B = pairs[best, P_RIGHT]
        count = pairs[best, P_COUNT]

        # The merged token: reuse the id of identical bytes, else a new id.
        h = _token_hash(tok_off, tok_data, A)
        h = hash_units(tok_data, tok_off[B], tok_off[B + 1], h)
        slot = _token_slot(bkeys, tok_off, tok_data, h, A, B)
        if bkeys[slot] != EMPTY:
            X = bkeys[slot]
        else:
            X = n_ids
            la = tok_off[A + 1] - tok_off[A]
            lb = tok_off[B + 1] - tok_off[B]
            if X + 1 >= tok_off.shape[0]:
                tok_off = grow(tok_off, 2 * tok_off.shape[0])
                units = grow(units, tok_off.shape[0])
            start = tok_off[X]
            tok_data = grow(tok_data, start + la + lb)
            tok_data[start : start + la] = tok_data[tok_off[A] : tok_off[A] + la]
            tok_data[start + la : start + la + lb] = tok_data[tok_off[B] : tok_off[B] + lb]
            tok_off[X + 1] = start + la + lb
            units[X] = units[A] + units[B]
            n_ids += 1
            if 2 * n_ids > bkeys.shape[0]:
                bkeys = np.full(2 * bkeys.shape[0], EMPTY, dtype=np.int64)
                for t in range(n_ids):
                    _insert_token(bkeys, tok_off, tok_data, t)
            else:
                bkeys[slot] = X

        if n_merges >= out_merges.shape[0]:
            out_merges = grow(out_merges, 2 * out_merges.shape[0])
            out_ids = grow(out_ids, 2 * out_ids.shape[0])
            out_counts = grow(out_counts, 2 * out_counts.shape[0])
        out_merges[n_merges, 0] = A
        out_merges[n_merges, 1] = B
        out_ids[n_merges] = X
        out_counts[n_merges] = count

        # Rewrite every word that contains (A, B), applying neighbour deltas.
        counters[0] = n_pairs
        counters[1] = n_nodes
        counters[2] = 0
        node = pairs[best, P_HEAD]
        while node != -1:
            w = nodes[node, 0]
            node = nodes[node, 1]
            if stamp[w] == n_merges:
                continue
            stamp[w] = n_merges
            s = offsets[w]
            e = s + wlen[w]
            # Make room for the at most 2 new pairs, nodes and 4 touches per occurrence.
            need = counters[0] + (e - s) + 2
            need_rows = counters[1] + (e - s) + 2
            extra = (_grow_bytes(pairs, need) + _rehash_bytes(keys, need)
                     + _grow_bytes(nodes, need_rows)
                     + _grow_bytes(touched, counters[2] + 4 * (e - s) + 4))
            more_rows = 0
            if need_rows > index_rows:  # new index rows become resident: count a block
                more_rows = max(need_rows, min(index_rows + index_check_rows,
                                               nodes.shape[0])) - index_rows
            if (extra or more_rows) and not _fits(
                    progress, fixed + pairs.nbytes + keys.nbytes + vals.nbytes + touched.nbytes
                    + 3 * hc.nbytes + 16 * index_rows, extra + 16 * more_rows, 2):
                out_of_memory = True
                break
            index_rows += more_rows
            if need > pairs.shape[0]:
                pairs = _grow_q(pairs, need)
            if 2 * need > keys.shape[0]:
                keys, vals = table_rehash(keys, vals, table_capacity(need))
            nodes = _grow_q(nodes, counters[1] + (e - s) + 2)
            touched = _grow_q(touched, counters[2] + 4 * (e - s) + 4)
            c = counts[w]
            wkey = np.int64(w) << 32
            i = s
            o = s
            while i < e:
                if i + 1 < e and symbols[i] == A and symbols[i + 1] == B:
                    if o > s:
                        # (left, A) disappears and (left, X) appears, both starting at left.
                        left = symbols[o - 1]
                        fk = wkey | np.int64(pos[o - 1])
                        if not (left == A and A == B):
                            _apply_delta(keys, vals, pairs, nodes, touched, counters,
                                         left, A, -c, w, fk, n_merges)
                        _apply_delta(keys, vals, pairs, nodes, touched, counters,
                                     left, X, c, w, fk, n_merges)
                    if i + 2 < e:
                        # (B, right) disappears (it started at B); (X, right) appears at X.
                        right = symbols[i + 2]
                        if not (B == A and right == B):
                            _apply_delta(keys, vals, pairs, nodes, touched, counters,
                                         B, right, -c, w, wkey | np.int64(pos[i + 1]), n_merges)
                        _apply_delta(keys, vals, pairs, nodes, touched, counters,
                                     X, right, c, w, wkey | np.int64(pos[i]), n_merges)
                    symbols[o] = X
                    pos[o] = pos[i]
                    o += 1
                    i += 2
                else:
                    symbols[o] = symbols[i]
                    pos[o] = pos[i]
                    o += 1
                    i += 1
            wlen[w] = o - s
        n_pairs = counters[0]
        n_nodes = counters[1]
        n_touched = counters[2]
        if out_of_memory:  # this merge's rewrite is incomplete: stop (the caller raises)
            break

        pairs[best, P_COUNT] = 0
        n_merges += 1
        progress[0] = n_merges

        # Push the new priority of every pair this merge changed.
        extra = 3 * _grow_bytes(hc, hn + n_touched)
        if extra and not _fits(progress, fixed + pairs.nbytes + keys.nbytes + vals.nbytes
                               + touched.nbytes + 3 * hc.nbytes + 16 * index_rows, extra, 2):
            break  # the caller raises: the merges returned are not used
        if hn + n_touched > hc.shape[0]:
            hc = _grow_q(hc, hn + n_touched)
            ha = _grow_q(ha, hn + n_touched)
            hp = _grow_q(hp, hn + n_touched)
        for k in range(n_touched):
            q = touched[k]
            if pairs[q, P_COUNT] <= 0:
                continue
            a = pairs[q, P_LEFT]
            b = pairs[q, P_RIGHT]
            if units[a] + units[b] > max_units:
                continue
            hc[hn] = pairs[q, P_COUNT]
            ha[hn] = _rank_aux(pairs, q, tie_mode, base_rank, n_base)
            hp[hn] = q
            hn += 1
            _sift_up(hc, ha, hp, hn - 1, tie_mode, pairs, tok_off, tok_data)

    return out_merges[:n_merges].copy(), out_ids[:n_merges].copy(), out_counts[:n_merges].copy()
