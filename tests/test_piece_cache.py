"""The persistent piece cache (``fastbpe_nb/piece_cache.py``, ``kernels/piece_cache.py``).

The cache only ever returns what merging returned for the same units, so every test here
compares ids with the cache against ids without it (``max_bytes = 0``) and against the
oracles (``reference.encode``, tiktoken where the real ranks are available), on the
calls that fill it (block tables), the calls that read it, parallel and serial, for
every preset; then its bounds, its thread and fork behaviour, and its failure handling.
"""

import os
import pickle
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import piece_cache as py_cache
from fastbpe_nb import reference as ref
from fastbpe_nb.kernels import piece_cache as k_cache

from fbtest import NOJIT
from presets import FACTORIES, SAMPLE, build

EXAMPLES = 25 if NOJIT else 120
TEXTS = SAMPLE + [
    # Long pieces (over SHORT_BYTES bytes, so hashed keys), repeated within and across
    # calls, and two long pieces whose polynomial hashes collide ("Aa" and "BB" have the
    # same hash_units, whatever comes before or after): the bytes must be compared.
    "Donaudampfschifffahrtsgesellschaft Donaudampfschifffahrtsgesellschaft " * 3,
    "xxxxxxxxxxxxxxxxxxAa xxxxxxxxxxxxxxxxxxBB xxxxxxxxxxxxxxxxxxAa",
    "东京是日本的首都我们在北京学习中文今天天气很好东京是日本的首都我们在北京学习中文",
    "0123456789" * 30 + " " + "ab" * 700,  # over cache_units: merged, never cached
]


def _own(tok):
    """A copy of a shared preset with a cache of its own (a copy starts empty)."""
    return pickle.loads(pickle.dumps(tok))


def _uncached(tok):
    clone = pickle.loads(pickle.dumps(tok))
    clone.piece_cache.max_bytes = 0
    return clone


def test_kernel_and_python_agree_on_the_counter_layout():
    names = ("ENTRIES", "UNITS", "IDS", "MAX_BYTES", "HITS", "BLOCK_HITS", "MERGED", "PUBLISH",
             "DROPPED")
    for name in names:
        assert getattr(py_cache, f"_{name}") == getattr(k_cache, f"S_{name}"), name
    assert py_cache._N_STATE == k_cache.N_STATE


def test_hash_collision_fixture_collides():
    from fastbpe_nb.kernels.hashing import HASH_SEED, hash_units

    a = np.frombuffer(b"xxxxxxxxxxxxxxxxxxAa", np.uint8)
    b = np.frombuffer(b"xxxxxxxxxxxxxxxxxxBB", np.uint8)
    assert hash_units(a, 0, len(a), HASH_SEED) == hash_units(b, 0, len(b), HASH_SEED)


@pytest.mark.parametrize("name", [name for name, _ in FACTORIES])
def test_cached_ids_equal_uncached_ids_every_preset(name):
    tok = _own(build(name))
    plain = _uncached(tok)
    texts = TEXTS * 2
    expected = [plain.encode_ordinary(t) for t in texts]
    assert plain.piece_cache.info()["entries"] == 0
    for round_ in range(3):  # fills, then reads, then reads again
        assert tok.encode_batch(texts, num_threads=2) == expected, round_
        assert [tok.encode_ordinary(t) for t in texts] == expected, round_
    info = tok.piece_cache.info()
    assert info["entries"] > 0 and info["hits"] > 0, info
    assert info["bytes"] <= info["max_bytes"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.text(alphabet="ab AB\u00e9\u4e2d", max_size=60), min_size=1, max_size=8))
def test_tie_heavy_texts_match_the_reference_across_calls(docs):
    # A vocabulary of many equal-looking merges over a tiny alphabet: ties everywhere,
    # pieces of every length, most of them repeated between calls.
    tok = _TIE_TOK
    want = [ref.encode(d, _TIE_MODEL) for d in docs]
    assert tok.encode_batch(docs, num_threads=2) == want
    assert [tok.encode_ordinary(d) for d in docs] == want


_TIE_CORPUS = ["ab ab abab aabb AB ABAB éé 中中 " * 20, "ba ba baba bbaa " * 20]
_TIE_TOK = fb.train(_TIE_CORPUS, vocab_size=300, pattern="gpt2")
_TIE_MODEL = ref.model_from_merges([tuple(m) for m in _TIE_TOK.merges.tolist()], pattern="gpt2")


def test_real_cl100k_matches_tiktoken_cold_and_warm():
    from peers import tiktoken_encoding

    tok = _own(build("cl100k-tiktoken"))
    enc = tiktoken_encoding(list(tok.vocab[:tok.n_regular]), "cl100k")
    text = "\n".join(TEXTS) * 5
    want = enc.encode_ordinary(text)
    assert tok.encode_ordinary(text) == want  # fills
    assert tok.encode_ordinary(text) == want  # reads
    assert tok.piece_cache.info()["hits"] > 0


