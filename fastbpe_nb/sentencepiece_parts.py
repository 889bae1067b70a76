"""SentencePiece's parts: its normalizer, its code-point alphabet, its scored model and
its decoder, which the SentencePiece preset of ``Tokenizer`` is built from.

Encoding follows SentencePiece's BPE model (``bpe_model.cc``) to the id:

1. **Normalize** (``normalizer.cc``): user-defined pieces are kept verbatim; otherwise the
   precompiled charsmap's longest rule applies (``nmt_nfkc`` etc.; ``identity`` has none);
   with ``remove_extra_whitespaces`` leading/trailing spaces go and runs of spaces become
   one; spaces become ``▁`` and a dummy ``▁`` is prefixed (``add_dummy_prefix``).
2. **Split** the normalized text into characters (user-defined pieces frozen as one
   symbol), and into words before each ``▁`` when no piece holds a ``▁`` inside.
3. **Merge** by piece score: repeatedly join the adjacent pair whose concatenation is a
   piece with the highest score (leftmost on equal scores), in the encode kernels with a
   pair table built from every two-part split of every piece, ranked by the score of the
   piece it makes.
4. **Unknown characters** become their UTF-8 bytes as ``<0xXX>`` pieces with
   ``byte_fallback``; otherwise each run of unknown characters becomes one ``<unk>`` id.

Decoding follows ``SentencePieceProcessor::Decode``: control pieces vanish, ``<unk>``
becomes ``" \u2047 "``, ``▁`` becomes a space (the leading one of the text is dropped when
the model adds a dummy prefix), and byte pieces are decoded as UTF-8 with one U+FFFD per
byte that does not start a valid character.
"""

from __future__ import annotations

import codecs
import re

import numpy as np

from .errors import ModelFormatError
from .io import sentencepiece_model as spm_io
from .io.sentencepiece_model import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED
from .model import LONG_PIECE, KernelTables
from .sentencepiece_normalizer import WS
from .text import clean_text, not_str
from .validation import checked_ids

DEFAULT_UNK_SURFACE = " \u2047 "
#: Code points get symbol ids ``n_pieces + code point`` when they are not pieces.
N_CODEPOINTS = 0x110000


def byte_piece(b: int) -> str:
    return f"<0x{b:02X}>"


BYTE_PIECES = {byte_piece(b): b for b in range(256)}


def _utf8_char_len(buf: bytes, i: int) -> int:
    """Length of the valid UTF-8 character at ``buf[i]``, or 0 (SentencePiece's DecodeUTF8)."""
    b0 = buf[i]
    if b0 < 0x80:
        return 1
    if 0xC0 <= b0 < 0xE0:
        n = 2
    elif 0xE0 <= b0 < 0xF0:
        n = 3
    elif 0xF0 <= b0 < 0xF8:
        n = 4
    else:
        return 0
    if i + n > len(buf):
        return 0
    try:
        buf[i:i + n].decode("utf-8")  # rejects overlong forms, surrogates, > U+10FFFF
    except UnicodeDecodeError:
        return 0
    return n


def decode_bytes_sp(buf: bytes) -> str:
    """Bytes -> str with one U+FFFD per byte that does not start a valid character."""
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    i = 0
    while i < len(buf):
        n = _utf8_char_len(buf, i)
        if n == 0:
            out.append("\ufffd")
            i += 1
        else:
            out.append(buf[i:i + n].decode("utf-8"))
            i += n
    return "".join(out)


def check_str(text, index):
    if not isinstance(text, str):
        raise not_str(index, text)
    return clean_text(text)


