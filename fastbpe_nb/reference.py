"""The specification: a slow, obviously-correct pure-Python BPE trainer, encoder and decoder.

Every Numba kernel of fastbpe_nb is tested against this module. It favours clarity over
speed: training recounts every pair of every word at every merge (cost: merges x corpus),
and encoding rescans a pre-token for its best pair after every merge. Use it on small data.

The model of BPE implemented here
---------------------------------
*Symbols* are integer ids. In byte mode ids 0..255 are the bytes (id = byte value); in char
mode the base ids number the distinct base symbols (the characters of the corpus and the
optional end-of-word marker) in code-point order. Merge *k* joins two adjacent symbols into
one; its result gets the next free id, unless a token with the same bytes already exists,
in which case that id is reused (as Hugging Face ``tokenizers`` does).

Training (the compiler)
    1. Split every document at special tokens (which are dropped: they are never merged),
       pre-tokenize each segment, and count the pre-tokens ("words") in order of first
       occurrence.
    2. Repeat: count every adjacent pair of every word, weighted by the word's count
       (overlapping windows: ``aaa`` holds ``(a, a)`` twice); pick the pair with the
       highest count, breaking ties by the tie rule; rewrite every word left to right,
       replacing non-overlapping occurrences of the pair by the merged symbol.
    3. Stop after ``num_merges`` merges, when the vocabulary (base symbols + distinct
       merged tokens + special tokens) reaches ``vocab_size``, when no pair is left, or
       when the best count is below ``min_frequency``. A pair whose merged token would
       be longer than ``max_token_length`` base units (bytes, or characters in char
       mode) is never a candidate.

Tie rules (``tie_break``), among pairs with the highest count:
    ``ids``    smallest ``(left_id, right_id)`` (ids in byte-value order) — bpeasy.
    ``hf``     smallest ``(left_rank, right_rank)`` where a base byte's rank is the position
               of its GPT-2 byte-to-unicode character in code-point order and a merged
               token's rank is its id — Hugging Face ``BpeTrainer`` with a ByteLevel
               alphabet. (In char mode ``hf`` equals ``ids``.)
    ``first``  the pair whose first occurrence in the (rewritten) corpus comes first —
               minbpe and tiktoken's educational trainer.
    ``bytes``  smallest ``(left_bytes, right_bytes)``.

SuperBPE (``train_superbpe``): stage 1 is ``train`` up to a transition vocabulary size;
stage 2 pre-tokenizes the corpus again with a pattern whose pieces span words, encodes those
pieces with the stage-1 merges and continues the same loop on them. It encodes with the
stage-2 pattern.

BoundlessBPE (``train_boundless``): ordinary merges plus supermerges that join two adjacent
whole word pre-tokens (each one token already) into one superword token, the most frequent
candidate of either kind first; ``encode_boundless`` joins them after the ordinary merges.

Encoding (the interpreter): per pre-token, start from its base symbols and repeatedly merge
the adjacent pair with the lowest merge rank (the leftmost one when the same pair occurs
several times), until no adjacent pair has a rank. Nothing in the input is counted.

Decoding (a table lookup): ids to bytes, joined, then UTF-8 decoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from .pretokenize import SUPERBPE_PATTERN, WHITESPACE_WORDS_PATTERN, pattern_string

TIE_RULES = ("ids", "hf", "first", "bytes")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + n)
            n += 1
    return mapping


def hf_byte_ranks() -> list[int]:
    """``ranks[b]``: the position of byte ``b``'s GPT-2 character in code-point order."""
    chars = bytes_to_unicode()
    order = sorted(range(256), key=lambda b: ord(chars[b]))
    ranks = [0] * 256
    for rank, b in enumerate(order):
        ranks[b] = rank
    return ranks


def pretokenize(text: str, pattern: str | None, keep_gaps: bool = True) -> list[str]:
    """Pre-tokens of ``text``: the ``regex`` matches, plus (with ``keep_gaps``, as byte mode
    does) any text no match covers as its own piece. Char mode keeps only the matches."""
    source = pattern_string(pattern)
    if source is None:
        return [text] if text else []
    pieces = []
    pos = 0
    for m in regex.finditer(source, text):
        if keep_gaps and m.start() > pos:
            pieces.append(text[pos : m.start()])
        if m.end() > m.start():
            pieces.append(m.group())
        pos = m.end()
    if keep_gaps and pos < len(text):
        pieces.append(text[pos:])
    return pieces


