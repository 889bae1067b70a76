"""Interoperability entry points: tiktoken ranks files and Hugging Face tokenizer files.

``Tokenizer.to_tiktoken`` / ``to_huggingface`` and ``fastbpe_nb.from_tiktoken`` /
``from_huggingface`` are thin wrappers around these functions.
"""

from __future__ import annotations

from .huggingface_format import load_huggingface, save_huggingface
from .tiktoken_format import load_tiktoken, save_tiktoken


def to_tiktoken(tok, path, allow_lossy: bool = False) -> None:
    """Write ``tok``'s regular tokens as a ``.tiktoken`` ranks file (rank = id).

    The format has no place for the pattern or the special tokens (pass them to tiktoken),
    nor for a normalization: a tokenizer with ``normalization=`` raises LossyExportError
    unless ``allow_lossy=True`` (then it warns; see ``save_tiktoken``).
    """
    save_tiktoken(tok, path, allow_lossy)


def from_tiktoken(path, pattern, special_tokens=None):
    """Load a ``.tiktoken`` ranks file (``merge_mode="ranks"``, tiktoken's exact rule).

    ``pattern`` must be given (the file does not record it): ``"cl100k"``, ``"o200k"``,
    ``"gpt2"``, a regex string or None. ``special_tokens``: ``{token: id}`` with ids from
    the number of ranks on (gaps allowed, as in cl100k_base), or a list of strings numbered
    from there.
    """
    return load_tiktoken(path, pattern, special_tokens)


def to_huggingface(tok, path) -> None:
    """Write ``tok`` as a Hugging Face ``tokenizer.json`` (byte mode, ``merge_mode="pairs"``;
    its normalization as an NFC / NFKC normalizer, its special tokens with their ids)."""
    save_huggingface(tok, path)


def from_huggingface(path, merges=None):
    """Load a byte-level BPE ``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``."""
    return load_huggingface(path, merges)
