"""Many Python threads using the parallel kernels at once: same ids as serial, no abort."""

import os
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_eight_threads_encode_concurrently(layer):
    # workqueue is Numba's layer that is not thread-safe: the lock in parallel.py must
    # serialise the parallel kernels there; the default layer (tbb/omp when present) not.
    code = textwrap.dedent('''
        import threading
        import fastbpe_nb as fb
        docs = [f"document {i}: the quick brown fox jumps over {i * 7} lazy dogs. " * (i % 5 + 1)
                for i in range(400)]
        tok = fb.train(docs, vocab_size=400)
        expected = [tok.encode(d) for d in docs]
        errors = []
        def work(k):
            try:
                for _ in range(3):
                    assert tok.encode_batch(docs, num_threads=2) == expected
                    assert [tok.encode(d) for d in docs[k::8]] == expected[k::8]
                    fb.train(docs[k::8], vocab_size=300)
            except BaseException as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert not errors, errors
        print("ok")
    ''')
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc/self/task")
@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_parallel_calls_start_and_end_no_thread(layer):
    """After the first calls, kernel calls reuse their threads: none starts, none ends.

    A thread that ends (pthread_exit) holds libgcc's frame-registry lock while it unwinds;
    a fork at that moment left the child unable to load any kernel (the forked training of
    tests/test_boundless.py hung once in a few full runs). Each call used to start a helper
    thread and, under OpenMP, a worker team, and end both."""
    code = textwrap.dedent('''
        import os
        import fastbpe_nb as fb
        from fastbpe_nb import parallel
        docs = [f"document {i}: the quick brown fox jumps over {i * 7} lazy dogs. " * (i % 5 + 1)
                for i in range(3000)]
        tok = fb.train(docs, vocab_size=400, num_threads=2)
        def calls():
            tok.encode_batch(docs, num_threads=2)          # parallel encode
            tok.encode(docs[0])                            # serial
            fb.train(docs, vocab_size=300, num_threads=2)  # parallel counting, shielded merge loop
            fb.train(docs, vocab_size=300, boundless=True, num_threads=2)
        calls()
        before = set(os.listdir("/proc/self/task"))
        for _ in range(5):
            calls()
        after = set(os.listdir("/proc/self/task"))
        assert after == before, (sorted(before), sorted(after))
        assert parallel._idle_helpers, "no helper kept"
        print("ok", len(before))
    ''')
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok"), out.stdout
