"""The backtracking encoder stays linear on pieces that make it backtrack (subprocess, timeout).

A piece of 1 MB must take about 10x a 100 KB one (asserted: < 30x, slack for a shared
machine), on cl100k with runs of one byte and period-2/3 patterns, and on a tiny trained
vocabulary whose runs force backtracking at every other token.
"""

from rel_harness import run_case

CODE = r"""
import base64, gzip, importlib.util, time
from pathlib import Path
import numpy as np
from fastbpe_nb.model import backtrack_tables
from fastbpe_nb.kernels.backtrack import encode_pieces

def timed(tables, piece):
    data = np.frombuffer(piece, np.uint8).copy()
    offs = np.array([0, len(piece)], np.int64)
    best = 1e9
    for _ in range(3):
        t = time.thread_time()
        ids, _, failed = encode_pieces(data, offs, *tables)
        best = min(best, time.thread_time() - t)
    assert failed == 0 and len(ids) > 0
    return best

vocabs = {}
spec = importlib.util.find_spec("bpe_openai")
if spec is not None:
    raw = gzip.decompress((Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz").read_bytes())
    vocabs["cl100k"] = [base64.b64decode(l.split()[0]) for l in raw.splitlines() if l]
# a, aa, aaa... at ranks chosen so that the greedy longest match is often wrong
small = [bytes([i]) for i in range(256)] + [b"ab", b"aa", b"aab", b"ba", b"aaa", b"abab", b"aaaa"]
vocabs["small"] = small
out = {}
for name, tokens in vocabs.items():
    tables, _, refused = backtrack_tables(tokens)
    assert tables is not None
    for pat in (b"a", b"ab", b"aab", b" ", b"\xe4\xb8\x80"):
        piece = pat * (1_000_000 // len(pat))
        timed(tables, piece[:1000])  # compile / load
        small_t = timed(tables, piece[:100_000])
        big_t = timed(tables, piece)
        out[f"{name}:{pat!r}"] = [small_t, big_t]
emit(out)
"""


def test_a_1mb_piece_is_linear():
    res = run_case(CODE, timeout=240).check()
    report = res.result
    slow = {k: v for k, v in report.items() if v[1] > 30 * max(v[0], 2e-4)}
    assert not slow, f"1 MB vs 100 KB (s): {slow}"
    assert max(v[1] for v in report.values()) < 5.0, report
