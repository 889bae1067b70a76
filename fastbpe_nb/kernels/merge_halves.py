"""The training kernel on two cores: the word table in two halves, rewritten at once.

``train_merges_halves`` learns exactly the merges of ``merge.train_merges`` (exact BPE, the
TIE_RANKS and TIE_BYTES rules). The merge loop is bound by memory latency, one word after
another, so a second core that walks other words meanwhile overlaps twice the misses.

The words are cut in two halves (at about half the symbols; the caller orders a sorted
table so that each half holds every other word, ``merge_loop.kernel_table``), and each
half has all the
state ``train_merges`` keeps for the whole table: its own pair table (the counts of its
words' pairs), word index, free nodes and raised-pairs list. A merge then

1. is chosen serially from one heap of summed counts: a pair's count is the sum of its
   counts in the two tables, read from both;
2. rewrites both halves' words of the pair at once: the first half on the calling thread,
   the second on a worker thread (``halves_worker``, the same ``merge._rewrite_words`` on
   its half's own arrays, so the two threads write no common memory);
3. pushes every pair raised in either half at its new summed count, each half's raised
   pairs summed on its own thread.

The worker stays inside its kernel for the whole loop and waits on a shared ``mailbox``
(``kernels.sync``: a sequence number stored with release ordering after the command,
loaded with acquire ordering; 0.1-0.4 us a round trip), not in a Numba parallel region,
which started a thread team per merge at 13-60 us each on the team's VM. Each thread owns
its half's arrays: only it writes them, and only it replaces them when they fill (the pair
table grows, the raised list grows; the word index is allocated at its bound and never
moves). The other thread reads a pair table through a view made from the address and
rows its owner publishes in the mailbox (``_table_view``), between two hand-overs: the
calling thread reads the second half's counts to choose a merge, the worker reads the
first half's to sum the pairs it raised. Every write to the second half (its rewrite, the
end of the merged pair's list, the sums) is a command to the worker, however small: a
round trip costs less than probing.

The heap is the lazy heap of ``train_merges`` over summed counts, and its invariant holds
for the same reasons: a summed count falls only through a rewrite (its old, higher entry
stays), and a pair whose summed count rose rose in one half at least, so it was raised
there and is pushed at its new sum. Each half's list of a pair holds only that half's
words, and ``_close_list`` ends both. The threshold's scans (``_choose_theta``,
``_fill_heap``) run on a table of the summed live pairs made for them (``_summed_table``:
once at the start and at each rare rebuild).
"""

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from .hashing import EMPTY
from .merge import (
    C_PAIRS,
    C_ROWS,
    C_TOUCHED,
    H_AUX,
    H_COUNT,
    H_KEY,
    LOW32,
    N_HCOLS,
    N_PROGRESS,
    N_RCOLS,
    PROG_BUDGET,
    PROG_GROWS,
    PROG_PURGES,
    PROG_REBUILDS,
    R_COUNT,
    R_HEAD,
    R_KEY,
    R_MARK,
    STAMP_PERIOD,
    STOPPED_ASKED,
    TIE_FIRST,
    _choose_theta,
    _close_list,
    _count_at_least,
    _dense_pairs,
    _dense_table,
    _event,
    _fill_heap,
    _fill_index,
    _grow_q,
    _heap_target,
    _init_record,
    _key_tie,
    _make_room,
    _merged_token,
    _new_table,
    _pair_capacity,
    _pop_root,
    _probe,
    _probed_pairs,
    _push,
    _recorded,
    _rewrite_words,
    _start_walk,
    _theta_kept,
    _token_tables,
    _word_rows,
)
from .sync import atomic_load, atomic_store, cpu_relax, cpu_yield
#: kernel cache stamp: 917b2fa62d126ef08ecdec9bb45f1bb9dec5d5c126b6476c3920f08923f70f0e

