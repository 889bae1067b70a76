"""SuperBPE's second stage (Liu et al. 2025, arXiv 2503.13423): superword merges.

Stage 1 is ordinary training up to the transition vocabulary size (``training``). Stage 2
(this module) takes the word table of the same corpus pre-tokenized with a pattern whose
pieces span words (``pretokenize.SUPERBPE_PATTERN`` by default), encodes every stage-2 word
with the stage-1 merges, and runs the same merge kernel on those sequences, with the
stage-1 vocabulary as its base tokens: new ids follow them, the tie rule and the length
limit are those of stage 1. ``reference.train_superbpe`` is the specification.

Stage 2's words are mostly unique (whole lines between punctuation), so its table is about
the size of the corpus. It is trained cut where a pair is too rare to be merged
(``kernels/pair_cut.py``): the pieces repeat, and the table shrinks to 16-41% of its symbols
on the shared corpora (``cut_table``, ``train_cut``).
"""

from __future__ import annotations

import time

import numpy as np

from .byte_level import hf_byte_ranks
from .counting import joined
from .errors import TrainingError
from .merge_loop import UNLIMITED, run_merge_kernel
from .layout import make_level
from .parallel import call_kernel, on_parts
from .text import UnicodeNormalizer
from .tokenizer import Tokenizer

#: Stage 2 is first trained cut at the pairs whose count is below this share of the count
#: of the k-th most frequent pair (k: the merges it is to make; as the pairs' sketch
#: estimates it, see ``sketch_threshold``). Where the merges it makes then run below that
#: threshold before they are done (not on the shared corpora at 8k to 32k since the sketch
#: has ``SKETCH_PER_MERGE`` counters a merge), it trains again cut at a quarter of it, down
#: to ``min_frequency`` (exact whatever the threshold; see ``train_cut``).
THRESHOLD_SHARE = 0.5
#: The pairs' sketch (``kernels.pair_cut.pair_sketch``) has a counter a row for about this
#: many adjacencies, between 2**10 and 2**20 (4 MiB) a row. The threshold grows with the
#: corpus as the adjacencies do, so a sketch of fixed size stays as exact: on the Linux
#: sources (vocab 32768, transition 24576) 2**19 and 2**20 counters a row leave 0.2-0.5% of
#: the rare pairs' adjacencies uncut, and the cut table is 3.11 M symbols at 100 MB and
#: 23.9-24.0 M at 1.2 GB whether the sketch has 2**19, 2**20 or 2**21 counters a row (2**18:
#: 24.2 M); 2**21 took 0.89 s a half at 1.2 GB against 0.52 for 2**20 (cache misses).
#: An exact count of the pairs took 0.26 s of CPU at 100 MB, the sketch 0.05-0.06.
SKETCH_ADJACENCIES = 32
#: ... and at least this many counters a row for each merge stage 2 is to make: the
#: threshold comes from the sketch's k-th largest counter (k: the merges), which the other
#: pairs sharing it raise by about adjacencies / counters, against a k-th pair count of
#: about adjacencies / (k ln(pairs)) on Zipf-like pairs; so the counters must grow with k,
#: not only with the table. With the table's rule alone, the threshold came out too high on
#: every small corpus (2**15 counters a row for KJV's 0.88 M adjacencies), stage 2's merges
#: ran out above it and it trained again at a quarter of it (the shared corpora at vocab
#: 8192, 16384 and 32768, transition 3/4 of it: twice in 16 of 18 runs). 32 a merge trains
#: once in all 18, on a cut table 1.2-3.7x shorter, and SuperBPE took 20-48% less time.
SKETCH_PER_MERGE = 32
SKETCH_MIN_BITS, SKETCH_MAX_BITS = 10, 20
#: Stage 2's passes over its words (cutting into segments, gathering ids, cutting at rare
#: pairs) run on two halves of the words at once from this many words (below it the
#: thread hop costs more than it saves).
HALVES_MIN_WORDS = 1 << 14
#: Stage 2's words are counted without merging the counting blocks' tables: a word counted
#: in several blocks is several rows, in corpus order (``WordCounter(merge_blocks=False)``).
#: The cut table that the merge kernel trains on is the same either way: its rows are the
#: distinct pieces with their counts summed, in order of first appearance, and a word's
#: first row is its first occurrence. The words are mostly unique (whole lines between
#: punctuation), so the blocks' tables hold few repeats (14-23% more rows on 100 MB and
#: 1 GB of code), while the serial merge into one table took 8 of the 14 s of counting
#: 1 GB. False: one table (tests compare the two).
STAGE2_ROWS = True


