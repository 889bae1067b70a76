"""The training kernel: learn merges from a word-frequency table.

The corpus enters as the word table (CSR): ``symbols`` (int32, the base ids of every unique
word, concatenated), ``offsets`` (int64, word boundaries) and ``counts`` (int64, how often
each word occurs), words in order of first occurrence. The kernel

1. counts every adjacent pair once, weighted by word count, and records, per pair, the
   words that contain it;
2. repeatedly takes the best pair from a lazy max-heap, rewrites only the words that
   contain it (left to right, non-overlapping, in place) and applies the +/- count deltas
   of the neighbouring pairs. The cost of a merge is proportional to the occurrences of
   the merged pair, never to the corpus.

The merge loop is bound by memory latency (a merge touches words and pairs all over the
table), so the layout aims at one cache miss per step:

- Pair records live *in* the open-addressing table (``rec[cap, R_*]``, at most 3/4
  full): a probe lands on the record itself (key, count, word list, marks), not on an
  index of it. Records move (the table grows, dead pairs are deleted), so everything
  else names a pair by its key.
- A word is one row of ``wr`` (start, count); its end is the next row's start, or the
  first ``-1`` written after it when merges shortened it (no length array).
- The pair -> words index is a linked list of ``(word, next)`` nodes per pair. The setup
  lays each pair's initial words out as one consecutive run of nodes, so the lists that
  the first (largest) merges walk are read front to back; later words are prepended. A
  list may hold words that no longer contain the pair, which the rewrite skips.
- The words of a merged pair's list are read ahead and prefetched (``lookahead``), so
  that the misses of many words overlap.
- Memory is reused: a merged pair's list nodes feed the lists its merge creates, and dead
  pairs (count 0: they occur nowhere) are deleted when the table fills.
- The heap holds only the pairs whose count is at least ``theta``, chosen so that about
  twice the merges still to do are in it (a small heap stays in cache); when it empties,
  ``theta`` is lowered and the heap rebuilt from the table.
- No reference counting in the inner loops. Numba increments and decrements an array's
  reference count (an atomic instruction each) where a function takes it and where a
  variable holding it is assigned in a loop; in this kernel those were a third of the
  merge phase. So the per-word rewrite is a function that never reassigns an array
  (``_rewrite_words``: ``train_merges`` grows the tables between its calls), and the small
  helpers it calls per occurrence, which never allocate, are compiled without reference
  counting (``_nrt=False``, Numba's flag for code that needs no runtime; an allocation in
  such a function is a compile error, not a leak).

Lazy heap invariant: every eligible pair with count >= theta has a heap entry whose
priority is >= its true priority. A count falls only through a rewrite, which leaves the
old (higher) entry in place; a count rises only through a rewrite too, and every pair that
rose is pushed again at the end of the merge. So a popped entry that equals its pair's
true priority is the true maximum; one above it is pushed again at the true priority; one
below it is dropped (a higher entry of that pair is still in the heap).

Every priority is a total order (count, then the tie key, unique per pair), so the merges
do not depend on the order in which words or pairs are visited.
"""

import numpy as np
from numba import njit

from .hashing import (
    EMPTY,
    HASH_SEED,
    grow,
    hash_slot,
    hash_units,
    prefetch,
    same_units,
    table_capacity,
)
#: kernel cache stamp: f61736dfda6e18e2bc4664aedc29c401524c0df661f343da5017c51fb214b6bf

# Tie rules as the kernel sees them. ``hf`` is TIE_RANKS with GPT-2's byte order in
# ``base_rank``; ``ids`` is TIE_RANKS with the identity.
TIE_RANKS = 0
TIE_FIRST = 1
TIE_BYTES = 2

# Columns of a pair record (a row of the pair table ``rec``).
R_KEY = 0  # (left << 32) | right; EMPTY in a free slot
R_COUNT = 1  # weighted occurrence count
R_HEAD = 2  # first node of this pair's word list, -1 if none
R_MARK = 3  # ((last word appended + 1) << 32) | stamp of the last merge that raised it
R_FIRST = 4  # (word << 32) | unit offset of the first occurrence (TIE_FIRST only)
R_DIRTY = 5  # 1 when the recorded first occurrence may have been removed (TIE_FIRST only)
N_RCOLS = 4  # columns without TIE_FIRST
N_RCOLS_FIRST = 6  # ... and with it

NO_FIRST = np.int64(0x7FFFFFFFFFFFFFFF)
LOW32 = np.int64(0xFFFFFFFF)
#: Merge stamps in R_MARK's low half run 1 .. STAMP_PERIOD and then restart (all cleared).
STAMP_PERIOD = np.int64(1 << 31)

# Slots of the rewrite's ``counters`` (int64[N_COUNTERS]).
C_PAIRS = 0  # records in the table (live or dead)
C_ROWS = 1  # word index rows ever used (the next new one)
C_TOUCHED = 2  # pairs raised by this merge (entries of ``touched``)
C_FREE = 3  # next reusable node of the list being merged, -1 when none
C_LEAD = 4  # the next node the read-ahead reads there (not reusable yet), -1 at its end
C_SPARE = 5  # chain of reusable nodes left over by earlier merges, -1 when none
C_TAIL = 6  # the last node of the merged list the read-ahead has read, -1 before any
C_SEEN = 7  # words of the merged list read ahead into the ring
C_DONE = 8  # words of it rewritten
N_COUNTERS = 9

# Columns of a heap entry.
H_COUNT = 0  # the pair's count when pushed
H_AUX = 1  # its tie key when pushed (TIE_BYTES: the pair key; the bytes are compared)
H_KEY = 2  # the pair (its key: records move in the table, see _delete)
N_HCOLS = 3

# ``progress`` slots beyond the first three (optional: a caller may pass int64[3]).
PROG_BUDGET = 3  # bytes the kernel's own arrays may take (0: no limit); set by the caller
PROG_NEED = 4  # set when the kernel stopped for memory: the bytes it would have held
PROG_PHASE = 5  # ... and where: 1 setting up (first pair count), 2 merging
STOPPED_ASKED = 1  # progress[2] values: stopped at the caller's request
STOPPED_MEMORY = 2  # ... or because an allocation would exceed progress[PROG_BUDGET]
# Counts of the merge loop's rarer events, kept when ``progress`` has these slots (tests
# check that their cases reach each path).
PROG_REBUILDS = 6  # the heap ran dry: threshold lowered, heap refilled from the table
PROG_RAISES = 7  # the heap filled with rare pairs: threshold raised, entries below dropped
PROG_PURGES = 8  # the pair table filled: its dead records deleted in place
PROG_GROWS = 9  # the pair table filled: grown (copied, dead records left behind)
N_PROGRESS = 10


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
def _row_bytes(arr):
    row = arr.itemsize
    for k in range(1, arr.ndim):
        row *= arr.shape[k]
    return row


@njit(cache=True, nogil=True)
def _grow_bytes(arr, need):
    """Bytes ``_grow_q(arr, need)`` would allocate (0 when ``arr`` already has room)."""
    n = arr.shape[0]
    if need <= n:
        return 0
    return _capacity(n, need) * _row_bytes(arr)


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
def _event(progress, slot):
    """Count one event in ``progress[slot]`` when the caller passed that slot."""
    if progress.shape[0] > slot:
        progress[slot] += 1


