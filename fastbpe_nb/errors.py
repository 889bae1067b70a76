"""Exception classes of fastbpe_nb.

Every error names what went wrong and where (the file, the row, the entry, the offset),
so that a user can find the bad input without a debugger. Each class also derives from
the built-in exception a caller would naturally catch (``ValueError`` for bad values,
``OSError`` for files), so generic handlers keep working.
"""

from __future__ import annotations


class FastBPEError(Exception):
    """Base class of every error raised on purpose by fastbpe_nb."""


class ModelFormatError(FastBPEError, ValueError):
    """A model file (ours or a foreign one) is malformed, truncated or inconsistent.

    Attributes
    ----------
    path : str or None
        The file that was being read (``None`` for in-memory data).
    entry : str or None
        The part of the file that is wrong (e.g. ``"merges[12]"``).
    """

    def __init__(self, reason: str, path=None, entry: str | None = None):
        self.path = None if path is None else str(path)
        self.entry = entry
        self.reason = reason
        where = []
        if self.path is not None:
            where.append(self.path)
        if entry is not None:
            where.append(entry)
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class DisallowedSpecialTokenError(FastBPEError, ValueError):
    """The text contains a registered special token that the caller did not allow."""

    def __init__(self, token: str, offset: int):
        self.token = token
        self.offset = offset
        super().__init__(
            f"text contains the special token {token!r} at character offset {offset}; "
            "pass allowed_special={...} (or 'all') to encode it as a special token, "
            "or disallowed_special=() / encode_ordinary() to encode it as plain text"
        )


class UnknownTokenError(FastBPEError, ValueError):
    """A token id given to the decoder is not in the vocabulary."""

    def __init__(self, token_id, position: int, vocab_size: int, reason: str | None = None):
        self.token_id = token_id
        self.position = position
        if reason is None:
            reason = f"is not in the vocabulary (valid ids are 0..{vocab_size - 1})"
        super().__init__(f"token id {token_id!r} at position {position} {reason}")


class TokenIdTypeError(UnknownTokenError, TypeError):
    """An entry of the ids given to the decoder is not an integer (a bool, a float, a str,
    a null): an UnknownTokenError that is also a TypeError."""


class InvalidUTF8Error(FastBPEError, ValueError):
    """A document that must be read as text (to normalize it, or in char mode) is not valid
    UTF-8. Names the row (or document), the byte offset in it and, when read from a file
    (``encode_parquet``), the path.
    """

    def __init__(self, row: int, offset: int, detail: str, label: str = "row", path=None):
        self.row = row
        self.offset = offset
        self.detail = detail
        self.label = label
        self.path = None if path is None else str(path)
        prefix = f"{self.path}: " if self.path is not None else ""
        super().__init__(f"{prefix}{label} {row}: invalid UTF-8 at byte {offset} ({detail}); "
                         "this tokenizer needs text here (normalization or char mode): fix "
                         "or drop the row (a byte-level tokenizer without normalization "
                         "encodes such rows as their bytes)")


class LossyExportError(FastBPEError, ValueError):
    """The target format cannot hold part of the model (e.g. a ``.tiktoken`` file has no
    place for a Unicode normalization): the exported tokenizer would give other ids."""


class UnknownCharacterError(FastBPEError, ValueError):
    """Char mode: the text contains a character that has no id in the vocabulary."""

    def __init__(self, char: str, offset: int):
        self.char = char
        self.offset = offset
        super().__init__(
            f"character {char!r} (U+{ord(char):04X}) at offset {offset} was never seen in "
            "training and has no id (char-mode tokenizers cannot encode unseen characters; "
            "byte mode, the default, can encode any text)"
        )


class TrainingError(FastBPEError, ValueError):
    """The training options or input cannot produce a tokenizer."""


class CorpusReadError(FastBPEError, OSError):
    """A corpus file cannot be read (missing, truncated, corrupt)."""


class OutputError(FastBPEError, OSError):
    """An output cannot be written, or a written output is incomplete or inconsistent."""


class EncodeOptionsError(FastBPEError, ValueError):
    """Options of a batch encode that cannot give correct outputs: two inputs mapping to one
    output, an output inside an input, a kept column that cannot be kept."""


class ClusterError(FastBPEError, ValueError):
    """A cluster option that cannot be used: a malformed ``--dask`` value, an option the
    cluster path does not support (fastbpe_nb.distributed)."""


class PatternError(FastBPEError, ValueError):
    """A pre-tokenization pattern is an invalid regex or an unknown pattern name."""


class ArrowDataError(CorpusReadError, ValueError):
    """An Arrow text array cannot be read as text: its buffers are inconsistent (offsets
    outside the data, decreasing), or a row that must become a ``str`` is not UTF-8.

    Raised before any kernel reads the buffers; names the row (and the file when known).
    A ``CorpusReadError`` for file readers, a ``ValueError`` for in-memory arrays.
    """


class TextColumnTypeError(CorpusReadError, TypeError):
    """A column given as text has a type that cannot hold text (int, list, struct...).

    Names the file, the column and the type when they are known. A ``CorpusReadError``
    for file readers, a ``TypeError`` for in-memory arrays.
    """


class OutOfMemoryError(FastBPEError, MemoryError):
    """An operation ran out of memory on an input too large for it; names the file, the
    rows and an estimate of what they need (instead of a bare MemoryError)."""


class UnsupportedInputError(FastBPEError, ValueError):
    """The tokenizer cannot take this kind of input: arbitrary bytes (``encode_bytes``) for a
    tokenizer whose units are characters (char level, SentencePiece)."""


class MemoryBudgetError(TrainingError, MemoryError):
    """Training would exceed the ``max_memory`` budget the caller set."""


class TokenLookupError(FastBPEError, ValueError):
    """A token id or piece asked for by ``inspect`` is not in the vocabulary."""


class TokenRoleError(FastBPEError, ValueError):
    """A special-token role (``bos``, ``eos``, ``pad``, ``unk``) names a token that is not
    a special token of the tokenizer, or the roles are not a valid mapping.

    Attributes: ``role`` (the role's key or None) and ``token`` (the token or None).
    """

    def __init__(self, reason: str, role: str | None = None, token: str | None = None):
        self.role, self.token = role, token
        super().__init__(reason)


class RankCacheWarning(UserWarning):
    """The on-disk cache of loaded ranks files (``io.rank_cache``) was skipped: a cache file
    failed validation (it is rebuilt) or the cache folder cannot be written."""


class Cancelled(Exception):
    """Internal: a background job (SuperBPE's stage-2 counting while stage 1 merges) was
    stopped by its owner between two batches. Never reaches a caller: the owner raised
    its own error first."""