def check_transition(transition, vocab_size, n_special: int, base: str) -> int:
    """The validated transition vocabulary size (stage 1 stops there)."""
    if isinstance(transition, bool) or not isinstance(transition, int) or transition < 0:
        raise ValueError(f"superbpe_transition must be a non-negative int, got {transition!r}")
    if base != "bytes":
        raise TrainingError("superbpe_transition is for byte-level training (base='bytes'): "
                            "SuperBPE's second stage merges across whitespace, which char "
                            "mode drops")
    if transition < 256 + n_special:
        raise TrainingError(f"superbpe_transition={transition} is smaller than the 256 bytes"
                            + (f" plus {n_special} special tokens" if n_special else ""))
    if vocab_size is not None and transition > vocab_size:
        raise TrainingError(f"superbpe_transition={transition} is above vocab_size={vocab_size}"
                            ": stage 1 would stop after the whole vocabulary")
    return transition


def halves(n_words: int, num_threads=None) -> list:
    """``[(0, n_words)]``, or with two threads or more and ``HALVES_MIN_WORDS`` words,
    ``[(0, h), (h, n_words)]`` (h the middle): the words stage 2's passes work on at once
    (the kernels release the GIL, and stage 2's passes are otherwise serial, one core
    idle)."""
    from .parallel import default_threads

    if (num_threads or default_threads()) < 2 or n_words < HALVES_MIN_WORDS:
        return [(0, n_words)]
    return [(0, n_words // 2), (n_words // 2, n_words)]


def joinable_bigrams(token_bytes) -> np.ndarray:
    """``bool[256, 256]``: whether some token holds byte ``a`` followed by byte ``b``.

    No merge of these tokens can ever join two bytes whose bigram is not in the table (the
    token it made would hold that bigram), so encoding cuts a word there without changing
    a single id: encoding chooses the lowest-ranked pair of the whole word, and no pair that
    crosses such a cut has a rank."""
    table = np.zeros((256, 256), dtype=bool)
    data = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
    lengths = np.fromiter(map(len, token_bytes), np.int64, len(token_bytes))
    inside = np.ones(max(0, len(data) - 1), dtype=bool)  # bigram within one token
    inside[np.cumsum(lengths)[:-1] - 1] = False  # (last byte of a token, first of the next)
    table[data[:-1][inside], data[1:][inside]] = True
    return table


def stage2_symbols(stage1: Tokenizer, token_bytes, word_bytes, offsets, bounds,
                   num_threads=None):
    """``[(symbols int32, offsets int64), ...]``: each stage-2 word encoded with ``stage1``'s
    merges as one piece (no pre-tokenization, no special tokens), a part for each
    ``(lo, hi)`` of ``bounds`` (``halves``: one, or two worked on at once; each part's
    offsets from 0); ``token_bytes``: its regular tokens' bytes.

    The words are first cut where no stage-1 token holds the bigram (``joinable_bigrams``;
    e.g. a letter before a space, after gpt2's stage 1), which leaves the ids unchanged.
    The segments recur (100 MB of code: 12.7 M segments, 257 k distinct), so one kernel
    cuts the words and numbers the distinct segments (``distinct_segments``, on the parts
    at once: ``parallel.on_parts``), only those are encoded, and each part's words gather
    their segments' ids (``gathered_words``, on the parts at once). The halves stay apart:
    the pairs and the cut that follow work on two halves anyway, and joining them cost
    0.2 s on 100 MB of Linux sources (the second half's segment numbers moved into one
    array, each word's length counted first to place it).
    """
    import pyarrow as pa

    word_bytes = np.ascontiguousarray(word_bytes, np.uint8)
    offsets = np.ascontiguousarray(offsets, np.int64)
    from .kernels.pair_cut import distinct_segments, gathered_words

    joinable = joinable_bigrams(token_bytes)
    parts = on_parts(lambda k: call_kernel(distinct_segments, word_bytes,
                                           offsets[bounds[k][0]:bounds[k][1] + 1], joinable),
                     len(bounds))
    _, _, d_start, d_end = parts[0]
    d_offsets, d_bytes = gathered_bytes(word_bytes, d_start, d_end)
    renumber = [np.empty(0, np.int32)] * len(parts)
    if len(parts) == 2:
        # Each half numbered its own distinct segments: the second half's are encoded after
        # the first's, a segment of both halves twice (on 100 MB of Linux sources 301 k
        # segments instead of the union's 257 k, but numbering the union again cost more:
        # these steps took 450-466 ms instead of 466-482).
        _, _, start2, end2 = parts[1]
        offsets2, bytes2 = gathered_bytes(word_bytes, start2, end2)
        d_bytes, d_offsets = joined([(d_bytes, d_offsets), (bytes2, offsets2)])
        renumber[1] = np.arange(len(d_start), len(d_start) + len(start2), dtype=np.int32)
    # Stage 1's model itself (its vocabulary is not derived again), without a pattern.
    plain = Tokenizer.from_parts(stage1.model, make_level("bytes", None), UnicodeNormalizer())
    # (A segment may end inside a character: the encoder takes bytes, whatever their type.)
    distinct = pa.LargeStringArray.from_buffers(len(d_offsets) - 1, pa.py_buffer(d_offsets),
                                                pa.py_buffer(d_bytes))
    ids, id_offsets, _ = plain.encode_batch_flat(distinct, num_threads=num_threads)
    ids, id_offsets = np.asarray(ids, np.int32), np.asarray(id_offsets, np.int64)
    # A segment's ids are at most its bytes (every token holds one byte or more): the
    # words' bytes bound each part's symbols.
    return on_parts(lambda k: call_kernel(
        gathered_words, ids, id_offsets, parts[k][0], parts[k][1], renumber[k],
        int(offsets[bounds[k][1]] - offsets[bounds[k][0]])), len(bounds))


def gathered_bytes(data, starts, ends):
    """``(offsets int64, bytes uint8)``: the ranges ``data[starts[k]:ends[k]]`` end to end
    (the distinct segments, ``kernels.pair_cut.gather_ranges``)."""
    from .kernels.pair_cut import gather_ranges

    return call_kernel(gather_ranges, np.ascontiguousarray(data, np.uint8),
                       np.ascontiguousarray(starts, np.int64),
                       np.ascontiguousarray(ends, np.int64))


def train_stage2(stage1: Tokenizer, word_bytes, offsets, counts, *, pattern, vocab_size,
                 num_merges, special_tokens, tie_break, min_frequency, max_token_length,
                 progress=False, num_threads=None, max_memory=None, report=None) -> Tokenizer:
    """Continue ``stage1`` on the stage-2 word table (bytes, offsets, counts) and return the
    SuperBPE tokenizer: all merges, encoding with ``pattern``."""
    from .kernels.merge import TIE_BYTES, TIE_FIRST, TIE_RANKS

    n_special = len(special_tokens)
    base_bytes = list(stage1.vocab[: len(stage1.vocab) - n_special])
    # Under a memory budget, the passes run on one thread (two halves hold two tables).
    halves_threads = 1 if max_memory is not None else num_threads
    t0 = time.perf_counter()
    counts = np.ascontiguousarray(counts, np.int64)
    bounds = halves(len(counts), halves_threads)
    parts = [(symbols, sym_offsets, counts[lo:hi]) for (symbols, sym_offsets), (lo, hi) in
             zip(stage2_symbols(stage1, base_bytes, word_bytes, offsets, bounds,
                                halves_threads), bounds)]
    seconds = {"encoding": time.perf_counter() - t0, "merging": 0.0}
    n_base = len(base_bytes)
    ranks = np.arange(n_base, dtype=np.int64)
    if tie_break == "hf":
        ranks[:256] = hf_byte_ranks()
    tie_mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST,
                "bytes": TIE_BYTES}[tie_break]
    max_ids = max(n_base, UNLIMITED if vocab_size is None else vocab_size - n_special)
    max_merges = UNLIMITED if num_merges is None else max(0, num_merges - len(stage1.merges))
    base_units = np.fromiter(map(len, base_bytes), np.int64, n_base)

    def train(table, min_count):
        t0 = time.perf_counter()
        try:
            return run_merge_kernel(*table, base_bytes, ranks, tie_mode, max_merges, max_ids,
                                    min_count, UNLIMITED if max_token_length is None
                                    else max_token_length, progress, max_memory=max_memory,
                                    base_units=base_units, halves=halves_threads != 1)
        finally:
            seconds["merging"] += time.perf_counter() - t0

    t_cut = time.perf_counter()
    merges, merge_ids, merge_counts = train_cut(
        parts, train, max(1, int(min_frequency)), n_base, max_merges, max_ids, report)
    seconds["pairs_and_cut"] = time.perf_counter() - t_cut - seconds["merging"]
    tok = final_tokenizer(stage1, base_bytes, merges, merge_ids, pattern, special_tokens,
                          tie_break, np.concatenate([stage1.merge_counts, merge_counts]))
    if report is not None:
        report.update({"superbpe_stage1_merges": int(len(stage1.merges)),
                       "superbpe_stage2_merges": int(len(merges)),
                       "superbpe_stage2_words": int(len(counts)),
                       "superbpe_stage2_symbols": int(sum(len(p[0]) for p in parts)),
                       "merges": int(len(tok.merges)), "vocab_size": tok.vocab_size})
        # Counting's seconds come from Stage2.merge_and_count, when it ran.
        report.setdefault("superbpe_stage2_seconds", {}).update(seconds)
    return tok


def final_tokenizer(stage1, base_bytes, merges, merge_ids, pattern, special_tokens,
                    tie_break, merge_counts) -> Tokenizer:
    """The SuperBPE tokenizer: stage 1's merges and vocabulary (``base_bytes``, its regular
    tokens), then stage 2's ``merges`` making ``merge_ids``. The vocabulary is stage 1's and
    the tokens stage 2 made, not derived again from the first merge (a Python loop over
    every merge: 45 ms at 32k merges); each merge's token is checked to be its two tokens'
    bytes end to end (as derived)."""
    from .model import MergeModel, check_made
    from .text import UnicodeNormalizer

    all_merges = np.concatenate([stage1.merges, merges]).astype(np.int32)
    all_ids = np.concatenate([stage1.merge_ids, merge_ids]).astype(np.int32)
    token_bytes = list(base_bytes)
    for (a, b), x in zip(merges.tolist(), merge_ids.tolist()):
        if x == len(token_bytes):
            token_bytes.append(token_bytes[a] + token_bytes[b])
    check_made(all_merges, all_ids, token_bytes, "stage-2 merge ids differ from the vocabulary")
    level = make_level("bytes", pattern)
    model = MergeModel(all_merges, level.base_bytes, "pairs", _derived=(all_ids, token_bytes))
    tok = Tokenizer.from_parts(model, level, UnicodeNormalizer(None),
                               special_tokens=special_tokens, tie_break=tie_break)
    tok.merge_counts = np.asarray(merge_counts, np.int64)
    return tok


def train_cut(parts, train, min_count: int, n_base: int, max_merges: int, max_ids: int,
              report=None):
    """``train(cut_table, min_count)``'s merges, which are those of ``train(table,
    min_count)``: trained on the table cut at the pairs of count below a threshold, with
    merges of at least that count. ``parts``: the table, as one ``(symbols, offsets,
    counts)`` or two (its words in two halves, worked on at once).

    Why that is exact: a pair of count below ``theta`` in the whole table is never merged
    while a merge of count ``theta`` or more remains, nor is a pair made across it later
    (it holds the same adjacency, so its count is at most that pair's), so every merge down
    to count ``theta`` rewrites the cut table as it rewrites the whole one, with the same
    counts (the occurrences of a pair of count ``theta`` or more are never cut). First
    occurrences keep their order too (the pieces are kept in order of first appearance).
    When the merges made are not all that were asked for (``max_merges`` merges or
    ``max_ids`` ids) they ran down to ``theta``, and the next merge may be a rarer pair:
    trained again with a quarter of the threshold, down to ``min_count``, the floor of
    every merge (then only pairs that can never be merged are cut).
    """
    from .kernels.pair_cut import added_sketches, pair_sketch

    # The two halves of the words sketched at once, then added.
    n_merges = min(max_merges, max_ids - n_base)
    bits = sketch_bits(sum(len(p[0]) - len(p[2]) for p in parts), n_merges)
    sketches = on_parts(lambda k: call_kernel(pair_sketch, *parts[k], bits), len(parts))
    sketch = sketches[0]
    if len(sketches) == 2:
        sketch = call_kernel(added_sketches, sketch, sketches[1])
    del sketches
    theta = sketch_threshold(sketch, n_merges, min_count)
    runs = 0
    while True:
        cut = cut_table(parts, sketch, theta)
        merges, merge_ids, merge_counts = train(cut, max(min_count, theta))
        runs += 1
        new_ids = int(np.count_nonzero(np.unique(merge_ids) >= n_base))
        if theta <= min_count or len(merges) >= max_merges or n_base + new_ids >= max_ids:
            break
        theta = max(min_count, theta // 4)
    if report is not None:
        report["superbpe_stage2_cut"] = {"threshold": int(theta), "rows": int(len(cut[2])),
                                         "symbols": int(len(cut[0])), "runs": runs}
    return merges, merge_ids, merge_counts


def sketch_bits(n_adjacencies: int, n_merges: int) -> int:
    """log2 of the pairs' sketch's counters a row for a table of ``n_adjacencies``
    adjacent symbol pairs and ``n_merges`` merges to make (``SKETCH_ADJACENCIES`` to a
    counter, at least ``SKETCH_PER_MERGE`` counters a merge, within the bounds)."""
    need = max(1, n_adjacencies // SKETCH_ADJACENCIES, SKETCH_PER_MERGE * n_merges)
    return min(SKETCH_MAX_BITS, max(SKETCH_MIN_BITS, (need - 1).bit_length()))


def sketch_threshold(sketch: np.ndarray, n_merges: int, min_count: int) -> int:
    """``THRESHOLD_SHARE`` of the ``n_merges``-th largest counter of each row of the pairs'
    sketch, the smaller of the two (about the count of the ``n_merges``-th most frequent
    pair: a counter holds its pairs' counts added), at least ``min_count`` (which it is
    when a row has no more counters in use than merges)."""
    kth = []
    for row in sketch.reshape(2, -1):
        used = row[row > 0]
        if n_merges <= 0 or n_merges >= len(used):
            return min_count
        kth.append(int(np.partition(used, len(used) - n_merges)[len(used) - n_merges]))
    return max(min_count, int(min(kth) * THRESHOLD_SHARE))


def cut_table(parts, sketch, theta: int):
    """``(symbols, offsets, counts)`` of the word table (``parts``: one ``(symbols,
    offsets, counts)``, or two, its words' two halves) cut between adjacent symbols whose
    pair's smaller counter in ``sketch`` (``kernels.pair_cut.pair_sketch`` of the whole
    table) is below ``theta``, which makes it rarer than ``theta``; pieces of one symbol
    dropped, equal pieces one row with their counts added, in order of first appearance
    (``kernels.pair_cut.cut_rows``, on the two halves at once).

    Two halves' rows are put end to end: a piece in both is a row in each (100 MB of Linux
    sources: 609 k rows, 3.14 M symbols, against 550 k and 2.91 M joined). The merges are
    those of the joined table: a pair's count is the same, and so is the order of first
    appearance of the pairs (the first tie rule's), since a row of the second half that
    repeats one of the first holds no pair that the first did not hold first, before and
    after every merge. Joining them (the second half's rows added to the first's) took
    80-150 ms on one thread, for a table 8% shorter."""
    from .kernels.pair_cut import cut_rows, kept_pairs

    # Looked up in a bit per counter (kept_pairs), which stays in the cache.
    bitmap = call_kernel(kept_pairs, sketch, int(theta))
    bits = (len(sketch) // 2).bit_length() - 1
    return joined(on_parts(lambda k: call_kernel(cut_rows, *parts[k], bitmap, bits),
                           len(parts)), 1)


class Stage2:
    """What ``train`` / ``train_files`` need for SuperBPE: the options of stage 1 and the
    second stage on the same corpus (its own word table, counted with ``pattern``)."""

    def __init__(self, transition, pattern, opts):
        from . import pretokenize

        self.transition = check_transition(transition, opts.vocab_size,
                                           len(opts.special_tokens), opts.base)
        if opts.merge_batch != 1:
            raise TrainingError("superbpe_transition with merge_batch is not supported: "
                                "SuperBPE's stages are exact BPE")
        pattern = pretokenize.SUPERBPE_PATTERN if pattern is None else pattern
        self.pattern = pretokenize.resolve_pattern(pattern)
        pretokenize.compiled_pattern(self.pattern)
        self.opts = opts

    def stage1_options(self):
        """``opts`` with stage 1's vocabulary size: the transition."""
        import dataclasses

        return dataclasses.replace(self.opts, vocab_size=self.transition)

    def reusable(self, texts):
        """``texts`` as something both stages can read (a one-pass iterator becomes a list)."""
        if isinstance(texts, dict):
            raise TrainingError("superbpe_transition needs documents: a {word: count} dict is "
                                "pre-tokenized already, and stage 2 pre-tokenizes again")
        return list(texts) if iter(texts) is texts else texts

    def finish(self, stage1, word_bytes, offsets, counts, report, max_memory=None):
        """The SuperBPE tokenizer from ``stage1`` and the stage-2 word table."""
        o = self.opts
        return train_stage2(stage1, word_bytes, offsets, counts, pattern=self.pattern,
                            vocab_size=o.vocab_size, num_merges=o.num_merges,
                            special_tokens=o.special_tokens, tie_break=o.tie_break,
                            min_frequency=o.min_frequency, max_token_length=o.max_token_length,
                            progress=o.progress, num_threads=o.num_threads,
                            max_memory=max_memory, report=report)

    def overlaps(self, max_memory=None) -> bool:
        """Whether stage 2 counts the corpus while stage 1 merges (``merge_and_count``): with
        more than one thread and no memory budget (the two phases' tables then coexist;
        under a budget they run one after the other, as the budget was measured)."""
        from .parallel import default_threads

        threads = self.opts.num_threads or default_threads()
        return max_memory is None and threads > 1

    def merge_and_count(self, merge, count, max_memory=None, report=None):
        """``(merge(), count(cancel))``: stage 1's tokenizer and stage 2's word table. With
        ``overlaps``, the count runs in a background thread while stage 1 merges
        (``BackgroundCount``), and is cancelled if the merge fails. ``report`` gets
        ``superbpe_stage2_seconds``: the count's ``counting`` and ``counting_after_stage1``
        (the part stage 1's merge did not hide; all of it when they run in turn)."""
        seconds = {}

        def timed(cancel):
            t0 = time.perf_counter()
            table = count(cancel)
            seconds["counting"] = time.perf_counter() - t0
            return table

        if not self.overlaps(max_memory):
            tok = merge()
            table = timed(None)
            seconds["counting_after_stage1"] = seconds["counting"]
        else:
            pending = BackgroundCount(timed)
            try:
                tok = merge()
            except BaseException:
                pending.cancel()
                raise
            t0 = time.perf_counter()
            table = pending.result()
            seconds["counting_after_stage1"] = time.perf_counter() - t0
        if report is not None:
            report["superbpe_stage2_seconds"] = seconds
        return tok, table

    def count_texts(self, texts, cancel=None):
        """Stage 2's word table of ``texts`` (counted with the stage-2 pattern; a word may
        be several rows, see ``STAGE2_ROWS``)."""
        from .word_table import count_corpus

        counter = count_corpus(texts, self.pattern, self.opts.special_tokens,
                               self.opts.num_threads, cancel=cancel,
                               merge_blocks=not STAGE2_ROWS)
        return counter.table(copy=False)

    def count_files(self, count, min_word_count):
        """Stage 2's word table of the corpus files: ``count(pattern)`` counts them again (a
        WordCounter; a word may be several rows, see ``STAGE2_ROWS``, unless rare words are
        pruned, as in stage 1: a word's count must then be whole)."""
        from .word_table import prune_rare_words

        counter = count(self.pattern, min_word_count != 1 or not STAGE2_ROWS)
        word_bytes, offsets, counts = counter.table(copy=False)
        del counter  # its hash slots; the views keep the store
        if min_word_count != 1:
            word_bytes, offsets, counts = prune_rare_words(word_bytes, offsets, counts,
                                                           min_word_count, {})
        return word_bytes, offsets, counts


class BackgroundCount:
    """Stage 2's counting in a helper thread while stage 1 merges: stage 2 counts the
    corpus again with its own pattern, which does not depend on stage 1, and stage 1's merge
    kernel runs on one core (100 MB of code: 0.9 s that the second core would idle).

    A kept helper thread (``parallel.in_helper``: a thread that ended could leave a child
    forked at that moment deadlocked). ``result()`` waits and returns the word table, or
    raises the count's error. ``cancel()`` stops the counting before its next batch (stage 1
    failed or was interrupted: the caller raises its own error; ``result`` then raises
    ``errors.Cancelled`` unless the count had finished).
    """

    def __init__(self, count):
        import threading

        from .parallel import in_helper

        self._cancel = threading.Event()
        self._pending = in_helper(count, self._cancel)

    def result(self, timeout: float = -1):
        """The word table (None if ``timeout`` seconds passed first)."""
        return self._pending.wait(timeout)

    def cancel(self) -> None:
        self._cancel.set()
