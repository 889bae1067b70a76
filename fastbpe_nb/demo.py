"""``fastbpe demo``: train on this Python's standard library and show what was learned
(the merges, the pieces of sample words, a construction tree, bytes per token by size)."""

from __future__ import annotations

import sys
import time

from .inspect import format_pieces as _pieces_line
from .inspect import format_trace


DEMO_SAMPLES = [
    ("a word alone, and with the space it has inside a sentence", ["return", " return"]),
    ("the same for English", ["the", " the", "The", " THE"]),
    ("a word the model cannot spell: it sees ids, not letters", [" strawberry"]),
    ("numbers: the gpt2 pattern keeps a digit run together, BPE cuts it", [" 2024", " 1234567"]),
    ("an emoji is 4 UTF-8 bytes", ["😀"]),
    ("non-Latin words (2 bytes per Cyrillic letter, 3 per CJK character)", [" Привет", " 東京"]),
    ("code", ["    def __init__(self, *args, **kwargs):"]),
]


def _split_held_out(texts, n_train_bytes):
    """The first documents up to ``n_train_bytes`` for training; the rest held out."""
    train, held, size = [], [], 0
    for t in texts:
        size += len(t.encode("utf-8", "surrogatepass"))
        (train if size <= n_train_bytes or not train else held).append(t)
    return train, held


def _demo_tree_token(tok):
    """A token worth drawing: the deepest single-token word among a few candidates."""
    from .inspect import construction_tree, tree_depth

    best = None
    for word in (" isinstance", " return", " self", " import", " function", " the"):
        ids = tok.encode(word)
        if len(ids) == 1:
            depth = tree_depth(construction_tree(tok, ids[0]))
            if best is None or depth > best[0]:
                best = (depth, ids[0])
    if best is None:  # a tiny vocabulary: the longest token
        return max(range(tok.n_regular), key=lambda i: (len(tok.vocab[i]), -i))
    return best[1]


class CompileClock:
    """Seconds spent compiling Numba kernels while it is active (``with CompileClock() as c``).

    Counts Numba's ``numba:compile`` events, which fire only when a kernel is compiled
    (loading one from Numba's on-disk cache is no such event): on the first run this is
    the one-time cost, on later runs about zero. Nested compilations (a kernel compiling
    the functions it calls) are counted once, per thread."""

    def __init__(self):
        import threading

        self.seconds = 0.0
        self.kernels = 0
        self._local = threading.local()
        self._listener = None

    def _start(self):
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.t0 = time.perf_counter()
        self._local.depth = depth + 1

    def _end(self):
        self._local.depth -= 1
        if self._local.depth == 0:
            self.seconds += time.perf_counter() - self._local.t0
            self.kernels += 1

    def __enter__(self):
        from numba.core import event

        clock = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                clock._start()

            def on_end(self, ev):
                clock._end()

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        from numba.core import event

        event.unregister("numba:compile", self._listener)

    def summary(self, total: float) -> str:
        """One sentence on how much of ``total`` seconds was the one-time compilation."""
        if self.kernels == 0:
            return ("no kernel was compiled this time: Numba loaded them all from its "
                    "on-disk cache")
        return (f"{self.seconds:.1f} s of the {total:.1f} s were the one-time compilation of "
                f"{self.kernels} Numba kernels (cached now: the next run starts without it)")


def run_demo(args) -> int:
    with CompileClock() as clock:
        t0 = time.perf_counter()
        code = _run_demo(args)
    total = time.perf_counter() - t0
    print(f"(demo took {total:.1f} s; {clock.summary(total)})")
    return code


