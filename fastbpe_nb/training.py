"""Training API: corpus -> word table -> merge kernel -> Tokenizer.

The expensive part, learning the merges, is one call of ``kernels.merge.train_merges``
on the word table (docs/architecture.md, section 3). ``word_table`` counts the words and
lays the table out as flat arrays with fixed dtypes, ``merge_loop`` runs the kernel in a worker
thread (it releases the GIL) so that a progress bar can follow it and Ctrl-C can stop it
cleanly; this module validates the options, reads corpus files, applies the memory
budget between the phases and builds the Tokenizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import boundless as boundless_bpe, pretokenize
from .byte_level import hf_byte_ranks
from .errors import MemoryBudgetError, TrainingError
from .roles import TokenRoles, check_roles
from .pruning import Pruning
from .merge_loop import (TIE_RULES, UNLIMITED, check_budget, peak_rss_bytes, phase_bytes,
                         kernel_table, rss_bytes, run_merge_kernel)
from .text import clean_text
from .tokenizer import Tokenizer
from .validation import check_merge_batch, check_min_count, check_num_threads
from .word_table import count_corpus, count_words, iter_texts, prune_rare_words, word_table

#: Used when neither vocab_size nor num_merges is given.
DEFAULT_VOCAB_SIZE = 32768


def _normalized(texts, form):
    from .text import normalize

    for text in iter_texts(texts):
        yield normalize(clean_text(text), form) if isinstance(text, str) else text


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
    merge_batch: int = 1

    @classmethod
    def make(cls, vocab_size=None, *, pattern="default", special_tokens=(), tie_break="ids",
             base="bytes", end_of_word=None, num_merges=None, min_frequency=0,
             max_token_length=None, normalization=None, progress=False, num_threads=None,
             merge_batch=1):
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
        check_merge_batch(merge_batch)
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
                   normalization, merge_batch)

    def id_bound(self, n_base: int) -> int:
        """An upper bound of the token ids training can make from ``n_base`` base tokens
        (the merge kernel's symbols must hold them)."""
        bound = UNLIMITED
        if self.vocab_size is not None:
            bound = max(n_base, self.vocab_size - len(self.special_tokens))
        if self.num_merges is not None:
            bound = min(bound, n_base + self.num_merges)
        return bound


#: Options that only SentencePiece-style training takes.
_SENTENCEPIECE_ONLY = ("byte_fallback", "split_digits", "character_coverage", "add_dummy_prefix",
                       "remove_extra_whitespaces", "user_defined_symbols", "control_symbols")


def train_from_table(symbols, offsets, counts, alphabet, opts: TrainOptions, report=None,
                     max_memory=None, two_cores=True):
    """Learn merges from a word table and build the Tokenizer (and fill ``report``).

    ``max_memory``, ``two_cores`` (False: another phase runs meanwhile): see
    ``run_merge_kernel``'s ``max_memory`` and ``halves``."""
    t0 = time.perf_counter()
    if opts.base == "bytes":
        base_bytes = [bytes([b]) for b in range(256)]
        ranks = hf_byte_ranks() if opts.tie_break == "hf" else list(range(256))
    else:
        base_bytes = [s.encode("utf-8") for s in alphabet]
        ranks = list(range(len(alphabet)))
    n_base = len(base_bytes)
    max_ids = UNLIMITED
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
        symbols, np.ascontiguousarray(offsets, np.int64),
        np.ascontiguousarray(counts, np.int64), base_bytes, np.asarray(ranks, dtype=np.int64),
        tie_mode, UNLIMITED if opts.num_merges is None else opts.num_merges, max_ids,
        max(1, int(opts.min_frequency)),
        UNLIMITED if opts.max_token_length is None else opts.max_token_length, opts.progress,
        max_memory=max_memory, merge_batch=opts.merge_batch,
        halves=two_cores and opts.num_threads != 1,
    )
    tok = Tokenizer(merges, pattern=opts.pattern, special_tokens=opts.special_tokens,
                    base=opts.base, alphabet=alphabet, end_of_word=opts.end_of_word,
                    tie_break=opts.tie_break, merge_counts=merge_counts,
                    normalization=opts.normalization)
    if not np.array_equal(tok.merge_ids, merge_ids):  # the kernel and the model must agree
        raise AssertionError("internal error: kernel merge ids differ from the derived vocabulary")
    if report is not None:
        report.update({
            "unique_words": int(len(counts)), "pre_tokens": int(np.sum(counts)),
            "merges": int(len(merges)),
            "vocab_size": tok.vocab_size,
            "seconds_merging": time.perf_counter() - t0,
            "peak_rss_bytes": peak_rss_bytes(),
        })
    return tok


