"""fastbpe_nb: exact, fast byte-pair-encoding tokenizers on Numba kernels.

>>> import fastbpe_nb as fb
>>> tok = fb.train(["aaabdaaabac"], vocab_size=259, pattern=None)
>>> tok.encode("aaabac")
[258, 97, 99]

Importing this package compiles nothing and does not import pyarrow: kernels compile (or
load from Numba's cache) on first use.
"""

from typing import TYPE_CHECKING

from .errors import (
    CorpusReadError,
    DisallowedSpecialTokenError,
    EncodeOptionsError,
    FastBPEError,
    InvalidUTF8Error,
    LossyExportError,
    ModelFormatError,
    OutOfMemoryError,
    OutputError,
    PatternError,
    TokenIdTypeError,
    TokenRoleError,
    TrainingError,
    UnknownCharacterError,
    UnknownTokenError,
    UnsupportedInputError,
)
from .errors import MemoryBudgetError

# The public functions and classes are imported on first use (PEP 562): ``import
# fastbpe_nb`` costs almost nothing (0.16 s -> 0.003 s measured: not even NumPy is
# imported), and a process that only loads and encodes never imports the trainers, the
# SentencePiece code or the Parquet writers. Name -> the module that defines it.
_LAZY = {
    "read_bin": "io.bin_files",
    "encode_parquet": "io.encode_files",
    "read_tokens": "io.token_readers",
    "load": "load_any",
    "from_huggingface": "loaders",
    "from_tiktoken": "loaders",
    "NAMED_PATTERNS": "pretokenize",
    "split": "pretokenize",
    "SentencePieceBPE": "sentencepiece_style",
    "from_sentencepiece": "sentencepiece_style",
    "sentencepiece_tokenizer": "sentencepiece_style",
    "to_sentencepiece": "sentencepiece_style",
    "train_sentencepiece": "sentencepiece_train",
    "StreamDecoder": "decoder",
    "Tokenizer": "tokenizer",
    "count_to_file": "training",
    "merge_counts_files": "io.counts_file",
    "train": "training",
    "train_files": "training",
}


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, eagerly
    from .decoder import StreamDecoder
    from .io.bin_files import read_bin
    from .io.encode_files import encode_parquet
    from .io.token_readers import read_tokens
    from .load_any import load
    from .loaders import from_huggingface, from_tiktoken
    from .pretokenize import NAMED_PATTERNS, split
    from .sentencepiece_style import (SentencePieceBPE, from_sentencepiece,
                                      sentencepiece_tokenizer, to_sentencepiece)
    from .sentencepiece_train import train_sentencepiece
    from .tokenizer import Tokenizer
    from .io.counts_file import merge_counts_files
    from .training import count_to_file, train, train_files


def __getattr__(name: str):
    """A lazily imported public name, or a submodule (``fastbpe_nb.pretokenize``) imported
    on attribute access as it was when this package imported everything eagerly."""
    import importlib
    import importlib.util

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "CorpusReadError",
    "DisallowedSpecialTokenError",
    "EncodeOptionsError",
    "FastBPEError",
    "InvalidUTF8Error",
    "LossyExportError",
    "ModelFormatError",
    "NAMED_PATTERNS",
    "OutOfMemoryError",
    "OutputError",
    "PatternError",
    "SentencePieceBPE",
    "StreamDecoder",
    "TokenIdTypeError",
    "TokenRoleError",
    "Tokenizer",
    "TrainingError",
    "UnknownCharacterError",
    "UnknownTokenError",
    "UnsupportedInputError",
    "MemoryBudgetError",
    "count_to_file",
    "merge_counts_files",
    "encode_parquet",
    "from_huggingface",
    "from_sentencepiece",
    "from_tiktoken",
    "read_bin",
    "read_tokens",
    "sentencepiece_tokenizer",
    "load",
    "split",
    "to_sentencepiece",
    "train",
    "train_files",
    "train_sentencepiece",
]
