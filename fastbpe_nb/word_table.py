"""The word table: counting a corpus' pre-tokens and laying ``{word: count}`` out as the
merge kernel's flat arrays.

The merge kernel (``kernels.merge.train_merges``, run by ``merge_loop``) learns from a CSR
table of words: ``symbols`` (int32 base-symbol ids of all words, concatenated),
``offsets`` (int64[n_words + 1]) and ``counts`` (int64[n_words]). This module builds that
table from documents or a ``{word: count}`` dict and checks that the kernel's int64
counters cannot overflow on it. It knows nothing of Tokenizer objects or corpus files.
"""

from __future__ import annotations

import collections

import numpy as np

from . import pretokenize
from .errors import TrainingError
from .text import clean_text, not_str

_INT64_MAX = (1 << 63) - 1


def count_words(texts, pattern, special_tokens=(), keep_gaps=True) -> collections.Counter:
    """Pre-token counts of ``texts`` in first-occurrence order (special tokens dropped)."""
    counter: collections.Counter = collections.Counter()
    matcher = pretokenize.SpecialTokenMatcher(special_tokens)
    for index, text in enumerate(iter_texts(texts)):
        if not isinstance(text, str):
            raise not_str(index, text)
        text = clean_text(text)
        for segment, is_special in pretokenize.split_special(text, matcher):
            if not is_special:
                counter.update(pretokenize.split(segment, pattern, keep_gaps))
    return counter


def count_corpus(texts, pattern, special_tokens=(), num_threads=None, batch_bytes=16 << 20,
                 cancel=None, merge_blocks=True, keep_runs=False):
    """Count the pre-tokens of ``texts`` (str documents or pyarrow string arrays) in batches
    (``cancel``, ``merge_blocks``, ``keep_runs``: see ``WordCounter``)."""
    from .counting import WordCounter

    counter = WordCounter(pattern, special_tokens, num_threads, merge_blocks=merge_blocks,
                          keep_runs=keep_runs)
    counter.cancel = cancel
    return feed_texts(counter, texts, batch_bytes)


def feed_texts(collector, texts, batch_bytes=16 << 20):
    """Give ``texts`` (str documents or pyarrow string arrays) to ``collector`` in batches:
    Arrow buffers to its ``add_batch(data, offsets)`` without a str round trip, str
    documents to its ``add_texts(list)`` about ``batch_bytes`` at a time. Returns it."""
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of documents (a list of str), not one str")
    module = type(texts).__module__ or ""
    if module.startswith("pyarrow"):
        from .io.arrow_text import string_chunks, text_buffers

        for chunk in string_chunks(texts):
            for start in range(0, len(chunk), 65536):
                data, offsets, _ = text_buffers(chunk.slice(start, 65536))
                collector.add_batch(data, offsets)
        return collector
    batch, size = [], 0
    for text in texts:
        batch.append(text)
        size += len(text) if isinstance(text, str) else 0
        if size >= batch_bytes:
            collector.add_texts(batch)
            batch, size = [], 0
    if batch:
        collector.add_texts(batch)
    return collector


def iter_texts(texts):
    """The documents of ``texts`` (an iterable of str or a pyarrow string array), nulls
    dropped; one ``str`` is refused (it would be counted character by character)."""
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
    ``offsets`` as the merge kernel takes them (checked by its caller first: rising from 0,
    one more than ``counts``), and the counts positive.
    """
    if not len(counts):
        return
    # The common case from one reduction, no temporary array (the float estimate below
    # made eight of the table's size: 5-7 ms on 100 MB of Linux sources, 35-325 ms on
    # SuperBPE's stage-2 table of 1.2 GB): every count is at most the largest, and the words
    # hold offsets[-1] symbols, so the bound is at most 2 * largest * symbols and the total
    # at most largest * words.
    offsets = np.asarray(offsets, dtype=np.int64)
    if int(np.max(counts)) * max(2 * int(offsets[-1]), len(counts)) < 2**62:
        return
    lengths = np.diff(offsets)
    c = np.asarray(counts, dtype=np.float64)
    w = lengths.astype(np.float64)
    # A float estimate decides the common case; exact integers only when it is close. Not
    # ``c @ x``: a BLAS dot product leaves OpenBLAS's threads spinning for a while after it
    # (a core's worth during the merge phase that follows, on a 2-core machine).
    estimate = float((c * np.maximum(w - 1, 0)).sum()) + float((c * w).max())
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


def prune_rare_words(word_bytes, offsets, counts, min_word_count, report):
    """The word table without words counted fewer than ``min_word_count`` (checked) times,
    order kept; ``report`` gets ``words_pruned`` and ``occurrences_pruned``."""
    from .kernels.count import prune_words
    from .parallel import call_kernel

    rare = counts < min_word_count
    report["words_pruned"] = int(rare.sum())
    report["occurrences_pruned"] = int(counts[rare].sum())
    report["min_word_count"] = int(min_word_count)
    if not report["words_pruned"]:
        return word_bytes, offsets, counts
    word_bytes, offsets, counts = call_kernel(prune_words, word_bytes, offsets, counts,
                                              int(min_word_count))
    if len(counts) == 0:
        raise TrainingError(f"nothing to learn: no word is counted {min_word_count} times or more "
                            "(empty input, only empty documents, or only special tokens)")
    return word_bytes, offsets, counts
