"""Outputs of ``fastbpe encode`` under SIGKILL and concurrent writers.

A run killed at any point (a random time of the real CLI, or exactly before each fsync and
rename of the commit) leaves only outputs that are either complete and right, or
recognisably incomplete; ``--resume`` then gives byte for byte the outputs of a clean run,
every input encoded exactly once, and no temporary file left. Two writers into one output
folder at once both succeed and leave complete, self-consistent outputs.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import random
import time
from pathlib import Path

import pytest

from rel_harness import run_case

BIG = {"dup/a/train.parquet": 0, "dup/b/train.parquet": 1, "c/part.parquet": 2,
       "c/more.arrow": 3}
SMALL = {"dup/a/train.parquet": 0, "dup/b/train.arrow": 1}

MAKE_DATA = """
    import os
    import pyarrow as pa, pyarrow.parquet as pq
    import fastbpe_nb as fb
    from rel_harness import prose
    root, files, n_bytes = {root!r}, {files!r}, {n_bytes}
    text = prose(n_bytes * 2, seed=5)
    lines = text.split("\\n")
    for rel, k in files.items():
        path = os.path.join(root, "in", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        docs = lines[k::len(files)] + [None, ""]
        table = pa.table({{"text": docs, "n": list(range(len(docs)))}})
        if path.endswith(".arrow"):
            with pa.ipc.new_file(path, table.schema) as w:
                for batch in table.to_batches(max_chunksize=300):
                    w.write_batch(batch)
        else:
            pq.write_table(table, path, row_group_size=300)
    for i, vocab in ((1, 1000), (2, 700)):
        fb.train([text[:300_000]], vocab_size=vocab,
                 special_tokens=["<|endoftext|>"]).save(os.path.join(root, f"m{{i}}.json"))
    emit("ok")
"""


def make_data(root: Path, files: dict, n_bytes: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    run_case(MAKE_DATA.format(root=str(root), files=files, n_bytes=n_bytes), timeout=300).check()
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("big"), BIG, 1_500_000)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("small"), SMALL, 60_000)


def snapshot(folder: Path) -> dict:
    """{relative path: sha256} of every file under ``folder`` (hidden ones too)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def visible_outputs_are_right(state: dict, ref: dict, fmt: str) -> None:
    """What a killed run left: every output that looks complete equals the clean run's."""
    for rel, digest in state.items():
        name = os.path.basename(rel)
        if name.startswith(".tmp-"):
            continue
        if fmt == "parquet" or name.endswith(".bin.json"):
            assert digest == ref[rel], f"{rel}: looks complete but differs from a clean run"
        if name.endswith(".bin.json"):  # the marker vouches for its .bin and .idx.npy
            stem = rel[: -len(".bin.json")]
            for part in (stem + ".bin", stem + ".idx.npy"):
                assert state.get(part) == ref[part], f"{part}: marker present, content wrong"


CLI = """
    import contextlib, io
    from fastbpe_nb.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main({argv!r})
    emit({{"rc": rc, "report": json.loads(buf.getvalue()) if rc == 0 else None}})
"""


def cli_case(data: Path, out: Path, fmt: str, resume=False, timeout=300.0):
    argv = ["encode", "--model", str(data / "m1.json"), str(data / "in"), "-o", str(out),
            "--format", fmt, "--threads", "1"] + (["--resume"] if resume else [])
    return run_case(CLI.format(argv=argv), timeout=timeout)


def check_resume_report(report: dict, data: Path, files: dict) -> None:
    """Every input exactly once: encoded now or skipped as complete."""
    done = [f["path"] for f in report["files"]] + report["skipped_complete"]
    assert sorted(done) == sorted(str(data / "in" / rel) for rel in files), report


def sigkill_then_resume(big, tmp_path, fmt, kills, seed):
    ref_out = tmp_path / "ref"
    ref = cli_case(big, ref_out, fmt).check()
    assert ref.result["rc"] == 0
    ref_state = snapshot(ref_out)
    assert len(ref_state) == len(BIG) * (1 if fmt == "parquet" else 3)
    duration = ref.seconds
    rnd = random.Random(seed)
    landed = 0
    i = 0
    # ``kills`` kills at random points; on a loaded machine a run can be faster than the
    # reference run was and every kill may come after the outputs are complete, so up to
    # 6 more are made, earlier each time, until one lands mid-run.
    while i < kills or (landed == 0 and i < kills + 6):
        out = tmp_path / f"killed{i}"
        late = 0.95 * 0.6 ** max(0, i - kills + 1)
        delay = rnd.uniform(0.35 * late / 0.95, late) * duration
        i += 1
        killed = cli_case(big, out, fmt, timeout=delay)
        if killed.returncode != -9:
            # It finished just before the deadline (run_case may still flag it timed_out).
            assert killed.returncode == 0, killed.describe()
        else:
            state = snapshot(out) if out.exists() else {}
            visible_outputs_are_right(state, ref_state, fmt)
            landed += state != ref_state
        resumed = cli_case(big, out, fmt, resume=True).check().result
        assert resumed["rc"] == 0
        check_resume_report(resumed["report"], big, BIG)
        assert snapshot(out) == ref_state, f"kill {i} at {delay:.2f} s (seed {seed}): resume differs"
    assert landed >= 1, "no kill landed in the middle of a run"


@pytest.mark.parametrize("fmt", ["parquet", "bin"])
def test_sigkill_during_encode_then_resume(big, tmp_path, fmt):
    sigkill_then_resume(big, tmp_path, fmt, kills=3, seed=1 if fmt == "parquet" else 2)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "bin"])
