"""BoundlessBPE kernels (Schmidt et al. 2025): supermerges between whole pre-tokens.

Training (``fastbpe_nb.boundless``) runs classic BPE on the word table as usual; ordinary
merges never depend on supermerges (a supermerge rewrites no word), so the ordinary merge
stream is that of classic training, and these kernels interleave the supermerges into it:

* ``word_tokens``: for each token of classic training that is a ``BOUNDLESS_WORD``
  (`` ?\\p{L}+``, ``word_flags``), whether a pre-token of its bytes becomes that one token
  with the ordinary merges, and after how many of them.
* ``units_of_words`` / ``units_of_runs``: each pre-token of the corpus as a "unit": a word
  pre-token that training makes one token as that token, or -1 (any other pre-token: it
  never joins, it cuts the runs of units), from the runs of word-like pre-tokens that
  counting kept (``kernels.count``, ``keep_runs``); only the runs of two units or more are
  kept. ``scan_units`` finds the same by scanning the corpus again (training under a memory
  budget, which keeps no runs).
* ``pair_table``: the distinct pairs of adjacent units, their counts and positions (or
  ``pair_half`` on two halves at once, ``joined_pair_halves``, ``fill_positions``).
* ``interleave``: the merge loop: the next ordinary merge or the best supermerge,
  whichever has the higher count, with a lazy max-heap of supermerges whose counts only
  fall (joining a pair takes its neighbours' occurrences away). Cost per supermerge: its
  occurrences.

Encoding: ``token_starts`` / ``join_superwords`` join adjacent single-token pre-tokens by
supermerge rank after the ordinary encoder ran.

``reference.train_boundless`` / ``reference.encode_boundless`` are the specification.
"""

import numpy as np
from numba import njit, prange

from .hashing import EMPTY, _mix, interleaved_get, pair_key, table_capacity, table_slot
from .count import _find_word, _key_slot, _piece_key, _plan_blocks, _run_entry
from .scan import (SCAN_SLACK, _scan_document, _window_buffers, check_scanner_tables,
                   decode_multibyte)
from .unicode_classes import CLS_L
#: kernel cache stamp: ac6912a7b0f149294043b87d6f1e53f185dc21f0562e5d316582af7bb424d585

#: ``interleave``'s step kinds (the kernels write the literals: kernels read no globals).
STEP_ORDINARY = 0
STEP_SUPER = 1


@njit(cache=True, nogil=True)
def _is_word(data, start, end, stage1, stage2):
    """Whether ``data[start:end]`` is `` ?\\p{L}+`` (valid UTF-8 letters, one optional
    leading space), with the scanner's class table (so \\p{L} is the ``regex`` module's)."""
    pos = start
    if pos < end and data[pos] == 0x20:
        pos += 1
    if pos >= end:
        return False
    while pos < end:
        b0 = np.int64(data[pos])
        if b0 < 0x80:
            cp = b0
            n = 1
        else:
            b1 = np.int64(data[pos + 1]) if pos + 1 < end else 0
            b2 = np.int64(data[pos + 2]) if pos + 2 < end else 0
            b3 = np.int64(data[pos + 3]) if pos + 3 < end else 0
            cp, n = decode_multibyte(b0, b1, b2, b3)
            if cp < 0:
                return False
        block = np.int64(stage1[cp >> 8])
        if (stage2[block * 256 + (cp & 0xFF)] & CLS_L) == 0:
            return False
        pos += n
    return True


@njit(cache=True, nogil=True)
def word_flags(tok_off, tok_data, stage1, stage2):
    """``uint8[n_tokens]``: 1 for a token whose bytes are a ``BOUNDLESS_WORD``.

    Parameters
    ----------
    tok_off : int64[n_tokens + 1], tok_data : uint8[*]
        The tokens' bytes.
    stage1, stage2 : the scanner's code-point class table (``_scanner.class_table``).
    """
    n = tok_off.shape[0] - 1
    out = np.zeros(n, dtype=np.uint8)
    for t in range(n):
        if _is_word(tok_data, tok_off[t], tok_off[t + 1], stage1, stage2):
            out[t] = 1
    return out


@njit(cache=True, nogil=True)
def token_slots(tok_off, tok_data, use):
    """A hash table of the tokens with ``use[t] == 1``, keyed as counting keys its pieces
    (``kernels.count._piece_key``: no loop over the bytes; a key of 7 bytes or fewer is the
    bytes themselves, a longer one is compared byte by byte on a match).

    Parameters
    ----------
    tok_off : int64[n_tokens + 1], tok_data : uint8[*]
        The tokens' bytes (unique).
    use : uint8[n_tokens]

    Returns
    -------
    slots : int64[2 * cap]
        Slot i's key at ``2 i`` (``EMPTY``: free) and its token id at ``2 i + 1``, found
        with ``_key_slot(key)``.
    """
    n_use = 0
    for t in range(use.shape[0]):
        n_use += use[t]
    cap = table_capacity(n_use)
    slots = np.full(2 * cap, EMPTY, dtype=np.int64)
    mask = cap - 1
    for t in range(use.shape[0]):
        if use[t]:
            key = _piece_key(tok_data, tok_off[t], tok_off[t + 1])
            i = _key_slot(key) & mask
            while slots[2 * i] != EMPTY:
                i = (i + 1) & mask
            slots[2 * i] = key
            slots[2 * i + 1] = t
    return slots


