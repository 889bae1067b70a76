"""The merge loop's runner: ``kernels.merge.train_merges`` in a worker thread, with its
progress bar, Ctrl-C handling and the memory budget of training.

Below the Tokenizer: it takes a word table (``word_table``) and returns the learned merges
as arrays; ``training`` builds Tokenizer objects from them and ``sentencepiece_train``
SentencePiece-style models.
"""

from __future__ import annotations

import numpy as np

from .errors import MemoryBudgetError, TrainingError
from .word_table import check_count_range

#: "No limit" for the kernel's int64 limits (max merges, ids, token length).
UNLIMITED = 1 << 62
#: The tie rules (``reference.py`` defines each; the merge kernel implements them).
TIE_RULES = ("ids", "hf", "first", "bytes")
#: The word index's budget is checked (and its resident rows counted) this many rows ahead
#: (``train_merges``' ``index_check_rows``).
INDEX_CHECK_ROWS = 1 << 20
#: Words of a merged pair's list the kernel prefetches ahead of the one it rewrites
#: (``train_merges``' ``lookahead``): enough to overlap the misses of a memory round trip.
#: Measured on the 1.2 GB Linux table (vocab 32768): 8, 16 and 32 within noise of each
#: other, all ~35% below none.
LOOKAHEAD_WORDS = 16
#: The fewest pairs the merge kernel's heap holds (``train_merges``' ``heap_floor``): it is
#: refilled from the whole table when it runs dry, so not too few.
HEAP_FLOOR = 1024
#: The largest alphabet whose first pairs the merge kernel counts in a dense array of
#: ``n_base ** 2`` entries (``train_merges``' ``dense_base``): the byte alphabet. On the
#: 100 MB Linux table (2.8 M adjacencies, 9,379 distinct pairs) the setup's two passes
#: 46 -> 31 ms. SuperBPE's stage 2 (its base is the stage-1 vocabulary) and large
#: character alphabets probe the pair table instead.
DENSE_BASE = 256
#: Two threads for the merge loop (``kernels.merge_halves``, ``run_merge_kernel(halves=...)``)
#: from this many symbols: below it, setting up two halves and handing each merge over
#: cost more than the second core saves. The merge phase of ``train_files`` on the Linux
#: sources, vocab 32768, one thread -> two: 1 MB (15 k words) 0.036 -> 0.046 s, 10 MB
#: (61 k) 0.085 -> 0.105, 30 MB (111 k) 0.141 -> 0.139; the kernel on the 100 MB table
#: (3.0 M symbols) 0.42 -> 0.33 s and on 1.2 GB's 0.90-0.92 -> 0.69-0.74 s (2026-12-05).
HALVES_MIN_SYMBOLS = 2_000_000
#: Turns of a wait for the other thread (``kernels.merge_halves``) before each turn yields
#: the CPU: a few microseconds of spinning (hand-overs take 0.1-0.4 us), then room for the
#: thread waited for when there are more runnable threads than cores.
HALVES_SPINS = 4096


def symbol_dtype(id_bound: int):
    """The merge kernel's symbol type when every id it can make is below ``id_bound``:
    int16 where they fit, else int32. The merge loop is bound by memory latency, and
    16-bit symbols take half the cache lines (on the 100 MB Linux table at vocab 32768,
    the kernel 0.55 -> 0.52 s, docs/performance.md 2026-12-04)."""
    return np.int16 if id_bound <= 1 << 15 else np.int32


