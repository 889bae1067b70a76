"""The parts of a SentencePiece-style Tokenizer, from its pieces or its ``ModelProto``.

Below the Tokenizer (nothing here imports it): ``sentencepiece_style`` builds the Tokenizer
of these parts (``Tokenizer.from_parts(**parts)``), and so does ``Tokenizer.from_pretrained``
(``roles.SpecialTokenRoles``), which cannot import ``sentencepiece_style`` (a cycle).
"""

from __future__ import annotations

from .errors import ModelFormatError
from .io import sentencepiece_model as spm_io
from .sentencepiece_normalizer import SentencePieceNormalizer
from .sentencepiece_parts import PieceModel, SentencePieceDecoder, SentencePieceLevel


def sentencepiece_parts(pieces, scores, types, *, byte_fallback=True, add_dummy_prefix=True,
                        remove_extra_whitespaces=True, escape_whitespaces=True,
                        split_digits=False, unk_surface=None, normalizer_name="identity",
                        precompiled_charsmap=b"", character_coverage=1.0,
                        max_piece_length=16, source=None, roles=None, _proto=None) -> dict:
    """The ``Tokenizer.from_parts`` arguments of a SentencePiece-style tokenizer of pieces,
    scores and types (as in a ``ModelProto``).

    Raises ModelFormatError (naming ``source``) for an invalid model: a missing or second
    ``<unk>``, byte pieces without byte fallback (or not all 256 with it), empty or
    duplicate pieces, NaN scores, a malformed charsmap.

    ``roles`` (``fastbpe_nb.roles``): by default the unk, bos, eos and pad pieces the
    ``.model`` file's TrainerSpec names (``unk_id``, ``bos_id``, ...), or, built from pieces,
    the unknown piece and the ``<s>``, ``</s>``, ``<pad>`` control pieces.
    """
    options = {"split_digits": bool(split_digits), "unk_surface": unk_surface,
               "normalizer_name": normalizer_name,
               "precompiled_charsmap": bytes(precompiled_charsmap),
               "character_coverage": character_coverage, "max_piece_length": max_piece_length}
    model = PieceModel(pieces, scores, types, byte_fallback, options, _proto, source)
    rules = spm_io.decode_charsmap(bytes(precompiled_charsmap), source) if precompiled_charsmap else {}
    normalizer = SentencePieceNormalizer(rules, model.user_defined, add_dummy_prefix,
                                         remove_extra_whitespaces, escape_whitespaces)
    decoder = SentencePieceDecoder(model, unk_surface, add_dummy_prefix, remove_extra_whitespaces)
    if roles is None:
        roles = default_roles(model, _proto)
    return {"model": model, "level": SentencePieceLevel(model, escape_whitespaces),
            "normalizer": normalizer, "decoder": decoder, "source": source, "roles": roles}


def default_roles(model: PieceModel, proto=None) -> dict:
    """``{role: piece}`` of a SentencePiece model (see ``sentencepiece_parts``): a role
    whose id is -1 (SentencePiece's "none", e.g. ``pad_id`` by default) or names a piece
    that is not a control, unknown or user-defined one has no token."""
    pieces, types = model.pieces, model.types.tolist()
    if proto is not None:
        ids = {"unk": proto.unk_id, "bos": proto.bos_id, "eos": proto.eos_id, "pad": proto.pad_id}
    else:
        where = {p: i for i, p in enumerate(pieces) if types[i] == spm_io.CONTROL}
        ids = {"unk": model.unk_id, "bos": where.get("<s>", -1), "eos": where.get("</s>", -1),
               "pad": where.get("<pad>", -1)}
    special = (spm_io.UNKNOWN, spm_io.CONTROL, spm_io.USER_DEFINED)
    return {role: pieces[i] for role, i in ids.items()
            if i is not None and 0 <= i < len(pieces) and types[i] in special}


def proto_parts(m: spm_io.SentencePieceModel, source, roles=None) -> dict:
    """``sentencepiece_parts`` of a parsed ``.model`` file (ModelFormatError naming
    ``source`` for a non-BPE model and the options that are not supported)."""
    if m.model_type != spm_io.BPE:
        name = spm_io.MODEL_TYPES.get(m.model_type, str(m.model_type))
        raise ModelFormatError(
            f"model type {name} is not supported (only BPE models can be loaded)",
            source, "trainer_spec.model_type")
    if m.treat_whitespace_as_suffix:
        raise ModelFormatError("treat_whitespace_as_suffix is not supported", source,
                               "trainer_spec.treat_whitespace_as_suffix")
    if m.denormalizer_charsmap:
        raise ModelFormatError("a denormalizer (denormalizer_spec) is not supported", source,
                               "denormalizer_spec")
    return sentencepiece_parts(
        m.pieces, m.scores, m.types, byte_fallback=m.byte_fallback,
        add_dummy_prefix=m.add_dummy_prefix,
        remove_extra_whitespaces=m.remove_extra_whitespaces,
        escape_whitespaces=m.escape_whitespaces, split_digits=m.split_digits,
        unk_surface=m.unk_surface, normalizer_name=m.normalizer_name,
        precompiled_charsmap=m.precompiled_charsmap,
        character_coverage=m.character_coverage if m.character_coverage is not None else 1.0,
        max_piece_length=m.max_sentencepiece_length or 16, source=source, roles=roles, _proto=m)
