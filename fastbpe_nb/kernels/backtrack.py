"""Exact linear-time BPE for ``ranks`` vocabularies (tiktoken's rule) by backtracking.

The algorithm is the one the GitHub ``bpe`` crate (rust-gems) documents; this is our own
Numba version of it. In ``ranks`` mode a token's id is its rank, and BPE merges the
adjacent pair whose concatenation is the lowest-ranked token (the leftmost of equal
ranks). Call two tokens *compatible* when the BPE of their concatenated bytes is the pair
itself. The BPE encoding of a piece is the unique tiling of it by tokens in which every
adjacent pair is compatible, so it can be found by a depth-first search: take the longest
token that is a prefix of the rest, fall back to shorter prefix tokens while the pair
with the previous token is incompatible, and backtrack when none fits. A position from
which no tiling finished is never tried again (``alive``): the tiling of a prefix is
unique, so the search walks each position's chain of prefix tokens once (linear).

Compatibility is decided without merging: replay the two tokens' merge histories
backwards from the later-made token to the earlier (each token's last merge is its
*split*), and at every step ask whether the two tokens then meeting at the boundary form
a token whose merge would come before the boundary changes again.

What it relies on, checked by ``build_backtrack_tables`` for every token (``status``):

* every multi-byte token that BPE can make at all is made with both halves of lower rank:
  merging its bytes with the ranks below its own ends in exactly two parts (``STATUS_OK``,
  the split). Then every BPE run merges in non-decreasing rank order, so a rank is a time;
* a token that its own bytes do not BPE-encode to is never the output of merging
  (``STATUS_UNREACHABLE``): it is left out of the search (the whole-piece rule still
  returns it for a piece that is exactly that token, as tiktoken does);
* a token its bytes do encode to, but through a part of higher rank
  (``STATUS_OUT_OF_ORDER``), breaks the rank-as-time argument: the caller must not use
  these tables (``fastbpe_nb.model.backtrack_tables`` refuses them).

A byte without a single-byte token makes ``encode_piece`` return -1 for a piece that has
it (the caller merges such pieces the ordinary way).
"""

import numpy as np
from numba import njit

#: ``status`` values (agreed with ``fastbpe_nb.model.backtrack_tables``).
STATUS_UNREACHABLE = 0
STATUS_OK = 1
STATUS_BASE = 2
STATUS_OUT_OF_ORDER = 3


# ----------------------------------------------------------------------------- the trie
@njit(cache=True, nogil=True, inline="always")
def _trie_slot(key, mask):
    h = key * 0x9E3779B1  # key < 2**31: no overflow
    return (h ^ (h >> 29)) & mask


