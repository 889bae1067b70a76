"""Vocabulary pruning after training (docs/variants.md, "Vocabulary pruning").

LiteToken (arXiv 2602.04706), Picky BPE (arXiv 2409.04599) and Scaffold-BPE (arXiv
2404.17808) observe that BPE keeps *intermediate* tokens: made by a merge only to become
part of a larger token, they are almost never what the final encoder outputs. Pruning
removes them and gives their ids back. ``reference.prune_select`` / ``encode_pruned`` are
the specification:

* **Which tokens.** The full (unpruned) encoder encodes the word table once; ``final[t]``
  counts how often it outputs token ``t``, ``total[t]`` how often ``t`` is a node of the
  construction trees of the output tokens (itself included). A merged token is removed when
  ``final[t] < min_count``, or when ``final[t] < ratio * total[t]`` (Picky-style: less than
  that share of its occurrences is the token on its own). Base symbols and special tokens
  are never removed.
* **Encoding stays exact BPE.** Every merge is still replayed by rank (the encoder, its
  kernel tables and caches are those of the unpruned model); each removed token in the
  output is then *demolished* into the parts of the lowest-rank merge that makes it,
  recursively, until only kept tokens remain (``kernels.prune.demolish_table``, computed
  once per model), and ids become compact: the kept regular tokens renumbered in id order,
  the special tokens after them, each moved down by the number of removed tokens. That
  post step is one vectorised gather per kernel call (``PrunedModel.postprocess``), hooked
  in where SentencePiece's byte fallback is: every entry point goes through it.

The kernel emits special-token ids itself, so it is given them in the unpruned numbering
(``encoder_specials``) and the post step moves them down with the rest.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .errors import ModelFormatError, TrainingError
from .model import MergeModel
from .parallel import call_kernel
from .specials import SpecialTokens
from .validation import check_num_threads


def check_prune_options(min_count, ratio) -> bool:
    """Validate ``prune_min_count`` / ``prune_ratio``; True when pruning is asked for."""
    if min_count is not None and (isinstance(min_count, bool) or not isinstance(
            min_count, (int, np.integer)) or min_count < 1):
        raise ValueError(f"prune_min_count must be an int >= 1 or None, got {min_count!r}")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(
            ratio, (int, float, np.integer, np.floating)) or not 0 < ratio <= 1):
        raise ValueError(f"prune_ratio must be a number in (0, 1] or None, got {ratio!r}")
    return min_count is not None or ratio is not None


def token_parts(full: MergeModel) -> tuple[np.ndarray, np.ndarray]:
    """``(left, right)`` int32[n_regular]: the parts of each merged token, from the
    lowest-rank merge that makes it (-1 for the base symbols)."""
    n = len(full.token_bytes)
    left = np.full(n, -1, dtype=np.int32)
    right = np.full(n, -1, dtype=np.int32)
    made, first = np.unique(np.asarray(full.merge_ids, dtype=np.int64), return_index=True)
    mask = made >= full.n_base  # a merge may remake a base symbol's bytes (char mode)
    made, first = made[mask], first[mask]
    left[made] = full.merges[first, 0]
    right[made] = full.merges[first, 1]
    return left, right


def select(final: np.ndarray, total: np.ndarray, n_base: int, min_count, ratio) -> np.ndarray:
    """The removed ids (int32, ascending): ``reference.prune_select``'s rule."""
    drop = np.zeros(len(final), dtype=bool)
    if min_count is not None:
        drop |= final < min_count
    if ratio is not None:
        # The reference compares ``final < ratio * total`` in Python floats: the same IEEE
        # doubles, so the same decisions (counts below 2**53 convert exactly).
        drop |= final.astype(np.float64) < float(ratio) * total.astype(np.float64)
    drop[:n_base] = False
    return np.flatnonzero(drop).astype(np.int32)