def split_special_tokens(text: str, special_tokens) -> list[tuple[str, bool]]:
    """Cut ``text`` at special tokens (the longest one wins at a position, leftmost first)."""
    specials = sorted(special_tokens, key=len, reverse=True)
    out = []
    pos = start = 0
    while pos < len(text):
        hit = next((s for s in specials if s and text.startswith(s, pos)), None)
        if hit is None:
            pos += 1
            continue
        if pos > start:
            out.append((text[start:pos], False))
        out.append((hit, True))
        pos += len(hit)
        start = pos
    if start < len(text):
        out.append((text[start:], False))
    return out


def count_words(texts, pattern, special_tokens=(), keep_gaps=True) -> dict[str, int]:
    """Pre-token counts over ``texts``, in order of first occurrence (special tokens dropped)."""
    counts: dict[str, int] = {}
    for text in texts:
        for segment, is_special in split_special_tokens(text, special_tokens):
            if is_special:
                continue
            for piece in pretokenize(segment, pattern, keep_gaps):
                counts[piece] = counts.get(piece, 0) + 1
    return counts


@dataclass
class ReferenceModel:
    """A trained (or given) BPE model, in the plainest form."""

    base: str  # "bytes" or "chars"
    alphabet: list[str]  # char mode: base symbol strings by id; byte mode: empty
    end_of_word: str | None
    pattern: str | None
    merges: list[tuple[int, int]]  # rank order
    merge_ids: list[int]  # id produced by each merge
    merge_counts: list[int]  # count of the pair when it was merged (training only)
    token_bytes: list[bytes]  # id -> bytes, base symbols and merged tokens
    special_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes) + len(self.special_tokens)


def _base_symbols(words: dict[str, int], base: str, end_of_word: str | None):
    """Base alphabet, per-word symbol lists, and token bytes of the base ids."""
    if base == "bytes":
        token_bytes = [bytes([b]) for b in range(256)]
        seqs = [list(w.encode("utf-8")) for w in words]
        return [], seqs, token_bytes
    if base != "chars":
        raise ValueError(f"base must be 'bytes' or 'chars', not {base!r}")
    symbols = set()
    for w in words:
        symbols.update(w)
    if end_of_word is not None:
        if any(end_of_word in w for w in words):
            raise ValueError(f"the end_of_word marker {end_of_word!r} occurs in the training words")
        symbols.add(end_of_word)
    alphabet = sorted(symbols)
    index = {s: i for i, s in enumerate(alphabet)}
    seqs = []
    for w in words:
        seq = [index[c] for c in w]
        if end_of_word is not None:
            seq.append(index[end_of_word])
        seqs.append(seq)
    return alphabet, seqs, [s.encode("utf-8") for s in alphabet]


