"""Writing a Hugging Face ``tokenizer.json`` (reading it is ``huggingface_format``).

Writing produces a byte-level BPE ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file``
loads and that encodes exactly like the Tokenizer it came from:

* ``model``: ``BPE`` with ``vocab`` (each token's bytes as GPT-2 byte-to-unicode characters
  -> our id) and ``merges`` in rank order. HF's BPE is pair-keyed like our ``"pairs"`` mode,
  and reuses the id of a merge result that already exists, as we do.
* ``pre_tokenizer``: ``Sequence([Split(Regex(pattern), "Isolated"), ByteLevel(use_regex=False)])``
  (just ``ByteLevel(use_regex=False)`` for ``pattern=None``). ``Isolated`` keeps text that no
  match covers as pieces of their own, like our pre-tokenizer.
* ``decoder``: ``ByteLevel``; ``added_tokens``: the special tokens (``special: true``) with
  their ids (unused ids may lie between them, as in cl100k), also listed in the vocabulary
  after the regular tokens (GPT-2's layout).
* ``normalizer``: ``{"type": "NFC"}`` / ``{"type": "NFKC"}`` for a tokenizer with
  ``normalization=``, else null. The special tokens are then ``normalized: true``, so HF,
  like us, normalizes the whole text before it looks for them; loading reads NFC / NFKC back
  (alone or as a one-step Sequence) and refuses any other normalizer by name.
"""

from __future__ import annotations

import json

from ..pretokenize import NAMED_PATTERNS
from .atomic import atomic_write
from .huggingface_format import POSSESSIVE_INTERVAL, to_hf


def hf_pattern_string(pattern: str) -> str:
    """The pattern as written into ``tokenizer.json`` (Oniguruma-safe).

    Named patterns: ``{1,3}+`` -> ``{1,3}`` (see the module docstring). Any other regex
    string is written as is, unless it uses a possessive interval ``{n,m}+``, whose meaning
    differs in Oniguruma and cannot be rewritten safely in general (ValueError).
    """
    if pattern in NAMED_PATTERNS:
        return NAMED_PATTERNS[pattern].replace("{1,3}+", "{1,3}")
    if POSSESSIVE_INTERVAL.search(pattern):
        raise ValueError(
            f"pattern {pattern!r} uses a possessive interval '{{n,m}}+', which Oniguruma (HF's "
            "regex engine) reads as a repeated interval '(?:x{n,m})+': the tokenizer.json would "
            "split differently; rewrite the pattern without it (e.g. '{n,m}' where nothing "
            "follows the interval in its alternative)")
    return pattern


def huggingface_json(tok, rank_keyed: bool = False) -> str:
    """The ``tokenizer.json`` text of ``tok`` (deterministic).

    ``rank_keyed=True`` (``save_pretrained``) also writes a ``merge_mode="ranks"`` tokenizer
    (tiktoken's rule, see ``rank_keyed_merges``); without it such a tokenizer is refused.
    """
    from .variant_exports import refuse_variants

    refuse_variants(tok, "a Hugging Face tokenizer.json")
    if tok.base != "bytes":
        raise ValueError(
            "to_huggingface writes byte-level BPE only: a char-mode tokenizer (base='chars') "
            "has no tokenizer.json equivalent here")
    ranks = tok.merge_mode == "ranks" and rank_keyed
    if tok.merge_mode != "pairs" and not ranks:
        raise ValueError(
            "to_huggingface needs merge_mode='pairs': HF's BPE merges by pair rank, while this "
            f"tokenizer uses merge_mode={tok.merge_mode!r} (tiktoken's rank-keyed rule, e.g. "
            "loaded from a .tiktoken file), which can encode differently; rebuild it with "
            "fb.Tokenizer(tok.merges, pattern=..., byte_order=tok.byte_order) if you accept "
            "pair-keyed encoding")
    vocab = tok.vocab
    n = tok.n_regular
    hf_vocab = {}
    for i in range(n):
        hf_vocab[to_hf(vocab[i])] = i
    specials = sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    for token, tid in specials:
        if token in hf_vocab:
            raise ValueError(
                f"special token {token!r} has the same text as the byte-level form of regular "
                f"token {hf_vocab[token]}: HF's vocabulary cannot hold both")
        hf_vocab[token] = tid
    if ranks:
        merges = rank_keyed_merges(vocab[:n])
    else:
        merges = [[to_hf(vocab[a]), to_hf(vocab[b])] for a, b in tok.merges.tolist()]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    if tok.pattern is None:
        pre_tokenizer = byte_level
    else:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": hf_pattern_string(tok.pattern)},
                 "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        }
    normalizer = None
    if tok.normalization is not None:
        normalizer = {"type": tok.normalization}
        _check_specials_normalize(tok, specials)
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        # With a normalizer, "normalized": true makes HF normalize the whole text before it
        # looks for the special tokens, as we do (false would look in the raw text first).
        "added_tokens": [
            {"id": tid, "content": token, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": normalizer is not None, "special": True}
            for token, tid in specials
        ],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # tiktoken's first rule: a piece that is a token is that token.
            "ignore_merges": ranks,
            "vocab": hf_vocab,
            "merges": merges,
        },
    }
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def rank_keyed_merges(tokens: list) -> list[list[str]]:
    """HF merges that make HF's pair-keyed BPE follow tiktoken's rank-keyed rule.

    tiktoken joins the adjacent pair whose *concatenation* is the lowest-ranked token; HF
    joins the listed pair of lowest list position. Listing, for every token in rank order,
    *every* split of it into two tokens (not only the merge recovered from the ranks) makes
    "a listed pair" equal "a pair whose concatenation is a token" and orders the pairs by
    their concatenation's rank, so both pick the same pair at every step (with
    ``ignore_merges``: a whole piece that is a token is that token, tiktoken's first rule).
    The one order they may still differ in is between two splits of the same token that
    overlap in one state (``[ab, aba, ba]`` for ``ababa``), where tiktoken takes the leftmost
    and HF the split listed first; only periodic tokens allow it. cl100k: 233,378 merges.
    """
    index = {t: i for i, t in enumerate(tokens)}
    merges = []
    for token in tokens:
        for k in range(1, len(token)):
            if token[:k] in index and token[k:] in index:
                merges.append([to_hf(token[:k]), to_hf(token[k:])])
    return merges


def _check_specials_normalize(tok, specials):
    """A special token that normalization changes can never be found in normalized text by
    us, while HF would normalize it too and find it: refuse such an export."""
    from ..text import normalize

    for token, tid in specials:
        if normalize(token, tok.normalization) != token:
            raise ValueError(
                f"special token {token!r} (id {tid}) is not in {tok.normalization} form: this "
                "tokenizer never matches it in normalized text, a tokenizer.json would; "
                "rename it to its normalized form")


def save_huggingface(tok, path) -> None:
    """Write ``tok`` as a Hugging Face ``tokenizer.json`` (atomically)."""
    data = huggingface_json(tok).encode("utf-8")
    with atomic_write(path) as f:
        f.write(data)


# ------------------------------------------------------------------------------ loading
