"""MDS and litdata token datasets under SIGKILL, then resume (the harness of
``test_token_formats_kill``: a forked child killed exactly before each fsync and rename).

Both formats add steps the others do not have: a shard's body goes to a temporary file
first and the shard is assembled from it at close, and each split's ``index.json`` is
written after its shards. Whatever a killed run left, a marker present vouches for files
equal to a clean run's, and ``resume=True`` gives byte for byte the clean run's files
(shards and index.json): no document lost or duplicated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import test_token_formats_kill as kill


def markers_vouch(folder: Path, state: dict, ref: dict) -> None:
    """``kill.markers_vouch``, and every ``index.json`` a killed run left (renamed in after
    its split's shards, before the marker) is the clean run's, as is every shard it lists."""
    for rel, digest in state.items():
        path = Path(rel)
        if path.name.startswith(".tmp-") or path.suffix != ".json":
            continue
        assert digest == ref[rel], f"{rel}: differs from a clean run's"
        found = json.loads((folder / rel).read_text())
        if path.name == "index.json":
            names = [s["raw_data"]["basename"] for s in found.get("shards", ())]
            names += [c["filename"] for c in found.get("chunks", ())]
            for name in names:
                shard = str(path.parent / name)
                assert state.get(shard) == ref[shard], shard
        else:
            for entry in found["files"]:
                assert state.get(entry["path"]) == ref[entry["path"]], entry["path"]


@pytest.fixture
def streaming_formats(monkeypatch):
    monkeypatch.setattr(kill, "FORMATS", ("mds", "litdata"))
    monkeypatch.setattr(kill, "markers_vouch", markers_vouch)


def test_kill_before_fsyncs_and_renames_then_resume(tmp_path, streaming_formats):
    """Every 3rd kill point and the whole commit phase, one input (fast)."""
    kill.kill_then_resume(tmp_path, {"a/part.parquet": 0}, stride=3)


@pytest.mark.slow
def test_kill_before_each_fsync_and_rename_then_resume(tmp_path, streaming_formats):
    """Every kill point, two inputs."""
    kill.kill_then_resume(tmp_path, kill.FILES, stride=1)
