"""A merge model: the merge list, the vocabulary it derives, and the encoder's tables.

Layout of the ids: the base symbols first (byte mode: ids 0..255; char mode: the alphabet
in code-point order), then merge *k* produces the next free id, or reuses the id of a token
with the same bytes (as Hugging Face ``tokenizers`` does).

Two merge modes read the same vocabulary. ``pairs`` (ours, Hugging Face's): merge the
adjacent pair with the lowest *merge* rank. ``ranks`` (tiktoken's): a piece that is a token
is that token; otherwise merge the adjacent pair whose *concatenation* is the
lowest-ranked token. The encoder only sees a hash table pair -> (rank, new id), built here
for either mode, plus lookup tables that skip merging for common pieces.
"""

from __future__ import annotations

import numpy as np

from .errors import ModelFormatError
from .parallel import call_kernel

# Kernel modules are imported where they are used: importing them imports Numba, and
# ``import fastbpe_nb`` imports neither Numba nor pyarrow.

#: Pieces longer than this many units are merged by the windowed rank sweep (or the heap).
LONG_PIECE = 256
#: Pieces of at most this many units are merged by rescanning an array, longer ones up to
#: LONG_PIECE by a small heap (kernels.encode ``_merge_short`` / ``_merge_mid``).
SCAN_PIECE = 24
#: Byte pieces longer than this are encoded by backtracking where a ``ranks`` vocabulary
#: allows it (kernels/backtrack.py: 2-5x faster than merging from 16 bytes up, on par below).
BACKTRACK_PIECE = 15
#: log2 of the largest per-block table of merged pieces (24-byte slots: 24 MiB, half of
#: them used at most; a block's table has about one slot per two of its pieces).
CACHE_BITS = 20
#: Units per window of the rank sweep over a long piece (why 8192: kernels.encode.encode_batch).
SWEEP_WINDOW = 8192
#: Overlap of consecutive sweep windows, in units, where their encodings must meet.
SWEEP_MARGIN = 256
#: Longest piece (in units) the piece tables keep (CJK runs of 20+ characters repeat too).
CACHE_UNITS = 1024
#: The encoder's tunables after the tables, in the kernels' argument order.
TUNABLES = (CACHE_BITS, SWEEP_WINDOW, SWEEP_MARGIN, CACHE_UNITS, SCAN_PIECE, BACKTRACK_PIECE)


