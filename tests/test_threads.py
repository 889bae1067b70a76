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
