"""Pre-tokenization: special-token splitting and the split of text into pre-tokens.

Merges never cross a pre-token boundary. Three named patterns are defined as exactly
what the ``regex`` module's ``findall`` returns for their pattern strings; any other
pattern string goes through the ``regex`` module too, and ``pattern=None`` means no
split (the whole text is one pre-token).

Custom patterns need not cover the whole text: the characters that no match covers are
kept as pre-tokens of their own (as Hugging Face's ``Split(behavior="isolated")`` does),
so that encoding stays lossless. The three named patterns always cover the whole text.

Pattern names (``resolve_pattern``): the names are case-insensitive, and tiktoken's
encoding names are aliases (``r50k_base``, ``p50k_base``, ``p50k_edit`` -> ``gpt2``,
``cl100k_base`` -> ``cl100k``, ``o200k_base`` -> ``o200k``); a tokenizer and a model file
store the canonical name. A string that *looks like a name* -- only letters, digits and
``_ . -`` -- is refused with ``PatternError`` (naming the known patterns and the closest)
when it has no regex metacharacter at all (``"gpt4"``, ``"none"``, ``"abc"``: as a regex
each would match only itself, so the whole text would become one pre-token) or when it is
close to a known name (``"gpt.2"``, ``"p50k.edit"``: difflib ratio >= 0.75). Every other
string is a regex. A literal word as a regex needs a group: ``"(?:abc)"``.
"""

from __future__ import annotations

import difflib
import functools

import regex

from .errors import PatternError

GPT2_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: The named patterns, by name. A model file stores the name, not the string.
NAMED_PATTERNS: dict[str, str] = {
    "gpt2": GPT2_PATTERN,
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
}

#: tiktoken's encoding names that use one of the named patterns' regex.
PATTERN_ALIASES: dict[str, str] = {
    "r50k_base": "gpt2",
    "p50k_base": "gpt2",
    "p50k_edit": "gpt2",
    "cl100k_base": "cl100k",
    "o200k_base": "o200k",
}

#: Model names people type for a pattern: only used to suggest the right name.
_MODEL_HINTS = {"gpt4": "cl100k", "gpt-4": "cl100k", "gpt3.5": "cl100k", "gpt-3.5": "cl100k",
                "gpt-3.5-turbo": "cl100k", "gpt4o": "o200k", "gpt-4o": "o200k",
                "gpt-2": "gpt2", "gpt3": "gpt2", "gpt-3": "gpt2"}

_NAME_LIKE = regex.compile(r"[A-Za-z0-9_.\-]+")
_REGEX_META = frozenset(".^$*+?{}[]\\|()")

#: Char mode's default: words are the runs of non-whitespace (classic Sennrich BPE).
WHITESPACE_WORDS_PATTERN = r"\S+"
#: SuperBPE's stage-2 pre-tokenization (Liu et al. 2025, the authors' public
#: ``scripts/extend_tokenizer.sh``): only digit groups of 1-3, runs of two or more
#: punctuation characters (with their newlines / slashes) and trailing spaces are cut out;
#: everything between them (words, the spaces between words, single punctuation) stays one
#: piece, so merges may bridge whitespace ("superwords"). Two alternatives are ours:
#: ``[\r\n]+`` makes line breaks pieces of their own, as they are in the authors' training
#: (Hugging Face's file trainer feeds each line as its own text); the last one matches the
#: text between the others' matches, which the authors' Split(behavior="isolated") keeps as
#: pieces, so that a ``findall`` engine that drops unmatched text (tiktoken) splits alike.
_SUPERBPE_CUTS = r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)|[\r\n]+"
SUPERBPE_PATTERN = _SUPERBPE_CUTS + r"|(?:(?!" + _SUPERBPE_CUTS + r")[\s\S])+"

#: The patterns the Numba scanner splits, by its names for them (``scanner_name``): the
#: named ones and SuperBPE's stage 2 ("superbpe").
SCANNED_PATTERNS: dict[str, str] = {**NAMED_PATTERNS, "superbpe": SUPERBPE_PATTERN}


def resolve_pattern(pattern: str | None) -> str | None:
    """The canonical form of ``pattern``: a named pattern's name, a regex string, or None.

    ``"GPT2"`` -> ``"gpt2"``, ``"o200k_base"`` -> ``"o200k"``; a regex is returned as is.
    A name-like string that is no known name is refused (see the module docstring).

    Raises
    ------
    PatternError
        For an unknown name (the message lists the known names and the closest one).
    TypeError
        If ``pattern`` is neither a str nor None.
    """
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str or None, not {type(pattern).__name__}")
    if pattern in NAMED_PATTERNS:
        return pattern
    return _resolve_str(pattern)


