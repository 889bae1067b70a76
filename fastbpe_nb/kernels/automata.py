"""The pre-tokenizer patterns that are small automata: gpt2, cl100k and o200k, as tables.

The hand-written matchers of :mod:`fastbpe_nb.kernels.scan` branch on every piece's
first character and on every run's end: on real text those branches are unpredictable,
and the mispredictions cost more than the characters (5 MB of kernel sources scanned at
150 MB/s, 290 MB/s on the same pieces in a repeating order). gpt2's, cl100k's and o200k's
patterns need no look-behind, and where they backtrack, a piece ends after the last
character of some kind in a run (stored as a candidate end, see below), so each is also a
small automaton over character classes: per character, one table load gives the next
state and where pieces end (:func:`fastbpe_nb.kernels.scan._scan_automaton` runs it over
the bytes, storing the ends without a branch). This module only builds the tables, once
per kernel call.

An action word is ``row << 4 | PENDING | RETRACT | END_BEFORE_THIS | END_BEFORE_PREVIOUS``.
``row`` is where the next state's actions start in the tables (``STEP_AT + state *
N_CLASSES``, so the next action is at ``row + class``: no multiply on the chain of
dependent loads that sets the speed). The flags say that a piece ends before the previous
character (``\\s+(?!\\S)`` gives a run's last whitespace character to the next piece),
before this one, and (cl100k, o200k) that the last end stored was only a candidate and is
taken back: ``\\s*[\\r\\n]`` ends a whitespace run after its *last* line break, so each
line break of a run stores its end, and the next one in the same run takes it back.
``PENDING`` says that the last end stored is such a candidate (a scan cut into chunks
never stops there).

The step functions are not recursive: Numba compiles recursion, but a process that loaded
such a function from its cache crashed (test_layering refuses recursive kernels).
"""

from numba import njit

from .unicode_classes import CLS_L, CLS_LOWERISH, CLS_N, CLS_UPPERISH, CLS_WS, FOLD_D, \
    FOLD_E, FOLD_L, FOLD_M, FOLD_R, FOLD_S, FOLD_T, FOLD_V
#: kernel cache stamp: c19dd79c1b610664138f184a76b4c9161641cd9c9e28b49ebeddcb80a852bfd5


END_BEFORE_PREVIOUS = 1
END_BEFORE_THIS = 2
RETRACT = 4
PENDING = 8
ACTION_SHIFT = 4

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

# ---------------------------------------------------------------------------------------
# o200k: [^\r\n\p{L}\p{N}]?[UPPERISH]*[LOWERISH]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
#        [^\r\n\p{L}\p{N}]?[UPPERISH]+[LOWERISH]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
#        \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
# UPPERISH = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], LOWERISH = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
# ---------------------------------------------------------------------------------------
# How the letter alternatives read, from a piece's start (after an optional prefix): the
# UPPERISH run is taken whole when a lower-case letter (Ll) follows it (the first
# alternative); otherwise the first alternative backtracks to the run's last character
# that is also LOWERISH (Lm, Lo or a mark: "both"), and the run's upper-case rest is a
# piece of its own (the second alternative); with no such character the whole run is the
# piece. So each "both" character of a run stores the end after it as a candidate, and a
# lower-case letter after the run takes it back. A mark at a piece's start reads as a
# "both" letter (both readings give the same pieces). The optional contraction after the
# letters stores the end before its apostrophe as a candidate, taken back once it matches.
O2_UP = 0  # Lu, Lt
O2_LO = 1  # Ll
O2_BOTH = 2  # Lm, Lo
O2_MARK = 3  # \p{M}: UPPERISH and LOWERISH, but not \p{L} ("other" for the others)
O2_UP_STMD = 4  # upper-case (?i:[sdmt]), and so on: the contraction letters by case
O2_LO_STMD = 5
O2_UP_RV = 6
O2_LO_RV = 7
O2_UP_E = 8
O2_LO_E = 9
O2_UP_L = 10
O2_LO_L = 11
O2_NUMBER = 12
O2_SPACE = 13
O2_BLANK = 14  # \s other than a space, \r or \n
O2_CRLF = 15
O2_SLASH = 16
O2_APOSTROPHE = 17
O2_OTHER = 18
O2_END = 19
O2_N_CLASSES = 20
O2_START = 0
O2_N1 = 1  # \p{N}{1,3} after 1, 2, 3 digits
O2_N2 = 2
O2_N3 = 3
O2_PFX_SPACE = 4  # one space at a piece's start
O2_PFX_BLANK = 5  # one other blank
O2_PFX_OTHER = 6  # one other (', /, punctuation): may prefix letters
O2_OTHERS = 7  # ` ?[^\s\p{L}\p{N}]+`
O2_OTHERS_CRLF = 8  # ... `[\r\n/]*` after it
O2_RUN_SPACE = 9  # 2+ whitespace characters, no \r \n, the last a space
O2_RUN_BLANK = 10
O2_CR = 11  # a whitespace run just after a line break (its end not stored yet)
O2_CR_SPACE1 = 12  # one blank after the run's last line break (whose end is stored)
O2_CR_BLANK1 = 13
O2_CR_SPACE = 14  # 2+ blanks after it
O2_CR_BLANK = 15
O2_UPPER = 16  # in an UPPERISH run, the last character upper-case, no candidate end
O2_UPPER_BOTH = 17  # ... the last character "both" (the end after it: a candidate)
O2_UPPER_CAND = 18  # ... a candidate end stored, upper-case characters since
O2_LOWER = 19  # in the LOWERISH run of the first alternative
O2_QUOTE = 20  # ' after letters (the end before it: a candidate)
O2_QUOTE_RV_UP = 21  # 'R 'V after letters
O2_QUOTE_RV_LO = 22  # 'r 'v
O2_QUOTE_L_UP = 23  # 'L
O2_QUOTE_L_LO = 24  # 'l
O2_CONTRACTION = 25
O2_N_STATES = 26

