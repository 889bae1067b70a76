"""Loading tokenizers from files: ``fb.load`` recognises the format; one loader per format.

The ``io/`` codecs parse and validate a file into Tokenizer arguments; this module, above
the Tokenizer, builds the Tokenizer from them (so no codec imports the Tokenizer).
"""

from __future__ import annotations

import json
import os

from .errors import ModelFormatError
from .io.huggingface_format import load_huggingface
from .io.model_file import read_model
from .io.tiktoken_format import load_tiktoken
from .layout import ByteLevel
from .sentencepiece_style import from_sentencepiece, from_sentencepiece_bytes
from .text import UnicodeNormalizer
from .tokenizer import Tokenizer

__all__ = ["from_huggingface", "from_tiktoken", "load"]


def build(spec: dict, model_file: bool = False) -> Tokenizer:
    """The Tokenizer of parsed arguments (a SentencePiece one: ``{"sentencepiece": bytes}``).

    ``model_file``: a ValueError (a pattern the file names that is no valid regex or name)
    becomes a ModelFormatError naming the file's "pattern" entry.
    """
    if "sentencepiece" in spec:
        return from_sentencepiece_bytes(spec["sentencepiece"], spec.get("_source"))
    source = spec.get("_source")
    if "model" in spec:  # a codec that validated by building the model (tiktoken ranks)
        level = ByteLevel(spec["pattern"], spec["byte_order"], source)
        return Tokenizer.from_parts(spec["model"], level, UnicodeNormalizer(),
                                    special_tokens=spec["special_tokens"], source=source)
    if not model_file:
        return Tokenizer(**spec)
    try:
        return Tokenizer(**spec)
    except ModelFormatError:
        raise
    except ValueError as exc:  # a pattern the file names that is not a valid regex / name
        raise ModelFormatError(str(exc), source, "pattern") from None


def load(path) -> Tokenizer:
    """Load a tokenizer file: our model JSON (``Tokenizer.save``, every preset) or a
    SentencePiece ``.model``. Other formats are named with their loader in the error: a
    Hugging Face ``tokenizer.json`` (``from_huggingface``), a ``.tiktoken`` file, which does
    not record its pattern (``from_tiktoken``).

    Raises ModelFormatError naming the file (and the entry) when it is not valid, or names
    the right loader when the file is another format.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if path.endswith(".tiktoken") or path.endswith(".tiktoken.gz"):
        raise ModelFormatError("a .tiktoken ranks file does not record its pre-tokenization "
                               "pattern: load it with fb.from_tiktoken(path, pattern=...)", path)
    if path.endswith(".model"):
        return from_sentencepiece(path)
    if head.lstrip().startswith(b"{") and not _is_ours(path):
        raise ModelFormatError("not a fastbpe_nb model file: this looks like a Hugging Face "
                               "tokenizer.json / vocab.json; load it with "
                               "fb.from_huggingface(path)", path, "format")
    return build(read_model(path), model_file=True)  # the model reader names any problem


def _is_ours(path) -> bool:
    """Whether a JSON file is our model document (its "format" key), without parsing it all
    twice: our writer puts ``"format"`` first."""
    with open(path, "rb") as f:
        head = f.read(256).decode("utf-8", "replace")
    if '"format"' in head:
        return True
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except (ValueError, RecursionError):
        return True  # let our reader name the JSON error
    return not (isinstance(doc, dict) and ("model" in doc or all(isinstance(v, int) for v in doc.values())))


def from_tiktoken(path, pattern, special_tokens=None) -> Tokenizer:
    """Load a ``.tiktoken`` ranks file (``merge_mode="ranks"``, tiktoken's exact rule).

    ``pattern`` must be given (the file does not record it): ``"cl100k"``, ``"o200k"``,
    ``"gpt2"``, a regex string or None. ``special_tokens``: ``{token: id}`` with ids from
    the number of ranks on (gaps allowed, as in cl100k_base), or a list of strings numbered
    from there.
    """
    return build(load_tiktoken(path, pattern, special_tokens))


def from_huggingface(path, merges=None) -> Tokenizer:
    """Load a byte-level BPE ``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``."""
    return build(load_huggingface(path, merges))