@functools.lru_cache(maxsize=256)
def _resolve_str(pattern: str) -> str:
    low = pattern.lower()
    if low in NAMED_PATTERNS:
        return low
    if low in PATTERN_ALIASES:
        return PATTERN_ALIASES[low]
    if not _NAME_LIKE.fullmatch(pattern):
        return pattern
    known = list(NAMED_PATTERNS) + list(PATTERN_ALIASES)
    close = difflib.get_close_matches(low, known, n=1, cutoff=0.75)
    if not close and _REGEX_META.intersection(pattern):
        return pattern  # e.g. "." or "a.b": a regex made of name characters
    suggestion = _MODEL_HINTS.get(low) or (close or difflib.get_close_matches(low, known, n=1,
                                                                              cutoff=0.5) or [None])[0]
    hint = f": did you mean {suggestion!r}?" if suggestion else "."
    none_hint = " No split is pattern=None (--pattern none)." if low == "none" else ""
    raise PatternError(
        f"unknown pattern name {pattern!r}{hint} The known patterns: {', '.join(NAMED_PATTERNS)}"
        f" (also {', '.join(PATTERN_ALIASES)}; names are case-insensitive).{none_hint} A regex "
        f"made only of letters, digits and '_.-' is taken for a misspelt name: write a literal "
        f"word as '(?:{pattern})'.")


def literal_regex(source: str) -> str:
    """A regex read from a foreign file, kept a regex: a name-like one (``"abc"``,
    ``"GPT2"``) is wrapped in a group so that ``resolve_pattern`` does not take it for a
    pattern name (the group changes nothing in what it matches)."""
    return f"(?:{source})" if _NAME_LIKE.fullmatch(source) else source


def pattern_string(pattern: str | None) -> str | None:
    """The regex string of ``pattern`` (a named pattern's name, a regex string, or None)."""
    pattern = resolve_pattern(pattern)
    if pattern is None:
        return None
    return NAMED_PATTERNS.get(pattern, pattern)


@functools.lru_cache(maxsize=64)
def compiled_pattern(pattern: str | None):
    """The compiled ``regex`` object for ``pattern`` (None stays None)."""
    source = pattern_string(pattern)
    if source is None:
        return None
    try:
        return regex.compile(source)
    except regex.error as exc:
        raise PatternError(f"invalid pre-tokenization pattern {pattern!r}: {exc}") from None


