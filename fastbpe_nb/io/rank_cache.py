"""A persistent cache of what loading a ``.tiktoken`` ranks file derives from it.

Parsing 200k base64 lines, recovering the merges (a kernel), finding every two-token split
of every token (another kernel) and building the encoder's hash tables from them (five more)
cost more than a second for o200k_base; their result depends on the file's bytes and the
encoder's code alone. It is kept in one ``.npz`` per file under :func:`cache_dir`, named
and keyed by the SHA-256 of :data:`FORMAT_VERSION`, the source of the encode kernels (their
hash functions place the entries) and the file's bytes, written atomically (``io.atomic``).
A load from the cache then runs no kernel at all: the tokens, their merges and the
encoder's tables (``model.KernelTables.arrays``: the whole-token table, the pair-rank
table, the byte-pair table, the short-piece table) come from the file.

A cache file is *validated on read* before any kernel sees it (Numba does not check
bounds): the zip CRC of every member (a flipped or truncated byte), the key, dtypes,
shapes, offsets, every id in bounds with the lengths of a merge's parts adding up to its
token's, every hash table with a free slot (probes end there) and ids and ranks in bounds
in every occupied one. A file that fails is ignored (a ``RankCacheWarning`` names it and
the reason) and rewritten. What these checks cannot catch is a file deliberately rewritten
with consistent but other tokens or table entries: it gives other ids, never a crash;
whoever can write the cache folder can as well edit the code.

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
from ..layout import byte_sym_map
from .atomic import atomic_write

#: Bump when the arrays or their meaning change: older files are then simply not found.
FORMAT_VERSION = 2
_NAMES = ("key", "tok_off", "tok_data", "merges", "caps", "whole_slots", "pair_slots",
          "pair_entries", "byte_pairs", "short_slots", "short_entries", "sweep_ranks")
#: Mirrors of kernels.piece_cache's packing of ids (importing it would import Numba).
_ID_BITS, _MAX_IDS = 20, 3
_encoder_digest: list[bytes] = []
#: Outcomes of this process's lookups (``hits``, ``misses``, ``rejected``: invalid files
#: ignored, ``written``, ``unwritable``: writes skipped because the folder refused them).
STATS = {"hits": 0, "misses": 0, "rejected": 0, "written": 0, "unwritable": 0}
_warned_dirs: set[str] = set()


class CacheEntry:
    """A validated cache file: the tokens by rank, their recovered merges and the encoder's
    tables (``table_arrays``)."""

    def __init__(self, arrays: dict):
        self.tok_off, self.tok_data = arrays["tok_off"], arrays["tok_data"]
        self.merges = arrays["merges"]
        self._arrays = arrays

    def tokens(self) -> list[bytes]:
        buf = self.tok_data.tobytes()
        off = self.tok_off.tolist()
        return [buf[a:b] for a, b in zip(off, off[1:])]

    def table_arrays(self) -> dict:
        """``KernelTables.from_arrays``' arguments: the hash tables scattered back into their
        slots (the file keeps only the occupied slots: a third of the bytes to read)."""
        a = self._arrays
        whole_cap, pair_cap, short_cap = (int(c) for c in a["caps"])
        whole = np.full(whole_cap, -1, dtype=np.int64)
        whole[a["whole_slots"]] = np.arange(len(a["whole_slots"]), dtype=np.int64)
        pairs = np.full(2 * pair_cap, -1, dtype=np.int64)
        pairs[1::2] = 0  # build_rank_table's value in a free slot
        slots = a["pair_slots"].astype(np.int64)
        pairs[2 * slots], pairs[2 * slots + 1] = a["pair_entries"][:, 0], a["pair_entries"][:, 1]
        short = np.full(3 * short_cap, -1, dtype=np.int64)  # short_cap 0: no table
        slots = a["short_slots"].astype(np.int64)
        for k in range(3):
            short[3 * slots + k] = a["short_entries"][:, k]
        return {"pairs": pairs, "byte_pairs": a["byte_pairs"], "short": short,
                "whole": (whole, self.tok_off, self.tok_data),
                "sweep_ranks": int(a["sweep_ranks"][0])}

    def sym_map(self) -> np.ndarray:
        """The byte-level symbol map the tables were built for (the file's byte order)."""
        return byte_sym_map(self.tok_data[:256])


def cache_dir() -> str | None:
    """The cache folder: ``$FASTBPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/fastbpe_nb``, else
    ``~/.cache/fastbpe_nb``; None when ``FASTBPE_CACHE_DIR`` is empty, ``off`` or ``0``."""
    env = os.environ.get("FASTBPE_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastbpe_nb")


def file_key(data: bytes) -> bytes:
    """The 32-byte key of a ranks file's contents in this cache format, for this encoder."""
    return hashlib.sha256(b"fastbpe_nb ranks cache %d\0" % FORMAT_VERSION + encoder_digest()
                          + data).digest()


def encoder_digest() -> bytes:
    """SHA-256 of ``kernels/encode.py``, whose kernel cache stamp covers the hashing and
    piece-cache code it imports: tables placed by other hash functions are not found."""
    if not _encoder_digest:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "kernels", "encode.py")
        with open(path, "rb") as f:
            _encoder_digest.append(hashlib.sha256(f.read()).digest())
    return _encoder_digest[0]


