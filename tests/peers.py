"""Helpers that run the peer libraries on the same input as fastbpe_nb (no tests here).

The peers are Hugging Face ``tokenizers`` (training with ``tie_break="hf"``, and encoding),
``bpeasy`` (training with ``tie_break="ids"``) and ``tiktoken`` (encoding). Every helper
returns plain Python data (byte strings, ids) so tests can compare them with
``fastbpe_nb.reference`` and ``fastbpe_nb.train`` directly.

Peer conventions, as found by reading their sources and checking them here
(tokenizers 0.23.3, bpeasy 0.1.6, tiktoken 0.14.0)
-----------------------------------------------------------------------------------------

Hugging Face ``tokenizers`` ``BpeTrainer`` (with a ``ByteLevel`` pre-tokenizer)

* Words are strings of GPT-2 byte-to-unicode characters (one character per byte).
* Ids: the special tokens first, then the alphabet (``initial_alphabet`` plus every character
  of the words) *sorted by character*, i.e. by the code point of each byte's GPT-2 character,
  then the merged tokens. With ``special_tokens=[]`` and the full ByteLevel alphabet the 256
  bytes take ids 0..255 in that order -- which is exactly the ``hf`` tie rule's base rank
  (``reference.hf_byte_ranks()``); merged tokens take the following ids.
* ``vocab_size`` counts specials + alphabet + distinct merged tokens; training stops when
  ``len(vocab) >= vocab_size`` (ours: same rule).
* Ties: a max-heap on ``(count, reverse(pair))``, i.e. among equal counts the smallest
  ``(left_id, right_id)`` in HF's own numbering -- the ``hf`` rule.
* A merge whose result already exists in the vocabulary *reuses* that id (the vocabulary does
  not grow; the merge is still recorded). ``tokenizer.to_str()`` lists merges as
  ``"a b"`` strings (older versions) or ``["a", "b"]`` lists (newer, e.g. 0.23).
* Pair counts are ``i32`` in the trainer (overflow above 2**31 weighted occurrences: not an
  issue at test sizes).
* ``max_token_length=N`` is strict in the incremental update (``left.len + right.len < N``
  in ``Word::merge``; lengths are ByteLevel characters = bytes), and the *initial* byte pairs
  are counted without any length check. So HF ``N`` == our ``N - 1`` for ``N >= 3``; HF ``N=2``
  still lets byte pairs merge (ours ``max_token_length=1`` allows no merge at all).
* ``min_frequency``: stops when the best count ``< min_frequency`` (same as ours).
* Known weakness (HF, not ours): the lazy heap keeps each pair's word set (``pos``) per push;
  after a merge whose result *reuses* an existing id, a pair of that id can have two heap
  entries with different word sets, and merging applies only to the set of the entry popped.
  So after a duplicate-result merge HF's training may diverge from the exact algorithm.
* The pattern goes through Oniguruma (``tokenizers.Regex``) and ``Split(behavior="isolated")``:
  uncovered text becomes its own piece (same as ``fastbpe_nb.pretokenize.split``).
  Oniguruma accepts all three named patterns (possessive ``?+``, ``++``, ``*+``, ``\\p{..}``),
  BUT in Oniguruma's Ruby syntax ``{n,m}+`` is *not* possessive: it is ``(?:x{n,m})+``. So
  cl100k's ``\\p{N}{1,3}+`` matches a whole digit run in HF (``"123456"`` is one piece)
  while Python ``regex``/tiktoken/bpeasy cut it in threes. :func:`hf_pattern` rewrites
  ``{1,3}+`` to the equivalent greedy ``{1,3}`` (possessiveness is moot there: nothing
  follows inside the alternative) so HF pre-tokenizes cl100k like the ``regex`` module.

bpeasy ``train_bpe(iterator, python_regex, max_token_length, vocab_size)``

* Returns ``{token_bytes: rank}``: ranks 0..255 are the bytes (id = byte value; very old
  versions only had 0..254), merge *k* gets rank 256+k. ``vocab_size`` counts the 256 bytes +
  the merged tokens (no special tokens).
* Ties: a max-heap on ``(count, reverse(pair))`` over pair ids = bytes in byte-value order,
  then merge ids -- the ``ids`` rule.
* ``max_token_length=N``: like HF, strict ``<`` in the incremental update and no check on the
  initial byte pairs; ``N < 2`` is rejected. bpeasy ``N`` == our ``N - 1`` for ``N >= 3``.
* Pre-tokenization: ``fancy_regex`` ``find_iter``; uncovered text is *dropped* (irrelevant for
  the named patterns, which cover all text). ``fancy_regex`` treats ``{1,3}+`` as possessive.
* A merge whose result already exists: bpeasy gives it ``rank = len(vocab)`` and overwrites
  the existing token's rank with it, without growing the vocabulary -- so the *next* merge
  gets the same rank again: two different tokens share one id in its training state and in
  the returned dict (one rank value is then missing and another appears twice). Training
  after that point is no longer the exact algorithm. :func:`bpeasy_train` raises
  :class:`BpeasyDuplicate` when the returned ranks show this, so tests can tell it apart.
* Printing: the Rust code may print progress lines to stdout.

Duplicate-result merges in practice: the two weaknesses above are read from the peers'
sources and could not be triggered: 3,000 random tie-heavy word tables (alphabets of 2-3
letters, trained to exhaustion, with and without max_token_length) and real corpora up to
3 MB / 20,000 tokens never produced a merge whose result already existed, so the id-reuse
rule of docs/semantics.md, "Training" (shared with HF) has not been exercised against a peer.

tiktoken ``Encoding(name, pat_str, mergeable_ranks, special_tokens)``

* Encoding is *rank-keyed*: in each pre-token it repeatedly joins the adjacent pair whose
  *concatenated bytes* has the lowest rank in ``mergeable_ranks`` (leftmost on ties).
  fastbpe_nb and HF are *pair-keyed* (the rank of the merge ``(a, b)``). The two agree when
  every token's rank is the rank of the merge that created it and that merge is the only
  way the token can be formed first -- true for a vocabulary trained by BPE whose merges
  created each token once (no duplicate-result merges): any adjacent pair of tokens whose
  concatenation ``t`` is in the vocabulary, at the moment the rank-keyed encoder looks at
  it, is the pair training merged into ``t``. (When a vocabulary has a token that can be
  produced by two different merges, or a merge whose parts are not themselves reachable,
  the two can legitimately differ.)
* ``pat_str`` is compiled by ``fancy_regex`` (``{1,3}+`` possessive, like Python ``regex``).
* ``mergeable_ranks`` must cover the 256 single bytes. Special tokens' ids must not collide
  with ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from fastbpe_nb.pretokenize import NAMED_PATTERNS
from fastbpe_nb.reference import bytes_to_unicode

#: GPT-2 byte -> printable character, and back.
BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}


class BpeasyDuplicate(RuntimeError):
    """bpeasy produced a merge whose result already existed (its ranks collide)."""


def pattern_str(pattern: str) -> str:
    """The regex string of a named pattern (or the string itself)."""
    return NAMED_PATTERNS.get(pattern, pattern)


def hf_pattern(pattern: str) -> str:
    """The pattern string rewritten for Oniguruma so that it splits like ``regex``.

    Only ``{n,m}+`` (possessive interval in ``regex``/``fancy_regex``, a repeated interval in
    Oniguruma) needs care; it is replaced by the plain greedy interval, which is equivalent
    wherever it ends an alternative, as it does in cl100k.
    """
    source = pattern_str(pattern)
    return source.replace("{1,3}+", "{1,3}")


def bytes_to_hf(token: bytes) -> str:
    """A byte string as the GPT-2 byte-to-unicode string HF ByteLevel uses."""
    return "".join(BYTE_TO_CHAR[b] for b in token)


def hf_to_bytes(token: str) -> bytes:
    """A GPT-2 byte-to-unicode string back to bytes."""
    return bytes(CHAR_TO_BYTE[c] for c in token)


@contextlib.contextmanager
def _quiet_stdout():
    """Silence writes to file descriptor 1 (Rust code printing progress)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _hf_pre_tokenizer(pattern: str):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(hf_pattern(pattern)), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def hf_split(text: str, pattern: str) -> list[str]:
    """HF's pre-tokens of ``text`` (decoded back from ByteLevel characters)."""
    pieces = _hf_pre_tokenizer(pattern).pre_tokenize_str(text)
    return [hf_to_bytes(p).decode("utf-8") for p, _ in pieces]


