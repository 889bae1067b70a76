"""The Tokenizer's file verbs: its own model file and the formats of other libraries.

A mixin of ``Tokenizer`` (kept out of tokenizer.py, which holds the encode/decode core);
each verb delegates to its writer in ``io/``.
"""

from __future__ import annotations


class FileVerbs:
    """``save``, ``to_tiktoken``, ``to_huggingface``, ``to_sentencepiece``."""

    def save(self, path) -> None:
        """Write the model as one versioned JSON document (atomically); ``fb.load`` reads it."""
        from .io.model_file import save_model

        save_model(self, path)

    def to_tiktoken(self, path, allow_lossy: bool = False) -> None:
        """Write the regular tokens as a tiktoken ``.tiktoken`` ranks file (rank = id).

        A normalizing tokenizer raises LossyExportError (the format cannot hold the
        normalization) unless ``allow_lossy=True``, which warns instead.
        """
        from .io.tiktoken_format import save_tiktoken

        save_tiktoken(self, path, allow_lossy)

    def to_huggingface(self, path) -> None:
        """Write a Hugging Face ``tokenizer.json`` (byte level, merge_mode="pairs")."""
        from .io.huggingface_export import save_huggingface

        save_huggingface(self, path)

    def to_sentencepiece(self, path) -> None:
        """Write a SentencePiece ``.model`` file (SentencePiece preset only)."""
        from .io.sentencepiece_model import save_sentencepiece

        save_sentencepiece(self, path)
