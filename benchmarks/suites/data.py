"""Benchmark data, built once per machine from real text and cached under .asv/data.

The training corpus is this Python's standard-library sources (present everywhere); when
the team's ``shared/corpora`` folder is beside the repository, its English and Russian
samples are used as well. Everything is cut deterministically (no randomness).
"""

import os
from pathlib import Path

from fastbpe_nb.corpus import stdlib_texts

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("FASTBPE_BENCH_CACHE", HERE.parents[1] / ".asv" / "data"))
CORPORA = HERE.parents[2] / "shared" / "corpora"


def _cached(name: str, build) -> str:
    path = CACHE / name
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(build(), encoding="utf-8")
        tmp.replace(path)
    return path.read_text(encoding="utf-8")


def code_text(n_bytes: int = 4_000_000) -> str:
    return _cached(f"stdlib-{n_bytes}.txt", lambda: "".join(stdlib_texts(n_bytes)))


def language_text(language: str, n_bytes: int = 2_000_000) -> str:
    """English or Russian prose from shared/corpora, else the stdlib code corpus."""
    files = {"en": "kjv.txt", "ru": "fortunes_ru.txt"}
    path = CORPORA / files[language]
    if not path.exists():
        return code_text(n_bytes)

    def build():
        data = path.read_bytes()[:n_bytes]
        return data[: data.rfind(b"\n") + 1].decode("utf-8", "replace")

    return _cached(f"{language}-{n_bytes}.txt", build)
