"""The teaching notebook: generated from notebooks/make_notebook.py, executed headless."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fbtest import CORPORA, REPO

NOTEBOOKS = REPO / "notebooks"
NOTEBOOK = NOTEBOOKS / "bpe_lifecycle.ipynb"
FIGURES = ("construction_tree", "tokens_per_char", "bytes_per_token")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_committed_notebook_is_generated_and_has_no_outputs():
    pytest.importorskip("nbformat")
    out = subprocess.run([sys.executable, str(NOTEBOOKS / "make_notebook.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def _kernel_env(tmp_path) -> dict:
    """A ``python3`` kernel spec that runs *this* interpreter (the venv's), first on the path.

    The spec installed by ipykernel starts plain ``python`` (whatever is first on PATH);
    a spec under JUPYTER_PATH is found first, so the kernel is always sys.executable.
    """
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (fastbpe tests)", "language": "python",
    }))
    return {"JUPYTER_PATH": str(tmp_path / "jupyter")}


@pytest.mark.parametrize("corpora", ["shared", "absent"])
def test_notebook_runs_headless_and_saves_its_figures(tmp_path, monkeypatch, corpora):
    """Runs every cell (about 10 s) with figures going to a temporary folder, with the
    shared corpora (skipped when absent) and with the built-in fallback samples."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    figures = tmp_path / "figures"
    for key, value in _kernel_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FASTBPE_FIGURES", str(figures))
    if corpora == "absent":
        monkeypatch.setenv("FASTBPE_CORPORA", str(tmp_path / "no-corpora"))
    elif not CORPORA.exists():
        pytest.skip(f"{CORPORA} is absent (the shared corpora exist only on the team's machines)")
    else:
        monkeypatch.setenv("FASTBPE_CORPORA", str(CORPORA))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "decoded back identical: True" in text
    assert "in reversed order" in text
    for name in FIGURES:
        path = figures / f"{name}.png"
        assert path.exists(), f"{name}.png was not saved"
        data = path.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG_SIGNATURE), name
        # A valid PNG: the IHDR chunk comes first and gives a real size.
        assert data[12:16] == b"IHDR"
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 100 and height > 100, (name, width, height)
    shown = "absent (using built-in samples)" if corpora == "absent" else str(CORPORA)
    assert f"shared corpora: {shown}" in text
