"""The ``fastbpe`` command line (also ``python -m fastbpe_nb``)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .errors import FastBPEError


def _visible(piece: bytes) -> str:
    """A token's bytes made readable: spaces as '␣', newlines as '↵', other control bytes as <xx>."""
    text = piece.decode("utf-8", "backslashreplace")
    out = []
    for ch in text:
        if ch == " ":
            out.append("␣")
        elif ch == "\n":
            out.append("↵")
        elif ch == "\t":
            out.append("⇥")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"<{ord(ch):02x}>")
        else:
            out.append(ch)
    return "".join(out)


def _pieces_line(tok, text: str) -> str:
    ids = tok.encode(text, disallowed_special=())
    return "|".join(_visible(tok.vocab[i]) for i in ids) + f"   ({len(ids)} tokens: {ids})"


def cmd_demo(args) -> int:
    import fastbpe_nb as fb
    from .corpus import stdlib_files, stdlib_texts

    max_bytes = int(args.max_mb * 1e6)
    print(f"Training a byte-level BPE tokenizer (vocab {args.vocab_size}, pattern gpt2) on the "
          f"standard-library sources of this Python ({len(stdlib_files())} files; using the "
          f"first {args.max_mb:g} MB).")
    t0 = time.perf_counter()
    texts = list(stdlib_texts(max_bytes))
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    tok, report = fb.train(texts, vocab_size=args.vocab_size, special_tokens=["<|endoftext|>"],
                           progress=args.progress, return_report=True)
    seconds = time.perf_counter() - t0
    print(f"  {len(texts)} documents, {n_bytes / 1e6:.1f} MB, {report['pre_tokens']:,} pre-tokens, "
          f"{report['unique_words']:,} unique words; counting {report['seconds_counting']:.1f} s, "
          f"merging {report['seconds_merging']:.2f} s (total {seconds:.1f} s)")
    print(f"  learned {len(tok.merges):,} merges; vocab_size {tok.vocab_size:,}\n")
    print("First merges (rank: left + right -> new token, count):")
    for rank in range(min(args.show, len(tok.merges))):
        a, b = tok.merges[rank]
        new = tok.merge_ids[rank]
        print(f"  {rank:4d}: {_visible(tok.vocab[a])!s:>8} + {_visible(tok.vocab[b])!s:<8} -> "
              f"{_visible(tok.vocab[new])!s:<12} ({tok.merge_counts[rank]:,})")
    longest = sorted(range(tok.n_regular), key=lambda i: (-len(tok.vocab[i]), i))[:8]
    print("\nLongest tokens: " + ", ".join(repr(tok.vocab[i].decode("utf-8", "replace"))
                                          for i in longest))
    samples = [
        "def fibonacci(n: int) -> int:",
        "    return self._cache[key]",
        "import numpy as np  # 2024",
        "Hello, world! 😀",
        "Größe und Übermaß",
    ]
    print("\nPieces of a few samples:")
    for s in samples:
        print(f"  {s!r}\n    {_pieces_line(tok, s)}")
        assert tok.decode(tok.encode(s)) == s
    held_out = "".join(texts[-3:])
    ids = tok.encode(held_out, disallowed_special=())
    print(f"\nRound trip: {len(held_out.encode()):,} bytes -> {len(ids):,} tokens "
          f"({len(held_out.encode()) / max(1, len(ids)):.2f} bytes/token) -> decoded back "
          f"{'identical' if tok.decode(ids) == held_out else 'DIFFERENT'}.")
    if args.output:
        tok.save(args.output)
        print(f"Saved the model to {args.output}")
    return 0


def _read_texts(paths):
    for path in paths:
        try:
            with open(path, "rb") as f:
                yield f.read().decode("utf-8", "replace")
        except OSError as exc:
            raise FastBPEError(f"{path}: cannot read ({exc.strerror or exc})") from None


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


def _progress(args) -> bool:
    return not args.quiet and sys.stderr.isatty()


