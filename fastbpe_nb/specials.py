"""Special tokens: their ids, tiktoken's allowed/disallowed policy, and finding them in text.

A special token is a string with an id of its own after the regular tokens. In text it is
recognised only where the caller allows it (``allowed_special``); by default its text
raises DisallowedSpecialTokenError, and ``disallowed_special=()`` encodes it as plain
text (tiktoken's policy).
"""

from __future__ import annotations

import numpy as np

from . import pretokenize
from .errors import DisallowedSpecialTokenError, ModelFormatError

#: At most this many ids between the regular tokens and the largest special id may be
#: unused (real vocabularies leave a few: cl100k's specials are 100257..100260 and 100276,
#: after 100256 ranks); a far larger id is a typo that would inflate every table.
MAX_UNUSED_IDS = 1 << 16


def check_special_tokens(special_tokens, first_id: int, entry: str = "special_tokens",
                          source=None) -> dict[str, int]:
    """Normalise ``special_tokens`` (strings, or a {token: id} mapping) to {token: id}.

    Strings are numbered from ``first_id`` (the number of regular tokens). Explicit ids may
    be any unused ids from ``first_id`` on, gaps included (tiktoken's cl100k_base and
    o200k_base have gaps): unique, not a regular token's id, below 2**31 (ids are int32),
    and leaving at most ``MAX_UNUSED_IDS`` ids unused. Raises ValueError (ModelFormatError
    naming ``source`` and ``entry`` when ``source`` is given, i.e. read from a file).
    """
    def fail(reason):
        if source is not None:
            raise ModelFormatError(reason, source, entry)
        raise ValueError(reason)

    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a sequence of strings or a {token: id} dict, not a str")
    if isinstance(special_tokens, dict):
        items = list(special_tokens.items())
    else:
        items = [(t, first_id + i) for i, t in enumerate(special_tokens)]
    out: dict[str, int] = {}
    ids = set()
    for token, tid in items:
        if not isinstance(token, str) or not token:
            fail(f"special token {token!r}: must be a non-empty str")
        if token in out:
            fail(f"special token {token!r} is given twice")
        if isinstance(tid, (bool, np.bool_)) or not isinstance(tid, (int, np.integer)):
            fail(f"special token {token!r}: id {tid!r} is not an integer")
        tid = int(tid)
        if tid in ids:
            fail(f"special token {token!r}: id {tid} is used twice")
        if not first_id <= tid < 2**31:
            where = (f"the id of a regular token (0..{first_id - 1})" if 0 <= tid < first_id
                     else "negative" if tid < 0 else "not below 2**31 (ids are int32)")
            fail(f"special token {token!r} has id {tid}, which is {where}; special token ids "
                 f"must be >= {first_id}: right after the {first_id} regular tokens, or later "
                 "(unused ids may be left between them)")
        ids.add(tid)
        out[token] = tid
    if ids:
        unused = max(ids) + 1 - first_id - len(ids)
        if unused > MAX_UNUSED_IDS:
            bad = max(out, key=out.get)
            fail(f"special token {bad!r} has id {out[bad]}, which would leave {unused:,} ids "
                 f"unused after the {first_id} regular tokens (at most {MAX_UNUSED_IDS:,} may "
                 "be): a special token id must be close to the regular ones")
    return out


class SpecialTokens:
    """The special tokens of a tokenizer (``ids``: {token: id}) and their matchers."""

    def __init__(self, ids: dict[str, int]):
        self.ids = ids
        self.all = pretokenize.SpecialTokenMatcher(ids)
        self._matchers = {}

    def __getstate__(self):
        return {"ids": self.ids}

    def __setstate__(self, state):
        self.__init__(state["ids"])

    def vocab(self, token_bytes: list) -> list:
        """The bytes of every id: the regular tokens', then the special tokens' UTF-8 at their
        ids; ids no token has (gaps between special ids) hold None (decoding one is an error)."""
        size = max([len(token_bytes)] + [tid + 1 for tid in self.ids.values()])
        vocab = list(token_bytes) + [None] * (size - len(token_bytes))
        for token, tid in self.ids.items():
            vocab[tid] = token.encode("utf-8")
        return vocab

    def sets(self, allowed_special, disallowed_special) -> tuple[frozenset, frozenset]:
        """The allowed and disallowed tokens of an encode call (``"all"`` or names)."""
        names = set(self.ids)
        if allowed_special == "all":
            allowed = names
        else:
            allowed = set(allowed_special)
            unknown = allowed - names
            if unknown:
                raise ValueError(f"allowed_special names unregistered tokens: {sorted(unknown)[:5]}")
        disallowed = names - allowed if disallowed_special == "all" else set(disallowed_special)
        return frozenset(allowed), frozenset(disallowed)

    def matcher(self, tokens: frozenset):
        """A SpecialTokenMatcher of ``tokens`` (None when empty), cached for a few sets."""
        if not tokens:
            return None
        matcher = self._matchers.get(tokens)
        if matcher is None:
            matcher = self.all if tokens == frozenset(self.ids) else pretokenize.SpecialTokenMatcher(tokens)
            if len(self._matchers) < 32:
                self._matchers[tokens] = matcher
        return matcher

    @staticmethod
    def check_disallowed(text, disallowed_m, index=0, where=None):
        """Raise DisallowedSpecialTokenError for the first disallowed token in ``text``.

        ``where`` is None for a single text, else ``(label, base)``: the error then names
        the ``label`` (document or row) ``base + index``.
        """
        hit = disallowed_m.first(text)
        if hit is not None:
            err = DisallowedSpecialTokenError(hit[1], hit[0])
            if where is not None:
                label, base = where
                err.args = (f"{label} {base + index}: {err.args[0]}",)
                setattr(err, label, base + index)
            raise err

    def candidate_rows(self, data: np.ndarray, doc_offsets: np.ndarray,
                       tokens: frozenset) -> np.ndarray:
        """Rows (sorted, distinct) of documents given as bytes (``uint8`` data, ``int64``
        offsets into it) that may contain one of ``tokens``: a superset (a prefix may run
        into the next row; empty when there are no tokens). Vectorised: the positions of
        each prefix's first byte, narrowed by its next bytes, then their rows. Arrow's
        ``match_substring`` took 35 ms on 24 MB of text; this takes a few."""
        if not tokens or len(doc_offsets) < 2:
            return np.zeros(0, dtype=np.int64)
        lo, hi = int(doc_offsets[0]), int(doc_offsets[-1])
        found = []
        for prefix in self.matcher(frozenset(tokens)).prefixes:
            p = prefix.encode("utf-8")
            if hi - lo < len(p):
                continue
            at = np.flatnonzero(data[lo:hi - len(p) + 1] == p[0]) + lo
            for k in range(1, len(p)):
                at = at[data[at + k] == p[k]]
            found.append(at)
        if not found:
            return np.zeros(0, dtype=np.int64)
        # The last row starting at or before each position holds it (empty rows never do).
        rows = np.searchsorted(doc_offsets, np.concatenate(found), side="right") - 1
        return np.unique(rows).astype(np.int64)