@njit(cache=True, nogil=True)
def units_of_words(store, offsets, slots, tok_off, tok_data):
    """Each counted word's unit: the token of ``slots`` (``token_slots``) whose bytes it is,
    or -1.

    Parameters
    ----------
    store : uint8[*], offsets : int64[n_words + 1]
        The words' bytes (``WordCounter.indexed_words``; offsets rising within ``store``).
    slots : int64[2 * cap], tok_off : int64[n_tokens + 1], tok_data : uint8[*]
        ``token_slots``' table and the tokens' bytes.

    Returns
    -------
    int32[n_words]
    """
    n_words = offsets.shape[0] - 1
    mask = (slots.shape[0] >> 1) - 1
    unit = np.empty(n_words, dtype=np.int32)
    for w in range(n_words):
        s = offsets[w]
        e = offsets[w + 1]
        unit[w] = _find_word(slots, mask, _piece_key(store, s, e), tok_data, tok_off, store, s,
                             e - s)
    return unit


@njit(cache=True, nogil=True)
def units_of_runs(runs, unit, out, at):
    """The runs counting kept as ``scan_units`` gives them: each word as its unit, the runs
    of two units or more, each followed by one -1 (a word that is no unit cuts its run),
    written to ``out`` from ``at`` on.

    Parameters
    ----------
    runs : int32[n]
        Word indices, each run closed by a -1 (a part of ``WordCounter.word_runs``; every
        index below ``unit.shape[0]``, checked by the caller).
    unit : int32[n_words]
        Each word's unit or -1 (``units_of_words``).
    out : int32[>= at + n]
        Where the units go (a run's units are at most its words).
    at : int

    Returns
    -------
    int
        Where the next part's units go (``out[at:end]`` holds this part's).
    """
    n = first = at  # (the open run starts at first)
    for r in range(runs.shape[0]):
        n, first = _run_entry(out, n, first, -1 if runs[r] < 0 else unit[runs[r]])
    return first  # (runs end closed: nothing is left open)


@njit(cache=True, nogil=True, parallel=True)
def scan_units(data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
               stream_bytes, chunk_bytes, slots, tok_off, tok_data, n_blocks):
    """Pre-tokenize a batch with a named pattern and write its runs of units, in one pass
    (no piece offsets written). A piece's unit is its token when it is one of the tokens in
    ``slots`` (a word pre-token that training makes one token), else -1; the runs of two
    units or more are kept, each followed by one -1, and a run never spans documents
    (they never join). A unit alone is in no pair, so no supermerge can take it: it is
    left out (on 100 MB of Linux sources 22.6 M units shrink to 7.3 M, and every later pass
    over them with it). The batch is cut into ``n_blocks`` byte ranges as counting cuts it
    (``kernels.count._plan_blocks``: at documents or safe cuts), scanned in parallel, each
    into its own region of the output, then the regions are put end to end.

    A safe cut follows a newline after a graphic character: no piece spans it, and the
    piece before it ends with the newline, so it is not a unit and no run spans it either.

    Parameters
    ----------
    data : uint8[n_bytes]
        The batch's UTF-8 bytes (special tokens already cut out).
    doc_offsets : int64[n_docs + 1]
        Document boundaries in ``data`` (validated, non-decreasing).
    pattern_id, stage1, stage2, tables, window_bytes, stream_bytes
        As ``kernels.scan.scan_batch``.
    chunk_bytes : int
        Bytes scanned into a small piece buffer at a time (``>= 1``).
    slots : int64[cap], tok_off : int64[n_tokens + 1], tok_data : uint8[*]
        ``token_slots``' table and the tokens' bytes.
    n_blocks : int
        Byte ranges scanned in parallel (``>= 1``).

    Returns
    -------
    units : int32[n]
        The runs of two units or more, each followed by one -1.
    """
    bounds, first_doc, out, lengths = _units_plan(data, doc_offsets, tables, n_blocks)
    for b in prange(n_blocks):
        _units_one(b, data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
                   stream_bytes, chunk_bytes, slots, tok_off, tok_data, bounds, first_doc, out,
                   lengths)
    return _joined_regions(out, bounds, lengths, doc_offsets[0])