def test_sigkill_during_encode_then_resume_many(big, tmp_path, fmt):
    sigkill_then_resume(big, tmp_path, fmt, kills=15, seed=int(time.time()))


KILL_POINTS = """
    import os, signal, traceback
    import pyarrow.parquet  # noqa: F401 (imported once, before forking)
    import fastbpe_nb as fb
    tok = fb.load({model!r})
    tok.encode("warm up the kernels before forking")

    def run(target, out, fmt):
        calls = [0]
        def hooked(real):
            def call(*args, **kwargs):
                calls[0] += 1
                if calls[0] == target:  # before this fsync or rename, the machine dies
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)
            return call
        os.fsync, os.replace = hooked(os.fsync), hooked(os.replace)
        fb.encode_parquet(tok, {inputs!r}, out, format=fmt, num_threads=1)
        return calls[0]

    def in_child(target, out, fmt):
        # Each run in a forked process of its own: a SIGKILL kills that run alone.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.write(w, str(run(target, out, fmt)).encode())
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        data = os.read(r, 100)
        os.close(r)
        return os.waitstatus_to_exitcode(status), int(data or 0)

    result = {{}}
    for fmt in ("parquet", "bin"):
        status, n = in_child(0, {root!r} + "/ref-" + fmt, fmt)
        assert status == 0, status
        result[fmt] = {{"n": n, "status": {{t: in_child(t, {root!r} + f"/{{fmt}}-{{t}}", fmt)[0]
                                          for t in range(1, n + 1)}}}}
    emit(result)
"""

RESUME_ALL = """
    import fastbpe_nb as fb
    tok = fb.load({model!r})
    out = {{}}
    for folder, fmt in {jobs!r}:
        r = fb.encode_parquet(tok, {inputs!r}, folder, format=fmt, resume=True)
        out[folder] = {{"done": [f["path"] for f in r["files"]] + r["skipped_complete"],
                       "reencoded": r["reencoded"], "stale": r["stale_temp_files_removed"]}}
    emit(out)
"""


