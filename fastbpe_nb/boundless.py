"""BoundlessBPE (Schmidt et al. 2025, arXiv 2504.00178): supermerges across pre-tokens.

``fb.train(..., boundless=True)``: ordinary BPE merges inside pre-tokens, plus supermerges
that join two adjacent whole pre-tokens, each a ``BOUNDLESS_WORD`` (`` ?\\p{L}+``) already
merged into one token, into a superword token; at every step the candidate of either kind
with the highest count is merged. ``reference.train_boundless`` / ``encode_boundless`` are
the specification (docs/variants.md, "BoundlessBPE").

How training stays near classic BPE's cost: a supermerge rewrites no word, so the ordinary
merges are exactly those of classic training on the same word table, in the same order.
Training therefore runs the classic merge kernel (with the whole vocabulary budget), then
interleaves the supermerges into its merge stream (``kernels.boundless.interleave``): the
supermerge candidates are the distinct pairs of adjacent word pre-tokens, counted once; a
pair becomes a candidate when the classic stream has made both words single tokens
(``word_tokens``), and its count only falls as neighbouring pairs join.

Only the ``gpt2`` and ``cl100k`` patterns are allowed (``boundless_model`` says why).
"""

from __future__ import annotations

import numpy as np

from . import pretokenize
from .byte_level import hf_byte_ranks
from .boundless_model import BoundlessModel, check_boundless_pattern
from .errors import ModelFormatError, TrainingError
from .model import check_made, token_arrays

def check_flag(verb, boundless, transition, whitespace=None) -> None:
    """``boundless=`` of ``train`` / ``train_files``: a bool, not with other variants."""
    if not isinstance(boundless, bool):
        raise TypeError(f"{verb}(): boundless must be True or False, not {boundless!r}")
    if boundless and (transition is not None or whitespace is not None):
        raise TypeError(f"{verb}(): boundless=True is a variant of byte-level BPE of its own: "
                        "not with superbpe_transition or whitespace")


def check_options(opts, texts=None) -> None:
    """Refuse what BoundlessBPE does not do, before any work."""
    if opts.base != "bytes":
        raise TrainingError("boundless=True is byte-level BPE (base='bytes'): char mode drops "
                            "the spaces superwords keep")
    if opts.merge_batch != 1:
        raise TrainingError("boundless=True with merge_batch is not supported: BoundlessBPE "
                            "here is exact")
    if opts.normalization is not None:
        raise TrainingError("boundless=True does not normalize: normalize the corpus first")
    check_boundless_pattern(opts.pattern)
    if isinstance(texts, dict):
        raise TrainingError("boundless=True needs documents: a {word: count} dict has lost "
                            "which pre-tokens are neighbours")


# --------------------------------------------------------------------------- the unit pass