def kernel_table(symbols, offsets, counts, n_base: int, id_bound: int, keep_order: bool):
    """A word table as the merge kernel runs fastest on it, a new copy: ``symbols`` of
    ``symbol_dtype(id_bound)``, and the words sorted by their first symbols unless
    ``keep_order`` (the ``first`` tie rule: it ranks pairs by where the table has them
    first). The same merges, ids and counts either way (kernels/word_order.py).

    ``symbols`` (uint8, int16 or int32 base ids, each below ``n_base``), ``offsets`` and
    ``counts`` as ``run_merge_kernel`` takes them; returns the three: the symbols always a
    new array (the kernel rewrites them), the offsets and counts new only when sorted (the
    kernel only reads them)."""
    from .kernels.word_order import ordered_table, prefix_order
    from .parallel import call_kernel

    if symbols.dtype not in (np.uint8, np.int16, np.int32):
        raise TrainingError(f"symbols must be uint8, int16 or int32, not {symbols.dtype}")
    if len(symbols) and (int(symbols.min()) < 0 or int(symbols.max()) >= n_base):
        raise TrainingError(f"symbols must be base token ids in 0..{n_base - 1}")
    out = np.empty(len(symbols), symbol_dtype(id_bound))
    offsets = np.ascontiguousarray(offsets, np.int64)
    counts = np.ascontiguousarray(counts, np.int64)
    if keep_order or len(counts) < 2:
        out[:] = symbols
        return out, offsets, counts
    order = call_kernel(prefix_order, symbols, offsets, n_base)
    # Every other word of that order first, then the others: each half of the table is in
    # prefix order and holds every pair in about equal shares, which the two-thread merge
    # loop needs (``_halves_arrays``: halves of the sorted order itself held different
    # pairs, most words that start with a space in one).
    order = np.concatenate((order[0::2], order[1::2]))
    return (out, *call_kernel(ordered_table, symbols, offsets, counts, order, out))


