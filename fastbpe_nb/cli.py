"""The ``fastbpe`` command line (also ``python -m fastbpe_nb``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .cli_help import HelpFormatter, cli_message
from .errors import FastBPEError
from .inspect import format_trace, print_trace, visible as _visible  # noqa: F401 (re-exported)


def _pieces_line(tok, text: str) -> str:
    """The pieces of ``text`` joined by '|' (spaces as '␣'), then the ids."""
    from .inspect import format_pieces

    return format_pieces(tok, text)


def _memory(text):
    if text is None:
        return None
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    t = text.strip().lower().rstrip("b").rstrip("i")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise FastBPEError(f"--max-memory: cannot read {text!r} (use e.g. 2G, 512M)") from None


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}")
    return value


def _count(text) -> int:
    """An argparse ``type=``: a non-negative integer (sizes, counts, lengths)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _progress(args) -> bool:
    """Progress output: with --progress, or when stderr is a terminal; never with -q (a
    bar on a terminal, else a log line every 10 s: fastbpe_nb.progress)."""
    return not args.quiet and (getattr(args, "progress", False) or sys.stderr.isatty())


def _prepare_output_file(path) -> int:
    """Fail fast, before any long work, if ``path`` cannot be written; then remove the
    stale temporary files killed runs left next to it. Returns how many were removed."""
    from .io.atomic import check_output_file, remove_stale_temps

    check_output_file(path)
    return len(remove_stale_temps(os.path.dirname(os.path.abspath(path))))


def cmd_train(args) -> int:
    from .cli_train import cmd_train as train

    return train(args, _prepare_output_file, _memory, _progress(args), print_trace)


def fb_paths(paths):
    from .io.input_files import expand_paths

    return expand_paths(paths)


def cmd_count(args) -> int:
    import fastbpe_nb as fb

    pattern = None if args.pattern == "none" else args.pattern
    removed = _prepare_output_file(args.output)
    if args.merge:
        report = fb.merge_counts_files(args.files, args.output, min_count=args.min_count)
        report["stale_temp_files_removed"] = removed
        if not args.quiet:
            print(json.dumps(report, indent=2))
            print(f"wrote {args.output}: {report['unique_words']:,} unique words from "
                  f"{len(args.files)} counts files ({report['words_pruned']:,} words under "
                  f"--min-count {args.min_count} pruned)")
        return 0
    if args.min_count != 1:
        raise FastBPEError("--min-count applies to --merge (prune the merged table)")
    report = fb.count_to_file(args.files, args.output, column=args.column, pattern=pattern,
                              special_tokens=args.special or (), on_bad_input=args.on_bad_input,
                              progress=_progress(args), max_memory=_memory(args.max_memory),
                              num_threads=args.threads, max_invalid_utf8=args.max_invalid_utf8)
    report["stale_temp_files_removed"] = removed
    if not args.quiet:
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}: {report['unique_words']:,} unique words")
    return 0


def _load(path):
    import fastbpe_nb as fb

    return fb.load(path)


def cmd_encode(args) -> int:
    if args.output or args.count_only:
        from .io.encode_files import encode_parquet
        from .io.input_files import file_kind

        if not args.inputs:
            raise FastBPEError("no input given: name the Parquet/Arrow files, folders or globs "
                               "to encode")
        if args.text or args.docs != "file" or args.max_invalid_utf8 is not None:
            raise FastBPEError("--text, --docs and --max-invalid-utf8 are for printing ids "
                               "(without -o / --count-only)")
        for path in args.inputs:  # a text file named explicitly: say what encode does with it
            if os.path.isfile(path) and file_kind(path) == "text":
                raise FastBPEError(f"{path}: a text file; with -o, encode writes the ids of "
                                   "Parquet/Arrow/JSONL tables. To print its ids (one line per "
                                   "document, --docs), drop -o")
        tok = _load(args.model)
        keep = [c for c in (args.keep_columns or "").split(",") if c]
        report = encode_parquet(tok, args.inputs, args.output, column=args.column,
                                format=args.format, dtype=args.dtype, keep_columns=keep,
                                special=args.special, resume=args.resume,
                                count_only=args.count_only, progress=_progress(args),
                                num_threads=args.threads, separator=args.separator,
                                bos=args.bos, shard_size=args.shard_size,
                                val_fraction=args.val_fraction, seed=args.seed,
                                concat_tokens=args.concat_tokens, ids_column=args.ids_column,
                                token_count_column=args.token_count_column)
        if not args.quiet:
            print(json.dumps(report, indent=2))
        return 0
    from .cli_text import encode_sources, encode_to_lines

    sources = encode_sources(args.inputs, args.text)  # a missing path fails before loading
    encode_to_lines(_load(args.model), args, sources)
    return 0


