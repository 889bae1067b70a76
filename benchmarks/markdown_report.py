"""Benchmark scripts write their result tables into the docs: ``--markdown PATH``.

A script's section of a Markdown file lies between two marker comments,
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` (``NAME`` is the script's name, e.g.
``compare_encoders``). ``write_section`` replaces what is between them with a new report
(a provenance line: date, commit, command line, then the tables) and leaves the rest of the
file as it was, so docs/performance.md is edited by hand around the sections and by the
scripts inside them. The file is replaced atomically (``fastbpe_nb.io.atomic``): an
interrupted run leaves the previous file, never half a table.

``Tee`` captures what a script prints while still printing it, so that the same text goes to
the terminal and into the section.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fastbpe_nb.io.atomic import atomic_write  # noqa: E402


class MarkerError(ValueError):
    """A Markdown file's markers for a section are missing a half, repeated or out of order."""


def markers(name: str) -> tuple[str, str]:
    """The begin and end marker comments of section ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def commit() -> str:
    """The checkout's commit (short hash, ``+dirty`` when the work tree has changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+dirty" if dirty.strip() else "")


def provenance(argv: list[str] | None = None, when: float | None = None) -> str:
    """One Markdown line saying when, from which commit and with which command a run was made."""
    argv = sys.argv if argv is None else argv
    stamp = time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(when))
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT) if argv else "?"
    command = shlex.join(["python", script, *argv[1:]])
    return f"Written by `{command}` on {stamp}, commit `{commit()}`."


def replace_section(document: str, name: str, body: str) -> str:
    """``document`` with the text between ``name``'s markers replaced by ``body``.

    A document without the markers gets the section appended at its end. Raises
    ``MarkerError`` when only one marker is present, either is repeated, or the end marker
    comes first: then the file was edited by hand in a way we must not guess about.
    """
    begin, end = markers(name)
    n_begin, n_end = document.count(begin), document.count(end)
    section = f"{begin}\n{body.strip()}\n{end}"
    if n_begin == n_end == 0:
        sep = "" if not document or document.endswith("\n\n") else (
            "\n" if document.endswith("\n") else "\n\n")
        return f"{document}{sep}{section}\n"
    if n_begin != 1 or n_end != 1:
        raise MarkerError(f"expected one {begin!r} and one {end!r}, found {n_begin} and {n_end}")
    i, j = document.index(begin), document.index(end)
    if j < i:
        raise MarkerError(f"{end!r} comes before {begin!r}")
    return document[:i] + section + document[j + len(end):]


def write_section(path, name: str, body: str) -> None:
    """Replace section ``name`` of the Markdown file ``path`` (created if absent) atomically."""
    path = Path(path)
    try:
        document = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        document = ""
    try:
        new = replace_section(document, name, body)
    except MarkerError as exc:
        raise MarkerError(f"{path}: {exc}") from None
    with atomic_write(path, "w") as f:
        f.write(new)


def check_section(path, name: str) -> None:
    """Fail now, before a long run, if ``write_section(path, name, ...)`` could not succeed."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path}: folder {path.parent} does not exist")
    if path.exists():
        try:
            replace_section(path.read_text(encoding="utf-8"), name, "")
        except MarkerError as exc:
            raise MarkerError(f"{path}: {exc}") from None


class Tee(io.TextIOBase):
    """A text stream that writes to ``stream`` and keeps a copy (``getvalue()``)."""

    def __init__(self, stream):
        self.stream = stream
        self.copy = io.StringIO()

    def write(self, s: str) -> int:
        self.stream.write(s)
        return self.copy.write(s)

    def flush(self) -> None:
        self.stream.flush()

    def getvalue(self) -> str:
        return self.copy.getvalue()