def _merge_word(seq: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace the non-overlapping occurrences of ``pair`` in ``seq``, left to right."""
    out = []
    i = 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def pair_tie_key(pair, tie_break, token_bytes, hf_rank=None):
    """What orders pairs of equal count (smallest first) under ``tie_break``: the ids
    (``"ids"``; ``"hf"`` with bytes ranked as Hugging Face's byte-level alphabet when
    ``hf_rank`` is given) or the tokens' bytes (``"bytes"``). ``"first"`` is handled by
    the callers (order of first occurrence)."""
    a, b = pair
    if tie_break == "ids":
        return (a, b)
    if tie_break == "hf":
        if hf_rank is None:
            return (a, b)
        return (hf_rank[a] if a < 256 else a, hf_rank[b] if b < 256 else b)
    return (token_bytes[a], token_bytes[b])  # "bytes"


def train(
    texts=None,
    *,
    words: dict[str, int] | None = None,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    pattern: str | None = "gpt2",
    special_tokens=(),
    tie_break: str = "ids",
    base: str = "bytes",
    end_of_word: str | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    merge_batch: int = 1,
) -> ReferenceModel:
    """Train BPE the slow, obvious way. See the module docstring for the exact rules.
    ``merge_batch`` > 1: BatchBPE's passes (``_learn``), not exact BPE.

    Give either ``texts`` (documents, pre-tokenized with ``pattern``; in char mode the
    default pattern is whitespace-separated words) or ``words`` (a ``{word: count}`` dict,
    taken as given, in first-occurrence order).
    """
    if tie_break not in TIE_RULES:
        raise ValueError(f"tie_break must be one of {TIE_RULES}, not {tie_break!r}")
    if vocab_size is None and num_merges is None:
        raise ValueError("give vocab_size or num_merges")
    special_tokens = list(dict.fromkeys(special_tokens))
    if words is None:
        if pattern == "default":
            pattern = "gpt2" if base == "bytes" else WHITESPACE_WORDS_PATTERN
        words = count_words(texts, pattern, special_tokens, keep_gaps=base == "bytes")
    alphabet, seqs, token_bytes = _base_symbols(words, base, end_of_word)
    counts = list(words.values())
    # Length of each token in base units (bytes, or base symbols in char mode).
    units = [1] * len(token_bytes)
    merges, merge_ids, merge_counts = _learn(
        seqs, counts, token_bytes, units, tie_break=tie_break, hf=base == "bytes",
        num_merges=num_merges, vocab_size=vocab_size, n_special=len(special_tokens),
        min_frequency=min_frequency, max_token_length=max_token_length, merge_batch=merge_batch)

    first_special = len(token_bytes)
    return ReferenceModel(
        base=base,
        alphabet=alphabet,
        end_of_word=end_of_word,
        pattern=pattern,
        merges=merges,
        merge_ids=merge_ids,
        merge_counts=merge_counts,
        token_bytes=token_bytes,
        special_tokens={s: first_special + i for i, s in enumerate(special_tokens)},
    )


def _learn(seqs, counts, token_bytes, units, *, tie_break, hf, num_merges, vocab_size,
           n_special, min_frequency, max_token_length, merge_batch=1):
    """The merge loop on words ``seqs`` (symbol lists) with ``counts``; ``token_bytes`` and
    ``units`` (each token's bytes and length in base units) grow as tokens are made.
    ``num_merges`` counts the merges of this call. Returns (merges, merge_ids, counts).

    ``merge_batch=k`` (BatchBPE): each pass takes the ``m = min(k, merges left, ids left)``
    best pairs (count, then the tie rule) and merges those that cannot interfere with a
    better one of them: a pair ``(a, b)`` is skipped when a better candidate ends with
    ``a`` or starts with ``b``. The chosen pairs' occurrences are disjoint and merging one
    changes no other's count, so they are merged one after another, in order."""
    id_of_bytes = {b: i for i, b in enumerate(token_bytes)}
    hf_rank = hf_byte_ranks() if hf else None

    def tie_key(pair):
        return pair_tie_key(pair, tie_break, token_bytes, hf_rank)

    merges, merge_ids, merge_counts = [], [], []
    while True:
        if num_merges is not None and len(merges) >= num_merges:
            break
        if vocab_size is not None and len(token_bytes) + n_special >= vocab_size:
            break
        # Pair counts in order of first occurrence (dicts keep insertion order).
        stats: dict[tuple[int, int], int] = {}
        for seq, count in zip(seqs, counts):
            for pair in zip(seq, seq[1:]):
                if max_token_length is not None and units[pair[0]] + units[pair[1]] > max_token_length:
                    continue
                stats[pair] = stats.get(pair, 0) + count
        if not stats:
            break
        best_count = max(stats.values())
        if best_count < max(min_frequency, 1):
            break
        if merge_batch == 1:
            tied = [pair for pair, c in stats.items() if c == best_count]
            chosen = [tied[0] if tie_break == "first" else min(tied, key=tie_key)]
        else:
            chosen = _batch(stats, merge_batch, num_merges, vocab_size, len(merges),
                            len(token_bytes) + n_special, min_frequency, tie_break, tie_key)
        for pair in chosen:
            new_bytes = token_bytes[pair[0]] + token_bytes[pair[1]]
            new_id = id_of_bytes.get(new_bytes)
            if new_id is None:
                new_id = len(token_bytes)
                token_bytes.append(new_bytes)
                units.append(units[pair[0]] + units[pair[1]])
                id_of_bytes[new_bytes] = new_id
            merges.append(pair)
            merge_ids.append(new_id)
            merge_counts.append(stats[pair])
            seqs = [_merge_word(seq, pair, new_id) for seq in seqs]
    return merges, merge_ids, merge_counts


def _batch(stats, k, num_merges, vocab_size, n_merges, n_ids, min_frequency, tie_break,
           tie_key):
    """BatchBPE's pairs of one pass (see ``_learn``), in order."""
    m = k
    if num_merges is not None:
        m = min(m, num_merges - n_merges)
    if vocab_size is not None:
        m = min(m, vocab_size - n_ids)
    order = list(enumerate(stats.items()))  # (first-occurrence index, (pair, count))
    if tie_break == "first":
        order.sort(key=lambda e: (-e[1][1], e[0]))
    else:
        order.sort(key=lambda e: (-e[1][1], tie_key(e[1][0])))
    top = [pair for _, (pair, c) in order[:m] if c >= max(min_frequency, 1)]
    chosen = []
    for i, (a, b) in enumerate(top):
        if not any(d == a or c == b for c, d in top[:i]):
            chosen.append((a, b))
    return chosen


def train_superbpe(
    texts,
    *,
    transition: int,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    pattern: str | None = "gpt2",
    superbpe_pattern: str | None = SUPERBPE_PATTERN,
    special_tokens=(),
    tie_break: str = "ids",
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> ReferenceModel:
    """SuperBPE (Liu et al. 2025), the slow, obvious way: a two-stage curriculum.

    Stage 1 is ``train`` with ``pattern`` up to the vocabulary size ``transition`` (which
    counts the special tokens, as ``vocab_size`` does). Stage 2 pre-tokenizes the same
    texts with ``superbpe_pattern`` (pieces that span words), encodes each stage-2 word with
    the stage-1 merges (``encode_symbols``) and continues the same merge loop on those
    sequences: new ids follow the stage-1 tokens, a merge whose bytes exist reuses that id,
    the tie rule and ``max_token_length`` (bytes) are those of stage 1. ``num_merges``
    counts the merges of both stages. The model encodes with ``superbpe_pattern``.
    """
    if vocab_size is not None and transition > vocab_size:
        raise ValueError(f"transition {transition} is above vocab_size {vocab_size}")
    special_tokens = list(dict.fromkeys(special_tokens))
    stage1 = train(texts, vocab_size=transition, num_merges=num_merges, pattern=pattern,
                   special_tokens=special_tokens, tie_break=tie_break,
                   min_frequency=min_frequency, max_token_length=max_token_length)
    words = count_words(texts, superbpe_pattern, special_tokens)
    seqs = [encode_symbols(list(w.encode("utf-8")), stage1) for w in words]
    token_bytes = list(stage1.token_bytes)
    units = [len(b) for b in token_bytes]  # byte mode: a token's length is its bytes
    merges, merge_ids, merge_counts = _learn(
        seqs, list(words.values()), token_bytes, units, tie_break=tie_break, hf=True,
        num_merges=None if num_merges is None else num_merges - len(stage1.merges),
        vocab_size=vocab_size, n_special=len(special_tokens), min_frequency=min_frequency,
        max_token_length=max_token_length)
    first_special = len(token_bytes)
    return ReferenceModel(
        base="bytes", alphabet=[], end_of_word=None, pattern=superbpe_pattern,
        merges=stage1.merges + merges, merge_ids=stage1.merge_ids + merge_ids,
        merge_counts=stage1.merge_counts + merge_counts, token_bytes=token_bytes,
        special_tokens={s: first_special + i for i, s in enumerate(special_tokens)},
    )


def model_from_merges(merges, *, base="bytes", alphabet=(), end_of_word=None, pattern="gpt2",
                      special_tokens=()) -> ReferenceModel:
    """A model from explicit merges (id pairs in rank order), deriving the vocabulary."""
    if base == "bytes":
        token_bytes = [bytes([b]) for b in range(256)]
    else:
        token_bytes = [s.encode("utf-8") for s in alphabet]
    id_of_bytes = {b: i for i, b in enumerate(token_bytes)}
    merge_ids = []
    for a, b in merges:
        new_bytes = token_bytes[a] + token_bytes[b]
        new_id = id_of_bytes.get(new_bytes)
        if new_id is None:
            new_id = len(token_bytes)
            token_bytes.append(new_bytes)
            id_of_bytes[new_bytes] = new_id
        merge_ids.append(new_id)
    first_special = len(token_bytes)
    return ReferenceModel(
        base=base, alphabet=list(alphabet), end_of_word=end_of_word, pattern=pattern,
        merges=[tuple(m) for m in merges], merge_ids=merge_ids, merge_counts=[],
        token_bytes=token_bytes,
        special_tokens={s: first_special + i for i, s in enumerate(special_tokens)},
    )


def encode_symbols(symbols: list[int], model: ReferenceModel) -> list[int]:
    """Replay the merges on one pre-token: lowest rank first, leftmost on equal rank."""
    ranks: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, (pair, new_id) in enumerate(zip(model.merges, model.merge_ids)):
        ranks.setdefault(tuple(pair), (rank, new_id))
    seq = list(symbols)
    while len(seq) >= 2:
        best = None  # (rank, position, new id)
        for i in range(len(seq) - 1):
            hit = ranks.get((seq[i], seq[i + 1]))
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], i, hit[1])
        if best is None:
            break
        _, i, new_id = best
        seq[i : i + 2] = [new_id]
    return seq


def piece_symbols(piece: str, model: ReferenceModel) -> list[int]:
    """Base symbols of one pre-token (char mode appends the end-of-word marker)."""
    if model.base == "bytes":
        return list(piece.encode("utf-8"))
    index = {s: i for i, s in enumerate(model.alphabet)}
    seq = [index[c] for c in piece]  # KeyError: an unseen character has no id
    if model.end_of_word is not None:
        seq.append(index[model.end_of_word])
    return seq


def encode(text: str, model: ReferenceModel, allowed_special=()) -> list[int]:
    """Encode ``text``: split at the allowed special tokens, pre-tokenize, merge each piece."""
    pattern = model.pattern
    if pattern == "default":
        pattern = "gpt2" if model.base == "bytes" else WHITESPACE_WORDS_PATTERN
    if allowed_special == "all":
        allowed_special = list(model.special_tokens)
    ids = []
    for segment, is_special in split_special_tokens(text, allowed_special):
        if is_special:
            ids.append(model.special_tokens[segment])
            continue
        for piece in pretokenize(segment, pattern, keep_gaps=model.base == "bytes"):
            ids.extend(encode_symbols(piece_symbols(piece, model), model))
    return ids


def decode_bytes(ids, model: ReferenceModel) -> bytes:
    """Join the bytes of the tokens (special tokens decode to their text)."""
    specials = {i: s.encode("utf-8") for s, i in model.special_tokens.items()}
    return b"".join(specials[i] if i in specials else model.token_bytes[i] for i in ids)


# --------------------------------------------------------------------------- BoundlessBPE

#: A pre-token that may take part in a supermerge (BoundlessBPE): an optional leading space
#: and one or more letters, nothing else (no digits, punctuation, newlines, other spaces).
BOUNDLESS_WORD = r" ?\p{L}+"
_BOUNDLESS_WORD = regex.compile(BOUNDLESS_WORD)


def is_boundless_word(piece: str) -> bool:
    """Whether a pre-token may be one half of a superword (``BOUNDLESS_WORD``)."""
    return _BOUNDLESS_WORD.fullmatch(piece) is not None


@dataclass
class BoundlessReferenceModel(ReferenceModel):
    """A BoundlessBPE model: ``superword[k]`` says merge ``k`` is a supermerge (it joins two
    whole pre-tokens); the other merges are ordinary ones (inside a pre-token)."""

    superword: list[bool] = field(default_factory=list)


def train_boundless(
    texts,
    *,
    vocab_size: int | None = None,
    num_merges: int | None = None,
    pattern: str | None = "gpt2",
    special_tokens=(),
    tie_break: str = "ids",
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> BoundlessReferenceModel:
    """BoundlessBPE (Schmidt et al. 2025, arXiv 2504.00178), the slow, obvious way; byte mode.

    Two kinds of candidates are counted at every step:

    * ordinary pairs: adjacent symbols inside a pre-token, counted over the word table
      exactly as ``train`` counts them;
    * supermerge pairs: two adjacent pre-tokens of one document segment (special tokens cut
      segments) that are both ``BOUNDLESS_WORD`` pre-tokens, both merged into one token
      each, and neither already part of a superword. Its key is the two tokens' ids; its
      count is the number of such adjacent positions (overlapping: ``A A A`` holds two).

    The candidate with the highest count is merged; on equal counts an ordinary pair goes
    before a supermerge, ordinary pairs among themselves follow the tie rule as in
    ``train``, and supermerges among themselves follow it on their token pair, except
    ``first``, where the supermerge whose pre-token pair first occurs in the original
    corpus goes first. A supermerge makes a token of the two tokens' bytes (the next id; a
    superword is never an existing token) and joins the pair's positions left to right,
    non-overlapping; a joined pre-token never joins again (a superword is exactly two
    pre-tokens). ``max_token_length`` (bytes) and ``min_frequency`` apply to both kinds;
    ``vocab_size`` and ``num_merges`` count both.
    """
    if tie_break not in TIE_RULES:
        raise ValueError(f"tie_break must be one of {TIE_RULES}, not {tie_break!r}")
    if vocab_size is None and num_merges is None:
        raise ValueError("give vocab_size or num_merges")
    special_tokens = list(dict.fromkeys(special_tokens))
    texts = list(texts)
    words = count_words(texts, pattern, special_tokens)
    word_list = list(words)
    index = {w: i for i, w in enumerate(word_list)}
    seqs = [list(w.encode("utf-8")) for w in word_list]
    counts = list(words.values())
    word_like = [is_boundless_word(w) for w in word_list]
    word_len = [len(w.encode("utf-8")) for w in word_list]
    docs = []  # each segment of the corpus as word indices
    for text in texts:
        for segment, is_special in split_special_tokens(text, special_tokens):
            if not is_special:
                docs.append([index[p] for p in pretokenize(segment, pattern)])
    joined = [[False] * len(d) for d in docs]
    pair_first: dict[tuple[int, int], int] = {}  # word pair -> order of first occurrence
    for d in docs:
        for a, b in zip(d, d[1:]):
            if word_like[a] and word_like[b]:
                pair_first.setdefault((a, b), len(pair_first))

    token_bytes = [bytes([b]) for b in range(256)]
    id_of_bytes = {b: i for i, b in enumerate(token_bytes)}
    hf_rank = hf_byte_ranks()

    def tie_key(pair):
        return pair_tie_key(pair, tie_break, token_bytes, hf_rank)

    merges, merge_ids, merge_counts, superword = [], [], [], []
    n_special = len(special_tokens)
    while True:
        if num_merges is not None and len(merges) >= num_merges:
            break
        if vocab_size is not None and len(token_bytes) + n_special >= vocab_size:
            break
        stats: dict[tuple[int, int], int] = {}
        for seq, count in zip(seqs, counts):
            for a, b in zip(seq, seq[1:]):
                if (max_token_length is not None
                        and len(token_bytes[a]) + len(token_bytes[b]) > max_token_length):
                    continue
                pair = (a, b)
                stats[pair] = stats.get(pair, 0) + count
        super_stats: dict[tuple[int, int], int] = {}
        super_words: dict[tuple[int, int], tuple[int, int]] = {}
        for d, j in zip(docs, joined):
            for i in range(len(d) - 1):
                a, b = d[i], d[i + 1]
                if j[i] or j[i + 1] or not (word_like[a] and word_like[b]):
                    continue
                if len(seqs[a]) != 1 or len(seqs[b]) != 1:
                    continue
                if max_token_length is not None and word_len[a] + word_len[b] > max_token_length:
                    continue
                key = (seqs[a][0], seqs[b][0])
                super_stats[key] = super_stats.get(key, 0) + 1
                super_words[key] = (a, b)
        best_ordinary = max(stats.values(), default=0)
        best_super = max(super_stats.values(), default=0)
        best = max(best_ordinary, best_super)
        if best < max(min_frequency, 1):
            break
        if best_ordinary == best:  # ordinary pairs first on equal counts
            tied = [pair for pair, c in stats.items() if c == best]
            pair = tied[0] if tie_break == "first" else min(tied, key=tie_key)
        else:
            tied = [key for key, c in super_stats.items() if c == best]
            if tie_break == "first":
                pair = min(tied, key=lambda key: pair_first[super_words[key]])
            else:
                pair = min(tied, key=tie_key)
        new_bytes = token_bytes[pair[0]] + token_bytes[pair[1]]
        new_id = id_of_bytes.get(new_bytes)
        if new_id is None:
            new_id = len(token_bytes)
            token_bytes.append(new_bytes)
            id_of_bytes[new_bytes] = new_id
        merges.append(pair)
        merge_ids.append(new_id)
        if best_ordinary == best:
            merge_counts.append(best)
            superword.append(False)
            seqs = [_merge_word(seq, pair, new_id) for seq in seqs]
            continue
        merge_counts.append(best)
        superword.append(True)
        wa, wb = super_words[pair]
        for d, j in zip(docs, joined):
            i = 0
            while i < len(d) - 1:
                if d[i] == wa and d[i + 1] == wb and not j[i] and not j[i + 1]:
                    j[i] = j[i + 1] = True
                    i += 2
                else:
                    i += 1
    first_special = len(token_bytes)
    return BoundlessReferenceModel(
        base="bytes", alphabet=[], end_of_word=None, pattern=pattern, merges=merges,
        merge_ids=merge_ids, merge_counts=merge_counts, token_bytes=token_bytes,
        special_tokens={s: first_special + i for i, s in enumerate(special_tokens)},
        superword=superword)


def encode_boundless(text: str, model: BoundlessReferenceModel, allowed_special=()) -> list[int]:
    """Encode ``text`` with a BoundlessBPE model.

    Each segment between allowed special tokens is pre-tokenized; each pre-token is encoded
    with the ordinary merges alone (``encode_symbols``). A pre-token is then *joinable* when
    it is a ``BOUNDLESS_WORD`` and became one token. Second pass, over the segment's
    pre-tokens: among adjacent pairs of joinable pre-tokens, neither joined yet, whose token
    pair is a supermerge, join the one of lowest supermerge rank (the leftmost on equal
    rank) into the supermerge's token; repeat until no such pair is left.
    """
    keep = [not s for s in model.superword]
    ordinary = ReferenceModel(
        base="bytes", alphabet=[], end_of_word=None, pattern=model.pattern,
        merges=[m for m, k in zip(model.merges, keep) if k],
        merge_ids=[i for i, k in zip(model.merge_ids, keep) if k], merge_counts=[],
        token_bytes=model.token_bytes)
    super_rank: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, (pair, new_id, s) in enumerate(zip(model.merges, model.merge_ids, model.superword)):
        if s:
            super_rank.setdefault(tuple(pair), (rank, new_id))
    if allowed_special == "all":
        allowed_special = list(model.special_tokens)
    ids = []
    for segment, is_special in split_special_tokens(text, allowed_special):
        if is_special:
            ids.append(model.special_tokens[segment])
            continue
        pieces = pretokenize(segment, model.pattern)
        units = [encode_symbols(list(p.encode("utf-8")), ordinary) for p in pieces]
        joinable = [len(u) == 1 and is_boundless_word(p) for u, p in zip(units, pieces)]
        while True:
            best = None  # (rank, position, new id)
            for i in range(len(units) - 1):
                if not (joinable[i] and joinable[i + 1]):
                    continue
                hit = super_rank.get((units[i][0], units[i + 1][0]))
                if hit is not None and (best is None or hit[0] < best[0]):
                    best = (hit[0], i, hit[1])
            if best is None:
                break
            _, i, new_id = best
            units[i], units[i + 1] = [new_id], []
            joinable[i] = joinable[i + 1] = False
        for u in units:
            ids.extend(u)
    return ids


# ---------------------------------------------------------------------- vocabulary pruning
# Pruning after training (docs/variants.md, "Vocabulary pruning"): LiteToken (arXiv
# 2602.04706), Picky BPE (arXiv 2409.04599) and Scaffold-BPE (arXiv 2404.17808) remove the
# intermediate tokens the final encoder almost never outputs. Here:
#
# * every merge is still replayed by rank (the encoder is unchanged, exact BPE); each
#   removed token in its output is then *demolished* into the two parts of the lowest-rank
#   merge that makes it, recursively, until only kept tokens remain;
# * the kept regular tokens are renumbered in id order (compact ids), the special tokens
#   follow them, each moved down by the number of removed tokens.


def token_parts(model: ReferenceModel) -> dict[int, tuple[int, int]]:
    """``{id: (left, right)}``: the parts of each merged token, from the lowest-rank merge
    that makes it (a later merge that makes the same bytes again reuses the id). A base
    symbol has no parts, even when a merge makes its bytes (char mode: ``</w>``)."""
    parts: dict[int, tuple[int, int]] = {}
    n_base = _n_base(model)
    for pair, new_id in zip(model.merges, model.merge_ids):
        if new_id >= n_base:
            parts.setdefault(new_id, tuple(pair))
    return parts


def _n_base(model: ReferenceModel) -> int:
    return 256 if model.base == "bytes" else len(model.alphabet)


def pruning_words(texts, model: ReferenceModel, special_tokens=()) -> dict[str, int]:
    """The pre-token counts pruning measures (those training counts); a dict is taken as
    given."""
    if isinstance(texts, dict):
        return dict(texts)
    pattern = model.pattern
    if pattern == "default":
        pattern = "gpt2" if model.base == "bytes" else WHITESPACE_WORDS_PATTERN
    return count_words(texts, pattern, special_tokens, keep_gaps=model.base == "bytes")


def prune_counts(model: ReferenceModel, words: dict[str, int]):
    """``(final, total)``, two lists indexed by regular id.

    ``final[t]``: how often the full encoder *outputs* ``t`` on ``words`` (each word
    encoded once, weighted by its count). ``total[t]``: how often ``t`` occurs as a node of
    the construction trees (``token_parts``, recursively) of those output tokens -- itself
    included, so ``total[t] >= final[t]``, and ``total[t] - final[t]`` is how often it was
    made only to become part of a larger token."""
    n = len(model.token_bytes)
    final = [0] * n
    for word, count in words.items():
        for t in encode_symbols(piece_symbols(word, model), model):
            final[t] += count
    parts = token_parts(model)
    total = list(final)
    for t in range(n - 1, -1, -1):  # a token's parts have smaller ids than the token
        if t in parts and total[t]:
            a, b = parts[t]
            total[a] += total[t]
            total[b] += total[t]
    return final, total


def prune_select(model: ReferenceModel, words: dict[str, int], min_count=None,
                 ratio=None) -> list[int]:
    """The merged tokens to remove (ids, ascending), one pass over ``prune_counts``:

    ``t`` is removed when ``final[t] < min_count`` (absolute, LiteToken-style) or, Picky
    BPE-style, when ``final[t] < ratio * total[t]`` -- less than that share of its
    occurrences is the token on its own (Picky's intersection-over-self is the other
    share); a token that never occurs (``total[t] == 0``) has share 0. Base symbols and
    special tokens are never removed."""
    final, total = prune_counts(model, words)
    n_base = _n_base(model)
    removed = []
    for t in range(n_base, len(model.token_bytes)):
        if (min_count is not None and final[t] < min_count) or (
                ratio is not None and final[t] < ratio * total[t]):
            removed.append(t)
    return removed


def demolish(ids, model: ReferenceModel, removed) -> list[int]:
    """Replace every removed token of ``ids`` (unpruned numbering) by its parts,
    recursively, until only kept tokens remain (special ids pass through)."""
    parts = token_parts(model)
    removed = set(removed)
    out: list[int] = []

    def put(t):
        if t in removed:
            a, b = parts[t]
            put(a)
            put(b)
        else:
            out.append(t)

    for t in ids:
        put(t)
    return out


def compact_ids(model: ReferenceModel, removed) -> dict[int, int]:
    """``{unpruned id: compact id}`` of the kept regular tokens and the special tokens."""
    removed = set(removed)
    kept = [t for t in range(len(model.token_bytes)) if t not in removed]
    mapping = {t: i for i, t in enumerate(kept)}
    for tid in model.special_tokens.values():
        mapping[tid] = tid - len(removed)
    return mapping


def encode_pruned(text: str, model: ReferenceModel, removed, allowed_special=()) -> list[int]:
    """Encode ``text`` with the pruned tokenizer: the full encoder, then ``demolish``,
    then the compact ids."""
    mapping = compact_ids(model, removed)
    return [mapping[t] for t in demolish(encode(text, model, allowed_special), model, removed)]


def decode_pruned(ids, model: ReferenceModel, removed) -> bytes:
    """The bytes of compact ``ids``."""
    back = {c: t for t, c in compact_ids(model, removed).items()}
    return decode_bytes([back[i] for i in ids], model)
