"""Numba's cache keys a compiled kernel by its own file only: a kernel module that calls into
another one carries a stamp of its dependencies' sources (tools/stamp_kernels.py), so that
editing ``hashing.py`` or ``encode.py`` changes the callers' files too and their cached code
is recompiled, on a developer's machine and after a user's upgrade alike."""

import subprocess
import sys

from fbtest import REPO

sys.path.insert(0, str(REPO / "tools"))
import stamp_kernels  # noqa: E402


def test_every_kernel_cache_stamp_is_current():
    stale = stamp_kernels.stale()
    assert not stale, ("kernel cache stamps out of date (run `python tools/stamp_kernels.py`): "
                       + ", ".join(f"{name}.py" for name, _, _ in stale))


def test_the_stamp_follows_a_dependency(tmp_path, monkeypatch):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "base.py").write_text("X = 1\n")
    (kernels / "mid.py").write_text("from .base import X\n\nY = X\n")
    (kernels / "top.py").write_text("import numpy as np\nfrom .mid import Y\n\nZ = Y\n")
    monkeypatch.setattr(stamp_kernels, "KERNELS", kernels)
    assert stamp_kernels.dependencies("top") == ["base", "mid"]
    stamp_kernels.write()
    assert stamp_kernels.stale() == []
    first = stamp_kernels.current_stamp("top")
    assert first and stamp_kernels.current_stamp("base") is None
    (kernels / "base.py").write_text("X = 2\n")  # a change two imports away
    assert {name for name, _, _ in stamp_kernels.stale()} == {"mid", "top"}
    stamp_kernels.write()
    assert stamp_kernels.current_stamp("top") != first and stamp_kernels.stale() == []
    assert (kernels / "top.py").read_text().splitlines()[2].startswith("#: kernel cache stamp: ")


def test_check_mode_exit_code():
    res = subprocess.run([sys.executable, str(REPO / "tools" / "stamp_kernels.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