# Slots of the ``mailbox`` (int64[MAILBOX_SLOTS]): the calling thread writes the first
# two cache lines, the worker the third and fourth (a line both wrote would bounce between
# the cores at every write).
M_SEQ = 0  # the last command's number (stored last, with release ordering)
M_CMD = 1  # the command: CMD_REWRITE, CMD_SUMS or CMD_EXIT
M_A = 2  # CMD_REWRITE: the merged pair (A, B), its token X, the merge's stamp
M_B = 3
M_X = 4
M_STAMP = 5  # (CMD_SUMS too)
M_CLEAR = 6  # CMD_REWRITE: 1 when the stamps restart (the marks are cleared first)
M_THETA = 7  # CMD_SUMS: the heap's threshold
M_REC = 8  # where the first half's pair table is (its address), and its rows
M_REC_ROWS = 9
W_DONE = 32  # the last command the worker finished (release ordering)
W_REC = 33  # where the second half's pair table is, and its rows
W_REC_ROWS = 34
W_PAIRS = 35  # the second half's pairs in its table (live or dead)
W_TOUCHED = 36  # the pairs the second half's last rewrite raised
W_CAND = 37  # CMD_SUMS: where the second half's pairs to push are (address, rows) ...
W_CAND_COUNT = 39  # ... and how many
W_FAILED = 40  # set (by the worker's Python caller) when the worker raised
MAILBOX_SLOTS = 64
CMD_REWRITE = 1
CMD_SUMS = 2
CMD_EXIT = 3


@intrinsic
def _as_pointer(typingctx, address):
    """The address ``address`` (an integer) as a pointer, for ``carray``."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return types.voidptr(address), codegen


@njit(cache=True, nogil=True)
def _table_view(mailbox, slot, ncols):
    """The int64[rows, ncols] array whose address and rows are ``mailbox[slot]`` and
    ``mailbox[slot + 1]`` (published by the thread that owns it, and kept alive by it
    until its next replacement; read only between two hand-overs)."""
    return carray(_as_pointer(mailbox[slot]), (mailbox[slot + 1], ncols), np.int64)


@njit(cache=True, nogil=True)
def _publish(mailbox, slot, table):
    """Publish ``table``'s address and rows in ``mailbox[slot:slot + 2]``."""
    mailbox[slot] = table.ctypes.data
    mailbox[slot + 1] = table.shape[0]


@njit(cache=True, nogil=True, _nrt=False)
def _count_in(rec, key):
    """Count of pair ``key`` in one half's table (0 when absent)."""
    q = _probe(rec, key)
    return rec[q, R_COUNT] if rec[q, R_KEY] == key else 0


@njit(cache=True, nogil=True, _nrt=False)
def _list_head(rec, key):
    """First node of pair ``key``'s word list in one half (-1: no word of it there)."""
    q = _probe(rec, key)
    if rec[q, R_KEY] == key and rec[q, R_COUNT] > 0:
        return rec[q, R_HEAD]
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def _wait(mailbox, slot, value, spins_before_yield):
    """Wait until ``mailbox[slot]`` (loaded with acquire ordering) is ``value``; False if
    the worker failed meanwhile (``W_FAILED``). After ``spins_before_yield`` turns, every
    turn yields the CPU (``cpu_yield``)."""
    spins = 0
    while atomic_load(mailbox, slot) != value:
        if atomic_load(mailbox, W_FAILED) != 0:
            return False
        spins += 1
        if spins < spins_before_yield:
            cpu_relax()
        else:
            cpu_yield()
    return True


