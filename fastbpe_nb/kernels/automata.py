"""The pre-tokenizer patterns that are small automata: gpt2 and cl100k, as action tables.

The hand-written matchers of :mod:`fastbpe_nb.kernels.scan` branch on every piece's
first character and on every run's end: on real text those branches are unpredictable,
and the mispredictions cost more than the characters (5 MB of kernel sources scanned at
150 MB/s, 290 MB/s on the same pieces in a repeating order). gpt2's and cl100k's patterns
need no look-behind and only bounded look-ahead, so each is also a small automaton over
character classes: per character, one table load gives the next state and where pieces
end (:func:`fastbpe_nb.kernels.scan._scan_automaton` runs it over the bytes, storing the
ends without a branch). This module only builds the tables, once per kernel call.

An action word is ``row << 3 | RETRACT | END_BEFORE_THIS | END_BEFORE_PREVIOUS``. ``row``
is where the next state's actions start in the tables (``STEP_AT + state * N_CLASSES``,
so the next action is at ``row + class``: no multiply on the chain of dependent loads
that sets the speed). The flags say that a piece ends before the previous character
(``\\s+(?!\\S)`` gives a run's last whitespace character to the next piece), before this
one, and (cl100k) that the last end stored was only a candidate and is taken back:
``\\s*[\\r\\n]`` ends a whitespace run after its *last* line break, so each line break of a
run stores its end, and the next one in the same run takes it back.

The step functions are not recursive: Numba compiles recursion, but a process that loaded
such a function from its cache crashed (test_layering refuses recursive kernels).
"""

from numba import njit

from .unicode_classes import CLS_L, CLS_N, CLS_WS, FOLD_D, FOLD_E, FOLD_L, FOLD_M, FOLD_R, \
    FOLD_S, FOLD_T, FOLD_V
#: kernel cache stamp: c19dd79c1b610664138f184a76b4c9161641cd9c9e28b49ebeddcb80a852bfd5


END_BEFORE_PREVIOUS = 1
END_BEFORE_THIS = 2
RETRACT = 4
ACTION_SHIFT = 3

# ---------------------------------------------------------------------------------------
# gpt2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
# ---------------------------------------------------------------------------------------
# Classes (gpt2's contractions are case-sensitive ASCII).
G2_LETTER = 0  # \p{L} not below
G2_STMD = 1  # s t m d: a whole contraction after '
G2_RV = 2  # r v: 're 've need an e
G2_E = 3
G2_L = 4  # l: 'll needs another
G2_NUMBER = 5
G2_SPACE = 6  # U+0020 only (` ?` is a literal space)
G2_WS = 7  # any other \s
G2_APOSTROPHE = 8
G2_OTHER = 9
G2_END = 10  # not a character: the end of the document
G2_N_CLASSES = 11
# States: what the piece read so far is (START only before a document's first character).
G2_START = 0
G2_LETTERS = 1  # ` ?\p{L}+`
G2_NUMBERS = 2  # ` ?\p{N}+`
G2_OTHERS = 3  # ` ?[^\s\p{L}\p{N}]+`
G2_ONE_SPACE = 4  # a space that may still prefix a run
G2_ONE_WS = 5  # one other whitespace character
G2_WS_SPACE = 6  # 2+ whitespace characters, the last a space
G2_WS_OTHER = 7  # 2+ whitespace characters, the last not a space
G2_QUOTE = 8  # ' (a contraction may follow)
G2_QUOTE_RV = 9  # 'r or 'v
G2_QUOTE_L = 10  # 'l
G2_CONTRACTION = 11  # a whole contraction
G2_N_STATES = 12