def _run_demo(args) -> int:
    import fastbpe_nb as fb

    from .corpus import stdlib_files, stdlib_texts
    from .inspect import construction_tree, format_tree, prefix_tokenizer, merges_for_vocab_size
    from .stats import (CORPUS_FILES, find_corpora, format_markdown, measure_sources,
                        read_head)

    if args.output:  # a bad output path fails now, not after the training
        from .io.atomic import check_output_file

        check_output_file(args.output)
    max_bytes = int(args.max_mb * 1e6)
    held_bytes = int(args.held_out_mb * 1e6)
    progress = args.progress or (not args.no_progress and sys.stderr.isatty())
    print(f"Training a byte-level BPE tokenizer (vocab {args.vocab_size}, pattern gpt2) on the "
          f"standard-library sources of this Python ({len(stdlib_files())} files; using the "
          f"first {args.max_mb:g} MB, holding out the next {args.held_out_mb:g} MB).")
    t0 = time.perf_counter()
    texts, held = _split_held_out(stdlib_texts(max_bytes + held_bytes), max_bytes)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    tok, report = fb.train(texts, vocab_size=args.vocab_size, special_tokens=["<|endoftext|>"],
                           progress=progress, return_report=True)
    seconds = time.perf_counter() - t0
    print(f"  {len(texts)} documents, {n_bytes / 1e6:.1f} MB, {report['pre_tokens']:,} pre-tokens, "
          f"{report['unique_words']:,} unique words; counting {report['seconds_counting']:.1f} s, "
          f"merging {report['seconds_merging']:.2f} s (total {seconds:.1f} s)")
    print(f"  learned {len(tok.merges):,} merges; vocab_size {tok.vocab_size:,} "
          f"(256 bytes + {tok.n_regular - 256:,} merged tokens + 1 special token)")

    print(f"\n== 1. The merge trace: the first {min(args.show, len(tok.merges))} merges "
          "(count = occurrences of the pair when it was merged) ==")
    print(format_trace(tok, limit=args.show))
    longest = sorted(range(tok.n_regular), key=lambda i: (-len(tok.vocab[i]), i))[:6]
    print("Longest tokens: " + ", ".join(repr(tok.vocab[i].decode("utf-8", "replace"))
                                          for i in longest))

    tid = _demo_tree_token(tok)
    print(f"\n== 2. How token {tid} was built: each merge joins two earlier tokens ==")
    print(format_tree(construction_tree(tok, tid)))

    print("\n== 3. Pieces: what the model sees (␣ = space; ids in brackets) ==")
    for title, samples in DEMO_SAMPLES:
        print(f"  {title}:")
        for s in samples:
            print(f"    {s!r:<44} {_pieces_line(tok, s)}")
            assert tok.decode(tok.encode(s)) == s

    held_text = "".join(held)
    sources = [("stdlib (held out)", held_text, None)]
    corpora = find_corpora()
    if corpora is not None:
        for name, file in CORPUS_FILES.items():
            if (corpora / file).exists():
                sources.append((f"{name}: {file}", read_head(corpora / file, args.corpus_bytes), None))
        where = f"the shared corpora in {corpora} (first {args.corpus_bytes / 1e6:g} MB each)"
    else:
        from .stats import SAMPLE_TEXTS

        sources += [(f"{lang} (UDHR art. 1)", text, None) for lang, text in SAMPLE_TEXTS.items()]
        where = "built-in sample sentences (the shared corpora are absent)"
    print(f"\n== 4. What text costs: held-out stdlib code, then {where} ==")
    print("   tax = tokens/char relative to the first row: a code-trained vocabulary makes prose,")
    print("   and above all non-Latin scripts, expensive.\n")
    rows = measure_sources(tok, sources, docs="paragraphs")
    print(format_markdown(rows, docs="paragraphs"))

    print("\n== 5. Bigger vocabulary, fewer tokens: the same merge list cut at each size ==")
    smallest = tok.n_base + len(tok.special_tokens)  # no merges at all: one token per byte
    sizes = [s for s in (smallest, 512, 1024, 2048, 4096, 8192, 16384) if s < tok.vocab_size]
    sizes.append(tok.vocab_size)
    small_held = held_text[:300_000]
    n_held = len(small_held.encode("utf-8"))
    for size in sizes:
        n = merges_for_vocab_size(tok, size)
        count = prefix_tokenizer(tok, n).count_tokens(small_held, disallowed_special=())
        bar = "#" * int(round(10 * n_held / max(1, count)))
        print(f"  vocab {size:>6,}  ({n:>5,} merges): {n_held / max(1, count):5.2f} bytes/token  {bar}")

    ids = tok.encode(held_text, disallowed_special=())
    print(f"\nRound trip: {len(held_text.encode()):,} held-out bytes -> {len(ids):,} tokens "
          f"({len(held_text.encode()) / max(1, len(ids)):.2f} bytes/token) -> decoded back "
          f"{'identical' if tok.decode(ids) == held_text else 'DIFFERENT'}.")
    if args.output:
        tok.save(args.output)
        print(f"Saved the model to {args.output}")
    return 0
