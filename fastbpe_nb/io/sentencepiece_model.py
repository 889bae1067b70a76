"""Reader and writer of SentencePiece ``.model`` files (a ``ModelProto`` in protobuf wire format).

No dependency on ``protobuf`` or on the ``sentencepiece`` C++ extension: the wire format is
small (varints, length-delimited fields, little-endian fixed32 floats) and we only need a
handful of fields of ``sentencepiece_model.proto``::

    ModelProto        1: repeated SentencePiece pieces   2: TrainerSpec trainer_spec
                      3: NormalizerSpec normalizer_spec  4: SelfTestData   5: denormalizer_spec
    SentencePiece     1: string piece  2: float score  3: Type type (default NORMAL=1)
    TrainerSpec       3: model_type (UNIGRAM=1 default, BPE=2, WORD=3, CHAR=4)  4: vocab_size
                      10: character_coverage  20: max_sentencepiece_length  24: treat_whitespace_as_suffix
                      25: split_digits  30: control_symbols  31: user_defined_symbols
                      35: byte_fallback  40-43: unk/bos/eos/pad id  44: unk_surface
                      45-48: unk/bos/eos/pad piece
    NormalizerSpec    1: name  2: precompiled_charsmap  3: add_dummy_prefix (true)
                      4: remove_extra_whitespaces (true)  5: escape_whitespaces (true)

Every read is bounds-checked; anything malformed raises :class:`ModelFormatError` naming
the file and the entry (never an IndexError or a crash).
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelFormatError

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}
# TrainerSpec.ModelType
MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}
BPE = 2


# --------------------------------------------------------------------------- wire format


class _Reader:
    """Bounds-checked decoding of protobuf fields in ``buf[start:end]``."""

    def __init__(self, buf: bytes, path, entry: str):
        self.buf = buf
        self.path = path
        self.entry = entry

    def fail(self, reason, entry=None):
        raise ModelFormatError(reason, self.path, entry or self.entry)

    def varint(self, pos: int, end: int, entry: str):
        result = 0
        shift = 0
        buf = self.buf
        while True:
            if pos >= end:
                self.fail("truncated varint (file cut short or corrupt)", entry)
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= 70:
                self.fail("varint longer than 10 bytes", entry)
        if result >= 1 << 64:
            self.fail("varint does not fit in 64 bits", entry)
        return result, pos

    def fields(self, start: int, end: int, entry: str):
        """Yield ``(field_number, wire_type, value)``; value: int, or (start, end) for bytes."""
        pos = start
        while pos < end:
            key, pos = self.varint(pos, end, entry)
            number, wire = key >> 3, key & 7
            if number == 0:
                self.fail("field number 0 is invalid", entry)
            where = f"{entry}.field{number}"
            if wire == 0:
                value, pos = self.varint(pos, end, where)
            elif wire == 1:
                if pos + 8 > end:
                    self.fail("truncated fixed64 field", where)
                value = (pos, pos + 8)
                pos += 8
            elif wire == 2:
                length, pos = self.varint(pos, end, where)
                if length > end - pos:
                    self.fail(f"length-delimited field of {length} bytes runs past the end "
                              f"of its message ({end - pos} bytes left; file truncated?)", where)
                value = (pos, pos + length)
                pos += length
            elif wire == 5:
                if pos + 4 > end:
                    self.fail("truncated fixed32 field", where)
                value = (pos, pos + 4)
                pos += 4
            else:
                self.fail(f"unsupported wire type {wire} (groups or corrupt data)", where)
            yield number, wire, value

    def expect(self, wire, want, number, entry):
        if wire != want:
            self.fail(f"field {number} has wire type {wire}, expected {want}", entry)

    def string(self, span, entry) -> str:
        try:
            return self.buf[span[0]:span[1]].decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string field is not valid UTF-8", entry)

    def float32(self, span) -> float:
        return struct.unpack("<f", self.buf[span[0]:span[1]])[0]


def _int32(value: int) -> int:
    """A varint holding an int32 (negative values are sign-extended to 64 bits)."""
    if value >= 1 << 63:
        value -= 1 << 64
    return value


# --------------------------------------------------------------------------- model


@dataclass
class SentencePieceModel:
    """The parts of a ``ModelProto`` that the tokenizer uses (plus the raw specs)."""

    pieces: list
    scores: np.ndarray  # float32
    types: np.ndarray  # int8
    # TrainerSpec
    model_type: int = 1
    vocab_size: int | None = None
    byte_fallback: bool = False
    split_digits: bool = False
    treat_whitespace_as_suffix: bool = False
    character_coverage: float | None = None
    max_sentencepiece_length: int | None = None
    unk_surface: str | None = None  # None: field absent (SentencePiece uses " \u2047 ")
    user_defined_symbols: list = field(default_factory=list)
    control_symbols: list = field(default_factory=list)
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    # NormalizerSpec
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    # Denormalizer: only its precompiled charsmap matters to SentencePiece.
    denormalizer_charsmap: bytes = b""
    # Raw bytes of the specs as read (re-emitted verbatim on export), None when absent.
    raw_trainer_spec: bytes | None = None
    raw_normalizer_spec: bytes | None = None
    raw_denormalizer_spec: bytes | None = None


def parse_model(buf: bytes, path=None) -> SentencePieceModel:
    """Parse a serialized ``ModelProto``; raises ModelFormatError for anything malformed."""
    buf = bytes(buf)
    r = _Reader(buf, path, "ModelProto")
    pieces, scores, types = [], [], []
    spans = {}
    for number, wire, value in r.fields(0, len(buf), "ModelProto"):
        if number == 1:
            r.expect(wire, 2, number, f"pieces[{len(pieces)}]")
            entry = f"pieces[{len(pieces)}]"
            piece, score, ptype = None, 0.0, NORMAL
            for n2, w2, v2 in r.fields(value[0], value[1], entry):
                if n2 == 1:
                    r.expect(w2, 2, n2, entry)
                    piece = r.string(v2, entry + ".piece")
                elif n2 == 2:
                    r.expect(w2, 5, n2, entry)
                    score = r.float32(v2)
                elif n2 == 3:
                    r.expect(w2, 0, n2, entry)
                    ptype = _int32(v2)
            if piece is None:
                r.fail("piece has no text", entry)
            if ptype not in TYPE_NAMES:
                r.fail(f"unknown piece type {ptype}", entry)
            if math.isnan(score):
                r.fail("score is NaN", entry)
            pieces.append(piece)
            scores.append(score)
            types.append(ptype)
        elif number in (2, 3, 5):
            name = {2: "trainer_spec", 3: "normalizer_spec", 5: "denormalizer_spec"}[number]
            r.expect(wire, 2, number, name)
            spans[number] = value
        # Other fields (self_test_data, unknown extensions) are skipped.
    if not pieces:
        r.fail("the model has no pieces (not a SentencePiece model, or empty)")
    if 2 not in spans:
        r.fail("trainer_spec is missing (file truncated or not a SentencePiece model)")
    if 3 not in spans:
        r.fail("normalizer_spec is missing (file truncated or not a SentencePiece model)")
    model = SentencePieceModel(
        pieces=pieces,
        scores=np.array(scores, dtype=np.float32),
        types=np.array(types, dtype=np.int8),
    )
    _parse_trainer(r, spans[2], model)
    _parse_normalizer(r, spans[3], model, "normalizer_spec")
    model.raw_trainer_spec = buf[spans[2][0]:spans[2][1]]
    model.raw_normalizer_spec = buf[spans[3][0]:spans[3][1]]
    if 5 in spans:
        model.raw_denormalizer_spec = buf[spans[5][0]:spans[5][1]]
        for n2, w2, v2 in r.fields(spans[5][0], spans[5][1], "denormalizer_spec"):
            if n2 == 2:
                r.expect(w2, 2, n2, "denormalizer_spec")
                model.denormalizer_charsmap = buf[v2[0]:v2[1]]
    return model


def _parse_trainer(r: _Reader, span, m: SentencePieceModel):
    entry = "trainer_spec"
    ints = {3: "model_type", 4: "vocab_size", 20: "max_sentencepiece_length", 40: "unk_id",
            41: "bos_id", 42: "eos_id", 43: "pad_id"}
    bools = {24: "treat_whitespace_as_suffix", 25: "split_digits", 35: "byte_fallback"}
    strings = {44: "unk_surface", 45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece"}
    for n, w, v in r.fields(span[0], span[1], entry):
        if n in ints:
            r.expect(w, 0, n, f"{entry}.{ints[n]}")
            setattr(m, ints[n], _int32(v))
        elif n in bools:
            r.expect(w, 0, n, f"{entry}.{bools[n]}")
            setattr(m, bools[n], bool(v))
        elif n in strings:
            r.expect(w, 2, n, f"{entry}.{strings[n]}")
            setattr(m, strings[n], r.string(v, f"{entry}.{strings[n]}"))
        elif n == 10:
            r.expect(w, 5, n, f"{entry}.character_coverage")
            m.character_coverage = r.float32(v)
        elif n == 30:
            r.expect(w, 2, n, f"{entry}.control_symbols")
            m.control_symbols.append(r.string(v, f"{entry}.control_symbols"))
        elif n == 31:
            r.expect(w, 2, n, f"{entry}.user_defined_symbols")
            m.user_defined_symbols.append(r.string(v, f"{entry}.user_defined_symbols"))


def _parse_normalizer(r: _Reader, span, m: SentencePieceModel, entry):
    for n, w, v in r.fields(span[0], span[1], entry):
        if n == 1:
            r.expect(w, 2, n, entry + ".name")
            m.normalizer_name = r.string(v, entry + ".name")
        elif n == 2:
            r.expect(w, 2, n, entry + ".precompiled_charsmap")
            m.precompiled_charsmap = r.buf[v[0]:v[1]]
        elif n in (3, 4, 5):
            name = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[n]
            r.expect(w, 0, n, f"{entry}.{name}")
            setattr(m, name, bool(v))


def read_model(path) -> SentencePieceModel:
    """Read and parse a ``.model`` file (ModelFormatError names ``path``)."""
    with open(path, "rb") as f:  # a missing or unreadable file is an OSError naming it
        buf = f.read()
    return parse_model(buf, os.fspath(path))


# --------------------------------------------------------------------------- writer


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _f_varint(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(int(value))


def _f_bytes(number: int, value) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    return _key(number, 2) + _varint(len(value)) + bytes(value)


def _f_float(number: int, value: float) -> bytes:
    return _key(number, 5) + struct.pack("<f", value)


def encode_trainer_spec(*, vocab_size, byte_fallback, split_digits, character_coverage=1.0,
                        max_sentencepiece_length=16, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                        user_defined_symbols=(), control_symbols=(), unk_surface=None) -> bytes:
    """A ``TrainerSpec`` for a BPE model (fields in field-number order, as protobuf writes)."""
    out = [
        _f_varint(3, BPE),
        _f_varint(4, vocab_size),
        _f_float(10, character_coverage),
        _f_varint(20, max_sentencepiece_length),
        _f_varint(24, 0),
        _f_varint(25, 1 if split_digits else 0),
    ]
    out += [_f_bytes(30, s) for s in control_symbols]
    out += [_f_bytes(31, s) for s in user_defined_symbols]
    out.append(_f_varint(35, 1 if byte_fallback else 0))
    out += [_f_varint(40, unk_id), _f_varint(41, bos_id), _f_varint(42, eos_id),
            _f_varint(43, pad_id)]
    if unk_surface is not None:
        out.append(_f_bytes(44, unk_surface))
    return b"".join(out)


def encode_normalizer_spec(*, name="identity", precompiled_charsmap=b"", add_dummy_prefix=True,
                           remove_extra_whitespaces=True, escape_whitespaces=True) -> bytes:
    out = [_f_bytes(1, name)]
    if precompiled_charsmap:
        out.append(_f_bytes(2, precompiled_charsmap))
    out += [_f_varint(3, int(add_dummy_prefix)), _f_varint(4, int(remove_extra_whitespaces)),
            _f_varint(5, int(escape_whitespaces))]
    return b"".join(out)


def encode_model(pieces, scores, types, trainer_spec: bytes, normalizer_spec: bytes,
                 denormalizer_spec: bytes | None = None) -> bytes:
    """Serialize a ``ModelProto`` from pieces and already-encoded specs."""
    out = []
    for piece, score, ptype in zip(pieces, scores, types):
        body = _f_bytes(1, piece) + _f_float(2, float(score))
        if int(ptype) != NORMAL:
            body += _f_varint(3, int(ptype))
        out.append(_f_bytes(1, body))
    out.append(_f_bytes(2, trainer_spec))
    out.append(_f_bytes(3, normalizer_spec))
    if denormalizer_spec is not None:
        out.append(_f_bytes(5, denormalizer_spec))
    return b"".join(out)


# --------------------------------------------------------------------------- charsmap


def decode_charsmap(blob: bytes, path=None) -> dict:
    """The rules of a precompiled charsmap as ``{source_str: replacement_str}``.

    The blob is ``<uint32 trie size><Darts-clone double-array trie><NUL-separated strings>``;
    every key of the trie maps to an offset into the strings. (Darts-clone shares common
    suffixes, so several paths may reach the same unit; we enumerate paths.) The trie is
    enumerated level by level with NumPy (each unit: bits 0-7 label, bit 8 has_leaf, bit 9 offset
    shift, bits 10-31 offset; a leaf unit holds the value in bits 0-30), which is the
    same walk as Darts' ``commonPrefixSearch``.
    """
    entry = "normalizer_spec.precompiled_charsmap"
    if len(blob) <= 4:
        raise ModelFormatError("precompiled charsmap is broken (too short)", path, entry)
    trie_size = struct.unpack("<I", blob[:4])[0]
    if trie_size >= len(blob) or trie_size % 4 or trie_size == 0:
        raise ModelFormatError("precompiled charsmap: trie size exceeds the blob", path, entry)
    units = np.frombuffer(blob[4:4 + trie_size], dtype="<u4").astype(np.int64)
    strings = blob[4 + trie_size:]
    n_units = len(units)

    def offset_of(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    # Level-by-level walk; per level keep each path's parent index and last byte, and
    # rebuild the keys of the leaves from those arrays at the end.
    pos = np.array([offset_of(units[0])], dtype=np.int64)
    labels = np.arange(1, 256, dtype=np.int64)
    parents, bytes_, leaf_levels = [], [], []
    total = 0
    while len(pos):
        if len(parents) >= 256:
            raise ModelFormatError("precompiled charsmap: trie too deep", path, entry)
        # Paths share nodes (suffix sharing): find the children of each distinct node once.
        upos, inverse = np.unique(pos, return_inverse=True)
        child = upos[:, None] ^ labels[None, :]
        ok = child < n_units
        cu = np.where(ok, units[np.minimum(child, n_units - 1)], 0)
        ok &= (cu & ((1 << 31) | 0xFF)) == labels[None, :]
        ufi, uli = np.nonzero(ok)  # sorted by node, then label
        n_child = np.bincount(ufi, minlength=len(upos))
        first = np.zeros(len(upos) + 1, dtype=np.int64)
        np.cumsum(n_child, out=first[1:])
        per_path = n_child[inverse]
        fi = np.repeat(np.arange(len(pos)), per_path)
        start = np.repeat(first[inverse], per_path)
        k = np.arange(len(fi)) - np.repeat(np.cumsum(per_path) - per_path, per_path)
        sel = start + k
        li = uli[sel]
        cu = cu[ufi[sel], li]
        new_pos = child[ufi[sel], li] ^ offset_of(cu)
        leaf = np.nonzero((cu >> 8) & 1)[0]
        if len(leaf) and new_pos[leaf].max() >= n_units:
            raise ModelFormatError("precompiled charsmap: leaf outside the trie", path, entry)
        parents.append(fi)
        bytes_.append(labels[li].astype(np.uint8))
        leaf_levels.append((leaf, units[new_pos[leaf]] & 0x7FFFFFFF))
        pos = new_pos
        total += len(pos)
        if total > 20_000_000:
            raise ModelFormatError("precompiled charsmap: trie too large (corrupt?)", path, entry)
    nul = np.frombuffer(strings, dtype=np.uint8)
    nul_pos = np.append(np.nonzero(nul == 0)[0], len(strings))
    keys_all, vals_all = [], []
    for depth, (leaf, values) in enumerate(leaf_levels):
        if not len(leaf):
            continue
        if values.max() >= len(strings):
            raise ModelFormatError("precompiled charsmap: value outside the strings", path, entry)
        mat = np.empty((len(leaf), depth + 1), dtype=np.uint8)
        idx = leaf
        for d in range(depth, -1, -1):
            mat[:, d] = bytes_[d][idx]
            idx = parents[d][idx]
        raw = mat.tobytes()
        w = depth + 1
        keys_all.extend(raw[i:i + w] for i in range(0, len(raw), w))
        ends = nul_pos[np.searchsorted(nul_pos, values)]
        vals_all.extend(strings[a:b] for a, b in zip(values.tolist(), ends.tolist()))
    try:
        keys = b"\0".join(keys_all).decode("utf-8").split("\0")
        vals = b"\0".join(vals_all).decode("utf-8").split("\0")
    except UnicodeDecodeError:
        raise ModelFormatError("normalizer rule is not whole UTF-8 characters (unsupported)",
                               path, entry) from None
    if len(keys) != len(keys_all) or len(vals) != len(vals_all):
        raise ModelFormatError("precompiled charsmap: malformed rule", path, entry)
    rules = dict(zip(keys, vals))
    return rules


def model_proto(tok) -> bytes:
    """The ``.model`` bytes of a SentencePiece-style tokenizer (``tok.base == "pieces"``):
    the specs it was read with when it came from a ``.model`` file, else ones built from
    its settings (what ``SentencePieceTrainer`` would have written)."""
    from .variant_exports import refuse_variants

    refuse_variants(tok, "a SentencePiece .model file")
    if tok.base != "pieces":
        from ..errors import LossyExportError

        raise LossyExportError(f"a {tok.base!r}-level tokenizer is not a SentencePiece model: "
                               "only the SentencePiece preset (fb.from_sentencepiece, "
                               "fb.train(..., whitespace='\u2581')) exports to .model")
    model, norm, opts = tok.model, tok.normalizer, tok.model.options
    pieces, types = model.pieces, model.types.tolist()
    m = model.proto
    if m is not None and m.raw_trainer_spec is not None:
        trainer, normalizer, denorm = m.raw_trainer_spec, m.raw_normalizer_spec, m.raw_denormalizer_spec
    else:
        ids = model.piece_to_id_map
        controls = [p for p, t in zip(pieces, types)
                    if t == CONTROL and p not in ("<s>", "</s>", "<pad>")]
        trainer = encode_trainer_spec(
            vocab_size=len(pieces), byte_fallback=model.byte_fallback,
            split_digits=opts.get("split_digits", False),
            character_coverage=opts.get("character_coverage", 1.0),
            max_sentencepiece_length=opts.get("max_piece_length", 16), unk_id=model.unk_id,
            bos_id=ids.get("<s>", -1), eos_id=ids.get("</s>", -1), pad_id=ids.get("<pad>", -1),
            user_defined_symbols=model.user_defined, control_symbols=controls,
            unk_surface=opts.get("unk_surface"))
        normalizer = encode_normalizer_spec(
            name=opts.get("normalizer_name", "identity"),
            precompiled_charsmap=opts.get("precompiled_charsmap", b""),
            add_dummy_prefix=norm.add_dummy_prefix,
            remove_extra_whitespaces=norm.remove_extra_whitespaces,
            escape_whitespaces=norm.escape_whitespaces)
        denorm = None
    return encode_model(pieces, model.scores, model.types, trainer, normalizer, denorm)


def save_sentencepiece(tok, path) -> None:
    """Write ``tok`` as a ``.model`` file that ``sentencepiece.SentencePieceProcessor`` loads."""
    from .atomic import atomic_write

    data = model_proto(tok)
    with atomic_write(path) as f:
        f.write(data)