#: Layout of ``scanner_tables`` (``[:128]`` are the ASCII class words, see scan.py): each
#: automaton's class of each ASCII byte, then each automaton's action words.
G2_ASCII_AT = 128
C1_ASCII_AT = 256
O2_ASCII_AT = 384
G2_STEP_AT = 512
C1_STEP_AT = G2_STEP_AT + G2_N_STATES * G2_N_CLASSES
O2_STEP_AT = C1_STEP_AT + C1_N_STATES * C1_N_CLASSES
SCANNER_TABLES_SIZE = O2_STEP_AT + O2_N_STATES * O2_N_CLASSES


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
def o200k_class(word):
    """o200k class of a non-ASCII character from its class word (``uint16`` table bits)."""
    upper = (word & CLS_UPPERISH) != 0
    lower = (word & CLS_LOWERISH) != 0
    if (word & CLS_L) == 0:
        if upper and lower:
            return O2_MARK
        if (word & CLS_N) != 0:
            return O2_NUMBER
        return O2_BLANK if (word & CLS_WS) != 0 else O2_OTHER
    if upper and lower:
        return O2_BOTH
    case = 1 if lower else 0  # O2_LO_x = O2_UP_x + 1
    if (word & (FOLD_S | FOLD_D | FOLD_M | FOLD_T)) != 0:
        return O2_UP_STMD + case
    if (word & (FOLD_R | FOLD_V)) != 0:
        return O2_UP_RV + case
    if (word & FOLD_E) != 0:
        return O2_UP_E + case
    if (word & FOLD_L) != 0:
        return O2_UP_L + case
    return O2_UP + case


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
def _c1_go(ends, state):
    """cl100k's action word: the flags ``ends``, then go to ``state``."""
    pending = PENDING if state >= C1_CR_SPACE1 and state <= C1_CR_WS else 0
    return ends | pending | ((C1_STEP_AT + state * C1_N_CLASSES) << ACTION_SHIFT)


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
            return _c1_go(0, C1_CR)
        # The run so far ends here, unless a later line break in the run takes it back.
        if blank:
            return _c1_go(END_BEFORE_THIS, C1_CR_SPACE1 if c == C1_SPACE else C1_CR_WS1)
        return _c1_go(END_BEFORE_THIS, _cl100k_first(c))
    if after_cr:
        if c == C1_CRLF:
            return _c1_go(RETRACT, C1_CR)
        if blank:
            return _c1_go(0, C1_CR_SPACE if c == C1_SPACE else C1_CR_WS)
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
    return _c1_go(ends, grow)


@njit(cache=True, nogil=True)
def _o2_upper(c):
    """Whether class ``c`` is UPPERISH (upper-case, "both" or a mark)."""
    return c == O2_UP or c == O2_BOTH or c == O2_MARK or (
        c >= O2_UP_STMD and c <= O2_LO_L and (c - O2_UP_STMD) % 2 == 0)


@njit(cache=True, nogil=True)
def _o2_lower_only(c):
    """Whether class ``c`` is a lower-case letter (LOWERISH, not UPPERISH)."""
    return c == O2_LO or (c >= O2_UP_STMD and c <= O2_LO_L and (c - O2_UP_STMD) % 2 == 1)