def run_merge_kernel(symbols, offsets, counts, base_bytes, base_rank, tie_mode, max_merges,
                     max_ids, min_count, max_units, progress=False, max_memory=None,
                     base_units=None, merge_batch=1, halves=False):
    """Run ``train_merges`` in a shielded worker thread; Ctrl-C asks it to stop and re-raises.

    ``symbols`` (any integer type) are rewritten in place when they already are of the
    kernel's type (``symbol_dtype``): pass a copy, or the table converted once.
    ``max_memory`` (bytes, the whole process): the kernel may allocate what is left of it
    after the current RSS; it checks that before every allocation and stops short of it,
    and this raises ``MemoryBudgetError`` naming the phase and the bytes it needed.
    ``base_units`` (int64 per base token, optional): their lengths for ``max_units`` when
    the base tokens are themselves merged (SuperBPE's stage 2). ``merge_batch`` > 1:
    BatchBPE's passes (``train_merges``), not exact BPE. ``halves``: merge on two threads
    (``kernels.merge_halves``, the same merges) where it can: exact BPE, not the ``first``
    tie rule, no ``max_memory``, two threads, at least ``HALVES_MIN_SYMBOLS`` symbols;
    else on one.
    """
    from .kernels.merge import (PROG_BUDGET, PROG_NEED, PROG_PHASE, STOPPED_MEMORY,
                                train_merges, word_index_rows)
    from .parallel import call_kernel_shielded

    if len(counts) >= 2**31:  # the kernel packs word numbers in 32 bits
        raise TrainingError(f"{len(counts):,} unique words: the merge kernel takes fewer than "
                            "2**31; count fewer (e.g. raise the counts' min_count) or shard")
    if len(counts) and np.min(counts) < 1:
        row = int(np.argmin(counts))
        raise TrainingError(f"word {row}: count {counts[row]} is not positive (the merge kernel "
                            "takes words that occur)")
    # The kernel indexes its token tables by symbol without bounds checks.
    if len(symbols) and (int(np.min(symbols)) < 0 or int(np.max(symbols)) >= len(base_bytes)):
        raise TrainingError(f"symbols must be base token ids in 0..{len(base_bytes) - 1}, got "
                            f"{int(np.min(symbols))}..{int(np.max(symbols))}")
    if len(offsets) != len(counts) + 1 or (len(offsets) and (
            offsets[0] != 0 or offsets[-1] != len(symbols) or np.any(np.diff(offsets) < 0))):
        raise TrainingError("offsets must rise from 0 to len(symbols), one more than counts")
    check_count_range(offsets, counts)  # (after the offsets: it takes them as checked)
    # (A copy only when the caller's symbols are of another type: see symbol_dtype.)
    symbols = np.ascontiguousarray(
        symbols, symbol_dtype(min(max_ids, len(base_bytes) + max_merges)))

    tok_off = np.zeros(len(base_bytes) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in base_bytes], out=tok_off[1:])
    tok_data = np.frombuffer(b"".join(base_bytes), dtype=np.uint8).copy()
    # merges done / stop request / stopped (1 asked, 2 memory) / byte budget / need / phase
    shared = np.zeros(6, dtype=np.int64)
    # The kernel's last arguments, given in every call (one specialization, the warm-up's
    # below included): the base tokens' units (None: one each), the merges per pass, the
    # widest alphabet counted densely.
    tail = (None if base_units is None else np.ascontiguousarray(base_units, np.int64),
            int(merge_batch), DENSE_BASE)
    in_use = 0
    if max_memory is not None:
        # Compile (or load) the kernel first, on a one-word table: compiling takes ~100 MiB
        # that the allocator keeps, and the budget left to the kernel is counted after it.
        # (The same specialization as the call below: symbols of the same type.)
        call_kernel_shielded(train_merges, np.zeros(2, symbols.dtype),
                             np.array([0, 2], np.int64), np.ones(1, np.int64), tok_off,
                             tok_data, base_rank, tie_mode, 1, UNLIMITED, 1, UNLIMITED,
                             np.zeros(6, np.int64),
                             np.empty((16, 2), np.int32), INDEX_CHECK_ROWS, LOOKAHEAD_WORDS,
                             HEAP_FLOOR, *tail)
        in_use = rss_bytes()
        shared[PROG_BUDGET] = max(1, int(max_memory) - in_use - KERNEL_SLACK_BYTES)
    bar = None
    if progress:
        from .progress import progress_bar

        total = min(max_merges, max_ids - len(base_bytes))
        bar = progress_bar(total=total if total < UNLIMITED // 2 else None, desc="merging",
                           unit="merge")

    shown = {"setup": None}

    def show_progress():
        if bar is not None:
            # Until the first merge the kernel counts every pair and builds the word index:
            # on 10^7 words that is tens of seconds, which a bar at 0 would not explain.
            setup = int(shared[0]) == 0
            if setup != shown["setup"]:
                shown["setup"] = setup
                if setup:
                    bar.set_postfix(phase=f"counting the pairs of {len(counts):,} words")
                else:
                    bar.set_postfix(phase="merging")
            bar.update(int(shared[0]) - bar.n)

    def ask_to_stop():
        shared[1] = 1

    # The word index at its upper bound, so that it never grows (a growth copies it and
    # holds old + new, its largest peak); np.empty reserves address space, and only the
    # rows in use become resident. Without that much address space (ulimit -v, strict
    # overcommit) the kernel starts smaller and grows it.
    max_len = int(np.max(np.diff(offsets))) if len(counts) else 0
    rows = word_index_rows(len(symbols), len(counts), max_len)
    # int32 nodes (word, next) while the rows fit: half the index's memory.
    node_type = np.int32 if rows < 2**31 else np.int64
    try:
        nodes = np.empty((rows, 2), node_type)
    except MemoryError:
        nodes = np.empty((max(16, len(symbols)), 2), node_type)
    show_progress()  # the setup phase is named from the start
    arrays = _halves_arrays(symbols, offsets, counts) if halves and _halves_usable(
        tie_mode, max_memory, merge_batch, len(counts), len(symbols)) else None
    if arrays is not None:
        del nodes  # (each half has its own)
        try:
            return _run_halves(arrays, tok_off, tok_data, base_rank, tie_mode, max_merges,
                               max_ids, min_count, max_units, shared, tail[0], len(base_bytes),
                               show_progress, ask_to_stop)
        finally:
            if bar is not None:
                show_progress()
                bar.close()
    try:
        result = call_kernel_shielded(
            train_merges, symbols, offsets, counts, tok_off, tok_data, base_rank, tie_mode,
            max_merges, max_ids, min_count, max_units, shared, nodes, INDEX_CHECK_ROWS,
            LOOKAHEAD_WORDS, HEAP_FLOOR, *tail, poll=show_progress, on_interrupt=ask_to_stop,
        )
    finally:
        del nodes
        if bar is not None:
            show_progress()
            bar.close()
    if shared[2] == STOPPED_MEMORY:
        where = ("setting up the pair counts and word index" if shared[PROG_PHASE] == 1
                 else f"after {int(shared[0]):,} merges, growing the pair store / word index")
        raise MemoryBudgetError(
            f"merging ({where}): the merge kernel would hold {shared[PROG_NEED] / 2**20:,.0f} "
            f"MiB on top of the {in_use / 2**20:,.0f} MiB in use, over the max_memory budget "
            f"of {max_memory / 2**20:,.0f} MiB ({len(counts):,} unique words, "
            f"{len(symbols):,} symbols); stopped before allocating it")
    return result