@njit(cache=True, nogil=True, inline="always")
def _step(node, b, trie_slots):
    """The child of ``node`` by byte ``b`` in the hashed trie, or -1.

    One probe mostly: the slot holds ``(node * 256 + b + 1) << 32 | child``; a scan of a
    node's sorted children cost 30 ns a byte (a branch mispredicted at each end)."""
    mask = trie_slots.shape[0] - 1
    key = np.int64(node) * 256 + b + 1
    i = _trie_slot(key, mask)
    while True:
        v = trie_slots[i]
        if (v >> 32) == key:
            return v & 0xFFFFFFFF
        if v == -1:
            return -1
        i = (i + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _longest(data, p, end, trie_slots, node_tok, node_use):
    """Longest usable token that is a prefix of ``data[p:end]``.

    Returns ``(token, whole)``: ``token`` -1 if none; ``whole`` the id of the token (any
    status) whose bytes are all of ``data[p:end]``, or -1.
    """
    node = 0
    best = -1
    q = p
    while q < end:
        node = _step(node, data[q], trie_slots)
        if node < 0:
            return best, -1
        q += 1
        t = node_use[node]
        if t >= 0:
            best = t
    return best, node_tok[node]


@njit(cache=True, nogil=True)
def _hash_trie(parent, nbyte, n_nodes):
    """The trie's edges (node ``v`` hangs from ``parent[v]`` by byte ``nbyte[v]``) in an
    open-addressing table (power of two, at most half full, -1 free)."""
    cap = 2
    while cap < 2 * n_nodes:
        cap *= 2
    slots = np.full(cap, -1, dtype=np.int64)
    mask = cap - 1
    for v in range(1, n_nodes):
        key = np.int64(parent[v]) * 256 + nbyte[v] + 1
        i = _trie_slot(key, mask)
        while slots[i] != -1:
            i = (i + 1) & mask
        slots[i] = (key << 32) | v
    return slots


@njit(cache=True, nogil=True)
def _lookup(data, a, c, trie_slots, node_tok):
    """Id of the token whose bytes are ``data[a:c]`` (any status), or -1."""
    node = 0
    for p in range(a, c):
        node = _step(node, data[p], trie_slots)
        if node < 0:
            return -1
    return node_tok[node]


@njit(cache=True, nogil=True)
def _build_trie(tok_off, tok_data, order):
    """Trie of the tokens (nodes in depth-first order) as ``(trie_slots, node_tok)``."""
    n_tok = tok_off.shape[0] - 1
    cap = tok_data.shape[0] + 1
    parent = np.empty(cap, dtype=np.int32)
    nbyte = np.empty(cap, dtype=np.uint8)
    node_tok = np.full(cap, -1, dtype=np.int32)
    max_len = 0
    for t in range(n_tok):
        max_len = max(max_len, tok_off[t + 1] - tok_off[t])
    path = np.zeros(max_len + 1, dtype=np.int32)  # path[d]: node at depth d of the last token
    n_nodes = 1
    parent[0] = -1
    nbyte[0] = 0
    prev = -1
    for i in range(n_tok):
        t = order[i]
        s = tok_off[t]
        n = tok_off[t + 1] - s
        lcp = 0
        if prev >= 0:  # sorted order: the shared prefix with the previous token is a path
            ps = tok_off[prev]
            pn = tok_off[prev + 1] - ps
            while lcp < n and lcp < pn and tok_data[s + lcp] == tok_data[ps + lcp]:
                lcp += 1
        for d in range(lcp, n):
            parent[n_nodes] = path[d]
            nbyte[n_nodes] = tok_data[s + d]
            path[d + 1] = n_nodes
            n_nodes += 1
        node_tok[path[n]] = t
        prev = t
    return _hash_trie(parent, nbyte, n_nodes), node_tok[:n_nodes].copy()


# -------------------------------------------------------------- merging, for the checks
@njit(cache=True, nogil=True)
def _pair_rank(tok_data, s, i, k, limit, trie):
    """Rank (< limit) of the token with bytes ``tok_data[s+i:s+k]``, or ``limit``."""
    t = _lookup(tok_data, s + i, s + k, trie[0], trie[1])
    if t < 0 or t >= limit:
        return limit
    return t


@njit(cache=True, nogil=True)
def _merge_bytes(tok_data, s, n, limit, trie, bnd, rk):
    """tiktoken's byte-pair merge of ``tok_data[s:s+n]`` using ranks below ``limit`` only
    (no whole-piece rule). Returns the number of parts; ``bnd[:parts + 1]`` the cuts.
    ``bnd`` int64[>= n + 1], ``rk`` int64[>= n] scratch."""
    for i in range(n + 1):
        bnd[i] = i
    for i in range(n - 1):
        rk[i] = _pair_rank(tok_data, s, i, i + 2, limit, trie)
    parts = n
    while parts > 1:
        best = limit
        bi = -1
        for i in range(parts - 1):
            if rk[i] < best:  # strict: the leftmost of equal ranks
                best = rk[i]
                bi = i
        if bi < 0:
            break
        for i in range(bi + 1, parts):
            bnd[i] = bnd[i + 1]
        for i in range(bi + 1, parts - 2):
            rk[i] = rk[i + 1]
        parts -= 1
        if bi > 0:
            rk[bi - 1] = _pair_rank(tok_data, s, bnd[bi - 1], bnd[bi + 1], limit, trie)
        if bi < parts - 1:
            rk[bi] = _pair_rank(tok_data, s, bnd[bi], bnd[bi + 2], limit, trie)
    return parts


# ------------------------------------------------------------------------ the builder
@njit(cache=True, nogil=True, inline="always")
def _pair_slot(l, r, mask):
    h = (np.int64(l) * 0x9E3779B1) ^ (np.int64(r) * 0x85EBCA6B)
    return (h ^ (h >> 29)) & mask


@njit(cache=True, nogil=True, inline="always")
def _pair_get(l, r, pair_keys, pair_vals):
    """Token made by merging ``l`` and ``r`` (a token's split), or -1."""
    mask = pair_keys.shape[0] - 1
    key = (np.int64(l) << 32) | np.int64(r)
    i = _pair_slot(l, r, mask)
    while True:
        k = pair_keys[i]
        if k == key:
            return pair_vals[i]
        if k == -1:
            return -1
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def build_backtrack_tables(tok_off, tok_data, order):
    """All tables of ``encode_piece``, and each token's status.

    Parameters
    ----------
    tok_off : int64[n_tokens + 1]
        Offsets of token ``t``'s bytes in ``tok_data``; ids are ranks. Validated by the
        caller: non-empty, distinct, ``n_tokens < 2**31``.
    tok_data : uint8[m]
        The tokens' bytes, concatenated.
    order : int64[n_tokens]
        The token ids sorted by their bytes (lexicographic, ``bytes`` order).

    Returns
    -------
    trie_slots : int64[cap]
        The trie of all tokens, root node 0: slot ``(v * 256 + b + 1) << 32 | child`` for
        each edge from node ``v`` by byte ``b`` (open addressing, power of two, at most
        half full, -1 free; ``_step`` probes it).
    node_tok : int32[n_nodes]
        The token (any status) whose bytes spell the path to the node, or -1.
    node_use : int32[n_nodes]
        ``node_tok`` where the token's status is OK or BASE, else -1.
    tok_len : int32[n_tokens]
        Bytes of each token.
    next_prefix : int32[n_tokens]
        The longest usable token that is a proper prefix of the token, or -1.
    split_l, split_r : int32[n_tokens]
        The two tokens BPE last merges to make the token (OK); the token itself for a
        single byte (BASE); -1 otherwise.
    pair_keys : int64[cap]
        Open-addressing table (power of two, at most half full, -1 free) of
        ``(split_l << 32) | split_r`` of every OK token ...
    pair_vals : int32[cap]
        ... and that token.
    status : int8[n_tokens]
        STATUS_OK, STATUS_BASE, STATUS_UNREACHABLE or STATUS_OUT_OF_ORDER.
    """
    n_tok = tok_off.shape[0] - 1
    trie = _build_trie(tok_off, tok_data, order)
    trie_slots, node_tok = trie
    tok_len = np.empty(n_tok, dtype=np.int32)
    max_len = 1
    for t in range(n_tok):
        tok_len[t] = tok_off[t + 1] - tok_off[t]
        max_len = max(max_len, tok_len[t])
    split_l = np.full(n_tok, -1, dtype=np.int32)
    split_r = np.full(n_tok, -1, dtype=np.int32)
    status = np.zeros(n_tok, dtype=np.int8)
    bnd = np.empty(max_len + 1, dtype=np.int64)
    rk = np.empty(max_len, dtype=np.int64)
    n_ok = 0
    for t in range(n_tok):
        s = tok_off[t]
        n = tok_len[t]
        if n == 1:
            status[t] = STATUS_BASE
            split_l[t] = t
            split_r[t] = t
            continue
        parts = _merge_bytes(tok_data, s, n, t, trie, bnd, rk)
        if parts == 2:  # then the pair (rank t) is the only one left: BPE makes t
            status[t] = STATUS_OK
            split_l[t] = _lookup(tok_data, s, s + bnd[1], trie_slots, node_tok)
            split_r[t] = _lookup(tok_data, s + bnd[1], s + n, trie_slots, node_tok)
            n_ok += 1
        elif _merge_bytes(tok_data, s, n, n_tok, trie, bnd, rk) == 1:
            status[t] = STATUS_OUT_OF_ORDER  # made, but only through a higher rank
        else:
            status[t] = STATUS_UNREACHABLE
    node_use = node_tok.copy()
    for v in range(node_use.shape[0]):
        t = node_use[v]
        if t >= 0 and status[t] != STATUS_OK and status[t] != STATUS_BASE:
            node_use[v] = -1
    next_prefix = np.full(n_tok, -1, dtype=np.int32)
    for t in range(n_tok):
        s = tok_off[t]
        node = 0
        best = -1
        for p in range(s, s + tok_len[t] - 1):
            node = _step(node, tok_data[p], trie_slots)
            if node_use[node] >= 0:
                best = node_use[node]
        next_prefix[t] = best
    cap = 2
    while cap < 2 * n_ok:
        cap *= 2
    pair_keys = np.full(cap, -1, dtype=np.int64)
    pair_vals = np.full(cap, -1, dtype=np.int32)
    mask = cap - 1
    for t in range(n_tok):
        if status[t] == STATUS_OK:
            i = _pair_slot(split_l[t], split_r[t], mask)
            while pair_keys[i] != -1:
                i = (i + 1) & mask
            pair_keys[i] = (np.int64(split_l[t]) << 32) | np.int64(split_r[t])
            pair_vals[i] = t
    return (trie_slots, node_tok, node_use, tok_len, next_prefix, split_l, split_r, pair_keys, pair_vals, status)


# ------------------------------------------------------------------------ the encoder
@njit(cache=True, nogil=True, inline="always")
def compatible(a, b, split_l, split_r, pair_keys, pair_vals):
    """Whether BPE of the bytes of usable tokens ``a`` then ``b`` is ``[a, b]``.

    Walks the two merge histories backwards. A single-byte token was there from the start
    (time -1); a merged token appeared at the time of its rank. At each step the pair at
    the boundary is the right end of the left side and the left end of the right side; if
    it makes a token ``c`` (a split) that BPE would merge before the boundary next changed
    (``c < limit``), the concatenation does not encode to ``[a, b]``. The later-made side
    is undone first; equal ranks were made left first, so the right one is undone first,
    and a boundary pair of the same rank as a later merge on its right wins (leftmost):
    hence ``limit = rank + 1`` there.
    """
    limit = np.int64(1) << 40  # the final boundary never changes
    while True:
        c = _pair_get(a, b, pair_keys, pair_vals)
        if c >= 0 and c < limit:
            return False
        ta = -1 if split_l[a] == a else a
        tb = -1 if split_l[b] == b else b
        if ta < 0 and tb < 0:
            return True
        if ta > tb:
            limit = ta
            a = split_r[a]
        else:
            limit = tb + 1
            b = split_l[b]


#: Slots of ``encode_piece``'s memo of compatible pairs (8 bytes each: 512 KiB, in L2).
MEMO_SLOTS = 1 << 16
#: A free memo slot: its right token would be 2**31, so it is neither a pair's key
#: (``a << 32 | b``, bit 31 clear) nor an incompatible pair's mark (``~key``, negative).
MEMO_EMPTY = np.int64(1) << 31


@njit(cache=True, nogil=True)
def new_memo():
    """A fresh memo for ``encode_piece`` (valid for one set of tables)."""
    return np.full(MEMO_SLOTS, MEMO_EMPTY, dtype=np.int64)


@njit(cache=True, nogil=True, inline="always")
def _compatible_memo(a, b, split_l, split_r, pair_keys, pair_vals, memo):
    """``compatible(a, b, ...)`` through a direct-mapped memo (``new_memo``).

    A slot holds ``a << 32 | b`` of a compatible pair or its complement for an incompatible
    one, so a hit is exact (the whole pair is compared); a miss computes and overwrites.
    Adjacent token pairs repeat (CJK text: the same characters), and one probe replaces a
    walk of about three pair lookups and split reads (15 % of the backtracking's time).
    """
    key = (np.int64(a) << 32) | np.int64(b)
    i = ((key * np.int64(-7046029254386353131)) >> 40) & (memo.shape[0] - 1)
    m = memo[i]
    if m == key:
        return True
    if m == ~key:
        return False
    r = compatible(a, b, split_l, split_r, pair_keys, pair_vals)
    memo[i] = key if r else ~key
    return r


@njit(cache=True, nogil=True, inline="always")
def encode_piece(data, s, n, trie_slots, node_tok, node_use, tok_len, next_prefix, split_l, split_r, pair_keys, pair_vals,
                 alive, memo, out, o):
    """Write the ids of the piece ``data[s:s+n]`` (n >= 1) to ``out[o:o+m]``; return m.

    Parameters
    ----------
    data : uint8[k]
        The text; the caller checks ``0 <= s``, ``n >= 1``, ``s + n <= k``.
    trie_slots ... pair_vals :
        ``build_backtrack_tables``'s arrays (refused if any token is OUT_OF_ORDER).
    alive : uint8[>= n + 1]
        Scratch (its contents on entry do not matter).
    memo : int64[MEMO_SLOTS]
        ``new_memo()``, kept across the pieces encoded with the same tables.
    out : int32[>= o + n]
        Receives the ids (at most one per byte).
    o : int
        Where the ids start.

    Returns
    -------
    m : int
        The number of ids, or -1 when a byte of the piece has no token of its own (the
        caller merges that piece the ordinary way). A piece that is a token (of any status)
        is that token, tiktoken's whole-piece rule.
    """
    end = s + n
    nxt, whole = _longest(data, s, end, trie_slots, node_tok, node_use)
    if whole >= 0:
        out[o] = whole
        return 1
    if nxt < 0:
        return -1
    for i in range(n + 1):
        alive[i] = 1
    k = 0
    pos = s
    while pos < end:
        tok = nxt
        last = out[o + k - 1] if k > 0 else -1
        while True:
            stop = pos + tok_len[tok]
            if alive[stop - s] and (last < 0 or _compatible_memo(last, tok, split_l, split_r,
                                                                 pair_keys, pair_vals, memo)):
                out[o + k] = tok
                k += 1
                pos = stop
                if pos < end:
                    nxt, _ = _longest(data, pos, end, trie_slots, node_tok, node_use)
                    if nxt < 0:
                        return -1
                break
            tok = next_prefix[tok]
            if tok < 0:  # nothing fits after ``last``: no tiling goes through pos
                alive[pos - s] = 0
                if k == 0:
                    return -1  # cannot happen when the tables were accepted
                k -= 1
                pos -= tok_len[last]
                nxt = last  # retried: its end is dead now, so its shorter prefixes next
                break
    return k


@njit(cache=True, nogil=True)
def encode_pieces(data, piece_offsets, trie_slots, node_tok, node_use, tok_len, next_prefix, split_l, split_r, pair_keys,
                  pair_vals):
    """Encode every piece ``data[piece_offsets[i]:piece_offsets[i + 1]]``.

    Parameters
    ----------
    data : uint8[k]
        The text.
    piece_offsets : int64[p + 1]
        Non-decreasing, within ``0 .. k`` (checked by the caller); empty pieces give no ids.
    trie_slots ... pair_vals :
        ``build_backtrack_tables``'s arrays.

    Returns
    -------
    ids : int32[total]
        The ids of all pieces, end to end.
    id_offsets : int64[p + 1]
        Piece i's ids are ``ids[id_offsets[i]:id_offsets[i + 1]]``.
    failed : int64
        Pieces ``encode_piece`` could not encode (a byte without a token); they get no
        ids, and the caller must not use the result unless this is 0.
    """
    p = piece_offsets.shape[0] - 1
    longest = 0
    for i in range(p):
        longest = max(longest, piece_offsets[i + 1] - piece_offsets[i])
    out = np.empty(max(piece_offsets[p] - piece_offsets[0], 1), dtype=np.int32)
    alive = np.empty(longest + 1, dtype=np.uint8)
    memo = new_memo()
    id_offsets = np.zeros(p + 1, dtype=np.int64)
    o = 0
    failed = 0
    for i in range(p):
        s = piece_offsets[i]
        n = piece_offsets[i + 1] - s
        if n > 0:
            m = encode_piece(data, s, n, trie_slots, node_tok, node_use, tok_len, next_prefix, split_l, split_r,
                             pair_keys, pair_vals, alive, memo, out, o)
            if m < 0:
                failed += 1
            else:
                o += m
        id_offsets[i + 1] = o
    return out[:o].copy(), id_offsets, failed
