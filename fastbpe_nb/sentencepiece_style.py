"""The SentencePiece preset: a ``Tokenizer`` of SentencePiece's parts, and ``.model`` files.

``from_sentencepiece(path)`` reads a SentencePiece BPE ``.model`` and
``sentencepiece_tokenizer(pieces, scores, types, ...)`` builds one from its pieces; both
return a :class:`~fastbpe_nb.tokenizer.Tokenizer` (``base == "pieces"``) whose ids are
``SentencePieceProcessor``'s, with every verb of every other preset (batches, Arrow,
Parquet, ``fastbpe encode``, pickling, ``save`` / ``fb.load``). The parts and the exact
rules are in ``sentencepiece_parts``; training is ``sentencepiece_train``.
"""

from __future__ import annotations

import os
import warnings

from .io import sentencepiece_model as spm_io
from .sentencepiece_build import proto_parts, sentencepiece_parts
from .tokenizer import Tokenizer

__all__ = ["SentencePieceBPE", "from_sentencepiece", "from_sentencepiece_bytes",
           "sentencepiece_tokenizer", "to_sentencepiece"]


def sentencepiece_tokenizer(pieces, scores, types, *, byte_fallback=True, add_dummy_prefix=True,
                            remove_extra_whitespaces=True, escape_whitespaces=True,
                            split_digits=False, unk_surface=None, normalizer_name="identity",
                            precompiled_charsmap=b"", character_coverage=1.0,
                            max_piece_length=16, source=None, roles=None,
                            _proto=None) -> Tokenizer:
    """A SentencePiece-style Tokenizer of pieces, scores and types (as in a ``ModelProto``).

    Raises ModelFormatError (naming ``source``) for an invalid model: a missing or second
    ``<unk>``, byte pieces without byte fallback (or not all 256 with it), empty or
    duplicate pieces, NaN scores, a malformed charsmap.

    ``roles`` (``fastbpe_nb.roles``): by default the unk, bos, eos and pad pieces the
    ``.model`` file's TrainerSpec names (``unk_id``, ``bos_id``, ...), or, built from pieces,
    the unknown piece and the ``<s>``, ``</s>``, ``<pad>`` control pieces.
    """
    return Tokenizer.from_parts(**sentencepiece_parts(
        pieces, scores, types, byte_fallback=byte_fallback, add_dummy_prefix=add_dummy_prefix,
        remove_extra_whitespaces=remove_extra_whitespaces,
        escape_whitespaces=escape_whitespaces, split_digits=split_digits,
        unk_surface=unk_surface, normalizer_name=normalizer_name,
        precompiled_charsmap=precompiled_charsmap, character_coverage=character_coverage,
        max_piece_length=max_piece_length, source=source, roles=roles, _proto=_proto))


def from_sentencepiece(path) -> Tokenizer:
    """Load a SentencePiece BPE ``.model`` file.

    Raises ModelFormatError (naming ``path``) for malformed files, non-BPE models and
    unsupported options (``treat_whitespace_as_suffix``, a denormalizer).
    """
    return _from_model(spm_io.read_model(path), os.fspath(path))


def from_sentencepiece_bytes(buf: bytes, source=None, roles=None) -> Tokenizer:
    """``from_sentencepiece`` of a ``ModelProto``'s bytes (``roles``: None for the ones
    it names; see ``sentencepiece_tokenizer``)."""
    return _from_model(spm_io.parse_model(buf, source), source, roles)


def _from_model(m: spm_io.SentencePieceModel, source, roles=None) -> Tokenizer:
    return Tokenizer.from_parts(**proto_parts(m, source, roles))


def to_sentencepiece(tok: Tokenizer, path) -> None:
    """Write a SentencePiece-style ``tok`` as a ``.model`` file (``tok.to_sentencepiece``)."""
    if not isinstance(tok, Tokenizer):
        raise TypeError(f"to_sentencepiece needs a Tokenizer, not {type(tok).__name__}")
    tok.to_sentencepiece(path)


def SentencePieceBPE(pieces, scores, types, **options) -> Tokenizer:  # noqa: N802
    """Deprecated: SentencePiece models are Tokenizers now; use ``sentencepiece_tokenizer``
    (same arguments) or ``from_sentencepiece``. ``isinstance(x, SentencePieceBPE)`` no
    longer works: test ``tok.base == "pieces"``."""
    warnings.warn("SentencePieceBPE is deprecated: SentencePiece models are fastbpe_nb."
                  "Tokenizer objects; use fastbpe_nb.sentencepiece_tokenizer or "
                  "from_sentencepiece", DeprecationWarning, stacklevel=2)
    return sentencepiece_tokenizer(pieces, scores, types, **options)