@njit(cache=True, nogil=True)
def scan_units_serial(data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
                      stream_bytes, chunk_bytes, slots, tok_off, tok_data, n_blocks):
    """``scan_units`` on the calling thread only (a forked child, see ``parallel.py``).
    Same parameters and result."""
    bounds, first_doc, out, lengths = _units_plan(data, doc_offsets, tables, n_blocks)
    for b in range(n_blocks):
        _units_one(b, data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
                   stream_bytes, chunk_bytes, slots, tok_off, tok_data, bounds, first_doc, out,
                   lengths)
    return _joined_regions(out, bounds, lengths, doc_offsets[0])


@njit(cache=True, nogil=True)
def _units_plan(data, doc_offsets, tables, n_blocks):
    """``scan_units``' blocks (``_plan_blocks``), its output (block b's region at
    ``2 (bounds[b] - doc_offsets[0])``: a piece is a byte or more and gives at most two
    outputs, so a region of twice the block's bytes) and the blocks' output lengths."""
    check_scanner_tables(tables)
    bounds, first_doc = _plan_blocks(data, doc_offsets, n_blocks)
    n_bytes = doc_offsets[doc_offsets.shape[0] - 1] - doc_offsets[0]
    out = np.empty(2 * n_bytes + 1, dtype=np.int32)
    return bounds, first_doc, out, np.zeros(n_blocks, dtype=np.int64)


@njit(cache=True, nogil=True)
def _units_one(b, data, doc_offsets, pattern_id, stage1, stage2, tables, window_bytes,
               stream_bytes, chunk_bytes, slots, tok_off, tok_data, bounds, first_doc, out,
               lengths):
    """Block ``b`` of ``scan_units``: its runs into its own region of ``out``, their number
    into ``lengths[b]`` (no sharing)."""
    lengths[b] = _units_range(data, doc_offsets, first_doc[b], bounds[b], bounds[b + 1],
                              pattern_id, stage1, stage2, tables, window_bytes, stream_bytes,
                              chunk_bytes, slots, tok_off, tok_data, out,
                              2 * (bounds[b] - doc_offsets[0]))


@njit(cache=True, nogil=True)
def _joined_regions(out, bounds, lengths, start):
    """The blocks' regions of ``out`` (block b's at ``2 (bounds[b] - start)``, ``lengths[b]``
    long) end to end, as a new array."""
    units = np.empty(lengths.sum(), dtype=np.int32)
    n = 0
    for b in range(lengths.shape[0]):
        at = 2 * (bounds[b] - start)
        units[n:n + lengths[b]] = out[at:at + lengths[b]]
        n += lengths[b]
    return units


@njit(cache=True, nogil=True)
def _units_range(data, doc_offsets, d, lo, hi, pattern_id, stage1, stage2, tables,
                 window_bytes, stream_bytes, chunk_bytes, slots, tok_off, tok_data, out, at):
    """Scan the bytes ``lo .. hi`` (documents from ``d`` on, each cut to the range) a chunk
    at a time and write their runs of units to ``out[at:]`` (``count._run_entry``: a unit
    alone is written, then taken back). Returns how many were written."""
    n_docs = doc_offsets.shape[0] - 1
    window = window_bytes
    words, char_offsets = _window_buffers(pattern_id, window)
    pieces = np.empty(chunk_bytes + window + SCAN_SLACK, dtype=np.int64)
    mask = (slots.shape[0] >> 1) - 1
    n = first = at  # (the open run starts at first)
    pos = lo
    while d < n_docs and doc_offsets[d] < hi:
        seg_end = min(doc_offsets[d + 1], hi)
        pos = max(pos, doc_offsets[d])
        while pos < seg_end:
            pieces[0] = pos
            next_pos, n_pieces, pieces, window, words, char_offsets = _scan_document(
                data, pos, seg_end, pos + chunk_bytes, pattern_id, stage1, stage2, tables,
                window, stream_bytes, words, char_offsets, pieces, 0)
            for k in range(n_pieces):
                s = pieces[k]
                e = pieces[k + 1]
                unit = -1
                # A word pre-token starts with a space, an ASCII letter or a lead byte
                # (a shortcut only: the table holds word tokens alone).
                b0 = data[s]
                if b0 == 0x20 or b0 >= 0xC0 or (0x41 <= b0 <= 0x5A) or (0x61 <= b0 <= 0x7A):
                    unit = _find_word(slots, mask, _piece_key(data, s, e), tok_data, tok_off,
                                      data, s, e - s)
                n, first = _run_entry(out, n, first, unit)
            pos = next_pos
        n, first = _run_entry(out, n, first, -1)  # the document (or the block) ends a run
        d += 1
    return n - at