class PrunedModel:
    """A merge model with some merged tokens removed (see the module docstring).

    ``full``: the unpruned ``MergeModel`` (pairs mode), whose merges the encoder replays;
    ``pruned_ids``: the removed tokens' ids in its numbering (ascending). ``token_bytes``
    are the kept tokens in compact order; ``merges`` / ``merge_ids`` are the full model's,
    in the *unpruned* numbering (what the model file stores).
    """

    mode = "pairs"

    def __init__(self, full: MergeModel, removed, source=None):
        if not isinstance(full, MergeModel) or full.mode != "pairs":
            raise TrainingError("only a merge-pairs model (trained here, tokenizer.json or "
                                "our model file) can be pruned, not a tiktoken-ranks or "
                                "SentencePiece model")
        self.full = full
        self.pruned_ids = check_removed(removed, full.n_base, len(full.token_bytes), source)
        self.pruned_ids.setflags(write=False)
        self._build()

    def _build(self):
        full = self.full
        n = len(full.token_bytes)
        keep = np.ones(n, dtype=bool)
        keep[self.pruned_ids] = False
        self.n_base = full.n_base
        self.merges, self.merge_ids = full.merges, full.merge_ids
        self.kept_ids = np.flatnonzero(keep).astype(np.int32)  # compact id -> unpruned id
        self.token_bytes = [full.token_bytes[t] for t in self.kept_ids.tolist()]
        compact = np.cumsum(keep, dtype=np.int64).astype(np.int32) - 1
        left, right = token_parts(full)
        from .kernels.prune import demolish_table

        self._seq_off, self._seqs = call_kernel(demolish_table, keep, compact, left, right,
                                                int(full.n_base))

    def demolished(self, unpruned_id: int) -> list[int]:
        """The compact ids a regular unpruned token becomes."""
        return self._seqs[self._seq_off[unpruned_id]:self._seq_off[unpruned_id + 1]].tolist()

    @property
    def n_pruned(self) -> int:
        return len(self.pruned_ids)

    def __getstate__(self):
        return {"full": self.full, "pruned_ids": np.asarray(self.pruned_ids)}

    def __setstate__(self, state):
        self.full, self.pruned_ids = state["full"], state["pruned_ids"]
        self._build()

    def __eq__(self, other):
        return (isinstance(other, PrunedModel) and np.array_equal(self.merges, other.merges)
                and np.array_equal(self.pruned_ids, other.pruned_ids))

    __hash__ = None

    def tables(self, sym_map, byte_level: bool, vocab_size: int):
        """The full model's encoder tables (``vocab_size``: the pruned one's)."""
        return self.full.tables(sym_map, byte_level, vocab_size + self.n_pruned)

    def encoder_specials(self, specials: SpecialTokens) -> SpecialTokens:
        """The special tokens with the ids the kernel emits (unpruned numbering)."""
        return SpecialTokens({t: i + self.n_pruned for t, i in specials.ids.items()})

    def postprocess(self, ids: np.ndarray, doc_offsets: np.ndarray):
        """Demolish removed tokens and map to compact ids: ``(int32 ids, int64 offsets)``,
        one kernel pass per encode call (``kernels.prune.demolish_ids``; a NumPy version of
        six array passes cost 30% of the encoder's time)."""
        from .kernels.prune import demolish_ids

        return call_kernel(demolish_ids, ids, np.ascontiguousarray(doc_offsets, np.int64),
                           self._seq_off, self._seqs, int(self.n_pruned))


def check_removed(removed, n_base: int, n_regular: int, source=None) -> np.ndarray:
    """``removed`` as int32 ids, validated: integers, strictly ascending (sorted, unique),
    each a merged token (``n_base <= id < n_regular``). ModelFormatError names the entry."""
    items = list(removed)
    for k, t in enumerate(items):
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise ModelFormatError(f"pruned id {t!r:.30} is not an integer", source, f"pruned[{k}]")
        if not n_base <= t < n_regular:
            what = "a base symbol" if 0 <= t < n_base else "not a merged token's id"
            raise ModelFormatError(f"pruned id {t} is {what} (merged tokens are {n_base}.."
                                   f"{n_regular - 1}; base symbols and special tokens are "
                                   "never pruned)", source, f"pruned[{k}]")
        if k and t <= items[k - 1]:
            raise ModelFormatError(f"pruned ids must be ascending and unique: {t} follows "
                                   f"{items[k - 1]}", source, f"pruned[{k}]")
    return np.asarray(items, dtype=np.int32).reshape(-1)


def encoder_specials(model, specials: SpecialTokens) -> SpecialTokens:
    """The special tokens the encode kernel is given (a pruned model's are shifted)."""
    shift = getattr(model, "encoder_specials", None)
    return specials if shift is None else shift(specials)


def shifted_specials(special_tokens: dict, n: int) -> dict:
    return {t: int(i) + n for t, i in special_tokens.items()}