@njit(cache=True, nogil=True)
def half_setup(symbols, offsets, counts, nodes, n_base, dense_base):
    """One half's word rows, pair table and word index: ``train_merges``' setup (dense
    or probing, with no byte budget), run by each half's thread at the start.

    Parameters
    ----------
    symbols : int16[total] or int32[total]
        The half's base ids, word after word (a view of the table's).
    offsets : int64[n_words + 1]
        Its word boundaries, from 0 (validated by the caller).
    counts : int64[n_words]
        Its words' counts (> 0).
    nodes : int32[rows, 2] or int64[rows, 2]
        Its word index, at its bound (``word_index_rows`` of its symbols and words): it
        must never grow, since only its thread may hold it.
    n_base, dense_base : int
        The base tokens, and the widest alphabet counted densely (``train_merges``).

    Returns
    -------
    wr : int64[n_words + 1, 2]
    rec : int64[cap, N_RCOLS]
    n_pairs, n_rows, index_rows : int
        The distinct pairs, the index rows in use and the index rows counted resident.
    """
    wr = _word_rows(offsets, counts)
    slot = np.empty(0, dtype=np.int64)
    if n_base <= dense_base:
        count, words, first, n_pairs, n_rows = _dense_pairs(symbols, offsets, counts, n_base,
                                                            False)
        rec, slot = _dense_table(count, words, first, n_base, n_pairs, N_RCOLS)
    else:
        _, rec, n_pairs, n_rows = _probed_pairs(symbols, offsets, counts, N_RCOLS, False,
                                                np.zeros(3, dtype=np.int64), 0)
    if n_rows > nodes.shape[0]:
        raise ValueError("half_setup: the word index is below its bound")
    _fill_index(rec, nodes, symbols, wr, n_rows, slot, n_base)
    return wr, rec, n_pairs, n_rows, max(16, n_rows)


@njit(cache=True, nogil=True)
def _add_live(out, rec):
    """Add the live pairs of ``rec`` (count > 0) into ``out``, summing counts."""
    for q in range(rec.shape[0]):
        key = rec[q, R_KEY]
        if key != EMPTY and rec[q, R_COUNT] > 0:
            j = _probe(out, key)
            if out[j, R_KEY] == EMPTY:
                _init_record(out, j, key)
            out[j, R_COUNT] += rec[q, R_COUNT]


@njit(cache=True, nogil=True)
def _summed_table(rec0, rec1):
    """``rec[cap, N_RCOLS]`` int64: every live pair of the two halves with its summed
    count (for the threshold's scans; no word lists)."""
    n = 0
    for q in range(rec0.shape[0]):
        if rec0[q, R_KEY] != EMPTY and rec0[q, R_COUNT] > 0:
            n += 1
    for q in range(rec1.shape[0]):
        if rec1[q, R_KEY] != EMPTY and rec1[q, R_COUNT] > 0:
            n += 1
    out = _new_table(_pair_capacity(n), N_RCOLS)
    _add_live(out, rec0)
    _add_live(out, rec1)
    return out


@njit(cache=True, nogil=True, _nrt=False)
def _raised_sums(touched, n_touched, rec, other, skip_other, stamp, theta, cand):
    """The pairs of ``touched[:n_touched]`` (raised in the half of table ``rec``) whose
    summed count is at least ``theta``: ``cand[k] = (summed count, key)``; returns how
    many. ``skip_other``: leave out the pairs that ``other``'s half raised in this merge
    (``stamp``): they are pushed with its own. Reads both tables, writes neither."""
    n = 0
    for k in range(n_touched):
        key = touched[k]
        q = _probe(other, key)
        c = 0
        if other[q, R_KEY] == key:
            if skip_other and (other[q, R_MARK] & LOW32) == stamp:
                continue
            c = other[q, R_COUNT]
        c += _count_in(rec, key)
        if c >= theta and c > 0:
            cand[n, 0] = c
            cand[n, 1] = key
            n += 1
    return n


@njit(cache=True, nogil=True, _nrt=False)
def _push_eligible(heap, hn, cand, n, units, max_units, tie_mode, base_rank, n_base, tok_off,
                   tok_data):
    """Push the pairs of ``cand[:n]`` ((count, key) rows) whose token would be at most
    ``max_units`` long, with their tie keys; returns the heap's entries."""
    for k in range(n):
        key = cand[k, 1]
        if units[key >> 32] + units[key & LOW32] <= max_units:
            hn = _push(heap, hn, cand[k, 0], _key_tie(key, tie_mode, base_rank, n_base), key,
                       tie_mode, tok_off, tok_data)
    return hn