def _hf_merges_from_json(tokenizer) -> list[tuple[str, str]]:
    model = json.loads(tokenizer.to_str())["model"]
    out = []
    for m in model["merges"]:
        if isinstance(m, str):
            a, b = m.split(" ")
        else:
            a, b = m
        out.append((a, b))
    return out


def hf_train_tokenizer(texts, vocab_size: int, pattern: str, *, min_frequency: int = 0,
                       max_token_length: int | None = None):
    """A HF ``Tokenizer`` trained by ``BpeTrainer`` with a full ByteLevel alphabet."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = _hf_pre_tokenizer(pattern)
    tok.decoder = decoders.ByteLevel()
    kwargs = dict(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
        min_frequency=min_frequency,
    )
    if max_token_length is not None:
        kwargs["max_token_length"] = max_token_length
    trainer = trainers.BpeTrainer(**kwargs)
    tok.train_from_iterator(list(texts), trainer=trainer)
    return tok


def hf_train(texts, vocab_size: int, pattern: str, *, min_frequency: int = 0,
             max_token_length: int | None = None) -> list[tuple[bytes, bytes]]:
    """HF ``BpeTrainer``'s merges, as ``(left_bytes, right_bytes)`` pairs in rank order.

    ``vocab_size`` counts the 256 bytes + distinct merged tokens (no special tokens);
    ``max_token_length`` is HF's (strict) value -- pass ours + 1.
    """
    tok = hf_train_tokenizer(texts, vocab_size, pattern, min_frequency=min_frequency,
                             max_token_length=max_token_length)
    return [(hf_to_bytes(a), hf_to_bytes(b)) for a, b in _hf_merges_from_json(tok)]


def hf_train_vocab(texts, vocab_size: int, pattern: str, **kwargs) -> dict[bytes, int]:
    """HF's trained vocabulary as ``{token_bytes: id}`` (HF numbering: bytes in char order)."""
    tok = hf_train_tokenizer(texts, vocab_size, pattern, **kwargs)
    return {hf_to_bytes(s): i for s, i in tok.get_vocab().items()}