def cmd_decode(args) -> int:
    from .cli_text import decode_lines

    decode_lines(_load(args.model), args)
    return 0


def cmd_inspect(args) -> int:
    from .inspect import (construction_tree, format_tree, format_word_rows, piece_id,
                          token_id, word_rows)

    tok = _load(args.model)
    words = list(args.words or [])
    if args.words_file:
        try:
            with open(args.words_file, encoding="utf-8", errors="replace") as f:
                words += [line.rstrip("\r\n") for line in f if line.strip()]
        except OSError as exc:
            raise FastBPEError(f"{args.words_file}: cannot read ({exc.strerror or exc})") from None
    if not (args.texts or args.merges or args.token or args.piece or words):
        raise FastBPEError("nothing to inspect: give a text, --merges, --token ID, --piece TEXT "
                           "or --words")
    if args.limit is not None and args.limit < 0:
        raise FastBPEError("--limit must be a non-negative number of merges")
    # Validate every lookup before printing anything.
    trees = [token_id(tok, t) for t in args.token or []]
    trees += [piece_id(tok, p) for p in args.piece or []]
    blocks = []
    if args.merges:
        blocks.append(format_trace(tok, limit=args.limit))
        if tok.merge_counts is None:
            print("fastbpe: note: this model file does not store the pair counts; the count "
                  "column is empty (`fastbpe train --trace` prints them while training)",
                  file=sys.stderr)
    blocks += [format_tree(construction_tree(tok, t)) for t in trees]
    if words:
        blocks.append(format_word_rows(word_rows(tok, words, leading_space=args.space)))
    for block in blocks:
        print(block)
    for text in args.texts:
        print(format_pieces_cli(tok, text, args))
    return 0


def format_pieces_cli(tok, text, args):
    from .inspect import format_pieces

    if args.dropout:
        return format_pieces(tok, text, dropout=args.dropout, seed=args.seed)
    return _pieces_line(tok, text)


def _parse_size(text):
    """``--max-bytes``: 1M, 500k, 2000000 (k/m/g are powers of 1024)."""
    if text is None:
        return None
    try:
        value = _memory(text)
    except FastBPEError:
        raise FastBPEError(f"--max-bytes: cannot read {text!r} (use e.g. 1M, 500k)") from None
    if value <= 0:
        raise FastBPEError(f"--max-bytes must be positive, got {text!r}")
    return value


