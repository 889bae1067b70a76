"""Every entry point in child processes, after the parent has run the parallel kernels.

Run as a script (by ``test_fork.py``, in a fresh interpreter per threading layer):
``python rel_fork_child.py WORKDIR``. It builds one tokenizer per preset, runs every entry
point in the parent (so Numba's thread pool has started, and the kernel tables are built),
then runs the same entry points in workers of each start method (``fork``, ``forkserver``,
``spawn``) through a ``multiprocessing.Pool`` and through a DataLoader-style worker loop, and
prints one JSON line: what differed from the parent (nothing, when all is well) and the
threading layer that Numba really used.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

import fastbpe_nb as fb

WORDS = ("the quick brown fox jumps over the lazy dog it's 2024 naïve café Straße Привет мир "
         "東京 😀 don't we'll <|endoftext|> code = 42;\n\tindented").split(" ")


def documents(n: int, seed: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    return [" ".join(rnd.choices(WORDS, k=rnd.randint(0, 40))) for _ in range(n)]


def presets() -> dict:
    """One tokenizer per preset, trained here (training runs the parallel counting kernel)."""
    corpus = documents(400, seed=1)
    return {
        "bytes_gpt2": fb.train(corpus, vocab_size=400, pattern="gpt2",
                               special_tokens=["<|endoftext|>"]),
        "bytes_cl100k": fb.train(corpus, vocab_size=400, pattern="cl100k"),
        "chars_eow": fb.train([d.replace("<|endoftext|>", "") for d in corpus], vocab_size=300,
                              base="chars", end_of_word="</w>"),
        "sentencepiece": fb.train(corpus, vocab_size=420, base="chars", whitespace="\u2581",
                                  byte_fallback=True, split_digits=True),
    }


TOKS: dict = {}


def _install(toks):
    TOKS.clear()
    TOKS.update(toks)


def run_all(job) -> dict:
    """Every entry point of every preset on ``docs``; {preset/entry: result}."""
    seed, docs = job
    out = {}
    for name, tok in TOKS.items():
        key = name + "/"
        if name == "sentencepiece":
            out[key + "encode"] = [tok.encode(d) for d in docs]
            out[key + "encode_to_numpy"] = [tok.encode_to_numpy(d).tolist() for d in docs]
            out[key + "encode_batch"] = tok.encode_batch(docs, num_threads=2)
            out[key + "encode_batch_arrow"] = tok.encode_batch(pa.array(docs), num_threads=2)
            out[key + "decode"] = [tok.decode(ids) for ids in out[key + "encode_batch"]]
            continue
        if name == "chars_eow":
            docs_c = [d.replace("<|endoftext|>", "") for d in docs]
            out[key + "encode"] = [tok.encode(d) for d in docs_c]
            out[key + "encode_batch"] = tok.encode_batch(docs_c, num_threads=2)
            out[key + "count_tokens"] = list(map(int, tok.count_tokens(docs_c, num_threads=2)))
            out[key + "decode"] = [tok.decode(ids) for ids in out[key + "encode_batch"]]
            continue
        kw = {"allowed_special": "all"} if tok.special_tokens else {}
        out[key + "encode"] = [tok.encode(d, **kw) for d in docs]
        out[key + "encode_ordinary"] = [tok.encode_ordinary(d) for d in docs]
        out[key + "encode_to_numpy"] = [tok.encode_to_numpy(d, **kw).tolist() for d in docs]
        out[key + "encode_bytes"] = [tok.encode_bytes(d.encode()) for d in docs]
        out[key + "encode_batch"] = tok.encode_batch(docs, num_threads=2, **kw)
        out[key + "encode_batch_arrow"] = tok.encode_batch(
            pa.array(docs, pa.large_string()), num_threads=2, **kw).to_pylist()
        out[key + "count_tokens"] = list(map(int, tok.count_tokens(docs, num_threads=2, **kw)))
        out[key + "decode"] = [tok.decode(ids) for ids in out[key + "encode_batch"]]
        sd = tok.stream_decoder()
        out[key + "stream_decoder"] = "".join(sd.push(i) for ids in out[key + "encode"]
                                              for i in ids) + sd.flush()
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.parquet")
            pq.write_table(pa.table({"text": docs}), src, row_group_size=7)
            fb.encode_parquet(tok, src, os.path.join(tmp, "out"), num_threads=2,
                              special="allow" if tok.special_tokens else "error")
            out[key + "encode_parquet"] = pq.read_table(
                os.path.join(tmp, "out", "in.parquet")).column("ids").to_pylist()
    # Training in the child: the parallel counting kernel again.
    out["train/merges"] = fb.train(documents(200, seed), vocab_size=320).merges.tolist()
    return out


def compare(name: str, got: dict, want: dict) -> list[str]:
    bad = [f"{name}: {k}" for k in want if got.get(k) != want[k]]
    return bad + [f"{name}: missing {k}" for k in want if k not in got]


def dataloader_loop(toks, jobs, ctx) -> list[dict]:
    """PyTorch DataLoader's worker protocol: forked workers take indices from a queue and
    put (index, batch) on a result queue; the main process reorders."""
    index_q, data_q = ctx.Queue(), ctx.Queue()

    def worker(iq, dq):
        while True:
            i = iq.get()
            if i is None:
                return
            dq.put((i, run_all(jobs[i])))

    procs = [ctx.Process(target=worker, args=(index_q, data_q), daemon=True) for _ in range(2)]
    for p in procs:
        p.start()
    for i in range(len(jobs)):
        index_q.put(i)
    results = dict(data_q.get(timeout=300) for _ in range(len(jobs)))
    for _ in procs:
        index_q.put(None)
    for p in procs:
        p.join(60)
    return [results[i] for i in range(len(jobs))]


def main(workdir: str) -> None:
    import numba

    toks = presets()
    _install(toks)
    jobs = [(k, documents(60, seed=100 + k)) for k in range(4)]
    # The parent runs everything first: the pool starts and the kernel tables are built.
    want = [run_all(j) for j in jobs]
    layer = numba.threading_layer()
    problems = []
    for method in ("fork", "forkserver", "spawn"):
        ctx = mp.get_context(method)
        with ctx.Pool(2, initializer=_install, initargs=(toks,)) as pool:
            got = pool.map(run_all, jobs, chunksize=1)
        for k, (g, w) in enumerate(zip(got, want)):
            problems += compare(f"{method} pool job {k}", g, w)
    got = dataloader_loop(toks, jobs, mp.get_context("fork"))
    for k, (g, w) in enumerate(zip(got, want)):
        problems += compare(f"dataloader job {k}", g, w)
    # A second generation: a forked child that forks again still gets the right ids.
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    outer = ctx.Process(target=_nested, args=(ctx, jobs[0], queue))  # not daemonic: may fork
    outer.start()
    nested = queue.get(timeout=300)
    outer.join(60)
    problems += compare("fork of a fork", nested, want[0])
    n_entries = len(want[0])
    print("RESULT " + json.dumps({"layer": layer, "problems": problems[:50],
                                  "n_problems": len(problems), "entries": n_entries}))
    sys.stdout.flush()


def _nested(ctx, job, queue):
    run_all(job)  # the child's own (serial) kernels run before it forks in turn
    inner = ctx.Process(target=lambda: queue.put(run_all(job)))
    inner.start()
    inner.join(300)


if __name__ == "__main__":
    main(sys.argv[1])