#: What each option of ``train`` / ``train_files`` is when not given (then not passed on).
_NOT_GIVEN = {"pattern": "default", "special_tokens": (), "tie_break": "ids",
              "min_frequency": 0, "progress": False, "merge_batch": 1}


def _given_options(verb: str, sentencepiece_style, **options) -> dict:
    """The options a caller gave (those at their "not given" value dropped), refusing the
    SentencePiece-style ones without ``whitespace="▁"``, in the caller's words."""
    given = {k: v for k, v in options.items()
             if (v is not None or k == "pattern")  # pattern=None: no split, a real choice
             and not (k in _NOT_GIVEN and _same(v, _NOT_GIVEN[k]))}
    if not sentencepiece_style:
        stray = sorted(set(given) & set(_SENTENCEPIECE_ONLY))
        if stray:
            raise TypeError(f"{verb}(): {', '.join(stray)} {'is an option' if len(stray) == 1 else 'are options'}"
                            " of SentencePiece-style training: pass whitespace='\u2581' too")
    return given


def _check_superbpe(verb, transition, pattern, whitespace=None) -> None:
    if pattern is not None and transition is None:
        raise TypeError(f"{verb}(): superbpe_pattern is for SuperBPE: pass superbpe_transition")
    if transition is not None and whitespace is not None:
        raise TypeError(f"{verb}(): superbpe_transition is for byte-level BPE, not whitespace")


def _same(value, default) -> bool:
    return type(value) is type(default) and value == default


