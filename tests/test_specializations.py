"""Each kernel compiles once per kind of input, not once per way the input arrived.

Numba compiles a specialization per argument type, and an array's "readonly" flag is part
of its type: the read-only bytes of a big file or an Arrow buffer and the writable bytes of
a joined batch of str used to compile every counting and encode kernel twice (17 s inside
the first 100 MB ``train_files`` after a 200 KB warm-up). The Python boundary passes
read-only views (``_scanner.read_only``); this runs the entry points that feed the kernels
in different ways and checks that no kernel holds two specializations that differ only in
that flag.
"""

import subprocess
import sys

import pytest

from fbtest import NOJIT, REPO

pytestmark = pytest.mark.skipif(NOJIT, reason="no compiled specializations without the JIT")

SCRIPT = r"""
import collections, re, sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import fastbpe_nb as fb
from fastbpe_nb.kernels import count, encode, scan

TEXTS = ["The quick brown fox jumps over the lazy dog. " * 40,
         "Gr\u00fc\u00dfe aus K\u00f6ln! Die Stra\u00dfe ist na\u00df. " * 40,
         "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! " * 40,
         "\u4e1c\u4eac\u662f\u65e5\u672c\u7684\u9996\u90fd\u3002" * 40]
tmp = Path(sys.argv[1])
tok = fb.train(TEXTS, vocab_size=600, special_tokens=["<|endoftext|>"])
tok.encode(TEXTS[0])                                   # bytes of one str
tok.encode_batch(TEXTS)                                # a joined batch (writable)
tok.encode_batch(pa.array(TEXTS))                      # Arrow buffers (read-only)
tok.encode_batch(TEXTS * 50, num_threads=2)            # the parallel kernel
tok.encode_batch(pa.array(TEXTS * 50), num_threads=2)
small, big = tmp / "small.txt", tmp / "big.txt"
small.write_text("\n".join(TEXTS), encoding="utf-8")
big.write_text("\n".join(TEXTS) * 200, encoding="utf-8")  # ~2 MB: several blocks
pq.write_table(pa.table({"text": TEXTS * 20}), tmp / "t.parquet")
for path in (small, big, tmp / "t.parquet"):
    fb.train_files([path], vocab_size=400)
fb.encode_parquet(tok, tmp / "t.parquet", tmp / "out", column="text", format="bin")

kernels = [encode.encode_serial, encode.encode_batch, count.count_text_blocks,
           count.count_text_blocks_serial, count.look_up_blocks, count.merge_text_blocks,
           count.count_batch,
           scan.scan_batch, scan.scan_batch_parallel, scan.scan_prefix]
ran = [k for k in kernels if k.signatures]
assert encode.encode_batch in ran and count.count_text_blocks in ran, ran
for k in ran:  # two signatures equal but for an array's readonly flag
    norm = collections.Counter(re.sub(r"'C', (True|False)", "'C'", str(s)) for s in k.signatures)
    twins = [s for s, n in norm.items() if n > 1]
    if twins:
        print(k.__name__, "compiled for read-only and writable inputs:", twins[0][:300])
"""


def test_kernels_compile_once_whatever_the_input_arrived_as(tmp_path):
    # A fresh process: other tests call kernels directly with arrays of either kind.
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "", done.stdout