@njit(cache=True, nogil=True)
def _o200k_first(c):
    """o200k state after the first character (class ``c``) of a piece."""
    if c == O2_BOTH or c == O2_MARK:
        return O2_UPPER_BOTH
    if _o2_upper(c):
        return O2_UPPER
    if _o2_lower_only(c):
        return O2_LOWER
    if c == O2_NUMBER:
        return O2_N1
    if c == O2_SPACE:
        return O2_PFX_SPACE
    if c == O2_BLANK:
        return O2_PFX_BLANK
    if c == O2_CRLF:
        return O2_CR
    return O2_PFX_OTHER  # ' / and other punctuation


@njit(cache=True, nogil=True)
def _o200k_grow(s, c):
    """o200k state after the piece in state ``s`` takes a character of class ``c``, or -1
    when it ends before it (candidate ends: :func:`_o200k_step`)."""
    other = c == O2_OTHER or c == O2_SLASH or c == O2_APOSTROPHE
    blank = c == O2_SPACE or c == O2_BLANK
    if s == O2_START:
        return _o200k_first(c)
    if c == O2_NUMBER and (s == O2_N1 or s == O2_N2):
        return s + 1
    if s == O2_PFX_SPACE or s == O2_PFX_BLANK or s == O2_PFX_OTHER:
        if _o2_upper(c) or _o2_lower_only(c):
            return _o200k_first(c)  # the prefix, then the letters as at a piece's start
    if (other or c == O2_MARK) and (s == O2_PFX_SPACE or s == O2_PFX_OTHER or s == O2_OTHERS):
        return O2_OTHERS
    if c == O2_CRLF and (s == O2_PFX_OTHER or s == O2_OTHERS or s == O2_OTHERS_CRLF):
        return O2_OTHERS_CRLF
    if c == O2_SLASH and s == O2_OTHERS_CRLF:
        return O2_OTHERS_CRLF
    if s == O2_PFX_SPACE or s == O2_PFX_BLANK or s == O2_RUN_SPACE or s == O2_RUN_BLANK:
        if blank:
            return O2_RUN_SPACE if c == O2_SPACE else O2_RUN_BLANK
        if c == O2_CRLF:
            return O2_CR
    if s == O2_LOWER and (_o2_lower_only(c) or c == O2_BOTH or c == O2_MARK):
        return O2_LOWER
    return -1


@njit(cache=True, nogil=True)
def _o2_go(ends, state):
    """o200k's action word: the flags ``ends``, then go to ``state``."""
    pending = (state >= O2_CR_SPACE1 and state <= O2_CR_BLANK) or state == O2_UPPER_CAND or (
        state >= O2_QUOTE and state <= O2_QUOTE_L_LO)
    return ends | (PENDING if pending else 0) | ((O2_STEP_AT + state * O2_N_CLASSES)
                                                 << ACTION_SHIFT)