def cache_path(folder: str, key: bytes) -> str:
    return os.path.join(folder, f"ranks-{key.hex()}.v{FORMAT_VERSION}.npz")


def read(data: bytes, source=None) -> CacheEntry | None:
    """The validated cache entry of a ranks file's ``data``, or None (off, absent, invalid)."""
    folder = cache_dir()
    if folder is None:
        return None
    key = file_key(data)
    path = cache_path(folder, key)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in _NAMES}
    except (FileNotFoundError, NotADirectoryError):  # not written yet (or cannot be)
        STATS["misses"] += 1
        return None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is ignored and rewritten
        return _reject(path, f"unreadable ({type(exc).__name__}: {exc})")
    reason = check(arrays, key)
    if reason is not None:
        return _reject(path, reason)
    STATS["hits"] += 1
    return CacheEntry(arrays)


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
            "merges": (np.int32, 2), "caps": (np.int64, 1), "whole_slots": (np.int32, 1),
            "pair_slots": (np.int32, 1), "pair_entries": (np.int64, 2),
            "byte_pairs": (np.int64, 1), "short_slots": (np.int32, 1),
            "short_entries": (np.int64, 2), "sweep_ranks": (np.int64, 1)}
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
    merges = arrays["merges"]
    made = np.arange(256, n)
    if merges.shape != (n - 256, 2) or (merges < 0).any() or \
            (merges >= made[:, None]).any():
        return "a merge uses an id not defined before its token"
    if (lengths[merges[:, 0]] + lengths[merges[:, 1]] != lengths[made]).any():
        return "a merge's parts do not add up to its token's length"
    return check_tables(arrays, n)


def _slots_ok(slots, cap: int, n_entries: int) -> bool:
    """Slots of ``n_entries`` entries inside a table of ``cap`` slots (a power of two) that
    keeps a free slot whatever they hold (a probe stops at one)."""
    return cap >= 1 and cap & (cap - 1) == 0 and slots.shape == (n_entries,) \
        and n_entries < cap and not ((slots < 0) | (slots >= cap)).any()


def _bad_rank_values(vals, n: int, n_ranks: int) -> bool:
    """Any ``(rank << 32) | id`` with the id outside ``0..n-1`` or the rank outside
    ``0..n_ranks-1`` (the rank indexes the sweep's ``int32[n_ranks]`` list heads)."""
    ids, ranks = vals & 0xFFFFFFFF, vals >> 32
    return bool(((ids >= n) | (ranks < 0) | (ranks >= n_ranks)).any())


