"""The persistent cache of loaded ``.tiktoken`` files (``io.rank_cache``), the fast path of
the ranks parser and the vectorized merge check of ``MergeModel.from_tokens``.

A cache file is read before any kernel sees its arrays: a truncated file, a flipped byte,
or a file of another rank file must be ignored (with a RankCacheWarning) and rebuilt,
giving the same ids as an uncached load. Arrays with ids out of bounds (which would reach
kernels that do not check bounds if the validation failed) are tried in a subprocess:
tests/reliability/test_loadcache.py.
"""

import multiprocessing as mp
import os
import random
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import ModelFormatError, RankCacheWarning
from fastbpe_nb.io import rank_cache
from fastbpe_nb.io import tiktoken_format as tf
from fastbpe_nb.model import MergeModel, bad_joins, token_arrays

TEXT = ("The quick brown fox jumps over the lazy dog. Über straße naïve café. "
        "Съешь же ещё этих мягких французских булок. 我能吞下玻璃而不伤身体。 ") * 20
SAMPLES = ["Hello world", TEXT[:500], "  tabs\tand\nnewlines 1234567 ", "ünïcödé ✓"]


@pytest.fixture(scope="module")
def ranks_files(tmp_path_factory):
    """Two different small ranks files (trained here, 300 and 340 tokens)."""
    folder = tmp_path_factory.mktemp("ranks")
    paths = []
    for size in (300, 340):
        path = folder / f"v{size}.tiktoken"
        fb.train([TEXT], vocab_size=size, pattern="cl100k").to_tiktoken(path)
        paths.append(str(path))
    return paths


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("FASTBPE_CACHE_DIR", str(folder))
    return folder


def uncached_ids(path):
    old = os.environ.get("FASTBPE_CACHE_DIR")
    os.environ["FASTBPE_CACHE_DIR"] = ""
    try:
        tok = fb.from_tiktoken(path, pattern="cl100k")
    finally:
        os.environ["FASTBPE_CACHE_DIR"] = old
    return [tok.encode(s) for s in SAMPLES]


def cache_file(folder):
    (name,) = os.listdir(folder)
    return folder / name


def load_ids(path):
    tok = fb.from_tiktoken(path, pattern="cl100k")
    return [tok.encode(s) for s in SAMPLES]


