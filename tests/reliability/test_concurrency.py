"""Pickling carries data only; a damaged Numba cache means a recompile, not an error."""

from pathlib import Path

import pytest

from rel_harness import run_case

TEXT = "The quick brown fox, it's 2024! naïve café 😀\n\n    indented\tcode = 42 <|endoftext|>"


def test_pickle_round_trip_is_data_only(models, tmp_path):
    blob = tmp_path / "tok.pickle"
    first = run_case(f"""
        import pickle
        import fastbpe_nb as fb
        tok = fb.load({str(models['cl100k'])!r})
        ids = tok.encode({TEXT!r}, allowed_special="all")  # builds the kernel tables first
        batch = tok.encode_batch([{TEXT!r}] * 3, allowed_special="all")
        data = pickle.dumps(tok, protocol=pickle.HIGHEST_PROTOCOL)
        open({str(blob)!r}, "wb").write(data)
        again = pickle.loads(data)
        emit({{"ids": ids, "equal": again == tok, "same_ids": again.encode({TEXT!r},
              allowed_special="all") == ids, "batch_ok": batch == [ids] * 3}})
    """, timeout=120).check().result
    assert first["equal"] and first["same_ids"] and first["batch_ok"]
    data = blob.read_bytes()
    # Data only: no compiled function, dispatcher or Numba object in the pickle, and no
    # kernel tables (rebuilt on demand), so it stays about the size of the model.
    for needle in (b"numba", b"Dispatcher", b"CPUDispatcher", b"llvmlite", b"_rank_keys\\x94N"):
        assert needle not in data, needle
    assert len(data) < 10 * Path(models["cl100k"]).stat().st_size + 200_000, len(data)
    # A fresh process (no kernels compiled yet) unpickles an equal, working tokenizer.
    second = run_case(f"""
        import pickle, sys
        import fastbpe_nb as fb
        tok = pickle.load(open({str(blob)!r}, "rb"))
        ref = fb.load({str(models['cl100k'])!r})
        emit({{"equal": tok == ref and tok.vocab == ref.vocab,
               "ids": tok.encode({TEXT!r}, allowed_special="all")}})
    """, timeout=120).check().result
    assert second["equal"]
    assert second["ids"] == first["ids"]


def numba_cache_case(models, tmp_path, modes, train):
    cache = tmp_path / "numba_cache"
    code = f"""
        import fastbpe_nb as fb
        tok = fb.load({str(models['gpt2'])!r})
        out = {{"ids": tok.encode_ordinary({TEXT!r}),
                "batch": tok.encode_batch([{TEXT!r}] * 4, disallowed_special=())}}
        if {train!r}:
            out["trained"] = fb.train([{TEXT!r}] * 20, vocab_size=300).merges.tolist()
        emit(out)
    """
    env = {"NUMBA_CACHE_DIR": str(cache)}
    ref = run_case(code, timeout=600, env=env).check().result
    files = [p for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert len(files) >= 6, files  # the cache really was filled
    for mode in modes:
        for p in files:
            if p.exists():
                data = p.read_bytes()
                p.write_bytes({"half": data[: len(data) // 2], "empty": b"",
                               "garbage": b"\x80\x04garbage" * 10}[mode])
        res = run_case(code, timeout=600, env=env)
        res.check()
        assert res.result == ref, mode
        files = [p for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_truncated_numba_cache_recompiles(models, tmp_path):
    # Numba itself does not treat a truncated cache file as a miss (UnpicklingError);
    # fastbpe_nb.parallel.call_kernel empties the cache index and recompiles.
    numba_cache_case(models, tmp_path, ["half"], train=False)


@pytest.mark.slow
def test_damaged_numba_cache_recompiles_all_kernels(models, tmp_path):
    numba_cache_case(models, tmp_path, ["half", "empty", "garbage"], train=True)


def _raise_in(filename, exc):
    """Raise ``exc`` from a frame whose code lives in ``filename``."""
    code = compile("raise exc", filename, "exec")
    exec(code, {"exc": exc})


CACHE_LOADER_FILE = str(Path("site-packages") / "numba" / "core" / "caching.py")


def test_errors_from_numba_cache_loader_are_recognised():
    from fastbpe_nb.parallel import _from_cache_loader

    try:
        _raise_in(CACHE_LOADER_FILE, EOFError("truncated index"))
    except EOFError as exc:
        assert _from_cache_loader(exc)
    # Raised while handling one from the loader (Numba re-raises compile errors that way).
    try:
        try:
            _raise_in(CACHE_LOADER_FILE, ValueError("bad pickle"))
        except ValueError:
            raise RuntimeError("compiling the caller failed")
    except RuntimeError as exc:
        assert _from_cache_loader(exc)
    try:
        _raise_in(str(Path("fastbpe_nb") / "kernels" / "encode.py"), IndexError("kernel bug"))
    except IndexError as exc:
        assert not _from_cache_loader(exc)


class FakeKernel:
    """A compiled kernel (``overloads`` non-empty) whose next calls raise the given errors."""

    overloads = {"sig": object()}

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        if self.errors:
            filename, exc = self.errors.pop(0)
            _raise_in(filename, exc)
        return x + 1


def test_compiled_kernel_new_signature_with_damaged_cache_recompiles(monkeypatch):
    # A kernel that compiled before, called with new argument types, compiles again and
    # may then read a damaged cache file (its own or a callee's): the cache is dropped
    # and the call retried once. Before, only a kernel without any overload recovered.
    from fastbpe_nb import parallel

    flushed = []
    monkeypatch.setattr(parallel, "_flush_kernel_caches", lambda: flushed.append(1))
    kernel = FakeKernel((CACHE_LOADER_FILE, EOFError("pickle data was truncated")))
    assert parallel.call_kernel(kernel, 41) == 42
    assert kernel.calls == 2 and flushed == [1]
    kernel = FakeKernel((CACHE_LOADER_FILE, EOFError("truncated")))
    assert parallel._call(kernel, 1, (1,)) == 2 and flushed == [1, 1]
    # The kernel's own errors are never retried.
    kernel = FakeKernel((str(Path("fastbpe_nb") / "kernels" / "x.py"), IndexError("bug")))
    with pytest.raises(IndexError):
        parallel.call_kernel(kernel, 1)
    assert kernel.calls == 1 and flushed == [1, 1]


def test_flush_removes_indexes_no_module_attribute_holds(tmp_path):
    # kernels.hashing's prefetch is an @overload whose implementation Numba caches under a
    # name no module attribute holds ("hashing._prefetch_jit.locals.impl-*.nbi"): a damaged
    # index of it made training fail even after the recovery flushed the module's kernels.
    code = """
        import glob, os, pickle
        import numpy as np
        import fastbpe_nb as fb
        from fastbpe_nb import parallel
        from fastbpe_nb.kernels import merge
        fb.train(["hello world, the quick brown fox"] * 20, vocab_size=300)
        folder = merge.train_merges._cache._cache_path
        names = lambda: sorted(os.path.basename(p) for m in ("merge", "hashing")
                               for p in glob.glob(f"{folder}/{m}.*.nbi"))
        before = names()
        parallel._flush_kernel_caches()
        emit({"before": before, "after": names()})
    """
    res = run_case(code, timeout=600, env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    result = res.check().result
    assert any("_prefetch_jit" in n for n in result["before"]), result
    assert result["after"] == [], result
