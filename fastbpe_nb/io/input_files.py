"""Which files corpus paths name, and what each file holds by its name.

Which files a path names (``expand_paths``)
    A file; a folder, walked in sorted order (symlinked subfolders followed, each real
    folder once: a symlink loop is detected and reported); a glob (``**`` walked the same
    way). Only regular files are read: a FIFO or a device met in a walk is left out and
    counted, one named explicitly is an error (or skipped with ``on_bad_input="skip"``), as
    is a dangling symlink. Hidden files and folders (names starting with ``.``, such as
    ``.git``) are not walked and are counted; named explicitly, a hidden file is read.
    Every real file is read once, however many paths reach it (same device and inode).
    Nothing found at all is an error (``CorpusReadError``) naming what was looked for.

What a file holds (``file_kind``, by suffix after any compression suffix)
    ``.parquet`` ``.pq``: Parquet; ``.arrow`` ``.feather`` ``.ipc`` ``.arrows``: Arrow IPC;
    ``.jsonl`` ``.ndjson`` ``.jsonlines``: one JSON object per line; anything else: UTF-8
    text. ``compression_suffix`` names the codec a ``.gz`` ``.bz2`` ``.xz`` ``.zst`` suffix
    promises (``file_bytes`` checks it against the content).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat as stat_module

from ..errors import CorpusReadError

TEXT_SUFFIXES = (".txt", ".text", ".md", ".rst", ".py", ".c", ".h", ".json", ".csv")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")
PARQUET_SUFFIXES = (".parquet", ".pq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc", ".arrows")
#: Compression suffixes -> codec (the content is checked against the codec's magic bytes).
COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz",
                        ".zst": "zstd", ".zstd": "zstd"}

WHAT_IS_READ = ("accepted: files, folders (walked; hidden names skipped) and globs; "
                ".parquet/.pq and .arrow/.feather/.ipc/.arrows as tables, .jsonl/.ndjson "
                "as JSON lines, any other file as UTF-8 text; .gz/.bz2/.xz/.zst decompressed")


def check_on_bad_input(on_bad_input) -> None:
    if on_bad_input not in ("error", "skip"):
        raise ValueError(f"on_bad_input must be 'error' or 'skip', not {on_bad_input!r}")


# ---------------------------------------------------------------------- listing the files
def _has_magic(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def file_type_name(mode: int) -> str:
    for test, name in ((stat_module.S_ISFIFO, "a FIFO"), (stat_module.S_ISCHR, "a character device"),
                       (stat_module.S_ISBLK, "a block device"), (stat_module.S_ISSOCK, "a socket"),
                       (stat_module.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


class _Lister:
    """Collects the files named by paths (see the module docstring); one per real file."""

    def __init__(self, on_bad_input, ignored, skipped):
        self.on_bad_input = on_bad_input
        self.ignored = ignored if ignored is not None else []
        self.skipped = skipped if skipped is not None else []
        self.files: list[str] = []
        self._seen: dict[tuple, str] = {}

    def bad(self, path, reason):
        """An input that cannot be read: an error, or skipped and counted."""
        if self.on_bad_input == "error":
            raise CorpusReadError(f"{path}: {reason}")
        self.skipped.append((str(path), reason))

    def add(self, path: str) -> None:
        """One argument: a file, a folder or a glob."""
        if _has_magic(path) and not os.path.lexists(path):
            n_before = len(self.files) + len(self.ignored) + len(self.skipped)
            matches = self._glob(path)
            for m in matches:
                if not os.path.isdir(m):  # a glob names files: folders it matches are not walked
                    self.entry(m, named=False)
            if not matches or n_before == len(self.files) + len(self.ignored) + len(self.skipped):
                raise CorpusReadError(f"{path}: no file matches this pattern (no input files; "
                                      f"{WHAT_IS_READ})")
            return
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if os.path.islink(path):
                self.bad(path, f"dangling symlink (to {os.readlink(path)!r})")
                return
            raise CorpusReadError(f"{path}: no such file or folder") from None
        except OSError as exc:
            self.bad(path, f"cannot stat ({exc.strerror or exc})")
            return
        if stat_module.S_ISDIR(st.st_mode):
            self.walk(path)
        else:
            self.entry(path, named=True, st=st)

    def entry(self, path: str, named: bool, st=None) -> None:
        """A file met in a walk or a glob (``named=False``) or named explicitly."""
        if st is None:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if os.path.islink(path):
                    self.bad(path, f"dangling symlink (to {os.readlink(path)!r})")
                else:
                    self.bad(path, "vanished while listing")
                return
            except OSError as exc:
                self.bad(path, f"cannot stat ({exc.strerror or exc})")
                return
        if not stat_module.S_ISREG(st.st_mode):
            reason = f"{file_type_name(st.st_mode)}, not a regular file: only regular files are read"
            if named:
                self.bad(path, reason)  # never opened: a FIFO would block, /dev/zero never ends
            else:
                self.ignored.append((path, reason))
            return
        key = (st.st_dev, st.st_ino)
        if key in self._seen:
            self.ignored.append((path, f"same file as {self._seen[key]} (read once)"))
            return
        self._seen[key] = path
        self.files.append(path)

    def _dirs(self, root: str, hidden_ignored: bool):
        """``os.walk(root, followlinks=True)``, each real folder once, hidden ones pruned."""
        visited = set()
        try:
            st = os.stat(root)
            visited.add((st.st_dev, st.st_ino))
        except OSError:
            pass

        def onerror(exc):
            self.bad(exc.filename, f"cannot list folder ({exc.strerror or exc})")

        for folder, dirs, names in os.walk(root, onerror=onerror, followlinks=True):
            keep = []
            for d in sorted(dirs):
                full = os.path.join(folder, d)
                if d.startswith("."):
                    if hidden_ignored:
                        self.ignored.append((full, "hidden folder, not walked"))
                    continue
                try:
                    st = os.stat(full)
                except OSError as exc:
                    self.bad(full, f"cannot stat ({exc.strerror or exc})")
                    continue
                key = (st.st_dev, st.st_ino)
                if key in visited:
                    self.ignored.append((full, "folder already walked (a symlink loop, or a "
                                               "second link to it)"))
                    continue
                visited.add(key)
                keep.append(d)
            dirs[:] = keep
            yield folder, sorted(names)

    def walk(self, root: str) -> None:
        for folder, names in self._dirs(root, hidden_ignored=True):
            for n in names:
                full = os.path.join(folder, n)
                if n.startswith("."):
                    self.ignored.append((full, "hidden file"))
                else:
                    self.entry(full, named=False)

    def _glob(self, pattern: str) -> list[str]:
        """``glob.glob``; a ``**`` pattern is matched over a loop-safe walk instead (glob's
        own ``**`` follows symlink loops: the same files many times, or no end)."""
        parts = pattern.split(os.sep)
        if "**" not in parts:
            return sorted(glob.glob(pattern))
        first = next(i for i, p in enumerate(parts) if _has_magic(p) or p == "**")
        root = os.sep.join(parts[:first]) or ("" if not pattern.startswith(os.sep) else os.sep)
        rest = parts[first:]
        if not os.path.isdir(root or "."):
            return []
        out = []
        for folder, names in self._dirs(root or ".", hidden_ignored=False):
            rel = os.path.relpath(folder, root or ".")
            rel_parts = [] if rel == "." else rel.split(os.sep)
            for n in names:
                if not n.startswith(".") and _glob_match(rest, rel_parts + [n]):
                    out.append(os.path.join(root, *rel_parts, n) if root else
                               os.path.join(*rel_parts, n))
        return sorted(out)


def _glob_match(pattern_parts, path_parts) -> bool:
    """Component-wise glob match; ``**`` matches any number of folders."""
    if not pattern_parts:
        return not path_parts
    head = pattern_parts[0]
    if head == "**":
        return any(_glob_match(pattern_parts[1:], path_parts[k:])
                   for k in range(len(path_parts) + 1))
    return bool(path_parts) and fnmatch.fnmatchcase(path_parts[0], head) and _glob_match(
        pattern_parts[1:], path_parts[1:])


def expand_paths(paths, on_bad_input="error", ignored=None, skipped=None) -> list[str]:
    """The files named by ``paths`` (files, globs, folders): see the module docstring.

    ``ignored`` and ``skipped``, when given, are lists that receive ``(path, reason)`` of the
    entries left out (hidden, not regular, the same file again) and of the bad inputs
    skipped with ``on_bad_input="skip"``. Raises ``CorpusReadError`` when no file is found.
    """
    check_on_bad_input(on_bad_input)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    lister = _Lister(on_bad_input, ignored, skipped)
    for p in paths:
        lister.add(p)
    if not lister.files:
        looked = ", ".join(repr(p) for p in paths) or "nothing (an empty list of paths)"
        left_out = ""
        if lister.ignored or lister.skipped:
            hidden = sum(1 for _, r in lister.ignored if r.startswith("hidden"))
            left_out = (f"; left out: {hidden} hidden, {len(lister.ignored) - hidden} other, "
                        f"{len(lister.skipped)} skipped as bad")
        raise CorpusReadError(f"no input files: looked in {looked}{left_out} ({WHAT_IS_READ})")
    return lister.files


def file_kind(path: str) -> str:
    """``"parquet"``, ``"arrow"``, ``"jsonl"`` or ``"text"``, by suffix (after a compression
    suffix: ``data.jsonl.zst`` is JSON lines)."""
    lower = os.fspath(path).lower()
    base, ext = os.path.splitext(lower)
    if ext in COMPRESSION_SUFFIXES:
        lower = base
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(ARROW_SUFFIXES):
        return "arrow"
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return "text"


def compression_suffix(path: str) -> str | None:
    return COMPRESSION_SUFFIXES.get(os.path.splitext(os.fspath(path).lower())[1])
