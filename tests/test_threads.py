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
def test_parallel_calls_start_and_end_no_thread(layer, tmp_path):
    """After the first calls, kernel calls reuse their threads: none starts, none ends.

    A thread that ends (pthread_exit) holds libgcc's frame-registry lock while it unwinds;
    a fork at that moment left the child unable to load any kernel (the forked training of
    tests/test_boundless.py hung once in a few full runs). Each call used to start a helper
    thread and, under OpenMP, a worker team, and end both."""
    code = textwrap.dedent('''
        import os, shutil, sys, tempfile, threading
        import pyarrow as pa, pyarrow.parquet as pq
        import fastbpe_nb as fb
        from fastbpe_nb import parallel
        docs = [f"document {i}: the quick brown fox jumps over {i * 7} lazy dogs. " * (i % 5 + 1)
                for i in range(3000)]
        tok = fb.train(docs, vocab_size=400, num_threads=2)
        folder = sys.argv[1]
        pq.write_table(pa.table({"text": docs}), os.path.join(folder, "in.parquet"),
                       row_group_size=500)
        def calls():
            tok.encode_batch(docs, num_threads=2)          # parallel encode
            tok.encode(docs[0])                            # serial
            fb.train(docs, vocab_size=300, num_threads=2)  # parallel counting, shielded merge loop
            fb.train(docs, vocab_size=300, boundless=True, num_threads=2)
            out = tempfile.mkdtemp(dir=folder)             # a reader and a writer thread
            fb.encode_parquet(tok, [os.path.join(folder, "in.parquet")], out, num_threads=2)
            shutil.rmtree(out)
        import _thread
        started = []
        real_start = _thread.start_new_thread
        def counting_start(fn, args, *rest):
            if fn is not parallel._helper_main:  # a new kept helper is allowed, see below
                started.append(getattr(fn, "__qualname__", repr(fn)))
            return real_start(fn, args, *rest)
        _thread.start_new_thread = counting_start
        threading._start_new_thread = counting_start  # what threading.Thread.start calls
        calls()
        before = set(os.listdir("/proc/self/task"))
        for _ in range(5):
            calls()
        after = set(os.listdir("/proc/self/task"))
        assert before <= after, (sorted(before), sorted(after))  # no thread ended
        assert not started, started  # and none started but kept helpers
        # Helpers: as many as calls ran at once (a kernel call, a reader, a writer).
        assert 1 <= len(parallel._idle_helpers) <= 4, len(parallel._idle_helpers)
        print("ok", len(before), len(after))
    ''')
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok"), out.stdout