class PruningMixin:
    """The Tokenizer's pruning verbs and properties (a mixin, like ``FileVerbs``)."""

    @property
    def pruned_ids(self) -> list[int]:
        """Ids of the removed tokens in the unpruned numbering (empty: not pruned)."""
        ids = getattr(self.model, "pruned_ids", None)
        return [] if ids is None else ids.tolist()

    @property
    def pruned_tokens(self) -> list[bytes]:
        """The bytes of the removed tokens (``pruned_ids``' order)."""
        model = self.model
        return [model.full.token_bytes[t] for t in self.pruned_ids] if self.pruned_ids else []

    n_pruned = property(lambda self: len(self.pruned_ids),
                        doc="How many ids pruning freed (0: not pruned).")

    @property
    def unpruned(self):
        """The tokenizer before pruning (itself when not pruned): ``merges`` and
        ``merge_ids`` of a pruned tokenizer are its ids (they are the encoder's program)."""
        model = self.model
        if not isinstance(model, PrunedModel):
            return self
        full = self.__dict__.get("_unpruned")
        if full is None:
            specials = shifted_specials(self.special_tokens, model.n_pruned)
            full = type(self).from_parts(model.full, self.level, self.normalizer, None,
                                         specials, self.tie_break, None, self.roles or None)
            full.merge_counts = self.merge_counts
            self.__dict__["_unpruned"] = full
        return full

    def compact_id(self, unpruned_id: int):
        """The id of unpruned token ``unpruned_id`` in this tokenizer (None: removed)."""
        model = self.model
        if not isinstance(model, PrunedModel):
            return int(unpruned_id)
        if unpruned_id >= len(model.full.token_bytes):  # a special token
            return int(unpruned_id) - model.n_pruned
        k = int(np.searchsorted(model.kept_ids, unpruned_id))
        return k if k < len(model.kept_ids) and model.kept_ids[k] == unpruned_id else None

    def unpruned_id(self, compact_id: int) -> int:
        """The unpruned id of this tokenizer's token ``compact_id``."""
        model = self.model
        if not isinstance(model, PrunedModel):
            return int(compact_id)
        if compact_id >= self.n_regular:
            return int(compact_id) + model.n_pruned
        return int(model.kept_ids[compact_id])

    def pruned(self, texts, min_count=None, ratio=None, num_threads=None):
        """A new tokenizer without the merged tokens this corpus almost never gets.

        ``texts``: documents (str, or a pyarrow string array) or a ``{word: count}`` dict
        (pre-tokens taken as given). A merged token is removed when the full encoder outputs
        it fewer than ``min_count`` times on them, or less than ``ratio`` of its occurrences
        (docs/variants.md, "Vocabulary pruning"). Encoding still replays every merge; removed
        tokens are split into kept ones and ids are compact. See ``pruned_ids``.
        """
        if not check_prune_options(min_count, ratio):
            raise ValueError("pruned() needs min_count or ratio")
        if not isinstance(self.model, MergeModel) or self.model.mode != "pairs":
            raise TrainingError("only an unpruned merge-pairs tokenizer can be pruned (this "
                                f"one's model is {type(self.model).__name__}, mode "
                                f"{self.model.mode!r})")
        units, offsets, counts = self._pruning_words(texts, num_threads)
        return self._pruned_by(units, offsets, counts, min_count, ratio, num_threads)

    def _pruning_words(self, texts, num_threads):
        """The words to measure as encoder units: ``(units, offsets int64, counts int64)``."""
        from .text import clean_text
        from .word_table import count_corpus, count_words, iter_texts

        specials = list(self.special_tokens)
        if isinstance(texts, dict):
            words = texts
        elif self.base == "bytes" and self.normalization is None:
            counter = count_corpus(texts, self.pattern, specials, check_num_threads(num_threads))
            word_bytes, offsets, counts = counter.table()
            return word_bytes.astype(np.uint8), offsets, counts
        else:
            norm = self.normalizer
            docs = (norm.normalize(clean_text(t)) if isinstance(t, str) else t
                    for t in iter_texts(texts))
            words = count_words(docs, self.pattern, specials, keep_gaps=self.base == "bytes")
        words = {w: int(c) for w, c in words.items() if w}
        if self.base == "bytes":
            raw = [w.encode("utf-8", "surrogatepass") for w in words]
            units = np.frombuffer(b"".join(raw), dtype=np.uint8)
            lengths = np.fromiter(map(len, raw), np.int64, len(raw))
        else:
            parts = [self.level._symbols(w, 0) for w in words]
            units = np.concatenate(parts) if parts else np.zeros(0, np.int32)
            lengths = np.fromiter(map(len, parts), np.int64, len(parts))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return units, offsets, np.fromiter(words.values(), np.int64, len(words))

    def _pruned_by(self, units, offsets, counts, min_count, ratio, num_threads=None,
                   report=None):
        """The pruned tokenizer from a word table in encoder units (bytes or symbol ids)."""
        t0 = time.perf_counter()
        full = self.model
        n = len(full.token_bytes)
        docs = np.arange(len(offsets), dtype=np.int64)  # each word a document of one piece
        n_threads = check_num_threads(num_threads) or os.cpu_count() or 1
        ids, id_offsets = self._encoder.run((units, offsets, np.zeros(0, np.int32), docs),
                                            n_threads)
        final = np.zeros(n, dtype=np.int64)
        np.add.at(final, ids, np.repeat(np.asarray(counts, np.int64), np.diff(id_offsets)))
        left, right = token_parts(full)
        from .kernels.prune import occurrence_totals

        total = call_kernel(occurrence_totals, final, left, right, int(full.n_base))
        removed = select(final, total, full.n_base, min_count, ratio)
        tok = self.with_pruned(removed)
        if report is not None:
            report["pruned"] = {"removed": int(len(removed)), "vocab_size_before": self.vocab_size,
                                "vocab_size_after": tok.vocab_size,
                                "seconds": time.perf_counter() - t0}
        return tok

    def with_pruned(self, removed, source=None):
        """This (unpruned) tokenizer with the tokens ``removed`` (unpruned ids) taken out."""
        model = PrunedModel(self.model, removed, source)
        specials = shifted_specials(self.special_tokens, -model.n_pruned)
        tok = type(self).from_parts(model, self.level, self.normalizer, None, specials,
                                    self.tie_break, source, self.roles or None)
        tok.merge_counts = self.merge_counts
        return tok