class UnitCollector:
    """The corpus as units (``kernels.boundless.scan_units``), batch by batch: each
    pre-token that is one of the ``use`` tokens of ``classic`` (word pre-tokens that
    training makes single tokens) as that token's (classic) id, any other as -1."""

    def __init__(self, classic, use, pattern, special_tokens, num_threads=None):
        from .kernels.boundless import token_slots
        from .parallel import call_kernel

        self.pattern = pretokenize.resolve_pattern(pattern)
        self.matcher = pretokenize.SpecialTokenMatcher(special_tokens)  # cut as counting does
        self.num_threads = num_threads
        self.tok_off, self.tok_data = token_arrays(classic.model.token_bytes)
        self.slots = call_kernel(token_slots, self.tok_off, self.tok_data, use)
        self._parts = []

    def add_texts(self, texts) -> None:
        from .counting import documents_as_bytes

        self.add_batch(*documents_as_bytes(texts))

    def add_batch(self, data, doc_offsets) -> None:
        from ._scanner import PATTERN_IDS, read_only, scan_tail
        from .counting import COUNT_CHUNK_BYTES, cut_special_tokens
        from .kernels.boundless import scan_units, scan_units_serial
        from .parallel import call_kernel, default_threads, run_parallel

        data = np.ascontiguousarray(data, dtype=np.uint8)
        doc_offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
        if self.matcher:
            data, doc_offsets = cut_special_tokens(data, doc_offsets, self.matcher)
        n_threads = self.num_threads or default_threads()
        # Scanned and looked up in one pass (BoundlessBPE's patterns are the scanner's).
        n_bytes = int(doc_offsets[-1] - doc_offsets[0])
        n_blocks = max(1, min(4 * n_threads, n_bytes >> 16))
        args = (read_only(data), read_only(doc_offsets),
                PATTERN_IDS[pretokenize.scanner_name(self.pattern)], *scan_tail(),
                COUNT_CHUNK_BYTES, self.slots, self.tok_off, self.tok_data, n_blocks)
        if n_blocks > 1 and n_threads > 1:
            units = run_parallel(scan_units, n_threads, *args, serial=(scan_units_serial, args))
        else:
            units = call_kernel(scan_units_serial, *args)
        self._parts.append(units)

    def units(self) -> np.ndarray:
        """``int32[n + 1]``: the runs of units of every batch (each followed by a -1),
        then a -1."""
        return np.concatenate(self._parts + [np.array([-1], np.int32)])


# --------------------------------------------------------------------------- training

def word_units(classic):
    """Which of ``classic``'s tokens a pre-token may be as a unit of a supermerge, and
    when: ``(use uint8[n_tokens], ready int64[n_tokens])``. A token is used when its bytes
    are a ``BOUNDLESS_WORD`` and a pre-token of those bytes becomes that one token with
    the ordinary merges; ``ready`` counts the ordinary merges done by then (a word becomes
    one token in training at the step its last merge is made)."""
    from ._scanner import class_table
    from .kernels.boundless import word_flags, word_tokens
    from .kernels.hashing import build_rank_table
    from .parallel import call_kernel

    tok_off, tok_data = token_arrays(classic.model.token_bytes)
    stage1, stage2 = class_table()
    is_word = call_kernel(word_flags, tok_off, tok_data, stage1, stage2)
    keys, vals = build_rank_table(np.asarray(classic.merges, np.int32),
                                  np.asarray(classic.merge_ids, np.int32))
    n = len(is_word)
    token, ready = call_kernel(word_tokens, tok_data, tok_off, n, keys, vals)
    use = (is_word == 1) & (token == np.arange(n))
    return use.astype(np.uint8), ready


