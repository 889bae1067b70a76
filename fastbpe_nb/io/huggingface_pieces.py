"""A Hugging Face ``tokenizer.json`` of a SentencePiece-style tokenizer (``save_pretrained``).

SentencePiece's BPE (``sentencepiece_parts``) in HF's terms, the way HF writes Llama-style
tokenizers, for the setups whose behaviour the two share exactly:

* ``normalizer``: SentencePiece's whitespace rules on the identity normalizer. With
  ``remove_extra_whitespaces``: leading spaces removed (``Replace(\\A +)``), runs of spaces
  made one (``Replace( {2,})``); then the dummy ``▁`` (``Prepend``, which leaves an empty
  text empty, as SentencePiece does), spaces as ``▁`` (``Replace``), and trailing ``▁``
  removed (``Replace(▁+\\z)``: SentencePiece strips them after escaping).
* ``pre_tokenizer``: none. SentencePiece merges over the whole normalized text (its split
  into words is an optimisation that never changes the result); so does HF on one piece.
* ``model``: ``BPE`` over every piece (id = SentencePiece id); ``merges`` lists, for every
  normal piece from the highest score down, *every* split of it into two normal pieces, so
  that HF's "listed pair of lowest position" is SentencePiece's "adjacent pair whose
  concatenation is the piece of highest score" (the scores of the pieces merges make must
  be distinct for the two to agree on ties; trained models' are). ``byte_fallback`` as the
  model's; ``unk_token`` its unknown piece with ``fuse_unk`` (a run of unknown characters
  is one ``<unk>``, as in SentencePiece).
* ``decoder``: the unknown piece -> its surface (`` ⁇ ``), ``▁`` -> space, byte pieces ->
  bytes, joined, one leading space dropped when the model adds a dummy prefix.
* ``added_tokens``: the control and unknown pieces (special).

Refused with LossyExportError (they have no exact equivalent here): a charsmap normalizer
(``nmt_nfkc`` ...), user-defined pieces (HF would normalize the text between them one part
at a time), unused pieces, ``escape_whitespaces=false``, equal scores among merged pieces.
One difference is HF's by design: a text holding a control piece's own string (``</s>``) is
split at it by HF (as for every Llama-style tokenizer), while SentencePiece encodes it as text.
"""

from __future__ import annotations

import json

from ..errors import LossyExportError
from .sentencepiece_model import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED

WS = "\u2581"


def _refuse(what: str):
    return LossyExportError(f"save_pretrained: this SentencePiece-style tokenizer has {what}, "
                            "which a tokenizer.json cannot reproduce exactly; "
                            "use tok.to_sentencepiece(path) for a .model file")


def check_exportable(tok) -> None:
    """Raise LossyExportError for what the module docstring lists as refused."""
    model, norm = tok.model, tok.normalizer
    types = model.types.tolist()
    if model.options.get("precompiled_charsmap"):
        raise _refuse(f"a charsmap normalizer ({model.options.get('normalizer_name')!r})")
    if USER_DEFINED in types:
        raise _refuse(f"user-defined pieces ({', '.join(map(repr, model.user_defined[:5]))})")
    if UNUSED in types:
        raise _refuse("unused pieces")
    if not norm.escape_whitespaces:
        raise _refuse("escape_whitespaces=false")
    scores = [s for p, s, t in zip(model.pieces, model.scores.tolist(), types)
              if t == NORMAL and len(p) > 1]
    if len(set(scores)) != len(scores):
        raise _refuse("pieces of equal score (SentencePiece breaks their ties by position)")


def _normalizer(norm) -> dict:
    steps = []
    if norm.remove_extra_whitespaces:
        steps += [{"type": "Replace", "pattern": {"Regex": "\\A +"}, "content": ""},
                  {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    if norm.add_dummy_prefix:
        steps.append({"type": "Prepend", "prepend": WS})
    steps.append({"type": "Replace", "pattern": {"String": " "}, "content": WS})
    if norm.remove_extra_whitespaces:
        steps.append({"type": "Replace", "pattern": {"Regex": WS + "+\\z"}, "content": ""})
    return {"type": "Sequence", "normalizers": steps}


def _merges(pieces, scores, types) -> list[list[str]]:
    normal = {p for p, t in zip(pieces, types) if t == NORMAL}
    targets = sorted((i for i, (p, t) in enumerate(zip(pieces, types))
                      if t == NORMAL and len(p) > 1), key=lambda i: (-scores[i], i))
    merges = []
    for i in targets:
        piece = pieces[i]
        for k in range(1, len(piece)):
            if piece[:k] in normal and piece[k:] in normal:
                merges.append([piece[:k], piece[k:]])
    return merges


def pieces_tokenizer_json(tok) -> str:
    """The ``tokenizer.json`` text of a SentencePiece-style ``tok`` (deterministic)."""
    check_exportable(tok)
    model, norm = tok.model, tok.normalizer
    pieces, types, scores = list(model.pieces), model.types.tolist(), model.scores.tolist()
    unk = next((p for p, t in zip(pieces, types) if t == UNKNOWN), None)
    # SentencePiece shows the unknown piece as its unk_surface (" \u2047 " by default).
    surface = model.options.get("unk_surface")
    decoders = [{"type": "Replace", "pattern": {"String": unk},
                 "content": " \u2047 " if surface is None else surface}] if unk else []
    decoders += [{"type": "Replace", "pattern": {"String": WS}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]
    if norm.add_dummy_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, (p, t) in enumerate(zip(pieces, types)) if t in (CONTROL, UNKNOWN)],
        "normalizer": _normalizer(norm),
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": bool(model.byte_fallback) and BYTE in types,
            "ignore_merges": False,
            "vocab": {p: i for i, p in enumerate(pieces)},
            "merges": _merges(pieces, scores, types),
        },
    }
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