def check_tables(arrays: dict, n: int) -> str | None:
    """Why the encoder's tables in ``arrays`` (for ``n`` tokens) are not safe for the
    kernels to probe, or None: each hash table keeps a free slot, and every entry has ids
    below ``n`` and ranks below ``sweep_ranks``."""
    caps, sweep = arrays["caps"], arrays["sweep_ranks"]
    pair_entries, short_entries = arrays["pair_entries"], arrays["short_entries"]
    if caps.shape != (3,) or (caps[:2] < 1).any() or caps[2] < 0 or (caps > 2**31).any():
        return "the tables' sizes are out of bounds"
    whole_cap, pair_cap, short_cap = (int(c) for c in caps)
    if sweep.shape != (1,) or not 0 <= sweep[0] <= len(pair_entries):
        return "the rank sweep's size is out of bounds"
    n_ranks = int(sweep[0])
    if not _slots_ok(arrays["whole_slots"], whole_cap, n):
        return "the whole-token table has a slot out of bounds or no free slot"
    if pair_entries.ndim != 2 or pair_entries.shape[1] != 2 or \
            not _slots_ok(arrays["pair_slots"], pair_cap, len(pair_entries)):
        return "the pair-rank table has a slot out of bounds or no free slot"
    keys, vals = pair_entries[:, 0], pair_entries[:, 1]
    if ((keys >> 32) >= n).any() or ((keys >> 32) < 0).any() or \
            ((keys & 0xFFFFFFFF) >= n).any() or _bad_rank_values(vals, n, n_ranks):
        return "the pair-rank table has an id or rank out of bounds"
    byte_pairs = arrays["byte_pairs"]
    if byte_pairs.shape != (65536,) or \
            _bad_rank_values(byte_pairs[byte_pairs != -1], n, n_ranks):
        return "the byte-pair table has an id or rank out of bounds"
    no_short = short_cap == 0 and len(short_entries) == 0 and len(arrays["short_slots"]) == 0
    if short_entries.ndim != 2 or short_entries.shape[1] != 3 or (not no_short and (
            not _slots_ok(arrays["short_slots"], short_cap, len(short_entries))
            or (short_entries[:, 0] == -1).any())):
        return "the short-piece table has a slot out of bounds or no free slot"
    packed = short_entries[:, 2]
    count = packed >> 60
    if ((count < 1) | (count > _MAX_IDS)).any():
        return "the short-piece table has an entry of a wrong id count"
    for k in range(_MAX_IDS):
        ids = (packed >> (_ID_BITS * k)) & ((1 << _ID_BITS) - 1)
        if ((ids >= n) & (count > k)).any():
            return "the short-piece table has a token id out of bounds"
    return None


def pack_tables(tables: dict) -> dict:
    """The cache file's arrays of ``KernelTables.arrays()``: each hash table as its size,
    its occupied slots and their entries (``CacheEntry.table_arrays`` scatters them back)."""
    whole_keys = tables["whole"][0]
    whole_slots = np.empty(int((whole_keys != -1).sum()), dtype=np.int32)
    used = np.flatnonzero(whole_keys != -1)
    whole_slots[whole_keys[used]] = used
    pairs, short = tables["pairs"], tables["short"]
    pair_used = np.flatnonzero(pairs[0::2] != -1)
    short_used = np.flatnonzero(short[0::3] != -1)
    return {
        "caps": np.array([len(whole_keys), len(pairs) // 2, len(short) // 3],
                         dtype=np.int64),
        "whole_slots": whole_slots,
        "pair_slots": pair_used.astype(np.int32),
        "pair_entries": np.stack([pairs[2 * pair_used], pairs[2 * pair_used + 1]], axis=1),
        "byte_pairs": tables["byte_pairs"],
        "short_slots": short_used.astype(np.int32),
        "short_entries": np.stack([short[3 * short_used + k] for k in range(3)], axis=1)
        if len(short_used) else np.zeros((0, 3), dtype=np.int64),
        "sweep_ranks": np.array([tables["sweep_ranks"]], dtype=np.int64),
    }


def write(data: bytes, model, byte_order, source=None) -> None:
    """Store what ``model`` (loaded from ranks file contents ``data``) derived, its encoder
    tables for the byte-level ``byte_order`` included (built now if they were not: what
    the first encode would build); a folder that refuses it is skipped with one warning
    (see the module docstring)."""
    folder = cache_dir()
    if folder is None:
        return
    tables = model.tables(byte_sym_map(byte_order), True, len(model.token_bytes)).arrays()
    _, tok_off, tok_data = tables["whole"]
    key = file_key(data)
    arrays = {"key": np.frombuffer(key, np.uint8), "tok_off": tok_off,
              "tok_data": tok_data, "merges": np.asarray(model.merges, np.int32),
              **pack_tables(tables)}
    path = cache_path(folder, key)
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