def interleave_supermerges(classic, units, ready, opts, report=None):
    """The BoundlessBPE tokenizer from ``classic`` (classic training with the whole budget
    on the same corpus), the corpus's ``units`` and ``word_units``' ``ready``."""
    import time

    from .kernels.boundless import STEP_SUPER, final_merges, interleave
    from .merge_loop import UNLIMITED
    from .parallel import call_kernel

    t0 = time.perf_counter()
    n_special = len(opts.special_tokens)
    c_merges = np.asarray(classic.merges, np.int32)
    c_ids = np.asarray(classic.merge_ids, np.int64)
    c_counts = np.asarray(classic.merge_counts, np.int64)
    tokens = classic.model.token_bytes
    pid, left, right, count, occ_off, occ_pos = pair_table_of(units, opts.num_threads)
    tlen = np.fromiter(map(len, tokens), np.int64, len(tokens))
    max_units = UNLIMITED if opts.max_token_length is None else opts.max_token_length
    ok = tlen[left] + tlen[right] <= max_units
    pair_ready = np.where(ok, np.maximum(ready[left], ready[right]), -1)
    # Nor can a pair win before the ordinary merges' count falls to its own: a supermerge
    # must beat the next ordinary merge (which wins ties), its count only falls, and the
    # ordinary counts never rise. So a pair enters the heap at that step at the earliest
    # (k_fit: the first ordinary merge of count <= the pair's, or m, when they run out),
    # not as soon as its words are tokens: on 100 MB of Linux sources 626 k pushes of
    # pairs that could never win became 8 k, and interleave took 63 ms instead of 128.
    # (The running minimum makes the search safe even if the counts ever rose.)
    k_fit = np.searchsorted(-np.minimum.accumulate(c_counts), -count, side="left")
    pair_ready = np.where(pair_ready >= 0, np.maximum(pair_ready, k_fit), -1)
    tie = pair_tie(opts.tie_break, left, right, tokens)
    order = np.flatnonzero(pair_ready >= 0)
    order = order[np.argsort(pair_ready[order], kind="stable")].astype(np.int64)
    # A classic merge makes a new token unless its bytes exist (then the id is reused).
    first = np.zeros(len(c_ids), dtype=bool)
    if len(c_ids):
        _, at = np.unique(c_ids, return_index=True)
        first[at] = True
    ord_new = (first & (c_ids >= 256)).astype(np.uint8)
    max_ids = UNLIMITED if opts.vocab_size is None else opts.vocab_size - n_special
    max_merges = UNLIMITED if opts.num_merges is None else opts.num_merges
    kind, which, step_count = call_kernel(
        interleave, c_counts, ord_new, 256, max_merges, max_ids,
        max(1, int(opts.min_frequency)), count.copy(), pair_ready, tie, order, pid, occ_off,
        occ_pos, len(units))
    # Classic ids -> final ids: tokens are numbered in the order they are made.
    merges, made, final = call_kernel(final_merges, kind, which, c_merges, c_ids, left, right,
                                      len(tokens))
    superword = kind == STEP_SUPER
    # The vocabulary from classic training's, renumbered, and the superwords' bytes (not
    # derived again merge by merge: a Python loop, 45 ms at 32k merges).
    token_bytes = [b""] * max(256, int(made.max()) + 1 if len(made) else 0)
    kept = np.flatnonzero(final >= 0)
    for c, f in zip(kept.tolist(), final[kept].tolist()):
        token_bytes[f] = tokens[c]
    sup = np.flatnonzero(superword)
    for (a, b), m in zip(merges[sup].tolist(), made[sup].tolist()):
        token_bytes[m] = token_bytes[a] + token_bytes[b]
    check_made(merges, made, token_bytes, "the supermerges' vocabulary is inconsistent")
    tok = boundless_tokenizer(merges, superword, opts.pattern, opts.special_tokens,
                              tie_break=opts.tie_break, merge_counts=step_count,
                              _derived=(made, token_bytes))
    if report is not None:
        report.update({"boundless_supermerges": int(superword.sum()),
                       "boundless_word_pairs": int(len(count)),
                       "boundless_units": int(len(units)), "merges": int(len(merges)),
                       "vocab_size": tok.vocab_size,
                       "seconds_supermerges": time.perf_counter() - t0})
    return tok


#: ``pair_table_of`` counts the pairs of two halves of the units at once from this many
#: units (KJV: 786 k; 100 MB of Linux sources: 7.3 M).
PAIR_HALVES_MIN_UNITS = 1 << 16


