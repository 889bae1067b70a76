"""Training a SentencePiece-style BPE model with our exact BPE trainer.

Words are split where SentencePiece splits them (a ``▁`` starts a new word; with
``split_digits`` every digit is its own word; characters below ``character_coverage``
split words and are left to byte fallback), and the vocabulary is ordered as
SentencePiece's BPE trainer orders it.
"""

from __future__ import annotations

import collections
import re

import numpy as np

from .errors import TrainingError
from .io.sentencepiece_model import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED
from .merge_loop import TIE_RULES, run_merge_kernel
from .sentencepiece_normalizer import WS, SentencePieceNormalizer
from .sentencepiece_parts import byte_piece, check_str
from .sentencepiece_style import sentencepiece_tokenizer
from .tokenizer import Tokenizer
from .word_table import word_table

_DIGITS = re.compile(r"[0-9]|[^0-9]+")
_WORDS = re.compile(WS + "[^" + WS + "]*|[^" + WS + "]+")


def train_sentencepiece(texts, vocab_size, *, byte_fallback=True, split_digits=True,
                        normalization=None, character_coverage=1.0, add_dummy_prefix=True,
                        remove_extra_whitespaces=True, user_defined_symbols=(),
                        control_symbols=(), unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                        max_piece_length=16, tie_break="ids", progress=False) -> Tokenizer:
    """Train a SentencePiece-style BPE model with our exact BPE trainer.

    ``texts`` is an iterable of sentences (each one is normalized on its own, as a line
    of SentencePiece's training input), a pyarrow string array, or a ``{sentence: count}``
    dict. ``vocab_size`` counts every piece: ``<unk>``,
    ``<s>``, ``</s>`` (and ``<pad>`` when ``pad_id >= 0``), control and user-defined
    symbols, the 256 byte pieces (``byte_fallback``), the merged pieces and the single
    characters. The vocabulary is laid out as SentencePiece's BPE trainer lays it out:
    meta pieces first (score 0), then the merged pieces in merge order (scores 0, -1,
    -2, ...), then the characters by decreasing frequency (scores continuing downwards).
    """
    if normalization not in (None, "identity"):
        raise NotImplementedError(
            f"normalization={normalization!r} is not supported for training (SentencePiece's "
            "precompiled nmt_nfkc charsmap cannot be built here); use None (identity)")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if not 0.0 < character_coverage <= 1.0:
        raise ValueError("character_coverage must be in (0, 1]")
    if tie_break not in TIE_RULES:
        raise ValueError(f"tie_break must be one of {TIE_RULES}")
    # Meta pieces: fixed ids first, then control, user-defined and byte pieces fill the gaps.
    meta: dict[int, tuple[str, int]] = {}
    for pid, piece, ptype in ((unk_id, "<unk>", UNKNOWN), (bos_id, "<s>", CONTROL),
                              (eos_id, "</s>", CONTROL), (pad_id, "<pad>", CONTROL)):
        if pid is None or pid < 0:
            if ptype == UNKNOWN:
                raise ValueError("unk_id must be >= 0")
            continue
        if pid in meta:
            raise ValueError(f"id {pid} is given to two special pieces")
        meta[pid] = (piece, ptype)
    extra = [(s, CONTROL) for s in control_symbols] + [(s, USER_DEFINED) for s in user_defined_symbols]
    if byte_fallback:
        extra += [(byte_piece(b), BYTE) for b in range(256)]
    seen = {p for p, _ in meta.values()}
    nxt = 0
    for piece, ptype in extra:
        if not isinstance(piece, str) or not piece:
            raise ValueError(f"special piece {piece!r} must be a non-empty str")
        if piece in seen:
            raise ValueError(f"piece {piece!r} is given twice")
        seen.add(piece)
        while nxt in meta:
            nxt += 1
        meta[nxt] = (piece, ptype)
    if max(meta) >= len(meta):
        raise ValueError("special piece ids must be contiguous from 0")

    # Normalizer used for training (identity; user-defined symbols stay verbatim).
    norm = SentencePieceNormalizer({}, [p for p, t in meta.values() if t == USER_DEFINED],
                                   add_dummy_prefix, remove_extra_whitespaces)
    meta_strings = sorted((p for p, _ in meta.values()), key=lambda s: (-len(s), s))
    meta_re = re.compile("|".join(re.escape(s) for s in meta_strings)) if meta_strings else None
    words: collections.Counter = collections.Counter()
    for index, (text, count) in enumerate(_iter(texts)):
        text = check_str(text, index)
        if meta_re is not None:
            text = meta_re.sub(" ", text)  # meta pieces are never learned from the text
        s = norm.normalize(text)
        for w in _WORDS.findall(s):
            if split_digits:
                for part in _DIGITS.findall(w):
                    words[part] += count
            else:
                words[w] += count
    if not words:  # a model of the meta pieces alone would look like success
        raise TrainingError("nothing to learn: no text in the input (empty input, only empty "
                            "or whitespace-only sentences, or only special tokens)")
    # Character coverage: most frequent characters first (ties: smaller code point).
    chars: collections.Counter = collections.Counter()
    for w, c in words.items():
        for ch in w:
            chars[ch] += c
    total = sum(chars.values())
    ranked = sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))
    required = []
    acc = 0
    for ch, c in ranked:
        if total and acc / total >= character_coverage:
            break
        acc += c
        required.append(ch)
    req = set(required)
    if len(req) < len(chars):
        rare = "[" + "".join(re.escape(c) for c in sorted(set(chars) - req)) + "]+"
        rare_re = re.compile(rare)
        split_words: collections.Counter = collections.Counter()
        for w, c in words.items():
            for part in rare_re.split(w):
                if part:
                    split_words[part] += c
        words = split_words
    n_meta = len(meta)
    n_merges = vocab_size - n_meta - len(required)
    if n_merges < 0:
        raise TrainingError(
            f"vocab_size={vocab_size} is smaller than the {n_meta} special/byte pieces plus "
            f"the {len(required)} required characters; increase vocab_size or lower "
            "character_coverage")
    merged: list[str] = []
    if n_merges > 0 and words:
        from .kernels.merge import TIE_BYTES, TIE_FIRST, TIE_RANKS

        symbols, offsets, counts, alphabet = word_table(dict(words), "chars", None)
        base_bytes = [c.encode("utf-8") for c in alphabet]
        tie_mode = {"ids": TIE_RANKS, "hf": TIE_RANKS, "first": TIE_FIRST, "bytes": TIE_BYTES}[tie_break]
        merges, merge_ids, _ = run_merge_kernel(
            symbols.copy(), offsets, counts, base_bytes,
            np.arange(len(alphabet), dtype=np.int64), tie_mode, 1 << 62,
            len(alphabet) + n_merges, 1, max_piece_length, progress=progress)
        strings = list(alphabet)
        taken = set(strings) | {p for p, _ in meta.values()}
        for (a, b), t in zip(merges.tolist(), merge_ids.tolist()):
            if t < len(strings):
                continue  # the kernel reused an existing token
            assert t == len(strings), "merge kernel ids are not consecutive"
            s = strings[a] + strings[b]
            strings.append(s)
            if s not in taken:
                taken.add(s)
                merged.append(s)
    pieces = [meta[i][0] for i in range(n_meta)]
    types = [meta[i][1] for i in range(n_meta)]
    scores = [0.0] * n_meta
    for k, s in enumerate(merged + required):
        pieces.append(s)
        types.append(NORMAL)
        scores.append(-float(k))
    return sentencepiece_tokenizer(
        pieces, scores, types, byte_fallback=byte_fallback, add_dummy_prefix=add_dummy_prefix,
        remove_extra_whitespaces=remove_extra_whitespaces, split_digits=split_digits,
        normalizer_name="identity", character_coverage=character_coverage,
        max_piece_length=max_piece_length)


