"""SentencePiece-style BPE: ``▁`` whitespace pieces, byte fallback, and ``.model`` files.

A :class:`SentencePieceBPE` is a list of pieces with scores and types, exactly as in a
SentencePiece ``ModelProto``. Encoding follows SentencePiece's BPE model
(``bpe_model.cc``) to the id:

1. **Normalize** (``normalizer.cc``): user-defined pieces are kept verbatim; otherwise the
   precompiled charsmap's longest rule applies (``nmt_nfkc`` etc.; ``identity`` has none);
   with ``remove_extra_whitespaces`` leading/trailing spaces go and runs of spaces become
   one; spaces become ``▁`` and a dummy ``▁`` is prefixed (``add_dummy_prefix``).
2. **Split** the normalized text into characters, user-defined pieces frozen as one symbol.
3. **Merge** by piece score: repeatedly join the adjacent pair whose concatenation is a
   piece with the highest score (leftmost on equal scores). This runs in the Numba kernel
   ``kernels.encode.encode_batch`` with a pair table built from every two-part split of
   every piece, ranked by the score of the piece it makes.
4. **Unknown characters** become their UTF-8 bytes as ``<0xXX>`` pieces with
   ``byte_fallback``; otherwise each run of unknown characters becomes one ``<unk>`` id.

Decoding follows ``SentencePieceProcessor::Decode``: control pieces vanish, ``<unk>``
becomes ``" ⁇ "``, ``▁`` becomes a space (the leading one of the text is dropped when the
model adds a dummy prefix), and runs of byte pieces are decoded as UTF-8 with one U+FFFD
per invalid byte.

Training (:func:`train_sentencepiece`) uses our exact BPE trainer on words split where
SentencePiece splits them (a ``▁`` starts a new word; with ``split_digits`` every digit is
its own word; characters below ``character_coverage`` split words and are left to byte
fallback), and orders the vocabulary as SentencePiece's BPE trainer does.
"""

from __future__ import annotations

import collections
import os
import re

import numpy as np

from .errors import ModelFormatError, TrainingError
from .validation import check_num_threads, checked_ids
from .io import sentencepiece_model as spm_io
from .io.sentencepiece_model import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
)

__all__ = [
    "SentencePieceBPE",
    "from_sentencepiece",
    "from_sentencepiece_bytes",
    "to_sentencepiece",
]

WS = "\u2581"  # ▁
DEFAULT_UNK_SURFACE = " \u2047 "
#: Code points get symbol ids ``n_pieces + code point`` when they are not pieces.
N_CODEPOINTS = 0x110000
LONG_PIECE = 48
CACHE_BITS = 12
_LOW32 = np.int64(0xFFFFFFFF)


def _byte_piece(b: int) -> str:
    return f"<0x{b:02X}>"


_BYTE_PIECES = {_byte_piece(b): b for b in range(256)}


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


def _decode_bytes_sp(buf: bytes) -> str:
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


