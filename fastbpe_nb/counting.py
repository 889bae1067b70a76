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


#: Named patterns are scanned and counted in one kernel pass (``kernels.count.
#: count_text_blocks``): each block of a batch scans ``COUNT_CHUNK_BYTES`` of text at a time
#: into a small buffer and counts those pieces while they are in cache, into a private
#: table of at most ``COUNT_BLOCK_WORDS`` unique words (a block with more counts the rest in
#: serial rounds). Neither changes the counts, only speed and memory (tests shrink them).
COUNT_CHUNK_BYTES = 1 << 16
COUNT_BLOCK_WORDS = 1 << 18
#: Bytes the private tables hold per unique word of a block (``u_*`` arrays, the slot
#: array at load <= 1/2, ``u_slot``, the word's index found by ``look_up_blocks``): the
#: most a block's table can touch per word.
PRIVATE_BYTES_PER_WORD = 5 * 8 + 8 + 2 * 2 * 8 + 8
#: Blocks are cut below this size so that a block's counts fit the slots' 32-bit field.
MAX_BLOCK_BYTES = 1 << 30
#: A block's private table starts with hash slots for as many words a byte as the blocks of
#: the last batch of ``RATE_MIN_BYTES`` or more held (from ``COUNT_MIN_SLOTS``; one word per
#: ``FIRST_BYTES_PER_WORD`` bytes before such a batch), instead of doubling from 4,096 slots
#: in every block of every batch, each time into fresh memory (a 2 MB block of code: four
#: doublings; of SuperBPE's stage 2, mostly new words: seven). Counting SuperBPE's stage 2
#: of 1.2 GB: 4.21-4.48 -> 4.07-4.38 s; gpt2's pieces of 1.2 GB: median 2.39 -> 2.35 s
#: (twelve counts each, alternating; 100 MB within the noise). Under a memory budget they
#: start at ``COUNT_MIN_SLOTS`` (what ``private_bytes`` assumes).
COUNT_MIN_SLOTS = 1 << 12
FIRST_BYTES_PER_WORD = 64
RATE_MIN_BYTES = 1 << 20


def documents_as_bytes(texts, first_index: int = 0):
    """A list of str documents as ``(uint8 bytes, int64[n + 1] offsets)``, lone surrogates
    replaced as ``clean_text`` does; a non-str document is a TypeError naming its index
    (counted from ``first_index``)."""
    encoded = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"document {first_index + index}: expected str, "
                            f"got {type(text).__name__}")
        try:
            encoded.append(text.encode("utf-8"))
        except UnicodeEncodeError:
            encoded.append(clean_text(text).encode("utf-8"))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def cut_special_tokens(data, doc_offsets, matcher):
    """``(data, doc_offsets)`` with documents split at the special tokens ``matcher``
    finds, the tokens dropped: what training counts (rarely needed: filtered by prefix)."""
    raw = data.tobytes()
    prefixes = [p.encode("utf-8") for p in matcher._prefixes]
    out = []
    for d in range(len(doc_offsets) - 1):
        chunk = raw[doc_offsets[d] : doc_offsets[d + 1]]
        if not any(p in chunk for p in prefixes):
            out.append(chunk)
            continue
        text = chunk.decode("utf-8", "surrogateescape")
        for segment, is_special in pretokenize.split_special(text, matcher):
            if not is_special:
                out.append(segment.encode("utf-8", "surrogateescape"))
    offsets = np.zeros(len(out) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, out), np.int64, len(out)), out=offsets[1:])
    return np.frombuffer(b"".join(out), dtype=np.uint8), offsets


