"""``encode_parquet`` on many tiny row groups against the same rows in one row group.

Writes 20,000 row groups of 10 short rows (and the same 200,000 rows as one row group),
then encodes each with ``fb.encode_parquet`` in a child process running the checkout given
by ``--repo`` (default: this one), warm (the kernels are compiled or loaded first), and
prints the seconds of each and the number of encoder calls when the checkout reports it.
Each encoder call has a fixed cost (thread start and join, a few ms): before the slices
were gathered, 20,000 row groups meant 20,000 calls.

    python benchmarks/encode_small_row_groups.py [--repo /path/to/checkout] [--groups 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import pyarrow as pa, pyarrow.parquet as pq
import fastbpe_nb as fb
folder, groups = sys.argv[1], int(sys.argv[2])
docs = ["Row %d: the quick brown fox jumps over the lazy dog, naive cafe 42." % i
        for i in range(groups * 10)]
tok = fb.train(docs[:5000], vocab_size=500, special_tokens=["<|endoftext|>"])
table = pa.table({"text": docs})
pq.write_table(table, folder + "/small.parquet", row_group_size=10)
pq.write_table(table, folder + "/one.parquet", row_group_size=len(docs))
fb.encode_parquet(tok, folder + "/one.parquet", folder + "/warm")  # compile / load kernels
out = {"file": fb.__file__,
       "row_groups": pq.ParquetFile(folder + "/small.parquet").metadata.num_row_groups}
for name in ("one", "small"):
    t0 = time.perf_counter()
    rep = fb.encode_parquet(tok, folder + "/" + name + ".parquet", folder + "/out_" + name)
    out[name + "_seconds"] = round(time.perf_counter() - t0, 3)
    out[name + "_encoder_calls"] = rep.get("encoder_calls")
    got = pq.read_table(folder + "/out_" + name + "/" + name + ".parquet").column("ids")
    assert got.to_pylist()[:: len(docs) // 50] == [tok.encode(d) for d in docs[:: len(docs) // 50]]
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--groups", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, PYTHONPATH=args.repo)
        res = subprocess.run([sys.executable, "-c", CHILD, folder, str(args.groups)], env=env,
                             cwd=args.repo, capture_output=True, text=True)
        if res.returncode:
            sys.stderr.write(res.stderr)
            return res.returncode
        out = json.loads(res.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