def pair_table_of(units, num_threads=None):
    """``kernels.boundless.pair_table(units)``; with two threads or more and
    ``PAIR_HALVES_MIN_UNITS`` units, its two halves (cut after a -1, so that no pair spans
    the cut) counted at once (``pair_half``), joined (``joined_pair_halves``: the second
    half's pairs looked up in the first's table), and their positions written at once
    (``fill_positions``): the same arrays. The hash probes are most of the kernel's time
    (a table of 2 M slots for 0.66 M pairs at 100 MB), and one thread leaves the other idle."""
    from .kernels.boundless import (fill_positions, joined_pair_halves, pair_half,
                                    pair_table)
    from .parallel import call_kernel, default_threads, on_parts
    from .small_pages import empty_in_small_pages

    n = len(units)
    mid = n // 2 + int(np.argmax(units[n // 2:] < 0)) + 1 if n else 0  # just after a -1
    if (num_threads or default_threads()) < 2 or n < PAIR_HALVES_MIN_UNITS or mid >= n \
            or units[mid - 1] >= 0:
        return call_kernel(pair_table, units)
    # (4 KiB pages, as the serial kernel's own arrays are: NumPy would ask for huge pages,
    # whose first touch costs 1.4-2.3 ms per MB on the team's VM; see small_pages.)
    pid = empty_in_small_pages(n, np.int32)
    bounds = ((0, mid), (mid, n))
    (left0, right0, count0, keys0, vals0, n0), (left1, right1, count1, _, _, n1) = on_parts(
        lambda k: call_kernel(pair_half, units, *bounds[k], pid), 2)
    left, right, count, occ_off, start0, start1, to_global = call_kernel(
        joined_pair_halves, pid, mid, left0, right0, count0, keys0, vals0, n0, left1, right1,
        count1, n1)
    del keys0, vals0
    occ_pos = empty_in_small_pages(int(occ_off[-1]), np.int64)
    fills = ((start0, np.empty(0, np.int64)), (start1, to_global))  # (the second renumbered)
    on_parts(lambda k: call_kernel(fill_positions, pid, *bounds[k], fills[k][0], occ_pos,
                                   fills[k][1]), 2)
    return pid, left, right, count, occ_off, occ_pos


def pair_tie(tie_break, left, right, tokens) -> np.ndarray:
    """int64 tie key of each unit pair (smaller first), as ``reference.train_boundless``
    orders supermerges of equal count; ``left``/``right`` are classic token ids."""
    if tie_break == "first":  # pairs are numbered in order of first occurrence
        return np.arange(len(left), dtype=np.int64)
    if tie_break == "bytes":  # (left bytes, right bytes): the tokens' order by bytes
        used = np.unique(np.concatenate([left, right]))
        rank = np.zeros(len(tokens), dtype=np.int64)
        rank[used[sorted(range(len(used)), key=lambda i: tokens[used[i]])]] = np.arange(len(used))
        return (rank[left] << 32) | rank[right]
    # Classic ids keep the final ids' order (tokens are numbered as they are made).
    r = np.arange(len(tokens), dtype=np.int64)
    if tie_break == "hf":
        r[:256] = hf_byte_ranks()
    return (r[left] << 32) | r[right]


def train_from_runs(classic, kept_runs, opts, report=None):
    """``train`` / ``train_files(..., boundless=True)`` after classic training, from the
    runs of word-like pieces that counting kept (``WordCounter(keep_runs=True)``'s
    ``kept_runs()``: the runs and the words, see ``units_from_runs``). The corpus is not
    read again: its second scan (``UnitCollector``, which training under a memory budget
    still makes) took longer than counting it (100 MB of Linux sources, two threads: 0.39 s
    against 0.26)."""
    import time

    t0 = time.perf_counter()
    use, ready = word_units(classic)
    units = units_from_runs(classic, use, *kept_runs)
    if report is not None:
        report["seconds_boundless_units"] = time.perf_counter() - t0
    return interleave_supermerges(classic, units, ready, opts, report)


def units_from_runs(classic, use, runs, words) -> np.ndarray:
    """``UnitCollector.units()`` from counting's runs (a list of int32 parts) and words
    (``(store, offsets)``): each counted word's unit is looked up once
    (``kernels.boundless.units_of_words``: the ``use`` token of its bytes, or -1), then the
    runs become units (``units_of_runs``), part by part into one array (joining the parts
    first took 0.6 s on 1.2 GB of Linux sources, in the fresh huge pages NumPy asks for)."""
    from .kernels.boundless import token_slots, units_of_runs, units_of_words
    from .parallel import call_kernel
    from .small_pages import empty_in_small_pages

    tok_off, tok_data = token_arrays(classic.model.token_bytes)
    slots = call_kernel(token_slots, tok_off, tok_data, use)
    store, offsets = words
    unit = call_kernel(units_of_words, np.ascontiguousarray(store, np.uint8),
                       np.ascontiguousarray(offsets, np.int64), slots, tok_off, tok_data)
    units = empty_in_small_pages(sum(len(part) for part in runs) + 1, np.int32)
    at = 0
    for part in runs:
        part = np.ascontiguousarray(part, np.int32)
        if len(part) and int(part.max()) >= len(unit):  # (the kernel reads unit[runs[r]])
            raise ValueError("word runs name a word the table does not hold")
        at = call_kernel(units_of_runs, part, unit, units, at)
    units[at] = -1
    return units[:at + 1]


