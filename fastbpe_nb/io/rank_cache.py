"""A persistent cache of what loading a ``.tiktoken`` ranks file derives from it.

Parsing 200k base64 lines, recovering the merges (a kernel) and finding every two-token
split of every token (another kernel) cost more than a second for o200k_base; their result
depends on the file's bytes alone. It is kept in one ``.npz`` per file under
:func:`cache_dir`, named and keyed by the SHA-256 of the file's bytes and
:data:`FORMAT_VERSION`, written atomically (``io.atomic``).

A cache file is *validated on read* before any kernel sees it (Numba does not check
bounds): the zip CRC of every member (a flipped or truncated byte), the key, dtypes,
shapes, offsets, and every id in bounds with the lengths of a merge's parts adding up to
its token's. A file that fails is ignored (a ``RankCacheWarning`` names it and the reason)
and rewritten. What these checks cannot catch is a file deliberately rewritten with
consistent but other tokens: it gives other ids, never a crash; whoever can write the
cache folder can as well edit the code.

``FASTBPE_CACHE_DIR=""`` (or ``off``) turns the cache off. A folder that cannot be written
does not fail the load: the load goes on uncached, with one ``RankCacheWarning`` per folder
and process (a warning rather than silence: a cache that never works costs every load a
second), counted in :data:`STATS` with the other outcomes.
"""

from __future__ import annotations

import hashlib
import os
import warnings

import numpy as np

from ..errors import RankCacheWarning
from .atomic import atomic_write

#: Bump when the arrays or their meaning change: older files are then simply not found.
FORMAT_VERSION = 1
_NAMES = ("key", "tok_off", "tok_data", "merges", "pairs", "results")
#: Outcomes of this process's lookups (``hits``, ``misses``, ``rejected``: invalid files
#: ignored, ``written``, ``unwritable``: writes skipped because the folder refused them).
STATS = {"hits": 0, "misses": 0, "rejected": 0, "written": 0, "unwritable": 0}
_warned_dirs: set[str] = set()


class CacheEntry:
    """A validated cache file: the tokens by rank, their recovered merges and split pairs."""

    def __init__(self, tok_off, tok_data, merges, pairs, results):
        self.tok_off, self.tok_data = tok_off, tok_data
        self.merges, self.pairs, self.results = merges, pairs, results

    def tokens(self) -> list[bytes]:
        buf = self.tok_data.tobytes()
        off = self.tok_off.tolist()
        return [buf[a:b] for a, b in zip(off, off[1:])]


def cache_dir() -> str | None:
    """The cache folder: ``$FASTBPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/fastbpe_nb``, else
    ``~/.cache/fastbpe_nb``; None when ``FASTBPE_CACHE_DIR`` is empty, ``off`` or ``0``."""
    env = os.environ.get("FASTBPE_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastbpe_nb")


def file_key(data: bytes) -> bytes:
    """The 32-byte key of a ranks file's contents in this cache format."""
    return hashlib.sha256(b"fastbpe_nb ranks cache %d\0" % FORMAT_VERSION + data).digest()


def cache_path(folder: str, key: bytes) -> str:
    return os.path.join(folder, f"ranks-{key.hex()}.v{FORMAT_VERSION}.npz")


def read(data: bytes, source=None) -> CacheEntry | None:
    """The validated cache entry of a ranks file's ``data``, or None (off, absent, invalid)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = cache_path(folder, file_key(data))
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in _NAMES}
    except (FileNotFoundError, NotADirectoryError):  # not written yet (or cannot be)
        STATS["misses"] += 1
        return None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is ignored and rewritten
        return _reject(path, f"unreadable ({type(exc).__name__}: {exc})")
    reason = check(arrays, file_key(data))
    if reason is not None:
        return _reject(path, reason)
    STATS["hits"] += 1
    return CacheEntry(*(arrays[name] for name in _NAMES[1:]))


def _reject(path: str, reason: str) -> None:
    STATS["rejected"] += 1
    warnings.warn(f"ignoring the ranks cache file {path}: {reason}; it is rebuilt",
                  RankCacheWarning, stacklevel=4)
    return None


def check(arrays: dict, key: bytes) -> str | None:
    """Why ``arrays`` is not a valid cache entry for ``key``, or None.

    Everything a kernel will index with is checked here: offsets ascending within the
    data, the first 256 tokens the 256 single bytes, merge k's ids below ``256 + k``,
    split pairs' ids below the number of tokens, and each merge's or pair's part lengths
    adding up to its token's length.
    """
    want = {"key": (np.uint8, 1), "tok_off": (np.int64, 1), "tok_data": (np.uint8, 1),
            "merges": (np.int32, 2), "pairs": (np.int32, 2), "results": (np.int32, 1)}
    for name, (dtype, ndim) in want.items():
        a = arrays[name]
        if a.dtype != dtype or a.ndim != ndim:
            return f"{name} is {a.dtype}[{a.ndim}-d], expected {np.dtype(dtype)}[{ndim}-d]"
    if arrays["key"].tobytes() != key:
        return "it belongs to other file contents (key mismatch)"
    off, data = arrays["tok_off"], arrays["tok_data"]
    n = len(off) - 1
    if n < 256 or off[0] != 0 or off[-1] != len(data):
        return f"token offsets do not span the token data ({n} tokens)"
    lengths = np.diff(off)
    if (lengths < 1).any():
        return "a token is empty or its offsets descend"
    if (off[:257] != np.arange(257)).any() or len(np.unique(data[:256])) != 256:
        return "the first 256 tokens are not the 256 single bytes"
    merges, pairs, results = arrays["merges"], arrays["pairs"], arrays["results"]
    made = np.arange(256, n)
    if merges.shape != (n - 256, 2) or (merges < 0).any() or \
            (merges >= made[:, None]).any():
        return "a merge uses an id not defined before its token"
    if (lengths[merges[:, 0]] + lengths[merges[:, 1]] != lengths[made]).any():
        return "a merge's parts do not add up to its token's length"
    if pairs.shape != (len(results), 2) or (pairs < 0).any() or (pairs >= n).any() \
            or (results < 256).any() or (results >= n).any() or (np.diff(results) < 0).any():
        return "a split pair has an id out of bounds or out of order"
    if (lengths[pairs[:, 0]] + lengths[pairs[:, 1]] != lengths[results]).any():
        return "a split pair's parts do not add up to its token's length"
    return None


def write(data: bytes, model, source=None) -> None:
    """Store what ``model`` (loaded from ranks file contents ``data``) derived; a folder
    that refuses it is skipped with one warning (see the module docstring)."""
    folder = cache_dir()
    if folder is None:
        return
    (_, tok_off, tok_data), pairs, results = model.rank_pairs()
    arrays = {"key": np.frombuffer(file_key(data), np.uint8), "tok_off": tok_off,
              "tok_data": tok_data, "merges": np.asarray(model.merges, np.int32),
              "pairs": np.asarray(pairs, np.int32), "results": np.asarray(results, np.int32)}
    path = cache_path(folder, file_key(data))
    try:
        os.makedirs(folder, exist_ok=True)
        with atomic_write(path) as f:
            np.savez(f, **arrays)
    except OSError as exc:
        STATS["unwritable"] += 1
        if folder not in _warned_dirs:
            _warned_dirs.add(folder)
            warnings.warn(f"cannot write the ranks cache in {folder} ({exc}); loading goes on "
                          "uncached (set FASTBPE_CACHE_DIR to a writable folder, or to '' to "
                          "turn the cache off)", RankCacheWarning, stacklevel=3)
        return
    STATS["written"] += 1
