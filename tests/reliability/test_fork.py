"""Child processes get the parent's ids: fork, forkserver, spawn, DataLoader-style workers and
``datasets.map(num_proc=2)``, after the parent has run the parallel kernels.

Before the fix a forked child inherited Numba's started thread pool without its threads: GNU
OpenMP returned empty id lists, ``MemoryError`` or wrong ids with no exception, and the
SentencePiece-style encoder hung. Each threading layer Numba can load here is checked in a
fresh interpreter (the layer is chosen once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rel_harness import run_case

HERE = Path(__file__).resolve().parent
LAYERS = ("default", "workqueue", "omp", "tbb")


def _layer_env(layer: str) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    if layer == "tbb":
        # pip's tbb wheel puts libtbb.so.12 in <prefix>/lib, outside the loader's path.
        lib = os.path.join(sys.prefix, "lib")
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def _layer_loads(layer: str, env: dict) -> str | None:
    """None when Numba can use ``layer`` here, else the reason it cannot."""
    if layer == "default":
        return None
    probe = ("from numba import njit, prange, threading_layer\n"
             "@njit(parallel=True)\n"
             "def f(n):\n"
             "    s = 0\n"
             "    for i in prange(n):\n"
             "        s += i\n"
             "    return s\n"
             "f(10); print(threading_layer())\n")
    res = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         timeout=300)
    if res.returncode != 0 or res.stdout.strip() != layer:
        return (res.stderr.strip().splitlines() or ["no output"])[-1]
    return None


@pytest.mark.parametrize("layer", LAYERS)
def test_every_entry_point_in_child_processes(layer, tmp_path):
    env = _layer_env(layer)
    reason = _layer_loads(layer, env)
    if reason is not None:
        pytest.skip(f"Numba cannot load the {layer} threading layer here: {reason}")
    res = subprocess.run([sys.executable, str(HERE / "rel_fork_child.py"), str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=900,
                         cwd=str(tmp_path))
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, (res.returncode, res.stdout[-2000:], res.stderr[-4000:])
    result = json.loads(lines[-1][7:])
    if layer != "default":
        assert result["layer"] == layer  # the layer really was the one asked for
    assert result["entries"] >= 30  # every preset's entry points ran
    assert result["n_problems"] == 0, result["problems"]


def test_datasets_map_num_proc_after_a_preview_in_the_parent(tmp_path):
    pytest.importorskip("datasets")
    res = run_case(f"""
        import os
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        os.environ["HF_DATASETS_CACHE"] = {str(tmp_path / "hf")!r}
        import datasets
        import fastbpe_nb as fb
        words = "the quick brown fox jumps over the lazy dog naïve café Привет 東京 42".split()
        docs = [" ".join(words[(i * 7 + k) % len(words)] for k in range(i % 50))
                for i in range(3000)]
        tok = fb.train(docs[:500], vocab_size=400)
        sp = fb.train(docs[:500], vocab_size=420, base="chars", whitespace="\\u2581",
                      byte_fallback=True)
        want = tok.encode_batch(docs)          # the preview: parallel kernels in the parent
        want_sp = sp.encode_batch(docs)
        ds = datasets.Dataset.from_dict({{"text": docs}})
        def enc(batch):
            return {{"ids": tok.encode_batch(batch["text"]),
                    "sp": sp.encode_batch(batch["text"])}}
        out = ds.map(enc, batched=True, batch_size=100, num_proc=2,
                     cache_file_name={str(tmp_path / "mapped.arrow")!r})
        got, got_sp = out["ids"], out["sp"]
        emit({{"rows": len(got), "bad": sum(a != b for a, b in zip(got, want)),
               "bad_sp": sum(a != b for a, b in zip(got_sp, want_sp)),
               "empty": sum(1 for a in got if not a)}})
    """, timeout=600, cwd=str(tmp_path))
    res.check()
    r = res.result
    assert r["rows"] == 3000
    assert r["bad"] == 0 and r["bad_sp"] == 0, r
