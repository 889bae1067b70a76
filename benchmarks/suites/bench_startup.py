"""Start-up costs, each measured in a fresh interpreter: import, and first call cold/warm."""

import os
import shutil
import subprocess
import sys
import tempfile

CODE_FIRST_CALL = (
    "import time, fastbpe_nb as fb; t = time.perf_counter(); "
    "fb.train(['first call ' * 20], vocab_size=270).encode('first call'); "
    "print(time.perf_counter() - t)"
)


def _run(code, env=None):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    return float(out.stdout.strip().splitlines()[-1])


def track_import_seconds():
    return _run("import time; t = time.perf_counter(); import fastbpe_nb; "
                "print(time.perf_counter() - t)")


track_import_seconds.unit = "s"


def track_first_call_cold_cache_seconds():
    """Train + encode in a process whose Numba cache folder is empty: the compile time."""
    cache = tempfile.mkdtemp(prefix="fastbpe-numba-cache-")
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        return _run(CODE_FIRST_CALL, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


track_first_call_cold_cache_seconds.unit = "s"
track_first_call_cold_cache_seconds.timeout = 600


def track_first_call_warm_cache_seconds():
    _run(CODE_FIRST_CALL)  # make sure the default cache is filled
    return _run(CODE_FIRST_CALL)


track_first_call_warm_cache_seconds.unit = "s"
track_first_call_warm_cache_seconds.timeout = 600
