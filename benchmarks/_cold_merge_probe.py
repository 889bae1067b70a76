"""The pieces a cold pass merges, timed by length class with the piece cache off.

``python benchmarks/_cold_merge_probe.py cjk|european|code [cl100k|o200k]``: the package and
benchmarks of this checkout (``PROBE_ROOT=<other checkout>`` to A/B another one; the first
copy imported /work/main's package whatever PYTHONPATH said).
"""
import os
import sys
import time

import numpy as np

_root = os.environ.get("PROBE_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _root)
sys.path.insert(0, os.path.join(_root, "benchmarks"))
import bench_data, compare_encoders as ce, encode_profile as ep
from fastbpe_nb.pretokenize import piece_offsets
which = sys.argv[1]; vocab = sys.argv[2] if len(sys.argv) > 2 else "cl100k"
tok, _ = ce.load_ours(vocab)
raw = open(getattr(bench_data, which + "_path")()[0], "rb").read()
data = np.frombuffer(raw, np.uint8)
pieces, dp = piece_offsets(data, np.array([0, len(data)], np.int64), tok.level.pattern)
lay = (data, pieces, np.zeros(0, np.int32), dp)
sub, n = ep.distinct_merged(tok, [lay])
d, po = sub[0], sub[1]
lens = np.diff(po)
print(which, vocab, "distinct merged", n, "bytes", lens.sum(), "len pct 50/90/99/max", np.percentile(lens, [50, 90, 99]), lens.max())
enc = tok._encoder
t = enc.tables()
# As in the whole-file pass (a call of BACKTRACK_UNITS or more): a small class alone would
# not load the backtracking tables and would time the merging paths instead.
t.use_backtracking()
print("tail (long_piece, sweep_ranks, tunables):", t.tail())
saved = tok.piece_cache.max_bytes; tok.piece_cache.max_bytes = 0
for lo, hi in [(2, 8), (9, 16), (17, 24), (25, 64), (65, 256), (257, 10**9)]:
    sel = np.nonzero((lens >= lo) & (lens <= hi))[0]
    if len(sel) == 0: continue
    parts = [d[po[i]:po[i + 1]] for i in sel]
    dd = np.concatenate(parts); pp = np.zeros(len(parts) + 1, np.int64); np.cumsum([len(x) for x in parts], out=pp[1:])
    docs = np.array([0, len(parts)], np.int64)
    l2 = (dd, pp, np.zeros(0, np.int32), docs)
    enc.run(l2, 1)
    ts = []
    for _ in range(5):
        t0 = time.process_time(); enc.run(l2, 1); ts.append(time.process_time() - t0)
    m = min(ts)
    print(f"len {lo}-{hi}: {len(sel)} pieces, {len(dd)} bytes, {m*1000:.1f} ms, {m/len(sel)*1e6:.2f} us/piece, {m/len(dd)*1e9:.0f} ns/byte")
tok.piece_cache.max_bytes = saved