@njit(cache=True, nogil=True)
def _o200k_step(s, c):
    """o200k's action word for a character of class ``c`` read in state ``s``."""
    blank = c == O2_SPACE or c == O2_BLANK
    if c == O2_END:
        # Candidates stay: no alternative takes a run to the end as cl100k's `\s++$` does.
        return 0 if s == O2_START else END_BEFORE_THIS
    if s >= O2_QUOTE and s <= O2_QUOTE_L_LO:
        done = (s == O2_QUOTE and (c == O2_UP_STMD or c == O2_LO_STMD)) or (
            (s == O2_QUOTE_RV_UP or s == O2_QUOTE_RV_LO) and (c == O2_UP_E or c == O2_LO_E)) or (
            (s == O2_QUOTE_L_UP or s == O2_QUOTE_L_LO) and (c == O2_UP_L or c == O2_LO_L))
        if done:
            return _o2_go(RETRACT, O2_CONTRACTION)
        if s == O2_QUOTE and (O2_UP_RV <= c <= O2_LO_RV or O2_UP_L <= c <= O2_LO_L):
            nxt = O2_QUOTE_RV_UP + (c - O2_UP_RV) if c <= O2_LO_RV else \
                O2_QUOTE_L_UP + (c - O2_UP_L)
            return _o2_go(0, nxt)
        # No contraction: the end before ' stays, and ' starts the next piece as a prefix
        # (with the letter read after it, if any): read c from there.
        if s == O2_QUOTE:
            s = O2_PFX_OTHER
        elif s == O2_QUOTE_RV_UP or s == O2_QUOTE_L_UP:
            s = O2_UPPER
        else:
            s = O2_LOWER
    ends = 0
    if s == O2_CR:
        if c == O2_CRLF:
            return _o2_go(0, O2_CR)
        if blank:
            return _o2_go(END_BEFORE_THIS, O2_CR_SPACE1 if c == O2_SPACE else O2_CR_BLANK1)
        return _o2_go(END_BEFORE_THIS, _o200k_first(c))
    if s >= O2_CR_SPACE1 and s <= O2_CR_BLANK:
        if c == O2_CRLF:
            return _o2_go(RETRACT, O2_CR)
        if blank:
            return _o2_go(0, O2_CR_SPACE if c == O2_SPACE else O2_CR_BLANK)
        if s == O2_CR_SPACE or s == O2_CR_BLANK:
            ends = END_BEFORE_PREVIOUS
        s = O2_PFX_SPACE if (s == O2_CR_SPACE1 or s == O2_CR_SPACE) else O2_PFX_BLANK
    elif (s == O2_RUN_SPACE or s == O2_RUN_BLANK) and not blank and c != O2_CRLF:
        ends = END_BEFORE_PREVIOUS
        s = O2_PFX_SPACE if s == O2_RUN_SPACE else O2_PFX_BLANK
    elif s == O2_UPPER or s == O2_UPPER_BOTH or s == O2_UPPER_CAND:
        if _o2_lower_only(c):
            # The first alternative takes the whole run: a stored candidate goes back.
            return _o2_go(RETRACT if s == O2_UPPER_CAND else 0, O2_LOWER)
        if c == O2_BOTH or c == O2_MARK:
            return _o2_go(RETRACT if s == O2_UPPER_CAND else 0, O2_UPPER_BOTH)
        if _o2_upper(c):
            if s == O2_UPPER_BOTH:
                return _o2_go(END_BEFORE_THIS, O2_UPPER_CAND)  # the end after the "both"
            return _o2_go(0, s)
        if c == O2_APOSTROPHE:
            # The run's pieces end here, unless a contraction follows.
            return _o2_go(END_BEFORE_THIS, O2_QUOTE)
        return _o2_go(END_BEFORE_THIS, _o200k_first(c))
    elif s == O2_LOWER and c == O2_APOSTROPHE:
        return _o2_go(END_BEFORE_THIS, O2_QUOTE)
    grow = _o200k_grow(s, c)
    if grow < 0:
        ends |= END_BEFORE_THIS
        grow = _o200k_first(c)
    return _o2_go(ends, grow)


@njit(cache=True, nogil=True)
def fill_automaton_tables(tables):
    """Fill ``tables[128:]`` from the ASCII class words in ``tables[:128]``.

    Parameters
    ----------
    tables : numpy.ndarray
        ``uint32[SCANNER_TABLES_SIZE]``; ``[:128]`` hold the ASCII class words (their low
        16 bits are the Unicode table's). Written: at ``G2_ASCII_AT``, ``C1_ASCII_AT`` and
        ``O2_ASCII_AT`` each automaton's class of each ASCII byte; at ``G2_STEP_AT``,
        ``C1_STEP_AT`` and ``O2_STEP_AT`` their action words (``state * N_CLASSES +
        class``; class ``*_END`` at a document's end).
    """
    for b in range(128):
        word = tables[b] & 0xFFFF
        tables[G2_ASCII_AT + b] = gpt2_class(word)
        tables[C1_ASCII_AT + b] = cl100k_class(word)
        tables[O2_ASCII_AT + b] = o200k_class(word)
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
    tables[O2_ASCII_AT + 0x20] = O2_SPACE
    tables[O2_ASCII_AT + 0x0D] = O2_CRLF
    tables[O2_ASCII_AT + 0x0A] = O2_CRLF
    tables[O2_ASCII_AT + 0x2F] = O2_SLASH
    tables[O2_ASCII_AT + 0x27] = O2_APOSTROPHE
    for s in range(G2_N_STATES):
        for c in range(G2_N_CLASSES):
            tables[G2_STEP_AT + s * G2_N_CLASSES + c] = _gpt2_step(s, c)
    for s in range(C1_N_STATES):
        for c in range(C1_N_CLASSES):
            tables[C1_STEP_AT + s * C1_N_CLASSES + c] = _cl100k_step(s, c)
    for s in range(O2_N_STATES):
        for c in range(O2_N_CLASSES):
            tables[O2_STEP_AT + s * O2_N_CLASSES + c] = _o200k_step(s, c)