def test_second_load_is_a_hit_with_the_same_ids(ranks_files, cache):
    want = uncached_ids(ranks_files[0])
    before = dict(rank_cache.STATS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_ids(ranks_files[0]) == want  # miss: written
        assert load_ids(ranks_files[0]) == want  # hit
    assert rank_cache.STATS["written"] == before["written"] + 1
    assert rank_cache.STATS["hits"] == before["hits"] + 1
    name = cache_file(cache).name
    assert name.startswith("ranks-") and name.endswith(f".v{rank_cache.FORMAT_VERSION}.npz")


def test_off_writes_nothing(ranks_files, tmp_path, monkeypatch):
    for value in ("", "off"):
        monkeypatch.setenv("FASTBPE_CACHE_DIR", value)
        assert rank_cache.cache_dir() is None
        load_ids(ranks_files[0])
    monkeypatch.delenv("FASTBPE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert rank_cache.cache_dir() == str(tmp_path / "xdg" / "fastbpe_nb")


def reload_rejected(path, want, match):
    """Load once more: the bad cache file is ignored with a warning and rewritten."""
    with pytest.warns(RankCacheWarning, match=match):
        assert load_ids(path) == want
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_ids(path) == want  # rewritten: a clean hit


def test_truncated_cache_file_is_rebuilt(ranks_files, cache):
    want = uncached_ids(ranks_files[0])
    load_ids(ranks_files[0])
    f = cache_file(cache)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    reload_rejected(ranks_files[0], want, "unreadable")


def test_flipped_byte_is_rebuilt(ranks_files, cache):
    # One bit of a token's bytes: the arrays stay consistent, the zip CRC of the member
    # catches it before they are used.
    want = uncached_ids(ranks_files[0])
    load_ids(ranks_files[0])
    f = cache_file(cache)
    with zipfile.ZipFile(f) as z:
        info = z.getinfo("tok_data.npy")
    raw = bytearray(f.read_bytes())
    h = info.header_offset  # the local header's own name and extra lengths
    data_start = h + 30 + int.from_bytes(raw[h + 26:h + 28], "little") \
        + int.from_bytes(raw[h + 28:h + 30], "little")
    raw[data_start + 128 + 7] ^= 0x20  # past the .npy header: a token byte
    f.write_bytes(bytes(raw))
    reload_rejected(ranks_files[0], want, "CRC")


def test_cache_file_of_another_rank_file_is_rejected(ranks_files, cache):
    # The cache file of file B put under file A's name: the key inside names B.
    want_a = uncached_ids(ranks_files[0])
    load_ids(ranks_files[1])
    other = cache_file(cache)
    key_a = rank_cache.file_key(open(ranks_files[0], "rb").read())
    os.replace(other, rank_cache.cache_path(str(cache), key_a))
    reload_rejected(ranks_files[0], want_a, "key mismatch")


def test_unwritable_cache_folder_warns_once_and_loads(ranks_files, tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_folder"
    blocker.write_bytes(b"")  # makedirs fails even as root
    monkeypatch.setenv("FASTBPE_CACHE_DIR", str(blocker / "cache"))
    want = uncached_ids(ranks_files[0])
    before = rank_cache.STATS["unwritable"]
    with pytest.warns(RankCacheWarning, match="cannot write the ranks cache"):
        assert load_ids(ranks_files[0]) == want
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder and process
        assert load_ids(ranks_files[0]) == want
    assert rank_cache.STATS["unwritable"] == before + 2


def _tables(tok) -> dict:
    arrays = tok._encoder.tables().arrays()
    arrays.update(zip(("whole_keys", "tok_off", "tok_data"), arrays.pop("whole")))
    return arrays


def test_tables_from_the_cache_equal_the_built_ones(ranks_files, cache):
    load_ids(ranks_files[1])  # writes the cache
    old = os.environ["FASTBPE_CACHE_DIR"]
    os.environ["FASTBPE_CACHE_DIR"] = ""
    try:
        built = _tables(fb.from_tiktoken(ranks_files[1], pattern="cl100k"))
    finally:
        os.environ["FASTBPE_CACHE_DIR"] = old
    before = rank_cache.STATS["hits"]
    tok = fb.from_tiktoken(ranks_files[1], pattern="cl100k")
    assert rank_cache.STATS["hits"] == before + 1
    cached = _tables(tok)
    assert set(cached) == set(built) and built["short"].shape[0] > 0
    for name in built:
        assert np.array_equal(np.asarray(cached[name]), np.asarray(built[name])), name


def test_the_cache_checks_packed_ids_as_the_kernels_pack_them():
    # rank_cache mirrors the packing (importing the kernels would import Numba): a change
    # on one side only would let it accept ids the kernels read out of bounds.
    from fastbpe_nb.kernels.piece_cache import SHORT_ID_BITS, SHORT_MAX_IDS

    assert (rank_cache._ID_BITS, rank_cache._MAX_IDS) == (SHORT_ID_BITS, SHORT_MAX_IDS)


def test_a_load_from_the_cache_runs_no_kernel(ranks_files, cache):
    # Not even Numba is imported: the tables come from the file, kernels load at the
    # first encode.
    want = load_ids(ranks_files[0])
    code = ("import sys, fastbpe_nb as fb\n"
            f"tok = fb.from_tiktoken({ranks_files[0]!r}, pattern='cl100k')\n"
            "print('numba' in sys.modules)\n"
            f"print([tok.encode(s) for s in {SAMPLES!r}])\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "FASTBPE_CACHE_DIR": str(cache)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["False", repr(want), "True"]


@pytest.mark.parametrize("request_", ["the file's", "another map", "char level"])
def test_cached_tables_are_used_only_for_what_they_were_built_for(ranks_files, cache,
                                                                   monkeypatch, request_):
    # (For a ranks vocabulary the tables do not depend on the map: the refusal is caution.)
    from fastbpe_nb.model import KernelTables

    load_ids(ranks_files[0])
    tok = fb.from_tiktoken(ranks_files[0], pattern="cl100k")
    taken = []
    real = KernelTables.from_arrays.__func__
    monkeypatch.setattr(KernelTables, "from_arrays",
                        classmethod(lambda cls, **kw: taken.append(1) or real(cls, **kw)))
    sym_map = tok.level.sym_map if request_ != "another map" else \
        np.arange(256, dtype=np.int32)[::-1].copy()
    tables = tok.model.tables(sym_map, request_ != "char level", tok.vocab_size)
    assert taken == ([1] if request_ == "the file's" else [])
    assert tables.pairs.shape[0] > 0 and tok.model._cached_tables is None


def _child_load(path):
    tok = fb.from_tiktoken(path, pattern="cl100k")
    return [tok.encode(s) for s in SAMPLES], dict(rank_cache.STATS)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_loads_from_the_cache(ranks_files, cache):
    want = uncached_ids(ranks_files[1])
    assert load_ids(ranks_files[1]) == want  # the parent writes the cache
    with mp.get_context("fork").Pool(1) as pool:
        ids, stats = pool.apply_async(_child_load, (ranks_files[1],)).get(timeout=120)
    assert ids == want
    assert stats["hits"] == rank_cache.STATS["hits"] + 1


# ---------------------------------------------------------------- parser fast path
def test_fast_parse_equals_the_full_parser(ranks_files, monkeypatch):
    data = open(ranks_files[1], "rb").read()
    fast = tf.parse_ranks(data)
    assert tf._parse_plain(data) is not None
    monkeypatch.setattr(tf, "_parse_plain", lambda data: None)
    tokens, lines = tf.parse_ranks(data)
    assert fast[0] == tokens and list(fast[1]) == lines


@pytest.mark.parametrize("edit", [
    lambda lines: lines[:300] + [lines[300].replace(b" 300", b" 0300")] + lines[301:],
    lambda lines: lines[:299] + [lines[300], lines[299]] + lines[301:],  # ranks out of order
    lambda lines: lines[:10] + [b""] + lines[10:],  # a blank line
    lambda lines: [ln + b"\r" for ln in lines],  # CRLF
])
def test_unusual_but_valid_files_take_the_full_parser(ranks_files, edit):
    lines = open(ranks_files[1], "rb").read().split(b"\n")[:-1]
    data = b"\n".join(edit(lines)) + b"\n"
    assert tf._parse_plain(data) is None
    tokens, _ = tf.parse_ranks(data)
    assert tokens == tf.parse_ranks(open(ranks_files[1], "rb").read())[0]


@pytest.mark.parametrize("edit, match", [
    (lambda lines: lines[:5] + [lines[5].replace(b" 5", b" 300")] + lines[6:], "given twice"),
    (lambda lines: [lines[1].split()[0] + b" 0"] + lines[1:], "given twice"),
    (lambda lines: lines[:7] + [b"!!!! 7"] + lines[8:], "invalid base64"),
    (lambda lines: lines[:7] + [b"YQ= 7"] + lines[8:], "invalid base64"),
])
def test_malformed_files_are_still_named(ranks_files, edit, match):
    lines = open(ranks_files[1], "rb").read().split(b"\n")[:-1]
    with pytest.raises(ModelFormatError, match=match):
        tf.parse_ranks(b"\n".join(edit(lines)) + b"\n", "f.tiktoken")


# ---------------------------------------------------------------- from_tokens' check
def python_bad_joins(merges, tokens, n_base=256):
    return [k for k, (a, b) in enumerate(merges.tolist()) if tokens[a] + tokens[b] != tokens[n_base + k]]


def test_bad_joins_equals_the_loop(ranks_files):
    tokens = tf.parse_ranks(open(ranks_files[1], "rb").read())[0]
    merges = tf.recover_merges(tokens).astype(np.int64)
    assert bad_joins(merges, *token_arrays(tokens), 256).size == 0
    rng = random.Random(7)
    for _ in range(40):
        bad = merges.copy()
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(bad))
            kind = rng.randrange(3)
            if kind == 0:
                bad[k] = bad[k][::-1]  # swapped parts: same length, other bytes (usually)
            elif kind == 1:
                bad[k, rng.randrange(2)] = rng.randrange(256 + k)
            else:  # same lengths, another byte
                a = int(bad[k, 0])
                same = [t for t in range(256 + k) if len(tokens[t]) == len(tokens[a])]
                bad[k, 0] = rng.choice(same)
        assert bad_joins(bad, *token_arrays(tokens), 256).tolist() == python_bad_joins(bad, tokens)


def test_from_tokens_names_the_first_wrong_merge(ranks_files):
    tokens = tf.parse_ranks(open(ranks_files[1], "rb").read())[0]
    merges = tf.recover_merges(tokens).astype(np.int64)
    merges[20] = merges[20][::-1]
    merges[30] = merges[30][::-1]
    first = python_bad_joins(merges, tokens)[0]
    with pytest.raises(ModelFormatError, match=rf"merges\[{first}\]"):
        MergeModel.from_tokens(merges, tokens, "ranks", "f")
