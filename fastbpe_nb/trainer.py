"""Training orchestration: corpus -> word-frequency table -> merge kernel -> Tokenizer.

The expensive part, learning the merges, is one call of ``kernels.merge.train_merges``
on the word table (DESIGN.md section 2). This module counts the words, lays the table
out as flat arrays with fixed dtypes, validates the options, and runs the kernel in a
worker thread (it releases the GIL) so that a progress bar can follow it and Ctrl-C can
stop it cleanly.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from . import pretokenize
from .errors import TrainingError
from .reference import TIE_RULES, hf_byte_ranks
from .tokenizer import Tokenizer, clean_text

_UNLIMITED = 1 << 62
#: Used when neither vocab_size nor num_merges is given.
DEFAULT_VOCAB_SIZE = 32768


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


def _iter_texts(texts):
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of documents (a list of str), not one str")
    module = type(texts).__module__ or ""
    if module.startswith("pyarrow"):
        import pyarrow as pa

        chunks = texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
        for chunk in chunks:
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
    items = [(w, c) for w, c in words.items() if w]
    for w, c in items:
        if not isinstance(w, str):
            raise TypeError(f"word {w!r}: words must be str")
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c <= 0:
            raise TrainingError(f"word {w!r}: count must be a positive integer, got {c!r}")
    counts = np.fromiter((c for _, c in items), dtype=np.int64, count=len(items))
    if base == "bytes":
        encoded = [clean_text(w).encode("utf-8") for w, _ in items]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        symbols = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.int32)
        alphabet = None
    else:
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


def run_merge_kernel(symbols, offsets, counts, base_bytes, base_rank, tie_mode, max_merges,
                     max_ids, min_count, max_units, progress=False):
    """Run ``train_merges`` in a worker thread; Ctrl-C asks it to stop and re-raises."""
    from .kernels.merge import train_merges

    tok_off = np.zeros(len(base_bytes) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in base_bytes], out=tok_off[1:])
    tok_data = np.frombuffer(b"".join(base_bytes), dtype=np.uint8).copy()
    shared = np.zeros(3, dtype=np.int64)
    result = {}

    def work():
        try:
            result["value"] = train_merges(
                symbols, offsets, counts, tok_off, tok_data, base_rank, tie_mode,
                max_merges, max_ids, min_count, max_units, shared,
            )
        except BaseException as exc:  # re-raised in the calling thread
            result["error"] = exc

    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = min(max_merges, max_ids - len(base_bytes))
        bar = tqdm(total=total if total < _UNLIMITED // 2 else None, desc="merging",
                   unit="merge", dynamic_ncols=True)
    worker = threading.Thread(target=work, name="fastbpe-merge", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
            if bar is not None:
                bar.update(int(shared[0]) - bar.n)
    except KeyboardInterrupt:
        shared[1] = 1
        worker.join()
        raise
    finally:
        if bar is not None:
            bar.update(int(shared[0]) - bar.n)
            bar.close()
    if "error" in result:
        raise result["error"]
    return result["value"]


def train(texts, vocab_size=None, *, pattern="default", special_tokens=(), tie_break="ids",
          base="bytes", end_of_word=None, num_merges=None, min_frequency=0,
          max_token_length=None, normalization=None, progress=False, num_threads=None,
          return_report=False):
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
    return_report : bool
        Also return a dict with the time of each phase and the table sizes.
    """
    t0 = time.perf_counter()
    if tie_break not in TIE_RULES:
        raise ValueError(f"tie_break must be one of {TIE_RULES}, not {tie_break!r}")
    if base not in ("bytes", "chars"):
        raise ValueError(f"base must be 'bytes' or 'chars', not {base!r}")
    if normalization is not None:
        raise NotImplementedError("normalization is not implemented yet; use normalization=None")
    if vocab_size is None and num_merges is None:
        vocab_size = DEFAULT_VOCAB_SIZE
    for name, value in (("vocab_size", vocab_size), ("num_merges", num_merges),
                        ("max_token_length", max_token_length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if base == "bytes" and end_of_word is not None:
        raise ValueError("end_of_word is for base='chars' (byte mode needs no marker)")
    if pattern == "default":
        pattern = "gpt2" if base == "bytes" else pretokenize.WHITESPACE_WORDS_PATTERN
    pretokenize.compiled_pattern(pattern)
    special_tokens = list(dict.fromkeys(special_tokens))

    if isinstance(texts, dict):
        words = texts
    else:
        words = count_words(texts, pattern, special_tokens, keep_gaps=base == "bytes")
    t_count = time.perf_counter()
    symbols, offsets, counts, alphabet = word_table(words, base, end_of_word)

    if base == "bytes":
        base_bytes = [bytes([b]) for b in range(256)]
        ranks = hf_byte_ranks() if tie_break == "hf" else list(range(256))
    else:
        base_bytes = [s.encode("utf-8") for s in alphabet]
        ranks = list(range(len(alphabet)))
    n_base = len(base_bytes)
    max_ids = _UNLIMITED
    if vocab_size is not None:
        max_ids = vocab_size - len(special_tokens)
        if max_ids < n_base:
            raise TrainingError(
                f"vocab_size={vocab_size} is smaller than the {n_base} base symbols"
                + (f" plus {len(special_tokens)} special tokens" if special_tokens else "")
            )
    from .kernels.merge import TIE_BYTES, TIE_FIRST, TIE_RANKS

    tie_mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST, "bytes": TIE_BYTES}[tie_break]
    merges, merge_ids, merge_counts = run_merge_kernel(
        symbols, offsets, counts, base_bytes, np.asarray(ranks, dtype=np.int64), tie_mode,
        _UNLIMITED if num_merges is None else num_merges, max_ids, max(1, int(min_frequency)),
        _UNLIMITED if max_token_length is None else max_token_length, progress,
    )
    t_merge = time.perf_counter()
    tok = Tokenizer(merges, pattern=pattern, special_tokens=special_tokens, base=base,
                    alphabet=alphabet, end_of_word=end_of_word, tie_break=tie_break,
                    merge_counts=merge_counts)
    if not np.array_equal(tok.merge_ids, merge_ids):  # the kernel and the model must agree
        raise AssertionError("internal error: kernel merge ids differ from the derived vocabulary")
    if not return_report:
        return tok
    report = {
        "unique_words": int(len(counts)),
        "pre_tokens": int(counts.sum()),
        "merges": int(len(merges)),
        "seconds_counting": t_count - t0,
        "seconds_merging": t_merge - t_count,
    }
    return tok, report