def cmd_train(args) -> int:
    import fastbpe_nb as fb

    options = dict(vocab_size=args.vocab_size, special_tokens=args.special or (),
                   tie_break=args.tie_break, min_frequency=args.min_frequency,
                   max_token_length=args.max_token_length, progress=_progress(args),
                   num_threads=args.threads)
    if args.pattern != "default":
        options["pattern"] = None if args.pattern == "none" else args.pattern
    sources = list(args.files) + ([args.from_counts] if args.from_counts else [])
    if args.from_counts and args.files:
        raise FastBPEError("give either corpus files or --from-counts, not both")
    if args.base == "chars":
        tok, report = fb.train(_read_texts(fb_paths(sources)), base="chars",
                               end_of_word=args.end_of_word, return_report=True, **options)
    else:
        tok, report = fb.train_files(sources, column=args.column, on_bad_input=args.on_bad_input,
                                     max_memory=_memory(args.max_memory), return_report=True,
                                     **options)
    tok.save(args.output)
    if args.trace:
        print(format_trace(tok))
    if not args.quiet:
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}: {len(tok.merges)} merges, vocab_size {tok.vocab_size}")
    return 0


def fb_paths(paths):
    from .io.corpus import expand_paths

    return expand_paths(paths)


def format_trace(tok, limit=None) -> str:
    """One line per merge: rank, left + right -> new piece, count, vocabulary size so far."""
    lines = []
    n_ids = tok.n_base
    seen = set()
    counts = tok.merge_counts
    for rank in range(len(tok.merges) if limit is None else min(limit, len(tok.merges))):
        a, b = (int(x) for x in tok.merges[rank])
        new = int(tok.merge_ids[rank])
        if new not in seen and new >= tok.n_base:
            seen.add(new)
            n_ids += 1
        count = f"{int(counts[rank]):>12,}" if counts is not None else ""
        lines.append(f"{rank:6d}  {_visible(tok.vocab[a]):>12} + {_visible(tok.vocab[b]):<12} -> "
                     f"{_visible(tok.vocab[new]):<20} {count}  vocab {n_ids}")
    return "\n".join(lines)


def cmd_count(args) -> int:
    import fastbpe_nb as fb

    pattern = None if args.pattern == "none" else args.pattern
    report = fb.count_to_file(args.files, args.output, column=args.column, pattern=pattern,
                              special_tokens=args.special or (), on_bad_input=args.on_bad_input,
                              progress=_progress(args), max_memory=_memory(args.max_memory),
                              num_threads=args.threads)
    if not args.quiet:
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}: {report['unique_words']:,} unique words")
    return 0


def _load(path):
    import fastbpe_nb as fb

    return fb.load(path)


def cmd_encode(args) -> int:
    tok = _load(args.model)
    if args.output or args.count_only:
        from .io.encode_files import encode_parquet

        keep = [c for c in (args.keep_columns or "").split(",") if c]
        report = encode_parquet(tok, args.inputs, args.output, column=args.column,
                                format=args.format, dtype=args.dtype, keep_columns=keep,
                                special=args.special, resume=args.resume,
                                count_only=args.count_only, progress=_progress(args),
                                num_threads=args.threads)
        if not args.quiet:
            print(json.dumps(report, indent=2))
        return 0
    text = " ".join(args.inputs) if args.inputs else sys.stdin.read()
    ids = tok.encode(text, allowed_special="all" if args.special == "allow" else (),
                     disallowed_special=() if args.special == "text" else "all")
    print(" ".join(map(str, ids)))
    return 0


def cmd_decode(args) -> int:
    tok = _load(args.model)
    try:
        ids = [int(x) for x in args.ids]
    except ValueError as exc:
        raise FastBPEError(f"token ids must be integers: {exc}") from None
    sys.stdout.write(tok.decode(ids))
    sys.stdout.write("\n")
    return 0


