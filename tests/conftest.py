"""Session set-up shared by every test module.

The tests load many rank files, and ``from_tiktoken`` keeps what it derives from each in
a cache folder (``io/rank_cache.py``; ``~/.cache/fastbpe_nb`` by default). A test run must
not fill the user's cache: unless ``FASTBPE_CACHE_DIR`` is set already, each test process
(and the subprocesses it starts, which inherit the variable) uses a folder of its own,
removed when the session ends. Tests of the cache itself set the variable themselves.
"""

import os
import shutil
import tempfile

import pytest

_OWN_CACHE = None
if "FASTBPE_CACHE_DIR" not in os.environ:
    _OWN_CACHE = tempfile.mkdtemp(prefix="fastbpe-test-cache-")
    os.environ["FASTBPE_CACHE_DIR"] = _OWN_CACHE


@pytest.fixture(scope="session", autouse=True)
def _remove_own_cache():
    yield
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)