def merge_array(merges, source=None) -> np.ndarray:
    """``merges`` as an int64 array of shape (n, 2), every id checked to be an integer.

    Strict on purpose: a Python int or a NumPy integer only. A float (even ``97.0``), a
    bool, a string of digits or a NumPy float array raises ModelFormatError naming
    ``merges[i]`` (NumPy would silently truncate ``97.5`` to 97 and read ``"98"`` as 98).
    Ids outside ``0 .. 2**31 - 1`` are named too (the exact "defined before use" check is
    ``derive_vocab``'s).
    """
    if isinstance(merges, np.ndarray) and merges.dtype.kind in "iu":
        arr = merges
        if arr.size == 0:
            arr = arr.reshape(-1, 2) if arr.ndim == 1 else arr
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"merges must have shape (n, 2), got {arr.shape}")
        bad = (arr < 0) | (arr >= 2**31)
        if bad.any():
            k = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ModelFormatError(f"merge {arr[k].tolist()} has an id outside 0..2**31-1",
                                   source, f"merges[{k}]")
        return arr.astype(np.int64)
    if isinstance(merges, np.ndarray):
        if merges.dtype.kind != "O":
            if merges.size == 0:
                return np.zeros((0, 2), dtype=np.int64)
            raise ModelFormatError(f"merge ids must be integers, got a {merges.dtype} array",
                                   source, "merges[0]")
        merges = merges.tolist()
    if isinstance(merges, (str, bytes)):
        raise TypeError("merges must be a sequence of (left, right) id pairs, not a string")
    rows = list(merges)
    for k, m in enumerate(rows):
        if isinstance(m, (str, bytes)) or not hasattr(m, "__len__") or len(m) != 2:
            raise ModelFormatError(f"merges must have shape (n, 2): expected a (left, right) "
                                   f"pair of integer ids, got {m!r:.60}", source, f"merges[{k}]")
        for x in m:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise ModelFormatError(
                    f"merge {tuple(m)!r:.60}: id {x!r:.30} is a {type(x).__name__}, not an "
                    "integer (a Python int or a NumPy integer)", source, f"merges[{k}]")
            if not 0 <= x < 2**31:
                raise ModelFormatError(f"merge {tuple(m)!r:.60}: id {x} is outside 0..2**31-1",
                                       source, f"merges[{k}]")
    if not rows:
        return np.zeros((0, 2), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def derive_vocab(merges: np.ndarray, base_bytes: list[bytes], source=None):
    """Replay ``merges`` to derive the vocabulary, validating every id on the way.

    Returns ``(merge_ids, token_bytes, units)``: the id each merge produces, the bytes of
    every regular token, and each token's length in base units. Raises ModelFormatError
    naming ``merges[k]`` for an id that is not defined when merge k is applied.
    """
    token_bytes = list(base_bytes)
    units = [1] * len(token_bytes)
    id_of = {b: i for i, b in enumerate(token_bytes)}
    merge_ids = np.empty(len(merges), dtype=np.int32)
    # Two flat lists, not a list per merge: n small lists alive at once were enough
    # allocations to set off the garbage collector, whose full pass over the objects
    # Numba keeps (~175k) took 40-60 ms inside a 0.1 s training.
    for k, (a, b) in enumerate(zip(merges[:, 0].tolist(), merges[:, 1].tolist())):
        n = len(token_bytes)
        if not (0 <= a < n and 0 <= b < n):
            bad = a if not 0 <= a < n else b
            raise ModelFormatError(
                f"merge ({a}, {b}) uses id {bad}, which is not defined before rank {k} "
                f"(ids 0..{n - 1} exist at that point)",
                source, f"merges[{k}]",
            )
        new = token_bytes[a] + token_bytes[b]
        tid = id_of.get(new)
        if tid is None:
            tid = n
            token_bytes.append(new)
            units.append(units[a] + units[b])
            id_of[new] = tid
        merge_ids[k] = tid
    return merge_ids, token_bytes, units


def check_made(merges, merge_ids, token_bytes, what: str) -> None:
    """AssertionError unless every merge's id is a token whose length is its two tokens'
    lengths added, and no token is empty: the cheap check of a vocabulary that training
    assembled instead of deriving it (``derive_vocab``) merge by merge."""
    lengths = np.fromiter(map(len, token_bytes), np.int64, len(token_bytes))
    merges = np.asarray(merges)
    if len(merge_ids) and (np.max(merge_ids) >= len(token_bytes) or (lengths == 0).any()
                           or not np.array_equal(lengths[merge_ids], lengths[merges[:, 0]]
                                                 + lengths[merges[:, 1]])):
        raise AssertionError(f"internal error: {what}")


def token_arrays(tokens: list[bytes]):
    """``(tok_off int64[n + 1], tok_data uint8[total])``: the tokens' bytes end to end."""
    n = len(tokens)
    lengths = np.fromiter(map(len, tokens), np.int64, n)
    tok_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=tok_off[1:])
    # A writable copy: the kernels then compile for one array type, not also a read-only one.
    tok_data = np.frombuffer(b"".join(tokens), dtype=np.uint8).copy()
    return tok_off, tok_data


def whole_token_table(tokens: list[bytes], arrays=None):
    """``(whole_keys int64[cap], tok_off int64[n + 1], tok_data uint8[total])``: the tokens'
    bytes end to end and a hash table from a token's bytes to its id
    (``kernels.encode.build_whole_table``). Used by the ``ranks`` encoder and by merge
    recovery. ``arrays``: ``token_arrays(tokens)`` when the caller has them."""
    tok_off, tok_data = token_arrays(tokens) if arrays is None else arrays
    from .kernels.encode import build_whole_table

    return call_kernel(build_whole_table, tok_off, tok_data, len(tok_off) - 1), tok_off, tok_data