# ---------------------------------------------------------------------------------------
# cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
#         ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
# ---------------------------------------------------------------------------------------
C1_LETTER = 0  # \p{L} not below
C1_STMD = 1  # (?i:[sdmt])
C1_RV = 2  # (?i:[rv])
C1_E = 3  # (?i:e)
C1_L = 4  # (?i:l)
C1_NUMBER = 5
C1_SPACE = 6  # U+0020
C1_WS = 7  # \s other than a space, \r or \n
C1_CRLF = 8  # \r or \n
C1_APOSTROPHE = 9
C1_OTHER = 10
C1_END = 11
C1_N_CLASSES = 12
C1_START = 0
C1_LETTERS = 1  # [^\r\n\p{L}\p{N}]?+\p{L}++ past its first letter
C1_N1 = 2  # \p{N}{1,3}+ after 1, 2, 3 digits
C1_N2 = 3
C1_N3 = 4
C1_PFX_SPACE = 5  # one space: may prefix letters or others, or start whitespace
C1_PFX_WS = 6  # one other blank (not \r \n): may prefix letters
C1_PFX_OTHER = 7  # one "other": may prefix letters
C1_QUOTE = 8  # ' (a contraction, or a prefix)
C1_QUOTE_RV = 9  # 'r or 'v (case-insensitive)
C1_QUOTE_L = 10  # 'l
C1_CONTRACTION = 11
C1_OTHERS = 12  # ` ?[^\s\p{L}\p{N}]++` (2+ others, or a space and others)
C1_OTHERS_CRLF = 13  # ... and `[\r\n]*+`
C1_RUN_SPACE = 14  # 2+ whitespace characters, no \r \n, the last a space
C1_RUN_WS = 15  # ... the last another blank
C1_CR = 16  # a whitespace run just after its \r or \n (its end not stored yet)
C1_CR_SPACE1 = 17  # one blank after the run's last line break (whose end is stored)
C1_CR_WS1 = 18
C1_CR_SPACE = 19  # 2+ blanks after it
C1_CR_WS = 20
C1_N_STATES = 21

#: Layout of ``scanner_tables`` (``[:128]`` are the ASCII class words, see scan.py): each
#: automaton's class of each ASCII byte, then each automaton's action words.
G2_ASCII_AT = 128
C1_ASCII_AT = 256
G2_STEP_AT = 384
C1_STEP_AT = G2_STEP_AT + G2_N_STATES * G2_N_CLASSES
SCANNER_TABLES_SIZE = C1_STEP_AT + C1_N_STATES * C1_N_CLASSES


@njit(cache=True, nogil=True)
def gpt2_class(word):
    """gpt2 class of a non-ASCII character from its class word (``uint16`` table bits)."""
    if (word & CLS_L) != 0:
        return G2_LETTER
    if (word & CLS_N) != 0:
        return G2_NUMBER
    if (word & CLS_WS) != 0:
        return G2_WS
    return G2_OTHER


@njit(cache=True, nogil=True)
def cl100k_class(word):
    """cl100k class of a non-ASCII character from its class word (``uint16`` table bits;
    the contraction letters are folded case-insensitively, e.g. U+017F long s)."""
    if (word & CLS_L) != 0:
        if (word & (FOLD_S | FOLD_D | FOLD_M | FOLD_T)) != 0:
            return C1_STMD
        if (word & (FOLD_R | FOLD_V)) != 0:
            return C1_RV
        if (word & FOLD_E) != 0:
            return C1_E
        if (word & FOLD_L) != 0:
            return C1_L
        return C1_LETTER
    if (word & CLS_N) != 0:
        return C1_NUMBER
    if (word & CLS_WS) != 0:
        return C1_WS
    return C1_OTHER


@njit(cache=True, nogil=True)
def _gpt2_first(c):
    """gpt2 state after the first character (class ``c``) of a piece."""
    if c <= G2_L:
        return G2_LETTERS
    if c == G2_NUMBER:
        return G2_NUMBERS
    if c == G2_SPACE:
        return G2_ONE_SPACE
    if c == G2_WS:
        return G2_ONE_WS
    if c == G2_APOSTROPHE:
        return G2_QUOTE
    return G2_OTHERS


@njit(cache=True, nogil=True)
def _gpt2_grow(s, c):
    """gpt2 state after the piece in state ``s`` takes a character of class ``c``, or -1
    when it cannot take it (and ends before it)."""
    letter = c <= G2_L
    space = c == G2_SPACE or c == G2_WS
    other = c == G2_OTHER or c == G2_APOSTROPHE
    if s == G2_START:
        return _gpt2_first(c)
    if s == G2_LETTERS and letter:
        return G2_LETTERS
    if s == G2_NUMBERS and c == G2_NUMBER:
        return G2_NUMBERS
    if s == G2_OTHERS and other:
        return G2_OTHERS
    if s == G2_ONE_SPACE and not space:
        # ` ?X+` takes a space before any run.
        if letter:
            return G2_LETTERS
        return G2_NUMBERS if c == G2_NUMBER else G2_OTHERS
    if s >= G2_ONE_SPACE and s <= G2_WS_OTHER and space:
        return G2_WS_SPACE if c == G2_SPACE else G2_WS_OTHER
    if s == G2_QUOTE:
        if c == G2_STMD:
            return G2_CONTRACTION
        if c == G2_RV:
            return G2_QUOTE_RV
        if c == G2_L:
            return G2_QUOTE_L
        if other:
            return G2_OTHERS
    if (s == G2_QUOTE_RV and c == G2_E) or (s == G2_QUOTE_L and c == G2_L):
        return G2_CONTRACTION
    return -1


