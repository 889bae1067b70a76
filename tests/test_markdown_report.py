"""The benchmark scripts' ``--markdown PATH``: their report replaces its section of a doc.

``benchmarks/markdown_report.py`` is exercised on fake tables (the real benchmarks take
minutes to an hour), and the two scripts' ``main`` with their measuring ``run`` replaced by
one that prints a fake table, so the option's wiring is covered without measuring anything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import markdown_report as mr  # noqa: E402

DOC = """# Performance

Prose written by hand.

<!-- compare_encoders:begin -->
| old | table |
|---|---|
| 1 | 2 |
<!-- compare_encoders:end -->

More prose after the section.
"""
TABLE = "| workload | MB/s |\n|---|---:|\n| code | 65.4 |\n"


def test_section_replaced_and_rest_kept(tmp_path):
    path = tmp_path / "performance.md"
    path.write_text(DOC, encoding="utf-8")
    mr.write_section(path, "compare_encoders", "Written by test.\n\n" + TABLE)
    out = path.read_text(encoding="utf-8")
    assert "| old | table |" not in out
    assert out == DOC.replace("| old | table |\n|---|---|\n| 1 | 2 |\n",
                              "Written by test.\n\n" + TABLE)
    # Writing again gives the same file: the markers survive a rewrite.
    mr.write_section(path, "compare_encoders", "Written by test.\n\n" + TABLE)
    assert path.read_text(encoding="utf-8") == out
    assert [p.name for p in tmp_path.iterdir()] == ["performance.md"]  # no temporary left


def test_other_sections_untouched(tmp_path):
    path = tmp_path / "p.md"
    path.write_text(DOC + "\n<!-- compare_training:begin -->\nT\n<!-- compare_training:end -->\n")
    mr.write_section(path, "compare_training", "NEW")
    out = path.read_text()
    assert "| old | table |" in out and "\nNEW\n" in out and "\nT\n" not in out


def test_missing_file_and_missing_markers(tmp_path):
    path = tmp_path / "new.md"
    mr.write_section(path, "compare_training", TABLE)
    begin, end = mr.markers("compare_training")
    assert path.read_text() == f"{begin}\n{TABLE.strip()}\n{end}\n"
    other = tmp_path / "other.md"
    other.write_text("# Title\n")
    mr.write_section(other, "compare_training", TABLE)
    assert other.read_text() == f"# Title\n\n{begin}\n{TABLE.strip()}\n{end}\n"


@pytest.mark.parametrize("doc", [
    "<!-- compare_encoders:begin -->\nno end\n",
    "no begin\n<!-- compare_encoders:end -->\n",
    "<!-- compare_encoders:end -->\nx\n<!-- compare_encoders:begin -->\n",
    DOC + DOC,
])
def test_bad_markers_refused_and_file_unchanged(tmp_path, doc):
    path = tmp_path / "p.md"
    path.write_text(doc)
    with pytest.raises(mr.MarkerError, match="p.md"):
        mr.check_section(path, "compare_encoders")
    with pytest.raises(mr.MarkerError, match="p.md"):
        mr.write_section(path, "compare_encoders", TABLE)
    assert path.read_text() == doc
    assert os.listdir(tmp_path) == ["p.md"]


def test_check_section_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mr.check_section(tmp_path / "nope" / "p.md", "compare_encoders")


def test_provenance_names_command_date_and_commit():
    line = mr.provenance([str(BENCH / "compare_encoders.py"), "--scale", "0.1"], when=0)
    assert line.startswith("Written by `python benchmarks/compare_encoders.py --scale 0.1` on 19")
    assert "commit `" in line


@pytest.mark.parametrize("script", ["compare_encoders", "compare_training"])
def test_script_markdown_option(tmp_path, monkeypatch, capsys, script):
    module = __import__(script)

    def fake_run(*args):
        print("Machine: fake.\n")
        print(TABLE)
        return 0

    monkeypatch.setattr(module, "run", fake_run)
    path = tmp_path / "performance.md"
    path.write_text(DOC.replace("compare_encoders", script))
    assert module.main(["--markdown", str(path)]) == 0
    out = path.read_text()
    begin, end = mr.markers(script)
    section = out[out.index(begin):out.index(end)]
    assert f"Written by `python benchmarks/{script}.py --markdown {path}`" in section
    assert "Machine: fake." in section and "| code | 65.4 |" in section
    assert "| old | table |" not in out and out.endswith("More prose after the section.\n")
    assert "| code | 65.4 |" in capsys.readouterr().out  # still printed to the terminal