@njit(cache=True, nogil=True)
def word_tokens(store, woff, n_words, rank_keys, rank_vals):
    """Each word encoded with the ordinary merges, as training's rewrite would make it.

    Parameters
    ----------
    store : uint8[*], woff : int64[n_words + 1]
        The words' bytes.
    rank_keys, rank_vals : int64[cap]
        ``hashing.build_rank_table`` of the ordinary (classic) merges: pair -> rank, id.

    Returns
    -------
    token : int32[n_words]
        The single token the word becomes, or -1 when it stays several tokens.
    ready : int64[n_words]
        How many ordinary merges are done when it becomes that token: one more than the
        highest rank applied (merges apply in rank order, as training applies them), 0 for
        a one-byte word.
    """
    token = np.full(n_words, -1, dtype=np.int32)
    ready = np.zeros(n_words, dtype=np.int64)
    seq = np.empty(64, dtype=np.int64)
    rank = np.empty(64, dtype=np.int64)  # rank[i]: packed (rank, id) of (seq[i], seq[i+1])
    for w in range(n_words):
        n = woff[w + 1] - woff[w]
        if seq.shape[0] < n:
            seq = np.empty(2 * n, dtype=np.int64)
            rank = np.empty(2 * n, dtype=np.int64)
        for k in range(n):
            seq[k] = store[woff[w] + k]
        for i in range(n - 1):
            rank[i] = _rank_of(rank_keys, rank_vals, seq[i], seq[i + 1])
        top = np.int64(-1)
        while n > 1:
            # The lowest rank, leftmost (each pair looked up once, its neighbours again
            # after a merge: about 3 look-ups per byte, not one per pair per merge).
            best_i = -1
            for i in range(n - 1):
                if rank[i] >= 0 and (best_i < 0 or (rank[i] >> 32) < (rank[best_i] >> 32)):
                    best_i = i
            if best_i < 0:
                break
            best = rank[best_i]
            seq[best_i] = best & 0xFFFFFFFF
            for k in range(best_i + 1, n - 1):
                seq[k] = seq[k + 1]
                rank[k] = rank[k + 1]
            n -= 1
            if best_i > 0:
                rank[best_i - 1] = _rank_of(rank_keys, rank_vals, seq[best_i - 1], seq[best_i])
            if best_i < n - 1:
                rank[best_i] = _rank_of(rank_keys, rank_vals, seq[best_i], seq[best_i + 1])
            if (best >> 32) > top:
                top = best >> 32
        if n == 1:
            token[w] = seq[0]
            ready[w] = top + 1
    return token, ready


@njit(cache=True, nogil=True)
def _rank_of(rank_keys, rank_vals, a, b):
    """``(rank << 32) | id`` of the merge of ``(a, b)``, or -1."""
    slot = table_slot(rank_keys, pair_key(a, b))
    if rank_keys[slot] == EMPTY:
        return np.int64(-1)
    return rank_vals[slot]


@njit(cache=True, nogil=True)
def final_merges(kind, which, c_merges, c_ids, left_token, right_token, n_classic):
    """The merges in final ids: tokens are numbered in the order the steps make them.

    Parameters
    ----------
    kind, which : ``interleave``'s steps (uint8[n], int64[n]).
    c_merges : int32[m, 2], c_ids : int64[m]
        Classic training's merges and the ids they made (classic ids).
    left_token, right_token : int32[n_pairs]
        Each unit pair's two tokens (classic ids).
    n_classic : int
        Number of classic regular ids.

    Returns
    -------
    merges : int32[n, 2]
    made : int32[n]
        The id each merge makes (an ordinary merge whose bytes exist reuses their id).
    final : int64[n_classic]
        Each classic id's final id (-1: a token no step made).
    """
    final = np.full(n_classic, -1, dtype=np.int64)
    for i in range(256):
        final[i] = i
    next_id = 256
    n = kind.shape[0]
    merges = np.empty((n, 2), dtype=np.int32)
    made = np.empty(n, dtype=np.int32)
    for s in range(n):
        w = which[s]
        if kind[s] == 1:  # STEP_SUPER
            merges[s, 0] = final[left_token[w]]
            merges[s, 1] = final[right_token[w]]
            made[s] = next_id
            next_id += 1
            continue
        merges[s, 0] = final[c_merges[w, 0]]
        merges[s, 1] = final[c_merges[w, 1]]
        if final[c_ids[w]] < 0:
            final[c_ids[w]] = next_id
            next_id += 1
        made[s] = final[c_ids[w]]
    return merges, made, final


@njit(cache=True, nogil=True)
def _doubled_pairs(keys, left, right, n_pairs):
    """``pair_table``'s hash table (pair key -> index) at twice the slots, holding pairs
    ``0 .. n_pairs - 1``: ``(keys, vals)``."""
    keys = np.full(2 * keys.shape[0], EMPTY, dtype=np.int64)
    vals = np.zeros(keys.shape[0], dtype=np.int64)
    for p in range(n_pairs):
        key = pair_key(left[p], right[p])
        i = table_slot(keys, key)
        keys[i] = key
        vals[i] = p
    return keys, vals


