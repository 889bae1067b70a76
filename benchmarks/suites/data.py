"""Benchmark data, built once per machine from real text and cached under .asv/data.

Code: this Python's standard-library sources (present everywhere). Prose: English and
Russian from the team's ``shared/corpora`` folder when it is beside the repository,
else the code corpus stands in (the benchmark names say which language was asked for).
Everything is cut deterministically.
"""

import os
from pathlib import Path

from fastbpe_nb.corpus import stdlib_texts

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("FASTBPE_BENCH_CACHE", HERE.parents[1] / ".asv" / "data"))
CORPORA = HERE.parents[2] / "shared" / "corpora"
LANGUAGE_FILES = {"en": "kjv.txt", "ru": "fortunes_ru.txt", "zh": "fortunes_zh.txt"}


def _cached(name: str, build) -> str:
    path = CACHE / name
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(build(), encoding="utf-8")
        tmp.replace(path)
    return path.read_text(encoding="utf-8")


def code_text(n_bytes: int = 4_000_000) -> str:
    return _cached(f"stdlib-{n_bytes}.txt", lambda: "".join(stdlib_texts(n_bytes)))


def language_text(language: str, n_bytes: int = 2_000_000) -> str:
    """Prose in ``language`` ("en", "ru", "zh") from shared/corpora, else stdlib code."""
    path = CORPORA / LANGUAGE_FILES[language]
    if not path.exists():
        return code_text(n_bytes)

    def build():
        data = path.read_bytes()[:n_bytes]
        return data[: data.rfind(b"\n") + 1].decode("utf-8", "replace")

    return _cached(f"{language}-{n_bytes}.txt", build)


def documents(text: str) -> list[str]:
    """Paragraph-sized documents (blank-line separated)."""
    return [d for d in text.split("\n\n") if d]


def parquet_file(n_bytes: int = 8_000_000) -> str:
    """A Parquet file of stdlib sources (one row per paragraph, 4,096-row groups)."""
    path = CACHE / f"docs-{n_bytes}.parquet"
    if not path.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        docs = documents(code_text(n_bytes))
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        pq.write_table(pa.table({"text": docs}), tmp, row_group_size=4096)
        tmp.replace(path)
    return str(path)
