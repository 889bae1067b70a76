"""Ctrl-C during training stops promptly with a clean message and leaves no model file."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="timing needs the JIT")
@pytest.mark.parametrize("delay", [1.0, 3.0])  # while counting, and while merging
def test_sigint_stops_training_cleanly(tmp_path, delay):
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßабвгдежз"
    corpus = tmp_path / "corpus.txt"
    with open(corpus, "w", encoding="utf-8") as f:
        for _ in range(120_000):
            f.write(" ".join("".join(rng.choices(letters, k=rng.randint(1, 12)))
                             for _ in range(12)) + "\n")
    model = tmp_path / "model.json"
    command = [sys.executable, "-m", "fastbpe_nb", "train", str(corpus), "-o", str(model),
               "--vocab-size", "60000", "-q"]
    # Once to the end first: a kernel's first call compiles it (cold cache: the two-thread
    # merge loop's kernels take ~10 s) shielded from Ctrl-C, and this test times the stop,
    # not a compilation.
    subprocess.run(command, capture_output=True, check=True, timeout=600)
    model.unlink()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    if proc.poll() is not None:
        pytest.skip("training finished before the signal: machine too fast for this corpus")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    stopped_after = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert stopped_after < 5.0  # generous on a loaded machine; a hang would take minutes
    assert not model.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["corpus.txt"]  # no temporary files left
