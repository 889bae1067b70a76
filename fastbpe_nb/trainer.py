"""Training orchestration: corpus -> word-frequency table -> merge kernel -> Tokenizer.

The expensive part, learning the merges, is one call of ``kernels.merge.train_merges``
on the word table (DESIGN.md section 2). This module counts the words, lays the table
out as flat arrays with fixed dtypes, validates the options, and runs the kernel in a
worker thread (it releases the GIL) so that a progress bar can follow it and Ctrl-C can
stop it cleanly.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

import numpy as np

from . import pretokenize
from .errors import MemoryBudgetError, TrainingError
from .byte_level import hf_byte_ranks
from .text import clean_text
from .tokenizer import Tokenizer
from .validation import check_num_threads

_UNLIMITED = 1 << 62
_INT64_MAX = (1 << 63) - 1
#: Used when neither vocab_size nor num_merges is given.
DEFAULT_VOCAB_SIZE = 32768
#: The tie rules (``reference.py`` defines each; the merge kernel implements them).
TIE_RULES = ("ids", "hf", "first", "bytes")


def count_words(texts, pattern, special_tokens=(), keep_gaps=True) -> collections.Counter:
    """Pre-token counts of ``texts`` in first-occurrence order (special tokens dropped)."""
    counter: collections.Counter = collections.Counter()
    matcher = pretokenize.SpecialTokenMatcher(special_tokens)
    for index, text in enumerate(_iter_texts(texts)):
        if not isinstance(text, str):
            raise TypeError(f"document {index}: expected str, got {type(text).__name__}")
        text = clean_text(text)
        for segment, is_special in pretokenize.split_special(text, matcher):
            if not is_special:
                counter.update(pretokenize.split(segment, pattern, keep_gaps))
    return counter


def _normalized(texts, form):
    from .text import normalize

    for text in _iter_texts(texts):
        yield normalize(clean_text(text), form) if isinstance(text, str) else text


def count_corpus(texts, pattern, special_tokens=(), num_threads=None, batch_bytes=16 << 20):
    """Count the pre-tokens of ``texts`` (str documents or pyarrow string arrays) in batches."""
    from .counting import WordCounter

    counter = WordCounter(pattern, special_tokens, num_threads)
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of documents (a list of str), not one str")
    module = type(texts).__module__ or ""
    if module.startswith("pyarrow"):
        from .io.arrow_text import string_chunks, text_buffers

        for chunk in string_chunks(texts):
            for start in range(0, len(chunk), 65536):
                data, offsets, _ = text_buffers(chunk.slice(start, 65536))
                counter.add_batch(data, offsets)
        return counter
    batch, size = [], 0
    for text in texts:
        batch.append(text)
        size += len(text) if isinstance(text, str) else 0
        if size >= batch_bytes:
            counter.add_texts(batch)
            batch, size = [], 0
    if batch:
        counter.add_texts(batch)
    return counter


def _iter_texts(texts):
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of documents (a list of str), not one str")
    module = type(texts).__module__ or ""
    if module.startswith("pyarrow"):
        from .io.arrow_text import string_chunks

        for chunk in string_chunks(texts):  # checked before pyarrow reads the rows
            for start in range(0, len(chunk), 4096):
                for text in chunk.slice(start, 4096).to_pylist():
                    if text is not None:
                        yield text
        return
    yield from texts


def word_table(words: dict, base: str, end_of_word: str | None):
    """Lay out ``{word: count}`` as the kernel's CSR word table.

    Returns ``(symbols int32[total], offsets int64[n+1], counts int64[n], alphabet)`` where
    ``alphabet`` is None in byte mode and the sorted base symbols in char mode.
    """
    for w, c in words.items():
        if not isinstance(w, str):
            raise TypeError(f"word {w!r}: words must be str")
        if w and (isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer))
                  or c <= 0):
            raise TrainingError(f"word {w!r}: count must be a positive integer, got {c!r}")
        if w and c > _INT64_MAX:
            raise TrainingError(f"word {w!r}: count {c} does not fit in int64 (at most 2**63 - 1)")
    if base == "bytes":
        symbols, lengths, counts = _byte_table(words)
        alphabet = None
    else:
        items = [(w, c) for w, c in words.items() if w]
        counts = np.fromiter((c for _, c in items), dtype=np.int64, count=len(items))
        text = "".join(w for w, _ in items)
        chars = sorted(set(text))
        if end_of_word is not None:
            if any(end_of_word in w for w, _ in items):
                raise TrainingError(
                    f"the end_of_word marker {end_of_word!r} occurs in the training text; "
                    "choose a marker that does not (e.g. '</w>')"
                )
            alphabet = sorted(set(chars) | {end_of_word})
        else:
            alphabet = chars
        index = {s: i for i, s in enumerate(alphabet)}
        lengths = np.fromiter((len(w) for w, _ in items), dtype=np.int64, count=len(items))
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        char_cps = np.array([ord(c) for c in chars], dtype=np.uint32)
        char_ids = np.array([index[c] for c in chars], dtype=np.int32)
        ids = char_ids[np.searchsorted(char_cps, cps)] if len(cps) else np.zeros(0, np.int32)
        if end_of_word is None:
            symbols = ids.astype(np.int32)
        else:
            ends = np.cumsum(lengths + 1)  # one past each word's marker
            symbols = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.int32)
            is_marker = np.zeros(len(symbols), dtype=bool)
            is_marker[ends - 1] = True
            symbols[is_marker] = index[end_of_word]
            symbols[~is_marker] = ids
            lengths = lengths + 1
    if len(lengths) and lengths.max() >= 2**31:
        raise TrainingError("a pre-token is 2 GiB or longer; use a pre-tokenization pattern")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return symbols, offsets, counts, alphabet


def check_count_range(offsets, counts) -> None:
    """Raise TrainingError when the merge kernel's int64 pair counts could overflow.

    A pair's count is a sum of word counts, one per occurrence: it never exceeds
    ``sum(count * (length - 1))`` over the words. While a word is rewritten, the counts of
    its new pairs are added before the old ones are taken away, so one word may add up to
    ``count * length`` more for a moment. Both, and the total of the counts (the report's
    ``pre_tokens``), must fit in int64; a wrapped count would silently pick a wrong merge.
    """
    if not len(counts):
        return
    lengths = np.diff(np.asarray(offsets, dtype=np.int64))
    c = np.asarray(counts, dtype=np.float64)
    w = lengths.astype(np.float64)
    # A float estimate decides the common case; exact integers only when it is close.
    estimate = float(c @ np.maximum(w - 1, 0)) + float((c * w).max())
    if estimate < 2.0**62 and float(c.sum()) < 2.0**62:
        return
    cs, ls = [int(x) for x in counts], [int(x) for x in lengths]
    total = sum(cs)
    bound = sum(x * max(n - 1, 0) for x, n in zip(cs, ls)) + max(x * n for x, n in zip(cs, ls))
    if bound > _INT64_MAX or total > _INT64_MAX:
        what = (f"the counts sum to {total:,}" if total > _INT64_MAX else
                f"a pair's count could reach {bound:,} (the sum of count x (length - 1) over "
                "the words, plus one word's count x length while it is rewritten)")
        raise TrainingError(f"word counts too large: {what}, over the int64 limit "
                            f"{_INT64_MAX:,} of the merge kernel's counters; scale the counts "
                            "down (BPE depends only on their ratios, up to ties)")


def _byte_table(words: dict):
    """Byte mode's ``(symbols int32[S], lengths int64[W], counts int64[W])`` of a validated
    ``{word: count}``, empty words dropped, without a Python object per word: the words
    are joined and encoded once (S bytes, then the 4S int32 symbols); per word only its
    UTF-8 length is taken (from ``len`` when the text is ASCII). Measured (1.95M words of
    9 bytes, VmHWM reset before the call): a peak of +87 MiB (the outputs are 98 MiB, partly
    in reused memory) in 0.8 s, against +392 MiB in 1.9 s when each word's bytes and
    (word, count) tuple were kept in lists."""
    n = len(words)
    values = words.values() if "" not in words else (c if w else 1 for w, c in words.items())
    counts = np.fromiter(values, dtype=np.int64, count=n)  # the empty word's is not checked
    joined = "".join(words)
    try:
        raw = joined.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: each word cleaned alone (rare)
        raw = None
    if raw is not None and len(raw) == len(joined):  # ASCII: characters are bytes
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=n)
    elif raw is not None:
        lengths = np.fromiter((len(w.encode("utf-8")) for w in words), dtype=np.int64, count=n)
    else:
        cleaned = [clean_text(w).encode("utf-8") for w in words]  # per word: no pairing across
        lengths = np.fromiter(map(len, cleaned), dtype=np.int64, count=n)
        raw = b"".join(cleaned)
        del cleaned
    del joined
    symbols = np.frombuffer(raw, dtype=np.uint8).astype(np.int32)
    del raw
    keep = lengths > 0
    if not keep.all():
        lengths, counts = lengths[keep], counts[keep]
    return symbols, lengths, counts


def run_merge_kernel(symbols, offsets, counts, base_bytes, base_rank, tie_mode, max_merges,
                     max_ids, min_count, max_units, progress=False, max_memory=None):
    """Run ``train_merges`` in a shielded worker thread; Ctrl-C asks it to stop and re-raises.

    ``max_memory`` (bytes, the whole process): the kernel may allocate what is left of it
    after the current RSS; it checks that before every allocation and stops short of it,
    and this raises ``MemoryBudgetError`` naming the phase and the bytes it needed.
    """
    from .kernels.merge import (PROG_BUDGET, PROG_NEED, PROG_PHASE, STOPPED_MEMORY,
                                train_merges, word_index_rows)
    from .parallel import call_kernel_shielded

    check_count_range(offsets, counts)

    tok_off = np.zeros(len(base_bytes) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in base_bytes], out=tok_off[1:])
    tok_data = np.frombuffer(b"".join(base_bytes), dtype=np.uint8).copy()
    # merges done / stop request / stopped (1 asked, 2 memory) / byte budget / need / phase
    shared = np.zeros(6, dtype=np.int64)
    in_use = 0
    if max_memory is not None:
        # Compile (or load) the kernel first, on a one-word table: compiling takes ~100 MiB
        # that the allocator keeps, and the budget left to the kernel is counted after it.
        call_kernel_shielded(train_merges, np.zeros(2, np.int32), np.array([0, 2], np.int64),
                             np.ones(1, np.int64), tok_off, tok_data, base_rank, tie_mode, 1,
                             _UNLIMITED, 1, _UNLIMITED, np.zeros(6, np.int64),
                             np.empty((16, 2), np.int64))
        in_use = _rss_bytes()
        shared[PROG_BUDGET] = max(1, int(max_memory) - in_use - KERNEL_SLACK_BYTES)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = min(max_merges, max_ids - len(base_bytes))
        bar = tqdm(total=total if total < _UNLIMITED // 2 else None, desc="merging",
                   unit="merge", dynamic_ncols=True)

    def show_progress():
        if bar is not None:
            bar.update(int(shared[0]) - bar.n)

    def ask_to_stop():
        shared[1] = 1

    # The word index at its upper bound, so that it never grows (a growth copies it and
    # holds old + new, its largest peak); np.empty reserves address space, and only the
    # rows in use become resident. Without that much address space (ulimit -v, strict
    # overcommit) the kernel starts smaller and grows it.
    max_len = int(np.max(np.diff(offsets))) if len(counts) else 0
    try:
        nodes = np.empty((word_index_rows(len(symbols), len(counts), max_len), 2), np.int64)
    except MemoryError:
        nodes = np.empty((max(16, len(symbols)), 2), np.int64)
    try:
        result = call_kernel_shielded(
            train_merges, symbols, offsets, counts, tok_off, tok_data, base_rank, tie_mode,
            max_merges, max_ids, min_count, max_units, shared, nodes,
            poll=show_progress, on_interrupt=ask_to_stop,
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

@dataclass
class TrainOptions:
    """Validated training options (shared by ``train``, ``train_files`` and counts files)."""

    vocab_size: int | None
    pattern: str | None
    special_tokens: list
    tie_break: str
    base: str
    end_of_word: str | None
    num_merges: int | None
    min_frequency: int
    max_token_length: int | None
    progress: bool
    num_threads: int | None
    normalization: str | None = None

    @classmethod
    def make(cls, vocab_size=None, *, pattern="default", special_tokens=(), tie_break="ids",
             base="bytes", end_of_word=None, num_merges=None, min_frequency=0,
             max_token_length=None, normalization=None, progress=False, num_threads=None):
        if tie_break not in TIE_RULES:
            raise ValueError(f"tie_break must be one of {TIE_RULES}, not {tie_break!r}")
        if base not in ("bytes", "chars"):
            raise ValueError(f"base must be 'bytes' or 'chars', not {base!r}")
        if normalization not in (None, "NFC", "NFKC"):
            raise ValueError(f"normalization must be None, 'NFC' or 'NFKC', not {normalization!r}")
        if vocab_size is None and num_merges is None:
            vocab_size = DEFAULT_VOCAB_SIZE
        for name, value in (("vocab_size", vocab_size), ("num_merges", num_merges),
                            ("max_token_length", max_token_length), ("min_frequency", min_frequency)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        num_threads = check_num_threads(num_threads)
        if base == "bytes" and end_of_word is not None:
            raise ValueError("end_of_word is for base='chars' (byte mode needs no marker)")
        if pattern == "default":
            pattern = "gpt2" if base == "bytes" else pretokenize.WHITESPACE_WORDS_PATTERN
        # "GPT2", "o200k_base" -> the canonical name; an unknown name is a PatternError.
        pattern = pretokenize.resolve_pattern(pattern)
        pretokenize.compiled_pattern(pattern)
        special_tokens = list(dict.fromkeys(special_tokens))
        return cls(vocab_size, pattern, special_tokens, tie_break, base, end_of_word,
                   num_merges, min_frequency, max_token_length, progress, num_threads,
                   normalization)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (Linux: ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_SENTENCEPIECE_OPTIONS = ("byte_fallback", "split_digits", "character_coverage",
                          "add_dummy_prefix", "remove_extra_whitespaces", "user_defined_symbols",
                          "control_symbols", "normalization", "tie_break", "progress")


def _train_sentencepiece_style(texts, vocab_size, options):
    """``train(..., whitespace="▁")``: SentencePiece-style BPE (see sentencepiece_style)."""
    from .sentencepiece_train import train_sentencepiece

    options = dict(options)
    if options.pop("whitespace") != "\u2581":
        raise ValueError("whitespace= supports only '\u2581' (SentencePiece style)")
    if options.pop("base", "chars") != "chars":
        raise ValueError("SentencePiece style is char mode: base='chars'")
    sp = {k: options.pop(k) for k in _SENTENCEPIECE_OPTIONS if k in options}
    if "special_tokens" in options:
        sp["user_defined_symbols"] = list(options.pop("special_tokens"))
    if options.get("max_token_length") is not None:
        sp["max_piece_length"] = options.pop("max_token_length")
    options.pop("max_token_length", None)
    options.pop("return_report", None)
    if options:
        raise TypeError(f"not supported with whitespace='\u2581': {sorted(options)}")
    return train_sentencepiece(texts, vocab_size or DEFAULT_VOCAB_SIZE, **sp)


def train_from_table(symbols, offsets, counts, alphabet, opts: TrainOptions, report=None,
                     max_memory=None):
    """Learn merges from a word table and build the Tokenizer (and fill ``report``).

    ``max_memory``: see ``run_merge_kernel`` (the merge phase stops short of it)."""
    t0 = time.perf_counter()
    if opts.base == "bytes":
        base_bytes = [bytes([b]) for b in range(256)]
        ranks = hf_byte_ranks() if opts.tie_break == "hf" else list(range(256))
    else:
        base_bytes = [s.encode("utf-8") for s in alphabet]
        ranks = list(range(len(alphabet)))
    n_base = len(base_bytes)
    max_ids = _UNLIMITED
    if opts.vocab_size is not None:
        max_ids = opts.vocab_size - len(opts.special_tokens)
        if max_ids < n_base:
            raise TrainingError(
                f"vocab_size={opts.vocab_size} is smaller than the {n_base} base symbols"
                + (f" plus {len(opts.special_tokens)} special tokens" if opts.special_tokens else "")
            )
    from .kernels.merge import TIE_BYTES, TIE_FIRST, TIE_RANKS

    tie_mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST, "bytes": TIE_BYTES}[opts.tie_break]
    merges, merge_ids, merge_counts = run_merge_kernel(
        np.ascontiguousarray(symbols, dtype=np.int32), np.ascontiguousarray(offsets, np.int64),
        np.ascontiguousarray(counts, np.int64), base_bytes, np.asarray(ranks, dtype=np.int64),
        tie_mode, _UNLIMITED if opts.num_merges is None else opts.num_merges, max_ids,
        max(1, int(opts.min_frequency)),
        _UNLIMITED if opts.max_token_length is None else opts.max_token_length, opts.progress,
        max_memory=max_memory,
    )
    tok = Tokenizer(merges, pattern=opts.pattern, special_tokens=opts.special_tokens,
                    base=opts.base, alphabet=alphabet, end_of_word=opts.end_of_word,
                    tie_break=opts.tie_break, merge_counts=merge_counts,
                    normalization=opts.normalization)
    if not np.array_equal(tok.merge_ids, merge_ids):  # the kernel and the model must agree
        raise AssertionError("internal error: kernel merge ids differ from the derived vocabulary")
    if report is not None:
        report.update({
            "unique_words": int(len(counts)),
            "pre_tokens": int(np.sum(counts)),
            "merges": int(len(merges)),
            "vocab_size": tok.vocab_size,
            "seconds_merging": time.perf_counter() - t0,
            "peak_rss_bytes": peak_rss_bytes(),
        })
    return tok


def train(texts, vocab_size=None, *, return_report=False, trace=False, **options):
    """Learn a BPE tokenizer from ``texts``.

    Parameters
    ----------
    texts : iterable of str, pyarrow string array, or dict
        Documents, or a ``{word: count}`` dict of pre-tokens taken as given.
    vocab_size : int, optional
        Stop when base symbols + distinct merged tokens + special tokens reach this
        (32768 when neither ``vocab_size`` nor ``num_merges`` is given).
    pattern : str or None
        Pre-tokenization: ``"gpt2"`` (byte mode's default), ``"cl100k"``, ``"o200k"``, any
        regex, or None (no split). Char mode's default is whitespace-separated words.
    special_tokens : sequence of str
        Registered after the merged tokens; cut out of the training text, never merged.
    tie_break : {"ids", "hf", "first", "bytes"}
        How equal pair counts are ordered (DESIGN.md section 3).
    base : {"bytes", "chars"}
        Byte-level BPE, or classic char-level BPE.
    end_of_word : str, optional
        Char mode: a marker appended to every word (e.g. ``"</w>"``).
    num_merges : int, optional
        Stop after this many merges.
    min_frequency : int
        Stop when the best pair occurs fewer times than this.
    max_token_length : int, optional
        Never create a token longer than this many base units (bytes, or characters).
    progress : bool
        Show a progress bar while merging.
    trace : bool
        Print every merge learned (rank, left + right -> new piece, count, vocabulary size).
    num_threads : int, optional
        Threads for word counting (default: all).
    whitespace : str, optional
        ``"\u2581"``: SentencePiece-style BPE (visible whitespace prefixed to pieces, byte
        fallback, digit splitting; options ``byte_fallback``, ``split_digits``,
        ``character_coverage``, ...): returns a ``SentencePieceBPE``.
    return_report : bool
        Also return a dict with the time of each phase and the table sizes.
    """
    if options.get("whitespace") is not None:
        return _train_sentencepiece_style(texts, vocab_size, options)
    options.pop("whitespace", None)
    t0 = time.perf_counter()
    opts = TrainOptions.make(vocab_size, **options)
    report = {"documents": None}
    if opts.normalization is not None and not isinstance(texts, dict):
        texts = _normalized(texts, opts.normalization)
    # No document at all (``[]``, an exhausted iterator, ``{}``) is an error: it is almost
    # always a wrong path or column, and the model of 256 bytes it gives looks like success.
    # Documents that hold no pre-token (``[""]``, only special tokens) train what the
    # specification trains on them, nothing (reference.train): that is their true answer.
    if isinstance(texts, dict):
        if not texts:
            raise TrainingError("nothing to learn: the {word: count} dict is empty")
        symbols, offsets, counts, alphabet = word_table(texts, opts.base, opts.end_of_word)
    elif opts.base == "chars":
        docs = _Counted(texts)
        words = count_words(docs, opts.pattern, opts.special_tokens, keep_gaps=False)
        require_documents(docs.n)
        symbols, offsets, counts, alphabet = word_table(words, opts.base, opts.end_of_word)
    else:
        counter = count_corpus(texts, opts.pattern, opts.special_tokens, opts.num_threads)
        require_documents(counter.n_documents)
        word_bytes, offsets, counts = counter.table()
        symbols = word_bytes.astype(np.int32)
        alphabet = None
        report["documents"] = counter.n_documents
        report["bytes_read"] = counter.n_bytes
    report["seconds_counting"] = time.perf_counter() - t0
    tok = train_from_table(symbols, offsets, counts, alphabet, opts, report)
    if trace:
        from .inspect import print_trace

        print_trace(tok)
    return (tok, report) if return_report else tok


class _Counted:
    """Iterates ``texts`` once, counting the documents (for the error message)."""

    def __init__(self, texts):
        self.texts = texts
        self.n = 0

    def __iter__(self):
        for text in _iter_texts(self.texts):
            self.n += 1
            yield text


def require_documents(n_documents: int) -> None:
    """In-memory training needs at least one document (see ``train``)."""
    if n_documents == 0:
        raise TrainingError("nothing to learn: no document (an empty list or iterator of "
                            "texts); pass the documents to train on")


def require_words(counts, what: str) -> None:
    """Training on no pre-token at all would return a model of the 256 bytes and nothing
    learned, which looks like success: refuse it (empty input, only empty documents, or
    only special tokens)."""
    if len(counts) == 0:
        raise TrainingError(f"nothing to learn: {what} (empty input, only empty documents, "
                            "or only special tokens)")


#: What each training phase of ``train_files`` allocates on top of what is held when it
#: starts, as (bytes per word-table symbol S, bytes per unique word W); S is the total bytes
#: of the unique words. The budget checks use them before each phase (the word table's
#: exact form is ``WordCounter.table_bytes``); the merge kernel then checks every later
#: allocation itself against what is left of the budget (``run_merge_kernel``).
#: Measured with benchmarks/train_memory_phases.py (VmHWM reset before each phase; 986,818
#: unique random 4-12 letter words, gpt2 pattern, S = 9.1 B/word):
#:   counting       14 B/S, 131 B/W   (checked per batch: WordCounter.growth_bytes)
#:   word table      1.8 B/S          estimate 1 B/S + 17 B/W; it was 36 B/S (a gather
#:                                    through int64 index arrays) before the copy path
#:   int32 symbols   4.0 B/S          estimate 4 B/S
#:   merge setup    20.3 B/S          at 4 merges; estimate 20 B/S + 16 B/W (pos, wlen,
#:                                    stamp, the word index's first rows)
#:   merging        62.7 / 75.6 B/S   at 4,744 / 19,744 merges: the word index (16 B per
#:                                    node, ~2 nodes per symbol), pair store and table,
#:                                    heap; the kernel counts them as they grow
#: The counter (131 B/W here) is freed before merging; it used to stay alive throughout.
PHASE_BYTES = {
    "word table": (1, 17),
    "int32 symbols": (4, 0),
    "merge setup": (20, 16),  # + the int32 symbols, already held
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
    in_use = _rss_bytes()
    if in_use + need > max_memory:
        raise MemoryBudgetError(
            f"{phase} needs about {need / 2**20:,.0f} MiB on top of the {in_use / 2**20:,.0f} "
            f"MiB in use, over the max_memory budget of {max_memory / 2**20:,.0f} MiB"
            + (f" ({detail})" if detail else "") + "; stopped before allocating it")


def _rss_bytes() -> int:
    """Current resident memory (Linux /proc; falls back to the peak)."""
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def chunk_limits(chunk_bytes, max_chunk_bytes=None, max_memory=None):
    """``(chunk_bytes, max_chunk_bytes)`` for the text reader, held within ``max_memory``.

    Counting one chunk holds about 10-15 bytes per text byte (the chunk and its copies,
    its pre-token offsets, the kernel's tables) on top of the ~230 MiB that the loaded
    kernels take, and the next batch's need is checked against the budget before it is
    counted (``check_budget``, at PHASE_BYTES' pessimistic rate): under a budget no chunk may
    exceed 1/200 of it (2 MiB of 400 MiB), which leaves that check room.
    """
    from .io.text_files import default_max_chunk_bytes

    for name, value in (("chunk_bytes", chunk_bytes), ("max_chunk_bytes", max_chunk_bytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 8):
            raise ValueError(f"{name} must be an int >= 8, got {value!r}")
    limit = max_chunk_bytes or default_max_chunk_bytes(chunk_bytes)
    if max_memory is not None:
        limit = min(limit, max(1 << 20, max_memory // 200))
        chunk_bytes = min(chunk_bytes, max(1 << 16, limit // 2))
    return chunk_bytes, limit


def count_files(paths, column="text", *, pattern="gpt2", special_tokens=(), num_threads=None,
                on_bad_input="error", progress=False, max_memory=None, chunk_bytes=16 << 20,
                max_invalid_utf8=None, max_chunk_bytes=None):
    """Count the pre-tokens of corpus files; returns ``(WordCounter, ReadStats)``.

    Files are streamed batch by batch (text chunks cut at safe boundaries, never longer
    than ``max_chunk_bytes``; JSONL blocks of lines; Parquet row groups; Arrow record
    batches), so memory grows with the unique words, not the corpus. ``max_invalid_utf8``
    (default 0.01) is the share of invalid UTF-8 bytes a file may hold (see
    ``fastbpe_nb.io.corpus``). No file found is a ``CorpusReadError``.
    """
    import os

    from .counting import WordCounter, coalesce_batches
    from .io.corpus import iter_batches
    from .io.input_files import check_on_bad_input, expand_paths
    from .io.read_stats import ReadStats
    from .io.utf8_policy import DEFAULT_MAX_INVALID_UTF8, check_max_invalid_utf8

    pattern = pretokenize.resolve_pattern(pattern)
    pretokenize.compiled_pattern(pattern)
    check_on_bad_input(on_bad_input)
    max_invalid_utf8 = check_max_invalid_utf8(
        DEFAULT_MAX_INVALID_UTF8 if max_invalid_utf8 is None else max_invalid_utf8)
    chunk_bytes, max_chunk_bytes = chunk_limits(chunk_bytes, max_chunk_bytes, max_memory)
    counter = WordCounter(pattern, special_tokens, check_num_threads(num_threads))
    if max_memory is not None:
        counter.memory_check = lambda need: check_budget(
            "counting (the next batch)", need, max_memory,
            f"{counter.n_unique:,} unique words so far")
    stats = ReadStats()
    files = expand_paths(paths, on_bad_input, stats.ignored, stats.skipped_files)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = sum(os.path.getsize(f) for f in files)
        bar = tqdm(total=total, desc="counting", unit="B", unit_scale=True, dynamic_ncols=True)
    try:
        batches = iter_batches(files, column, stats, splittable=pretokenize.uses_scanner(pattern),
                               on_bad_input=on_bad_input, chunk_bytes=chunk_bytes,
                               max_invalid_utf8=max_invalid_utf8, max_chunk_bytes=max_chunk_bytes)
        # Under a budget, joined batches stay within the chunk limit too.
        joined = coalesce_batches(batches, max_chunk_bytes if max_memory is not None else None)
        for data, doc_offsets in joined:
            counter.add_batch(data, doc_offsets)
            if bar is not None:
                bar.update(min(stats.bytes_read, bar.total) - bar.n)
            if max_memory is not None and _rss_bytes() > max_memory:
                raise MemoryBudgetError(
                    f"counting used {_rss_bytes() / 2**20:.0f} MiB, over the max_memory budget "
                    f"of {max_memory / 2**20:.0f} MiB ({counter.n_unique:,} unique words so far)")
    finally:
        counter.memory_check = None  # it refers to the counter: a cycle would delay freeing it
        if bar is not None:
            bar.close()
    return counter, stats


def train_files(paths, vocab_size=None, *, column="text", on_bad_input="error", max_memory=None,
                counts_output=None, chunk_bytes=16 << 20, return_report=False, trace=False,
                max_invalid_utf8=None, max_chunk_bytes=None, **options):
    """Learn a tokenizer from corpus files (text, JSONL, Parquet, Arrow IPC), streamed.

    ``paths``: files, globs or folders (see ``fastbpe_nb.io.corpus`` for which files they
    name and how each kind is read). A counts file written by ``fastbpe count`` (or
    ``counts_output=``) is used as the word table directly, with the pattern it was made
    with. Options are those of ``train``; ``column`` names the text column of Parquet and
    Arrow files and the text field of JSONL files; ``on_bad_input="skip"`` skips unreadable
    files (reported) instead of raising ``CorpusReadError``; ``max_memory`` (bytes) stops
    with ``MemoryBudgetError`` and bounds the text chunks; ``max_invalid_utf8`` (default
    0.01) is the share of invalid UTF-8 a file may hold before it is refused. No file
    found, or no pre-token in them, is an error (``CorpusReadError`` / ``TrainingError``).
    """
    from .io.input_files import expand_paths
    from .io.counts_file import is_counts_file, load_counts, save_counts

    t0 = time.perf_counter()
    ignored, skipped = [], []
    files = expand_paths(paths, on_bad_input, ignored, skipped)
    report = {}
    if len(files) == 1 and file_is_arrow(files[0]) and is_counts_file(files[0]):
        word_bytes, offsets, counts, meta = load_counts(files[0])
        options = dict(options)
        given = options.get("pattern", "default")
        if given != "default":
            given = pretokenize.resolve_pattern(given)
        if given not in ("default", meta.get("pattern")):
            raise TrainingError(f"{files[0]} was counted with pattern {meta.get('pattern')!r}, "
                                f"not {options['pattern']!r}")
        options["pattern"] = meta.get("pattern")
        counted_specials = list(meta.get("special_tokens", ()))
        given = list(options.get("special_tokens") or ())
        if given and given != counted_specials:
            raise TrainingError(f"{files[0]} was counted with special tokens {counted_specials}, "
                                f"not {given}: they decide what text was cut out")
        options["special_tokens"] = counted_specials
        opts = TrainOptions.make(vocab_size, **options)
        report["counts_file"] = files[0]
        require_words(counts, f"the counts file {files[0]} holds no word")
    else:
        opts = TrainOptions.make(vocab_size, **options)
        if opts.base != "bytes":
            raise TrainingError("train_files supports base='bytes' (use train() for char mode)")
        if opts.normalization is not None:
            raise TrainingError("train_files does not normalize yet: use train() with "
                                "normalization=, or normalize the corpus first")
        counter, stats = count_files(files, column, pattern=opts.pattern,
                                     special_tokens=opts.special_tokens,
                                     num_threads=opts.num_threads, on_bad_input=on_bad_input,
                                     progress=opts.progress, max_memory=max_memory,
                                     chunk_bytes=chunk_bytes, max_invalid_utf8=max_invalid_utf8,
                                     max_chunk_bytes=max_chunk_bytes)
        stats.ignored[:0] = ignored
        stats.skipped_files[:0] = skipped
        check_budget("building the word table", counter.table_bytes(), max_memory,
                     f"{counter.n_unique:,} unique words")
        word_bytes, offsets, counts = counter.table()
        report.update(stats.as_dict())
        require_words(counts, f"{stats.files:,} files, {stats.bytes_read:,} bytes, "
                              f"{stats.documents:,} documents and not one pre-token")
        report["pre_tokens_counted"] = counter.n_pieces
        del counter  # its hash table and store are not needed for merging: free them first
        if counts_output is not None:
            save_counts(counts_output, word_bytes, offsets, counts, opts.pattern, opts.special_tokens)
    report["seconds_counting"] = time.perf_counter() - t0
    n_symbols, n_words = int(offsets[-1]), len(counts)
    detail = f"{n_words:,} unique words, {n_symbols:,} symbols"
    check_budget("converting the word table to int32 symbols",
                 phase_bytes("int32 symbols", n_symbols, n_words), max_memory, detail)
    symbols = word_bytes.astype(np.int32)
    del word_bytes
    # The kernel re-checks these exactly (and every later growth) before allocating.
    check_budget("merging (setting up)", phase_bytes("merge setup", n_symbols, n_words),
                 max_memory, detail)
    tok = train_from_table(symbols, offsets, counts, None, opts, report, max_memory=max_memory)
    report["seconds_total"] = time.perf_counter() - t0
    if trace:
        from .inspect import print_trace

        print_trace(tok)
    return (tok, report) if return_report else tok


def file_is_arrow(path) -> bool:
    from .io.input_files import file_kind

    return file_kind(str(path)) == "arrow"


def count_to_file(paths, output, column="text", *, pattern="gpt2", special_tokens=(), **kwargs):
    """Count corpus files and write the word table to ``output`` (Arrow IPC); returns stats."""
    import os

    from .io.atomic import check_writable
    from .io.counts_file import save_counts

    t0 = time.perf_counter()
    # Before counting for minutes: a missing or read-only destination fails now.
    check_writable(os.path.dirname(os.path.abspath(os.fspath(output))))
    counter, stats = count_files(paths, column, pattern=pattern, special_tokens=special_tokens,
                                 **kwargs)
    word_bytes, offsets, counts = counter.table()
    save_counts(output, word_bytes, offsets, counts, counter.pattern, special_tokens)
    report = stats.as_dict()
    report.update(unique_words=int(len(counts)), pre_tokens=counter.n_pieces,
                  seconds=time.perf_counter() - t0, peak_rss_bytes=peak_rss_bytes())
    return report
