"""Distinct pieces by length group: kernels.backtrack.encode_pieces vs encode_serial(no_cache).

    python benchmarks/compare_backtrack.py cl100k o200k   (data: /work/main/.asv/data)
"""
import sys, time, tracemalloc, numpy as np
import fastbpe_nb as fb
from fastbpe_nb import _scanner
from fastbpe_nb.model import backtrack_tables
from fastbpe_nb.kernels.backtrack import encode_pieces
from fastbpe_nb.kernels.encode import encode_serial
from fastbpe_nb.piece_cache import no_cache
D = "/work/main/.asv/data/"
FILES = {"european": "european-man-10000000.txt", "cjk": "cjk-man-6000000.txt", "code": "linux-10000000.txt"}
GROUPS = [(2, 15), (16, 48), (49, 1 << 30)]

def med(f, reps=5):
    ts = []
    for _ in range(reps):
        t = time.thread_time(); r = f(); ts.append(time.thread_time() - t)
    return float(np.median(ts)), r

for vocab in sys.argv[1:]:
    tok = fb.from_tiktoken(D + f"{vocab}_base.tiktoken", pattern=vocab)
    tokens = list(tok.model.token_bytes)
    backtrack_tables(tokens)  # compile/load
    tracemalloc.start()
    tb_time, (tables, unr, ooo) = med(lambda: backtrack_tables(tokens), 3)
    peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
    print(f"{vocab}: build {tb_time*1e3:.0f} ms (thread time, median of 3), tables "
          f"{sum(a.nbytes for a in tables)/1e6:.1f} MB, peak traced {peak/1e6:.0f} MB, "
          f"unreachable {len(unr)}, out-of-order {len(ooo)}")
    kt = tok._tables()
    for name, f in FILES.items():
        raw = open(D + f, "rb").read()
        data = np.frombuffer(raw, np.uint8)
        offs, _ = _scanner.scan_offsets(data, np.array([0, len(data)], np.int64), vocab)
        pieces = sorted({raw[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)})
        for lo, hi in GROUPS:
            sel = [p for p in pieces if lo <= len(p) <= hi]
            if not sel:
                continue
            buf = b"".join(sel); d = np.frombuffer(buf, np.uint8).copy()
            po = np.zeros(len(sel) + 1, np.int64); np.cumsum([len(p) for p in sel], out=po[1:])
            docs = np.array([0, len(sel)], np.int64)
            base = (d, tok.level.sym_map, po, np.zeros(0, np.int32), docs, *kt.args(backtrack=False), 0.0, 0, *kt.tail())
            encode_serial(*base, *no_cache(np.uint8)); encode_pieces(d, po, *tables)
            tb, tm = [], []
            for _ in range(5):  # interleaved
                t = time.thread_time(); r1 = encode_pieces(d, po, *tables); tb.append(time.thread_time() - t)
                t = time.thread_time(); r2 = encode_serial(*base, *no_cache(np.uint8)); tm.append(time.thread_time() - t)
            assert r1[2] == 0 and np.array_equal(r1[0], r2[0]), (name, lo)
            b, m = np.median(tb), np.median(tm)
            print(f"  {name:9s} {lo:>2}-{hi if hi < 1<<30 else '':<3} {len(sel):>7} pieces "
                  f"{len(buf)/len(sel):5.1f} B/piece | backtrack {b/len(sel)*1e6:6.3f} us/piece "
                  f"{len(buf)/b/1e6:6.1f} MB/s | merge {m/len(sel)*1e6:6.3f} us/piece {len(buf)/m/1e6:6.1f} MB/s | x{m/b:.1f}")
