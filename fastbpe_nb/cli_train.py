"""``fastbpe train``: which training call the options pick, and their CLI checks.

Byte-level BPE on files is ``train_files`` (streamed counting). ``--base chars``,
``--normalization NFC|NFKC`` (``train_files`` does not normalize) and ``--whitespace ▁``
(SentencePiece style) read the corpus as documents and call ``train``, which has those
options. Every combination the API refuses is refused here first, in the CLI's words.
"""

from __future__ import annotations

import json
import os

from .errors import FastBPEError

#: The SentencePiece-style flags (``--whitespace ▁`` only): option dest -> ``train`` keyword.
SENTENCEPIECE_FLAGS = {"byte_fallback": "byte_fallback", "split_digits": "split_digits",
                       "character_coverage": "character_coverage",
                       "add_dummy_prefix": "add_dummy_prefix",
                       "remove_extra_whitespaces": "remove_extra_whitespaces"}


def corpus_texts(paths, args, splittable: bool, lines: bool = False):
    """The documents of corpus files, read as ``train_files`` reads them (decompressed,
    BOM, JSONL/Parquet by --column, the invalid-UTF-8 policy); text is cut only where
    ``splittable`` allows (at newlines between non-spaces). ``lines``: each line is a
    document (SentencePiece reads its training text line by line)."""
    from .io.corpus import iter_batches

    for data, offsets in iter_batches(paths, args.column, on_bad_input=args.on_bad_input,
                                      splittable=splittable,
                                      max_invalid_utf8=0.01 if args.max_invalid_utf8 is None
                                      else args.max_invalid_utf8):
        raw = data.tobytes()
        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
            text = raw[a:b].decode("utf-8")
            if lines:
                yield from text.splitlines()
            else:
                yield text


def _given(args, *names) -> list[str]:
    """The options among ``names`` (dests) the user gave (not None, not False)."""
    return ["--" + n.replace("_", "-") for n in names
            if getattr(args, n, None) not in (None, False)]


def _sentencepiece_options(args, options) -> dict:
    """``train(..., whitespace="▁")`` keywords; options it does not take are refused."""
    refused = _given(args, "num_merges", "end_of_word", "from_counts", "max_memory", "threads")
    if args.min_word_count != 1:
        refused.append("--min-word-count")
    if args.pattern != "default":
        refused.append("--pattern")
    if args.min_frequency:
        refused.append("--min-frequency")
    if args.base == "bytes":
        refused.append("--base bytes")
    if args.normalization not in (None, "none"):
        refused.append(f"--normalization {args.normalization}")
    if refused:
        raise FastBPEError(f"not supported with --whitespace \u2581 (SentencePiece style): "
                           f"{', '.join(refused)}")
    sp = {"whitespace": args.whitespace, "special_tokens": options["special_tokens"],
          "tie_break": options["tie_break"], "progress": options["progress"]}
    if args.max_token_length is not None:
        sp["max_token_length"] = args.max_token_length
    for dest, keyword in SENTENCEPIECE_FLAGS.items():
        if getattr(args, dest) is not None:
            sp[keyword] = getattr(args, dest)
    return sp


def _check_sentencepiece_flags(args) -> None:
    flags = _given(args, *SENTENCEPIECE_FLAGS)
    for flag in ("byte_fallback", "split_digits", "add_dummy_prefix", "remove_extra_whitespaces"):
        if getattr(args, flag) is False:
            flags.append("--no-" + flag.replace("_", "-"))
    if flags:
        raise FastBPEError(f"{', '.join(sorted(set(flags)))}: SentencePiece-style options, for "
                           "--whitespace \u2581")


