"""BoundlessBPE's model (``fastbpe_nb.boundless`` trains it): merges with supermerge flags,
the encoder's post step that joins superwords and the model file's ``"superword"`` entry
(exports are refused in ``io.variant_exports``). Kept apart from the trainer so that the
I/O modules can import it without importing the Tokenizer.

Why only the ``gpt2`` and ``cl100k`` patterns: with them a superword (word, then a space
and letters) can never be a token made inside one pre-token, nor can its two tokens meet
inside one, so the ordinary encoder may keep the supermerges in its rank table (they never
fire there) and ids are never shared between the two kinds. Other patterns do not promise
that (o200k splits ``fooBar`` into two word pre-tokens), so they are refused.
"""

from __future__ import annotations

import numpy as np
import regex

from . import pretokenize
from .errors import ModelFormatError, TrainingError
from .model import MergeModel, token_arrays

#: The pre-tokenization patterns BoundlessBPE trains and encodes with (see the docstring).
BOUNDLESS_PATTERNS = ("gpt2", "cl100k")
#: A pre-token that may be one half of a superword: an optional leading space and letters
#: (``reference.BOUNDLESS_WORD``; the kernels test it with the scanner's class table).
_WORD = regex.compile(r" ?\p{L}+")


def check_boundless_pattern(pattern, where: str = "boundless=True"):
    """The resolved pattern, or TrainingError when BoundlessBPE cannot use it."""
    resolved = pretokenize.resolve_pattern("gpt2" if pattern == "default" else pattern)
    allowed = {pretokenize.resolve_pattern(p): p for p in BOUNDLESS_PATTERNS}
    if resolved not in allowed:
        raise TrainingError(f"{where} needs pattern 'gpt2' or 'cl100k', not {pattern!r}: with "
                            "other patterns a superword could also be an ordinary token")
    return resolved


def parse_superword(doc: dict, n_merges: int, source=None) -> np.ndarray:
    """The model file's ``"superword"`` entry (the ranks of the supermerges, ascending) as
    ``bool[n_merges]``; ModelFormatError naming the entry and the reason otherwise."""
    ranks = doc["superword"]
    if not isinstance(ranks, list) or any(
            isinstance(k, bool) or not isinstance(k, int) for k in ranks):
        raise ModelFormatError("superword must be a list of merge ranks (integers)", source,
                               "superword")
    for i, k in enumerate(ranks):
        if not 0 <= k < n_merges:
            raise ModelFormatError(f"rank {k} is not one of the {n_merges} merges", source,
                                   f"superword[{i}]")
        if i and k <= ranks[i - 1]:
            raise ModelFormatError(f"rank {k} after {ranks[i - 1]}: the ranks must rise",
                                   source, f"superword[{i}]")
    for key, want in (("base", "bytes"), ("merge_mode", "pairs"), ("normalization", None),
                      ("byte_order", None)):
        if doc.get(key, want if key == "merge_mode" else None) != want:
            raise ModelFormatError(f"a BoundlessBPE model (superword) needs {key} "
                                   f"{'null' if want is None else repr(want)}", source, key)
    flags = np.zeros(n_merges, dtype=bool)
    flags[ranks] = True
    return flags


#: ``_SAFE_FIRST[b]``: a piece starting with byte ``b`` is no ``BOUNDLESS_WORD`` (an ASCII
#: byte other than a letter or the space), so it never joins the piece before it.
_SAFE_FIRST = np.ones(256, dtype=bool)
_SAFE_FIRST[0x80:] = False
_SAFE_FIRST[[0x20, *range(0x41, 0x5B), *range(0x61, 0x7B)]] = False


def safe_cut(data: np.ndarray, pieces: np.ndarray) -> int:
    """The largest ``k >= 1`` such that a document's bytes ``data`` may be cut before its
    piece ``k`` (``pieces``: the piece offsets, int64, of a prefix of it; ``pieces[-1]`` may
    be the start of the next piece), or 0 when none may.

    The post step joins two adjacent pieces only if both are single word tokens; the piece
    after the cut is none, so no superword spans it and the choices on either side are
    independent. Pre-tokenizing the part before the cut alone gives its word pieces
    unchanged (the gpt2 and cl100k patterns look ahead only to end whitespace runs, which
    never join), so each segment's post step joins exactly what the whole text's does."""
    inner = pieces[1:]
    inner = inner[inner < len(data)]
    safe = np.flatnonzero(_SAFE_FIRST[data[inner]])
    return int(safe[-1]) + 1 if len(safe) else 0


def word_token(token: bytes) -> bool:
    """Whether a token's bytes are a ``BOUNDLESS_WORD`` (valid UTF-8: space? letters)."""
    try:
        return _WORD.fullmatch(token.decode("utf-8")) is not None
    except UnicodeDecodeError:
        return False


def is_boundless(tok) -> bool:
    return isinstance(getattr(tok, "model", None), BoundlessModel)


