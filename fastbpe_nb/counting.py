"""Word counting at scale: batches of UTF-8 documents -> the word-frequency table.

``WordCounter.add_batch`` takes a batch as flat arrays (bytes + document offsets: an Arrow
string array's buffers, or a chunk of a text file), pre-tokenizes it with one scanner call
and counts the pieces with one parallel kernel call (``kernels.count.count_batch``). The
table grows with the number of *unique* words, not with the corpus.
"""

from __future__ import annotations

import numpy as np

from . import pretokenize
from .text import clean_text


#: Documents longer than this are counted a segment at a time (see ``_add_with_huge_docs``).
HUGE_DOC_BYTES = 8 << 20


class WordCounter:
    """Accumulates pre-token counts over batches, in corpus order.

    Parameters
    ----------
    pattern : str or None
        Pre-tokenization pattern (named patterns use the Numba scanner).
    special_tokens : sequence of str
        Cut out of the text before pre-tokenization and never counted.
    num_threads : int, optional
        Threads for the counting kernel (default: all cores Numba uses).
    """

    #: Bytes of words gathered per step by ``table`` (bounds its temporary index arrays).
    GATHER_BYTES = 1 << 20

    def __init__(self, pattern="gpt2", special_tokens=(), num_threads=None):
        self.pattern = pretokenize.resolve_pattern(pattern)
        self.matcher = pretokenize.SpecialTokenMatcher(special_tokens)
        self.num_threads = num_threads
        self.n_pieces = 0  # pre-tokens seen (global piece index of the next batch)
        self.n_documents = 0
        self.n_bytes = 0
        self._keys = np.full(1 << 16, -1, dtype=np.int64)
        self._store = np.empty(1 << 20, dtype=np.uint8)
        self._store_len = 0
        self._off = np.zeros(1 << 15, dtype=np.int64)
        self._count = np.zeros(1 << 15, dtype=np.int64)
        self._first = np.zeros(1 << 15, dtype=np.int64)
        self._hash = np.zeros(1 << 15, dtype=np.int64)
        self._n = 0
        #: Called as ``memory_check(bytes)`` before each counting kernel call with the most
        #: it may allocate (``growth_bytes``): a budget raises there, before allocating.
        self.memory_check = None

    @property
    def n_unique(self) -> int:
        return self._n

    def add_texts(self, texts) -> None:
        """Add a list of documents (str)."""
        encoded = []
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"document {self.n_documents + index}: expected str, "
                                f"got {type(text).__name__}")
            try:
                encoded.append(text.encode("utf-8"))
            except UnicodeEncodeError:
                encoded.append(clean_text(text).encode("utf-8"))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        self.add_batch(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def add_batch(self, data: np.ndarray, doc_offsets: np.ndarray) -> None:
        """Add documents given as ``uint8`` bytes and ``int64[n_docs + 1]`` offsets into them.

        Documents holding a special token are cut at it first (the token is dropped).
        """
        data = np.ascontiguousarray(data, dtype=np.uint8)
        doc_offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
        if len(doc_offsets) == 0 or doc_offsets[0] < 0 or doc_offsets[-1] > len(data) or (
                np.diff(doc_offsets) < 0).any():
            raise ValueError("doc_offsets must be non-decreasing offsets within data")
        self.n_documents += len(doc_offsets) - 1
        self.n_bytes += int(doc_offsets[-1] - doc_offsets[0])
        if self.matcher:
            data, doc_offsets = self._cut_special_tokens(data, doc_offsets)
        lengths = np.diff(doc_offsets)
        if len(lengths) and lengths.max() > HUGE_DOC_BYTES and pretokenize.uses_scanner(self.pattern):
            self._add_with_huge_docs(data, doc_offsets, lengths)
            return
        self._add_pieces(data, pretokenize.piece_offsets(data, doc_offsets, self.pattern)[0])

    def _add_pieces(self, data, pieces):
        if self.memory_check is not None:
            self.memory_check(self.growth_bytes(len(pieces) - 1, len(data)))
        self._count_pieces(data, pieces)

    def _add_with_huge_docs(self, data, doc_offsets, lengths):
        """``add_batch`` when some documents exceed HUGE_DOC_BYTES: those are scanned and
        counted ``SEGMENT_BYTES`` at a time (the scanner resumes at a piece: the same
        pieces, in the same order), the runs of documents between them as one batch. The
        per-piece arrays of one call then stay small (a 300 MiB row took 5.5x its size)."""
        from ._scanner import SEGMENT_BYTES, scan_prefix_offsets

        run_start = 0
        for d in np.flatnonzero(lengths > HUGE_DOC_BYTES).tolist() + [len(lengths)]:
            if d > run_start:
                lo, hi = doc_offsets[run_start], doc_offsets[d]
                self._add_pieces(data[lo:hi], pretokenize.piece_offsets(
                    data[lo:hi], doc_offsets[run_start:d + 1] - lo, self.pattern)[0])
            if d < len(lengths):
                doc = data[doc_offsets[d]:doc_offsets[d + 1]]
                start = 0
                while start < len(doc):
                    pieces, end = scan_prefix_offsets(doc, start, start + SEGMENT_BYTES,
                                                      self.pattern)
                    self._add_pieces(doc[start:end], pieces - start)
                    start = end
            run_start = d + 1

    @property
    def nbytes(self) -> int:
        """Bytes the table's arrays hold (capacity, not just the part in use)."""
        return sum(a.nbytes for a in (self._keys, self._store, self._off, self._count,
                                       self._first, self._hash))

    def growth_bytes(self, n_pieces: int, n_bytes: int) -> int:
        """The most the counting kernel allocates for a batch of ``n_pieces`` pieces of
        ``n_bytes`` bytes (as if every piece were a new word): its private per-block tables
        (3 int64 per piece, and hash slots: at most 4 int64 per piece) and the growth of
        the global table (hash slots doubling, store and per-word arrays growing)."""
        private = (24 + 32) * n_pieces
        n_new = self._n + n_pieces
        cap = self._keys.shape[0]
        while 2 * (n_new + 1) > cap:
            cap *= 2
        grow = 8 * cap if cap != self._keys.shape[0] else 0
        if self._store_len + n_bytes > self._store.shape[0]:
            grow += max(self._store_len + n_bytes, 2 * self._store.shape[0])
        if n_new + 2 > self._off.shape[0]:
            grow += 4 * 8 * max(n_new + 2, 2 * self._off.shape[0])
        return private + grow

    def table_bytes(self) -> int:
        """Bytes ``table()`` allocates: the words' bytes, offsets and counts (copies), and a
        bool per word (the check that the table is already in first-occurrence order)."""
        return self._store_len + 8 * (self._n + 1) + 8 * self._n + self._n

    def _cut_special_tokens(self, data, doc_offsets):
        """Split documents at special tokens, dropping the tokens (rarely needed: filtered)."""
        raw = data.tobytes()
        prefixes = [p.encode("utf-8") for p in self.matcher._prefixes]
        out = []
        for d in range(len(doc_offsets) - 1):
            chunk = raw[doc_offsets[d] : doc_offsets[d + 1]]
            if not any(p in chunk for p in prefixes):
                out.append(chunk)
                continue
            text = chunk.decode("utf-8", "surrogateescape")
            for segment, is_special in pretokenize.split_special(text, self.matcher):
                if not is_special:
                    out.append(segment.encode("utf-8", "surrogateescape"))
        offsets = np.zeros(len(out) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, out), np.int64, len(out)), out=offsets[1:])
        return np.frombuffer(b"".join(out), dtype=np.uint8), offsets

    def _count_pieces(self, data, pieces):
        from .kernels.count import count_batch, count_batch_serial

        n_pieces = len(pieces) - 1
        if n_pieces <= 0:
            return
        from .parallel import default_threads, run_parallel

        n_threads = self.num_threads or default_threads()
        n_blocks = max(1, min(4 * n_threads, n_pieces // 4096 or 1))
        args = (data, pieces, n_blocks, self.n_pieces, self._keys, self._store,
                self._store_len, self._off, self._count, self._first, self._hash, self._n)
        (self._keys, self._store, self._store_len, self._off, self._count, self._first,
         self._hash, self._n) = run_parallel(count_batch, n_threads, *args,
                                             serial=(count_batch_serial, args))
        self.n_pieces += n_pieces

    def table(self):
        """The word table in first-occurrence order.

        Returns
        -------
        word_bytes : uint8[total]
            The unique words' bytes, concatenated.
        offsets : int64[n_words + 1]
            Word boundaries.
        counts : int64[n_words]
            Occurrences of each word.
        """
        n = self._n
        first = self._first[:n]
        if n < 2 or bool((first[1:] > first[:-1]).all()):
            # The usual case (always, as count_batch adds words): words entered the table
            # in first-occurrence order, so the store already is the table, and copies are
            # all it takes (S + 16 W bytes; the general gather below holds ~40 B/symbol).
            start = int(self._off[0])
            return (self._store[start:int(self._off[n])].copy(), self._off[: n + 1] - start,
                    self._count[:n].copy())
        order = np.argsort(first, kind="stable")
        starts = self._off[:n][order]
        lengths = (self._off[1 : n + 1] - self._off[:n])[order]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        # Gather the words' bytes in groups of about GATHER_BYTES: the index arrays of one
        # gather take 16 bytes per byte, which for the whole table at once would be 20x its
        # size (a table of a few long words -- a text without spaces -- took GBs).
        w = 0
        while w < n:
            stop = int(np.searchsorted(offsets, offsets[w] + self.GATHER_BYTES, side="right")) - 1
            stop = min(max(stop, w + 1), n)
            if stop == w + 1:  # one word (maybe a huge one): a plain copy
                s0 = int(starts[w])
                out[offsets[w] : offsets[w + 1]] = self._store[s0 : s0 + int(lengths[w])]
            else:
                # Position k of the group reads starts[v] + (k - offsets[v]) for its word v.
                lens = lengths[w:stop]
                word_of = np.repeat(np.arange(w, stop, dtype=np.int64), lens)
                src = starts[word_of] + (np.arange(offsets[w], offsets[stop], dtype=np.int64)
                                         - offsets[:-1][word_of])
                out[offsets[w] : offsets[stop]] = self._store[src]
            w = stop
        return out, offsets, self._count[:n][order].copy()

    def words(self) -> dict[str, int]:
        """The table as a ``{word: count}`` dict (for inspection and tests)."""
        data, offsets, counts = self.table()
        raw = data.tobytes()
        return {raw[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogateescape"): int(counts[i])
                for i in range(len(counts))}


def coalesce_batches(batches, max_bytes: int | None = None):
    """Join consecutive small ``(data, doc_offsets)`` batches into ones of about ``max_bytes``.

    A Parquet file of 20,000 ten-row row groups, or a folder of many small text files, comes
    in thousands of tiny batches; each costs a scanner call, a counting call and Python
    between them (about 0.4 ms), which dominated such inputs (8 s against 0.4 s for the same
    rows in one row group). Batches keep their order and their document boundaries, so
    counts and first occurrences are unchanged; a batch already over ``max_bytes`` passes
    through as it is. Memory stays bounded by ``max_bytes`` plus one batch.
    """
    from .io.arrow_text import SLICE_BYTES

    limit = SLICE_BYTES if max_bytes is None else max_bytes
    datas, offs, size = [], [], 0
    for data, doc_offsets in batches:
        start, end = int(doc_offsets[0]), int(doc_offsets[-1])
        if not datas and end - start >= limit:
            yield data, doc_offsets
            continue
        datas.append(data[start:end])
        offs.append(doc_offsets - start)
        size += end - start
        if size >= limit:
            yield _join_batches(datas, offs)
            datas, offs, size = [], [], 0
    if datas:
        yield _join_batches(datas, offs)


def _join_batches(datas, offs):
    if len(datas) == 1:
        return datas[0], offs[0]
    bases = np.cumsum([0] + [len(d) for d in datas])
    joined = np.concatenate(datas) if bases[-1] else np.zeros(0, np.uint8)
    offsets = np.concatenate([o[:-1] + b for o, b in zip(offs, bases[:-1])]
                             + [np.array([bases[-1]], np.int64)]).astype(np.int64)
    return joined, offsets