def cmd_train(args, prepare_output, memory, progress, print_trace) -> int:
    """Train as the options say (see the module docstring), save, report."""
    import fastbpe_nb as fb

    if args.from_counts and args.files:
        raise FastBPEError("give either corpus files or --from-counts, not both")
    removed = prepare_output(args.output)
    normalization = None if args.normalization in (None, "none") else args.normalization
    options = dict(special_tokens=args.special or (), tie_break=args.tie_break,
                   progress=progress)
    sources = list(args.files) + list(args.from_counts or [])
    if args.whitespace is not None:
        if args.superbpe_transition is not None:
            raise FastBPEError("--superbpe-transition trains byte-level BPE, not --whitespace")
        if args.boundless:
            raise FastBPEError("--boundless trains byte-level BPE, not --whitespace")
        if args.merge_batch != 1:
            raise FastBPEError("--merge-batch is for BPE, not SentencePiece style (--whitespace)")
        if args.prune_min_count is not None or args.prune_ratio is not None:
            raise FastBPEError("--prune-min-count / --prune-ratio are for BPE, not "
                               "SentencePiece style (--whitespace)")
        texts = corpus_texts(sources, args, splittable=True, lines=True)
        tok = fb.train(texts, vocab_size=args.vocab_size, **_sentencepiece_options(args, options))
        report = {"documents_are": "lines", "vocab_size": tok.vocab_size}
    else:
        _check_sentencepiece_flags(args)
        options.update(min_frequency=args.min_frequency, max_token_length=args.max_token_length,
                       num_threads=args.threads)
        if args.num_merges is not None:
            options["num_merges"] = args.num_merges
        if args.merge_batch != 1:
            options["merge_batch"] = args.merge_batch
        for name in ("prune_min_count", "prune_ratio"):  # vocabulary pruning
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        if args.superbpe_transition is not None:
            options["superbpe_transition"] = args.superbpe_transition
            options["superbpe_pattern"] = args.superbpe_pattern
        elif args.superbpe_pattern is not None:
            raise FastBPEError("--superbpe-pattern is for --superbpe-transition")
        if args.boundless:
            options["boundless"] = True
        if args.pattern != "default":
            options["pattern"] = None if args.pattern == "none" else args.pattern
        base = args.base or "bytes"
        in_memory = base == "chars" or normalization is not None
        if args.min_word_count != 1:
            if in_memory:
                raise FastBPEError("--min-word-count applies to byte-level training without "
                                   "--normalization")
            options["min_word_count"] = args.min_word_count
        if in_memory:
            if args.from_counts:
                raise FastBPEError("--from-counts trains byte-level BPE without --normalization "
                                   "(the counts were taken from the text as it was)")
            if args.max_memory is not None:
                raise FastBPEError("--max-memory applies to byte-level training without "
                                   "--normalization")
            from . import pretokenize

            pattern = options.get("pattern", "default")
            splittable = (pattern == "default" or (base == "bytes"
                                                   and pretokenize.uses_scanner(pattern)))
            texts = corpus_texts(sources, args, splittable)
            if normalization is not None:
                options["normalization"] = normalization
            tok, report = fb.train(texts, vocab_size=args.vocab_size, base=base,
                                   end_of_word=args.end_of_word, return_report=True, **options)
        else:
            if args.end_of_word is not None:
                raise FastBPEError("--end-of-word is for --base chars")
            tok, report = fb.train_files(sources, vocab_size=args.vocab_size, column=args.column,
                                         on_bad_input=args.on_bad_input,
                                         max_memory=memory(args.max_memory), return_report=True,
                                         max_invalid_utf8=args.max_invalid_utf8, **options)
    report["stale_temp_files_removed"] = removed
    return save_trained(tok, report, args, print_trace)


def save_trained(tok, report, args, print_trace) -> int:
    """``fastbpe train``'s last step (with or without a cluster): save the model to
    ``-o``, print the merge trace with ``--trace`` and the report unless ``-q``."""
    tok.save(args.output)
    if args.trace:
        print_trace(tok)
    if not args.quiet:
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}: {len(tok.merges)} merges, vocab_size {tok.vocab_size}")
    return 0


def stats_files(paths) -> list[str]:
    """``fastbpe stats`` FILES: files as given, folders and globs expanded (as train does)."""
    from .io.input_files import expand_paths

    files = []
    for p in paths:
        files += expand_paths([p]) if (os.path.isdir(p) or not os.path.lexists(p)) else [p]
    return files
