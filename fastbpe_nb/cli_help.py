"""Words of the command line: help texts that show defaults, errors in the CLI's terms.

``HelpFormatter`` appends "(default: X)" to an option's help; ``cli_message`` rewrites the
library's messages that name Python arguments (``allowed_special=``) as the options that
set them (``--special allow``), at the CLI boundary, so the library keeps its own words.
"""

from __future__ import annotations

import argparse
import re

#: Library messages that name Python arguments, in the CLI's words (``cli_message``).
_CLI_WORDS = [
    (r"pass allowed_special=\{\.\.\.\} \(or 'all'\) to encode it as a special token, or "
     r"disallowed_special=\(\) / encode_ordinary\(\) to encode it as plain text",
     "pass --special allow to encode it as a special token, or --special text to encode "
     "it as plain text"),
    (r"\(use special='allow' or 'text'\)", "(use --special allow or --special text)"),
    (r"pass max_invalid_utf8=([0-9.e-]+) \(--max-invalid-utf8\)", r"pass --max-invalid-utf8 \1"),
    (r"max_invalid_utf8=1 \(--max-invalid-utf8 1\)", "--max-invalid-utf8 1"),
    (r"tie_break='first'", "--tie-break first"),
    (r"end_of_word is for base='chars'", "--end-of-word is for --base chars"),
    (r"use format='parquet' or drop keep_columns", "use --format parquet or drop --keep-columns"),
    (r"\bvocab_size=(\d+)", r"--vocab-size \1"),
    (r"or pass separator=$", "or pass --separator TOKEN"),
    (r"^separator (?=['\"\d]|id\b|must\b)", "--separator "),
    (r"^(shard_size|concat_tokens|val_fraction):", lambda m: "--" + m.group(1).replace("_", "-")
     + ":"),
    (r"\bdtype uint16\b", "--dtype uint16"),
    (r"\b(vocab_size|num_merges|max_token_length|min_frequency|val_fraction|concat_tokens|"
     r"shard_size|separator|keep_columns|min_word_count|min_count|character_coverage)"
     r"(?=\s+(?:must|is|applies|needs)\b)",
     lambda m: "--" + m.group(1).replace("_", "-")),
]


def cli_message(text: str) -> str:
    """An error message of the library with its Python argument names in the CLI's words
    (``allowed_special=`` -> ``--special allow``); file paths are left as they are."""
    for pattern, words in _CLI_WORDS:
        text = re.sub(pattern, words, text)
    return text


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default: "(default: X)" is appended unless the help
    already says it, or the default is None/False (an option that is off unless given)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, argparse.SUPPRESS)
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            shown = ",".join(default) if isinstance(default, (list, tuple)) else default
            return f"{text} (default: {str(shown).replace('%', '%%')})"
        return text