@njit(cache=True, nogil=True)
def _no_merges():
    return np.zeros((0, 2), dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# The pair table: open addressing (linear probing, at most half full), records in the slots
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _pair_hash(key):
    """Slot hash of a packed pair key (both ids < 2**31: the products never overflow)."""
    h = (key >> 32) * 0x9E3779B1 ^ (key & LOW32) * 0x85EBCA6B
    return h ^ (h >> 29)


@njit(cache=True, nogil=True, _nrt=False)
def _probe(rec, key):
    """Slot of pair ``key`` in ``rec``, or the free slot where it belongs."""
    mask = rec.shape[0] - 1
    i = _pair_hash(key) & mask
    while True:
        k = rec[i, R_KEY]
        if k == key or k == EMPTY:
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _new_table(cap, ncols):
    rec = np.empty((cap, ncols), dtype=np.int64)
    for i in range(cap):
        rec[i, R_KEY] = EMPTY
    return rec


@njit(cache=True, nogil=True, _nrt=False)
def _init_record(rec, q, key):
    rec[q, R_KEY] = key
    rec[q, R_COUNT] = 0
    rec[q, R_HEAD] = -1
    rec[q, R_MARK] = 0
    if rec.shape[1] > R_DIRTY:
        rec[q, R_FIRST] = NO_FIRST
        rec[q, R_DIRTY] = 0


@njit(cache=True, nogil=True, _nrt=False)
def _delete(rec, i):
    """Remove the record in slot i (backward-shift deletion: the records after it in its
    probe run move back where they belong, so no tombstone is left and probes stay
    short). Records move: nothing may hold a slot across a deletion."""
    mask = rec.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        key = rec[j, R_KEY]
        if key == EMPTY:
            break
        home = _pair_hash(key) & mask
        # It stays when its home lies in (i, j] (cyclically): its probe never passes i.
        stays = (i < home <= j) if i < j else (home > i or home <= j)
        if not stays:
            for k in range(rec.shape[1]):
                rec[i, k] = rec[j, k]
            i = j
    rec[i, R_KEY] = EMPTY


@njit(cache=True, nogil=True)
def _count_dead(rec):
    """Records whose count is 0 (dead pairs, not deleted yet)."""
    n = 0
    for i in range(rec.shape[0]):
        if rec[i, R_KEY] != EMPTY and rec[i, R_COUNT] == 0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def _purge(rec):
    """Delete every dead record (count 0) in place; returns how many were deleted.

    Scanning up, a deletion only moves records from later slots (or, past the end, from
    the first slots, already scanned and kept) into the hole, which is checked again."""
    n = 0
    for i in range(rec.shape[0]):
        while rec[i, R_KEY] != EMPTY and rec[i, R_COUNT] == 0:
            _delete(rec, i)
            n += 1
    return n


@njit(cache=True, nogil=True)
def _pair_capacity(n_pairs):
    """Smallest power of two (>= 16) at most 3/4 full with ``n_pairs`` pairs."""
    cap = 16
    while 4 * n_pairs > 3 * cap:
        cap *= 2
    return cap


@njit(cache=True, nogil=True)
def _rehash(rec, cap, drop_dead):
    """The table with ``cap`` slots (a power of two), without its dead records (count 0)
    when ``drop_dead``; records move, so slots change."""
    out = _new_table(cap, rec.shape[1])
    for i in range(rec.shape[0]):
        key = rec[i, R_KEY]
        if key != EMPTY and not (drop_dead and rec[i, R_COUNT] == 0):
            j = _probe(out, key)
            for k in range(rec.shape[1]):
                out[j, k] = rec[i, k]
    return out


@njit(cache=True, nogil=True)
def _table_bytes(n_pairs, ncols):
    """Bytes of a table of the capacity ``n_pairs`` pairs need."""
    return _pair_capacity(n_pairs) * ncols * 8


@njit(cache=True, nogil=True)
def _rehash_bytes(rec, n_pairs):
    """Bytes a rehash for ``n_pairs`` pairs would allocate (0 when ``rec`` has room)."""
    if 4 * n_pairs <= 3 * rec.shape[0]:
        return 0
    return _table_bytes(n_pairs, rec.shape[1])


# ---------------------------------------------------------------------------------------
# Token bytes (the merged tokens' ids, and the TIE_BYTES order)
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, _nrt=False)
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


@njit(cache=True, nogil=True, _nrt=False)
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
def _insert_token(bkeys, tok_off, tok_data, t):
    """Put token t (known to be absent) into the bytes -> id table."""
    h = _token_hash(tok_off, tok_data, t)
    mask = bkeys.shape[0] - 1
    i = hash_slot(h) & mask
    while bkeys[i] != EMPTY:
        i = (i + 1) & mask
    bkeys[i] = t


# ---------------------------------------------------------------------------------------
# The heap: rows (count, aux, slot), the highest priority at the top
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, _nrt=False)
def _higher(heap, i, j, tie_mode, tok_off, tok_data):
    """True when heap entry i has strictly higher priority than entry j."""
    if heap[i, H_COUNT] != heap[j, H_COUNT]:
        return heap[i, H_COUNT] > heap[j, H_COUNT]
    if tie_mode == TIE_BYTES:
        ki = heap[i, H_AUX]
        kj = heap[j, H_AUX]
        c = _cmp_tokens(tok_off, tok_data, ki >> 32, kj >> 32)
        if c == 0:
            c = _cmp_tokens(tok_off, tok_data, ki & LOW32, kj & LOW32)
        return c < 0
    return heap[i, H_AUX] < heap[j, H_AUX]


@njit(cache=True, nogil=True, _nrt=False)
def _swap(heap, i, j):
    for k in range(N_HCOLS):
        heap[i, k], heap[j, k] = heap[j, k], heap[i, k]


@njit(cache=True, nogil=True, _nrt=False)
def _sift_up(heap, i, tie_mode, tok_off, tok_data):
    while i > 0:
        parent = (i - 1) >> 1
        if not _higher(heap, i, parent, tie_mode, tok_off, tok_data):
            break
        _swap(heap, i, parent)
        i = parent


@njit(cache=True, nogil=True, _nrt=False)
def _sift_down(heap, i, n, tie_mode, tok_off, tok_data):
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n and _higher(heap, right, left, tie_mode, tok_off, tok_data):
            best = right
        if not _higher(heap, best, i, tie_mode, tok_off, tok_data):
            break
        _swap(heap, i, best)
        i = best