@njit(cache=True, nogil=True)
def pair_table(units):
    """The distinct pairs of adjacent units (both word indices) and where they occur.

    Parameters
    ----------
    units : int32[n]
        Runs of unit tokens, a -1 after each (``scan_units``' output, over all batches).

    Returns
    -------
    pid : int32[n]
        At each position ``q`` the pair ``(units[q], units[q + 1])``'s index, or -1.
    left, right : int32[n_pairs]
        The pairs' words, in order of first occurrence.
    count : int64[n_pairs]
        Occurrences (overlapping: ``A A A`` holds two ``(A, A)``).
    occ_off : int64[n_pairs + 1], occ_pos : int64[n_occurrences]
        Each pair's positions, ascending.
    """
    n = units.shape[0]
    pid = np.full(n, -1, dtype=np.int32)
    left, right, count, _, _, n_pairs = _pairs_of(units, 0, n, pid)
    occ_off = np.zeros(n_pairs + 1, dtype=np.int64)
    for p in range(n_pairs):
        occ_off[p + 1] = occ_off[p] + count[p]
    occ_pos = np.empty(occ_off[n_pairs], dtype=np.int64)
    fill_positions(pid, 0, n, occ_off[:n_pairs].copy(), occ_pos, np.empty(0, np.int64))
    return pid, left[:n_pairs].copy(), right[:n_pairs].copy(), count[:n_pairs].copy(), \
        occ_off, occ_pos


@njit(cache=True, nogil=True)
def pair_half(units, lo, hi, pid):
    """``pair_table``'s pairs of ``units[lo:hi]`` alone (``lo`` just after a -1, or 0; ``hi``
    just after one, or ``n``: no pair spans them), numbered by first occurrence there:
    ``pid[lo:hi]`` written, and ``(left, right, count, keys, vals, n_pairs)`` (``keys`` /
    ``vals``: its hash table, for ``joined_pair_halves``). Two halves run at once
    (``boundless.pair_table_of``)."""
    return _pairs_of(units, lo, hi, pid)


@njit(cache=True, nogil=True)
def _pairs_of(units, lo, hi, pid):
    """The pairs of ``units[lo:hi]``: see ``pair_half``."""
    n_pos = 0  # positions that hold a pair: at most that many pairs
    for q in range(lo, hi - 1):
        if units[q] >= 0 and units[q + 1] >= 0:
            n_pos += 1
    # The table starts small and doubles at half full: the distinct pairs are far fewer
    # than the positions (a table for all of them took 512 MiB of fresh pages and most of
    # this kernel's time on 100 MB of Linux sources).
    keys = np.full(table_capacity(min(n_pos, 1 << 15)), EMPTY, dtype=np.int64)
    vals = np.zeros(keys.shape[0], dtype=np.int64)
    left = np.empty(max(n_pos, 1), dtype=np.int32)
    right = np.empty(max(n_pos, 1), dtype=np.int32)
    count = np.zeros(max(n_pos, 1), dtype=np.int64)
    n_pairs = 0
    for q in range(lo, hi - 1):
        a = units[q]
        b = units[q + 1]
        if a < 0 or b < 0:
            pid[q] = -1
            continue
        key = pair_key(a, b)
        # The probe written out, not table_slot: a call per position that takes the
        # array (its reference count updated each time) made this loop 1.5x slower.
        mask = keys.shape[0] - 1
        i = _mix(key) & mask
        while keys[i] != key and keys[i] != EMPTY:
            i = (i + 1) & mask
        if keys[i] == EMPTY:
            if 2 * (n_pairs + 1) > keys.shape[0]:
                keys, vals = _doubled_pairs(keys, left, right, n_pairs)
                i = table_slot(keys, key)
            keys[i] = key
            vals[i] = n_pairs
            left[n_pairs] = a
            right[n_pairs] = b
            p = n_pairs
            n_pairs += 1
        else:
            p = vals[i]
        pid[q] = p
        count[p] += 1
    if hi > lo:
        pid[hi - 1] = -1  # (no pair starts at a part's last position)
    return left, right, count, keys, vals, n_pairs