def _ragged(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` of every i, end to end."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


def bad_joins(merges: np.ndarray, tok_off: np.ndarray, tok_data: np.ndarray, n_base: int):
    """The indices k (ascending) where the bytes of tokens ``merges[k]`` do not join into
    token ``n_base + k`` (ids already checked to be in bounds). Vectorized: the Python loop
    over 200k merges cost 0.45 s."""
    lengths = np.diff(tok_off)
    a, b = merges[:, 0], merges[:, 1]
    made = np.arange(n_base, n_base + len(merges))
    bad = lengths[a] + lengths[b] != lengths[made]
    for part, shift in ((a, 0), (b, lengths[a])):
        keep = np.where(bad, 0, lengths[part])  # rows already bad compare nothing
        rows = np.repeat(np.arange(len(merges)), keep)
        differ = tok_data[_ragged(tok_off[part], keep)] != \
            tok_data[_ragged(tok_off[made] + shift, keep)]
        bad[np.unique(rows[differ])] = True
    return np.flatnonzero(bad)


def no_backtrack() -> tuple:
    """Empty tables in place of ``backtrack_tables``' (the kernels then only merge)."""
    return (np.zeros(0, np.int64), *[np.zeros(0, np.int32)] * 6, np.zeros(0, np.int64),
            np.zeros(0, np.int32))


class KernelTables:
    """What the encode kernels read besides the text: built on first use, never pickled.

    ``merges`` / ``merge_ids`` are the pairs the rank table holds, in rank order; ``ranks``
    (optional, int64) replaces the rank of each pair (SentencePiece: the dense rank of the
    made piece's score); ``long_piece`` is 1 when equal ranks must be broken by position
    (only the heap path does that).
    """

    def __init__(self, merges, merge_ids, whole=None, ranks=None, long_piece=LONG_PIECE,
                 short_tokens=(), sym_map=None, backtrack=None):
        """``backtrack``: a function returning ``backtrack_tables``' tables (or None), called
        by ``use_backtracking`` (building them takes 0.2-0.7 s for a 100k-200k vocabulary,
        paid only where they pay off: see ``Encoder.run``)."""
        from .kernels.encode import build_byte_pairs, sweep_rank_count
        from .kernels.hashing import build_rank_table, interleave_table

        keys, vals = call_kernel(build_rank_table, np.ascontiguousarray(merges, dtype=np.int32),
                                 np.ascontiguousarray(merge_ids, dtype=np.int32))
        if ranks is not None:
            occupied = keys != -1
            r = vals[occupied] >> 32
            vals[occupied] = (np.asarray(ranks, np.int64)[r] << 32) | (vals[occupied] & 0xFFFFFFFF)
        # One array, key and value side by side (a probe reads one cache line); the two
        # arrays are views of it (for ``table_get``).
        pairs = call_kernel(interleave_table, keys, vals)
        sweep_ranks = 0 if long_piece == 1 else int(call_kernel(sweep_rank_count, keys, vals))
        self._set(pairs, call_kernel(build_byte_pairs, keys, vals), whole, sweep_ranks,
                  long_piece, backtrack)
        if short_tokens:
            self.short = self._short_table(short_tokens, sym_map)

    def _set(self, pairs, byte_pairs, whole, sweep_ranks, long_piece, backtrack, short=None):
        self.pairs = pairs
        self.keys, self.vals = pairs[0::2], pairs[1::2]
        self.long_piece = long_piece
        self.sweep_ranks = sweep_ranks
        self.byte_pairs = byte_pairs
        empty8 = np.zeros(1, dtype=np.uint8)
        self.whole = whole or (np.zeros(0, dtype=np.int64), np.zeros(2, dtype=np.int64), empty8)
        # The backtracking encoder's tables (``backtrack_tables``), or empty ones: merging only.
        self.backtrack = no_backtrack()
        self._backtrack_source = backtrack
        self.short = np.zeros(0, dtype=np.int64) if short is None else short

    @classmethod
    def from_arrays(cls, pairs, byte_pairs, whole, sweep_ranks, short, backtrack=None):
        """Tables built earlier (``io.rank_cache``: validated there), without a kernel call.
        ``pairs`` int64[2 cap] (``interleave_table``), ``byte_pairs`` int64[65536], ``whole``
        as ``whole_token_table`` gives it, ``short`` int64[3 cap'] or empty."""
        self = cls.__new__(cls)
        self._set(pairs, byte_pairs, whole, int(sweep_ranks), LONG_PIECE, backtrack, short)
        return self

    def arrays(self) -> dict:
        """What ``from_arrays`` takes back (by its argument names)."""
        return {"pairs": self.pairs, "byte_pairs": self.byte_pairs, "whole": self.whole,
                "sweep_ranks": self.sweep_ranks, "short": self.short}

    def args(self, short: bool = True, backtrack: bool = True) -> tuple:
        """The kernel arguments from ``pairs`` to ``bt_pair_vals`` (see kernels.encode);
        ``backtrack=False``: without the backtracking tables (merging only, for tests)."""
        short_table = self.short if short else np.zeros(0, dtype=np.int64)
        bt = self.backtrack if backtrack else no_backtrack()
        return (self.pairs, *self.whole, short_table, self.byte_pairs, *bt)

    def use_backtracking(self) -> None:
        """Build the backtracking encoder's tables now, if this vocabulary has them."""
        source, self._backtrack_source = self._backtrack_source, None
        if source is not None:
            tables = source()
            if tables is not None:
                self.backtrack = tables

    def tail(self) -> tuple:
        return (self.long_piece, self.sweep_ranks, *TUNABLES)

    def _short_table(self, short_tokens, sym_map):
        """Packed bytes -> packed ids of every token of 2..SHORT_BYTES bytes, each encoded as
        a piece of its own by the encoder itself (one kernel call), so a hit gives what
        merging gives, in either merge mode."""
        from ._scanner import read_only
        from .kernels.encode import build_short_table, encode_serial

        data = np.frombuffer(b"".join(short_tokens), dtype=np.uint8)
        pieces = np.zeros(len(short_tokens) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, short_tokens), np.int64, len(short_tokens)), out=pieces[1:])
        docs = np.arange(len(short_tokens) + 1, dtype=np.int64)  # a piece per document
        from .piece_cache import no_cache

        # Read-only views, as Encoder.run passes them: the same compiled encode_serial.
        ids, id_offsets, *_ = call_kernel(encode_serial, data, sym_map, read_only(pieces),
                                          read_only(np.zeros(0, np.int32)), read_only(docs),
                                          *self.args(short=False),
                                          0.0, 0, *self.tail(), *no_cache(np.uint8))
        return call_kernel(build_short_table, data, pieces, ids, id_offsets)


class MergeModel:
    """Merges over base symbols (``base_bytes``: the bytes of each base id), in a mode.

    ``mode``: ``"pairs"`` or ``"ranks"`` (see the module docstring). Attributes:
    ``merges`` int32[n, 2] and ``merge_ids`` int32[n] (read-only), ``token_bytes`` (the bytes
    of every regular id), ``n_base``.
    """

    def __init__(self, merges, base_bytes: list[bytes], mode: str = "pairs", source=None,
                 _derived=None):
        if mode not in ("pairs", "ranks"):
            raise ValueError(f"merge_mode must be 'pairs' or 'ranks', not {mode!r}")
        merges = merge_array(merges, source)
        self.mode = mode
        self.n_base = len(base_bytes)
        if _derived is None:
            merge_ids, self.token_bytes, _ = derive_vocab(merges, base_bytes, source)
        else:  # (merge_ids, token_bytes) checked by from_tokens
            merge_ids, self.token_bytes = _derived
        self.merges = merges.astype(np.int32)
        self.merges.setflags(write=False)
        self.merge_ids = merge_ids
        self.merge_ids.setflags(write=False)
        self._tables = None
        self._rank_pairs = None  # ranks mode: see rank_pairs()
        self._cached_tables = None  # ranks mode: see set_cached_tables()

    @classmethod
    def from_tokens(cls, merges, token_bytes: list[bytes], mode: str = "ranks", source=None,
                    n_base: int = 256) -> "MergeModel":
        """The model whose merge k makes token ``n_base + k`` of ``token_bytes``, checked
        without replaying the vocabulary (the replay of a 100k-token file costs 0.17 s).

        What the replay would prove is checked directly: the tokens are unique, and each
        merge's ids exist before it and their bytes join into the token it makes (so the
        replay would give that token a new id, its own). Raises ModelFormatError naming
        ``merges[k]`` otherwise.
        """
        merges = merge_array(merges, source)
        n = len(token_bytes)
        if len(merges) != n - n_base:
            raise ModelFormatError(f"{len(merges)} merges for {n} tokens: expected one per token "
                                   f"after the {n_base} base ones", source, "merges")
        if len(set(token_bytes)) != n:
            raise ModelFormatError("the tokens are not unique", source, "tokens")
        made = np.arange(n_base, n, dtype=np.int64)
        late = np.flatnonzero((merges >= made[:, None]).any(axis=1))
        if late.size:
            k = int(late[0])
            raise ModelFormatError(f"merge {merges[k].tolist()} uses an id not defined before "
                                   f"rank {k}", source, f"merges[{k}]")
        wrong = bad_joins(merges, *token_arrays(token_bytes), n_base)
        if wrong.size:
            k = int(wrong[0])
            a, b = merges[k].tolist()
            raise ModelFormatError(
                f"merge ({a}, {b}) makes {token_bytes[a] + token_bytes[b]!r:.60}, not token "
                f"{n_base + k} ({token_bytes[n_base + k]!r:.60})", source, f"merges[{k}]")
        base_bytes = list(token_bytes[:n_base])
        return cls(merges, base_bytes, mode, source,
                   _derived=(made.astype(np.int32), list(token_bytes)))

    @classmethod
    def from_checked(cls, merges, token_bytes: list[bytes], mode: str = "ranks", source=None,
                     n_base: int = 256) -> "MergeModel":
        """``from_tokens`` for merges already proven to make tokens ``n_base..`` (the
        ``io.rank_cache`` entry of a file: proven by ``from_tokens`` when it was written,
        its ids and lengths checked when read); ids are still checked to be integers."""
        made = np.arange(n_base, len(token_bytes), dtype=np.int32)
        return cls(merges, list(token_bytes[:n_base]), mode, source, _derived=(made, token_bytes))

    def __getstate__(self):  # the tables are rebuilt on demand
        return {**self.__dict__, "_tables": None, "_rank_pairs": None, "_cached_tables": None}

    def __setstate__(self, state):  # pickles from before _rank_pairs / _cached_tables
        self.__dict__.update({"_rank_pairs": None, "_cached_tables": None, **state})

    def __eq__(self, other):
        """The same merges in the same mode (the Tokenizer compares the base alphabet)."""
        if not isinstance(other, MergeModel) or type(other) is not type(self):
            return NotImplemented
        return self.mode == other.mode and np.array_equal(self.merges, other.merges)

    __hash__ = None

    def tables(self, sym_map: np.ndarray, byte_level: bool, vocab_size: int) -> KernelTables:
        """The encoder's tables (``byte_level``: with the short-piece table)."""
        if self._tables is None:
            from .kernels.encode import SHORT_BYTES, SHORT_ID_BITS

            short_table = byte_level and vocab_size < 1 << SHORT_ID_BITS
            backtrack = None
            if self.mode == "ranks" and byte_level:
                tokens = self.token_bytes
                backtrack = lambda: backtrack_tables(tokens)[0]  # noqa: E731 (None: not exact)
            cached, self._cached_tables = self._cached_tables, None
            # The cached tables serve only what they were built for: bytes, that symbol map
            # and (when they hold one) the short-piece table.
            if cached is not None and byte_level and np.array_equal(sym_map, cached[1]) \
                    and (short_table or cached[0]["short"].shape[0] == 0):
                self._tables = KernelTables.from_arrays(**cached[0], backtrack=backtrack)
                return self._tables
            whole, merges, merge_ids = (None, self.merges, self.merge_ids) \
                if self.mode == "pairs" else self.rank_pairs()
            short = [t for t in self.token_bytes if 2 <= len(t) <= SHORT_BYTES] \
                if short_table else []
            self._tables = KernelTables(merges, merge_ids, whole, short_tokens=short,
                                        sym_map=sym_map, backtrack=backtrack)
            self._rank_pairs = None  # the tables hold them now
        return self._tables

    def set_cached_tables(self, arrays: dict, sym_map: np.ndarray) -> None:
        """``ranks`` mode: the encoder's tables as ``KernelTables.arrays`` gave them for this
        model's tokens and the byte-level ``sym_map`` (``io.rank_cache``, validated), used by
        ``tables`` instead of building them when it is asked for the same."""
        if self.mode != "ranks":
            raise ValueError("cached tables are the tables of merge_mode='ranks' only")
        self._cached_tables = (arrays, sym_map)

    def rank_pairs(self):
        """``ranks`` mode: ``(whole_token_table, split pairs, their tokens)``, the inputs of the
        rank tables, derived once (``split_pairs``)."""
        if self._rank_pairs is None:
            whole = whole_token_table(self.token_bytes)
            self._rank_pairs = (whole, *self.split_pairs(whole))
        return self._rank_pairs

    def split_pairs(self, whole=None):
        """``ranks`` mode: (left, right) -> token for every two-token split, in token order.

        The position in this list is the rank the kernel sees; it grows with the token id,
        so the lowest rank is the lowest-ranked concatenation (tiktoken's rule). One kernel
        call (``kernels.recover.split_pairs``); ``split_pairs_py`` is its specification.
        """
        from .kernels.recover import split_pairs

        whole_keys, tok_off, tok_data = whole or whole_token_table(self.token_bytes)
        lefts, rights, results = call_kernel(split_pairs, tok_off, tok_data, whole_keys,
                                             int(self.n_base))
        return np.stack([lefts, rights], axis=1).reshape(-1, 2), results

    def split_pairs_py(self):
        """The Python twin of ``split_pairs`` (the specification its tests compare with)."""
        id_of = {b: i for i, b in enumerate(self.token_bytes)}
        lefts, rights, results = [], [], []
        for tid in range(self.n_base, len(self.token_bytes)):
            data = self.token_bytes[tid]
            for k in range(1, len(data)):
                a = id_of.get(data[:k])
                if a is None:
                    continue
                b = id_of.get(data[k:])
                if b is not None:
                    lefts.append(a)
                    rights.append(b)
                    results.append(tid)
        merges = np.stack([np.asarray(lefts, np.int32), np.asarray(rights, np.int32)], axis=1)
        return merges.reshape(-1, 2), np.asarray(results, dtype=np.int32)


def backtrack_tables(token_bytes, source=None):
    """The tables of ``kernels.backtrack.encode_piece`` for a ``ranks`` vocabulary.

    ``token_bytes``: the bytes of every token, index = id = rank (tiktoken's layout; no
    special tokens). Returns ``(tables, unreachable, out_of_order)``: ``tables`` the
    arrays from ``trie_slots`` to ``pair_vals`` in ``encode_piece``'s argument order, or
    None when the backtracking encoder would not be exact for this vocabulary (some
    token is made by BPE only through a part of higher rank: ``out_of_order``, int64 ids);
    ``unreachable`` the ids of tokens their own bytes do not encode to, left out of the
    search (exact: BPE never makes them; a piece that is one still gets it whole).
    Raises ModelFormatError naming the token for an empty, duplicate or non-bytes token.
    """
    tokens = list(token_bytes)
    if len(tokens) >= 2**31:
        raise ModelFormatError(f"{len(tokens)} tokens: ids must fit in int32", source, "tokens")
    for i, t in enumerate(tokens):
        if not isinstance(t, bytes) or not t:
            raise ModelFormatError(f"token {i} is {t!r:.40}: expected non-empty bytes",
                                   source, f"tokens[{i}]")
    if len(set(tokens)) != len(tokens):
        seen = {}
        for i, t in enumerate(tokens):
            if t in seen:
                raise ModelFormatError(f"token {i} ({t!r:.40}) repeats token {seen[t]}",
                                       source, f"tokens[{i}]")
            seen[t] = i
    if sum(map(len, tokens)) >= 2**23:  # trie keys node * 256 + byte + 1 must fit 31 bits
        raise ModelFormatError("the tokens have 2**23 bytes or more in all", source, "tokens")
    order = np.array(sorted(range(len(tokens)), key=tokens.__getitem__), dtype=np.int64)
    from .kernels.backtrack import STATUS_OUT_OF_ORDER, STATUS_UNREACHABLE, build_backtrack_tables

    *tables, status = call_kernel(build_backtrack_tables, *token_arrays(tokens), order)
    unreachable = np.flatnonzero(status == STATUS_UNREACHABLE)
    out_of_order = np.flatnonzero(status == STATUS_OUT_OF_ORDER)
    return (None if out_of_order.size else tuple(tables)), unreachable, out_of_order
