"""Loading tokenizers from files: one loader per format (``fb.load``, in ``load_any``,
recognises the format and calls these).

The ``io/`` codecs parse and validate a file into Tokenizer arguments; this module, above
the Tokenizer, builds the Tokenizer from them (so no codec imports the Tokenizer).
"""

from __future__ import annotations

from .errors import ModelFormatError
from .io.pretrained import pretrained_spec
from .io.tiktoken_format import load_tiktoken
from .layout import ByteLevel
from .sentencepiece_style import from_sentencepiece_bytes
from .text import UnicodeNormalizer
from .tokenizer import Tokenizer

__all__ = ["build", "from_huggingface", "from_tiktoken"]


def build(spec: dict, model_file: bool = False) -> Tokenizer:
    """The Tokenizer of parsed arguments (a SentencePiece one: ``{"sentencepiece": bytes}``).

    ``model_file``: a ValueError (a pattern the file names that is no valid regex or name)
    becomes a ModelFormatError naming the file's "pattern" entry.
    """
    if "sentencepiece" in spec:  # roles: None gives the ones its ModelProto names
        return from_sentencepiece_bytes(spec["sentencepiece"], spec.get("_source"),
                                        spec.get("roles"))
    source = spec.get("_source")
    if "pruned" in spec:  # vocabulary pruning: the full tokenizer, then the removed ids
        from .pruning import build_pruned

        return build_pruned(spec, lambda full: build(full, model_file))
    if "model" in spec:  # a codec that validated by building the model (tiktoken ranks)
        level = ByteLevel(spec["pattern"], spec["byte_order"], source)
        return Tokenizer.from_parts(spec["model"], level, UnicodeNormalizer(),
                                    special_tokens=spec["special_tokens"], source=source,
                                    roles=spec.get("roles"))
    if spec.get("superword") is not None:  # BoundlessBPE (a model file's "superword")
        from .boundless import tokenizer_from_spec

        return tokenizer_from_spec(spec)
    if not model_file:
        return Tokenizer(**spec)
    try:
        return Tokenizer(**spec)
    except ModelFormatError:
        raise
    except ValueError as exc:  # a pattern the file names that is not a valid regex / name
        raise ModelFormatError(str(exc), source, "pattern") from None


def from_tiktoken(path, pattern, special_tokens=None, roles=None) -> Tokenizer:
    """Load a ``.tiktoken`` ranks file (``merge_mode="ranks"``, tiktoken's exact rule).

    ``pattern`` must be given (the file does not record it): ``"cl100k"``, ``"o200k"``,
    ``"gpt2"``, tiktoken's encoding names (``"cl100k_base"``, ``"o200k_base"``,
    ``"r50k_base"``, ``"p50k_base"``), a regex string or None. ``special_tokens``:
    ``{token: id}`` with ids from the number of ranks on (gaps allowed, as in cl100k_base),
    or a list of strings numbered from there. ``roles`` (``fastbpe_nb.roles``): by default
    ``<|endoftext|>``, when it is one of the special tokens, is the EOS token (as in
    OpenAI's encodings); ``{}`` sets none.
    """
    spec = load_tiktoken(path, pattern, special_tokens)
    if roles is None:
        roles = {"eos": "<|endoftext|>"} if "<|endoftext|>" in spec["special_tokens"] else {}
    spec["roles"] = roles
    return build(spec)


def from_huggingface(path, merges=None, roles=None) -> Tokenizer:
    """Load a byte-level BPE ``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``
    (``path``: either file, or a folder holding them, e.g. a ``save_pretrained`` one).

    ``roles`` (``fastbpe_nb.roles``): by default read from the ``tokenizer_config.json`` /
    ``special_tokens_map.json`` (and chat template) beside the file, none without them;
    ``{}`` sets none.
    """
    return build(pretrained_spec(path, merges, roles))
