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
from fastbpe_nb.io.text_files import safe_cut

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FASTBPE_BENCH_CACHE", ROOT / ".asv" / "data"))
TEXT_SUFFIXES = (".c", ".h", ".rst", ".txt", ".S", ".py", ".sh", "Kconfig", "Makefile", ".yaml")


def linux_tarball() -> str | None:
    found = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    return found[-1] if found else None


def _linux_texts(tarball):
    """The UTF-8 text files of the kernel tarball, as bytes, in archive order."""
    with tarfile.open(tarball, "r:xz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(TEXT_SUFFIXES):
                continue
            data = tar.extractfile(member).read()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            yield data


def _build_linux(path: Path, n_bytes: int) -> None:
    tarball = linux_tarball()
    total = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        for data in _linux_texts(tarball):
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
    """``raw`` cut into ~``size`` byte documents at safe boundaries (see fastbpe_nb.io.text_files)."""
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


# ---------------------------------------------------------------------------------------
# Workloads of benchmarks/compare_encoders.py (and suites/bench_encode_real.py): each
# builder returns ``(path, description)`` of a file cached under CACHE (the description in
# ``<file>.about``), built once per machine from Debian packages when they are installed,
# else from the team's shared corpora, and the description then says so. Deterministic.

SHARED_CORPORA = Path(os.environ.get("FASTBPE_SHARED_CORPORA", ROOT.parent / "shared" / "corpora"))
MAN_ROOT = Path("/usr/share/man")
EUROPEAN_MAN = ("de", "fr", "es", "ru")
CJK_MAN = ("zh_CN", "zh_TW", "ja")
FORTUNES = ("fortunes_en.txt", "fortunes_de.txt", "fortunes_ru.txt", "fortunes_zh.txt")


def _cached(path: Path, build) -> tuple[Path, str]:
    """``(path, description)``; ``build(tmp_path) -> description`` makes the file once."""
    about = path.with_name(path.name + ".about")
    if not (path.exists() and about.exists()):
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        description = build(tmp)
        tmp.replace(path)
        about.write_text(description + "\n", encoding="utf-8")
    return path, about.read_text(encoding="utf-8").strip()


def man_pages(language: str) -> list[bytes]:
    """The troff source of every UTF-8 man page of ``language`` (Debian's
    ``manpages-<lang>`` packages, gzipped under /usr/share/man/<lang>/), by path; symlinked
    pages (aliases of another page) are left out, so no page appears twice."""
    import gzip

    out = []
    for name in sorted(glob.glob(str(MAN_ROOT / language / "man*" / "*.gz"))):
        if os.path.islink(name):
            continue
        try:
            data = gzip.open(name).read()
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # not UTF-8 (or unreadable): not text this benchmark can use
        out.append(data)
    return out


def fortunes(filename: str) -> list[bytes]:
    """The fortunes of one shared-corpora file (one document per fortune)."""
    path = SHARED_CORPORA / filename
    if not path.exists():
        return []
    return [f.strip(b"\n") + b"\n" for f in path.read_bytes().split(b"\n%\n") if f.strip()]


def kjv_chapters() -> list[bytes]:
    """The King James Bible of the shared corpora, one document per chapter."""
    import re

    path = SHARED_CORPORA / "kjv.txt"
    if not path.exists():
        return []
    # A chapter starts with an unindented "Book N" line (verses are indented).
    parts = re.split(rb"\n(?=[1-3]? ?[A-Z][a-z]+(?: of [A-Z][a-z]+)? [0-9]+\n)", path.read_bytes())
    return [p.strip(b"\n") + b"\n" for p in parts if p.strip()]


def _round_robin(sources: dict[str, list[bytes]], n_bytes: int) -> tuple[bytes, dict[str, int]]:
    """Documents taken one from each source in turn until ``n_bytes``; bytes per source."""
    parts, used, total = [], {k: 0 for k in sources}, 0
    iters = {k: iter(v) for k, v in sources.items() if v}
    while iters and total < n_bytes:
        for key in list(iters):
            doc = next(iters[key], None)
            if doc is None:
                del iters[key]
                continue
            doc = doc if doc.endswith(b"\n") else doc + b"\n"
            if total + len(doc) > n_bytes:  # the last document is cut at a line end
                doc = doc[: doc.rfind(b"\n", 0, n_bytes - total) + 1]
            parts.append(doc)
            used[key] += len(doc)
            total += len(doc)
            if total >= n_bytes:
                break
    return b"".join(parts), used


def _shares(used: dict[str, int]) -> str:
    return ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in used.items() if v)


def _non_ascii(data: bytes) -> str:
    import numpy as np

    share = float((np.frombuffer(data, np.uint8) >= 0x80).mean()) if data else 0.0
    return f"{100 * share:.0f}% of bytes non-ASCII"


def _man_or_fallback(kind: str, languages, fallback_files, n_bytes: int) -> tuple[Path, str]:
    """Man pages of ``languages`` taken in turn up to ``n_bytes``, else the shared corpora."""
    if any(glob.glob(str(MAN_ROOT / lang / "man*" / "*.gz")) for lang in languages) and \
            len(man_pages(languages[0])) >= 10:
        def build(tmp):
            data, used = _round_robin({lang: man_pages(lang) for lang in languages}, n_bytes)
            tmp.write_bytes(data)
            return (f"Debian man pages, troff source, one page of each language in turn: "
                    f"{len(data) / 1e6:.1f} MB ({_shares(used)}; {_non_ascii(data)})")

        return _cached(CACHE / f"{kind}-man-{n_bytes}.txt", build)

    def build_fallback(tmp):
        sources = {f: fortunes(f) for f in fallback_files}
        data, used = _round_robin(sources, n_bytes)
        tmp.write_bytes(data)
        short = "" if len(data) >= n_bytes else f"; all there is, short of {n_bytes / 1e6:.0f} MB"
        return (f"FALLBACK (man pages not installed): shared-corpora fortunes, one of each file "
                f"in turn, {len(data) / 1e6:.1f} MB ({_shares(used)}{short})")

    return _cached(CACHE / f"{kind}-shared-{n_bytes}.txt", build_fallback)