@njit(cache=True, nogil=True)
def _rewrite_half(rec, nodes, touched, counters, symbols, wr, ring, lookahead, n_pairs,
                  n_nodes, index_rows, index_check_rows, key, X, stamp, clear, events):
    """One half's part of merging pair ``key`` into ``X``: its marks cleared first when
    ``clear`` (the stamps restart), its words rewritten (``_rewrite_words``) with room made
    when its tables fill (``_make_room``; ``events`` counts the purges and growths), and
    the pair's list ended (``_close_list``). Returns ``(rec, nodes, touched, n_pairs,
    n_nodes, index_rows)``: the tables, replaced if they grew (the word index at its bound
    does not), and the half's counts after it."""
    if clear:
        for q in range(rec.shape[0]):
            rec[q, R_MARK] &= ~LOW32
    _start_walk(counters, _list_head(rec, key), n_pairs, n_nodes)
    pos = np.empty(0, dtype=np.int32)  # (unit offsets: TIE_FIRST only)
    wr_flat = wr.reshape(-1)
    A = key >> 32
    B = key & LOW32
    while _rewrite_words(rec, nodes, touched, counters, symbols, pos, wr, wr_flat, ring,
                         lookahead, index_rows, A, B, X, stamp, False):
        _, rec, nodes, touched, index_rows = _make_room(rec, nodes, touched, counters, ring,
                                                        wr, index_rows, index_check_rows,
                                                        events, 0)
    _close_list(rec, nodes, counters, key)
    return rec, nodes, touched, counters[C_PAIRS], counters[C_ROWS], index_rows


@njit(cache=True, nogil=True)
def halves_worker(mailbox, symbols, offsets, counts, nodes, n_base, dense_base, counters,
                  ring, lookahead, index_check_rows, events, spins_before_yield):
    """The second half's thread of ``train_merges_halves``: sets its half up
    (``half_setup``, while the calling thread sets up the first), then runs its commands
    until CMD_EXIT. It owns the second half's arrays (only it writes them) and publishes
    where its pair table and candidates are (``W_REC``, ``W_CAND``).

    Parameters
    ----------
    mailbox : int64[MAILBOX_SLOTS]
        The commands (``M_*``, written by the calling thread) and what the worker reports
        (``W_*``; ``W_DONE`` -1 before the start, 0 once its half is set up).
    symbols, offsets, counts, nodes, n_base, dense_base
        The second half and its word index, as ``half_setup`` takes them (``symbols`` are
        rewritten in place).
    counters : int64[N_COUNTERS]
        Its rewrite counters (``C_SPARE`` -1 at the start).
    ring : int64[power of two > lookahead]
        Its read-ahead ring.
    lookahead, index_check_rows : int
        As for ``train_merges``.
    events : int64[N_PROGRESS]
        Where its table's purges and growths are counted (the caller adds them up).
    spins_before_yield : int
        Turns of a wait before each turn yields the CPU (``merge_loop.HALVES_SPINS``).
    """
    wr, rec, n_pairs, n_nodes, index_rows = half_setup(symbols, offsets, counts, nodes,
                                                       n_base, dense_base)
    _publish(mailbox, W_REC, rec)
    mailbox[W_PAIRS] = n_pairs
    atomic_store(mailbox, W_DONE, 0)
    lookahead = max(1, lookahead)  # (below 1 the rewrite would visit no word)
    touched = np.empty(1024, dtype=np.int64)
    cand = np.empty((1024, 2), dtype=np.int64)
    seen = 0
    while True:
        spins = 0
        while atomic_load(mailbox, M_SEQ) == seen:
            spins += 1
            if spins < spins_before_yield:
                cpu_relax()
            else:
                cpu_yield()
        seen = atomic_load(mailbox, M_SEQ)
        cmd = mailbox[M_CMD]
        if cmd == CMD_EXIT:
            return
        if cmd == CMD_REWRITE:
            key = (mailbox[M_A] << 32) | mailbox[M_B]
            rec, nodes, touched, n_pairs, n_nodes, index_rows = _rewrite_half(
                rec, nodes, touched, counters, symbols, wr, ring, lookahead, n_pairs,
                n_nodes, index_rows, index_check_rows, key, mailbox[M_X], mailbox[M_STAMP],
                mailbox[M_CLEAR] != 0, events)
            _publish(mailbox, W_REC, rec)
            mailbox[W_PAIRS] = n_pairs
            mailbox[W_TOUCHED] = counters[C_TOUCHED]
        elif cmd == CMD_SUMS:
            cand = _grow_q(cand, counters[C_TOUCHED])
            mailbox[W_CAND_COUNT] = _raised_sums(
                touched, counters[C_TOUCHED], rec, _table_view(mailbox, M_REC, rec.shape[1]),
                True, mailbox[M_STAMP], mailbox[M_THETA], cand)
            _publish(mailbox, W_CAND, cand)
        atomic_store(mailbox, W_DONE, seen)