@njit(cache=True, nogil=True)
def _gpt2_step(s, c):
    """gpt2's action word for a character of class ``c`` read in state ``s``: the
    alternatives are tried in order at a piece's start; once one is chosen, the piece
    grows until a character it cannot take, and the next piece starts there."""
    if c == G2_END:
        if s == G2_START:
            return 0
        if s == G2_QUOTE_RV or s == G2_QUOTE_L:
            return END_BEFORE_PREVIOUS | END_BEFORE_THIS  # ' and then the letter
        return END_BEFORE_THIS  # `\s+(?!\S)` takes a whole run at the end
    ends = 0
    if _gpt2_grow(s, c) < 0:
        if s == G2_WS_SPACE:
            # `\s+(?!\S)` leaves the run's last space to prefix what follows ...
            ends, s = END_BEFORE_PREVIOUS, G2_ONE_SPACE
        elif s == G2_WS_OTHER:
            # ... and its last other whitespace character alone (`\s+`).
            ends, s = END_BEFORE_PREVIOUS, G2_ONE_WS
        elif s == G2_QUOTE_RV or s == G2_QUOTE_L:
            # No contraction: ' is a piece of its own and the letter starts a run.
            ends, s = END_BEFORE_PREVIOUS, G2_LETTERS
    grow = _gpt2_grow(s, c)
    if grow < 0:
        ends |= END_BEFORE_THIS
        grow = _gpt2_first(c)
    return ends | ((G2_STEP_AT + grow * G2_N_CLASSES) << ACTION_SHIFT)


@njit(cache=True, nogil=True)
def _cl100k_first(c):
    """cl100k state after the first character (class ``c``) of a piece."""
    if c <= C1_L:
        return C1_LETTERS
    if c == C1_NUMBER:
        return C1_N1
    if c == C1_SPACE:
        return C1_PFX_SPACE
    if c == C1_WS:
        return C1_PFX_WS
    if c == C1_CRLF:
        return C1_CR
    if c == C1_APOSTROPHE:
        return C1_QUOTE
    return C1_PFX_OTHER


@njit(cache=True, nogil=True)
def _cl100k_grow(s, c):
    """cl100k state after the piece in state ``s`` takes a character of class ``c``, or
    -1 when it ends before it (whitespace runs' ends: :func:`_cl100k_step`)."""
    letter = c <= C1_L
    other = c == C1_OTHER or c == C1_APOSTROPHE
    if s == C1_START:
        return _cl100k_first(c)
    if s == C1_LETTERS and letter:
        return C1_LETTERS
    if c == C1_NUMBER and (s == C1_N1 or s == C1_N2):
        return s + 1
    if letter and (s == C1_PFX_SPACE or s == C1_PFX_WS or s == C1_PFX_OTHER):
        return C1_LETTERS  # the prefix of `[^\r\n\p{L}\p{N}]?+\p{L}++`
    if s == C1_QUOTE:
        if c == C1_STMD:
            return C1_CONTRACTION
        if c == C1_RV:
            return C1_QUOTE_RV
        if c == C1_L:
            return C1_QUOTE_L
    if (s == C1_QUOTE_RV and c == C1_E) or (s == C1_QUOTE_L and c == C1_L):
        return C1_CONTRACTION
    if letter and (s == C1_QUOTE or s == C1_QUOTE_RV or s == C1_QUOTE_L):
        return C1_LETTERS  # no contraction: ' prefixes the letters
    if other and (s == C1_PFX_SPACE or s == C1_PFX_OTHER or s == C1_QUOTE or s == C1_OTHERS):
        return C1_OTHERS
    if c == C1_CRLF and (s == C1_PFX_OTHER or s == C1_QUOTE or s == C1_OTHERS
                         or s == C1_OTHERS_CRLF):
        return C1_OTHERS_CRLF
    if s == C1_PFX_SPACE or s == C1_PFX_WS or s == C1_RUN_SPACE or s == C1_RUN_WS:
        if c == C1_SPACE:
            return C1_RUN_SPACE
        if c == C1_WS:
            return C1_RUN_WS
        if c == C1_CRLF:
            return C1_CR  # `\s*[\r\n]`: the run now ends at a line break
    return -1


