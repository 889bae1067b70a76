"""SentencePiece's normalizer (``normalizer.cc``), a part of the SentencePiece preset.

User-defined pieces are kept verbatim; elsewhere the precompiled charsmap's longest rule
applies (``nmt_nfkc`` etc.; ``identity`` has none); with ``remove_extra_whitespaces``
leading and trailing spaces go and runs of spaces become one; spaces become ``▁`` and a
dummy ``▁`` is prefixed (``add_dummy_prefix``).
"""

from __future__ import annotations

import re

import numpy as np

WS = "\u2581"  # ▁
#: Code points: the size of the trigger table.
N_CODEPOINTS = 0x110000


class SentencePieceNormalizer:
    """SentencePiece's normalizer (``normalizer.cc``): charsmap rules (``rules``: {source:
    replacement}), user-defined pieces kept verbatim, whitespace handling."""

    identity = False

    def __init__(self, rules: dict, user_defined=(), add_dummy_prefix=True,
                 remove_extra_whitespaces=True, escape_whitespaces=True):
        self._rules = dict(rules)
        self.user_defined = list(user_defined)
        self.add_dummy_prefix = bool(add_dummy_prefix)
        self.remove_extra_whitespaces = bool(remove_extra_whitespaces)
        self.escape_whitespaces = bool(escape_whitespaces)
        self._norm = None

    def __getstate__(self):
        return {**self.__dict__, "_norm": None}

    def __eq__(self, other):
        return isinstance(other, SentencePieceNormalizer) and self.__getstate__() == other.__getstate__()

    def _setup(self):
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
        return [(u, plain) for u, plain, _, _ in self._unit_spans(text)]

    def _unit_spans(self, text: str):
        """``_units`` with each unit's source span: ``(str, is_plain_run, start, end)``."""
        rules, maxlen, user_re, trig, is_trig, user_at = self._setup()
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
            return [(text, True, 0, len(text))]
        cands = np.unique(np.concatenate(cands)).tolist()
        units = []
        pos = 0
        n = len(text)
        for c in cands:
            if c < pos:
                continue
            if c > pos:
                units.append((text[pos:c], True, pos, c))
                pos = c
            if user_re is not None:
                m = user_re.match(text, c)
                if m:
                    units.append((m.group(), False, c, m.end()))
                    pos = m.end()
                    continue
            for L in range(min(maxlen, n - c), 0, -1):
                rep = rules.get(text[c:c + L])
                if rep is not None:
                    units.append((rep, False, c, c + L))
                    pos = c + L
                    break
            else:
                units.append((text[c], True, c, c + 1))
                pos = c + 1
        if pos < n:
            units.append((text[pos:], True, pos, n))
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

    def normalize_aligned(self, text: str):
        """``(normalize(text), (src_start, src_end))``: for normalized character j, the
        characters ``text[src_start[j]:src_end[j]]`` it came from (Hugging Face's alignment:
        a rule's output points at the whole matched source, the dummy ``▁`` at the first
        character kept). Mirrors ``normalize`` step by step on (char, start, end) records."""
        out = self.normalize(text)
        rem = self.remove_extra_whitespaces
        space = WS if self.escape_whitespaces else " "
        units = []  # per unit: its records and whether it is a plain run
        for u, plain, a, b in self._unit_spans(text) if text else ():
            recs = ([(c, a + i, a + i + 1) for i, c in enumerate(u)] if plain
                    else [(c, a, b) for c in u])
            units.append((recs, plain))

        def lstrip(recs):
            k = 0
            while k < len(recs) and recs[k][0] == " ":
                k += 1
            return recs[k:]

        def collapse(recs):  # re.sub(" {2,}", " ", u): a run keeps its first space
            return [r for k, r in enumerate(recs)
                    if not (r[0] == " " and k and recs[k - 1][0] == " ")]

        if rem:  # heading units: plain runs lose leading spaces, one-space units go
            while units:
                recs, plain = units[0]
                if plain:
                    recs = lstrip(recs)
                    if recs:
                        units[0] = (recs, True)
                        break
                    units.pop(0)
                elif [r[0] for r in recs] == [" "]:
                    units.pop(0)
                else:
                    break
        kept = []
        prev_space = rem
        for recs, plain in units:
            if plain:
                if rem:
                    if prev_space:
                        recs = lstrip(recs)
                    if not recs:
                        continue
                    recs = collapse(recs)
                    prev_space = recs[-1][0] == " "
            else:
                if prev_space:
                    recs = lstrip(recs)
                if recs:
                    prev_space = recs[-1][0] == " "
                if not rem:
                    prev_space = False
                if not recs:
                    continue
            kept.extend((space if c == " " and self.escape_whitespaces else c, a, b)
                        for c, a, b in recs)
        if rem:
            while kept and kept[-1][0] == space:
                kept.pop()
        if rem:  # a collapsed run of spaces points at its last space, as HF's Replace does
            starts = {a for _, a, _ in kept}
            for k, (c, a, b) in enumerate(kept):
                if b == a + 1 and text[a] == " ":
                    while a + 1 < len(text) and text[a + 1] == " " and a + 1 not in starts:
                        a += 1
                    kept[k] = (c, a, a + 1)
        if self.add_dummy_prefix and kept:
            kept.insert(0, (space, kept[0][1], kept[0][2]))
        if "".join(r[0] for r in kept) != out:  # a rule this mirror does not follow
            return out, coarse_alignment(out, len(text))
        return out, (np.array([r[1] for r in kept], dtype=np.int64),
                     np.array([r[2] for r in kept], dtype=np.int64))


def coarse_alignment(normalized: str, n_source: int):
    """Every normalized character pointing at the whole source (when no finer alignment
    is known): offsets then cover the text, never a wrong part of it."""
    m = len(normalized)
    return np.zeros(m, dtype=np.int64), np.full(m, n_source, dtype=np.int64)
