"""The command line composes with the shell (issue 19, "CLI").

The real entry point runs as subprocesses (``python -m fastbpe_nb``): ``encode | decode``
round-trips through a shell pipe, ``| head -1`` ends quietly, every input kind is read, a
missing path is never encoded as text, ``--version``, ``--progress`` log lines. Option
checks that need no pipe run ``cli.main`` in this process (faster). One small model is
trained per module, on the shared English corpus when present (enough merges that
``inspect --merges`` overflows a pipe buffer), else on generated text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fastbpe_nb as fb
from fastbpe_nb import cli
from fastbpe_nb.cli_help import HelpFormatter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent.parent / "shared" / "corpora" / "fortunes_en.txt"
ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
ENV.pop("FASTBPE_PROGRESS_SECONDS", None)


def _texts():
    if CORPUS.exists():
        return CORPUS.read_text(encoding="utf-8")[:400_000].split("\n%\n")
    words = [f"w{i % 997}x{i % 13}" for i in range(60_000)]
    return [" ".join(words[i:i + 50]) for i in range(0, len(words), 50)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(path, tokenizer): 1200 merges, a special token."""
    folder = tmp_path_factory.mktemp("cli_compose")
    tok = fb.train(_texts(), vocab_size=1457, special_tokens=["<|eot|>"])
    path = folder / "m.json"
    tok.save(path)
    return path, tok


def run(*args, stdin=None, check=True, env=None, cwd=ROOT):
    out = subprocess.run([sys.executable, "-m", "fastbpe_nb", *map(str, args)], input=stdin,
                         capture_output=True, timeout=120, env=env or ENV, cwd=cwd)
    if check:
        assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    return out


def shell(script: str, cwd):
    """``bash -c`` with ``set -o pipefail``: a pipeline fails if any command in it fails."""
    py = f"'{sys.executable}' -m fastbpe_nb"
    return subprocess.run(["bash", "-c", "set -o pipefail\n" + script.replace("FASTBPE", py)],
                          capture_output=True, timeout=120, env=ENV, cwd=cwd)


def ids_lines(tok, docs, **kw):
    return "".join(" ".join(map(str, tok.encode(d, **kw))) + "\n" for d in docs).encode()


# ------------------------------------------------------------------ shell pipelines
def test_encode_pipe_decode_round_trips(model, tmp_path):
    path, tok = model
    out = shell(f"printf 'hello world\\n' | FASTBPE encode --model {path} "
                f"| FASTBPE decode --model {path}", tmp_path)
    assert out.returncode == 0 and out.stdout == b"hello world\n", out.stderr
    out = shell(f"FASTBPE encode --model {path} a b | FASTBPE decode --model {path}", tmp_path)
    assert out.returncode == 0 and out.stdout == b"a\nb\n", out.stderr
    # A named pipe (process substitution) is read as a stream, like standard input.
    out = shell(f"FASTBPE encode --model {path} <(printf 'one\\ntwo\\n') --docs lines", tmp_path)
    assert out.returncode == 0 and out.stdout == ids_lines(tok, ["one", "two"]), out.stderr
    # By lines: empty lines are empty documents, so the text comes back byte for byte.
    text = "Привет мир\n\n  two spaces\r\nlast line without newline"
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    out = shell(f"FASTBPE encode --model {path} --docs lines t.txt | tee ids.txt "
                f"| FASTBPE decode --model {path}", tmp_path)
    assert out.returncode == 0 and out.stdout.decode() == text + "\n", out.stderr
    lines = text.split("\n")
    assert (tmp_path / "ids.txt").read_bytes() == ids_lines(tok, lines)