def split(text: str, pattern: str | None = "gpt2", keep_gaps: bool = True) -> list[str]:
    """Split ``text`` into pre-tokens, as encoding and training see them.

    Parameters
    ----------
    text : str
        The text (special tokens are *not* treated specially here).
    pattern : str or None
        ``"gpt2"``, ``"cl100k"``, ``"o200k"``, any other regex string, or None (no split).
    keep_gaps : bool
        Keep text that no match covers as pieces of its own (byte mode: lossless). Char
        mode passes False: its words are the matches, and the whitespace between them
        is dropped.

    Returns
    -------
    list of str
        The pre-tokens in order; with ``keep_gaps``, ``"".join(result) == text``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    pattern = resolve_pattern(pattern)
    name = scanner_name(pattern)
    if name is not None and len(text) > 64:
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            raw = None  # lone surrogates: only the regex module can split this str
        if raw is not None:
            from ._scanner import scan_offsets

            bounds, _ = scan_offsets(raw, None, name)
            bounds = bounds.tolist()
            if len(raw) == len(text):
                return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            return [raw[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
    rx = compiled_pattern(pattern)
    if rx is None:
        return [text] if text else []
    if not keep_gaps:
        return [m.group() for m in rx.finditer(text) if m.end() > m.start()]
    pieces = rx.findall(text)
    if sum(map(len, pieces)) == len(text):
        # The usual case (always for the named patterns): the matches tile the text.
        return [p for p in pieces if p] if "" in pieces else pieces
    # Some characters are not covered by any match: keep them as pieces of their own.
    out = []
    pos = 0
    for m in rx.finditer(text):
        start, end = m.span()
        if start > pos:
            out.append(text[pos:start])
        if end > start:
            out.append(text[start:end])
        pos = end
    if pos < len(text):
        out.append(text[pos:])
    return out


class SpecialTokenMatcher:
    """Finds registered special tokens in text: leftmost first, the longest at a position.

    No giant regex: candidate positions are found with ``str.find`` on the tokens' short
    prefixes (special tokens usually share a few, like ``<|`` or ``[``), and at each
    candidate only the distinct token lengths are tried against a set. Building it costs
    O(tokens) (100,000 tokens load in well under a second), and text without any prefix
    costs one ``in`` test per prefix. With very many distinct prefixes it falls back to one
    alternation regex, compiled on first use.
    """

    MAX_PREFIXES = 32

    def __init__(self, tokens):
        self.tokens = tuple(sorted(set(tokens), key=lambda t: (-len(t), t)))
        self._set = frozenset(self.tokens)
        self._lengths = tuple(sorted({len(t) for t in self.tokens}, reverse=True))
        prefixes = {t[:2] for t in self.tokens}
        if len(prefixes) > self.MAX_PREFIXES:
            prefixes = {t[:1] for t in self.tokens}
        self._prefixes = tuple(sorted(prefixes))
        self._use_regex = len(self._prefixes) > self.MAX_PREFIXES
        self._regex = None

    def __bool__(self):
        return bool(self.tokens)

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The short prefixes every token starts with (one of them is in any text holding a token)."""
        return self._prefixes

    def maybe_in(self, text: str) -> bool:
        """A fast filter: False guarantees that no token occurs in ``text``."""
        if not self.tokens:
            return False
        if self._use_regex:
            return True
        if len(self._prefixes) == 1:  # (usually "<|" or "["): no generator, ~10x faster
            return self._prefixes[0] in text
        return any(map(text.__contains__, self._prefixes))

    def finditer(self, text: str):
        """Yield ``(start, end, token)`` of every non-overlapping occurrence, leftmost first."""
        if not self.tokens:
            return
        if self._use_regex:
            if self._regex is None:
                self._regex = regex.compile("|".join(regex.escape(t) for t in self.tokens))
            for m in self._regex.finditer(text):
                yield m.start(), m.end(), m.group()
            return
        candidates = set()
        for prefix in self._prefixes:
            pos = text.find(prefix)
            while pos >= 0:
                candidates.add(pos)
                pos = text.find(prefix, pos + 1)
        end = 0
        tokens = self._set
        for pos in sorted(candidates):
            if pos < end:
                continue
            for length in self._lengths:
                piece = text[pos : pos + length]
                if len(piece) == length and piece in tokens:
                    yield pos, pos + length, piece
                    end = pos + length
                    break

    def first(self, text: str):
        """The first occurrence as ``(start, token)``, or None."""
        for start, _, token in self.finditer(text):
            return start, token
        return None


def split_special(text: str, matcher: SpecialTokenMatcher):
    """Cut ``text`` at the special tokens found by ``matcher``.

    Returns a list of ``(segment, is_special)`` in order; empty segments are dropped.
    """
    if not matcher:
        return [(text, False)] if text else []
    out = []
    pos = 0
    for start, end, token in matcher.finditer(text):
        if start > pos:
            out.append((text[pos:start], False))
        out.append((token, True))
        pos = end
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def uses_scanner(pattern) -> bool:
    """True when ``pattern`` is one of the named patterns the Numba scanner implements (and
    text files may be cut at the spaces and newlines ``io/text_files.py`` names)."""
    return isinstance(pattern, str) and resolve_pattern(pattern) in NAMED_PATTERNS


def scanner_name(pattern) -> str | None:
    """The Numba scanner's name for ``pattern`` (``_scanner.PATTERN_IDS``): a named
    pattern's name, ``"superbpe"`` for ``SUPERBPE_PATTERN``; None when only the ``regex``
    module splits it. SuperBPE's pattern is scanned, but it is no named pattern: a text
    cut at a space between words would change its pieces (they span words)."""
    if not isinstance(pattern, str):
        return None
    pattern = resolve_pattern(pattern)
    if pattern in NAMED_PATTERNS:
        return pattern
    return "superbpe" if pattern == SUPERBPE_PATTERN else None


def piece_offsets(data, doc_offsets, pattern, n_threads: int = 1):
    """Pre-token boundaries of a batch of documents given as UTF-8 bytes.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8[n_bytes]``: the documents' bytes, concatenated (invalid UTF-8 allowed:
        each invalid byte is one "other" character).
    doc_offsets : numpy.ndarray
        ``int64[n_docs + 1]``: document boundaries in ``data`` (validated by the caller).
    pattern : str or None
        A named pattern or ``SUPERBPE_PATTERN`` (Numba scanner), any other regex (``regex``
        module), or None.
    n_threads : int
        Threads for the Numba scanner (documents in parallel blocks; the same results).

    Returns
    -------
    piece_offsets : int64[n_pieces + 1]
        Piece boundaries in ``data``; pieces tile every document (empty documents have none).
    doc_piece_offsets : int64[n_docs + 1]
        Index of each document's first piece.
    """
    import numpy as np

    pattern = resolve_pattern(pattern)
    name = scanner_name(pattern)
    if name is not None:
        from ._scanner import scan_offsets

        return scan_offsets(data, doc_offsets, name, n_threads)
    n_docs = len(doc_offsets) - 1
    if pattern is None:
        lengths = np.diff(doc_offsets)
        keep = lengths > 0
        pieces = np.concatenate([doc_offsets[:1], doc_offsets[1:][keep]]).astype(np.int64)
        doc_pieces = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(keep, out=doc_pieces[1:])
        return pieces, doc_pieces
    raw = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
    bounds = [int(doc_offsets[0])]
    doc_pieces = [0]
    for d in range(n_docs):
        start, end = int(doc_offsets[d]), int(doc_offsets[d + 1])
        text = raw[start:end].decode("utf-8", "surrogateescape")
        pos = start
        count = 0
        for piece in split(text, pattern):
            pos += len(piece.encode("utf-8", "surrogateescape"))
            bounds.append(pos)
            count += 1
        doc_pieces.append(doc_pieces[-1] + count)
    return np.asarray(bounds, dtype=np.int64), np.asarray(doc_pieces, dtype=np.int64)
