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