class Pruning:
    """``train`` / ``train_files``' ``prune_min_count`` / ``prune_ratio``, validated before
    any work (``make``: None when not asked for); ``apply`` prunes the trained tokenizer on
    the word table it was trained on (no second pass over the corpus)."""

    def __init__(self, min_count, ratio):
        self.min_count, self.ratio = min_count, ratio

    @classmethod
    def make(cls, verb: str, min_count, ratio, transition=None, whitespace=None,
             boundless=False):
        if not check_prune_options(min_count, ratio):
            return None
        if boundless:
            raise TrainingError(f"{verb}(): pruning is not implemented for BoundlessBPE (its "
                                "supermerges are not in the word table pruning measures)")
        if transition is not None:
            raise TrainingError(f"{verb}(): pruning is not implemented for SuperBPE (its "
                                "stage-2 words are not the word table pruning measures)")
        if whitespace is not None:
            raise TrainingError(f"{verb}(): pruning is for byte- and char-level BPE, not "
                                "SentencePiece style (whitespace=)")
        return cls(min_count, ratio)

    @staticmethod
    def units(symbols) -> np.ndarray:
        """A copy of the word table's symbols as encoder units, taken before training (the
        merge kernel rewrites ``symbols`` in place): uint8 when they are bytes (a quarter
        of the table's memory), else int32 symbol ids."""
        if len(symbols) and int(symbols.max()) > 255:
            return np.array(symbols, dtype=np.int32)
        return symbols.astype(np.uint8)

    def apply(self, tok, units, offsets, counts, opts, report=None):
        """``tok`` pruned on the word table it was trained on (``units``: ``units()``)."""
        if tok.base != "bytes":
            units = units.astype(np.int32)  # the char-level encoder reads int32 symbol ids
        return tok._pruned_by(units, np.ascontiguousarray(offsets, np.int64), counts,
                              self.min_count, self.ratio, opts.num_threads, report)


def build_pruned(spec: dict, build):
    """The tokenizer of a parsed model file holding ``"pruned"``: the full tokenizer (its
    special tokens moved back up to the unpruned numbering, built by ``build``), then the
    removed ids taken out. Every problem is a ModelFormatError naming the file's entry."""
    spec = dict(spec)
    removed = spec.pop("pruned")
    source = spec.get("_source")
    check_removed(removed, 0, 2**31, source)  # integers, ascending, unique: then count them
    if spec.get("merge_mode", "pairs") != "pairs":
        raise ModelFormatError("a pruned model needs merge_mode 'pairs'", source, "pruned")
    spec["special_tokens"] = shifted_specials(spec.get("special_tokens") or {}, len(removed))
    return build(spec).with_pruned(removed, source)