@njit(cache=True, nogil=True)
def _event_add(progress, events):
    """Add the purges and growths counted in ``events`` to ``progress`` (when it has the
    slots)."""
    if progress.shape[0] >= N_PROGRESS:
        progress[PROG_PURGES] += events[PROG_PURGES]
        progress[PROG_GROWS] += events[PROG_GROWS]


@njit(cache=True, nogil=True)
def worker_events(progress, events):
    """``_event_add`` for the caller, once the worker has ended."""
    _event_add(progress, events)


@njit(cache=True, nogil=True)
def post_exit(mailbox):
    """Tell the worker to end (after ``train_merges_halves`` returned or raised)."""
    _post(mailbox, CMD_EXIT)


@njit(cache=True, nogil=True)
def _post(mailbox, cmd):
    """Hand command ``cmd`` (its arguments written) to the worker; returns its number."""
    mailbox[M_CMD] = cmd
    seq = mailbox[M_SEQ] + 1
    atomic_store(mailbox, M_SEQ, seq)
    return seq


@njit(cache=True, nogil=True)
def train_merges_halves(mailbox, symbols0, offsets0, counts0, nodes0, dense_base, counters0,
                        ring0, tok_off_base, tok_data_base, base_rank, tie_mode, max_merges,
                        max_ids, min_count, max_units, progress, index_check_rows, lookahead,
                        heap_floor, base_units, spins_before_yield):
    """``merge.train_merges`` with the words in two halves rewritten on two threads: the
    first half here, the second by ``halves_worker``, started by the caller on the same
    ``mailbox`` (``W_DONE`` -1) and ended by it with ``post_exit`` after this returns or
    raises. Each thread sets its half up itself: no other reference to a half's tables
    exists, so a table that grows frees the one it replaces.

    Parameters
    ----------
    mailbox : int64[MAILBOX_SLOTS]
        Shared with the worker.
    symbols0, offsets0, counts0, nodes0, dense_base, counters0, ring0
        The first half's, as ``halves_worker`` takes the second's.
    tok_off_base, tok_data_base, base_rank, max_merges, max_ids, min_count, max_units,
    index_check_rows, lookahead, heap_floor, base_units
        As for ``train_merges`` (``base_units``: int64[n_base] or None).
    tie_mode : int
        TIE_RANKS or TIE_BYTES (TIE_FIRST is refused: a pair's first occurrence would be
        the earlier of two halves' and each half's index of it).
    progress : int64[3] or int64[N_PROGRESS]
        As for ``train_merges``, without a byte budget (refused: the halves' tables are
        not budgeted).
    spins_before_yield : int
        As for ``halves_worker``.

    Returns
    -------
    merges : int32[n, 2]
    merge_ids : int32[n]
    merge_counts : int64[n]
        As ``train_merges``' (the same arrays for the same table and options).
    """
    if tie_mode == TIE_FIRST:
        raise ValueError("train_merges_halves: TIE_FIRST is not supported")
    if progress.shape[0] > PROG_BUDGET and progress[PROG_BUDGET] > 0:
        raise ValueError("train_merges_halves: a byte budget is not supported")
    n_base = tok_off_base.shape[0] - 1
    lookahead = max(1, lookahead)
    heap_floor = max(1, heap_floor)
    wr0, rec0, n_pairs0, n_nodes0, index_rows0 = half_setup(symbols0, offsets0, counts0,
                                                            nodes0, n_base, dense_base)
    ncols = rec0.shape[1]
    # The purges and growths of this thread's half (the worker counts its own).
    events0 = np.zeros(N_PROGRESS, dtype=np.int64)
    touched0 = np.empty(1024, dtype=np.int64)
    cand0 = np.empty((1024, 2), dtype=np.int64)
    _publish(mailbox, M_REC, rec0)
    if not _wait(mailbox, W_DONE, 0, spins_before_yield):  # the worker's half set up
        raise RuntimeError("train_merges_halves: the worker thread failed")
    tok_off, tok_data, units, bkeys, cap_ids = _token_tables(
        tok_off_base, tok_data_base, base_units, max_merges, 2 * symbols0.shape[0])

    # The heap: the pairs with a summed count >= theta, about twice the merges to do.
    n_ids = n_base
    summed = _summed_table(rec0, _table_view(mailbox, W_REC, ncols))
    theta = _choose_theta(summed, units, max_units,
                          _heap_target(min(max_merges, max_ids - n_ids),
                                       n_pairs0 + mailbox[W_PAIRS], heap_floor), min_count)
    heap = np.empty((max(16, 2 * _count_at_least(summed, units, max_units, theta)),
                     N_HCOLS), dtype=np.int64)
    hn = _fill_heap(heap, summed, units, max_units, theta, tie_mode, base_rank, n_base,
                    tok_off, tok_data)
    summed = _new_table(16, N_RCOLS)  # (freed)

    out_merges = np.empty((cap_ids, 2), dtype=np.int32)
    out_ids = np.empty(out_merges.shape[0], dtype=np.int32)
    out_counts = np.empty(out_merges.shape[0], dtype=np.int64)
    n_merges = 0
    raise_at = 0
    failed = False

    while n_merges < max_merges and n_ids < max_ids:
        if progress[1] != 0:
            progress[2] = STOPPED_ASKED
            break
        rec1 = _table_view(mailbox, W_REC, ncols)  # (the worker's, as it left it)
        # Pop until the top entry is the true (summed) priority of its pair.
        best_key = np.int64(-1)
        count = np.int64(0)
        while True:
            if hn == 0:
                if theta <= min_count:
                    break  # every eligible pair left is below min_count
                summed = _summed_table(rec0, rec1)
                target = _heap_target(min(max_merges - n_merges, max_ids - n_ids),
                                      n_pairs0 + mailbox[W_PAIRS], heap_floor)
                new_theta = _choose_theta(summed, units, max_units, target, min_count)
                # No eligible pair is left at or above theta (each has an entry): lower it.
                theta = max(min(new_theta, theta - 1), min_count)
                need = _count_at_least(summed, units, max_units, theta)
                if need == 0 and theta <= min_count:
                    break
                heap = _grow_q(heap, need)
                hn = _fill_heap(heap, summed, units, max_units, theta, tie_mode, base_rank,
                                n_base, tok_off, tok_data)
                summed = _new_table(16, N_RCOLS)
                _event(progress, PROG_REBUILDS)
                continue
            c = heap[0, H_COUNT]
            aux = heap[0, H_AUX]
            key = heap[0, H_KEY]
            hn -= 1
            _pop_root(heap, hn, tie_mode, tok_off, tok_data)
            cur = _count_in(rec0, key) + _count_in(rec1, key)
            if cur < theta or cur <= 0 or cur > c:
                continue  # dead, below the threshold, or a higher entry of it is queued
            true_aux = _key_tie(key, tie_mode, base_rank, n_base)
            if cur != c or true_aux != aux:
                hn = _push(heap, hn, cur, true_aux, key, tie_mode, tok_off, tok_data)
                continue
            best_key = key
            count = cur
            break
        if best_key < 0 or count < min_count:
            break
        A = best_key >> 32
        B = best_key & LOW32
        X, tok_off, tok_data, units, bkeys, n_ids = _merged_token(tok_off, tok_data, units,
                                                                  bkeys, n_ids, A, B)
        out_merges, out_ids, out_counts = _recorded(out_merges, out_ids, out_counts, n_merges,
                                                    A, B, X, count)

        # Rewrite both halves' words of (A, B): the second on the worker meanwhile.
        stamp = n_merges % STAMP_PERIOD + 1
        clear = stamp == 1 and n_merges > 0  # the stamps restart: forget the old ones
        mailbox[M_A] = A
        mailbox[M_B] = B
        mailbox[M_X] = X
        mailbox[M_STAMP] = stamp
        mailbox[M_CLEAR] = 1 if clear else 0
        seq = _post(mailbox, CMD_REWRITE)
        rec0, nodes0, touched0, n_pairs0, n_nodes0, index_rows0 = _rewrite_half(
            rec0, nodes0, touched0, counters0, symbols0, wr0, ring0, lookahead, n_pairs0,
            n_nodes0, index_rows0, index_check_rows, best_key, X, stamp, clear, events0)
        _publish(mailbox, M_REC, rec0)
        if not _wait(mailbox, W_DONE, seq, spins_before_yield):
            failed = True
            break
        rec1 = _table_view(mailbox, W_REC, ncols)
        n_merges += 1
        progress[0] = n_merges

        # Push the new summed priority of every pair this merge raised in either half,
        # each half's raised pairs summed on its own thread.
        n_touched0 = counters0[C_TOUCHED]
        cand0 = _grow_q(cand0, n_touched0)
        sums_on_worker = mailbox[W_TOUCHED] > 0
        if sums_on_worker:
            mailbox[M_THETA] = theta
            seq = _post(mailbox, CMD_SUMS)
        n_cand0 = _raised_sums(touched0, n_touched0, rec0, rec1, False, stamp, theta, cand0)
        n_cand1 = 0
        if sums_on_worker:
            if not _wait(mailbox, W_DONE, seq, spins_before_yield):
                failed = True
                break
            n_cand1 = mailbox[W_CAND_COUNT]
        heap = _grow_q(heap, hn + n_cand0 + n_cand1)
        hn = _push_eligible(heap, hn, cand0, n_cand0, units, max_units, tie_mode, base_rank,
                            n_base, tok_off, tok_data)
        if n_cand1 > 0:
            hn = _push_eligible(heap, hn, _table_view(mailbox, W_CAND, 2), n_cand1, units,
                                max_units, tie_mode, base_rank, n_base, tok_off, tok_data)
        target = _heap_target(min(max_merges - n_merges, max_ids - n_ids),
                              n_pairs0 + mailbox[W_PAIRS], heap_floor)
        hn, theta, raise_at = _theta_kept(heap, hn, theta, target, raise_at, tie_mode, tok_off,
                                          tok_data, progress)

    if failed:
        raise RuntimeError("train_merges_halves: the worker thread failed")
    _event_add(progress, events0)
    return out_merges[:n_merges].copy(), out_ids[:n_merges].copy(), out_counts[:n_merges].copy()