def bpeasy_train_ranks(texts, vocab_size: int, pattern: str, max_token_length: int) -> dict[bytes, int]:
    """bpeasy's raw ``{token_bytes: rank}`` (``max_token_length`` is bpeasy's strict value)."""
    import bpeasy

    with _quiet_stdout():
        return bpeasy.train_bpe(iter(list(texts)), pattern_str(pattern), max_token_length, vocab_size)


def bpeasy_train(texts, vocab_size: int, pattern: str, max_token_length: int) -> list[bytes]:
    """bpeasy's merged tokens (rank >= 256) in rank order.

    ``max_token_length`` is bpeasy's value: a merged token must be *shorter* than it (so our
    ``max_token_length=N`` is bpeasy's ``N + 1``; pass a big number, e.g. 10**6, for no
    limit). Raises :class:`BpeasyDuplicate` when bpeasy merged a pair whose result already
    existed (its returned ranks then collide and the rest of its training is not exact BPE).
    """
    ranks = bpeasy_train_ranks(texts, vocab_size, pattern, max_token_length)
    values = sorted(ranks.values())
    if values != list(range(len(values))):
        raise BpeasyDuplicate(
            f"bpeasy ranks are not 0..{len(values) - 1}: a merge re-created an existing token"
        )
    for b in range(256):
        if ranks.get(bytes([b])) != b:
            raise AssertionError(f"bpeasy: byte {b} does not have rank {b}")
    return [t for t, r in sorted(ranks.items(), key=lambda kv: kv[1]) if r >= 256]


def tiktoken_encoding(vocab: list[bytes], pattern: str, special_tokens: dict[str, int] | None = None,
                      name: str = "fastbpe_nb_peer"):
    """A ``tiktoken.Encoding`` whose ranks are our ids (``mergeable_ranks = {bytes: id}``).

    ``vocab`` is id -> bytes (special tokens excluded or given separately); every entry must be
    a distinct byte string. ``pattern`` is a named pattern or a regex string.
    """
    import tiktoken

    special_tokens = dict(special_tokens or {})
    special_ids = set(special_tokens.values())
    ranks: dict[bytes, int] = {}
    for i, tok in enumerate(vocab):
        if i in special_ids:
            continue
        if tok in ranks:
            raise ValueError(f"duplicate vocabulary entry {tok!r} (ids {ranks[tok]} and {i})")
        ranks[tok] = i
    return tiktoken.Encoding(
        name=name,
        pat_str=pattern_str(pattern),
        mergeable_ranks=ranks,
        special_tokens=special_tokens,
    )


def hf_tokenizer_from_merges(vocab: list[bytes], merges_bytes, pattern: str):
    """A HF ``Tokenizer(models.BPE(vocab, merges))`` with the same pre-tokenizer, for encoding.

    ``vocab``: id -> bytes (our ids are kept, so HF's ids equal ours); ``merges_bytes``:
    ``(left_bytes, right_bytes)`` pairs in rank order. HF's BPE model is pair-keyed like ours:
    each merge's result id is ``vocab[left + right]``.
    """
    from tokenizers import Tokenizer, decoders, models

    hf_vocab = {bytes_to_hf(t): i for i, t in enumerate(vocab)}
    hf_merges = [(bytes_to_hf(a), bytes_to_hf(b)) for a, b in merges_bytes]
    tok = Tokenizer(models.BPE(vocab=hf_vocab, merges=hf_merges))
    tok.pre_tokenizer = _hf_pre_tokenizer(pattern)
    tok.decoder = decoders.ByteLevel()
    return tok


def hf_encode(tokenizer, text: str) -> list[int]:
    """HF ids of ``text`` (no post-processing, no special tokens added)."""
    return tokenizer.encode(text, add_special_tokens=False).ids