class WordCounter:
    """Accumulates pre-token counts over batches, in corpus order.

    Parameters
    ----------
    pattern : str or None
        Pre-tokenization pattern (named patterns and SuperBPE's use the Numba scanner).
    special_tokens : sequence of str
        Cut out of the text before pre-tokenization and never counted.
    num_threads : int, optional
        Threads for the counting kernel (default: all cores Numba uses).
    merge_blocks : bool
        False: with a scanner's pattern, each block's words are rows of the table as they
        are, in corpus order, and no global table is made (``kernels.count.block_rows``):
        a word counted in several blocks is several rows. For a consumer whose result does
        not change when a word's occurrences are split over rows in order, and whose words
        are mostly unique, so that merging the blocks' tables would cost more than it
        saves (SuperBPE's stage 2). Not with a memory budget.
    keep_runs : bool
        Also keep the corpus's runs of word-like pieces as word indices (``word_runs``;
        BoundlessBPE's supermerges join neighbours, so it needs them, and this way the
        corpus is not scanned again). A scanner's pattern and ``merge_blocks`` only; not
        with a memory budget (the runs take about 4 bytes a word-like piece).
    """

    #: Bytes of words gathered per step by ``table`` (bounds its temporary index arrays).
    GATHER_BYTES = 1 << 20

    def __init__(self, pattern="gpt2", special_tokens=(), num_threads=None, merge_blocks=True,
                 keep_runs=False):
        self.pattern = pretokenize.resolve_pattern(pattern)
        scanned = pretokenize.scanner_name(self.pattern) is not None
        if keep_runs and not (scanned and merge_blocks):
            raise ValueError("keep_runs needs a pattern the scanner splits and merge_blocks")
        #: Each batch's ``(word_bytes, offsets, counts)`` rows when ``merge_blocks`` is
        #: False and the pattern is a scanner's (else None: the global table below).
        self._rows = None if merge_blocks or not scanned else []
        #: Each batch's runs of word-like pieces (``kernels.count.joined_runs``), when kept.
        self._word_runs = [] if keep_runs else None
        self._scratches = {}  # the runs' buffers (_scratch)
        self.matcher = pretokenize.SpecialTokenMatcher(special_tokens)
        self.num_threads = num_threads
        self.n_pieces = 0  # pre-tokens seen (global piece index of the next batch)
        self.n_documents = 0
        self.n_bytes = 0
        self._keys = np.full(2 << 16, -1, dtype=np.int64)  # (key, word) slot pairs
        self._store = np.empty(1 << 20, dtype=np.uint8)
        self._store_len = 0
        self._off = np.zeros(1 << 15, dtype=np.int64)
        self._count = np.zeros(1 << 15, dtype=np.int64)
        self._first = np.zeros(1 << 15, dtype=np.int64)
        self._wkey = np.zeros(1 << 15, dtype=np.int64)
        self._n = 0
        #: Called as ``memory_check(bytes)`` before each counting kernel call with the most
        #: it may allocate (``growth_bytes``, ``private_bytes``): a budget raises there,
        #: before allocating.
        self.memory_check = None
        #: Called as ``memory_left()``: the bytes the budget leaves (the merge of each batch
        #: into the table checks its growths against it); None: no budget.
        self.memory_left = None
        #: True once a refused growth left the table part-merged (its counts are wrong).
        self.broken = False
        #: A ``threading.Event``: once set, ``add_batch`` raises ``errors.Cancelled`` (a
        #: counting job in a background thread, stopped by its owner between two batches).
        self.cancel = None
        #: ``count_text_blocks``' tunables (see COUNT_CHUNK_BYTES), read at each batch.
        self.chunk_bytes = COUNT_CHUNK_BYTES
        self.block_words = COUNT_BLOCK_WORDS
        #: Unique words per byte in the blocks of the last batch (``start_slots``).
        self._words_per_byte = 1 / FIRST_BYTES_PER_WORD

    @property
    def n_unique(self) -> int:
        """Words in the table (rows, with ``merge_blocks=False``)."""
        if self._rows is not None:
            return sum(len(part[2]) for part in self._rows)
        return self._n

    def add_texts(self, texts) -> None:
        """Add a list of documents (str)."""
        self.add_batch(*documents_as_bytes(texts, self.n_documents))

    def add_batch(self, data: np.ndarray, doc_offsets: np.ndarray) -> None:
        """Add documents given as ``uint8`` bytes and ``int64[n_docs + 1]`` offsets into them.

        Documents holding a special token are cut at it first (the token is dropped).
        """
        if self.cancel is not None and self.cancel.is_set():
            from .errors import Cancelled

            raise Cancelled("counting cancelled")
        if self.broken:
            raise RuntimeError("this WordCounter's table was left part-merged by a refused "
                               "growth (MemoryBudgetError): its counts cannot be used")
        data = np.ascontiguousarray(data, dtype=np.uint8)
        doc_offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
        if len(doc_offsets) == 0 or doc_offsets[0] < 0 or doc_offsets[-1] > len(data) or (
                np.diff(doc_offsets) < 0).any():
            raise ValueError("doc_offsets must be non-decreasing offsets within data")
        self.n_documents += len(doc_offsets) - 1
        self.n_bytes += int(doc_offsets[-1] - doc_offsets[0])
        if self.matcher:
            data, doc_offsets = cut_special_tokens(data, doc_offsets, self.matcher)
        if pretokenize.scanner_name(self.pattern) is not None:
            self._count_text(data, doc_offsets)
            return
        from .parallel import default_threads

        n_threads = self.num_threads or default_threads()
        pieces, _ = pretokenize.piece_offsets(data, doc_offsets, self.pattern, n_threads)
        self._add_pieces(data, pieces)

    def _add_pieces(self, data, pieces):
        if self.memory_check is not None:
            self.memory_check(self.growth_bytes(len(pieces) - 1, len(data)))
        self._count_pieces(data, pieces)

    @property
    def nbytes(self) -> int:
        """Bytes the table's arrays hold (capacity, not just the part in use)."""
        return sum(a.nbytes for a in (self._keys, self._store, self._off, self._count,
                                       self._first, self._wkey))

    def growth_bytes(self, n_pieces: int, n_bytes: int) -> int:
        """The most the counting kernel allocates for a batch of ``n_pieces`` pieces of
        ``n_bytes`` bytes (as if every piece were a new word): its private per-block tables
        (3 int64 per piece, and hash slots: at most 4 int64 per piece) and the growth of
        the global table (hash slots doubling, store and per-word arrays growing)."""
        private = (24 + 32) * n_pieces
        n_new = self._n + n_pieces
        cap = self._keys.shape[0] // 2
        while 2 * (n_new + 1) > cap:
            cap *= 2
        grow = 16 * cap if 2 * cap != self._keys.shape[0] else 0
        if self._store_len + n_bytes > self._store.shape[0]:
            grow += max(self._store_len + n_bytes, 2 * self._store.shape[0])
        if n_new + 2 > self._off.shape[0]:
            grow += 4 * 8 * max(n_new + 2, 2 * self._off.shape[0])
        return private + grow

    def private_bytes(self, n_bytes: int, n_blocks: int, block_words: int) -> int:
        """The most ``count_text_blocks`` allocates for a batch of ``n_bytes`` bytes cut into
        ``n_blocks`` blocks with tables of ``block_words`` words: the private tables
        (``PRIVATE_BYTES_PER_WORD`` per word they can hold) and each block's piece and
        window buffers. Pieces are never empty, so ``b`` bytes hold at most ``256 + b // 2``
        distinct pieces (at most 256 one-byte ones; the others take two bytes or more)."""
        from .kernels.scan import WINDOW_BYTES

        words = min(n_blocks * block_words, n_blocks * 256 + n_bytes // 2)
        buffers = n_blocks * (8 * (self.chunk_bytes + 2 * WINDOW_BYTES) + 12 * WINDOW_BYTES)
        return words * PRIVATE_BYTES_PER_WORD + buffers

    def table_bytes(self) -> int:
        """Bytes ``table()`` allocates: the words' bytes, offsets and counts (copies), and a
        bool per word (the check that the table is already in first-occurrence order)."""
        return self._store_len + 8 * (self._n + 1) + 8 * self._n + self._n

    def _count_text(self, data, doc_offsets):
        """Scan and count a batch in one pass (the Numba scanner's patterns):
        ``count_text_blocks`` fills the blocks' private tables in parallel,
        ``merge_text_blocks`` adds them to the global table. Under a memory budget each
        step is checked before it allocates: the private tables with a bound from the
        batch's size, each growth of the global table inside the merge kernel, against what
        the budget leaves (``memory_left``)."""
        from ._scanner import PATTERN_IDS, read_only, scan_tail
        from .kernels.count import (block_rows, count_text_blocks, count_text_blocks_serial,
                                    first_round_rows, first_round_rows_serial, joined_runs,
                                    joined_runs_serial, look_up_blocks, look_up_blocks_serial,
                                    merge_text_blocks)
        from .parallel import call_kernel, default_threads, run_parallel

        n_bytes = int(doc_offsets[-1] - doc_offsets[0])
        if n_bytes == 0:
            return
        data, doc_offsets = read_only(data), read_only(doc_offsets)  # one specialization
        n_threads = self.num_threads or default_threads()
        block_words = self.block_words
        # Several blocks per thread balance the load; each block costs a merge of its
        # private table, so small batches get fewer. Under a budget: one block per thread,
        # and tables of at most a word per 8 bytes (a fuller table resumes in serial
        # rounds: slower on text of all-new words, never more memory).
        budgeted = self.memory_check is not None
        n_blocks = max(1, min((1 if budgeted else 4) * n_threads, n_bytes // (256 << 10)),
                       -(-n_bytes // MAX_BLOCK_BYTES))
        if budgeted:
            block_words = min(block_words, max(4096, n_bytes // (8 * n_blocks)))
            self.memory_check(self.private_bytes(n_bytes, n_blocks, block_words))
        pattern_id = PATTERN_IDS[pretokenize.scanner_name(self.pattern)]
        start_slots = COUNT_MIN_SLOTS if budgeted else self.start_slots(n_bytes / n_blocks,
                                                                         block_words)
        keep_runs = self._word_runs is not None
        if keep_runs and budgeted:
            raise ValueError("keep_runs is not for counting under a memory budget")
        runs = self._scratch("_runs", 2 * n_bytes) if keep_runs else None
        scan = (data, doc_offsets, pattern_id, *scan_tail(), self.chunk_bytes, start_slots)
        args = scan + (n_blocks, block_words, runs)
        bounds, done, *tables = run_parallel(count_text_blocks, n_threads, *args,
                                             serial=(count_text_blocks_serial, args))
        if n_bytes >= RATE_MIN_BYTES:  # (a small batch's rate says little of the next)
            self._words_per_byte = int(done[:, 0].sum()) / n_bytes
        if self._rows is not None:
            if budgeted:
                raise ValueError("merge_blocks=False is not for counting under a memory budget")
            if bool((done[:, 3] >= bounds[1:]).all()):  # no block's table filled up
                first = (done, block_words, data, tables[0], tables[1], tables[2])
                *rows, n_pieces = run_parallel(first_round_rows, n_threads, *first,
                                               serial=(first_round_rows_serial, first))
            else:
                *rows, n_pieces = call_kernel(block_rows, data, doc_offsets, bounds, done,
                                              *scan[2:], block_words, *tables)
            self._rows.append(tuple(rows))
            self.n_pieces += int(n_pieces)
            return
        # Under a budget the merge kernel checks each growth of the global table against
        # what is left of it (a bound from the tables' words would count a word once per
        # block, and every word already in the table as new).
        left = -1 if self.memory_left is None else max(0, int(self.memory_left()))
        budget = np.array([left, 0, 0], dtype=np.int64)
        known = np.empty(0, dtype=np.int64)  # the first batch: every word is new
        if self._n > 0:
            # The probes of the words the table already holds, in parallel: most of a
            # later batch's words (the serial merge then adds their counts).
            u_start, u_end, _, _, u_key = tables
            look_up = (data, done, block_words, u_start, u_end, u_key, self._keys, self._store,
                       self._off)
            known = run_parallel(look_up_blocks, n_threads, *look_up,
                                 serial=(look_up_blocks_serial, look_up))
        # Each private word's global index, for the runs (int32: the table's words < 2**31).
        g_of = self._scratch("_g_of", n_blocks * block_words) if keep_runs else \
            np.empty(0, np.int32)
        (self._keys, self._store, self._store_len, self._off, self._count, self._first,
         self._wkey, self._n, n_pieces) = call_kernel(
            merge_text_blocks, data, doc_offsets, bounds, done, *scan[2:], block_words, runs,
            g_of, *tables, known, self.n_pieces, self._keys, self._store, self._store_len,
            self._off, self._count, self._first, self._wkey, self._n, budget)
        if budget[2] > 0:
            from .errors import MemoryBudgetError

            self.broken = True
            if self.memory_check is not None:
                self.memory_check(int(budget[2]))
            raise MemoryBudgetError(
                f"counting: the word table's next growth needs {budget[2] / 2**20:,.0f} MiB, "
                f"over what is left of the max_memory budget ({left / 2**20:,.0f} MiB); "
                "stopped before allocating it")
        if keep_runs:
            join = (runs, bounds, done, int(doc_offsets[0]), g_of, block_words)
            self._word_runs.append(run_parallel(joined_runs, n_threads, *join,
                                                serial=(joined_runs_serial, join)))
        self.n_pieces += int(n_pieces)  # a NumPy int under NUMBA_DISABLE_JIT: not JSON

    def _scratch(self, name: str, size: int) -> np.ndarray:
        """An int32 buffer of at least ``size`` for the runs (``count_text_blocks``' runs,
        two entries a byte; ``merge_text_blocks``' global indices, one a private word),
        kept from batch to batch so that its pages are mapped once, and in 4 KiB pages:
        each block writes only the start of its region, and a fresh huge page costs
        1.4-2.3 ms per MB the first time on the team's VM (see ``small_pages``; the
        global indices in fresh NumPy arrays took KJV's counting from 11 to 17-28 ms)."""
        from .small_pages import empty_in_small_pages

        buffer = self._scratches.get(name)
        if buffer is None or len(buffer) < size:
            buffer = self._scratches[name] = empty_in_small_pages(size, np.int32)
        return buffer

    def start_slots(self, block_bytes: float, block_words: int) -> int:
        """The hash slots a block of ``block_bytes`` bytes starts its private table with:
        a power of two, twice the words expected at the last batch's rate, within
        ``COUNT_MIN_SLOTS`` and the slots of a full table of ``block_words`` words."""
        expected = min(block_words, int(block_bytes * self._words_per_byte) + 1)
        return max(COUNT_MIN_SLOTS, 1 << (2 * expected - 1).bit_length())

    def _count_pieces(self, data, pieces):
        from ._scanner import read_only
        from .kernels.count import count_batch, count_batch_serial

        n_pieces = len(pieces) - 1
        if n_pieces <= 0:
            return
        from .parallel import default_threads, run_parallel

        n_threads = self.num_threads or default_threads()
        n_blocks = max(1, min(4 * n_threads, n_pieces // 4096 or 1))
        data, pieces = read_only(data), read_only(pieces)  # one specialization (read_only)
        args = (data, pieces, n_blocks, self.n_pieces, self._keys, self._store,
                self._store_len, self._off, self._count, self._first, self._wkey, self._n)
        (self._keys, self._store, self._store_len, self._off, self._count, self._first,
         self._wkey, self._n) = run_parallel(count_batch, n_threads, *args,
                                             serial=(count_batch_serial, args))
        self.n_pieces += n_pieces

    def table(self, copy: bool = True):
        """The word table in first-occurrence order; ``copy=False``: views of the counter's
        own arrays where they already are that table (no copy of the store: 0.14 s for
        SuperBPE's 48 MB stage-2 table), valid while nothing more is counted.

        Returns
        -------
        word_bytes : uint8[total]
            The unique words' bytes, concatenated.
        offsets : int64[n_words + 1]
            Word boundaries.
        counts : int64[n_words]
            Occurrences of each word.
        """
        if self._rows is not None:
            if not self._rows:
                return np.empty(0, np.uint8), np.zeros(1, np.int64), np.empty(0, np.int64)
            return joined(self._rows, 1, self.num_threads)
        n = self._n
        first = self._first[:n]
        if n < 2 or bool((first[1:] > first[:-1]).all()):
            # The usual case (always, as count_batch adds words): words entered the table
            # in first-occurrence order, so the store already is the table, and copies are
            # all it takes (S + 16 W bytes; the general gather below holds ~40 B/symbol).
            start = int(self._off[0])
            if not copy:
                return (self._store[start:int(self._off[n])], self._off[: n + 1] - start,
                        self._count[:n])
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

    def word_runs(self, joined: bool = True):
        """``int32[n]``: the corpus's runs of two word-like pieces or more (``keep_runs``), in
        order, as the words' indices in ``indexed_words``, each run closed by a -1
        (``joined=False``: a list of parts, a batch each, which put end to end are that
        array). A run never spans documents, batches, or a piece that is not word-like (see
        ``kernels.count._word_like``: a letter first, or a space and a letter)."""
        if self._word_runs is None:
            raise ValueError("this WordCounter was made without keep_runs")
        if not joined:
            return list(self._word_runs)
        return np.concatenate(self._word_runs + [np.empty(0, np.int32)])

    def kept_runs(self):
        """``(word_runs(joined=False), indexed_words())``, or None without ``keep_runs``,
        once counting is done: the counting buffers of the runs are let go (up to 8 bytes a
        byte of the largest batch, while the counter lives on through training)."""
        if self._word_runs is None:
            return None
        self._scratches = {}
        return self.word_runs(joined=False), self.indexed_words()

    def indexed_words(self):
        """``(store uint8[*], offsets int64[n_words + 1])``: word ``i``'s bytes are
        ``store[offsets[i]:offsets[i + 1]]``, ``i`` as ``word_runs`` numbers it (views of the
        counter's arrays, valid while nothing more is counted)."""
        return self._store[:self._store_len], self._off[:self._n + 1]

    def words(self) -> dict[str, int]:
        """The table as a ``{word: count}`` dict (for inspection and tests)."""
        data, offsets, counts = self.table()
        raw = data.tobytes()
        return {raw[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogateescape"): int(counts[i])
                for i in range(len(counts))}


def joined(parts, n_tail: int = 0, num_threads: int = 1):
    """The CSR pieces ``parts`` (``(values, offsets, *per-row arrays)`` each, offsets from
    0) end to end: values and per-row arrays concatenated, offsets shifted. ``n_tail``
    trailing per-row arrays are joined as they are.

    With ``num_threads`` of two or more (None: the default) and two parts or more, the
    second half of the parts is copied in a helper thread (NumPy's copies release the
    GIL). SuperBPE's stage-2 table is its counting batches' rows end to end (360 MB of
    words in 14 M rows on 1.2 GB of Linux sources): one thread took the whole copy and
    every page fault of its output (1.2-1.9 s, against 0.3-0.7 s on two)."""
    from .parallel import default_threads, on_parts
    from .small_pages import empty_in_small_pages

    if len(parts) == 1:
        return parts[0]
    value_ends = np.cumsum([len(p[0]) for p in parts])
    row_ends = np.cumsum([len(p[1]) - 1 for p in parts])
    value_starts = np.concatenate([[0], value_ends[:-1]])
    row_starts = np.concatenate([[0], row_ends[:-1]])
    # Written once, in order: 4 KiB pages (see small_pages).
    values = empty_in_small_pages(int(value_ends[-1]), np.result_type(*[p[0] for p in parts]))
    offsets = empty_in_small_pages(int(row_ends[-1]) + 1, np.result_type(*[p[1] for p in parts]))
    offsets[-1] = value_ends[-1]
    tails = [empty_in_small_pages(int(row_ends[-1]), np.result_type(*[p[k] for p in parts]))
             for k in range(2, 2 + n_tail)]

    def fill(lo, hi):
        for k in range(lo, hi):
            v0, v1, r0, r1 = value_starts[k], value_ends[k], row_starts[k], row_ends[k]
            values[v0:v1] = parts[k][0]
            np.add(parts[k][1][:-1], v0, out=offsets[r0:r1])
            for t, tail in enumerate(tails):
                tail[r0:r1] = parts[k][2 + t]

    if (num_threads or default_threads()) < 2:
        fill(0, len(parts))
    else:
        # The parts split where half of the values have been copied.
        middle = int(np.searchsorted(value_ends, value_ends[-1] // 2)) + 1
        middle = min(max(middle, 1), len(parts) - 1)
        on_parts(lambda k: fill(0, middle) if k == 0 else fill(middle, len(parts)), 2)
    return (values, offsets, *tails)


def coalesce_batches(batches, max_bytes: int | None = None):
    """Join consecutive small ``(data, doc_offsets)`` batches into ones of about ``max_bytes``.

    A Parquet file of 20,000 ten-row row groups, or a folder of many small text files, comes
    in thousands of tiny batches; each costs a scanner call, a counting call and Python
    between them (about 0.4 ms), which dominated such inputs (8 s against 0.4 s for the same
    rows in one row group). Batches keep their order and their document boundaries, so
    counts and first occurrences are unchanged. A batch of ``max_bytes`` or more passes
    through as it is, never copied: the small ones before it are yielded first, joined.
    (A text file comes as large views of its blocks with a small joint between them, the
    text around each block boundary; joining a joint to the next block copied the block:
    80 of 100 MB, and 12,000 fresh pages, in the reader thread beside the counting.)
    Memory stays bounded by ``max_bytes`` plus one batch.
    """
    from .io.arrow_text import SLICE_BYTES

    limit = SLICE_BYTES if max_bytes is None else max_bytes
    datas, offs, size = [], [], 0
    for data, doc_offsets in batches:
        start, end = int(doc_offsets[0]), int(doc_offsets[-1])
        if end - start >= limit:
            if datas:
                yield _join_batches(datas, offs)
                datas, offs, size = [], [], 0
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
    data = np.concatenate(datas) if bases[-1] else np.zeros(0, np.uint8)
    offsets = np.concatenate([o[:-1] + b for o, b in zip(offs, bases[:-1])]
                             + [np.array([bases[-1]], np.int64)]).astype(np.int64)
    return data, offsets
