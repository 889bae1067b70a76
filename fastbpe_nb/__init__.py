"""fastbpe_nb: exact, fast byte-pair-encoding tokenizers on Numba kernels.

>>> import fastbpe_nb as fb
>>> tok = fb.train(["aaabdaaabac"], vocab_size=259, pattern=None)
>>> tok.encode("aaabac")
[258, 97, 99]

Importing this package compiles nothing and does not import pyarrow: kernels compile (or
load from Numba's cache) on first use.
"""

from .errors import (
    CorpusReadError,
    DisallowedSpecialTokenError,
    EncodeOptionsError,
    FastBPEError,
    InvalidUTF8Error,
    LossyExportError,
    ModelFormatError,
    OutputError,
    PatternError,
    TokenIdTypeError,
    TokenRoleError,
    TrainingError,
    UnknownCharacterError,
    UnknownTokenError,
    UnsupportedInputError,
)
from .io.bin_files import read_bin
from .io.encode_files import encode_parquet
from .io.token_readers import read_tokens
from .load_any import load
from .loaders import from_huggingface, from_tiktoken
from .pretokenize import NAMED_PATTERNS, split
from .sentencepiece_style import (
    SentencePieceBPE,
    from_sentencepiece,
    sentencepiece_tokenizer,
    to_sentencepiece,
)
from .sentencepiece_train import train_sentencepiece
from .decoder import StreamDecoder
from .tokenizer import Tokenizer
from .errors import MemoryBudgetError
from .training import count_to_file, merge_counts_files, train, train_files

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
