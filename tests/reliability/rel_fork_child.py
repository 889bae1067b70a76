"""Every entry point in child processes, after the parent has run the parallel kernels.

Run as a script (by ``test_fork.py``, in a fresh interpreter per threading layer):
``python rel_fork_child.py WORKDIR``. It builds one tokenizer per preset of
``tests/presets.py`` (``FACTORIES``), runs every entry point in the parent (so Numba's
thread pool has started, and the kernel tables are built), then runs the same entry points in workers of each start method (``fork``, ``forkserver``,
``spawn``) through a ``multiprocessing.Pool`` and through a DataLoader-style worker loop, and
prints one JSON line: what differed from the parent (nothing, when all is well), which
entry points failed in the parent itself (none may), and the threading layer that Numba
really used.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
from pathlib import Path

# This repository's package and the presets of tests/presets.py (also in spawned workers,
# which run this module's top level again).
_TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_TESTS.parent), str(_TESTS)]

import presets as preset_factories
import pyarrow as pa
import pyarrow.parquet as pq

import fastbpe_nb as fb
import fastbpe_nb.boundless

# Small corpora here: BoundlessBPE's pair table takes its two-threaded path on them too.
fastbpe_nb.boundless.PAIR_HALVES_MIN_UNITS = 16

#: Words of the presets' own sample (every preset's alphabet holds them), and a special token.
WORDS = " ".join(preset_factories.SAMPLE).split(" ") + ["<|endoftext|>"]


def documents(n: int, seed: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    return [" ".join(rnd.choices(WORDS, k=rnd.randint(0, 40))) for _ in range(n)]


def presets() -> dict:
    """One tokenizer per preset of tests/presets.py (training runs the parallel counting
    kernel); a preset whose peer data is missing here is left out."""
    return preset_factories.available()


TOKS: dict = {}
#: Entry points that may refuse a preset, with a FastBPEError (char-level has no bytes form).
MAY_REFUSE = ("encode_bytes",)


def _install(toks):
    TOKS.clear()
    TOKS.update(toks)


def _entry_points(tok, docs) -> dict:
    """{entry: callable giving plain data} of every entry point of ``tok`` on ``docs``."""
    kw = {"allowed_special": "all"}

    def stream():
        sd = tok.stream_decoder()
        return "".join(sd.push(i) for d in docs for i in tok.encode(d, **kw)) + sd.flush()

    def parquet():
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.parquet")
            pq.write_table(pa.table({"text": docs}), src, row_group_size=7)
            fb.encode_parquet(tok, src, os.path.join(tmp, "out"), num_threads=2, special="allow")
            return pq.read_table(os.path.join(tmp, "out", "in.parquet")).column("ids").to_pylist()

    return {
        "encode": lambda: [tok.encode(d, **kw) for d in docs],
        "encode_ordinary": lambda: [tok.encode_ordinary(d) for d in docs],
        "encode_to_numpy": lambda: [tok.encode_to_numpy(d, **kw).tolist() for d in docs],
        # Texts over the piece memo's 256 characters: one scan and one kernel call each
        # (Encoder.encode_plain), with and without a special token to look for.
        "encode_long": lambda: [(tok.encode(3 * d, **kw), tok.encode_ordinary(3 * d),
                                 tok.encode_to_numpy(3 * d, **kw).tolist()) for d in docs],
        # ASCII texts of 64-256 characters: split by the scanner for the piece memo, and
        # the second time served whole from the text memo.
        "encode_short_ascii": lambda: [[tok.encode_ordinary(a) for _ in range(2)] for a in (
            d.encode("ascii", "ignore").decode()[:256] for d in docs)],
        "encode_bytes": lambda: [tok.encode_bytes(d.encode()) for d in docs],
        "encode_batch": lambda: tok.encode_batch(docs, num_threads=2, **kw),
        "encode_batch_arrow": lambda: tok.encode_batch(
            pa.array(docs, pa.large_string()), num_threads=2, **kw).to_pylist(),
        "count_tokens": lambda: list(map(int, tok.count_tokens(docs, num_threads=2, **kw))),
        "encode_batch_flat": lambda: [a.tolist() for a in tok.encode_batch_flat(
            docs, num_threads=2, **kw)],
        "encode_batch_flat_arrow": lambda: [a.tolist() for a in tok.encode_batch_flat(
            pa.array(docs + [None]), num_threads=2, **kw)],
        "decode_batch": lambda: tok.decode_batch(tok.encode_batch(docs, num_threads=2, **kw)),
        "decode": lambda: [tok.decode(ids) for ids in tok.encode_batch(docs, num_threads=2, **kw)],
        "stream_decoder": stream,
        "encode_parquet": parquet,
        "encode_batch_offsets": lambda: tok.encode_batch(docs, num_threads=2, return_offsets=True,
                                                         **kw),
        "decode_with_offsets": lambda: [tok.decode_with_offsets(tok.encode(d, **kw)) for d in docs],
    }


def run_all(job) -> dict:
    """Every entry point of every preset on ``docs``: {preset/entry: result}. An entry
    point that raises gives ``["raised", exception type, message]``: the same outcome is
    expected everywhere, and the parent's own refusals are problems of their own
    (see ``refusals``)."""
    seed, docs = job
    out = {}
    for name, tok in TOKS.items():
        for entry, fn in _entry_points(tok, docs).items():
            try:
                out[f"{name}/{entry}"] = fn()
            except Exception as exc:  # noqa: BLE001 (reported, compared)
                out[f"{name}/{entry}"] = ["raised", type(exc).__name__, str(exc)[:200]]
    # Training in the child: the parallel counting kernel again, and train_files (its reader
    # thread, the one-pass counting of a text file, pruning of rare words).
    out["train/merges"] = fb.train(documents(200, seed), vocab_size=320).merges.tolist()
    # The variants' training paths: SuperBPE's second stage (its scanner, the stage-1
    # encoder on every thread, the merge kernel on a base vocabulary) and batched merges.
    out["train_superbpe/merges"] = fb.train(documents(200, seed), vocab_size=340,
                                            superbpe_transition=300).merges.tolist()
    out["train_merge_batch/merges"] = fb.train(documents(200, seed), vocab_size=320,
                                               merge_batch=8).merges.tolist()
    # BoundlessBPE: counting keeps the runs (joined_runs on all cores), and the pair table
    # is built on two halves in two threads (PAIR_HALVES_MIN_UNITS lowered below).
    boundless = fb.train(documents(200, seed), vocab_size=340, boundless=True)
    out["train_boundless/merges"] = [boundless.merges.tolist(),
                                     boundless.model.superword.tolist()]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(documents(200, seed)) + "\n")
        tok, report = fb.train_files([path], vocab_size=320, min_word_count=2,
                                     return_report=True)
    out["train_files/merges"] = tok.merges.tolist()
    out["train_files/words_pruned"] = report["words_pruned"]
    return out


def refusals(result: dict) -> list[str]:
    """The parent's entry points that raised: each is a problem, except a clear
    FastBPEError from an entry point a preset may refuse (``MAY_REFUSE``)."""
    errors = {k for k in dir(fb.errors) if isinstance(getattr(fb.errors, k), type)
              and issubclass(getattr(fb.errors, k), fb.FastBPEError)}
    bad = []
    for key, value in result.items():
        if isinstance(value, list) and value[:1] == ["raised"]:
            if key.split("/")[-1] in MAY_REFUSE and value[1] in errors:
                continue
            bad.append(f"parent: {key} raised {value[1]}: {value[2]}")
    return bad


def _outcome(value):
    """A result as compared: a raised exception by its type only (messages name paths)."""
    if isinstance(value, list) and value[:1] == ["raised"]:
        return value[:2]
    return value


def compare(name: str, got: dict, want: dict) -> list[str]:
    bad = [f"{name}: {k}" for k in want if _outcome(got.get(k)) != _outcome(want[k])]
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
    problems = refusals(want[0])
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