def cmd_inspect(args) -> int:
    tok = _load(args.model)
    for text in args.texts:
        print(_pieces_line(tok, text))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastbpe", description="Byte-pair-encoding tokenizers on Numba kernels.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train on this Python's standard library and show what was learned")
    d.add_argument("--vocab-size", type=int, default=4096)
    d.add_argument("--max-mb", type=float, default=8.0, help="megabytes of stdlib sources to train on")
    d.add_argument("--show", type=int, default=20, help="how many merges to print")
    d.add_argument("--progress", action="store_true", help="show a progress bar while merging")
    d.add_argument("-o", "--output", help="also save the model here")
    d.set_defaults(func=cmd_demo)

    def corpus_options(cmd):
        cmd.add_argument("--column", default="text", help="text column of Parquet/Arrow files")
        cmd.add_argument("--special", action="append", help="a special token (repeatable)")
        cmd.add_argument("--on-bad-input", default="error", choices=["error", "skip"],
                         help="an unreadable file: stop with an error, or skip it and report it")
        cmd.add_argument("--max-memory", help="stop with a clear error above this RSS (e.g. 2G)")
        cmd.add_argument("--threads", type=int, help="threads for counting (default: all cores)")
        cmd.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no report")

    t = sub.add_parser("train", help="train a tokenizer on corpus files (text, Parquet, Arrow)")
    t.add_argument("files", nargs="*", help="files, globs or folders")
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--from-counts", help="train from a counts file written by `fastbpe count`")
    t.add_argument("--vocab-size", type=int, default=32768)
    t.add_argument("--pattern", default="default", help="gpt2, cl100k, o200k, a regex, or none")
    t.add_argument("--tie-break", default="ids", choices=["ids", "hf", "first", "bytes"])
    t.add_argument("--base", default="bytes", choices=["bytes", "chars"])
    t.add_argument("--end-of-word")
    t.add_argument("--min-frequency", type=int, default=0)
    t.add_argument("--max-token-length", type=int)
    t.add_argument("--trace", action="store_true", help="print every merge learned")
    corpus_options(t)
    t.set_defaults(func=cmd_train)

    c = sub.add_parser("count", help="count the pre-tokens of a corpus into an Arrow counts file")
    c.add_argument("files", nargs="+", help="files, globs or folders")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--pattern", default="gpt2", help="gpt2, cl100k, o200k, a regex, or none")
    corpus_options(c)
    c.set_defaults(func=cmd_count)

    e = sub.add_parser("encode", help="encode Parquet/Arrow files (with -o) or a text to ids",
                       description="With -o (or --count-only): the inputs are Parquet/Arrow "
                       "files, globs or folders, encoded to an output folder. Without: the "
                       "inputs are text (or stdin) and the ids are printed.")
    e.add_argument("--model", required=True)
    e.add_argument("inputs", nargs="*")
    e.add_argument("-o", "--output", help="output folder (one output per input file)")
    e.add_argument("--column", default="text")
    e.add_argument("--format", default="parquet", choices=["parquet", "bin"])
    e.add_argument("--dtype", choices=["int32", "uint16", "uint32"])
    e.add_argument("--keep-columns", help="comma-separated input columns to carry along")
    e.add_argument("--special", default="error", choices=["error", "allow", "text"],
                   help="a special token in the text: error (default), its id, or plain text")
    e.add_argument("--resume", action="store_true", help="skip inputs whose output is complete")
    e.add_argument("--count-only", action="store_true", help="count tokens, write nothing")
    e.add_argument("--threads", type=int)
    e.add_argument("-q", "--quiet", action="store_true")
    e.set_defaults(func=cmd_encode)

    de = sub.add_parser("decode", help="decode ids to text")
    de.add_argument("--model", required=True)
    de.add_argument("ids", nargs="+")
    de.set_defaults(func=cmd_decode)

    i = sub.add_parser("inspect", help="show the pieces of texts")
    i.add_argument("--model", required=True)
    i.add_argument("texts", nargs="+")
    i.set_defaults(func=cmd_inspect)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FastBPEError, OSError) as exc:
        print(f"fastbpe: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fastbpe: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