class SentencePieceBPE:
    """A SentencePiece BPE model: pieces, scores, types and the normalizer settings.

    Build one with :func:`from_sentencepiece` (a ``.model`` file) or
    :func:`train_sentencepiece`; save it with :meth:`to_sentencepiece`.
    """

    def __init__(self, pieces, scores, types, *, byte_fallback=True, add_dummy_prefix=True,
                 remove_extra_whitespaces=True, escape_whitespaces=True, split_digits=False,
                 unk_surface=None, normalizer_name="identity", precompiled_charsmap=b"",
                 character_coverage=1.0, max_piece_length=16, source=None,
                 _model: spm_io.SentencePieceModel | None = None):
        self.pieces = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32)
        self.types = np.asarray(types, dtype=np.int8)
        self.byte_fallback = bool(byte_fallback)
        self.add_dummy_prefix = bool(add_dummy_prefix)
        self.remove_extra_whitespaces = bool(remove_extra_whitespaces)
        self.escape_whitespaces = bool(escape_whitespaces)
        self.split_digits = bool(split_digits)
        self.unk_surface = unk_surface
        self.normalizer_name = normalizer_name
        self.precompiled_charsmap = bytes(precompiled_charsmap)
        self.character_coverage = character_coverage
        self.max_piece_length = max_piece_length
        self._model = _model
        self._source = source
        self._validate(source)
        self._tables = None
        self._norm = None

    # ------------------------------------------------------------------ validation / setup

    def _validate(self, source):
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
                if p not in _BYTE_PIECES:
                    raise ModelFormatError(f"byte piece {p!r} is invalid", source, entry)
                byte_ids[_BYTE_PIECES[p]] = i
            elif t == USER_DEFINED:
                user.append(p)
        if self.unk_id < 0:
            raise ModelFormatError("unk is not defined", source)
        if self.byte_fallback and len(byte_ids) != 256:
            raise ModelFormatError(
                "there are not 256 byte pieces although byte_fallback is true", source)
        self.byte_ids = np.array([byte_ids.get(b, self.unk_id) for b in range(256)], dtype=np.int32)
        self.user_defined = user
        if self.precompiled_charsmap:
            self._rules = spm_io.decode_charsmap(self.precompiled_charsmap, source)
        else:
            self._rules = {}
        if np.isnan(self.scores).any():
            raise ModelFormatError("a piece score is NaN", source)

    @property
    def vocab(self) -> list[str]:
        """The pieces, index = id (``▁`` marks a space; bytes are ``<0xXX>``)."""
        return list(self.pieces)

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def piece_to_id(self, piece: str) -> int:
        return self.piece_to_id_map.get(piece, self.unk_id)

    def id_to_piece(self, token_id: int) -> str:
        return self.pieces[token_id]

    def _build_tables(self):
        """The pair table, the code point -> symbol map, and the unused-piece splits."""
        if self._tables is not None:
            return self._tables
        from .kernels.encode import build_byte_pairs, sweep_rank_count
        from .kernels.hashing import build_rank_table

        n = len(self.pieces)
        types = self.types
        mergeable = (types == NORMAL) | (types == USER_DEFINED) | (types == UNUSED)
        pid = self.piece_to_id_map
        cp_to_sym = np.arange(n, n + N_CODEPOINTS, dtype=np.int32)
        for p, i in pid.items():
            if len(p) == 1:
                cp_to_sym[ord(p)] = i
        lefts, rights, made, scores = [], [], [], []
        ws_inside = False
        for i in np.nonzero(mergeable)[0].tolist():
            p = self.pieces[i]
            if len(p) < 2:
                continue
            if WS in p[1:]:
                ws_inside = True
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
        # Rank = dense rank of the made piece's score, highest score first.
        order = np.argsort(-scores, kind="stable")
        uniq, dense = np.unique(-scores, return_inverse=True)
        merges = np.stack([np.array(lefts, np.int32), np.array(rights, np.int32)], axis=1)[order] \
            if len(made) else np.zeros((0, 2), np.int32)
        keys, vals = build_rank_table(np.ascontiguousarray(merges, dtype=np.int32),
                                      np.ascontiguousarray(made[order], dtype=np.int32))
        occupied = keys != -1
        r = vals[occupied] >> 32
        dense_sorted = dense[order].astype(np.int64)
        vals[occupied] = (dense_sorted[r] << 32) | (vals[occupied] & _LOW32)
        # Distinct pieces sharing a score: only the heap path breaks ties by position.
        made_sorted = made[order]
        tie = False
        if len(made_sorted):
            per_piece = {}
            for piece_id, d in zip(made_sorted.tolist(), dense_sorted.tolist()):
                per_piece[piece_id] = d
            tie = len(set(per_piece.values())) < len(per_piece)
        long_piece = 1 if tie else LONG_PIECE
        sym_map = np.arange(n + N_CODEPOINTS, dtype=np.int32)
        self._tables = {
            "keys": keys, "vals": vals, "cp_to_sym": cp_to_sym, "sym_map": sym_map,
            "long_piece": long_piece, "sweep_ranks": 0 if tie else int(sweep_rank_count(keys, vals)),
            "split_ws": self.escape_whitespaces and not ws_inside,
            "unused_split": {},
            "byte_pairs": build_byte_pairs(keys, vals),
        }
        return self._tables

    # ------------------------------------------------------------------ normalization

    def _norm_setup(self):
        if self._norm is not None:
            return self._norm
        rules = self._rules
        trig = set()
        maxlen = 0
        for k in rules:
            maxlen = max(maxlen, len(k))
            if len(k) == 1:
                trig.add(k)
            else:
                trig.update(k[1:])
        is_trig = None
        if trig:
            is_trig = np.zeros(N_CODEPOINTS, dtype=bool)
            is_trig[np.array([ord(c) for c in trig], dtype=np.int64)] = True
        user = sorted(self.user_defined, key=lambda s: (-len(s), s))
        user_re = re.compile("|".join(re.escape(u) for u in user)) if user else None
        # Every position where some user-defined piece starts (overlapping ones too).
        user_at = re.compile("(?=" + user_re.pattern + ")") if user else None
        self._norm = (rules, maxlen, user_re, frozenset(trig), is_trig, user_at)
        return self._norm

    def _units(self, text: str):
        """``NormalizePrefix`` applied along ``text``: a list of ``(str, is_plain_run)``.

        Plain runs are stretches of characters that no rule and no user-defined piece
        touches (each of their characters is its own unit).
        """
        rules, maxlen, user_re, trig, is_trig, user_at = self._norm_setup()
        # Candidate starts: a rule of length L >= 2 has a "trigger" at its second
        # character, a one-character rule starts at one; user-defined pieces are found
        # directly. Everything between candidates is copied as is.
        cands = []
        if is_trig is not None and not trig.isdisjoint(text):
            cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            hits = np.nonzero(is_trig[cps])[0]
            cands.append(hits)
            cands.append(hits[hits > 0] - 1)
        if user_at is not None:
            starts = [m.start() for m in user_at.finditer(text)]
            if starts:
                cands.append(np.array(starts, dtype=np.int64))
        if not cands:
            return [(text, True)]
        cands = np.unique(np.concatenate(cands)).tolist()
        units = []
        pos = 0
        n = len(text)
        for c in cands:
            if c < pos:
                continue
            if c > pos:
                units.append((text[pos:c], True))
                pos = c
            if user_re is not None:
                m = user_re.match(text, c)
                if m:
                    units.append((m.group(), False))
                    pos = m.end()
                    continue
            for L in range(min(maxlen, n - c), 0, -1):
                rep = rules.get(text[c:c + L])
                if rep is not None:
                    units.append((rep, False))
                    pos = c + L
                    break
            else:
                units.append((text[c], True))
                pos = c + 1
        if pos < n:
            units.append((text[pos:], True))
        return units

    def normalize(self, text: str) -> str:
        """The normalized text SentencePiece's BPE model sees (spaces as ``▁``)."""
        if not text:
            return ""
        rem = self.remove_extra_whitespaces
        space = WS if self.escape_whitespaces else " "
        units = self._units(text)
        if len(units) == 1 and units[0][1]:  # fast path: no rule applies
            s = units[0][0]
            if rem:
                s = s.lstrip(" ")
                if not s:
                    return ""
                s = re.sub(" {2,}", " ", s)
            out = (space if self.add_dummy_prefix else "") + s.replace(" ", space)
            return out.rstrip(space) if rem else out
        if rem:  # heading units that are exactly one space are dropped
            k = 0
            while k < len(units):
                u, plain = units[k]
                if plain:
                    stripped = u.lstrip(" ")
                    if stripped:
                        units[k] = (stripped, True)
                        break
                    k += 1
                elif u == " ":
                    k += 1
                else:
                    break
            units = units[k:]
            if not units:
                return ""
        out = [space] if self.add_dummy_prefix else []
        prev_space = rem
        for u, plain in units:
            if plain:
                if rem:
                    if prev_space:
                        u = u.lstrip(" ")
                    if not u:
                        continue
                    u = re.sub(" {2,}", " ", u)
                    prev_space = u.endswith(" ")
            else:
                if prev_space:
                    u = u.lstrip(" ")
                if u:
                    prev_space = u.endswith(" ")
                if not rem:
                    prev_space = False
                if not u:
                    continue
            out.append(u.replace(" ", space) if self.escape_whitespaces else u)
        s = "".join(out)
        return s.rstrip(space) if rem else s

    # ------------------------------------------------------------------ encoding

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, identical to ``SentencePieceProcessor.encode(text)``."""
        return self.encode_batch([text])[0]

    def encode_to_numpy(self, text: str) -> np.ndarray:
        """``encode`` as a ``uint32`` NumPy array (the same ids, no Python list)."""
        ids, offsets = self._encode_flat([self.normalize(_check_str(text, 0))])
        return np.ascontiguousarray(ids[offsets[0]:offsets[1]], dtype=np.uint32)

    def encode_as_pieces(self, text: str) -> list[str]:
        return [self.pieces[i] for i in self.encode(text)]

    def encode_batch(self, texts, num_threads=None):
        """Encode many documents in one kernel call; returns ``list[list[int]]``.

        A pyarrow string array is accepted too (its nulls encode as empty documents).
        """
        check_num_threads(num_threads)
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a list of str, not one str")
        module = type(texts).__module__ or ""
        if module.startswith("pyarrow"):
            texts = _arrow_rows(texts)
        ids, offsets = self._encode_flat([self.normalize(_check_str(t, i))
                                          for i, t in enumerate(texts)], num_threads)
        return [ids[offsets[d]:offsets[d + 1]].tolist() for d in range(len(offsets) - 1)]

    def _encode_flat(self, normalized: list[str], num_threads=None):
        from .kernels.encode import encode_batch, encode_serial
        from .parallel import run_encode

        t = self._build_tables()
        n = len(self.pieces)
        n_docs = len(normalized)
        # Model-level split: user-defined pieces are frozen symbols (PrefixMatch).
        user_re = self._norm_setup()[2]
        texts = normalized
        joined = "".join(texts)
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        data = t["cp_to_sym"][cps] if len(cps) else np.zeros(0, np.int32)
        lengths = np.fromiter((len(s) for s in texts), dtype=np.int64, count=n_docs)
        doc_start = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_start[1:])
        bounds = [doc_start]
        special_starts, special_ends, special_ids = [], [], []
        if user_re is not None:
            pid = self.piece_to_id_map
            for d, s in enumerate(texts):
                base = int(doc_start[d])
                for m in user_re.finditer(s):
                    special_starts.append(base + m.start())
                    special_ends.append(base + m.end())
                    special_ids.append(pid[m.group()])
            bounds.append(np.array(special_starts, dtype=np.int64))
            bounds.append(np.array(special_ends, dtype=np.int64))
        if t["split_ws"] and len(cps):
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
        args = (data.astype(np.int32), t["sym_map"], piece_offsets, piece_special,
                doc_piece_offsets, t["keys"], t["vals"], np.zeros(0, np.int64),
                np.zeros(1, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.int64),
                t["byte_pairs"], 0.0, 0,
                t["long_piece"],
                t["sweep_ranks"], CACHE_BITS)
        ids, offsets = run_encode(encode_batch, encode_serial, num_threads or os.cpu_count() or 1,
                                  n_docs, args, 4)
        return self._postprocess(ids, offsets)

    def _postprocess(self, ids, offsets):
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
        split = self._tables["unused_split"].get(i)
        if split is None:
            split = self._last_merge(self.pieces[i])
            self._tables["unused_split"][i] = split
        if split is None:
            out.append(i)
            return
        self._expand_unused(split[0], out)
        self._expand_unused(split[1], out)

    def _last_merge(self, piece: str):
        """The pair whose merge completes ``piece`` when the piece is encoded on its own."""
        t = self._tables
        keys, vals = t["keys"], t["vals"]
        from .kernels.hashing import table_get, pair_key

        syms = [int(t["cp_to_sym"][ord(c)]) for c in piece]
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

    # ------------------------------------------------------------------ decoding

    def decode(self, ids) -> str:
        """Text of ``ids``, identical to ``SentencePieceProcessor.decode(ids)``.

        ``ids``: any iterable of ints, a NumPy integer array or a pyarrow integer array; a
        non-integer entry raises TokenIdTypeError, an unknown id UnknownTokenError, naming
        its position.
        """
        n = len(self.pieces)
        pieces, types = self.pieces, self.types
        unk_surface = DEFAULT_UNK_SURFACE if self.unk_surface is None else self.unk_surface
        strip_bos = self.add_dummy_prefix or self.remove_extra_whitespaces
        text: list[str] = []
        text_len = 0
        byte_run = bytearray()
        is_bos_ws = True
        bos_ws_seen = False
        # Any iterable of ints, NumPy or pyarrow integers; bools, floats, strs, nulls and
        # ids outside 0..n-1 raise naming their position.
        for i in checked_ids(ids, n).tolist():
            t = types[i]
            if t == BYTE:
                byte_run.append(_BYTE_PIECES[pieces[i]])
                continue
            if byte_run:
                s = _decode_bytes_sp(bytes(byte_run))
                text.append(s)
                text_len += len(s)
                byte_run = bytearray()
            if bos_ws_seen or text_len:
                is_bos_ws = False
            if t == CONTROL:
                bos_ws_seen = False
                continue
            if t == UNKNOWN:
                s = unk_surface
                bos_ws_seen = False
            else:
                p = pieces[i]
                bos_ws_seen = False
                if is_bos_ws and strip_bos and p.startswith(WS):
                    p = p[1:]
                    bos_ws_seen = not self.remove_extra_whitespaces
                s = p.replace(WS, " ")
            text.append(s)
            text_len += len(s)
        if byte_run:
            text.append(_decode_bytes_sp(bytes(byte_run)))
        return "".join(text)

    def decode_batch(self, batch) -> list[str]:
        return [self.decode(ids) for ids in batch]

    # ------------------------------------------------------------------ export

    def to_sentencepiece(self, path) -> None:
        """Write a ``.model`` file that ``sentencepiece.SentencePieceProcessor`` loads."""
        from .io.atomic import atomic_write

        with atomic_write(path) as f:
            f.write(self.to_model_proto())

    save = to_sentencepiece

    def to_model_proto(self) -> bytes:
        m = self._model
        if m is not None and m.raw_trainer_spec is not None:
            trainer = m.raw_trainer_spec
            normalizer = m.raw_normalizer_spec
            denorm = m.raw_denormalizer_spec
        else:
            unk = self.unk_id
            bos = self.piece_to_id_map.get("<s>", -1)
            eos = self.piece_to_id_map.get("</s>", -1)
            pad = self.piece_to_id_map.get("<pad>", -1)
            controls = [p for p, t in zip(self.pieces, self.types.tolist())
                        if t == CONTROL and p not in ("<s>", "</s>", "<pad>")]
            trainer = spm_io.encode_trainer_spec(
                vocab_size=len(self.pieces), byte_fallback=self.byte_fallback,
                split_digits=self.split_digits, character_coverage=self.character_coverage,
                max_sentencepiece_length=self.max_piece_length, unk_id=unk, bos_id=bos,
                eos_id=eos, pad_id=pad, user_defined_symbols=self.user_defined,
                control_symbols=controls, unk_surface=self.unk_surface)
            normalizer = spm_io.encode_normalizer_spec(
                name=self.normalizer_name, precompiled_charsmap=self.precompiled_charsmap,
                add_dummy_prefix=self.add_dummy_prefix,
                remove_extra_whitespaces=self.remove_extra_whitespaces,
                escape_whitespaces=self.escape_whitespaces)
            denorm = None
        return spm_io.encode_model(self.pieces, self.scores, self.types, trainer, normalizer,
                                   denorm)

    def __repr__(self):
        return (f"SentencePieceBPE(vocab_size={len(self.pieces)}, byte_fallback={self.byte_fallback}, "
                f"normalizer={self.normalizer_name!r})")


def _arrow_rows(array) -> list[str]:
    """A pyarrow string array's rows as str (nulls as ""). Arrow does not guarantee UTF-8,
    and this tokenizer needs text: a row that is not UTF-8 raises InvalidUTF8Error naming
    it and the byte offset (never a bare UnicodeDecodeError)."""
    from .io.arrow_text import string_chunks, text_buffers
    from .tokenizer import _arrow_texts

    rows, base = [], 0
    for chunk in string_chunks(array):
        data, doc_offsets, _ = text_buffers(chunk)
        rows += _arrow_texts(chunk, data, doc_offsets, base, raw=False)
        base += len(chunk)
    return rows


def _check_str(text, index):
    if not isinstance(text, str):
        raise TypeError(f"document {index}: expected str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        from .text import clean_text

        text = clean_text(text)
    return text


# ---------------------------------------------------------------------- loading


def from_sentencepiece(path) -> SentencePieceBPE:
    """Load a SentencePiece BPE ``.model`` file.

    Raises ModelFormatError (naming ``path``) for malformed files, non-BPE models and
    unsupported options (``treat_whitespace_as_suffix``, a denormalizer).
    """
    model = spm_io.read_model(path)
    return _from_model(model, os.fspath(path))


def from_sentencepiece_bytes(buf: bytes, source=None) -> SentencePieceBPE:
    return _from_model(spm_io.parse_model(buf, source), source)


def _from_model(m: spm_io.SentencePieceModel, source) -> SentencePieceBPE:
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
    return SentencePieceBPE(
        m.pieces, m.scores, m.types, byte_fallback=m.byte_fallback,
        add_dummy_prefix=m.add_dummy_prefix,
        remove_extra_whitespaces=m.remove_extra_whitespaces,
        escape_whitespaces=m.escape_whitespaces, split_digits=m.split_digits,
        unk_surface=m.unk_surface, normalizer_name=m.normalizer_name,
        precompiled_charsmap=m.precompiled_charsmap,
        character_coverage=m.character_coverage if m.character_coverage is not None else 1.0,
        max_piece_length=m.max_sentencepiece_length or 16, source=source, _model=m)


def to_sentencepiece(tok: SentencePieceBPE, path) -> None:
    """Write ``tok`` as a SentencePiece ``.model`` file."""
    if not isinstance(tok, SentencePieceBPE):
        raise TypeError("to_sentencepiece needs a SentencePieceBPE (train it with "
                        "train_sentencepiece or fb.train(..., whitespace='▁'))")
    tok.to_sentencepiece(path)