def cmd_stats(args) -> int:
    import fastbpe_nb as fb

    if args.tokens or not args.files:
        if args.files or not args.tokens:
            raise FastBPEError("give FILES (measure a tokenizer) or --tokens PATH, one of them")
        from .io.token_readers import format_token_stats, read_tokens, token_stats

        print(format_token_stats(args.tokens, token_stats(read_tokens(args.tokens)), args.format))
        return 0

    from .stats import format_rows, load_source, measure_sources, parse_sizes, vocab_curve

    if args.model and args.train:
        raise FastBPEError("give --model (measure a model) or --train (train one), not both")
    if args.docs not in ("paragraphs", "lines", "file"):
        raise FastBPEError(f"--docs must be paragraphs, lines or file, not {args.docs!r}")
    sizes = parse_sizes(args.vocab_sizes) if args.vocab_sizes else None
    max_bytes = _parse_size(args.max_bytes)
    # Read the inputs first: a missing file fails before any training.
    from .cli_train import stats_files

    sources = [load_source(f, args.docs, max_bytes, args.column)
               for f in stats_files(args.files)]
    if args.model:
        tok = _load(args.model)
    else:
        target = max(sizes) if sizes else args.vocab_size
        pattern = None if args.pattern == "none" else args.pattern
        t0 = time.perf_counter()
        if args.train:
            tok = fb.train_files(args.train, vocab_size=target, pattern=pattern,
                                 progress=_progress(args))
            where = ", ".join(args.train)
        else:
            from .corpus import stdlib_texts

            tok = fb.train(list(stdlib_texts(int(args.train_mb * 1e6))), vocab_size=target,
                           pattern=pattern, progress=_progress(args))
            where = f"the first {args.train_mb:g} MB of the standard-library sources"
        if not args.quiet:
            print(f"fastbpe: trained a vocabulary of {tok.vocab_size:,} on {where} in "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if sizes:
        rows = vocab_curve(tok, sources, sizes, args.docs)
    else:
        rows = measure_sources(tok, sources, args.docs)
    print(format_rows(rows, args.format, args.docs))
    return 0


def _argument_type(check, convert):
    """An argparse ``type=``: ``convert`` the text, then ``check`` it (validation.check_*),
    so a bad value is a usage error naming the option, not a failure deep in a kernel."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {convert.__name__}: {text!r}") from None
        try:
            return check(value)
        except ValueError as exc:  # "<name> must be ...": the option is named by argparse
            raise argparse.ArgumentTypeError(str(exc).split(" ", 1)[1]) from None
    parse.__name__ = convert.__name__
    return parse


def _threads_type():
    from .validation import check_num_threads

    return _argument_type(check_num_threads, int)


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .distributed.cli_flags import add_cluster_flag
    from .validation import check_dropout, check_seed

    p = argparse.ArgumentParser(prog="fastbpe", formatter_class=HelpFormatter,
                                description="Byte-pair-encoding tokenizers on Numba kernels.")
    p.add_argument("--version", action="version", version=f"fastbpe_nb {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, **kwargs):
        return sub.add_parser(name, formatter_class=HelpFormatter, **kwargs)

    def progress_option(cmd, what="show progress"):
        cmd.add_argument("--progress", action="store_true",
                         help=f"{what} even when stderr is not a terminal: a bar on a terminal, "
                         "else a log line every 10 s (FASTBPE_PROGRESS_SECONDS) with phase, "
                         "done/total, rate and ETA (default: a bar when stderr is a terminal)")

    d = command("demo", help="train on this Python's standard library and show what was learned")
    d.add_argument("--vocab-size", type=int, default=4096, help="vocabulary to train")
    d.add_argument("--max-mb", type=float, default=8.0, help="megabytes of stdlib sources to train on")
    d.add_argument("--held-out-mb", type=float, default=1.0,
                   help="megabytes of further stdlib sources to measure on (not trained on)")
    d.add_argument("--corpus-bytes", type=int, default=1_000_000,
                   help="bytes of each shared sample corpus to measure (when present)")
    d.add_argument("--show", type=int, default=20, help="how many merges to print")
    d.add_argument("--progress", action="store_true",
                   help="show a progress bar while merging (default: when stderr is a terminal)")
    d.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    d.add_argument("-o", "--output", help="also save the model here")
    d.set_defaults(func=cmd_demo)

    def corpus_options(cmd):
        cmd.add_argument("--column", default="text", help="text column of Parquet/Arrow files")
        cmd.add_argument("--special", action="append", help="a special token (repeatable)")
        cmd.add_argument("--on-bad-input", default="error", choices=["error", "skip"],
                         help="an unreadable file: stop with an error, or skip it and report it")
        cmd.add_argument("--max-memory", help="stop with a clear error above this RSS (e.g. 2G)")
        cmd.add_argument("--max-invalid-utf8", type=_fraction, metavar="FRACTION",
                         help="share of invalid UTF-8 bytes a file may hold, each invalid "
                         "sequence read as U+FFFD (default 0.01; 1 accepts any file)")
        cmd.add_argument("--threads", type=_threads_type(),
                         help="threads for counting (default: all cores)")
        progress_option(cmd)
        cmd.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no report")

    t = command("train", help="train a tokenizer on corpus files (text, Parquet, Arrow)")
    t.add_argument("files", nargs="*", help="files, globs or folders")
    t.add_argument("-o", "--output", required=True, help="the model file to write")
    t.add_argument("--from-counts", nargs="+", metavar="COUNTS", help="train from counts files "
                   "written by `fastbpe count` (several: shards, merged exactly)")
    t.add_argument("--vocab-size", type=_count, help="the vocabulary size to reach (default: "
                   "32768 unless --num-merges is given)")
    t.add_argument("--num-merges", type=_count, metavar="N", help="stop after N merges "
                   "(instead of, or as well as, --vocab-size)")
    t.add_argument("--pattern", default="default", help="gpt2, cl100k, o200k, a regex, or none "
                   "(default: gpt2 with --base bytes, whitespace-separated words with chars)")
    t.add_argument("--normalization", choices=["none", "NFC", "NFKC"],
                   help="Unicode normalization of the training text, stored in the model and "
                   "applied when encoding (default: none)")
    t.add_argument("--tie-break", default="ids", choices=["ids", "hf", "first", "bytes"],
                   help="how pairs of equal count are ordered (docs/architecture.md)")
    t.add_argument("--base", choices=["bytes", "chars"],
                   help="byte-level BPE, or classic char-level BPE (default: bytes; chars "
                   "with --whitespace)")
    t.add_argument("--end-of-word", help="--base chars: a marker appended to every word, "
                   "e.g. </w>")
    t.add_argument("--min-frequency", type=_count, default=0,
                   help="stop when the best pair occurs fewer times than this")
    t.add_argument("--min-word-count", type=_count, default=1, help="drop words counted fewer "
                   "times before merging (reported; less memory on a large corpus)")
    t.add_argument("--max-token-length", type=_count,
                   help="never make a token longer than this many bytes (chars) "
                   "(default: no limit; 16 with --whitespace)")
    t.add_argument("--merge-batch", type=_count, default=1, metavar="K",
                   help="BatchBPE speed mode: merge up to K non-interfering top pairs per "
                   "pass; not exact BPE (default: 1, exact; docs/variants.md)")
    t.add_argument("--superbpe-transition", type=_count, metavar="T",
                   help="SuperBPE: ordinary merges up to vocabulary size T, then superword "
                   "merges across whitespace up to --vocab-size (docs/variants.md)")
    t.add_argument("--superbpe-pattern", help="with --superbpe-transition: stage 2's "
                   "pre-tokenization regex (default: SuperBPE's, cut at line breaks)")
    t.add_argument("--boundless", action="store_true",
                   help="BoundlessBPE: also learn supermerges that join two adjacent whole "
                   "word pre-tokens into one token (gpt2/cl100k patterns; docs/variants.md)")
    t.add_argument("--prune-min-count", type=_count, metavar="N", help="vocabulary pruning: "
                   "remove merged tokens output fewer than N times on the training words "
                   "(after training to --vocab-size; ids compact; docs/variants.md)")
    t.add_argument("--prune-ratio", type=_fraction, metavar="R", help="vocabulary pruning: "
                   "remove merged tokens that are on their own for less than R of their "
                   "occurrences (Picky-BPE-style; docs/variants.md)")
    t.add_argument("--whitespace", choices=["\u2581"], help="\u2581: SentencePiece-style BPE "
                   "(each line a sentence, visible whitespace, byte fallback, digit splitting)")
    bool_flag = argparse.BooleanOptionalAction
    t.add_argument("--byte-fallback", action=bool_flag, help="with --whitespace: 256 byte "
                   "pieces for characters outside the vocabulary (default: on)")
    t.add_argument("--split-digits", action=bool_flag,
                   help="with --whitespace: every digit its own piece (default: on)")
    t.add_argument("--character-coverage", type=float, metavar="FRACTION",
                   help="with --whitespace: share of characters kept in the alphabet, the "
                   "rarest left to byte fallback (default: 1.0)")
    t.add_argument("--add-dummy-prefix", action=bool_flag,
                   help="with --whitespace: a \u2581 before each sentence (default: on)")
    t.add_argument("--remove-extra-whitespaces", action=bool_flag,
                   help="with --whitespace: strip and collapse runs of spaces (default: on)")
    t.add_argument("--trace", action="store_true", help="print every merge learned")
    corpus_options(t)
    t.set_defaults(func=cmd_train)
    add_cluster_flag(t, "train")

    c = command("count", help="count the pre-tokens of a corpus into an Arrow counts file")
    c.add_argument("files", nargs="+", help="files, globs or folders")
    c.add_argument("-o", "--output", required=True, help="the counts file to write (.arrow)")
    c.add_argument("--pattern", default="gpt2", help="gpt2, cl100k, o200k, a regex, or none")
    c.add_argument("--merge", action="store_true", help="FILES are counts files (shards): "
                   "merge them exactly into one (counts summed, rows sorted by word bytes)")
    c.add_argument("--min-count", type=int, default=1, help="with --merge: drop words counted "
                   "fewer times in total (the number dropped is reported)")
    corpus_options(c)
    c.set_defaults(func=cmd_count)
    add_cluster_flag(c, "count")

    e = command("encode", help="encode texts, text/JSONL/Parquet/Arrow files or stdin to ids",
                description="Without -o: print one line of space-separated ids per document. "
                "INPUTS: an existing file is read (.txt and other text, also .gz/.bz2/.xz/.zst, "
                "cut by --docs; .jsonl, Parquet, Arrow: one document per row of --column); '-' "
                "or no INPUTS reads standard input (as text, cut by --docs); any other argument "
                "is a document. A missing path-like argument is an error (--text forces text). "
                "With -o (or --count-only): the INPUTS are Parquet/Arrow/JSONL files, globs "
                "or folders, encoded to an output folder.")
    e.add_argument("--model", required=True, help="the model file (any format fastbpe loads)")
    e.add_argument("inputs", nargs="*", help="files, '-' (stdin) or texts (default: stdin)")
    e.add_argument("--text", action="append", metavar="TEXT", help="a document given as "
                   "text even if it looks like a path (repeatable; after INPUTS)")
    e.add_argument("--docs", default="file", choices=["file", "lines", "paragraphs"],
                   help="without -o, text files and stdin: one document per input, per line "
                   "(an empty line an empty document), or per blank-line-separated paragraph")
    e.add_argument("--max-invalid-utf8", type=_fraction, metavar="FRACTION",
                   help="without -o: share of invalid UTF-8 bytes a text input may hold, each "
                   "read as U+FFFD (default 0.01)")
    e.add_argument("-o", "--output", help="output folder: one output per input file, at the "
                   "input's path relative to the inputs' common folder")
    e.add_argument("--column", default="text", help="text column of Parquet/Arrow/JSONL inputs")
    e.add_argument("--format", default="parquet",
                   choices=["parquet", "bin", "megatron", "datatrove", "nanogpt", "llmc", "mds",
                            "litdata"],
                   help="with -o: parquet: an ids column; bin: .bin + .idx.npy; megatron, "
                   "datatrove, nanogpt, llmc, mds (MosaicML streaming), litdata: the token "
                   "files of those training stacks")
    e.add_argument("--separator", help="flat formats: token after each document (llmc: "
                   "before; default the model's eos); parquet: appended to each row if given")
    e.add_argument("--bos", help="a token before each document (every output format)")
    e.add_argument("--shard-size", help="training-stack formats: bytes per id file, e.g. 1G")
    e.add_argument("--val-fraction", type=float, default=0.0, help="share of documents in "
                   "the val split (training-stack formats)")
    e.add_argument("--seed", type=int, default=0, help="seed of the --val-fraction split")
    e.add_argument("--concat-tokens", type=int, help="mds: samples of exactly N tokens cut "
                   "from the stream of documents (llm-foundry's --concat_tokens)")
    e.add_argument("--ids-column", default="ids", help="parquet: the ids column's name "
                   "(e.g. input_ids)")
    e.add_argument("--token-count-column", help="parquet: also a column of each row's token "
                   "count, by this name")
    e.add_argument("--dtype", choices=["int32", "uint16", "uint32"], help="with -o: the id "
                   "type (default: int32 for parquet, else uint16 when the vocabulary fits)")
    e.add_argument("--keep-columns", help="comma-separated input columns to carry along")
    e.add_argument("--special", default="error", choices=["error", "allow", "text"],
                   help="a special token in the text: error (default), its id, or plain text")
    e.add_argument("--resume", action="store_true",
                   help="skip inputs whose output is complete and made from the same input, "
                   "model and options (the others are encoded again)")
    e.add_argument("--count-only", action="store_true", help="count tokens, write nothing")
    e.add_argument("--threads", type=_threads_type(), help="threads (default: all cores)")
    progress_option(e)
    e.add_argument("-q", "--quiet", action="store_true", help="no progress, no report")
    e.set_defaults(func=cmd_encode)
    add_cluster_flag(e, "encode")

    de = command("decode", help="decode ids to text (arguments, or stdin: one document a line)",
                 description="With IDS: decode them as one document. Without: read standard "
                 "input, one document per line of whitespace-separated ids (an empty line is "
                 "an empty document), as `fastbpe encode` prints them. Each document's bytes "
                 "are written, then a newline unless the document ends with one.")
    de.add_argument("--model", required=True, help="the model file (any format fastbpe loads)")
    de.add_argument("ids", nargs="*", help="token ids of one document (default: read stdin)")
    de.set_defaults(func=cmd_decode)

    i = command(
        "inspect", help="pieces of texts, the merge trace, how a token is built",
        description="Show what a model learned: the pieces and ids of TEXTS, the merge "
        "trace (--merges), the construction tree of a token (--token ID or --piece TEXT) "
        "and a table of words and their tokens (--words / --words-file).")
    i.add_argument("--model", required=True, help="the model file (any format fastbpe loads)")
    i.add_argument("texts", nargs="*", help="texts to cut into pieces")
    i.add_argument("--merges", action="store_true", help="print the merge trace")
    i.add_argument("--limit", type=int, help="with --merges: only the first N merges")
    i.add_argument("--token", action="append", metavar="ID",
                   help="draw how token ID is built from earlier tokens (repeatable)")
    i.add_argument("--piece", action="append", metavar="TEXT",
                   help="the same for the token whose text is TEXT (␣ may stand for a space)")
    i.add_argument("--words", nargs="+", metavar="WORD", help="a table: word | tokens | count")
    i.add_argument("--words-file", help="the same for the words of a file, one per line")
    i.add_argument("--space", action="store_true",
                   help="with --words: encode each word with a leading space, as inside a sentence")
    i.add_argument("--dropout", type=_argument_type(check_dropout, float), default=0.0,
                   help="BPE-dropout probability for the pieces of TEXTS (0 = ordinary encoding)")
    i.add_argument("--seed", type=_argument_type(check_seed, int), default=0,
                   help="seed for --dropout")
    i.set_defaults(func=cmd_inspect)

    s = command(
        "stats", help="cost per file or language: bytes/token, tokens/char, tokens/word",
        description="Measure a tokenizer on FILES (text, Parquet, Arrow): characters, bytes, "
        "words, tokens, bytes/token, tokens/char, tokens/word, the tokens/char ratio to the "
        "first file (the multilingual tax), document lengths in tokens (mean, p50, p90, p99, "
        "max) and the id dtype. Without --model a tokenizer is trained first (on --train "
        "files, else on the standard-library sources) to the largest of --vocab-sizes.")
    s.add_argument("files", nargs="*", help="files, folders or globs to measure (the first "
                   "file is the tax reference)")
    s.add_argument("--tokens", metavar="PATH", help="instead: tokens, documents, length "
                   "percentiles and top ids of the token files under PATH (any encode format)")
    s.add_argument("--model", help="the model to measure")
    s.add_argument("--vocab-sizes", help="e.g. 1k,4k,16k (k = 1024): measure the prefix of the "
                   "merge list giving each vocabulary size")
    s.add_argument("--train", action="append", metavar="FILE",
                   help="without --model: train on this corpus file (repeatable)")
    s.add_argument("--train-mb", type=float, default=8.0,
                   help="without --model or --train: MB of stdlib sources to train on")
    s.add_argument("--vocab-size", type=int, default=4096,
                   help="without --model or --vocab-sizes: the vocabulary to train")
    s.add_argument("--pattern", default="gpt2", help="pattern when training: gpt2, cl100k, o200k, "
                   "a regex, or none")
    s.add_argument("--docs", default="paragraphs", choices=["paragraphs", "lines", "file"],
                   help="text files: documents are blank-line-separated paragraphs (default), "
                   "lines, or the whole file")
    s.add_argument("--max-bytes", help="read only the first N bytes of each file (e.g. 1M)")
    s.add_argument("--column", default="text", help="text column of Parquet/Arrow files")
    s.add_argument("--format", default="markdown", choices=["markdown", "csv", "json"],
                   help="how the table is printed")
    progress_option(s, "show training progress")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress, no training note")
    s.set_defaults(func=cmd_stats)
    return p


def _quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``| head``): exit 0 without a traceback. As the
    Python docs advise, point stdout at devnull so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except (FastBPEError, OSError) as exc:
        print(f"fastbpe: error: {cli_message(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fastbpe: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