def train(texts, vocab_size=None, *, pattern="default", special_tokens=(), tie_break="ids",
          base=None, end_of_word=None, num_merges=None, min_frequency=0,
          max_token_length=None, normalization=None, num_threads=None, roles=None,
          progress=False, trace=False, return_report=False, whitespace=None,
          byte_fallback=None, split_digits=None, character_coverage=None,
          add_dummy_prefix=None, remove_extra_whitespaces=None, user_defined_symbols=None,
          control_symbols=None, superbpe_transition=None, superbpe_pattern=None, merge_batch=1,
          boundless=False, prune_min_count=None, prune_ratio=None):
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
        How equal pair counts are ordered (docs/architecture.md, section 5).
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
        ``character_coverage``, ...): returns a SentencePiece-style Tokenizer.
    byte_fallback, split_digits, character_coverage, add_dummy_prefix,
    remove_extra_whitespaces, user_defined_symbols, control_symbols
        SentencePiece-style only (``whitespace="\u2581"``): SentencePiece's trainer flags of
        the same names (defaults: True, True, 1.0, True, True, none, none).
    return_report : bool
        Also return a dict with the time of each phase and the table sizes.
    roles : mapping, optional
        Special-token roles and chat template (``fastbpe_nb.roles``), e.g.
        ``{"eos": "<|endoftext|>", "pad": "<|pad|>"}``: each names a special token.
    superbpe_transition, superbpe_pattern : int, str, optional
        SuperBPE (docs/variants.md): ordinary merges up to this vocabulary size, then on to
        ``vocab_size`` on pieces that span words (split by ``superbpe_pattern``, default
        ``pretokenize.SUPERBPE_PATTERN``, which the tokenizer then encodes with).
    merge_batch : int
        BatchBPE (docs/variants.md): merge up to this many non-interfering top pairs per
        pass, a speed mode that is *not* exact BPE (1, the default, is).
    boundless : bool
        BoundlessBPE (docs/variants.md): supermerges also join two adjacent whole word
        pre-tokens into one superword token (patterns ``gpt2`` and ``cl100k``).
    prune_min_count, prune_ratio : int, float, optional
        Vocabulary pruning after training (docs/variants.md; ``vocab_size`` is before it).
    """
    _check_superbpe("train", superbpe_transition, superbpe_pattern, whitespace)
    boundless_bpe.check_flag("train", boundless, superbpe_transition, whitespace)
    pruning = Pruning.make("train", prune_min_count, prune_ratio, superbpe_transition,
                           whitespace, boundless)
    options = _given_options(
        "train", whitespace is not None, pattern=pattern, special_tokens=special_tokens,
        tie_break=tie_break, base=base, end_of_word=end_of_word, num_merges=num_merges,
        min_frequency=min_frequency, max_token_length=max_token_length,
        normalization=normalization, num_threads=num_threads, progress=progress,
        whitespace=whitespace, byte_fallback=byte_fallback, split_digits=split_digits,
        character_coverage=character_coverage, add_dummy_prefix=add_dummy_prefix,
        remove_extra_whitespaces=remove_extra_whitespaces,
        user_defined_symbols=user_defined_symbols, control_symbols=control_symbols,
        merge_batch=merge_batch)
    roles = _early_roles(roles, options)
    if options.get("whitespace") is not None:
        from .sentencepiece_train import train_whitespace_style

        return _given_roles(train_whitespace_style(texts, vocab_size or DEFAULT_VOCAB_SIZE,
                                                   options), roles)
    options.pop("whitespace", None)
    t0 = time.perf_counter()
    opts = TrainOptions.make(vocab_size, **options)
    report = {"documents": None}
    if opts.normalization is not None and not isinstance(texts, dict):
        texts = _normalized(texts, opts.normalization)
    stage2 = None
    if superbpe_transition is not None:  # SuperBPE: stage 1 up to the transition, then 2
        from .superbpe import Stage2

        stage2 = Stage2(superbpe_transition, superbpe_pattern, opts)
        texts, opts = stage2.reusable(texts), stage2.stage1_options()
    if boundless:  # classic training, then supermerges (counting keeps the runs they need)
        boundless_bpe.check_options(opts, texts)
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
        counter = count_corpus(texts, opts.pattern, opts.special_tokens, opts.num_threads,
                               keep_runs=boundless)
        require_documents(counter.n_documents)
        kept_runs = counter.kept_runs()  # (BoundlessBPE's; None otherwise)
        symbols, offsets, counts = kernel_table(*counter.table(), 256, opts.id_bound(256),
                                                keep_order=opts.tie_break == "first")
        alphabet = None
        report["documents"] = counter.n_documents
        report["bytes_read"] = counter.n_bytes
    report["seconds_counting"] = time.perf_counter() - t0
    units = pruning.units(symbols) if pruning else None  # the merge kernel rewrites symbols
    if stage2 is None:
        tok = train_from_table(symbols, offsets, counts, alphabet, opts, report)
    else:  # stage 2 counts the corpus with its own pattern (while stage 1 merges)
        tok, table = stage2.merge_and_count(  # (stage 1 on one core while stage 2 counts)
            lambda: train_from_table(symbols, offsets, counts, alphabet, opts, report, None, False),
            lambda cancel: stage2.count_texts(texts, cancel), report=report)
        tok = stage2.finish(tok, *table, report)
    if boundless:
        tok = boundless_bpe.train_from_runs(tok, kept_runs, opts, report)
    tok = pruning.apply(tok, units, offsets, counts, opts, report) if pruning else tok
    tok = _given_roles(tok, roles)
    if trace:
        from .inspect import print_trace

        print_trace(tok)
    return (tok, report) if return_report else tok


def _early_roles(roles, options):
    """The roles record of ``train(..., roles=)``, checked before any work: its form, and
    (special tokens given, not SentencePiece style, whose control pieces may have roles
    too) that each role names one of the special tokens."""
    record = TokenRoles.from_mapping(roles)
    if options.get("whitespace") is None and options.get("special_tokens") is not None:
        check_roles(record, None, dict.fromkeys(options["special_tokens"], 0))
    return record


def _given_roles(tok, roles):
    """``tok`` with the roles of ``train(..., roles=)`` (checked against the model)."""
    return tok.with_roles(**roles.to_dict()) if roles.to_dict() else tok


class _Counted:
    """Iterates ``texts`` once, counting the documents (for the error message)."""

    def __init__(self, texts):
        self.texts = texts
        self.n = 0

    def __iter__(self):
        for text in iter_texts(self.texts):
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


def count_files(paths, column="text", *, pattern="gpt2", special_tokens=(), num_threads=None,
                on_bad_input="error", progress=False, max_memory=None, chunk_bytes=16 << 20,
                max_invalid_utf8=None, max_chunk_bytes=None, cancel=None, merge_blocks=True,
                keep_runs=False):
    """Count the pre-tokens of corpus files; returns ``(WordCounter, ReadStats)``.

    Files are streamed batch by batch (text chunks cut at safe boundaries, never longer
    than ``max_chunk_bytes``; JSONL blocks of lines; Parquet row groups; Arrow record
    batches), so memory grows with the unique words, not the corpus. ``max_invalid_utf8``
    (default 0.01) is the share of invalid UTF-8 bytes a file may hold (see
    ``fastbpe_nb.io.corpus``). No file found is a ``CorpusReadError``. ``cancel``: see
    ``WordCounter.cancel``; ``merge_blocks``, ``keep_runs``: see ``WordCounter`` (no
    effect under ``max_memory``; ``keep_runs`` is refused there).
    """
    import os

    from .counting import WordCounter, coalesce_batches
    from .io.corpus import iter_batches
    from .io.input_files import check_on_bad_input, expand_paths
    from .io.pipeline import prefetch
    from .io.read_stats import ReadStats
    from .io.text_files import chunk_limits
    from .io.utf8_policy import DEFAULT_MAX_INVALID_UTF8, check_max_invalid_utf8

    pattern = pretokenize.resolve_pattern(pattern)
    pretokenize.compiled_pattern(pattern)
    check_on_bad_input(on_bad_input)
    max_invalid_utf8 = check_max_invalid_utf8(
        DEFAULT_MAX_INVALID_UTF8 if max_invalid_utf8 is None else max_invalid_utf8)
    chunk_bytes, max_chunk_bytes = chunk_limits(chunk_bytes, max_chunk_bytes, max_memory)
    counter = WordCounter(pattern, special_tokens, check_num_threads(num_threads),
                          merge_blocks=merge_blocks or max_memory is not None,
                          keep_runs=keep_runs)
    counter.cancel = cancel
    if max_memory is not None:
        counter.memory_check = lambda need: check_budget(
            "counting (the next batch)", need, max_memory,
            f"{counter.n_unique:,} unique words so far")
        counter.memory_left = lambda: max_memory - rss_bytes()
    stats = ReadStats()
    files = expand_paths(paths, on_bad_input, stats.ignored, stats.skipped_files)
    bar = None
    if progress:
        from .progress import progress_bar

        total = sum(os.path.getsize(f) for f in files)
        bar = progress_bar(total=total, desc="counting", unit="B", unit_scale=True)
    try:
        batches = iter_batches(files, column, stats, splittable=pretokenize.uses_scanner(pattern),
                               on_bad_input=on_bad_input, chunk_bytes=chunk_bytes,
                               max_invalid_utf8=max_invalid_utf8, max_chunk_bytes=max_chunk_bytes)
        # Under a budget, joined batches stay within the chunk limit too.
        joined = coalesce_batches(batches, max_chunk_bytes if max_memory is not None else None)
        # The next batch is read (and decompressed, decoded) in a reader thread while this
        # one is counted: the kernels release the GIL. One batch ahead at most.
        for data, doc_offsets in prefetch(joined, depth=1):
            counter.add_batch(data, doc_offsets)
            if bar is not None:
                bar.update(min(stats.bytes_read, bar.total) - bar.n)
            if max_memory is not None and rss_bytes() > max_memory:
                raise MemoryBudgetError(
                    f"counting used {rss_bytes() / 2**20:.0f} MiB, over the max_memory budget "
                    f"of {max_memory / 2**20:.0f} MiB ({counter.n_unique:,} unique words so far)")
    finally:
        counter.memory_check = counter.memory_left = None  # cycles would delay freeing it
        if bar is not None:
            bar.close()
    return counter, stats


def train_files(paths, vocab_size=None, *, pattern="default", special_tokens=(),
                tie_break="ids", base=None, end_of_word=None, num_merges=None,
                min_frequency=0, max_token_length=None, normalization=None, num_threads=None,
                roles=None, progress=False, trace=False, return_report=False, column="text",
                on_bad_input="error", max_memory=None, counts_output=None,
                chunk_bytes=16 << 20, max_invalid_utf8=None, max_chunk_bytes=None,
                min_word_count=1, superbpe_transition=None, superbpe_pattern=None,
                merge_batch=1, boundless=False, prune_min_count=None, prune_ratio=None):
    """Learn a tokenizer from corpus files (text, JSONL, Parquet, Arrow IPC), streamed.

    ``paths``: files, globs or folders (see ``fastbpe_nb.io.corpus`` for which files they
    name and how each kind is read). A counts file written by ``fastbpe count`` (or
    ``counts_output=``) is used as the word table directly, with the pattern it was made
    with. Options are those of ``train``; ``column`` names the text column of Parquet and
    Arrow files and the text field of JSONL files; ``on_bad_input="skip"`` skips unreadable
    files (reported) instead of raising ``CorpusReadError``; ``max_memory`` (bytes) stops
    with ``MemoryBudgetError`` and bounds the text chunks; ``max_invalid_utf8`` (default
    0.01) is the share of invalid UTF-8 a file may hold before it is refused;
    ``min_word_count`` drops the words counted fewer times before merging (the merge
    phase's memory grows with the unique words' bytes: on a large corpus most unique words
    are rare; the report says how many words and occurrences were pruned; a
    ``counts_output`` file keeps them all). No file found, or no pre-token in them, is an
    error (``CorpusReadError`` / ``TrainingError``). ``roles``, ``superbpe_transition``,
    ``superbpe_pattern``, ``merge_batch``, ``boundless``, ``prune_*``: as in ``train``
    (SuperBPE and BoundlessBPE read the files twice).
    """
    from .io.input_files import expand_paths
    from .io.counts_file import ORDER_FIRST, is_counts_file, load_counts, merge_counts, save_counts

    min_word_count = check_min_count(min_word_count, "min_word_count")  # before any work
    _check_superbpe("train_files", superbpe_transition, superbpe_pattern)
    boundless_bpe.check_flag("train_files", boundless, superbpe_transition)
    pruning = Pruning.make("train_files", prune_min_count, prune_ratio, superbpe_transition,
                           boundless=boundless)
    options = _given_options(
        "train_files", False, pattern=pattern, special_tokens=special_tokens,
        tie_break=tie_break, base=base, end_of_word=end_of_word, num_merges=num_merges,
        min_frequency=min_frequency, max_token_length=max_token_length,
        normalization=normalization, num_threads=num_threads, progress=progress,
        merge_batch=merge_batch)
    roles = _early_roles(roles, options)
    t0 = time.perf_counter()
    ignored, skipped = [], []
    files = expand_paths(paths, on_bad_input, ignored, skipped)
    report = {}
    are_counts = [file_is_arrow(f) and is_counts_file(f) for f in files]
    if any(are_counts) and not all(are_counts):
        corpus = files[are_counts.index(False)]
        raise TrainingError(f"{corpus} is a corpus file, {files[are_counts.index(True)]} a counts "
                            "file: train from corpus files or from counts files, not both")
    if files and all(are_counts):
        if len(files) == 1:
            word_bytes, offsets, counts, meta = load_counts(files[0])
        else:  # shards: summed exactly, rows by bytes (no corpus order)
            word_bytes, offsets, counts, meta, merged = merge_counts(files)
            report["counts_merged"] = merged
        if options.get("tie_break") == "first" and meta.get("order", ORDER_FIRST) != ORDER_FIRST:
            raise TrainingError(f"tie_break='first' needs the corpus order of first occurrences, "
                                f"which merged counts ({', '.join(files)}) do not have; use "
                                "'ids', 'hf' or 'bytes', or count the corpus in one pass")
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
        if superbpe_transition is not None:
            raise TrainingError(f"{files[0]} is a counts file of one pattern's words; SuperBPE "
                                "counts the corpus with two patterns: train from the corpus")
        if boundless:
            raise TrainingError(f"{files[0]} is a counts file: it has lost which pre-tokens are "
                                "neighbours, which boundless=True needs; train from the corpus")
        report["counts_file"] = files[0] if len(files) == 1 else files
        require_words(counts, f"the counts file {files[0]} holds no word")
    else:
        opts = final = TrainOptions.make(vocab_size, **options)
        if superbpe_transition is not None:  # SuperBPE: stage 1 up to the transition
            from .superbpe import Stage2

            opts = Stage2(superbpe_transition, superbpe_pattern, final).stage1_options()
        if boundless:
            boundless_bpe.check_options(opts)
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
                                     max_chunk_bytes=max_chunk_bytes,
                                     keep_runs=boundless and max_memory is None)
        kept_runs = counter.kept_runs()  # (BoundlessBPE's: not under a budget, 4 B a word)
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
    if min_word_count != 1:
        word_bytes, offsets, counts = prune_rare_words(word_bytes, offsets, counts, min_word_count,
                                                       report)
    report["seconds_counting"] = time.perf_counter() - t0
    n_symbols, n_words = int(offsets[-1]), len(counts)
    detail = f"{n_words:,} unique words, {n_symbols:,} symbols"
    check_budget("copying the word table for the merge kernel",
                 phase_bytes("kernel table", n_symbols, n_words), max_memory, detail)
    # (Not sorted under a budget: 40 more bytes a word, for a few percent of merging time.)
    symbols, offsets, counts = kernel_table(word_bytes, offsets, counts, 256, opts.id_bound(256),
                                            keep_order=opts.tie_break == "first"
                                            or max_memory is not None)
    del word_bytes
    # The kernel re-checks these exactly (and every later growth) before allocating.
    check_budget("merging (setting up)", phase_bytes("merge setup", n_symbols, n_words),
                 max_memory, detail)
    units = pruning.units(symbols) if pruning else None  # the merge kernel rewrites symbols
    if superbpe_transition is None:
        tok = train_from_table(symbols, offsets, counts, None, opts, report, max_memory=max_memory)
    else:  # stage 2 counts the corpus again with its own pattern (while stage 1 merges)
        stage2 = Stage2(superbpe_transition, superbpe_pattern, final)
        tok, table = stage2.merge_and_count(  # (stage 1 on one core while stage 2 counts)
            lambda: train_from_table(symbols, offsets, counts, None, opts, report,
                                     max_memory=max_memory, two_cores=False),
            lambda cancel: stage2.count_files(lambda pattern, merge_blocks: count_files(
                files, column, pattern=pattern, special_tokens=opts.special_tokens,
                num_threads=opts.num_threads, on_bad_input=on_bad_input, max_memory=max_memory,
                chunk_bytes=chunk_bytes, max_invalid_utf8=max_invalid_utf8,
                max_chunk_bytes=max_chunk_bytes, cancel=cancel,
                merge_blocks=merge_blocks)[0], min_word_count),
            max_memory, report)
        tok = stage2.finish(tok, *table, report, max_memory)
    if boundless and kept_runs is not None:
        tok = boundless_bpe.train_from_runs(tok, kept_runs, opts, report)
    elif boundless:  # under a budget, the corpus's pre-token sequence is read again
        tok = boundless_bpe.train_files(tok, boundless_bpe.file_batches(
            files, column, opts.pattern, on_bad_input, chunk_bytes, max_invalid_utf8,
            max_chunk_bytes), opts, report)
    tok = pruning.apply(tok, units, offsets, counts, opts, report) if pruning else tok
    tok = _given_roles(tok, roles)
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