@njit(cache=True, nogil=True)
def joined_pair_halves(pid, mid, left0, right0, count0, keys0, vals0, n0, left1, right1,
                       count1, n1):
    """``pair_table``'s pairs from two ``pair_half`` results (positions ``0 .. mid`` and
    ``mid .. n``): the first half's pairs keep their numbers, the second's new ones follow
    in their order of first occurrence (so all are in order of first occurrence).

    Returns
    -------
    left, right : int32[n_pairs], count : int64[n_pairs], occ_off : int64[n_pairs + 1]
        As ``pair_table``'s.
    start0, start1 : int64[n_pairs]
        Where each half's positions of each pair go in ``occ_pos`` (the first half's
        first: positions ascending), for ``fill_positions``.
    to_global : int64[n1]
        Each of the second half's pairs' number (``fill_positions`` renumbers
        ``pid[mid:]`` with it as it reads it).
    """
    to_global = np.empty(max(n1, 1), dtype=np.int64)
    n_pairs = n0
    mask = keys0.shape[0] - 1
    for j in range(n1):
        key = pair_key(left1[j], right1[j])
        i = _mix(key) & mask
        while keys0[i] != key and keys0[i] != EMPTY:
            i = (i + 1) & mask
        if keys0[i] == key:
            to_global[j] = vals0[i]
        else:
            to_global[j] = n_pairs
            n_pairs += 1
    left = np.empty(n_pairs, dtype=np.int32)
    right = np.empty(n_pairs, dtype=np.int32)
    count = np.zeros(n_pairs, dtype=np.int64)
    left[:n0] = left0[:n0]
    right[:n0] = right0[:n0]
    count[:n0] = count0[:n0]
    for j in range(n1):
        p = to_global[j]
        left[p] = left1[j]
        right[p] = right1[j]
        count[p] += count1[j]
    occ_off = np.zeros(n_pairs + 1, dtype=np.int64)
    for p in range(n_pairs):
        occ_off[p + 1] = occ_off[p] + count[p]
    start0 = occ_off[:n_pairs].copy()
    start1 = occ_off[:n_pairs].copy()
    for p in range(n0):
        start1[p] += count0[p]
    return left, right, count, occ_off, start0, start1, to_global[:n1]


@njit(cache=True, nogil=True)
def fill_positions(pid, lo, hi, start, occ_pos, to_global):
    """Write each position ``q`` of ``lo .. hi`` that holds a pair at ``occ_pos[start[p]]``
    (``p = pid[q]``), ``start[p]`` then one on: the pairs' positions, ascending. Two halves
    at once write disjoint places (``joined_pair_halves``' starts). ``to_global`` (or
    empty): ``pid[q]`` is a half's own number, made global here first."""
    remap = to_global.shape[0] > 0
    for q in range(lo, hi):
        p = pid[q]
        if p >= 0:
            if remap:
                p = to_global[p]
                pid[q] = p
            occ_pos[start[p]] = q
            start[p] += 1


@njit(cache=True, nogil=True, inline="always")
def _better(c1, t1, c2, t2):
    """Heap order: the higher count, then the smaller tie key."""
    return c1 > c2 or (c1 == c2 and t1 < t2)


@njit(cache=True, nogil=True, inline="always")
def _push(hc, ht, hp, size, c, t, p):
    i = size
    hc[i] = c
    ht[i] = t
    hp[i] = p
    while i > 0:
        parent = (i - 1) >> 1
        if not _better(hc[i], ht[i], hc[parent], ht[parent]):
            break
        hc[i], hc[parent] = hc[parent], hc[i]
        ht[i], ht[parent] = ht[parent], ht[i]
        hp[i], hp[parent] = hp[parent], hp[i]
        i = parent
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def _pop(hc, ht, hp, size):
    size -= 1
    hc[0] = hc[size]
    ht[0] = ht[size]
    hp[0] = hp[size]
    i = 0
    while True:
        l = 2 * i + 1
        if l >= size:
            break
        best = l
        r = l + 1
        if r < size and _better(hc[r], ht[r], hc[l], ht[l]):
            best = r
        if not _better(hc[best], ht[best], hc[i], ht[i]):
            break
        hc[i], hc[best] = hc[best], hc[i]
        ht[i], ht[best] = ht[best], ht[i]
        hp[i], hp[best] = hp[best], hp[i]
        i = best
    return size


