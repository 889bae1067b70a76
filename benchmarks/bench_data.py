"""Real-text benchmark corpora, built once per machine and cached under .asv/data.

* ``linux_text(n_bytes)``: the first ``n_bytes`` of the Linux kernel sources (C, headers,
  reStructuredText, Kconfig ...) from Debian's ``linux-source-6.1`` package
  (``apt-get install linux-source-6.1``), read straight from its ``.tar.xz`` in archive order.
* ``stdlib_text(n_bytes)``: this Python's standard-library sources (present everywhere), the
  fallback when the kernel sources are not installed.
* ``chunks(text)``: the text cut into ~1 MB documents at safe boundaries, so that every
  tool sees the same documents and the same pre-tokens.
"""

from __future__ import annotations

import glob
import os
import tarfile
from pathlib import Path

from fastbpe_nb.corpus import stdlib_texts
from fastbpe_nb.io.corpus import safe_cut

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FASTBPE_BENCH_CACHE", ROOT / ".asv" / "data"))
TEXT_SUFFIXES = (".c", ".h", ".rst", ".txt", ".S", ".py", ".sh", "Kconfig", "Makefile", ".yaml")


def linux_tarball() -> str | None:
    found = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    return found[-1] if found else None


def _build_linux(path: Path, n_bytes: int) -> None:
    tarball = linux_tarball()
    total = 0
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tarball, "r:xz") as tar, open(tmp, "wb") as out:
        for member in tar:
            if not member.isfile() or not member.name.endswith(TEXT_SUFFIXES):
                continue
            data = tar.extractfile(member).read()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.write(data)
            if not data.endswith(b"\n"):
                out.write(b"\n")
            total += len(data) + (not data.endswith(b"\n"))
            if total >= n_bytes:
                break
    tmp.replace(path)


def corpus_path(n_bytes: int) -> tuple[Path, str]:
    """A cached text file of about ``n_bytes`` and a description of what it is."""
    CACHE.mkdir(parents=True, exist_ok=True)
    if linux_tarball():
        path = CACHE / f"linux-{n_bytes}.txt"
        if not path.exists():
            _build_linux(path, n_bytes)
        return path, f"Linux 6.1 kernel sources (first {n_bytes / 1e6:.0f} MB of text files)"
    path = CACHE / f"stdlib-{n_bytes}.txt"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(stdlib_texts(n_bytes)), encoding="utf-8")
        tmp.replace(path)
    size = path.stat().st_size
    return path, f"Python standard-library sources ({size / 1e6:.0f} MB: all that is installed)"


def chunks(raw: bytes, size: int = 1 << 20) -> list[str]:
    """``raw`` cut into ~``size`` byte documents at safe boundaries (see fastbpe_nb.io.corpus)."""
    out = []
    start = 0
    while start < len(raw):
        end = start + size
        if end >= len(raw):
            out.append(raw[start:].decode("utf-8", "replace"))
            break
        cut = safe_cut(raw[:end], start)
        if cut <= start:
            cut = safe_cut(raw[: start + 8 * size], start)
        if cut <= start:
            out.append(raw[start:].decode("utf-8", "replace"))
            break
        out.append(raw[start:cut].decode("utf-8", "replace"))
        start = cut
    return out