def test_kill_before_each_fsync_and_rename_then_resume(small, tmp_path):
    """Killed exactly before each fsync and each rename of a run (both formats), then
    resumed: the outputs of a clean run, every input once, every temporary file removed."""
    model, inputs = str(small / "m1.json"), str(small / "in")
    res = run_case(KILL_POINTS.format(model=model, inputs=inputs, root=str(tmp_path)),
                   timeout=600).check().result
    jobs = []
    for fmt, per_file in (("parquet", 3), ("bin", 8)):  # fsyncs and renames of one output
        n = res[fmt]["n"]
        assert n >= per_file * len(SMALL), res[fmt]
        assert set(res[fmt]["status"].values()) == {-9}, res[fmt]
        ref_state = snapshot(tmp_path / f"ref-{fmt}")
        for target in range(1, n + 1):
            out = tmp_path / f"{fmt}-{target}"
            state = snapshot(out)
            visible_outputs_are_right(state, ref_state, fmt)
            assert state != ref_state or target == n, (fmt, target)
            jobs.append((str(out), fmt))
    resumed = run_case(RESUME_ALL.format(model=model, jobs=jobs, inputs=inputs),
                       timeout=600).check().result
    for fmt in ("parquet", "bin"):
        ref_state = snapshot(tmp_path / f"ref-{fmt}")
        mine = {k: v for (k, f), v in zip(jobs, resumed.values()) if f == fmt}
        for out, r in mine.items():
            assert sorted(r["done"]) == sorted(str(small / "in" / rel) for rel in SMALL), r
            assert snapshot(Path(out)) == ref_state, out
        # The kills while a file was written left temporary files: all were removed.
        assert sum(r["stale"] for r in mine.values()) >= len(SMALL), mine
        if fmt == "bin":  # some kills landed between the renames and the marker
            assert any("incomplete" in e["reason"] for r in mine.values() for e in r["reencoded"])


WRITER = """
    import time
    import fastbpe_nb as fb
    toks = {{name: fb.load({root!r} + "/" + name + ".json") for name in ("m1", "m2")}}
    while time.time() < {start}:
        time.sleep(0.001)
    for phase, model in {plan!r}:
        for fmt in ("parquet", "bin"):
            for _ in range({rounds}):
                fb.encode_parquet(toks[model], {root!r} + "/in", {out!r} + f"/{{phase}}-{{fmt}}",
                                  format=fmt, num_threads=1)
    emit("ok")
"""

REFERENCE = """
    import fastbpe_nb as fb
    for name in ("m1", "m2"):
        tok = fb.load({root!r} + "/" + name + ".json")
        for fmt in ("parquet", "bin"):
            fb.encode_parquet(tok, {root!r} + "/in", {out!r} + f"/{{name}}-{{fmt}}", format=fmt)
    emit("ok")
"""


def test_two_writers_into_one_folder(small, tmp_path):
    """Two processes encoding into one output folder at once, three times over: first with
    one model (the result is a clean run's), then with two models (each output is wholly
    one model's: never a .bin of one with the index or marker of the other); --resume with
    one model then makes them all that model's."""
    run_case(REFERENCE.format(root=str(small), out=str(tmp_path / "ref")), timeout=300).check()
    start = time.time() + 3.0  # both children have imported and loaded before this
    plans = [[("same", "m1"), ("mixed", "m1")], [("same", "m1"), ("mixed", "m2")]]
    codes = [WRITER.format(root=str(small), start=start, plan=plan, rounds=3,
                           out=str(tmp_path / "w")) for plan in plans]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for res in pool.map(lambda c: run_case(c, timeout=300), codes):
            res.check()
    jobs = []
    for fmt, ext, parts in (("parquet", ".parquet", [".parquet"]),
                            ("bin", ".bin.json", [".bin", ".idx.npy", ".bin.json"])):
        refs = [snapshot(tmp_path / "ref" / f"{m}-{fmt}") for m in ("m1", "m2")]
        assert refs[0] != refs[1]
        assert snapshot(tmp_path / "w" / f"same-{fmt}") == refs[0]
        state = snapshot(tmp_path / "w" / f"mixed-{fmt}")
        assert not [rel for rel in state if os.path.basename(rel).startswith(".tmp-")], state
        stems = [rel[: -len(ext)] for rel in refs[0] if rel.endswith(ext)]
        assert len(stems) == len(SMALL) and len(state) == len(refs[0])
        for stem in stems:
            files = [stem + p for p in parts]
            assert [state[f] for f in files] in ([r[f] for f in files] for r in refs), stem
        jobs.append((str(tmp_path / "w" / f"mixed-{fmt}"), fmt))
    run_case(RESUME_ALL.format(model=str(small / "m1.json"), jobs=jobs, inputs=str(small / "in")),
             timeout=300).check()
    for folder, fmt in jobs:
        assert snapshot(Path(folder)) == snapshot(tmp_path / "ref" / f"m1-{fmt}")