def test_closed_pipe_exits_quietly(model, tmp_path):
    path, tok = model
    (tmp_path / "big.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 40_000)
    out = shell(f"FASTBPE encode --model {path} --docs lines big.txt | head -1", tmp_path)
    assert out.returncode == 0 and out.stderr == b"", out.stderr
    assert out.stdout == ids_lines(tok, ["the quick brown fox jumps over the lazy dog"])
    out = shell(f"FASTBPE inspect --model {path} --merges | head -2", tmp_path)
    assert out.returncode == 0 and out.stderr.count(b"\n") <= 1, out.stderr  # the count note
    assert b"Traceback" not in out.stderr and b"Exception ignored" not in out.stderr
    assert len(out.stdout.splitlines()) == 2
    # The merge trace is larger than a pipe's buffer, so the pipe did close on it.
    assert len(cli.format_trace(tok)) > 1 << 16  # Linux: 64 KiB


# ------------------------------------------------------------------ inputs
def test_every_input_kind(model, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow.feather as feather

    path, tok = model
    (tmp_path / "a.txt").write_text("first file\nsecond line\n", encoding="utf-8")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("compressed text\n\nnext paragraph\n")
    (tmp_path / "c.jsonl").write_text('{"body": "json row", "id": 1}\n{"body": null}\n'
                                      '{"body": "äöü"}\n', encoding="utf-8")
    pq.write_table(pa.table({"body": ["parquet row", "", None]}), tmp_path / "d.parquet",
                   row_group_size=2)
    feather.write_feather(pa.table({"body": ["arrow row"]}), tmp_path / "e.arrow")
    out = run("encode", "--model", path, "a.txt", "b.txt.gz", "c.jsonl", "d.parquet", "e.arrow",
              "-", "two words", "--column", "body", "--text", "x/y.txt",
              stdin="from stdin\n".encode(), cwd=tmp_path)
    docs = ["first file\nsecond line\n", "compressed text\n\nnext paragraph\n",
            "json row", "", "äöü", "parquet row", "", "", "arrow row", "from stdin\n",
            "two words", "x/y.txt"]
    assert out.stdout == ids_lines(tok, docs)
    # Null rows are printed as empty lines, and counted on stderr.
    assert b"2 null rows" in out.stderr
    # --docs paragraphs (as `fastbpe stats --docs paragraphs`) on a compressed file.
    out = run("encode", "--model", path, "--docs", "paragraphs", "b.txt.gz", cwd=tmp_path)
    assert out.stdout == ids_lines(tok, ["compressed text", "next paragraph"])


def test_no_input_reads_stdin_as_one_document(model):
    path, tok = model
    text = "line one\nline two <|eot|>\n"
    out = run("encode", "--model", path, "--special", "allow", stdin=text.encode())
    assert out.stdout == ids_lines(tok, [text], allowed_special="all")
    out = run("encode", "--model", path, "--special", "text", stdin=text.encode())
    assert out.stdout == ids_lines(tok, [text], disallowed_special=())


def test_a_missing_path_is_an_error_not_text(model, tmp_path, capsys):
    path, tok = model
    out = run("encode", "--model", path, "data/train.txt", "two words", check=False)
    assert out.returncode == 2 and out.stdout == b""
    assert (b"no such file: data/train.txt; to encode this string as text, pass --text "
            b"data/train.txt") in out.stderr
    for arg in ("notes.txt", "c.jsonl.zst", "x.parquet", "./hello", "a/b"):
        assert cli.main(["encode", "--model", str(path), arg]) == 2
        assert f"no such file: {arg}" in capsys.readouterr().err
    for arg in ("hello", "hello world", "version 1.0", "a /b"):  # not path-like: text
        assert cli.main(["encode", "--model", str(path), arg]) == 0
        assert capsys.readouterr().out == ids_lines(tok, [arg]).decode()


def test_with_output_a_text_file_gets_a_clear_error(model, tmp_path, capsys):
    path, _ = model
    (tmp_path / "a.txt").write_text("some text\n")
    assert cli.main(["encode", "--model", str(path), str(tmp_path / "a.txt"),
                     "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "a.txt: a text file" in err and "drop -o" in err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ decode
def test_decode_reads_lines_and_names_a_bad_id(model, tmp_path, capsys, monkeypatch):
    import io

    path, tok = model

    def decode(stdin: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        return cli.main(["decode", "--model", str(path)])

    ids = " ".join(map(str, tok.encode("abc")))
    assert decode(f"{ids}\n\n{ids}\n".encode()) == 0
    assert capsys.readouterr().out == "abc\n\nabc\n"
    assert decode(f"{ids}\n1 2 x3 4\n".encode()) == 2
    err = capsys.readouterr().err
    assert "'x3' at position 2 on line 2 is not an integer" in err
    assert decode(f"{ids}\n{ids} {tok.vocab_size}\n".encode()) == 2
    err = capsys.readouterr().err
    assert f"{tok.vocab_size} at position {len(ids.split())} on line 2" in err
    assert "not in the vocabulary" in err


# ------------------------------------------------------------------ options and help
def test_version():
    out = run("--version")
    assert out.stdout.decode().strip() == f"fastbpe_nb {fb.__version__}"


def _parsers():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [("fastbpe", parser)] + [(f"fastbpe {n}", p) for n, p in sub.choices.items()]


def test_every_option_has_help_and_shows_its_default():
    missing, no_default = [], []
    for name, parser in _parsers():
        for action in parser._actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
                continue
            label = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(label)
                continue
            shown = parser._get_formatter()._get_help_string(action)
            if action.default not in (None, False, argparse.SUPPRESS) and "default" not in shown:
                no_default.append(label)
    assert not missing, f"options without help: {missing}"
    assert not no_default, f"options whose help does not show the default: {no_default}"
    text = " ".join(dict(_parsers())["fastbpe train"].format_help().split())
    assert "(default: 32768 unless --num-merges" in text and "(default: ids)" in text


def test_the_checker_catches_an_option_without_help():
    p = argparse.ArgumentParser(formatter_class=HelpFormatter)
    p.add_argument("--x", default=3)
    assert p._get_formatter()._get_help_string(p._actions[-1]) == " (default: 3)"
    assert not p._actions[-1].help  # what the test above reports as missing


# ------------------------------------------------------------------ progress
def test_progress_log_lines_when_stderr_is_a_file(model, tmp_path):
    path, _ = model
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 200)
    log = tmp_path / "log.txt"
    with open(log, "wb") as err:
        subprocess.run([sys.executable, "-m", "fastbpe_nb", "train", corpus, "-o",
                        tmp_path / "m.json", "--vocab-size", "270", "--progress"],
                       stdout=subprocess.DEVNULL, stderr=err, env=ENV, timeout=120, check=True)
    lines = log.read_text().splitlines()
    assert "\r" not in log.read_text()
    assert any(ln.startswith("fastbpe: counting: started (") for ln in lines), lines
    assert any(ln.startswith("fastbpe: counting: done, 4.60kB of 4.60kB (100%), ")
               for ln in lines), lines
    # 14 merges asked for, 12 pairs to merge in this text: the kernel stops at 12.
    assert any(ln.startswith("fastbpe: merging: done, 12 merges of 14 merges (86%), ")
               and "merges/s" in ln for ln in lines), lines
    # -q silences it; without --progress a file gets no progress either.
    for flags in (["--progress", "-q"], []):
        out = run("train", corpus, "-o", tmp_path / "m.json", "--vocab-size", "270", *flags)
        assert b"counting" not in out.stderr and b"merging" not in out.stderr
    out = run("count", corpus, "-o", tmp_path / "c.arrow", "--progress", "-q")
    assert out.stderr == b""  # -q wins
    out = run("count", corpus, "-o", tmp_path / "c.arrow", "--progress")
    assert b"fastbpe: counting: done, 4.60kB of 4.60kB (100%)" in out.stderr
    # encode -o: a line per interval (0 s here: every update), with the rows done and a rate.
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a b c"] * 10}), tmp_path / "in.parquet")
    out = run("encode", "--model", path, tmp_path / "in.parquet", "-o", tmp_path / "o",
              "--progress", env=dict(ENV, FASTBPE_PROGRESS_SECONDS="0"))
    err = out.stderr.decode()
    assert "fastbpe: encoding: started (10 rows to do)" in err
    assert "fastbpe: encoding: 10 rows of 10 rows (100%)" in err and "rows/s" in err


def test_log_progress_lines(monkeypatch):
    import io

    from fastbpe_nb.progress import LogProgress, progress_bar

    out = io.StringIO()
    bar = LogProgress(total=100, desc="merging", unit="merge", file=out, interval=0)
    bar.update(25)
    bar.set_postfix(MBps="1.0")
    bar.close()
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "fastbpe: merging: started (100 merges to do)"
    assert lines[1].startswith("fastbpe: merging: 25 merges of 100 merges (25%), ")
    assert "ETA" in lines[1] and lines[2].startswith("fastbpe: merging: done, 25 merges")
    assert lines[2].endswith("(MBps=1.0)") and len(lines) == 3
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert isinstance(progress_bar(total=3, desc="x"), LogProgress)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = progress_bar(total=3, desc="x")
    assert not isinstance(bar, LogProgress) and type(bar).__module__.startswith("tqdm")
    bar.close()


# ------------------------------------------------------------------ train, stats, errors
def test_train_options_reach_the_api(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    lines = ["Ｃａｆé  12345 the cat", "the cat sat on the mat 2024", "ﬁne ﬁsh"] * 30
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "m.json"

    def train(*flags):
        assert cli.main(["train", str(corpus), "-o", str(out), "-q", *flags]) == 0, \
            capsys.readouterr().err
        return fb.load(out)

    text = corpus.read_text(encoding="utf-8")
    tok = train("--num-merges", "7")
    assert len(tok.merges) == 7
    tok = train("--normalization", "NFKC", "--vocab-size", "300")
    assert tok.vocab == fb.train([text], vocab_size=300, normalization="NFKC").vocab
    assert tok.encode("Ｃａｆé") == tok.encode("Café")
    tok = train("--base", "chars", "--normalization", "NFC", "--num-merges", "5")
    assert tok.vocab == fb.train([text], base="chars", normalization="NFC", num_merges=5).vocab
    flags = ["--whitespace", "\u2581", "--vocab-size", "320", "--no-split-digits",
             "--no-byte-fallback", "--character-coverage", "0.999", "--max-token-length", "6"]
    tok = train(*flags)
    same = fb.train(lines, vocab_size=320, whitespace="\u2581", split_digits=False,
                    byte_fallback=False, character_coverage=0.999, max_token_length=6)
    assert tok.vocab == same.vocab and tok.encode("the 2024 cat") == same.encode("the 2024 cat")
    for flags, words in ((["--byte-fallback"], "--byte-fallback: SentencePiece-style"),
                         (["--whitespace", "\u2581", "--num-merges", "3"], "--num-merges"),
                         (["--whitespace", "\u2581", "--normalization", "NFKC"],
                          "--normalization NFKC"),
                         (["--end-of-word", "</w>"], "--end-of-word is for --base chars")):
        assert cli.main(["train", str(corpus), "-o", str(out), "-q", *flags]) == 2
        assert words in capsys.readouterr().err


def test_stats_accepts_folders(model, tmp_path, capsys):
    path, _ = model
    (tmp_path / "langs").mkdir()
    (tmp_path / "langs" / "en.txt").write_text("the cat sat\n\non the mat\n")
    (tmp_path / "langs" / "de.txt").write_text("die Katze\n")
    assert cli.main(["stats", "--model", str(path), str(tmp_path / "langs"),
                     "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["name"] for r in rows] == ["de.txt", "en.txt"]


def test_errors_speak_cli(model, tmp_path, capsys):
    path, _ = model
    assert cli.main(["encode", "--model", str(path), "a <|eot|> b"]) == 2
    err = capsys.readouterr().err
    assert "--special allow" in err and "--special text" in err
    assert "allowed_special" not in err and "disallowed_special" not in err
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["x <|eot|> y"]}), tmp_path / "in.parquet")
    assert cli.main(["encode", "--model", str(path), str(tmp_path / "in.parquet"), "-o",
                     str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--special allow or --special text" in err and "special='allow'" not in err
    # encode -o option errors are ours (EncodeOptionsError), in the CLI's words: before,
    # a model without <|endoftext|> and --format bin ended in a ValueError traceback.
    for flags, words in ((["--format", "bin"], "or pass --separator TOKEN"),
                         (["--format", "bin", "--separator", "nope"],
                          "--separator 'nope' is not a registered special token"),
                         (["--format", "nanogpt", "--separator", "5", "--shard-size", "abc"],
                          "--shard-size: cannot read 'abc'")):
        nosep = tmp_path / "nosep.json"
        fb.train(["a b c"], vocab_size=260).save(nosep)
        assert cli.main(["encode", "--model", str(nosep), str(tmp_path / "in.parquet"), "-o",
                         str(tmp_path / "o2"), "-q", *flags]) == 2
        assert words in capsys.readouterr().err
    with pytest.raises(ValueError):  # still a ValueError for the library's callers
        fb.encode_parquet(fb.load(nosep), tmp_path / "in.parquet", tmp_path / "o3", format="bin")
    assert cli.cli_message("/data/vocab_size/x.txt: vocab_size must be") == \
        "/data/vocab_size/x.txt: --vocab-size must be"


# ------------------------------------------------------------------ demo
def test_demo_checks_its_output_folder_first(tmp_path, capsys, monkeypatch):
    import fastbpe_nb.demo as demo

    def never(*a, **k):
        raise AssertionError("trained before checking the output folder")

    monkeypatch.setattr(demo, "_split_held_out", never)
    assert cli.main(["demo", "-o", str(tmp_path / "missing" / "m.json")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "missing") in err and "no such folder" in err and ".tmp-" not in err


def test_compile_clock_counts_compilation_once():
    import numba

    from fastbpe_nb.demo import CompileClock

    @numba.njit  # not cached: compiled in this process
    def add_one(x):
        return x + 1

    with CompileClock() as clock:
        add_one(1)
    assert clock.kernels == 1 and clock.seconds > 0
    with CompileClock() as again:
        add_one(2)  # compiled already
    assert again.kernels == 0 and "no kernel was compiled" in again.summary(1.0)
    assert "one-time compilation of 1 Numba kernels" in clock.summary(2.0)


def test_make_demo_installs_runtime_dependencies_only(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make")
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    out = subprocess.run(["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "pip install --quiet -e .\n" in out and "[test]" not in out, out


def test_merge_progress_names_its_setup_phase(tmp_path, monkeypatch):
    """Log-line progress says when the merge kernel is still counting pairs."""
    import io

    import fastbpe_nb as fb
    from fastbpe_nb import progress as progress_mod

    lines = io.StringIO()
    made = []

    def logging_bar(**kw):
        bar = progress_mod.LogProgress(file=lines, interval=0.0, **kw)
        made.append(bar)
        return bar

    monkeypatch.setattr(progress_mod, "progress_bar", logging_bar)
    fb.train(["the quick brown fox jumps " * 200], vocab_size=300, progress=True)
    text = lines.getvalue()
    assert "merging: started" in text and "merging: done" in text
    first, last = text.splitlines()[1], text.splitlines()[-1]
    assert "phase=counting the pairs of" in first
    assert last.startswith("fastbpe: merging: done") and "phase=merging" in last