def code_path(n_bytes: int = 10_000_000) -> tuple[Path, str]:
    """Code: the first ``n_bytes`` of the Linux sources (``corpus_path``)."""
    return corpus_path(n_bytes)


def european_path(n_bytes: int = 10_000_000) -> tuple[Path, str]:
    """European languages: German, French, Spanish and Russian man pages, in turn."""
    return _man_or_fallback("european", EUROPEAN_MAN, ("fortunes_de.txt", "fortunes_ru.txt"),
                            n_bytes)


def cjk_path(n_bytes: int = 6_000_000) -> tuple[Path, str]:
    """CJK: Simplified and Traditional Chinese and Japanese man pages, in turn."""
    return _man_or_fallback("cjk", CJK_MAN, ("fortunes_zh.txt",), n_bytes)


def _linux_files(n_bytes: int) -> list[bytes]:
    """Whole UTF-8 text files (one document each), in archive order, to ``n_bytes``."""
    tarball = linux_tarball()
    if not tarball:
        return [t.encode("utf-8") for t in stdlib_texts(n_bytes)]
    out, total = [], 0
    for data in _linux_texts(tarball):
        if total >= n_bytes:
            break
        out.append(data)
        total += len(data)
    return out


def _shuffled(docs: list[bytes], seed: int = 0) -> list[bytes]:
    import random

    docs = list(docs)
    random.Random(seed).shuffle(docs)
    return docs


def _prose_documents(every_man_page: int = 1) -> dict[str, list[bytes]]:
    parts = {f.split(".")[0]: fortunes(f) for f in FORTUNES}
    parts["KJV chapters"] = kjv_chapters()
    pages = [d for lang in EUROPEAN_MAN + CJK_MAN for d in man_pages(lang)]
    parts["man pages"] = pages[::every_man_page]
    return parts


def mixed_documents_path(n_docs: int = 120_000) -> tuple[Path, str]:
    """``n_docs`` real documents of mixed lengths and languages, shuffled, as an Arrow IPC
    file with one ``text`` column: every fortune (en/de/ru/zh, tens to thousands of bytes),
    the KJV by chapter, every third man page of each installed language (KBs to 100s of
    KB), and paragraphs of the Linux sources (blank-line separated) to make up the count."""

    def build(tmp):
        import pyarrow as pa

        parts = _prose_documents(every_man_page=3)
        have = sum(map(len, parts.values()))
        code = []
        if have < n_docs:
            raw = corpus_path(max(1_000_000, 600 * (n_docs - have)))[0].read_bytes()
            code = [p + b"\n" for p in raw.split(b"\n\n") if p.strip()][: n_docs - have]
        parts["Linux source paragraphs"] = code
        docs = _shuffled([d for v in parts.values() for d in v])[:n_docs]
        table = pa.table({"text": pa.array([d.decode("utf-8") for d in docs], pa.string())})
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        counts = ", ".join(f"{k} {len(v):,}" for k, v in parts.items() if v)
        lengths = sorted(map(len, docs))
        return (f"{len(docs):,} documents, {sum(lengths) / 1e6:.1f} MB, shuffled; lengths "
                f"median {lengths[len(lengths) // 2]:,} B, 99th percentile "
                f"{lengths[int(len(lengths) * 0.99)]:,} B, max {lengths[-1]:,} B ({counts})")

    return _cached(CACHE / f"mixed-{n_docs}.arrow", build)


def parquet_path(n_bytes: int = 86_000_000, row_group_rows: int = 16384) -> tuple[Path, str]:
    """A Parquet file (snappy, one ``text`` column) of about ``n_bytes`` of text, shuffled:
    prose (man pages, fortunes, KJV chapters) up to half of it, whole Linux source files
    for the rest."""

    def build(tmp):
        import pyarrow as pa
        import pyarrow.parquet as pq

        prose, total = [], 0
        for d in _shuffled([d for v in _prose_documents().values() for d in v], 1):
            if total >= n_bytes // 2:
                break
            prose.append(d)
            total += len(d)
        code = _linux_files(n_bytes - total)
        docs = _shuffled(prose + code)
        table = pa.table({"text": pa.array([d.decode("utf-8") for d in docs], pa.string())})
        pq.write_table(table, tmp, row_group_size=row_group_rows)
        n_text = sum(map(len, docs))
        return (f"{len(docs):,} documents, {n_text / 1e6:.1f} MB of text in a "
                f"{os.path.getsize(tmp) / 1e6:.1f} MB Parquet file (snappy, {row_group_rows:,}-row "
                f"groups): {len(code):,} whole Linux source files {sum(map(len, code)) / 1e6:.1f} MB, "
                f"{len(prose):,} prose documents (man pages, fortunes, KJV chapters) "
                f"{total / 1e6:.1f} MB")

    return _cached(CACHE / f"docs-{n_bytes}.parquet", build)
