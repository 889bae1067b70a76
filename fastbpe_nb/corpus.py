"""Built-in corpora: the running interpreter's standard-library sources (on every machine)."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path


def stdlib_files() -> list[Path]:
    """The ``.py`` files of the interpreter's standard library, sorted by path (deterministic).

    Third-party packages (``site-packages``) and test suites' data are left out.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__"))
        files.extend(Path(folder) / n for n in sorted(names) if n.endswith(".py"))
    return files


def stdlib_texts(max_bytes: int | None = None):
    """Yield the standard-library sources as documents (one per file), up to ``max_bytes``.

    Files that are not valid UTF-8 (a few test fixtures) are decoded with replacement.
    """
    total = 0
    for path in stdlib_files():
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if max_bytes is not None and total + len(data) > max_bytes:
            break
        total += len(data)
        yield data.decode("utf-8", "replace")
