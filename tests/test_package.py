"""Package-level promises: import cost, kernel discipline, the command line."""

import json
import subprocess
import sys

import pytest

import fastbpe_nb as fb

from fbtest import NOJIT

needs_jit = pytest.mark.skipif(NOJIT, reason="NUMBA_DISABLE_JIT=1: kernels are plain functions")


def run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_jit
def test_import_compiles_nothing_and_skips_pyarrow():
    out = run_python(
        "import sys, fastbpe_nb\n"
        "print('pyarrow' in sys.modules, 'numba' in sys.modules)\n"
        "import fastbpe_nb.kernels.merge as m, fastbpe_nb.kernels.encode as e, fastbpe_nb.kernels.hashing as h\n"
        "from numba.core.registry import CPUDispatcher\n"
        "ds = [v for mod in (m, e, h) for v in vars(mod).values() if isinstance(v, CPUDispatcher)]\n"
        "print(len(ds), sum(len(d.overloads) for d in ds))\n"
    )
    first, second = out.splitlines()
    assert first == "False False"  # neither pyarrow nor numba is imported by `import fastbpe_nb`
    n_kernels, n_compiled = map(int, second.split())
    assert n_kernels >= 10
    assert n_compiled == 0


@needs_jit
def test_kernels_use_cache_and_nogil():
    import fastbpe_nb.kernels.encode as e
    import fastbpe_nb.kernels.hashing as h
    import fastbpe_nb.kernels.merge as m
    from numba.core.registry import CPUDispatcher

    for mod in (m, e, h):
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                assert obj.targetoptions.get("nogil") is True, name
                assert obj._cache.__class__.__name__ != "NullCache", f"{name} lacks cache=True"


def cli(*args, check=True):
    out = subprocess.run([sys.executable, "-m", "fastbpe_nb", *args], capture_output=True,
                         text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_cli_train_encode_decode_inspect(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 20 + "Привет мир\n", encoding="utf-8")
    model = tmp_path / "m.json"
    out = cli("train", str(corpus), "-o", str(model), "--vocab-size", "280", "--special", "<|eot|>")
    assert json.loads(out.stdout[: out.stdout.rindex("}") + 1])["merges"] == 23
    tok = fb.load(model)
    assert tok.vocab_size == 280
    ids = cli("encode", "--model", str(model), "the cat").stdout.split()
    assert list(map(int, ids)) == tok.encode("the cat")
    assert cli("decode", "--model", str(model), *ids).stdout == "the cat\n"
    from fastbpe_nb.cli import _pieces_line

    shown = cli("inspect", "--model", str(model), "the cat").stdout
    assert shown == _pieces_line(tok, "the cat") + "\n"
    assert shown.startswith("the|␣")


def test_cli_errors_are_clean(tmp_path):
    out = cli("decode", "--model", str(tmp_path / "missing.json"), "1", check=False)
    assert out.returncode == 2
    assert "missing.json" in out.stderr and "Traceback" not in out.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    out = cli("encode", "--model", str(bad), "x", check=False)
    assert out.returncode == 2 and "bad.json" in out.stderr and "Traceback" not in out.stderr
    tok = fb.train(["abc"], vocab_size=257)
    good = tmp_path / "good.json"
    tok.save(good)
    out = cli("decode", "--model", str(good), "99999", check=False)
    assert out.returncode == 2 and "99999" in out.stderr
    out = cli("train", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o.json"), check=False)
    assert out.returncode == 2 and "nope.txt" in out.stderr


@pytest.mark.slow
def test_cli_demo_runs():
    out = cli("demo", "--max-mb", "2", "--vocab-size", "600")
    assert "decoded back identical" in out.stdout


def test_cli_count_train_from_counts_and_encode_files(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = ["the cat sat on the mat", None, "Привет мир, the cat", "x <|endoftext|> y"] * 10
    pq.write_table(pa.table({"text": docs}), tmp_path / "d.parquet", row_group_size=7)
    counts = tmp_path / "c.arrow"
    out = cli("count", str(tmp_path / "d.parquet"), "-o", str(counts), "--special", "<|endoftext|>")
    assert "unique words" in out.stdout
    model = tmp_path / "m.json"
    cli("train", "--from-counts", str(counts), "-o", str(model), "--vocab-size", "290", "-q")
    tok = fb.load(model)
    assert tok.special_tokens == {"<|endoftext|>": tok.n_regular}
    same = fb.train([d for d in docs if d], vocab_size=290, special_tokens=["<|endoftext|>"])
    assert tok.vocab == same.vocab
    # Encoding: the default policy refuses the special token and names the file and row.
    bad = cli("encode", "--model", str(model), str(tmp_path / "d.parquet"), "-o",
              str(tmp_path / "o"), "-q", check=False)
    assert bad.returncode == 2 and "d.parquet" in bad.stderr and "row 3" in bad.stderr
    cli("encode", "--model", str(model), str(tmp_path / "d.parquet"), "-o", str(tmp_path / "o"),
        "--special", "allow", "--format", "bin", "-q")
    ids, index = fb.read_bin(tmp_path / "o" / "d.bin")
    assert len(index) == 31 and tok.decode(ids[index[0] : index[1] - 1].tolist()) == docs[0]
    counted = cli("encode", "--model", str(model), str(tmp_path / "d.parquet"), "--count-only",
                  "--special", "text")
    assert json.loads(counted.stdout)["tokens"] == sum(
        len(tok.encode_ordinary(d)) for d in docs if d is not None)