def test_look_ahead_across_pieces_of_every_kind_matches_tiktoken():
    # The encoder reads keys LOOKAHEAD pieces ahead into a ring (kernels/encode.py): pieces
    # it skips there (one byte, special tokens) and those it keys (2..15 bytes, longer)
    # in every order, documents that end inside the window (one byte, empty, one special
    # token alone), the array's last 15 bytes (keys built a byte at a time), many blocks.
    from peers import tiktoken_encoding
    from presets import CL100K_SPECIALS
    from fastbpe_nb.kernels.encode import LOOKAHEAD

    tok = _own(build("cl100k-tiktoken"))
    special = "<|endoftext|>"
    enc = tiktoken_encoding(list(tok.vocab[:tok.n_regular]), "cl100k",
                            {special: CL100K_SPECIALS[special]})
    parts = ["a", " b", "hello", " Donaudampfschifffahrtsgesellschaft", "东京是日本的首都我们",
             special, "\n", "  ", "1234567", " über", "x" * 40, "éé", "!!"]
    rng = np.random.default_rng(7)
    docs = ["".join(rng.choice(parts, size=int(rng.integers(0, 3 * LOOKAHEAD))))
            for _ in range(300)]
    docs += ["", "z", special, special * 2, "end of batch: tail keys"]
    want = [enc.encode(d, allowed_special={special}) for d in docs]
    for round_ in range(3):  # cold, warm, warm
        for threads in (1, 2):
            got = tok.encode_batch(docs, num_threads=threads, allowed_special={special})
            assert got == want, (round_, threads)
    assert tok.piece_cache.info()["hits"] > 0


def test_cap_is_respected_and_a_full_cache_starts_over():
    tok = _own(build("gpt2-bytes"))
    plain = _uncached(tok)
    words = [f"w{i:05d}x{i * 7919 % 100003:06d}qq" for i in range(6000)]  # 6000 distinct pieces
    text = " ".join(words)
    tok.piece_cache.max_bytes = 64 << 10
    assert tok.encode_ordinary(text) == plain.encode_ordinary(text)
    info = tok.piece_cache.info()
    assert info["full"] and 0 < info["bytes"] <= 64 << 10, info
    assert tok.encode_ordinary(text) == plain.encode_ordinary(text)  # emptied, then refilled
    assert tok.piece_cache.info()["bytes"] <= 64 << 10


def test_max_bytes_zero_turns_it_off_and_bad_values_are_refused():
    tok = _uncached(build("gpt2-bytes"))
    tok.encode_batch(TEXTS, num_threads=2)
    assert tok.piece_cache.info()["entries"] == 0
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError):
            tok.piece_cache.max_bytes = bad


def test_clear_and_pickle_start_empty():
    tok = _own(build("gpt2-bytes"))
    tok.encode_batch(TEXTS)
    assert tok.piece_cache.info()["entries"] > 0
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.piece_cache.info()["entries"] == 0
    tok.piece_cache.clear()
    assert tok.piece_cache.info()["entries"] == 0
    assert tok.encode_batch(TEXTS) == copy.encode_batch(TEXTS)


def test_a_call_that_finds_the_cache_taken_encodes_without_it():
    tok = _own(build("gpt2-bytes"))
    want = _uncached(tok).encode_batch(TEXTS)
    cache = tok.piece_cache
    assert cache._lock.acquire()  # as if another thread's call held it
    try:
        assert tok.encode_batch(TEXTS, num_threads=2) == want
        assert cache.info()["entries"] == 0
    finally:
        cache._lock.release()
    results = []

    def work():
        results.append(tok.encode_batch(TEXTS * 3, num_threads=1))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want * 3] * 6


def test_a_failed_call_empties_the_cache():
    tok = _own(build("gpt2-bytes"))
    tok.encode_batch(TEXTS)
    assert tok.piece_cache.info()["entries"] > 0
    state = tok.piece_cache.checkout(np.dtype(np.uint8))[3]
    tok.piece_cache.checkin(state, None)  # what Encoder.run does when the kernel raised
    assert tok.piece_cache.info()["entries"] == 0
    assert not tok.piece_cache._lock.locked()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("held", [False, True])
def test_forked_child_keeps_or_drops_the_parents_cache(held):
    tok = _own(build("gpt2-bytes"))
    want = _uncached(tok).encode_batch(TEXTS)
    tok.encode_batch(TEXTS)
    entries = tok.piece_cache.info()["entries"]
    if held:
        tok.piece_cache._lock.acquire()  # a call in flight in another parent thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, never return into pytest
        try:
            got = tok.encode_batch(TEXTS, num_threads=2)
            kept = tok.piece_cache.info()["entries"]
            ok = got == want and (kept >= entries if not held else kept > 0)
            os.write(write, b"ok" if ok else f"bad {kept} {got == want}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 200)
    os.close(read)
    if held:
        tok.piece_cache._lock.release()
    assert status == 0 and message == b"ok", message


def test_short_pieces_that_differ_only_after_their_seventh_byte():
    # Short keys are (length + first 7 bytes, bytes 8..15): pieces with the same first key
    # and different second keys, each a few tokens (so their ids are packed and the front
    # table keeps them), collide in the direct-mapped front table.
    import itertools

    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [" qwertyu" + a + b for a, b in itertools.product(letters, repeat=2)]
    text = "".join(words[::3] + words + words[::7] + words[::-1])
    tok = fb.train([text], vocab_size=290, pattern="gpt2")
    assert max(len(tok.encode_ordinary(w)) for w in words) <= 3  # packed, kept in front
    want = _uncached(tok).encode_ordinary(text)
    assert tok.encode_ordinary(text) == want
    assert tok.encode_ordinary(text) == want
    assert tok.encode_batch([text, text[:5000]], num_threads=2) == [want, want[:len(
        tok.encode_ordinary(text[:5000]))]]
