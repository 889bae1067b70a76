"""The one encode path every tokenizer takes: layout -> ``parallel.run_encode`` -> kernel.

An :class:`Encoder` is assembled from a tokenizer's parts: the alphabet with its
pre-tokenizer (``layout.ByteLevel``, ``layout.CharLevel`` or SentencePiece's), the
normalizer, the special tokens, the model's kernel tables and an optional post step
(SentencePiece: unknown characters to byte pieces). It encodes one text, lists of texts,
Arrow string arrays (straight from their buffers when it can) and arbitrary bytes, always
through :meth:`Encoder.run`, so threads, forked children and Ctrl-C behave the same for
every preset (``parallel.py``).

Arrow string arrays are read as bytes, and Arrow does not guarantee they hold UTF-8: a
byte-level tokenizer without normalization encodes each row exactly as ``encode_bytes``
encodes it, so invalid bytes are kept, not replaced. A tokenizer that needs the text
(normalization, characters) raises InvalidUTF8Error naming the row and byte offset.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from . import pretokenize
# A single text longer than SEGMENT_BYTES (UTF-8 bytes) is pre-tokenized and encoded this
# many bytes at a time (see Encoder.encode_huge); tests patch it here.
from ._scanner import SEGMENT_BYTES, prefix_buffer, read_only, scan_document
from .errors import InvalidUTF8Error, UnsupportedInputError
from .parallel import run_encode
from .piece_cache import PieceCache
from .text import clean_text

#: Texts of at most this many characters may be encoded from the piece memo (see
#: ``Encoder.encode_short``): a kernel call's fixed cost is then paid once per new piece.
SHORT_TEXT_CHARS = 256
#: From this many characters an ASCII short text is split by the scanner, not by its
#: ``regex`` twin (measured per call on code: 32 characters 15 against 11 us, 64: 17
#: against 21, 100: 19 against 32, 256: 27 against 73).
SCAN_SHORT_CHARS = 64
#: A call of at least this many units builds the backtracking encoder's tables (a
#: ``ranks`` vocabulary: ~0.2 s for cl100k, ~0.7 s for o200k, once; they make long pieces
#: 1.6-4.7x faster to encode, see model.BACKTRACK_PIECE), so short texts never pay for them.
BACKTRACK_UNITS = 1 << 18
#: The piece memo is emptied when it holds this many pieces (bounded memory, ~200 B each).
PIECE_MEMO_ENTRIES = 1 << 16
#: The text memo (short texts the piece memo served, whole) is emptied when its texts'
#: ids would pass this many: ~2 MB of list slots (the int objects are the piece memo's),
#: plus the texts, at most 256 characters each (~4,000 texts of 64 ids).
TEXT_MEMO_IDS = 1 << 18
#: Id arrays of at least this many ids become lists through shared int objects
#: (``Encoder.shared_ints``); shorter ones through ``tolist()``.
SHARED_INTS_FROM = 1024
#: No piece is a special token (a layout's ``special`` array when none is in the batch).
NO_SPECIAL = read_only(np.zeros(0, dtype=np.int32))


class Encoder:
    """Texts to ids for one tokenizer; see the module docstring.

    ``tables()`` returns the model's ``model.KernelTables`` (built on first use); ``post``
    maps the kernel's ``(ids, offsets)`` to the final ones (None: unchanged);
    ``blocks_per_thread``: documents per parallel call are cut into this many blocks per
    thread (more blocks balance uneven documents, fewer keep more of each block's cache).
    """

    def __init__(self, level, normalizer, specials, tables, vocab_size: int, post=None,
                 blocks_per_thread: int = 8):
        self.level = level
        self.normalizer = normalizer
        self.specials = specials
        self.tables = tables
        self.vocab_size = vocab_size
        self.post = post
        self.blocks_per_thread = blocks_per_thread
        self.cache = PieceCache()  # pieces merged by earlier calls (piece_cache.py)
        # Bytes straight from Arrow buffers, segmenting huge texts and the piece memo all
        # need the units to be the text's own UTF-8 bytes, split by the scanner.
        self.raw = level.kind == "bytes" and normalizer.identity
        # A post step that looks across pieces (BoundlessBPE's superwords) names where a
        # document may be cut (``post.safe_cut``): huge texts are cut only there, and there
        # is no per-piece memo. Pruning's post step works token by token.
        self.safe_cut = getattr(post, "safe_cut", None)
        self.segmentable = self.raw and level.scanned()
        self.scanner = pretokenize.scanner_name(level.pattern) if self.segmentable else None
        self.memo = {} if self.segmentable and self.safe_cut is None else None  # piece -> ids
        self.text_memo = {}  # a short text the piece memo served -> its ids (encode_short)
        self.text_memo_ids = 0  # ids held by text_memo
        self._id_objects = None  # object array: the int of each id, shared by id lists
        self._piece_documents = None  # 0, 1, 2, ..: a document per piece (_memo_fill)

    # ------------------------------------------------------------------ the kernel call
    def run(self, layout, n_threads: int = 1, dropout: float = 0.0, seed: int = 0, out=None):
        """``(ids int32[n], offsets int64[n_docs + 1])`` of a layout (see ``layout.py``).

        ``out``: a writable, contiguous int32 array of at least a slot per unit of the
        layout, where the ids are written (``ids`` is then a view of it). Without one, a
        batch on several threads gets a NumPy array of its own, shrunk to its ids in place
        afterwards (see ``kernels.encode.encode_batch``)."""
        from .kernels.encode import encode_batch, encode_serial

        # Read-only views: one compiled specialization of the kernels (see read_only).
        data, offsets, special, doc_pieces = [a if not a.flags.writeable else read_only(a)
                                              for a in layout]
        if out is not None:
            # Numba does not bounds-check: the kernel writes up to a slot per unit.
            if not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                    and out.flags.c_contiguous and out.flags.writeable
                    and len(out) >= len(data)):
                raise ValueError("out must be a writable contiguous int32 array of at least "
                                 f"{len(data)} slots")
        own = None
        if out is None and n_threads > 1 and len(doc_pieces) > 2:
            own = out = np.empty(len(data), dtype=np.int32)
        t = self.tables()
        if len(data) >= BACKTRACK_UNITS:
            t.use_backtracking()  # a big call: worth the tables' one-time cost
        cache = self.cache.checkout(data.dtype)
        args = (data, self.level.sym_map, offsets, special, doc_pieces, *t.args(),
                float(dropout), int(seed), *t.tail(), *cache)
        kept = None
        try:
            ids, doc_offsets, *kept = run_encode(encode_batch, encode_serial, n_threads,
                                                 len(doc_pieces) - 1, args,
                                                 self.blocks_per_thread, out)
        finally:
            self.cache.checkin(cache[3], kept)
        if own is not None:
            # Shrunk in place (realloc), the kernel's view of it dropped first. The serial
            # twin (in a forked child) leaves the ids at the layout's first unit, which
            # layouts put at 0; were it not, they are moved to the start first.
            n_ids = len(ids)
            if n_ids and ids.ctypes.data != own.ctypes.data:
                own[:n_ids] = ids
            del ids
            own.resize(n_ids, refcheck=False)
            ids = own
        if self.post is not None:
            ids, doc_offsets = self.post(ids, doc_offsets)
            if out is not None and own is None:
                # The caller reads its buffer: the post step's ids go there too (they may
                # outnumber the kernel's, never the units: a token has a byte or more).
                out[:len(ids)] = ids
                ids = out[:len(ids)]
        return ids, doc_offsets

    def layout(self, texts, allowed, disallowed, where=None, errors: str = "strict",
               n_threads: int = 1):
        return self.level.layout(texts, self.specials, allowed, disallowed, self.normalizer,
                                 where, errors, n_threads)

    def encode_texts(self, texts, allowed, disallowed, n_threads=1, where=None, dropout=0.0,
                     seed=0, errors: str = "strict"):
        return self.run(self.layout(texts, allowed, disallowed, where, errors, n_threads),
                        n_threads, dropout, seed)

    # ------------------------------------------------------------------ one text
    def ordinary(self, text, allowed_special, disallowed_special, dropout, seed) -> bool:
        """Whether a tokenizer's ``encode`` arguments encode ``text`` as ``encode_ordinary``
        does (no special token to find or refuse in it, no dropout): ``encode_short`` may
        then encode it."""
        return (type(text) is str and allowed_special == () and type(dropout) in (int, float)
                and dropout == 0 and type(seed) is int and 0 <= seed < 2**31
                and (disallowed_special == () or (disallowed_special == "all"
                                                  and not self.specials.all.maybe_in(text))))

    def encode_short(self, text: str):
        """The ids of a short text from the piece memo, or None (the caller encodes it).

        A kernel call has a fixed cost of tens of microseconds (argument checks of ~40
        arrays, results boxed), which dominated ``encode("Hello world")``. Here the named
        pattern's ``regex`` twin splits the text (the scanner is exactly ``regex.findall``,
        tested; an ASCII text of ``SCAN_SHORT_CHARS`` or more is split by the scanner,
        which costs less there), and each piece's ids come from a memo filled by the kernel
        itself, one call for all the pieces of a text it has not seen (each piece a
        document of its own: merging never crosses pieces, so a piece's ids do not depend
        on its context). Only up to ``SHORT_TEXT_CHARS`` characters: a longer new text
        misses the memo more often than not (100 characters of code: 98% of texts), when
        the memo's call costs more than ``encode_plain``'s. A text the piece memo served
        whole is kept whole too (``text_memo``): the same text again (a label, a prompt
        fragment, ``encode("Hello world")`` in a loop) skips the split, ~2 of ~3 us.
        """
        memo = self.memo
        if memo is None or len(text) > SHORT_TEXT_CHARS:
            return None
        ids = self.text_memo.get(text)
        if ids is not None:
            return ids[:]  # the caller owns its list
        offsets = None
        if len(text) >= SCAN_SHORT_CHARS and text.isascii():
            # The scanner's fixed cost (~11 us) is below regex's at this length, and an
            # ASCII text's byte offsets are its character offsets.
            data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
            offsets, _ = scan_document(data, self.scanner)
            bounds = offsets.tolist()
            pieces = [text[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]
        else:
            pieces = pretokenize.compiled_pattern(self.level.pattern).findall(text)
        out = []
        for piece in pieces:
            ids = memo.get(piece)
            if ids is None:
                return self._memo_fill(pieces, text, offsets)
            out += ids
        # Served whole by the piece memo: the same text next time skips the split too.
        if self.text_memo_ids + len(out) > TEXT_MEMO_IDS:
            self.text_memo.clear()
            self.text_memo_ids = 0
        self.text_memo[text] = out[:]
        self.text_memo_ids += len(out)
        return out

    def _memo_fill(self, pieces: list[str], text: str, offsets=None):
        """Encode ``pieces``, which tile ``text``, in one kernel call (each piece a
        document), remember each one's ids and return the text's; None for a text with
        lone surrogates (the caller's path replaces them first). ``offsets``: the pieces'
        byte offsets in the text when the scanner made them.

        The text's UTF-8 bytes are the pieces' bytes end to end, and an ASCII text's piece
        lengths are its byte lengths: no piece is encoded or joined on its own, which took
        a third of a missed 100-character text's time."""
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            return None
        if offsets is None:
            if text.isascii():
                lengths = map(len, pieces)
            else:
                lengths = [len(piece.encode("utf-8")) for piece in pieces]
            offsets = np.fromiter(accumulate(lengths, initial=0), np.int64, len(pieces) + 1)
        if offsets[-1] != len(raw):  # pieces that do not tile the text: their own bytes
            parts = [piece.encode("utf-8") for piece in pieces]
            raw = b"".join(parts)
            offsets = np.fromiter(accumulate(map(len, parts), initial=0), np.int64,
                                  len(pieces) + 1)
        ids, doc_offsets = self.run((np.frombuffer(raw, dtype=np.uint8), offsets, NO_SPECIAL,
                                     self.piece_documents(len(pieces))))
        if len(self.memo) + len(pieces) > PIECE_MEMO_ENTRIES:
            self.memo.clear()
        bounds = doc_offsets.tolist()
        ids = ids.tolist()
        for k, piece in enumerate(pieces):
            self.memo[piece] = ids[bounds[k]:bounds[k + 1]]
        return ids

    def piece_documents(self, n: int) -> np.ndarray:
        """``0, 1, .., n`` (int64, read-only): each of ``n`` pieces a document of its own."""
        docs = self._piece_documents
        if docs is None or len(docs) <= n:
            docs = self._piece_documents = read_only(np.arange(max(n + 1, 1024),
                                                              dtype=np.int64))
        return docs[:n + 1]

    def encode_plain(self, text, allowed, disallowed):
        """``(int32 ids, length of the buffer they view)`` of one ``str`` that is not huge,
        holds no special token to look for and encodes to UTF-8 as it is; None for any
        other text (``layout`` then takes it).

        The same scan and kernel call as ``layout`` + ``run``, without the batch layout's
        checks and arrays: for a text of a few hundred characters those cost several times
        the scanning and encoding (~60 us of ~140 for 300 characters of code).
        """
        if not self.segmentable or type(text) is not str or self.may_be_huge(text):
            return None
        for matcher in (self.specials.matcher(allowed), self.specials.matcher(disallowed)):
            if matcher is not None and matcher.maybe_in(text):
                return None
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            return None  # lone surrogates: the layout replaces them
        data = np.frombuffer(raw, dtype=np.uint8)
        pieces, doc_pieces = scan_document(data, self.scanner)
        ids, _ = self.run((data, pieces, NO_SPECIAL, doc_pieces))
        return ids, len(data)

    def encode_one(self, text, allowed, disallowed, dropout=0.0, seed=0, keep=False) -> np.ndarray:
        """The ids of one text as an int32 array.

        The ids are a view of a buffer with a slot per byte (or symbol) of the text;
        ``keep=True`` (the caller keeps the array) copies them out when they fill less
        than half of it, so a kept array never holds more than twice its own size.
        """
        found = None
        if dropout == 0:
            found = (self.encode_huge(text, allowed, disallowed)
                     or self.encode_plain(text, allowed, disallowed))
        if found is not None:
            ids, capacity = found
        else:
            layout = self.layout([text], allowed, disallowed)
            ids, _ = self.run(layout, dropout=dropout, seed=seed)
            capacity = len(layout[0])
        return ids.copy() if keep and 2 * len(ids) < capacity else ids

    def encode_huge(self, text, allowed, disallowed, index=0, where=None):
        """A text of at least ``SEGMENT_BYTES // 4`` characters (``may_be_huge``), scanned
        and encoded ``SEGMENT_BYTES`` at a time (the same ids): ``(int32 ids, length of the
        buffer they are a view of)``; None when it is not that (or holds an allowed
        special token)."""
        if not self.may_be_huge(text):
            return None
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            text = clean_text(text)
            raw = text.encode("utf-8")
        # Not bigger than a segment after all: one segment (the bytes are not encoded twice).
        disallowed_m = self.specials.matcher(disallowed)
        if disallowed_m is not None and disallowed_m.maybe_in(text):
            self.specials.check_disallowed(text, disallowed_m, index, where)
        allowed_m = self.specials.matcher(allowed)
        if allowed_m is not None and allowed_m.maybe_in(text):
            return None
        return self.encode_segmented(np.frombuffer(raw, dtype=np.uint8))

    def may_be_huge(self, text) -> bool:
        """Whether ``encode_huge`` may take ``text`` (a cheap test: a str of at least
        ``SEGMENT_BYTES // 4`` characters, which UTF-8 makes at most 4x as many bytes)."""
        return self.segmentable and isinstance(text, str) and len(text) >= SEGMENT_BYTES // 4

    def encode_segmented(self, data: np.ndarray):
        """The ids of one document's UTF-8 bytes (no special tokens), scanned and encoded
        ``SEGMENT_BYTES`` at a time: ``(int32 ids, length of the buffer they view)``.

        Why: arrays per byte and per piece of a 16 MiB text outgrow the allocator's reuse
        (glibc maps anything over 32 MB afresh, and each new page faults); per segment,
        the scratch memory is reused, so time and peak memory grow linearly.
        """
        # Ids never outnumber bytes; pages past the last id are never touched. One list at
        # the end costs less than a list per segment joined (measured: 13% on 16 MiB). Each
        # segment's ids are written in place, after the previous segment's: n_ids <= start,
        # so the rest of ``ids`` has a slot per byte of the segment.
        ids = np.empty(len(data), dtype=np.int32)
        buffer = prefix_buffer(SEGMENT_BYTES)  # each segment's piece offsets, in turn
        n_ids = 0
        start = 0
        while start < len(data):
            pieces, end = self._segment(data, start, buffer)
            pieces -= start  # (in place: the scanner's own array; a new one is fresh pages)
            layout = (data[start:end], pieces, NO_SPECIAL,
                      np.array([0, len(pieces) - 1], dtype=np.int64))
            n_ids += len(self.run(layout, out=ids[n_ids:])[0])
            start = end
        # Shrunk in place (realloc: a mapping of its own is cut back by mremap, no copy), so
        # the caller keeps it as it is: a copy of 10 MB of code's 2.7 M ids touched 10 MB
        # of fresh pages, ~7% of the call. No view of ``ids`` is alive here.
        ids.resize(n_ids, refcheck=False)
        return ids, n_ids

    def _segment(self, data: np.ndarray, start: int, buffer=None):
        """``(piece offsets, end)`` of the segment of ``data`` from ``start``: the pieces up
        to the first that ends ``SEGMENT_BYTES`` on, or with a post step that spans pieces,
        up to the last piece boundary there that it may cut at (the segment doubles until
        it holds one; the rest of the text when it holds none)."""
        from ._scanner import scan_prefix_offsets

        limit = SEGMENT_BYTES
        while True:
            pieces, end = scan_prefix_offsets(data, start, start + limit, self.level.pattern,
                                              buffer)
            if self.safe_cut is None or end >= len(data):
                return pieces, end
            k = self.safe_cut(data, pieces)
            if k > 0:
                return pieces[:k + 1], int(pieces[k])
            limit *= 2

    def encode_bytes(self, data: bytes) -> np.ndarray:
        """The ids of arbitrary bytes (byte level only: UnsupportedInputError otherwise)."""
        if self.level.kind != "bytes":
            raise UnsupportedInputError(f"encode_bytes needs a byte-level tokenizer: this one's "
                                        f"units are {self.level.kind} (encode text instead)")
        return self.run(self.level.layout_bytes(data))[0]

    # ------------------------------------------------------------------ batches
    def encode_list(self, texts: list, allowed, disallowed, n_threads: int) -> list[list[int]]:
        """Ids of each document of a list, as lists.

        Documents over SEGMENT_BYTES go alone through the segmented path (linear time,
        bounded scratch memory); the runs of documents between them are encoded together,
        in document order, so an error names the first bad document.
        """
        out = []
        run_start = 0
        huge_docs = [i for i, t in enumerate(texts) if self.may_be_huge(t)] if (
            self.segmentable and _longest(texts) >= SEGMENT_BYTES // 4) else []
        for index in huge_docs + [len(texts)]:
            if index > run_start:
                run = texts[run_start:index]
                ids, offsets = self.encode_texts(run, allowed, disallowed, n_threads,
                                                 ("document", run_start))
                # One list of all ids, then a slice per document (a split into arrays and
                # a tolist() each cost ~2 us a document: most of a 1,000-line batch).
                flat = self.shared_ints(ids).tolist()
                bounds = offsets.tolist()
                out.extend([flat[a:b] for a, b in zip(bounds, bounds[1:])])
                run_start = index
            if index < len(texts):
                huge = self.encode_huge(texts[index], allowed, disallowed, index, ("document", 0))
                if huge is not None:  # else it starts the next run
                    out.append(self.id_list(huge[0]))
                    run_start = index + 1
        return out

    def encode_arrow(self, array, allowed, disallowed, n_threads, row_base=0):
        """Encode a pyarrow string array into a ``pa.ListArray`` (int32 ids; nulls stay null)."""
        import pyarrow as pa

        ids, offsets, valid = self.encode_arrow_flat(array, allowed, disallowed, n_threads, row_base)
        mask = None if valid.all() else pa.array(~valid)
        if offsets[-1] >= 2**31:  # more ids than 32-bit list offsets can address
            return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids), mask=mask)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(ids),
                                        mask=mask, type=pa.list_(pa.int32()))

    def encode_arrow_flat(self, array, allowed, disallowed, n_threads, row_base=0,
                          dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows+1], valid bool[rows])`` of a string array.

        Byte level without normalization reads the Arrow buffers directly: one
        pre-tokenizer call and one kernel call, no per-row Python objects. Only rows that
        may hold a special token (a vectorised substring test on the tokens' prefixes) are
        looked at in Python: a disallowed one raises naming its row; when allowed ones
        occur, the array takes the general path.
        """
        from .io.arrow_text import string_chunks, text_buffers

        # Chunk by chunk (each checked before it is read), not combine_chunks(): combining
        # copies the whole text and would read a corrupt chunk's offsets unchecked.
        parts, row = [], row_base
        for chunk in string_chunks(array, row_base=row_base):
            data, doc_offsets, valid = text_buffers(chunk, row_base=row)
            if self.raw and self._rows_plain(data, doc_offsets, allowed, disallowed, row):
                ids, offsets = self.encode_rows(data, doc_offsets, n_threads, dropout, seed)
            else:
                texts = arrow_texts(chunk, data, doc_offsets, row, self.raw)
                ids, offsets = self.encode_texts(
                    texts, allowed, disallowed, n_threads, ("row", row), dropout, seed,
                    errors="surrogateescape" if self.raw else "strict")
            parts.append((ids, offsets, valid))
            row += len(chunk)
        return join_flat(parts)

    def _rows_plain(self, data, doc_offsets, allowed, disallowed, row_base) -> bool:
        """Whether no row holds an allowed special token (raising for a disallowed one)."""
        candidates = self.specials.candidate_rows(data, doc_offsets, allowed | disallowed)
        allowed_m = self.specials.matcher(allowed)
        disallowed_m = self.specials.matcher(disallowed)
        plain = True
        for row in candidates.tolist():
            # The row's own bytes (Arrow does not guarantee UTF-8): surrogateescape keeps
            # invalid bytes as lone surrogates, which no special token holds.
            text = row_bytes(data, doc_offsets, row).decode("utf-8", "surrogateescape")
            if disallowed_m is not None:
                self.specials.check_disallowed(text, disallowed_m, row, ("row", row_base))
            if allowed_m is not None and allowed_m.first(text) is not None:
                plain = False
        return plain

    def encode_rows(self, data, doc_offsets, n_threads, dropout=0.0, seed=0):
        """``(ids int32[n], offsets int64[rows + 1])`` of rows of UTF-8 bytes holding no
        special token (byte level). Rows over ``SEGMENT_BYTES`` go alone through the
        segmented path when it applies (the same ids, linear time and bounded scratch
        memory); the runs of rows between them take one scanner and one kernel call each.
        """
        special = np.zeros(0, dtype=np.int32)  # no special token in these rows
        lengths = np.diff(doc_offsets)
        pattern = self.level.pattern
        huge = (np.flatnonzero(lengths > SEGMENT_BYTES).tolist()
                if dropout == 0 and self.segmentable else [])
        if not huge:
            pieces, doc_pieces = pretokenize.piece_offsets(data, doc_offsets, pattern, n_threads)
            return self.run((data, pieces, special, doc_pieces), n_threads, dropout, seed)
        parts, counts = [], np.zeros(len(lengths), dtype=np.int64)
        run_start = 0
        for row in huge + [len(lengths)]:
            if row > run_start:
                lo, hi = doc_offsets[run_start], doc_offsets[row]
                pieces, doc_pieces = pretokenize.piece_offsets(
                    data[lo:hi], doc_offsets[run_start:row + 1] - lo, pattern, n_threads)
                ids, offsets = self.run((data[lo:hi], pieces, special, doc_pieces), n_threads)
                parts.append(ids)
                counts[run_start:row] = np.diff(offsets)
            if row < len(lengths):
                ids, _ = self.encode_segmented(data[doc_offsets[row]:doc_offsets[row + 1]])
                parts.append(ids)
                counts[row] = len(ids)
            run_start = row + 1
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return parts[0] if len(parts) == 1 else np.concatenate(parts), offsets

    # ------------------------------------------------------------------ outputs
    def id_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, with one shared int object per id (see ``shared_ints``)."""
        return self.shared_ints(ids).tolist()

    def shared_ints(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` as an object array of one shared int per id: its ``tolist()`` copies
        pointers instead of creating an int per token (a 4M-token list: 2x faster, half
        the memory). Short arrays, and arrays of ids below 257 (Python's cached small
        ints), are returned as they are: under ``SHARED_INTS_FROM`` ids a plain
        ``tolist()`` is faster (a 300-character text: 1.1 us against 3.5)."""
        if len(ids) < SHARED_INTS_FROM or ids.max() <= 256:
            return ids
        if self._id_objects is None:
            self._id_objects = np.array(range(self.vocab_size), dtype=object)
        return self._id_objects.take(ids)


def _longest(texts) -> int:
    """The largest ``len`` of the items (the caller's cheap test for huge documents); any
    item without one makes it unbounded, so the caller tests each item itself."""
    try:
        return max(map(len, texts), default=0)
    except TypeError:
        return 1 << 62


def row_bytes(data: np.ndarray, doc_offsets: np.ndarray, row: int) -> bytes:
    return data[doc_offsets[row]:doc_offsets[row + 1]].tobytes()


def arrow_texts(array, data, doc_offsets, row_base: int, raw: bool) -> list[str]:
    """The rows of a string array as str (nulls as ""), for the per-row encoding path.

    ``raw`` (byte level, no normalization): rows are decoded with ``surrogateescape``, so
    that the layout (``errors="surrogateescape"``) encodes exactly their bytes, as
    ``encode_bytes`` would. Otherwise the text itself is needed: a row that is not UTF-8
    raises InvalidUTF8Error naming ``row_base + row`` and the byte offset, never a bare
    UnicodeDecodeError.
    """
    n = len(doc_offsets) - 1
    if raw:
        return [row_bytes(data, doc_offsets, r).decode("utf-8", "surrogateescape")
                for r in range(n)]
    try:
        return [t if t is not None else "" for t in array.to_pylist()]
    except UnicodeDecodeError:
        pass
    for r in range(n):  # find the first bad row (nulls are empty in ``data``)
        try:
            row_bytes(data, doc_offsets, r).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUTF8Error(row_base + r, exc.start, exc.reason) from None
    raise AssertionError("to_pylist failed to decode, but every row is UTF-8")


def join_flat(parts):
    """Concatenate ``(ids, offsets, valid)`` triples of consecutive chunks into one."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, bool)
    ids = np.concatenate([p[0] for p in parts])
    valid = np.concatenate([p[2] for p in parts])
    offsets = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(p[1]) for p in parts]), out=offsets[1:])
    return ids, offsets, valid