def _halves_usable(tie_mode, max_memory, merge_batch, n_words, n_symbols) -> bool:
    """Whether ``run_merge_kernel(halves=True)`` merges on two threads (see there)."""
    from .kernels.merge import TIE_FIRST
    from .parallel import default_threads

    return (tie_mode != TIE_FIRST and max_memory is None and merge_batch == 1
            and n_words >= 2 and n_symbols >= HALVES_MIN_SYMBOLS and default_threads() >= 2)


def _halves_arrays(symbols, offsets, counts):
    """The two halves of the table, at about half the symbols (views: ``kernel_table``
    puts every other word of its order in each), and each one's word index at its bound
    (only the pages written become resident; it never grows, since its thread alone may
    hold it); None when the indexes do not fit (then one thread merges)."""
    from .kernels.merge import word_index_rows

    n_words = len(counts)
    mid = min(max(1, int(np.searchsorted(offsets, offsets[-1] // 2))), n_words - 1)
    cut = int(offsets[mid])
    parts = (symbols[:cut], offsets[:mid + 1], counts[:mid], symbols[cut:],
             offsets[mid:] - cut, counts[mid:])
    max_len = int(np.max(np.diff(offsets)))
    node_type = np.int32 if word_index_rows(len(symbols), n_words, max_len) < 2**31 \
        else np.int64
    try:
        nodes = [np.empty((word_index_rows(len(parts[3 * k]), len(parts[3 * k + 2]),
                                           max_len), 2), node_type) for k in (0, 1)]
    except MemoryError:  # (too little address space: ulimit -v, strict overcommit)
        return None
    return parts, nodes


def _run_halves(arrays, tok_off, tok_data, base_rank, tie_mode, max_merges, max_ids,
                min_count, max_units, shared, base_units, n_base, poll, on_interrupt):
    """``run_merge_kernel``'s two-thread path on ``_halves_arrays``: ``train_merges_halves``
    in a shielded thread and ``halves_worker`` in a helper thread beside it, each setting
    up its half."""
    from .kernels.merge import C_SPARE, N_COUNTERS, N_PROGRESS
    from .kernels.merge_halves import (MAILBOX_SLOTS, W_DONE, W_FAILED, halves_worker,
                                       post_exit, train_merges_halves, worker_events)
    from .parallel import call_kernel, call_kernel_shielded, in_helper

    parts, nodes = arrays
    # Each thread's counters and read-ahead ring, in cache lines of their own (two small
    # arrays made one after the other share a line, which would bounce between the cores).
    ring_size = 2
    while ring_size < LOOKAHEAD_WORDS + 1:
        ring_size *= 2
    pad = 16  # int64s: two cache lines
    at = [pad, 2 * pad + N_COUNTERS, 3 * pad + N_COUNTERS + ring_size]  # a thread's block
    private = np.zeros(2 * at[2] + pad, np.int64)
    counters = [private[b + at[0]:b + at[0] + N_COUNTERS] for b in (0, at[2])]
    rings = [private[b + at[1]:b + at[1] + ring_size] for b in (0, at[2])]
    counters[0][C_SPARE] = counters[1][C_SPARE] = -1
    mailbox = np.zeros(MAILBOX_SLOTS, np.int64)
    mailbox[W_DONE] = -1  # (0 once the worker's half is set up)
    events = np.zeros(N_PROGRESS, np.int64)

    def work():
        try:
            call_kernel(halves_worker, mailbox, *parts[3:], nodes[1], n_base, DENSE_BASE,
                        counters[1], rings[1], LOOKAHEAD_WORDS, INDEX_CHECK_ROWS, events,
                        HALVES_SPINS)
        except BaseException:
            mailbox[W_FAILED] = 1  # (the merge loop stops waiting for it, and raises)
            raise

    worker = in_helper(work)
    try:
        result = call_kernel_shielded(
            train_merges_halves, mailbox, *parts[:3], nodes[0], DENSE_BASE, counters[0],
            rings[0], tok_off, tok_data, base_rank, tie_mode, max_merges, max_ids, min_count,
            max_units, shared, INDEX_CHECK_ROWS, LOOKAHEAD_WORDS, HEAP_FLOOR, base_units,
            HALVES_SPINS, poll=poll, on_interrupt=on_interrupt)
    finally:
        call_kernel(post_exit, mailbox)
        worker.wait()  # (raises the worker's error, if it failed)
    call_kernel(worker_events, shared, events)
    return result


#: What each training phase of ``train_files`` allocates on top of what is held when it
#: starts, as (bytes per word-table symbol S, bytes per unique word W); S is the total bytes
#: of the unique words. The budget checks use them before each phase (the word table's
#: exact form is ``WordCounter.table_bytes``); the merge kernel then checks every later
#: allocation itself against what is left of the budget (``run_merge_kernel``).
#: Measured with benchmarks/train_memory_phases.py (VmHWM reset before each phase; 986,818
#: unique random 4-12 letter words, gpt2 pattern, S = 9.1 B/word):
#:   counting       14 B/S, 131 B/W   (checked per batch: WordCounter.private_bytes, then each growth of the table)
#:   word table      1.8 B/S          estimate 1 B/S + 17 B/W; it was 36 B/S (a gather
#:                                    through int64 index arrays) before the copy path
#:   kernel table    1.8 B/S, 16 B/W  (vocab 5000: int16 symbols) estimate 4 B/S + 32 B/W
#:                                    (``kernel_table``: int32 symbols for vocabularies over
#:                                    32768, the sorted offsets and counts, the sort's
#:                                    arrays); until 2026-12-04 int32 symbols, 4.0 B/S
#:   merge setup    12.5 B/S          at 4 merges; estimate 12 B/S + 20 B/W (the word
#:                                    rows, 16 B/W; the word index's first rows, 8 B per
#:                                    pair of a word, < 1 per symbol; pos for 'first', 4
#:                                    B/S); it was 20.3 B/S with 16-byte nodes, wlen, stamp
#:   merging        28.6 / 40.0 B/S   at 4,744 / 19,744 merges: the pair table grows with
#:                                    the merges, the word index hardly (the merged pairs'
#:                                    nodes are reused); the kernel counts them as they
#:                                    grow. It was 62.7 / 75.6 B/S before.
#: The counter (131 B/W here) is freed before merging; it used to stay alive throughout.
PHASE_BYTES = {
    "word table": (1, 17),
    "kernel table": (4, 32),  # (the int32 case: int16 symbols take half)
    "merge setup": (12, 20),  # + the kernel table, already held
}
#: What the merge kernel's budget leaves out: its small arrays (token bytes and ids, the
#: bytes -> id table, the output merges: ~50 bytes per merge), the worker thread's stack,
#: allocator overhead. Measured: a stop 1.2 MiB past the budget without it (1M words).
KERNEL_SLACK_BYTES = 32 << 20


def phase_bytes(phase: str, n_symbols: int, n_words: int) -> int:
    """``PHASE_BYTES[phase]`` applied to a table of ``n_symbols`` symbols, ``n_words`` words."""
    per_symbol, per_word = PHASE_BYTES[phase]
    return per_symbol * int(n_symbols) + per_word * int(n_words)


def check_budget(phase: str, need: int, max_memory, detail: str = "") -> None:
    """Raise MemoryBudgetError when ``need`` more bytes on top of the current RSS would
    exceed ``max_memory`` (None: no budget): called before a phase allocates them."""
    if max_memory is None:
        return
    in_use = rss_bytes()
    if in_use + need > max_memory:
        raise MemoryBudgetError(
            f"{phase} needs about {need / 2**20:,.0f} MiB on top of the {in_use / 2**20:,.0f} "
            f"MiB in use, over the max_memory budget of {max_memory / 2**20:,.0f} MiB"
            + (f" ({detail})" if detail else "") + "; stopped before allocating it")


def rss_bytes() -> int:
    """Current resident memory (Linux /proc; falls back to the peak)."""
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (Linux: ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