@njit(cache=True, nogil=True, _nrt=False)
def _pop_root(heap, n, tie_mode, tok_off, tok_data):
    """Remove the root of a heap of ``n + 1`` entries, leaving ``n``.

    Floyd's bottom-up deletion: the hole left at the root moves down to a leaf along the
    higher children (one comparison per level, a row copied up), the last entry fills it
    and moves up while it is higher than its parent. The last entry is mostly a low one
    that belongs near the leaves, so this takes about half the comparisons of moving it
    down from the root (two per level) and no swaps (the pops were 8-9% of the merge loop's
    samples on 100 MB of Linux sources). Any valid heap pops the same entries: priorities
    are unique per pair."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _higher(heap, child + 1, child, tie_mode, tok_off, tok_data):
            child += 1
        for k in range(N_HCOLS):
            heap[i, k] = heap[child, k]
        i = child
    if i != n:
        for k in range(N_HCOLS):
            heap[i, k] = heap[n, k]
        _sift_up(heap, i, tie_mode, tok_off, tok_data)


@njit(cache=True, nogil=True, _nrt=False)
def _push(heap, hn, count, aux, key, tie_mode, tok_off, tok_data):
    """Push (count, aux, key) onto a heap of ``hn`` entries (room is made by the caller)."""
    heap[hn, H_COUNT] = count
    heap[hn, H_AUX] = aux
    heap[hn, H_KEY] = key
    _sift_up(heap, hn, tie_mode, tok_off, tok_data)
    return hn + 1


@njit(cache=True, nogil=True, _nrt=False)
def _tie_key(rec, q, tie_mode, base_rank, n_base):
    """Tie key of the pair in slot q (smaller wins; TIE_BYTES: the key, bytes compared)."""
    if tie_mode == TIE_FIRST:
        return rec[q, R_FIRST]
    return _key_tie(rec[q, R_KEY], tie_mode, base_rank, n_base)


@njit(cache=True, nogil=True, _nrt=False)
def _key_tie(key, tie_mode, base_rank, n_base):
    """Tie key of pair ``key`` under TIE_RANKS or TIE_BYTES (neither needs its record)."""
    if tie_mode == TIE_BYTES:
        return key
    a = key >> 32
    b = key & LOW32
    ra = base_rank[a] if a < n_base else a
    rb = base_rank[b] if b < n_base else b
    return (np.int64(ra) << 32) | np.int64(rb)


@njit(cache=True, nogil=True, _nrt=False)
def _eligible(rec, q, units, max_units):
    """Whether the pair in slot q may be merged (its token is at most max_units long)."""
    key = rec[q, R_KEY]
    return units[key >> 32] + units[key & LOW32] <= max_units


@njit(cache=True, nogil=True)
def _heap_target(merges_left, n_pairs, floor):
    """How many pairs the heap should hold: twice the merges still to do, at least
    ``floor`` (``train_merges``' ``heap_floor``).

    Every merge pops one pair, and rises push others above the threshold, so the heap
    rarely runs dry (a rebuild scans the whole table) while it stays small enough for the
    caches (at 32K merges, a tenth of the 1.2 GB Linux table's 900K pairs)."""
    return max(floor, 2 * min(merges_left, n_pairs))


@njit(cache=True, nogil=True)
def _log2(c):
    """floor(log2(c)) for c >= 1."""
    b = 0
    while c > 1:
        c >>= 1
        b += 1
    return b


@njit(cache=True, nogil=True)
def _power_above(hist, target):
    """The largest power of two 2**b with at least ``target`` counts at or above it in
    ``hist`` (counts by floor(log2)); 1 when there are fewer."""
    total = 0
    for b in range(63, -1, -1):
        total += hist[b]
        if total >= target:
            return np.int64(1) << b
    return np.int64(1)


@njit(cache=True, nogil=True)
def _choose_theta(rec, units, max_units, target, min_count):
    """The heap's threshold: the largest power of two such that at least ``target``
    eligible pairs have a count at or above it (1 if fewer), and never below min_count."""
    hist = np.zeros(64, dtype=np.int64)
    for q in range(rec.shape[0]):
        if rec[q, R_KEY] != EMPTY and rec[q, R_COUNT] > 0 and _eligible(rec, q, units, max_units):
            hist[_log2(rec[q, R_COUNT])] += 1
    return max(_power_above(hist, target), min_count)


@njit(cache=True, nogil=True)
def _raise_theta(heap, hn, theta, target, tie_mode, tok_off, tok_data):
    """Raise the threshold to the largest power of two at which ``target`` entries are
    still at or above it, drop the entries below it and re-heapify: returns (entries,
    threshold). Safe at any time: a pair whose count is at or above the new threshold has
    an entry at least as high, which stays."""
    hist = np.zeros(64, dtype=np.int64)
    for i in range(hn):
        hist[_log2(heap[i, H_COUNT])] += 1
    new = _power_above(hist, target)
    if new <= theta:
        return hn, theta
    k = 0
    for i in range(hn):
        if heap[i, H_COUNT] >= new:
            for j in range(N_HCOLS):
                heap[k, j] = heap[i, j]
            k += 1
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(heap, i, k, tie_mode, tok_off, tok_data)
    return k, new


@njit(cache=True, nogil=True)
def _count_at_least(rec, units, max_units, theta):
    """Eligible pairs with a count >= theta (> 0)."""
    n = 0
    for q in range(rec.shape[0]):
        if (rec[q, R_KEY] != EMPTY and rec[q, R_COUNT] >= theta and rec[q, R_COUNT] > 0
                and _eligible(rec, q, units, max_units)):
            n += 1
    return n


@njit(cache=True, nogil=True)
def _fill_heap(heap, rec, units, max_units, theta, tie_mode, base_rank, n_base, tok_off,
               tok_data):
    """Make ``heap`` hold every eligible pair with count >= theta (room made by the
    caller); returns the number of entries."""
    hn = 0
    for q in range(rec.shape[0]):
        if (rec[q, R_KEY] != EMPTY and rec[q, R_COUNT] >= theta and rec[q, R_COUNT] > 0
                and _eligible(rec, q, units, max_units)):
            heap[hn, H_COUNT] = rec[q, R_COUNT]
            heap[hn, H_AUX] = _tie_key(rec, q, tie_mode, base_rank, n_base)
            heap[hn, H_KEY] = rec[q, R_KEY]
            hn += 1
    for i in range(hn // 2 - 1, -1, -1):
        _sift_down(heap, i, hn, tie_mode, tok_off, tok_data)
    return hn


# ---------------------------------------------------------------------------------------
# Count deltas of a rewrite
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, _nrt=False)
def _lower(rec, key, c, fk):
    """Take ``c`` from the count of pair ``key`` (present), an occurrence at first-key
    ``fk`` gone; under TIE_FIRST, mark the first occurrence stale when it was that one.
    A pair whose count reaches 0 occurs nowhere any more: its record is dead, deleted
    when the table fills (``_purge``). Not here, and not even counted here: either, in
    the rewrite's inner loop, made all of it 10% slower (1.2 GB Linux table)."""
    q = _probe(rec, key)
    rec[q, R_COUNT] -= c
    if rec.shape[1] > R_DIRTY and fk == rec[q, R_FIRST]:
        rec[q, R_DIRTY] = 1


@njit(cache=True, nogil=True, _nrt=False)
def _new_node(nodes, counters):
    """A node for a word list: a recycled one, else the next new row.

    The merged pair's list is dead once read (its count becomes 0, and a pair that comes
    back starts a new list), so its nodes are reused: first those of the list being
    merged that the read-ahead has passed (``C_FREE`` up to ``C_LEAD``, the next node it
    reads), then the leftovers of earlier merges (``C_SPARE``), chained by their ``next``.
    Without this, every merged occurrence added two rows for good (12.1M rows on the 1.2
    GB Linux table, 5.6M of them the initial index; with it, about the initial index).
    """
    n = counters[C_FREE]
    if n != -1 and n != counters[C_LEAD]:
        counters[C_FREE] = nodes[n, 1]
        return n
    n = counters[C_SPARE]
    if n != -1:
        counters[C_SPARE] = nodes[n, 1]
        return n
    n = counters[C_ROWS]
    counters[C_ROWS] = n + 1
    return n


@njit(cache=True, nogil=True, _nrt=False)
def _raise(rec, nodes, touched, counters, key, c, w, fk, stamp):
    """Add ``c`` to the count of pair ``key`` seen in word ``w`` at first-key ``fk``.

    ``counters`` (``C_*``): pairs, list rows and raised pairs so far, and the free node
    chains (``_new_node``); the caller has made room for the new rows. Records the word
    in the pair's list (once per word in a row: a word appended last is not appended
    again) and the pair's key in ``touched`` (once per merge: ``stamp``), and under
    TIE_FIRST may lower its first occurrence.
    """
    q = _probe(rec, key)
    if rec[q, R_KEY] == EMPTY:
        _init_record(rec, q, key)
        counters[C_PAIRS] += 1
    elif rec[q, R_COUNT] == 0:  # a dead pair comes back: it starts afresh (its list
        _init_record(rec, q, key)  # is stale, or recycled if it was merged)
    rec[q, R_COUNT] += c
    mark = rec[q, R_MARK]
    last = (np.int64(w) + 1) << 32
    if mark & ~LOW32 != last:
        n = _new_node(nodes, counters)
        nodes[n, 0] = w
        nodes[n, 1] = rec[q, R_HEAD]
        rec[q, R_HEAD] = n
        mark = last | (mark & LOW32)
    if mark & LOW32 != stamp:
        touched[counters[C_TOUCHED]] = key
        counters[C_TOUCHED] += 1
        mark = (mark & ~LOW32) | stamp
    rec[q, R_MARK] = mark
    if rec.shape[1] > R_DIRTY and fk < rec[q, R_FIRST]:
        rec[q, R_FIRST] = fk
        rec[q, R_DIRTY] = 0


@njit(cache=True, nogil=True, _nrt=False)
def _find_first(rec, nodes, q, symbols, wr, pos):
    """Exact first occurrence key of the pair in slot q: min over its words of (word,
    unit offset)."""
    key = rec[q, R_KEY]
    a = key >> 32
    b = key & LOW32
    best = NO_FIRST
    node = rec[q, R_HEAD]
    while node != -1:
        w = np.int64(nodes[node, 0])
        node = nodes[node, 1]
        if (w << 32) >= best:
            continue
        e = wr[w + 1, 0]
        for i in range(wr[w, 0], e - 1):
            if symbols[i + 1] < 0:
                break
            if symbols[i] == a and symbols[i + 1] == b:
                fk = (w << 32) | np.int64(pos[i])
                if fk < best:
                    best = fk
                break
    return best


# ---------------------------------------------------------------------------------------
# Setting up: the word rows, the pair table and the word index
# ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _word_rows(offsets, counts):
    """``wr[n_words + 1, 2]``: each word's (start, count); the last row's start is the end."""
    n_words = counts.shape[0]
    wr = np.empty((n_words + 1, 2), dtype=np.int64)
    for w in range(n_words):
        wr[w, 0] = offsets[w]
        wr[w, 1] = counts[w]
    wr[n_words, 0] = offsets[n_words]
    wr[n_words, 1] = 0
    return wr


@njit(cache=True, nogil=True)
def _dense_bytes(n_base, first_mode):
    """Bytes of ``_dense_pairs``' arrays (and of the slot array ``_dense_table`` adds)."""
    return 8 * n_base * n_base * (5 if first_mode else 4)


@njit(cache=True, nogil=True)
def _dense_pairs(symbols, offsets, counts, n_base, first_mode):
    """First setup pass over a small alphabet (``n_base <= dense_base``): every adjacent
    pair counted in arrays indexed by ``a * n_base + b``, not probed in the pair table
    (the 100 MB Linux table, 2.8 M adjacencies: the pass and ``_fill_index`` 46 -> 31 ms).

    Returns ``(count, words, first, n_pairs, n_rows)``: per pair index its weighted count,
    its number of distinct words and (``first_mode``, else an empty array) the key
    ``(word << 32) | unit offset`` of its first occurrence; the distinct pairs, and the
    word index rows they need (the sum of ``words``).
    """
    size = n_base * n_base
    count = np.zeros(size, dtype=np.int64)
    words = np.zeros(size, dtype=np.int64)
    last = np.full(size, -1, dtype=np.int64)  # the last word that held the pair
    first = np.full(size if first_mode else 0, NO_FIRST, dtype=np.int64)
    n_rows = 0
    for w in range(counts.shape[0]):
        s = offsets[w]
        c = counts[w]
        for i in range(s, offsets[w + 1] - 1):
            p = np.int64(symbols[i]) * n_base + np.int64(symbols[i + 1])
            count[p] += c
            if last[p] != w:
                last[p] = w
                words[p] += 1
                n_rows += 1
                if first_mode and first[p] == NO_FIRST:  # (words in order: the first)
                    first[p] = (np.int64(w) << 32) | np.int64(i - s)
    n_pairs = 0
    for p in range(size):
        if words[p] > 0:  # (not count: a word of count 0 still lists its pairs)
            n_pairs += 1
    return count, words, first, n_pairs, n_rows


@njit(cache=True, nogil=True)
def _dense_table(count, words, first, n_base, n_pairs, ncols):
    """The pair table of ``_dense_pairs``' counts (the distinct words in ``R_HEAD``, as the
    probing pass leaves it) and ``slot[a * n_base + b]``, each pair's record."""
    rec = _new_table(_pair_capacity(n_pairs), ncols)
    slot = np.full(count.shape[0], -1, dtype=np.int64)
    for p in range(count.shape[0]):
        if words[p] > 0:
            key = ((p // n_base) << 32) | (p % n_base)
            q = _probe(rec, key)
            _init_record(rec, q, key)
            rec[q, R_COUNT] = count[p]
            rec[q, R_HEAD] = words[p]
            if first.shape[0] > 0:
                rec[q, R_FIRST] = first[p]
            slot[p] = q
    return rec, slot


@njit(cache=True, nogil=True)
def _probed_pairs(symbols, offsets, counts, ncols, first_mode, progress, held):
    """First setup pass over a large alphabet: every adjacent pair counted by probing the
    pair table, which grows as it goes, with each pair's number of distinct words in
    ``R_HEAD`` (and under ``first_mode`` its first occurrence). ``held``: the budgeted
    bytes of the kernel's other arrays. Returns ``(fits, rec, n_pairs, n_rows)``: False
    when a growth would exceed the budget; the distinct pairs and the word index rows
    they need."""
    rec = _new_table(_pair_capacity(1), ncols)
    n_pairs = 0
    n_rows = 0
    for w in range(counts.shape[0]):
        s = offsets[w]
        e = offsets[w + 1]
        if e - s < 2:
            continue
        extra = _rehash_bytes(rec, n_pairs + (e - s))
        if extra:
            if not _fits(progress, held + rec.nbytes, extra, 1):
                return False, rec, n_pairs, n_rows
            rec = _rehash(rec, _pair_capacity(n_pairs + (e - s)), False)
        c = counts[w]
        last = (np.int64(w) + 1) << 32
        for i in range(s, e - 1):
            key = (np.int64(symbols[i]) << 32) | np.int64(symbols[i + 1])
            q = _probe(rec, key)
            if rec[q, R_KEY] == EMPTY:
                _init_record(rec, q, key)
                rec[q, R_HEAD] = 0
                n_pairs += 1
            rec[q, R_COUNT] += c
            if rec[q, R_MARK] != last:
                rec[q, R_MARK] = last
                rec[q, R_HEAD] += 1
                n_rows += 1
            if first_mode:
                fk = (np.int64(w) << 32) | np.int64(i - s)
                if fk < rec[q, R_FIRST]:
                    rec[q, R_FIRST] = fk
    return True, rec, n_pairs, n_rows

@njit(cache=True, nogil=True)
def _fill_index(rec, nodes, symbols, wr, n_rows, slot, n_base):
    """Second setup pass: lay each pair's words out as one consecutive run of nodes.

    On entry ``rec[q, R_HEAD]`` holds the number of distinct words of pair q (the first
    pass counted them). Each pair gets the next ``n`` rows; the words are written from the
    run's end backwards, visiting the words last to first, so that a run lists its words
    in increasing order and ``R_HEAD`` ends at the run's first row. ``R_MARK`` is left
    holding the pair's first word (its list holds it: nothing is wrongly skipped later).
    ``slot`` (``_dense_table``'s, or empty): each pair's record by ``a * n_base + b``,
    instead of a probe.
    """
    dense = slot.shape[0] > 0
    for r in range(n_rows):
        nodes[r, 1] = r + 1
    end = 0
    for q in range(rec.shape[0]):
        if rec[q, R_KEY] != EMPTY:
            end += rec[q, R_HEAD]
            nodes[end - 1, 1] = -1
            rec[q, R_HEAD] = end
            rec[q, R_MARK] = 0
    n_words = wr.shape[0] - 1
    for w in range(n_words - 1, -1, -1):
        last = (np.int64(w) + 1) << 32
        for i in range(wr[w, 0], wr[w + 1, 0] - 1):
            if dense:
                q = slot[np.int64(symbols[i]) * n_base + np.int64(symbols[i + 1])]
            else:
                q = _probe(rec, (np.int64(symbols[i]) << 32) | np.int64(symbols[i + 1]))
            if rec[q, R_MARK] != last:
                rec[q, R_MARK] = last
                r = rec[q, R_HEAD] - 1
                rec[q, R_HEAD] = r
                nodes[r, 0] = w


@njit(cache=True, nogil=True, _nrt=False)
def _word_needs(counters, n):
    """``(pairs, index rows, touched entries)`` the tables must hold before a word of ``n``
    symbols is rewritten: at most 2 new pairs, nodes and touches per occurrence. One place
    for the check ``_rewrite_words`` stops at and the room ``train_merges`` then makes."""
    return (counters[C_PAIRS] + n + 2, counters[C_ROWS] + n + 2,
            counters[C_TOUCHED] + 2 * n + 2)


@njit(cache=True, nogil=True, _nrt=False)
def _rewrite_words(rec, nodes, touched, counters, symbols, pos, wr, wr_flat, ring, lookahead,
                   index_rows, A, B, X, stamp, first_mode):
    """Rewrite the words of the merged pair's list (A, B) -> X, applying the neighbour
    deltas, from where ``counters`` says the walk is (``C_LEAD``, ``C_TAIL``, ``C_SEEN``,
    ``C_DONE``). Returns False when every word is done; True, with the walk stopped before
    it, when the next word may need more table, index or ``touched`` rows than there are:
    the caller makes room (growing arrays) and calls again.

    Why a function of its own: a Numba variable assigned in a loop gets an atomic reference
    count increment and decrement per iteration, and the caller reassigns ``rec``, ``nodes``
    and ``touched`` when they grow. Here no array is ever reassigned, so the loop over the
    words pays none (the merge kernel on 100 MB of Linux sources at 32k: 0.63 -> 0.55 s).
    It is itself compiled without reference counting (it never allocates): its eleven array
    arguments otherwise cost an atomic increment and decrement each per call, once per
    merge, 5% of the merge loop's samples (perf, 100 MB of Linux sources).

    The words are visited through a ring of the next ``lookahead`` ones (``ring``, a power
    of two of at least that): a word's row is prefetched when it enters the ring, its
    symbols half way through, so that the misses of many words overlap.
    """
    ring_mask = ring.shape[0] - 1
    half = lookahead // 2
    lead = counters[C_LEAD]
    tail = counters[C_TAIL]
    n_seen = counters[C_SEEN]
    n_done = counters[C_DONE]
    room = False
    while True:
        while lead != -1 and n_seen - n_done < lookahead:
            w = np.int64(nodes[lead, 0])
            tail = lead
            lead = nodes[lead, 1]
            ring[n_seen & ring_mask] = w
            prefetch(wr_flat, 2 * w)
            n_seen += 1
        counters[C_LEAD] = lead
        if n_done == n_seen:
            break
        if n_done + half < n_seen:
            prefetch(symbols, wr[ring[(n_done + half) & ring_mask], 0])
        w = ring[n_done & ring_mask]
        s = wr[w, 0]
        e = wr[w + 1, 0]
        need, need_rows, need_touched = _word_needs(counters, e - s)
        if (4 * need > 3 * rec.shape[0] or need_rows > index_rows
                or need_touched > touched.shape[0]):
            room = True
            break
        n_done += 1
        c = wr[w, 1]
        wkey = w << 32
        i = s
        o = s
        while i < e:
            x = symbols[i]
            if x < 0:
                break  # the end of a word that merges shortened
            if x == A and i + 1 < e and symbols[i + 1] == B:
                if o > s:
                    # (left, A) disappears and (left, X) appears, both starting at left.
                    left = np.int64(symbols[o - 1])
                    fk = wkey | np.int64(pos[o - 1]) if first_mode else 0
                    if not (left == A and A == B):
                        _lower(rec, (left << 32) | A, c, fk)
                    _raise(rec, nodes, touched, counters, (left << 32) | X, c, w, fk, stamp)
                if i + 2 < e and symbols[i + 2] >= 0:
                    # (B, right) disappears (it started at B); (X, right) appears at X.
                    right = np.int64(symbols[i + 2])
                    if not (B == A and right == B):
                        _lower(rec, (B << 32) | right, c,
                               wkey | np.int64(pos[i + 1]) if first_mode else 0)
                    _raise(rec, nodes, touched, counters, (np.int64(X) << 32) | right, c,
                           w, wkey | np.int64(pos[i]) if first_mode else 0, stamp)
                symbols[o] = X
                if first_mode:
                    pos[o] = pos[i]
                o += 1
                i += 2
            else:
                if o != i:
                    symbols[o] = x
                    if first_mode:
                        pos[o] = pos[i]
                o += 1
                i += 1
        if o < i:
            symbols[o] = -1
    counters[C_TAIL] = tail
    counters[C_SEEN] = n_seen
    counters[C_DONE] = n_done
    return room


@njit(cache=True, nogil=True)
def _token_tables(tok_off_base, tok_data_base, base_units, max_merges, n_symbols):
    """The token tables the merges extend: ``(tok_off, tok_data, units, bkeys, cap_ids)``,
    the base tokens' byte offsets and bytes, their lengths in base units (``base_units``,
    or 1 each), and the bytes -> id hash table (to reuse the id of identical bytes), with
    room for ``cap_ids`` ids (every merge removes a symbol: at most ``n_symbols`` merges;
    the tables grow past 4,096 new ids)."""
    n_base = tok_off_base.shape[0] - 1
    cap_ids = n_base + 1 + min(max_merges, n_symbols, 4096)
    tok_off = np.empty(cap_ids + 1, dtype=np.int64)
    tok_off[: n_base + 1] = tok_off_base
    tok_data = np.empty(max(16, 2 * tok_data_base.shape[0]), dtype=np.uint8)
    tok_data[: tok_data_base.shape[0]] = tok_data_base
    units = np.ones(cap_ids, dtype=np.int64)
    if base_units is not None:
        units[:n_base] = base_units
    bkeys = np.full(table_capacity(cap_ids), EMPTY, dtype=np.int64)
    for t in range(n_base):
        _insert_token(bkeys, tok_off, tok_data, t)
    return tok_off, tok_data, units, bkeys, cap_ids


@njit(cache=True, nogil=True, _nrt=False)
def _start_walk(counters, head, n_pairs, n_nodes):
    """``counters`` for a rewrite (``_rewrite_words``) of the list starting at node
    ``head`` (-1: no word), with ``n_pairs`` records and ``n_nodes`` index rows in use."""
    counters[C_PAIRS] = n_pairs
    counters[C_ROWS] = n_nodes
    counters[C_TOUCHED] = 0
    counters[C_FREE] = head
    counters[C_LEAD] = head  # the walk starts at the list's head
    counters[C_TAIL] = -1
    counters[C_SEEN] = 0
    counters[C_DONE] = 0

@njit(cache=True, nogil=True)
def _merged_token(tok_off, tok_data, units, bkeys, n_ids, A, B):
    """The id of token A's bytes followed by B's: an existing token's with those bytes, else
    a new one (``n_ids``) appended to the token tables. Returns ``(X, tok_off, tok_data,
    units, bkeys, n_ids)``, the tables grown when they had no room."""
    h = _token_hash(tok_off, tok_data, A)
    h = hash_units(tok_data, tok_off[B], tok_off[B + 1], h)
    slot = _token_slot(bkeys, tok_off, tok_data, h, A, B)
    if bkeys[slot] != EMPTY:
        return bkeys[slot], tok_off, tok_data, units, bkeys, n_ids
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
    return X, tok_off, tok_data, units, bkeys, n_ids


@njit(cache=True, nogil=True)
def _recorded(out_merges, out_ids, out_counts, n_merges, A, B, X, count):
    """The output arrays with merge ``n_merges`` (``(A, B) -> X`` at ``count``) written,
    grown (capacity doubled) when full: ``(out_merges, out_ids, out_counts)``."""
    if n_merges >= out_merges.shape[0]:
        out_merges = grow(out_merges, 2 * out_merges.shape[0])
        out_ids = grow(out_ids, 2 * out_ids.shape[0])
        out_counts = grow(out_counts, 2 * out_counts.shape[0])
    out_merges[n_merges, 0] = A
    out_merges[n_merges, 1] = B
    out_ids[n_merges] = X
    out_counts[n_merges] = count
    return out_merges, out_ids, out_counts


@njit(cache=True, nogil=True)
def _theta_kept(heap, hn, theta, target, raise_at, tie_mode, tok_off, tok_data, progress):
    """After a merge's pushes: when the heap holds more than ``max(4 * target, raise_at)``
    entries (mostly pairs too rare to be merged), the threshold raised (``_raise_theta``)
    and ``raise_at`` set to twice the entries left (not again before they double: they may
    not have shrunk). Returns ``(hn, theta, raise_at)``."""
    if hn > max(4 * target, raise_at):
        hn, new_theta = _raise_theta(heap, hn, theta, target, tie_mode, tok_off, tok_data)
        if new_theta > theta:
            _event(progress, PROG_RAISES)
        theta = new_theta
        raise_at = 2 * hn
    return hn, theta, raise_at


@njit(cache=True, nogil=True)
def _make_room(rec, nodes, touched, counters, ring, wr, index_rows, index_check_rows,
               progress, held):
    """Room for the word ``_rewrite_words`` stopped at (``ring[C_DONE]``): the pair table
    purged of its dead records or grown, the word index and ``touched`` grown. ``held``:
    the budgeted bytes of the kernel's other arrays. Returns ``(fits, rec, nodes, touched,
    index_rows)``; ``fits`` is False (nothing grown) when the budget has no room."""
    node_bytes = _row_bytes(nodes)
    w = ring[counters[C_DONE] & (ring.shape[0] - 1)]
    s = wr[w, 0]
    e = wr[w + 1, 0]
    need, need_rows, need_touched = _word_needs(counters, e - s)
    dead = 0
    if 4 * need > 3 * rec.shape[0]:
        dead = _count_dead(rec)
        if 16 * dead >= rec.shape[0]:
            # Full, a sixteenth of it dead: delete those in place rather than grow (the
            # next check is then a sixteenth of new pairs away, at least).
            counters[C_PAIRS] -= _purge(rec)
            _event(progress, PROG_PURGES)
            dead = 0
            need = _word_needs(counters, e - s)[0]
    if (4 * need > 3 * rec.shape[0] or need_rows > index_rows
            or need_touched > touched.shape[0]):
        new_cap = 0  # the table's new capacity when it must grow
        if 4 * need > 3 * rec.shape[0]:
            new_cap = max(2 * rec.shape[0], _pair_capacity(need))
        extra = (new_cap * rec.shape[1] * 8 + _grow_bytes(nodes, need_rows)
                 + _grow_bytes(touched, need_touched))
        more_rows = 0
        if need_rows > index_rows:  # new index rows become resident: count a block
            more_rows = max(need_rows, min(index_rows + index_check_rows,
                                           nodes.shape[0])) - index_rows
        if (extra or more_rows) and not _fits(
                progress, held + rec.nbytes + touched.nbytes + node_bytes * index_rows,
                extra + node_bytes * more_rows, 2):
            return False, rec, nodes, touched, index_rows
        index_rows += more_rows
        if new_cap:  # (the dead records are left behind)
            rec = _rehash(rec, new_cap, True)
            _event(progress, PROG_GROWS)
            counters[C_PAIRS] -= dead
        nodes = _grow_q(nodes, need_rows)
        touched = _grow_q(touched, need_touched)
    return True, rec, nodes, touched, index_rows


@njit(cache=True, nogil=True)
def _close_list(rec, nodes, counters, key):
    """After the rewrite of pair ``key``'s words: the pair is dead (its record may have
    moved in a purge or rehash: found by key; an absent pair's free slot is left free),
    and so is its list: what the rewrite did not reuse joins the spare nodes."""
    rec[_probe(rec, key), R_COUNT] = 0
    if counters[C_FREE] != -1:
        nodes[counters[C_TAIL], 1] = counters[C_SPARE]
        counters[C_SPARE] = counters[C_FREE]


@njit(cache=True, nogil=True)
def train_merges(symbols, offsets, counts, tok_off_base, tok_data_base, base_rank, tie_mode,
                 max_merges, max_ids, min_count, max_units, progress, nodes, index_check_rows,
                 lookahead=16, heap_floor=1024, base_units=None, merge_batch=1, dense_base=256):
    """Learn up to ``max_merges`` merges from a word-frequency table.

    Parameters
    ----------
    symbols : int32[total]
        Base ids of all words, concatenated. Rewritten in place (pass a copy).
    offsets : int64[n_words + 1]
        Word boundaries in ``symbols``; fewer than 2**31 words, each shorter than 2**31
        units.
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
    progress : int64[3], int64[6] or int64[N_PROGRESS]
        Shared with the caller while the kernel runs (it releases the GIL):
        ``progress[0]`` is set to the merges done so far; the caller sets ``progress[1]``
        to 1 to ask for an early stop, which the kernel acknowledges in ``progress[2]``.
        With 6 slots, ``progress[3]`` is a byte budget for the kernel's own arrays
        (0: none): before any allocation that would exceed it the kernel stops, sets
        ``progress[2]`` to STOPPED_MEMORY and records the bytes it would have held and
        the phase in ``progress[4]``, ``progress[5]``; the merges returned are then
        incomplete (the caller must not use them). With N_PROGRESS slots, the slots from
        PROG_REBUILDS on count the loop's rarer events.
    nodes : int32[cap, 2] or int64[cap, 2]
        Scratch for the word index (contents ignored; int32 when ``cap`` < 2**31). Grown
        (copied) when too small: pass ``word_index_rows(...)`` rows, allocated with
        np.empty, and it never is.
    index_check_rows : int
        When the word index needs rows beyond those counted so far, the budget is checked
        (and its resident rows counted) for this many rows ahead at once (>= 1; the
        Python side passes ``merge_loop.INDEX_CHECK_ROWS``).
    lookahead : int
        How many words ahead of the one being rewritten are prefetched (>= 1; the Python
        side passes ``merge_loop.LOOKAHEAD_WORDS``).
    heap_floor : int
        The heap holds the pairs above a threshold chosen so that there are about twice
        as many as merges still to do, and at least this many (>= 1; the Python side
        passes ``merge_loop.HEAP_FLOOR``; tests pass 1 to reach the threshold's paths on
        small tables).
    base_units : int64[n_base], optional
        Length of each base token in base units, for ``max_units`` (default: 1 each). To
        continue training from tokens already merged (SuperBPE's stage 2: the base tokens
        are the stage-1 vocabulary, the words their stage-1 encodings), pass their lengths.
    merge_batch : int
        1: exact BPE. k > 1: BatchBPE's passes (``reference._learn``): each pass takes the
        best ``min(k, merges left, ids left)`` pairs and merges, in order, those that no
        better one of them can interfere with (none ends with their left token or starts
        with their right one); the others go back to the heap.
    dense_base : int
        Alphabets of at most this many base tokens count their first pairs in arrays
        indexed by ``a * n_base + b`` (``_dense_pairs``: ``n_base ** 2`` entries of 32-40
        bytes), larger ones by probing the pair table (the Python side passes
        ``merge_loop.DENSE_BASE``; the same merges either way).

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
    # Below 1 these would visit no word (a merge that rewrites nothing) or no pair.
    lookahead = max(1, lookahead)
    heap_floor = max(1, heap_floor)
    first_mode = tie_mode == TIE_FIRST
    ncols = N_RCOLS_FIRST if first_mode else N_RCOLS
    node_bytes = _row_bytes(nodes)
    # Budgeted bytes: the word rows (16 per word), the unit offsets (TIE_FIRST: 4 per
    # symbol), then the pair table, the word index rows in use and the heap as they grow.
    fixed = 16 * (n_words + 1) + (4 * symbols.shape[0] if first_mode else 0)
    if not _fits(progress, 0, fixed + _table_bytes(1, ncols), 1):
        return _no_merges()
    wr = _word_rows(offsets, counts)
    pos = np.empty(symbols.shape[0] if first_mode else 0, dtype=np.int32)
    if first_mode:
        for w in range(n_words):
            for i in range(offsets[w], offsets[w + 1]):
                pos[i] = i - offsets[w]

    # Token bytes, lengths in units, and bytes -> id table (for reusing existing ids).
    tok_off, tok_data, units, bkeys, cap_ids = _token_tables(tok_off_base, tok_data_base,
                                                             base_units, max_merges,
                                                             symbols.shape[0])
    n_ids = n_base

    # First pass: the pair table, with each pair's number of distinct words in R_HEAD.
    slot = np.empty(0, dtype=np.int64)
    if n_base <= dense_base:
        dense = _dense_bytes(n_base, first_mode)
        if not _fits(progress, fixed, dense, 1):
            return _no_merges()
        count, words, first, n_pairs, n_rows = _dense_pairs(symbols, offsets, counts,
                                                            n_base, first_mode)
        if not _fits(progress, fixed + dense, _table_bytes(n_pairs, ncols), 1):
            return _no_merges()
        rec, slot = _dense_table(count, words, first, n_base, n_pairs, ncols)
    else:  # probing the table, which grows as it goes
        fits, rec, n_pairs, n_rows = _probed_pairs(symbols, offsets, counts, ncols, first_mode,
                                                   progress, fixed)
        if not fits:
            return _no_merges()

    # Second pass: the word index, each pair's initial words in one run of rows.
    index_rows = max(16, n_rows)
    extra = _grow_bytes(nodes, index_rows)
    if not _fits(progress, fixed + rec.nbytes + slot.nbytes, extra + node_bytes * index_rows,
                 1):
        return _no_merges()
    nodes = _grow_q(nodes, index_rows)
    _fill_index(rec, nodes, symbols, wr, n_rows, slot, n_base)
    slot = np.empty(0, dtype=np.int64)  # (freed)

    # The heap: the pairs with a count >= theta, about twice the merges still to do.
    theta = _choose_theta(rec, units, max_units,
                          _heap_target(min(max_merges, max_ids - n_ids), n_pairs, heap_floor),
                          min_count)
    hcap = max(16, 2 * _count_at_least(rec, units, max_units, theta))
    held = fixed + rec.nbytes + node_bytes * index_rows
    if not _fits(progress, held, 8 * N_HCOLS * hcap, 1):
        return _no_merges()
    heap = np.empty((hcap, N_HCOLS), dtype=np.int64)
    hn = _fill_heap(heap, rec, units, max_units, theta, tie_mode, base_rank, n_base, tok_off,
                    tok_data)

    out_merges = np.empty((cap_ids, 2), dtype=np.int32)
    out_ids = np.empty(out_merges.shape[0], dtype=np.int32)
    out_counts = np.empty(out_merges.shape[0], dtype=np.int64)
    n_merges = 0
    touched = np.empty(1024, dtype=np.int64)
    counters = np.zeros(N_COUNTERS, dtype=np.int64)
    counters[C_SPARE] = -1
    n_nodes = n_rows
    out_of_memory = False
    raise_at = 0
    ring_mask = 1
    while ring_mask < lookahead:
        ring_mask = 2 * ring_mask + 1
    ring = np.empty(ring_mask + 1, dtype=np.int64)
    wr_flat = wr.reshape(-1)

    # BatchBPE (merge_batch > 1): the pass' pairs, merged one after another (see below).
    n_slots = max(1, merge_batch)
    cand = np.empty((n_slots, 3), dtype=np.int64)  # a pass' candidates: count, tie key, key
    batch = np.empty(n_slots, dtype=np.int64)  # the keys of the pairs it merges, in order
    n_batch = 0
    i_batch = 0
    true_aux = np.int64(0)

    while n_merges < max_merges and n_ids < max_ids:
        if progress[1] != 0:
            progress[2] = STOPPED_ASKED
            break
        if i_batch == n_batch:
            # The next pass: the best m pairs (one without batching), in priority order.
            m = min(n_slots, max_merges - n_merges, max_ids - n_ids)
            n_cand = 0
            while n_cand < m:
                # Pop until the top entry is the true priority of its pair.
                best = -1
                while True:
                    if hn == 0:
                        if theta <= min_count:
                            break  # every eligible pair left is below min_count
                        target = _heap_target(min(max_merges - n_merges, max_ids - n_ids), n_pairs,
                                              heap_floor)
                        new_theta = _choose_theta(rec, units, max_units, target, min_count)
                        # No eligible pair is left at or above theta (each has an entry): lower it.
                        theta = max(min(new_theta, theta - 1), min_count)
                        need = _count_at_least(rec, units, max_units, theta)
                        if need == 0 and theta <= min_count:
                            break
                        extra = _grow_bytes(heap, need)
                        if extra and not _fits(progress, fixed + rec.nbytes + touched.nbytes
                                               + heap.nbytes + node_bytes * index_rows, extra, 2):
                            out_of_memory = True
                            break
                        heap = _grow_q(heap, need)
                        hn = _fill_heap(heap, rec, units, max_units, theta, tie_mode, base_rank,
                                        n_base, tok_off, tok_data)
                        _event(progress, PROG_REBUILDS)
                        continue
                    c = heap[0, H_COUNT]
                    aux = heap[0, H_AUX]
                    key = heap[0, H_KEY]
                    hn -= 1
                    _pop_root(heap, hn, tie_mode, tok_off, tok_data)
                    p = _probe(rec, key)
                    if rec[p, R_KEY] == EMPTY:
                        continue  # the pair died (count 0)
                    cur = rec[p, R_COUNT]
                    if cur < theta or cur <= 0 or cur > c:
                        continue  # below the heap's threshold, or a higher entry of p is queued
                    if first_mode and rec[p, R_DIRTY] != 0:
                        rec[p, R_FIRST] = _find_first(rec, nodes, p, symbols, wr, pos)
                        rec[p, R_DIRTY] = 0
                    true_aux = _tie_key(rec, p, tie_mode, base_rank, n_base)
                    if cur != c or true_aux != aux:
                        hn = _push(heap, hn, cur, true_aux, key, tie_mode, tok_off, tok_data)
                        continue
                    best = p
                    break
                if out_of_memory or best < 0:
                    break
                key = rec[best, R_KEY]
                if rec[best, R_COUNT] < min_count:
                    break  # (cannot happen: theta >= min_count; as the exact loop checks)
                dup = False
                for j in range(n_cand):
                    dup = dup or cand[j, 2] == key
                if not dup:  # (a heap rebuild may list a candidate again)
                    cand[n_cand, 0] = rec[best, R_COUNT]
                    cand[n_cand, 1] = true_aux
                    cand[n_cand, 2] = key
                    n_cand += 1
            if out_of_memory:
                break
            # Room to put candidates back (a heap rebuild may have filled it meanwhile).
            extra = _grow_bytes(heap, hn + n_cand)
            if extra and not _fits(progress, fixed + rec.nbytes + touched.nbytes + heap.nbytes
                                   + node_bytes * index_rows, extra, 2):
                out_of_memory = True
                break
            heap = _grow_q(heap, hn + n_cand)
            # A candidate (a, b) that a better one could interfere with (one ending with a
            # or starting with b) is put back; the others' occurrences are disjoint, and
            # merging one changes no other's count, so they are merged in order.
            n_batch = 0
            i_batch = 0
            for j in range(n_cand):
                a = cand[j, 2] >> 32
                b = cand[j, 2] & LOW32
                safe = True
                for i in range(j):
                    if (cand[i, 2] & LOW32) == a or (cand[i, 2] >> 32) == b:
                        safe = False
                if safe:
                    batch[n_batch] = cand[j, 2]
                    n_batch += 1
                else:
                    hn = _push(heap, hn, cand[j, 0], cand[j, 1], cand[j, 2], tie_mode,
                               tok_off, tok_data)
            if n_batch == 0:
                break
        best = _probe(rec, batch[i_batch])
        i_batch += 1

        best_key = rec[best, R_KEY]
        A = best_key >> 32
        B = best_key & LOW32
        count = rec[best, R_COUNT]

        X, tok_off, tok_data, units, bkeys, n_ids = _merged_token(tok_off, tok_data, units,
                                                                  bkeys, n_ids, A, B)

        out_merges, out_ids, out_counts = _recorded(out_merges, out_ids, out_counts, n_merges,
                                                    A, B, X, count)

        # Rewrite every word that contains (A, B), applying neighbour deltas.
        stamp = n_merges % STAMP_PERIOD + 1
        if stamp == 1 and n_merges > 0:  # the stamps restart: forget the old ones
            for q in range(rec.shape[0]):
                rec[q, R_MARK] &= ~LOW32
        _start_walk(counters, rec[best, R_HEAD], n_pairs, n_nodes)
        while _rewrite_words(rec, nodes, touched, counters, symbols, pos, wr, wr_flat, ring,
                             lookahead, index_rows, A, B, X, stamp, first_mode):
            # The next word needs more room than the tables have: make it, then go on.
            fits, rec, nodes, touched, index_rows = _make_room(
                rec, nodes, touched, counters, ring, wr, index_rows, index_check_rows,
                progress, fixed + heap.nbytes)
            if not fits:
                out_of_memory = True
                break
        if out_of_memory:  # this merge's rewrite is incomplete: stop (the caller raises)
            break
        _close_list(rec, nodes, counters, best_key)
        n_pairs = counters[C_PAIRS]
        n_nodes = counters[C_ROWS]
        n_touched = counters[C_TOUCHED]
        n_merges += 1
        progress[0] = n_merges

        # Push the new priority of every pair this merge raised.
        extra = _grow_bytes(heap, hn + n_touched)
        if extra and not _fits(progress, fixed + rec.nbytes + touched.nbytes + heap.nbytes
                               + node_bytes * index_rows, extra, 2):
            break  # the caller raises: the merges returned are not used
        heap = _grow_q(heap, hn + n_touched)
        for k in range(n_touched):
            q = _probe(rec, touched[k])
            if (rec[q, R_KEY] != EMPTY and rec[q, R_COUNT] >= theta
                    and _eligible(rec, q, units, max_units)):
                hn = _push(heap, hn, rec[q, R_COUNT], _tie_key(rec, q, tie_mode, base_rank,
                                                                 n_base), touched[k], tie_mode,
                           tok_off, tok_data)
        target = _heap_target(min(max_merges - n_merges, max_ids - n_ids), n_pairs,
                              heap_floor)
        hn, theta, raise_at = _theta_kept(heap, hn, theta, target, raise_at, tie_mode, tok_off,
                                          tok_data, progress)

    return out_merges[:n_merges].copy(), out_ids[:n_merges].copy(), out_counts[:n_merges].copy()