def file_batches(files, column, pattern, on_bad_input, chunk_bytes, max_invalid_utf8,
                 max_chunk_bytes):
    """``(data, doc_offsets)`` batches of corpus files, read as ``training.count_files``
    reads them (the same documents, so the same pre-tokens)."""
    from .counting import coalesce_batches
    from .io.corpus import iter_batches
    from .io.read_stats import ReadStats
    from .io.text_files import chunk_limits
    from .io.utf8_policy import DEFAULT_MAX_INVALID_UTF8, check_max_invalid_utf8

    max_invalid_utf8 = check_max_invalid_utf8(
        DEFAULT_MAX_INVALID_UTF8 if max_invalid_utf8 is None else max_invalid_utf8)
    chunk_bytes, max_chunk_bytes = chunk_limits(chunk_bytes, max_chunk_bytes, None)
    batches = iter_batches(files, column, ReadStats(),
                           splittable=pretokenize.uses_scanner(pattern),
                           on_bad_input=on_bad_input, chunk_bytes=chunk_bytes,
                           max_invalid_utf8=max_invalid_utf8, max_chunk_bytes=max_chunk_bytes)
    yield from coalesce_batches(batches, None)


def train_files(classic, batches, opts, report=None):
    """``train_files(..., boundless=True, max_memory=...)``: the corpus scanned again for its
    units (``UnitCollector``; counting under a budget keeps no runs, which take about 4
    bytes a word-like piece); ``batches`` yields ``(data, doc_offsets)``."""
    use, ready = word_units(classic)
    collector = UnitCollector(classic, use, opts.pattern, opts.special_tokens,
                              opts.num_threads)
    for data, doc_offsets in batches:
        collector.add_batch(data, doc_offsets)
    return interleave_supermerges(classic, collector.units(), ready, opts, report)


# --------------------------------------------------------------------------- the model

def boundless_tokenizer(merges, superword, pattern, special_tokens=(), *, tie_break=None,
                        merge_counts=None, source=None, roles=None, _derived=None):
    """A BoundlessBPE Tokenizer: ``merges`` (rank order) with ``superword`` flags
    (``_derived``: the merges' ids and the vocabulary, when training knows them)."""
    from .layout import make_level
    from .text import UnicodeNormalizer
    from .tokenizer import Tokenizer

    pattern = check_boundless_pattern(pattern, "a BoundlessBPE model")
    level = make_level("bytes", pattern, None, None, None, source)
    model = BoundlessModel(merges, level.base_bytes, superword, pattern, source, _derived)
    tok = Tokenizer.from_parts(model, level, UnicodeNormalizer(None),
                               special_tokens=special_tokens, tie_break=tie_break,
                               source=source, roles=roles)
    if merge_counts is not None:
        tok.merge_counts = np.asarray(merge_counts, np.int64)
    return tok


def tokenizer_from_spec(spec: dict):
    """The BoundlessBPE Tokenizer of a parsed model file."""
    source = spec.get("_source")
    try:
        pattern = check_boundless_pattern(spec["pattern"], "a BoundlessBPE model")
    except TrainingError as exc:
        raise ModelFormatError(str(exc), source, "pattern") from None
    return boundless_tokenizer(spec["merges"], spec["superword"], pattern,
                               spec["special_tokens"], tie_break=spec.get("tie_break"),
                               source=source, roles=spec.get("roles"))