class PieceModel:
    """Pieces with scores and types, exactly as in a SentencePiece ``ModelProto``.

    ``token_bytes``: each piece's UTF-8 (``▁`` kept); ``merges`` / ``merge_ids``: the
    two-part splits the encoder merges by, in rank order (after ``tables()``).
    """

    def __init__(self, pieces, scores, types, byte_fallback=True, options=None, proto=None,
                 source=None):
        self.options = dict(options or {})  # the ModelProto's other settings (export)
        self.proto = proto  # the parsed .model it came from, when it did (export as read)
        self.pieces = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32)
        self.types = np.asarray(types, dtype=np.int8)
        self.byte_fallback = bool(byte_fallback)
        self._check(source)
        self.token_bytes = [p.encode("utf-8") for p in self.pieces]
        self.mode = "scores"
        self.n_base = 0
        self._tables = None
        self._unused_split = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in ("_tables", "cp_to_sym", "merges", "merge_ids"):
            state.pop(name, None)
        state["_tables"], state["_unused_split"] = None, {}
        return state

    def __eq__(self, other):
        return (isinstance(other, PieceModel) and self.pieces == other.pieces
                and np.array_equal(self.scores, other.scores)
                and np.array_equal(self.types, other.types)
                and self.byte_fallback == other.byte_fallback)

    def _check(self, source):
        n = len(self.pieces)
        if not (len(self.scores) == len(self.types) == n):
            raise ModelFormatError("pieces, scores and types differ in length", source)
        self.piece_to_id_map: dict[str, int] = {}
        self.unk_id = -1
        byte_ids = {}
        user = []
        for i, (p, t) in enumerate(zip(self.pieces, self.types.tolist())):
            entry = f"pieces[{i}]"
            if not isinstance(p, str) or not p:
                raise ModelFormatError("piece must not be empty", source, entry)
            if "\0" in p:
                raise ModelFormatError("piece must not include a NUL character", source, entry)
            if t not in spm_io.TYPE_NAMES:
                raise ModelFormatError(f"unknown piece type {t}", source, entry)
            if p in self.piece_to_id_map:
                raise ModelFormatError(f"piece {p!r} is already defined", source, entry)
            self.piece_to_id_map[p] = i
            if t == UNKNOWN:
                if self.unk_id >= 0:
                    raise ModelFormatError("unk is already defined", source, entry)
                self.unk_id = i
            elif t == BYTE:
                if not self.byte_fallback:
                    raise ModelFormatError(
                        f"byte piece {p} is found although byte_fallback is false", source, entry)
                if p not in BYTE_PIECES:
                    raise ModelFormatError(f"byte piece {p!r} is invalid", source, entry)
                byte_ids[BYTE_PIECES[p]] = i
            elif t == USER_DEFINED:
                user.append(p)
        if self.unk_id < 0:
            raise ModelFormatError("unk is not defined", source)
        if self.byte_fallback and len(byte_ids) != 256:
            raise ModelFormatError(
                "there are not 256 byte pieces although byte_fallback is true", source)
        self.byte_ids = np.array([byte_ids.get(b, self.unk_id) for b in range(256)], dtype=np.int32)
        self.user_defined = user
        if np.isnan(self.scores).any():
            raise ModelFormatError("a piece score is NaN", source)


    def symbols(self):
        """``(cp_to_sym int32[0x110000], ws_inside)``: the symbol of each code point (a
        single-character piece's id, else ``n_pieces + code point``, an unknown symbol)
        and whether some piece holds a ``▁`` after its first character."""
        if getattr(self, "cp_to_sym", None) is None:
            n = len(self.pieces)
            cp_to_sym = np.arange(n, n + N_CODEPOINTS, dtype=np.int32)
            for p, i in self.piece_to_id_map.items():
                if len(p) == 1:
                    cp_to_sym[ord(p)] = i
            self.cp_to_sym = cp_to_sym
            self.ws_inside = any(WS in p[1:] for p, t in zip(self.pieces, self.types.tolist())
                                 if t in (NORMAL, USER_DEFINED, UNUSED))
        return self.cp_to_sym, self.ws_inside

    def tables(self, sym_map=None, byte_level=False, vocab_size=None) -> KernelTables:
        """The pair table: every two-part split of every mergeable piece, ranked by the dense
        rank of the made piece's score (highest first)."""
        if self._tables is not None:
            return self._tables
        types = self.types
        mergeable = (types == NORMAL) | (types == USER_DEFINED) | (types == UNUSED)
        pid = self.piece_to_id_map
        cp_to_sym, _ = self.symbols()
        lefts, rights, made, scores = [], [], [], []
        for i in np.nonzero(mergeable)[0].tolist():
            p = self.pieces[i]
            for k in range(1, len(p)):
                a, b = p[:k], p[k:]
                sa = int(cp_to_sym[ord(a)]) if k == 1 else pid.get(a, -1)
                sb = int(cp_to_sym[ord(b)]) if len(b) == 1 else pid.get(b, -1)
                # Multi-character symbols only arise by merging, so they are mergeable pieces.
                if sa < 0 or sb < 0:
                    continue
                if (k > 1 and not mergeable[sa]) or (len(b) > 1 and not mergeable[sb]):
                    continue
                lefts.append(sa)
                rights.append(sb)
                made.append(i)
                scores.append(self.scores[i])
        made = np.array(made, dtype=np.int32)
        scores = np.array(scores, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")
        _, dense = np.unique(-scores, return_inverse=True)
        merges = (np.stack([np.array(lefts, np.int32), np.array(rights, np.int32)], axis=1)[order]
                  if len(made) else np.zeros((0, 2), np.int32))
        dense_sorted = dense[order].astype(np.int64)
        # Distinct pieces sharing a score: only the heap path breaks ties by position.
        per_piece = dict(zip(made[order].tolist(), dense_sorted.tolist()))
        tie = len(set(per_piece.values())) < len(per_piece)
        self.merges, self.merge_ids = merges, made[order]
        self._tables = KernelTables(merges, self.merge_ids, ranks=dense_sorted,
                                    long_piece=1 if tie else LONG_PIECE)
        return self._tables

    # ------------------------------------------------------------------ after the kernel
    def postprocess(self, ids, offsets):
        """Unused pieces -> their parts; unknown characters -> bytes, or one unk per run."""
        n = len(self.pieces)
        if len(ids) and (self.types[np.minimum(ids, n - 1)] == UNUSED).any():
            ids, offsets = self._resegment_unused(ids, offsets)
        unknown = ids >= n
        if not unknown.any():
            return ids, offsets
        doc_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        if self.byte_fallback:
            cps = (ids[unknown] - n).astype(np.int64)
            nbytes = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
            reps = np.ones(len(ids), dtype=np.int64)
            reps[unknown] = nbytes
            out = np.repeat(ids, reps)
            start = np.cumsum(reps) - reps
            chars = "".join(map(chr, cps.tolist()))
            raw = np.frombuffer(chars.encode("utf-8", "surrogatepass"), dtype=np.uint8)
            pos = np.repeat(start[unknown], nbytes) + (
                np.arange(len(raw)) - np.repeat(np.cumsum(nbytes) - nbytes, nbytes))
            out[pos] = self.byte_ids[raw]
            new_counts = np.bincount(doc_of, weights=reps, minlength=len(offsets) - 1)
        else:
            prev_unknown = np.zeros(len(ids), dtype=bool)
            prev_unknown[1:] = unknown[:-1] & (doc_of[1:] == doc_of[:-1])
            keep = ~(unknown & prev_unknown)
            out = np.where(unknown, self.unk_id, ids)[keep]
            new_counts = np.bincount(doc_of[keep], minlength=len(offsets) - 1)
        new_offsets = np.zeros(len(offsets), dtype=np.int64)
        np.cumsum(new_counts.astype(np.int64), out=new_offsets[1:])
        return out.astype(np.int32), new_offsets

    def _resegment_unused(self, ids, offsets):
        """SentencePiece splits an UNUSED piece back into the two symbols that made it."""
        out, counts = [], []
        for d in range(len(offsets) - 1):
            doc = []
            for i in ids[offsets[d]:offsets[d + 1]].tolist():
                self._expand_unused(i, doc)
            out.extend(doc)
            counts.append(len(doc))
        new_offsets = np.zeros(len(offsets), dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        return np.array(out, dtype=np.int32), new_offsets

    def _expand_unused(self, i, out):
        n = len(self.pieces)
        if i >= n or self.types[i] != UNUSED or len(self.pieces[i]) < 2:
            out.append(i)
            return
        split = self._unused_split.get(i)
        if split is None:
            split = self._last_merge(self.pieces[i])
            self._unused_split[i] = split
        if split is None:
            out.append(i)
            return
        self._expand_unused(split[0], out)
        self._expand_unused(split[1], out)

    def _last_merge(self, piece: str):
        """The pair whose merge completes ``piece`` when the piece is encoded on its own."""
        from .kernels.hashing import pair_key, table_get

        t = self.tables()
        keys, vals = t.keys, t.vals
        cp_to_sym, _ = self.symbols()
        syms = [int(cp_to_sym[ord(c)]) for c in piece]
        last = None
        while len(syms) > 1:
            best, bi = -1, -1
            for j in range(len(syms) - 1):
                v = int(table_get(keys, vals, pair_key(syms[j], syms[j + 1]), -1))
                if v >= 0 and (bi < 0 or (v >> 32) < (best >> 32)):
                    best, bi = v, j
            if bi < 0:
                return None
            last = (syms[bi], syms[bi + 1])
            syms[bi:bi + 2] = [best & 0xFFFFFFFF]
        return last



class SentencePieceLevel:
    """SentencePiece's alphabet and split: code points as symbols (a single-character
    piece's id, else an unknown symbol ``n_pieces + code point`` that ``postprocess``
    resolves), user-defined pieces as frozen pieces, a cut before each ``▁``."""

    kind = "pieces"
    pattern = None

    def __init__(self, model: PieceModel, escape_whitespaces=True):
        self.model = model
        self.escape_whitespaces = bool(escape_whitespaces)
        self._sym_map = None
        user = sorted(model.user_defined, key=lambda s: (-len(s), s))
        self._user_re = re.compile("|".join(re.escape(u) for u in user)) if user else None

    def __getstate__(self):
        return {"model": self.model, "escape_whitespaces": self.escape_whitespaces}

    def __setstate__(self, state):
        self.__init__(state["model"], state["escape_whitespaces"])

    def __eq__(self, other):
        return (isinstance(other, SentencePieceLevel) and self.model == other.model
                and self.escape_whitespaces == other.escape_whitespaces)

    @property
    def sym_map(self) -> np.ndarray:
        """The identity over every symbol (pieces, then unknown code points): the units are
        symbol ids already."""
        if self._sym_map is None:
            self._sym_map = np.arange(len(self.model.pieces) + N_CODEPOINTS, dtype=np.int32)
        return self._sym_map

    def scanned(self) -> bool:
        return False

    def layout(self, texts, specials, allowed, disallowed, normalizer, where=None,
               errors: str = "strict", n_threads: int = 1):
        """The layout of ``texts`` (normalized here), symbols as int32 units (one thread)."""
        texts = [normalizer.normalize(check_str(t, i)) for i, t in enumerate(texts)]
        cp_to_sym, ws_inside = self.model.symbols()
        n_docs = len(texts)
        user_re = self._user_re
        joined = "".join(texts)
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        data = cp_to_sym[cps] if len(cps) else np.zeros(0, np.int32)
        lengths = np.fromiter((len(s) for s in texts), dtype=np.int64, count=n_docs)
        doc_start = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_start[1:])
        bounds = [doc_start]
        special_starts, special_ends, special_ids = [], [], []
        if user_re is not None:
            pid = self.model.piece_to_id_map
            for d, s in enumerate(texts):
                base = int(doc_start[d])
                for m in user_re.finditer(s):
                    special_starts.append(base + m.start())
                    special_ends.append(base + m.end())
                    special_ids.append(pid[m.group()])
            bounds.append(np.array(special_starts, dtype=np.int64))
            bounds.append(np.array(special_ends, dtype=np.int64))
        if self.escape_whitespaces and not ws_inside and len(cps):
            bounds.append(np.nonzero(cps == ord(WS))[0].astype(np.int64))
        cuts = np.unique(np.concatenate(bounds))
        if special_starts:
            # Cuts inside a user-defined piece are removed (it is one frozen symbol).
            ss = np.array(special_starts, dtype=np.int64)
            se = np.array(special_ends, dtype=np.int64)
            k = np.searchsorted(ss, cuts, side="right") - 1
            inside = (k >= 0) & (cuts > ss[np.maximum(k, 0)]) & (cuts < se[np.maximum(k, 0)])
            cuts = cuts[~inside]
        piece_offsets = cuts.astype(np.int64)
        n_pieces = len(piece_offsets) - 1
        piece_special = np.full(max(n_pieces, 0), -1, dtype=np.int32)
        if special_starts:
            idx = np.searchsorted(piece_offsets, np.array(special_starts, dtype=np.int64))
            piece_special[idx] = np.array(special_ids, dtype=np.int32)
        # Documents -> first piece; empty documents own no piece.
        doc_piece_offsets = np.searchsorted(piece_offsets, doc_start).astype(np.int64)
        if n_pieces <= 0:
            piece_offsets = np.zeros(1, dtype=np.int64)
            piece_special = np.zeros(0, dtype=np.int32)
            doc_piece_offsets = np.zeros(n_docs + 1, dtype=np.int64)
        return data.astype(np.int32), piece_offsets, piece_special, doc_piece_offsets


class SentencePieceDecoder:
    """``SentencePieceProcessor::Decode`` as bytes, then UTF-8 with SentencePiece's
    replacement (one U+FFFD per byte that does not start a valid character)."""

    def __init__(self, model: PieceModel, unk_surface=None, add_dummy_prefix=True,
                 remove_extra_whitespaces=True):
        self.model = model
        unk = DEFAULT_UNK_SURFACE if unk_surface is None else unk_surface
        self._unk = unk.encode("utf-8")
        self._strip_first = add_dummy_prefix or remove_extra_whitespaces
        self._keep_seen = not remove_extra_whitespaces
        self.unused = None

    def check_ids(self, ids) -> np.ndarray:
        return checked_ids(ids, len(self.model.pieces))

    def stream(self):
        """A function id -> bytes (None for an unknown id), with Decode's state: only the
        text's first piece loses its leading ``▁``."""
        pieces, types = self.model.pieces, self.model.types.tolist()
        n = len(pieces)
        state = {"emitted": 0, "first": True, "seen": False}

        def push(i: int):
            if not 0 <= i < n:
                return None
            t = types[i]
            if t == BYTE:
                state["emitted"] += 1
                return bytes([BYTE_PIECES[pieces[i]]])
            if state["seen"] or state["emitted"]:
                state["first"] = False
            state["seen"] = False
            if t == CONTROL:
                return b""
            if t == UNKNOWN:
                out = self._unk
            else:
                p = pieces[i]
                if state["first"] and self._strip_first and p.startswith(WS):
                    p = p[1:]
                    state["seen"] = self._keep_seen
                out = p.replace(WS, " ").encode("utf-8")
            state["emitted"] += len(out)
            return out

        return push

    def decode_bytes(self, ids) -> bytes:
        push = self.stream()
        return b"".join([push(i) for i in self.check_ids(ids).tolist()])

    def decode(self, ids, errors: str = "replace") -> str:
        data = self.decode_bytes(ids)
        if errors == "replace":
            return decode_bytes_sp(data)
        return codecs.utf_8_decode(data, errors, True)[0]