class BoundlessModel(MergeModel):
    """Merges with supermerge flags; ``postprocess`` joins superwords after the ordinary
    encoder (which keeps the supermerges in its rank table: with the allowed patterns they
    never fire inside a pre-token, see the module docstring)."""

    def __init__(self, merges, base_bytes, superword, pattern, source=None, _derived=None):
        super().__init__(merges, base_bytes, "pairs", source, _derived=_derived)
        superword = np.asarray(superword)
        if superword.dtype != bool or superword.shape != (len(self.merges),):
            raise ModelFormatError(f"superword must be {len(self.merges)} booleans, one per "
                                   f"merge, not {superword.dtype} of shape {superword.shape}",
                                   source, "superword")
        self.superword = superword.copy()
        self.superword.setflags(write=False)
        self.pattern = pattern
        tokens = self.token_bytes
        # Each token of a supermerge checked once, then the supermerges at once (a loop over
        # them took 2 of the 4 ms a trained model of 2 k supermerges took to build).
        sup = np.flatnonzero(superword)
        pairs = self.merges[sup]
        used = np.unique(pairs).tolist()
        is_word = np.zeros(len(tokens), dtype=bool)
        spaced = np.zeros(len(tokens), dtype=bool)
        is_word[used] = [word_token(tokens[t]) for t in used]
        spaced[used] = [tokens[t][:1] == b" " for t in used]
        # With gpt2 / cl100k two word pre-tokens meet only before a space (the letters of
        # the first would have taken the second's): the right token starts with one.
        bad = ~is_word[pairs[:, 0]] | ~is_word[pairs[:, 1]] | ~spaced[pairs[:, 1]]
        if bad.any():
            j = int(np.argmax(bad))
            k, (a, b) = int(sup[j]), (int(x) for x in pairs[j])
            for side, t in (("left", a), ("right", b)):
                if not is_word[t]:
                    raise ModelFormatError(
                        f"supermerge {k} ({a}, {b}): its {side} token {tokens[t]!r:.40} is not "
                        "a word pre-token (an optional space and letters)", source,
                        f"merges[{k}]")
            raise ModelFormatError(
                f"supermerge {k} ({a}, {b}): its right token {tokens[b]!r:.40} does not "
                "start with a space, so the two tokens are never neighbouring pre-tokens",
                source, f"merges[{k}]")
        made = self.merge_ids[superword]
        if len(np.unique(made)) != len(made) or np.isin(made, self.merge_ids[~superword]).any():
            raise ModelFormatError("a supermerge makes a token that another merge makes too",
                                   source, "superword")
        self._post = None

    def __getstate__(self):
        return {**super().__getstate__(), "_post": None}

    def __eq__(self, other):  # the same merges with other supermerge flags encode otherwise
        return (super().__eq__(other) is True
                and np.array_equal(self.superword, other.superword))

    __hash__ = None

    def _post_tables(self):
        from .kernels.hashing import build_rank_table, interleave_table

        if self._post is None:
            tok_off, tok_data = token_arrays(self.token_bytes)
            joinable = np.fromiter(map(word_token, self.token_bytes), np.uint8,
                                   len(self.token_bytes))
            sel = np.flatnonzero(self.superword)
            keys, vals = build_rank_table(np.ascontiguousarray(self.merges[sel]),
                                          np.ascontiguousarray(self.merge_ids[sel]))
            self._post = (np.asarray(tok_off, np.int64), np.asarray(tok_data, np.uint8),
                          joinable, interleave_table(keys, vals))
        return self._post

    def postprocess(self, ids, doc_offsets):
        """``(ids, offsets)`` of the ordinary encoder -> with superwords joined: the
        documents' bytes are pre-tokenized again (segments cut at special tokens, as the
        encoder cut them), so a pre-token that is exactly one token is found."""
        from .kernels.boundless import join_superwords, token_bytes_of
        from .parallel import call_kernel

        if not self.superword.any() or len(ids) < 2:
            return ids, doc_offsets
        tok_off, tok_data, joinable, table = self._post_tables()
        ids = np.ascontiguousarray(ids, np.int32)
        doc_offsets = np.ascontiguousarray(doc_offsets, np.int64)
        data, tok_start, seg_bytes, seg_tok = call_kernel(
            token_bytes_of, ids, doc_offsets, tok_off, tok_data, len(self.token_bytes))
        pieces, seg_pieces = pretokenize.piece_offsets(data, seg_bytes, self.pattern, 1)
        return call_kernel(join_superwords, ids, doc_offsets, tok_start, seg_tok, pieces,
                           seg_pieces, joinable, table)

    # The Encoder reads this: a superword spans two pieces, so a huge document is cut
    # into segments only where no superword can span the cut (and there is no per-piece
    # memo, whose pieces are encoded out of context).
    postprocess.safe_cut = safe_cut