def _iter(texts):
    """``(sentence, count)`` pairs from a list of str, a pyarrow array or a {str: count} dict."""
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of documents (a list of str), not one str")
    if isinstance(texts, dict):
        for t, c in texts.items():
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c <= 0:
                raise TrainingError(f"sentence {t!r}: count must be a positive integer, got {c!r}")
            yield t, int(c)
        return
    module = type(texts).__module__ or ""
    if module.startswith("pyarrow"):
        for t in texts.to_pylist():
            if t is not None:
                yield t, 1
        return
    for t in texts:
        yield t, 1


#: ``train``'s options that SentencePiece-style training takes.
_SENTENCEPIECE_OPTIONS = ("byte_fallback", "split_digits", "character_coverage",
                          "add_dummy_prefix", "remove_extra_whitespaces", "user_defined_symbols",
                          "control_symbols", "normalization", "tie_break", "progress")


def train_whitespace_style(texts, vocab_size, options):
    """``train(..., whitespace="▁", **options)``: SentencePiece-style BPE (see
    sentencepiece_style), ``options`` in ``train``'s words."""
    options = dict(options)
    if options.pop("whitespace") != "\u2581":
        raise ValueError("whitespace= supports only '\u2581' (SentencePiece style)")
    if options.pop("base", "chars") != "chars":
        raise ValueError("SentencePiece style is char mode: base='chars'")
    sp = {k: options.pop(k) for k in _SENTENCEPIECE_OPTIONS if k in options}
    if "special_tokens" in options:
        sp["user_defined_symbols"] = list(options.pop("special_tokens"))
    if options.get("max_token_length") is not None:
        sp["max_piece_length"] = options.pop("max_token_length")
    options.pop("max_token_length", None)
    options.pop("return_report", None)
    if options:
        raise TypeError(f"not supported with whitespace='\u2581': {sorted(options)}")
    return train_sentencepiece(texts, vocab_size, **sp)
