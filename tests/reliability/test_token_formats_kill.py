"""Training-stack token files (megatron, datatrove, nanogpt, llmc) under SIGKILL, then resume.

A run is killed exactly before each fsync and each rename it makes (shards close and are
fsynced while the input is still being encoded; at the end every shard is renamed and the
marker written last), in a forked child so that the kill is a real one. Whatever a killed
run left, a marker present vouches for files equal to a clean run's, and ``resume=True``
then gives byte for byte the clean run's files: no document lost or duplicated.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from rel_harness import run_case

FORMATS = ("megatron", "datatrove", "nanogpt", "llmc")
FILES = {"a/part.parquet": 0, "b/part.parquet": 1}
OPTS = {"shard_size": 4000, "val_fraction": 0.3, "seed": 1, "bos": "<|bos|>", "num_threads": 1}

MAKE = """
    import os
    import pyarrow as pa, pyarrow.parquet as pq
    import fastbpe_nb as fb
    from rel_harness import prose
    root, files = {root!r}, {files!r}
    lines = prose(16_000, seed=9).split("\\n")
    for rel, k in files.items():
        path = os.path.join(root, "in", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        docs = lines[k::2] + [None, "", "x" * 9000]  # a null, an empty and a huge document
        pq.write_table(pa.table({{"text": docs}}), path, row_group_size=50)
    fb.train([" ".join(lines)[:100_000]], vocab_size=600,
             special_tokens=["<|endoftext|>", "<|bos|>"]).save(os.path.join(root, "m.json"))
    emit("ok")
"""

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
        fb.encode_parquet(tok, {inputs!r}, out, format=fmt, **{opts!r})
        return calls[0]

    def in_child(target, out, fmt):
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
    for fmt in {formats!r}:
        status, n = in_child(0, {root!r} + "/ref-" + fmt, fmt)
        assert status == 0, status
        # every {stride}th point, and all of the commit (renames, the marker) at the end
        targets = sorted(set(range(1, n + 1, {stride})) | set(range(max(1, n - 10), n + 1)))
        result[fmt] = {{"n": n, "status": {{t: in_child(t, {root!r} + f"/{{fmt}}-{{t}}", fmt)[0]
                                          for t in targets}}}}
    emit(result)
"""

RESUME_ALL = """
    import fastbpe_nb as fb
    tok = fb.load({model!r})
    out = {{}}
    for folder, fmt in {jobs!r}:
        r = fb.encode_parquet(tok, {inputs!r}, folder, format=fmt, resume=True, **{opts!r})
        td = fb.read_tokens(folder)
        out[folder] = {{"done": [f["path"] for f in r["files"]] + r["skipped_complete"],
                       "reencoded": r["reencoded"], "stale": r["stale_temp_files_removed"],
                       "documents": td.documents}}
    emit(out)
"""


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def markers_vouch(folder: Path, state: dict, ref: dict) -> None:
    """Every marker a killed run left equals the clean run's, and so do the files it lists."""
    for rel, digest in state.items():
        if rel.endswith(".json") and not Path(rel).name.startswith(".tmp-"):
            assert digest == ref[rel], f"{rel}: a marker that differs from a clean run's"
            for entry in json.loads((folder / rel).read_text())["files"]:
                assert state.get(entry["path"]) == ref[entry["path"]], entry["path"]


def test_kill_before_fsyncs_and_renames_then_resume(tmp_path):
    """Every 4th kill point and the whole commit phase, one input (fast)."""
    kill_then_resume(tmp_path, {"a/part.parquet": 0}, stride=4)


@pytest.mark.slow
def test_kill_before_each_fsync_and_rename_then_resume(tmp_path):
    """Every kill point, two inputs."""
    kill_then_resume(tmp_path, FILES, stride=1)


def kill_then_resume(tmp_path, files, stride):
    data = tmp_path / "data"
    data.mkdir()
    run_case(MAKE.format(root=str(data), files=files), timeout=300).check()
    model, inputs = str(data / "m.json"), str(data / "in")
    res = run_case(KILL_POINTS.format(model=model, inputs=inputs, root=str(tmp_path),
                                      opts=OPTS, formats=FORMATS, stride=stride),
                   timeout=900).check().result
    jobs = []
    for fmt in FORMATS:
        n = res[fmt]["n"]
        assert n >= 10 * len(files), res[fmt]  # shards per split, their side files, renames
        assert set(res[fmt]["status"].values()) == {-9}, res[fmt]
        ref_state = snapshot(tmp_path / f"ref-{fmt}")
        for target in map(int, res[fmt]["status"]):
            out = tmp_path / f"{fmt}-{target}"
            state = snapshot(out) if out.exists() else {}
            markers_vouch(out, state, ref_state)
            assert state != ref_state or target == n, (fmt, target)
            jobs.append((str(out), fmt))
    resumed = run_case(RESUME_ALL.format(model=model, jobs=jobs, inputs=inputs, opts=OPTS),
                       timeout=600).check().result
    for fmt in FORMATS:
        ref_state = snapshot(tmp_path / f"ref-{fmt}")
        mine = {k: v for (k, f), v in zip(jobs, resumed.values()) if f == fmt}
        docs = {r["documents"] for r in mine.values()}
        assert len(docs) == 1, docs  # every resumed output holds the same documents
        for out, r in mine.items():
            assert sorted(r["done"]) == sorted(str(data / "in" / rel) for rel in files), r
            assert snapshot(Path(out)) == ref_state, out
        assert sum(r["stale"] for r in mine.values()) >= len(files), fmt
