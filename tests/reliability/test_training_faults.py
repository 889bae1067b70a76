"""Training killed mid-way leaves no partial model and re-running gives the same model;
a full disk raises an OSError naming the path and keeps the previous model."""

import hashlib
import os
import shutil
import subprocess
import time

import pytest

from rel_harness import run_case, write_corpus

#: 30,000 merges on ten 1.5 MB files of random words (~230 k unique words): merging then
#: lasts long enough to be killed in (~0.35 s; on four files, as until 2026-12-04, the merge
#: kernel got down to 0.16-0.2 s, too short to hit reliably).
VOCAB = 30_000
N_FILES = 10


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def train_code(paths, model):
    return f"""
        from rel_children import train_and_save
        emit(train_and_save({paths!r}, {str(model)!r}, {VOCAB}))
    """


def test_sigkill_during_training_then_rerun(tmp_path):
    paths = [str(p) for p in write_corpus(tmp_path / "corpus", N_FILES, 1_500_000, seed=11,
                                          random_words=True)]
    ref_model = tmp_path / "ref.json"
    # Twice: the first run may include compiling or loading kernels; time the warm one.
    for _ in range(2):
        ref = run_case(train_code(paths, ref_model), timeout=600,
                       env={"CASE_T0": time.time()}).check().result
    ref_sha = sha(ref_model)
    merge_s = ref["total_s"] - ref["count_s"]
    delays = {"counting": ref["import_s"] + 0.5 * ref["count_s"],
              "merging": ref["import_s"] + ref["count_s"] + 0.5 * merge_s}
    assert ref["count_s"] > 0.2 and merge_s > 0.2, ref  # both phases are long enough to hit
    previous = tmp_path / "previous.json"
    shutil.copy(run_case_prev_model(tmp_path), previous)
    prev_sha = sha(previous)
    for phase, delay in delays.items():
        for start_with_previous in (False, True):
            folder = tmp_path / f"{phase}-{start_with_previous}"
            folder.mkdir()
            model = folder / "model.json"
            # A kill that lands after the atomic rename hit no phase at all (the machine
            # ran faster than the reference): restore and try again earlier.
            for attempt in range(4):
                if start_with_previous:
                    shutil.copy(previous, model)
                elif model.exists():
                    model.unlink()
                killed = run_case(train_code(paths, model), timeout=delay * 0.7 ** attempt,
                                  env={"CASE_T0": time.time()})
                if not (model.exists() and sha(model) == ref_sha):
                    break
            assert killed.timed_out and killed.returncode == -9, (phase, killed.describe())
            if start_with_previous:
                assert sha(model) == prev_sha, f"{phase}: the previous model was changed"
            else:
                assert not model.exists(), f"{phase}: a model file appeared after the kill"
            assert {p.name for p in folder.iterdir() if not p.name.startswith(".tmp-")} == (
                {"model.json"} if start_with_previous else set())
            rerun = run_case(train_code(paths, model), timeout=600, env={"CASE_T0": time.time()})
            rerun.check()
            assert sha(model) == ref_sha, f"{phase}: re-run gave another model"


def run_case_prev_model(tmp_path):
    out = tmp_path / "small.json"
    run_case(f"""
        import fastbpe_nb as fb
        fb.train(["an older model"] * 5, vocab_size=270).save({str(out)!r})
        emit("ok")
    """, timeout=120).check()
    return out


ENOSPC_CODE = """
    import errno, hashlib, os
    import fastbpe_nb as fb
    import fastbpe_nb.io.atomic as atomic
    folder = {folder!r}
    path = os.path.join(folder, "model.json")
    fb.train(["an older model"] * 5, vocab_size=270).save(path)
    before = open(path, "rb").read()
    from rel_harness import random_words
    new = fb.train([random_words(300_000)], vocab_size=3000)  # a model file of > 16 KiB
    assert len(new.merges) > 2000
    {patch}
    try:
        new.save(path)
        emit({{"raised": None}})
    except Exception as exc:
        emit({{"raised": type(exc).__name__, "errno": getattr(exc, "errno", None),
               "is_oserror": isinstance(exc, OSError), "message": str(exc),
               "intact": open(path, "rb").read() == before,
               "leftovers": sorted(set(os.listdir(folder)) - {{"model.json"}})}})
"""

MOCK_PATCH = """
    real_fdopen = os.fdopen
    class Full:
        def __init__(self, f): self.f = f
        def write(self, data):
            self.f.write(data[: len(data) // 2])  # part of it lands, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        def __getattr__(self, name): return getattr(self.f, name)
        def __enter__(self): return self
        def __exit__(self, *exc): return self.f.__exit__(*exc)
    atomic.os.fdopen = lambda fd, mode: Full(real_fdopen(fd, mode))
"""


def check_enospc(out, folder):
    assert out["raised"] is not None, "no error on a full disk"
    assert out["is_oserror"] and out["errno"] == 28, out
    assert os.path.join(folder, "model.json") in out["message"], out
    assert out["intact"], "the previous model was damaged"
    assert out["leftovers"] == [], out


def test_disk_full_mocked(tmp_path):
    res = run_case(ENOSPC_CODE.format(folder=str(tmp_path), patch=MOCK_PATCH), timeout=120)
    check_enospc(res.check().result, str(tmp_path))


def test_disk_full_real_tmpfs(tmp_path):
    """A real 16 KiB tmpfs in a private mount namespace (needs root and unshare)."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and unshare")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=16k none {tmp_path}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.decode()[:200]}")
    folder = tmp_path / "full"
    folder.mkdir()
    res = run_case(ENOSPC_CODE.format(folder=str(folder), patch=""), timeout=120,
                   argv_prefix=["unshare", "-m", "sh", "-c",
                                f'mount -t tmpfs -o size=16k none {folder} && exec "$0" "$@"'])
    check_enospc(res.check().result, str(folder))