@njit(cache=True, nogil=True)
def interleave(ord_count, ord_new, n_base, max_merges, max_ids, min_count, count, ready,
               tie, order, pid, occ_off, occ_pos, n_units):
    """The BoundlessBPE merge loop: ordinary merges (in classic order) and supermerges.

    Parameters
    ----------
    ord_count : int64[m]
        The count of each ordinary merge of classic training (non-increasing).
    ord_new : uint8[m]
        1 when that merge makes a new token (0: its bytes exist, the id is reused).
    n_base : int
        Ids before the first merge (256).
    max_merges, max_ids, min_count : int
        Stop after ``max_merges`` merges, at ``max_ids`` ids, below ``min_count`` (>= 1).
    count : int64[n_pairs]
        Each unit pair's occurrences (``pair_table``); lowered here as pairs join.
    ready : int64[n_pairs]
        Ordinary merges after which both words are single tokens (-1: never, or too long).
    tie : int64[n_pairs]
        Tie key among supermerges of equal count (smaller first).
    order : int64[n_ready]
        The pairs with ``ready >= 0``, by ``ready``.
    pid : int32[n_units], occ_off : int64[n_pairs + 1], occ_pos : int64[*]
        ``pair_table``'s pair of each position and positions of each pair.
    n_units : int
        Length of the unit array.

    Returns
    -------
    kind : uint8[n_steps]
        ``STEP_ORDINARY`` or ``STEP_SUPER`` per merge, in rank order.
    which : int64[n_steps]
        The ordinary merge's index, or the pair's index.
    step_count : int64[n_steps]
        The count the merge was chosen with.
    """
    n_pairs = count.shape[0]
    m = ord_count.shape[0]
    joined = np.zeros(n_units + 1, dtype=np.uint8)
    done = np.zeros(n_pairs, dtype=np.uint8)
    cap = order.shape[0] + 1
    hc = np.empty(cap, dtype=np.int64)
    ht = np.empty(cap, dtype=np.int64)
    hp = np.empty(cap, dtype=np.int64)
    size = 0
    limit = min(max_merges, m + order.shape[0])
    kind = np.empty(limit, dtype=np.uint8)
    which = np.empty(limit, dtype=np.int64)
    step_count = np.empty(limit, dtype=np.int64)
    steps = 0
    k = 0
    ptr = 0
    n_ids = n_base
    while steps < max_merges and n_ids < max_ids:
        while ptr < order.shape[0] and ready[order[ptr]] <= k:
            p = order[ptr]
            size = _push(hc, ht, hp, size, count[p], tie[p], p)
            ptr += 1
        # Lazy heap: counts only fall, so a popped entry with a stale count goes back
        # with its current one (a pair is in the heap once).
        while size > 0:
            p = hp[0]
            if hc[0] == count[p]:
                break
            size = _pop(hc, ht, hp, size)
            size = _push(hc, ht, hp, size, count[p], tie[p], p)
        best_super = hc[0] if size > 0 else 0
        best_ordinary = ord_count[k] if k < m else 0
        if max(best_super, best_ordinary) < min_count:
            break
        if k < m and best_ordinary >= best_super:  # ordinary first on equal counts
            kind[steps] = 0  # STEP_ORDINARY
            which[steps] = k
            step_count[steps] = best_ordinary
            if ord_new[k]:
                n_ids += 1
            k += 1
            steps += 1
            continue
        p = hp[0]
        size = _pop(hc, ht, hp, size)
        kind[steps] = 1  # STEP_SUPER
        which[steps] = p
        step_count[steps] = count[p]
        done[p] = 1
        count[p] = 0
        n_ids += 1
        steps += 1
        # Join the pair's positions left to right; a position's neighbours lose the
        # occurrence that shared a unit with it (a joined unit never joins again).
        for o in range(occ_off[p], occ_off[p + 1]):
            q = occ_pos[o]
            if joined[q] or joined[q + 1]:
                continue
            joined[q] = 1
            joined[q + 1] = 1
            if q > 0 and pid[q - 1] >= 0 and not joined[q - 1]:
                count[pid[q - 1]] -= 1
            if pid[q + 1] >= 0 and not joined[q + 2]:
                count[pid[q + 1]] -= 1
        # Drop finished pairs from the top (their entries are not refreshed above).
        while size > 0 and done[hp[0]]:
            size = _pop(hc, ht, hp, size)
    return kind[:steps].copy(), which[:steps].copy(), step_count[:steps].copy()