@njit(cache=True, nogil=True)
def _cl100k_step(s, c):
    """cl100k's action word for a character of class ``c`` read in state ``s``."""
    blank = c == C1_SPACE or c == C1_WS
    after_cr = s >= C1_CR_SPACE1 and s <= C1_CR_WS
    if c == C1_END:
        if s == C1_START:
            return 0
        # `\s++$` takes a whole run that reaches the end: its line break's end goes back.
        return (RETRACT if after_cr else 0) | END_BEFORE_THIS
    ends = 0
    if s == C1_CR:
        if c == C1_CRLF:
            return (C1_STEP_AT + C1_CR * C1_N_CLASSES) << ACTION_SHIFT
        # The run so far ends here, unless a later line break in the run takes it back.
        if blank:
            nxt = C1_CR_SPACE1 if c == C1_SPACE else C1_CR_WS1
            return END_BEFORE_THIS | ((C1_STEP_AT + nxt * C1_N_CLASSES) << ACTION_SHIFT)
        return END_BEFORE_THIS | ((C1_STEP_AT + _cl100k_first(c) * C1_N_CLASSES)
                                  << ACTION_SHIFT)
    if after_cr:
        if c == C1_CRLF:
            return RETRACT | ((C1_STEP_AT + C1_CR * C1_N_CLASSES) << ACTION_SHIFT)
        if blank:
            nxt = C1_CR_SPACE if c == C1_SPACE else C1_CR_WS
            return (C1_STEP_AT + nxt * C1_N_CLASSES) << ACTION_SHIFT
        # The stored end stays; `\s+(?!\S)` gives the run's last blank to what follows.
        if s == C1_CR_SPACE or s == C1_CR_WS:
            ends = END_BEFORE_PREVIOUS
        s = C1_PFX_SPACE if (s == C1_CR_SPACE1 or s == C1_CR_SPACE) else C1_PFX_WS
    elif (s == C1_RUN_SPACE or s == C1_RUN_WS) and not blank and c != C1_CRLF:
        ends = END_BEFORE_PREVIOUS
        s = C1_PFX_SPACE if s == C1_RUN_SPACE else C1_PFX_WS
    grow = _cl100k_grow(s, c)
    if grow < 0:
        ends |= END_BEFORE_THIS
        grow = _cl100k_first(c)
    return ends | ((C1_STEP_AT + grow * C1_N_CLASSES) << ACTION_SHIFT)


@njit(cache=True, nogil=True)
def fill_automaton_tables(tables):
    """Fill ``tables[128:]`` from the ASCII class words in ``tables[:128]``.

    Parameters
    ----------
    tables : numpy.ndarray
        ``uint32[SCANNER_TABLES_SIZE]``; ``[:128]`` hold the ASCII class words (their low
        16 bits are the Unicode table's). Written: ``[G2_ASCII_AT:][:128]`` and
        ``[C1_ASCII_AT:][:128]`` each automaton's class of each ASCII byte,
        ``[G2_STEP_AT:]`` and ``[C1_STEP_AT:]`` their action words (``state * N_CLASSES
        + class``; class ``*_END`` at a document's end).
    """
    for b in range(128):
        word = tables[b] & 0xFFFF
        tables[G2_ASCII_AT + b] = gpt2_class(word)
        tables[C1_ASCII_AT + b] = cl100k_class(word)
    for b in (0x73, 0x74, 0x6D, 0x64):  # gpt2: lower-case s t m d
        tables[G2_ASCII_AT + b] = G2_STMD
    tables[G2_ASCII_AT + 0x72] = G2_RV
    tables[G2_ASCII_AT + 0x76] = G2_RV
    tables[G2_ASCII_AT + 0x65] = G2_E
    tables[G2_ASCII_AT + 0x6C] = G2_L
    tables[G2_ASCII_AT + 0x20] = G2_SPACE
    tables[G2_ASCII_AT + 0x27] = G2_APOSTROPHE
    tables[C1_ASCII_AT + 0x20] = C1_SPACE
    tables[C1_ASCII_AT + 0x0D] = C1_CRLF
    tables[C1_ASCII_AT + 0x0A] = C1_CRLF
    tables[C1_ASCII_AT + 0x27] = C1_APOSTROPHE
    for s in range(G2_N_STATES):
        for c in range(G2_N_CLASSES):
            tables[G2_STEP_AT + s * G2_N_CLASSES + c] = _gpt2_step(s, c)
    for s in range(C1_N_STATES):
        for c in range(C1_N_CLASSES):
            tables[C1_STEP_AT + s * C1_N_CLASSES + c] = _cl100k_step(s, c)
