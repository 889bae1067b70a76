"""Helpers of the reliability suite: run a case in a subprocess, shared corpora and models.

``run_case(code, timeout)`` runs ``code`` in a fresh interpreter (``sys.executable -c``)
and returns its exit status, output and peak RSS. A segfault, an abort or a hang is then a
failed test (negative return code / ``timed_out``), never a lost test run.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: Code every child starts with: a helper printing one JSON result line, and the
#: /proc-based memory probes used by the loader cases.
PRELUDE = textwrap.dedent(r'''
    import json, os, sys
    sys.path.insert(0, %r)
    def emit(obj):
        sys.stdout.write("RESULT " + json.dumps(obj) + "\n")
        sys.stdout.flush()
    def _status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0
    def rss_now():
        return _status("VmRSS")
    def rss_peak():
        return _status("VmHWM")
    def reset_peak():
        """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False
''' % str(HERE))


@dataclasses.dataclass
class CaseResult:
    returncode: int | None
    stdout: str
    stderr: str
    peak_rss: int  # bytes, of the child (os.wait4 rusage)
    seconds: float
    timed_out: bool

    @property
    def results(self) -> list:
        """The objects the child passed to ``emit`` (in order)."""
        import json

        return [json.loads(line[7:]) for line in self.stdout.splitlines()
                if line.startswith("RESULT ")]

    @property
    def result(self):
        res = self.results
        assert res, f"the case printed no result\n{self.describe()}"
        return res[-1]

    def describe(self) -> str:
        return (f"returncode={self.returncode} timed_out={self.timed_out} "
                f"seconds={self.seconds:.1f} peak_rss={self.peak_rss / 2**20:.0f} MiB\n"
                f"--- stdout (tail)\n{self.stdout[-3000:]}\n--- stderr (tail)\n{self.stderr[-5000:]}")

    def check(self) -> "CaseResult":
        """Assert a clean exit (no crash, no hang, no uncaught exception)."""
        assert not self.timed_out and self.returncode == 0, self.describe()
        return self


def run_case(code: str, timeout: float = 120, env: dict | None = None, cwd=None,
             argv_prefix=None, prelude: bool = True) -> CaseResult:
    """Run ``code`` in a new Python process; kill it (whole process group) after ``timeout`` s.

    Returns a CaseResult with the return code (negative: killed by that signal), the
    output, the child's peak RSS in bytes (from ``os.wait4``'s rusage, i.e. this child
    alone, unlike RUSAGE_CHILDREN which is a maximum over every child ever waited for), the
    wall time, and whether the timeout fired.
    """
    full = (PRELUDE if prelude else "") + textwrap.dedent(code)
    child_env = dict(os.environ)
    child_env.setdefault("PYTHONFAULTHANDLER", "1")
    if env:
        child_env.update({k: str(v) for k, v in env.items()})
    cmd = list(argv_prefix or []) + [sys.executable, "-c", full]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=child_env,
                                cwd=cwd or str(REPO), start_new_session=True)
        timed_out = False
        status = rusage = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        out.seek(0)
        err.seek(0)
        return CaseResult(proc.returncode, out.read().decode("utf-8", "replace"),
                          err.read().decode("utf-8", "replace"), rusage.ru_maxrss * 1024,
                          seconds, timed_out)


# ------------------------------------------------------------------------------- corpora
_WORDS = ("the of and to in is was that for on as with by it he at from his an were are "
          "which this be or has had not but first one their its new after who they have her "
          "she two been other when there all during into school time may years more most only "
          "over city some world would where later up such used many can state about national "
          "out known university united then made don't it's we'll I'm you're they've "
          "company government because through however 1999 2024 42 3.14 e-mail U.S. "
          "naïve café Straße über résumé Привет мир 東京 😀").split()


def prose(n_bytes: int, seed: int = 0) -> str:
    """Deterministic English-like prose of exactly ``n_bytes`` UTF-8 bytes (Zipf-ish words)."""
    rnd = random.Random(seed)
    weights = [1.0 / (k + 1) for k in range(len(_WORDS))]
    parts, size = [], 0
    while size < n_bytes + 64:
        sentence = rnd.choices(_WORDS, weights, k=rnd.randint(4, 18))
        s = " ".join(sentence).capitalize() + rnd.choice([". ", ", ", "! ", "? ", ".\n", ".\n\n"])
        parts.append(s)
        size += len(s.encode("utf-8"))
    return _cut("".join(parts).encode("utf-8"), n_bytes)


def _cut(data: bytes, n_bytes: int) -> str:
    text = data[:n_bytes].decode("utf-8", "ignore")
    return text + "x" * (n_bytes - len(text.encode("utf-8")))


def code_like(n_bytes: int, seed: int = 1) -> str:
    """Indented code-like lines (space and tab indents, CRLF ends, digit runs): whitespace
    runs and digits then have merges of their own, as in real vocabularies."""
    rnd = random.Random(seed)
    lines, size = [], 0
    while size < n_bytes:
        indent = rnd.choice([" " * 4, " " * 8, " " * 16, "\t", "\t\t", "\u3000\u3000", ""])
        body = " ".join(rnd.choices(_WORDS[:40], k=rnd.randint(1, 6)))
        line = f"{indent}{body} = {rnd.randint(0, 10**rnd.randint(1, 9))}"
        line += rnd.choice(["\n", "\r\n", "\n\n", "  \n"])
        lines.append(line)
        size += len(line.encode("utf-8"))
    return _cut("".join(lines).encode("utf-8"), n_bytes)


def random_words(n_bytes: int, seed: int = 0) -> str:
    """Text of many distinct made-up words (a long merge phase in training)."""
    rnd = random.Random(seed)
    syll = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"] + ["th", "ng", "st", "qu"]
    words = ["".join(rnd.choices(syll, k=rnd.randint(1, 5))) for _ in range(60_000)]
    out = rnd.choices(words, weights=[1 / (k + 10) for k in range(len(words))],
                      k=n_bytes // 5)
    return _cut(" ".join(out).encode(), n_bytes)


def write_corpus(folder: Path, n_files: int, bytes_per_file: int, seed: int = 0,
                 random_words: bool = False) -> list[Path]:
    """``n_files`` text files of generated prose (or made-up words); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    gen = globals()["random_words"] if random_words else prose
    for k in range(n_files):
        p = folder / f"part{k:02d}.txt"
        p.write_text(gen(bytes_per_file, seed + k), encoding="utf-8")
        paths.append(p)
    return paths


SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>"]
#: The named patterns, and "superbpe": a SuperBPE model (gpt2 to its transition, then its
#: stage-2 pattern, which it encodes with).
PATTERNS = ("gpt2", "cl100k", "o200k", "superbpe")


def build_models(folder: Path, vocab_size: int = 1200) -> dict[str, Path]:
    """Train one model per pattern of PATTERNS (with SPECIALS) in a subprocess; return
    their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "train.txt"
    corpus.write_text(prose(400_000, seed=99) + code_like(100_000), encoding="utf-8")
    paths = {p: folder / f"model_{p}.json" for p in PATTERNS}
    code = f"""
        import fastbpe_nb as fb
        for p in {PATTERNS!r}:
            superbpe = {{"pattern": "gpt2", "superbpe_transition": {vocab_size - 200}}}
            tok = fb.train_files([{str(corpus)!r}], vocab_size={vocab_size},
                                 special_tokens={SPECIALS!r},
                                 **(superbpe if p == "superbpe" else {{"pattern": p}}))
            tok.save(str({str(folder)!r}) + "/model_" + p + ".json")
            tok.to_tiktoken(str({str(folder)!r}) + "/model_" + p + ".tiktoken")
            tok.to_huggingface(str({str(folder)!r}) + "/model_" + p + ".tokenizer.json")
        emit("ok")
    """
    run_case(code, timeout=300).check()
    return paths


def adversarial_cases(n: int, longest: str, seed: int = 0) -> dict[str, str]:
    """The adversarial texts of the issue, each exactly ``n`` UTF-8 bytes where possible."""
    import string

    rnd = random.Random(seed)

    def run_of(ch):
        unit = len(ch.encode("utf-8"))
        return ch * max(1, n // unit)

    cases = {
        "run_x": run_of("x"),
        "run_space": run_of(" "),
        "run_newline": run_of("\n"),
        "run_tab": run_of("\t"),
        "run_crlf": run_of("\r\n"),
        "run_u3000": run_of("\u3000"),
        "run_emoji": run_of("\U0001F600"),
        "run_nul": run_of("\x00"),
        "letters_no_spaces": "".join(rnd.choices(string.ascii_letters, k=n)),
        "apostrophe_s": run_of("'s"),
        "a_dot": run_of("a."),
        "longest_token": longest * max(1, n // len(longest.encode("utf-8"))),
        "spaces_then_x": " " * (n - 1) + "x",
        "digits": "".join(rnd.choices(string.digits, k=n)),
    }
    return cases
