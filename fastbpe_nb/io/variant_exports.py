"""Refusing an export a format cannot express exactly, by the variant's name.

Every exporter calls ``refuse_variants`` first. A pruned tokenizer (docs/variants.md, "Vocabulary pruning") replays every merge and then
splits each removed token into kept ones: no format of another library has that step.
tiktoken's ranks and Hugging Face's BPE both produce every intermediate token the merges
make (HF's ``ignore_merges`` only skips merging for whole-word tokens), and a SentencePiece
model holds pieces with scores, no such split. Writing the kept tokens alone would encode
to other ids than ``tok``, so the export raises LossyExportError instead. A BoundlessBPE
tokenizer's supermerges join two pre-tokens: no other format merges across pre-tokens.
"""

from __future__ import annotations

from ..errors import LossyExportError


def refuse_variants(tok, fmt: str) -> None:
    """Raise LossyExportError naming the variant when ``tok`` is pruned or BoundlessBPE."""
    from ..boundless_model import is_boundless

    refuse_pruned(tok, fmt)
    if is_boundless(tok):
        raise LossyExportError(f"a BoundlessBPE tokenizer (boundless=True) cannot be written as "
                               f"{fmt}: the format has no supermerges (merges across "
                               "pre-tokens), so its encoder would give other ids; save() it")


def refuse_pruned(tok, fmt: str) -> None:
    """Raise LossyExportError naming vocabulary pruning when ``tok`` is pruned."""
    n = getattr(tok, "n_pruned", 0)
    if n:
        raise LossyExportError(
            f"{fmt} cannot express vocabulary pruning: this tokenizer replays all its merges "
            f"and then splits {n} removed tokens into kept ones, which {fmt} has no step for "
            "(it would output the removed tokens' bytes as other ids); save it with tok.save() "
            "(our model file keeps the pruning), or export the unpruned tokenizer")