@njit(cache=True, nogil=True)
def token_bytes_of(ids, doc_offsets, tok_off, tok_data, n_regular):
    """The bytes of encoded documents, cut into segments at special tokens.

    Parameters
    ----------
    ids : int32[n]
        Token ids (validated: ``0 <= id``; ids ``>= n_regular`` are special tokens).
    doc_offsets : int64[n_docs + 1]
        Document boundaries in ``ids``.
    tok_off : int64[n_regular + 1], tok_data : uint8[*]
        Each regular token's bytes.

    Returns
    -------
    data : uint8[n_bytes]
        The regular tokens' bytes, concatenated.
    tok_start : int64[n + 1]
        Byte offset of each token in ``data`` (a special token has none: its start
        equals the next token's).
    seg_bytes : int64[n_seg + 1], seg_tok : int64[n_seg + 1]
        Each segment's first byte and first token; a document is a segment, cut at every
        special token (the special token belongs to no segment).
    """
    n = ids.shape[0]
    total = 0
    for i in range(n):
        t = ids[i]
        if t < n_regular:
            total += tok_off[t + 1] - tok_off[t]
    data = np.empty(total, dtype=np.uint8)
    tok_start = np.empty(n + 1, dtype=np.int64)
    n_docs = doc_offsets.shape[0] - 1
    seg_bytes = np.empty(n + n_docs + 1, dtype=np.int64)
    seg_tok = np.empty(n + n_docs + 1, dtype=np.int64)
    n_seg = 0
    pos = 0
    for d in range(n_docs):
        seg_bytes[n_seg] = pos
        seg_tok[n_seg] = doc_offsets[d]
        n_seg += 1
        for i in range(doc_offsets[d], doc_offsets[d + 1]):
            t = ids[i]
            tok_start[i] = pos
            if t >= n_regular:
                # The segment ends before the special token; a new one starts after it.
                seg_bytes[n_seg] = pos
                seg_tok[n_seg] = i  # (the segment of the special token alone: no pieces)
                n_seg += 1
                seg_bytes[n_seg] = pos
                seg_tok[n_seg] = i + 1
                n_seg += 1
                continue
            a = tok_off[t]
            b = tok_off[t + 1]
            data[pos:pos + b - a] = tok_data[a:b]
            pos += b - a
    tok_start[n] = pos
    seg_bytes[n_seg] = pos
    seg_tok[n_seg] = n
    return data, tok_start, seg_bytes[:n_seg + 1].copy(), seg_tok[:n_seg + 1].copy()


@njit(cache=True, nogil=True)
def join_superwords(ids, doc_offsets, tok_start, seg_tok, pieces, seg_pieces, joinable,
                    super_table):
    """Join adjacent single-token word pre-tokens by supermerge rank (``encode_boundless``).

    Parameters
    ----------
    ids : int32[n], doc_offsets : int64[n_docs + 1]
        The ordinary encoder's ids per document.
    tok_start : int64[n + 1], seg_tok : int64[n_seg + 1]
        ``token_bytes_of``'s token byte offsets and segments' first tokens.
    pieces : int64[n_pieces + 1], seg_pieces : int64[n_seg + 1]
        The pre-tokens of the segments' bytes (``pretokenize.piece_offsets``).
    joinable : uint8[n_regular]
        1 for a token whose bytes are a ``BOUNDLESS_WORD``.
    super_table : int64[2 * cap]
        ``interleave_table`` of the supermerges: pair -> ``(rank << 32) | new id``.

    Returns
    -------
    out : int32[n_out], out_offsets : int64[n_docs + 1]
        The ids with every joined pair replaced by its superword.
    """
    n = ids.shape[0]
    n_seg = seg_tok.shape[0] - 1
    # unit_tok[i] >= 0: token i is a whole joinable pre-token (then its piece's index).
    whole = np.zeros(n + 1, dtype=np.uint8)
    for s in range(n_seg):
        t = seg_tok[s]
        t_end = seg_tok[s + 1]
        for j in range(seg_pieces[s], seg_pieces[s + 1]):
            while t < t_end and tok_start[t] < pieces[j]:
                t += 1
            if (t < t_end and tok_start[t] == pieces[j] and tok_start[t + 1] == pieces[j + 1]
                    and pieces[j + 1] > pieces[j] and joinable[ids[t]]):
                whole[t] = 1
    # Candidates: adjacent whole tokens of one segment whose pair is a supermerge.
    n_cand = 0
    cand_key = np.empty(n, dtype=np.int64)
    cand_val = np.empty(n, dtype=np.int64)
    for s in range(n_seg):
        for t in range(seg_tok[s], seg_tok[s + 1] - 1):
            if whole[t] and whole[t + 1]:
                v = interleaved_get(super_table, pair_key(ids[t], ids[t + 1]), -1)
                if v >= 0:
                    cand_key[n_cand] = (v >> 32) * (n + 1) + t
                    cand_val[n_cand] = v & 0xFFFFFFFF
                    n_cand += 1
    drop = np.zeros(n + 1, dtype=np.uint8)
    new_ids = ids.copy()
    if n_cand > 0:
        # Lowest rank first, leftmost on equal rank: joining only ever removes candidates
        # (a joined token never joins again), so this order is the iterative rule's.
        sel = np.argsort(cand_key[:n_cand], kind="mergesort")
        used = np.zeros(n + 1, dtype=np.uint8)
        for c in sel:
            t = cand_key[c] % (n + 1)
            if used[t] or used[t + 1]:
                continue
            used[t] = 1
            used[t + 1] = 1
            new_ids[t] = cand_val[c]
            drop[t + 1] = 1
    n_docs = doc_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int32)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    o = 0
    for d in range(n_docs):
        for i in range(doc_offsets[d], doc_offsets[d + 1]):
            if not drop[i]:
                out[o] = new_ids[i]
                o += 1
        out_offsets[d + 1] = o
    return out[:o].copy(), out_offsets
