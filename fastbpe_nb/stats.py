"""What a tokenizer costs: tokens per character, word and byte, per file or language.

Definitions (every number of ``fastbpe stats``):

- ``chars``: Unicode code points of the text; ``bytes``: its UTF-8 bytes; ``words``:
  whitespace-separated words (``len(text.split())``).
- ``tokens``: the ids of the whole file encoded as one text (special-token text encoded as
  plain text). For Parquet/Arrow files: the sum over the rows.
- ``bytes_per_token`` = bytes / tokens (compression), ``tokens_per_char``,
  ``tokens_per_word``; ``tax`` = this file's tokens/char divided by the *first* file's
  (the "multilingual tax": how much more a text in this language costs than the first).
- Document lengths: a text file is cut into documents at blank lines (``docs="paragraphs"``,
  the default: one or more lines holding only whitespace separate two documents; a
  paragraph is its lines joined by newlines, without the line break after its last line), or at
  every line (``"lines"``), or not at all (``"file"``); documents that are only whitespace
  are dropped. Parquet/Arrow rows are documents. Each document is encoded on its own; the
  summary gives ``documents``, ``mean``, ``p50``, ``p90``, ``p99`` and ``max`` tokens, where
  ``pXX`` is the smallest document length such that at least XX % of the documents are no
  longer (numpy's ``inverted_cdf`` percentile: always a length that occurs).
- ``id_dtype``: the smallest unsigned integer type that holds every id of the vocabulary
  (``uint16`` up to 65,536 ids, else ``uint32``): what a flat token file needs.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np

from .errors import FastBPEError
from .inspect import markdown_table, merges_for_vocab_size, prefix_tokenizer

DOC_UNITS = ("paragraphs", "lines", "file")

#: Article 1 of the Universal Declaration of Human Rights in a few languages and scripts:
#: the built-in multilingual sample (used when the shared corpora are absent).
SAMPLE_TEXTS = {
    "English": "All human beings are born free and equal in dignity and rights. They are "
               "endowed with reason and conscience and should act towards one another in a "
               "spirit of brotherhood.",
    "German": "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit "
              "Vernunft und Gewissen begabt und sollen einander im Geist der Brüderlichkeit "
              "begegnen.",
    "French": "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils "
              "sont doués de raison et de conscience et doivent agir les uns envers les autres "
              "dans un esprit de fraternité.",
    "Russian": "Все люди рождаются свободными и равными в своем достоинстве и правах. Они "
               "наделены разумом и совестью и должны поступать в отношении друг друга в духе "
               "братства.",
    "Greek": "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα "
             "δικαιώματα. Είναι προικισμένοι με λογική και συνείδηση, και οφείλουν να "
             "συμπεριφέρονται μεταξύ τους με πνεύμα αδελφοσύνης.",
    "Chinese": "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
    "Japanese": "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"
                "人間は、理性と良心とを授けられており、互いに同胞の精神をもって行動しなければならない。",
    "Hindi": "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त "
             "है। उन्हें बुद्धि और अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से "
             "बर्ताव करना चाहिए।",
}

#: The shared sample corpora by language (file names under the corpora folder).
CORPUS_FILES = {
    "English (KJV)": "kjv.txt",
    "English": "fortunes_en.txt",
    "German": "fortunes_de.txt",
    "Russian": "fortunes_ru.txt",
    "Chinese": "fortunes_zh.txt",
}


def find_corpora() -> Path | None:
    """The shared corpora folder: ``$FASTBPE_CORPORA`` when set, else ``../shared/corpora``
    beside the repository; None when absent (a user's clone) or holding no ``.txt`` file."""
    env = os.environ.get("FASTBPE_CORPORA")
    folder = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "corpora"
    return folder if folder.is_dir() and any(folder.glob("*.txt")) else None


def read_head(path, max_bytes: int | None = None) -> str:
    """A text file as str (invalid UTF-8 replaced); with ``max_bytes``, only its first bytes,
    cut after the last newline within them."""
    try:
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes)
    except OSError as exc:
        raise FastBPEError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if max_bytes is not None and len(data) == max_bytes:
        cut = data.rfind(b"\n")
        if cut > 0:
            data = data[: cut + 1]
    return data.decode("utf-8", "replace")


def split_documents(text: str, docs: str = "paragraphs") -> list[str]:
    """Cut ``text`` into documents (see the module docstring); whitespace-only ones dropped."""
    if docs == "paragraphs":
        # Lines joined by "\n" up to the next blank line; the line break after a
        # paragraph's last line belongs to the separator, not to the paragraph.
        parts, current = [], []
        for line in text.split("\n"):
            if line.strip():
                current.append(line)
            elif current:
                parts.append("\n".join(current))
                current = []
        if current:
            parts.append("\n".join(current))
    elif docs == "lines":
        parts = text.splitlines()
    elif docs == "file":
        parts = [text]
    else:
        raise ValueError(f"docs must be one of {DOC_UNITS}, not {docs!r}")
    return [p for p in parts if p.strip()]


def id_dtype(vocab_size: int) -> str:
    """``"uint16"`` when every id 0..vocab_size-1 fits in 16 bits, else ``"uint32"``."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def length_summary(lengths) -> dict:
    """``documents``, ``mean``, ``p50``, ``p90``, ``p99``, ``max`` of document lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) == 0:
        return {"documents": 0, "mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    q = np.percentile(lengths, [50, 90, 99], method="inverted_cdf")
    return {"documents": int(len(lengths)), "mean": float(lengths.mean()),
            "p50": int(q[0]), "p90": int(q[1]), "p99": int(q[2]), "max": int(lengths.max())}


def _count(tok, texts):
    return np.asarray(tok.count_tokens(texts, disallowed_special=()), dtype=np.int64)


def measure_text(tok, text: str, name: str = "text", docs: str = "paragraphs",
                 documents=None) -> dict:
    """Every number of the module docstring for one text (or given ``documents``)."""
    if documents is None:
        documents = split_documents(text, docs)
        tokens = int(tok.count_tokens(text, disallowed_special=()))
        lengths = _count(tok, documents) if documents else np.zeros(0, np.int64)
    else:
        lengths = _count(tok, documents) if documents else np.zeros(0, np.int64)
        tokens = int(lengths.sum())
    n_chars = len(text)
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    n_words = len(text.split())
    row = {
        "name": name, "vocab_size": tok.vocab_size, "chars": n_chars, "bytes": n_bytes,
        "words": n_words, "tokens": tokens,
        "bytes_per_token": n_bytes / tokens if tokens else 0.0,
        "tokens_per_char": tokens / n_chars if n_chars else 0.0,
        "tokens_per_word": tokens / n_words if n_words else 0.0,
        "tax": None,
    }
    row.update(length_summary(lengths))
    row["id_dtype"] = id_dtype(tok.vocab_size)
    return row


def load_source(path, docs="paragraphs", max_bytes=None, column="text"):
    """``(name, text, documents_or_None)`` of a text, Parquet or Arrow file."""
    p = str(path)
    if not os.path.exists(p):
        raise FastBPEError(f"{p}: no such file")
    if os.path.isdir(p):
        raise FastBPEError(f"{p}: is a folder (give files)")
    lower = p.lower()
    if lower.endswith((".parquet", ".pq", ".arrow", ".feather", ".ipc")):
        try:
            if lower.endswith((".parquet", ".pq")):
                import pyarrow.parquet as pq

                table = pq.read_table(p, columns=[column])
            else:
                import pyarrow.feather as feather

                table = feather.read_table(p, columns=[column])
        except (OSError, KeyError, ValueError) as exc:
            raise FastBPEError(f"{p}: cannot read column {column!r} ({exc})") from None
        rows = [t for t in table.column(column).to_pylist() if t is not None]
        if max_bytes is not None:
            kept, size = [], 0
            for t in rows:
                size += len(t.encode("utf-8", "replace"))
                if size > max_bytes and kept:
                    break
                kept.append(t)
            rows = kept
        return Path(p).name, "".join(rows), rows
    return Path(p).name, read_head(p, max_bytes), None


def measure_sources(tok, sources, docs="paragraphs") -> list[dict]:
    """Rows for ``sources``: ``(name, text, documents_or_None)`` triples; ``tax`` filled in."""
    rows = [measure_text(tok, text, name, docs, documents) for name, text, documents in sources]
    return add_tax(rows)


def add_tax(rows) -> list[dict]:
    """Fill each row's ``tax``: its tokens/char over the first row's (same vocab size)."""
    first = {}
    for r in rows:
        first.setdefault(r["vocab_size"], r["tokens_per_char"])
        base = first[r["vocab_size"]]
        r["tax"] = r["tokens_per_char"] / base if base else None
    return rows


def parse_sizes(text: str) -> list[int]:
    """``"1k,4k,16k"`` -> ``[1024, 4096, 16384]`` (k = 1024, m = 1024²; plain ints as given)."""
    sizes = []
    for part in text.split(","):
        t = part.strip().lower()
        if not t:
            continue
        mult = 1
        if t[-1] in "km":
            mult = 1024 if t[-1] == "k" else 1024 * 1024
            t = t[:-1]
        try:
            value = float(t) * mult
        except ValueError:
            raise FastBPEError(f"--vocab-sizes: cannot read {part.strip()!r} "
                               "(use e.g. 1k,4k,16k or 1000,4000)") from None
        if value != int(value) or value <= 0:
            raise FastBPEError(f"--vocab-sizes: {part.strip()!r} is not a whole positive size")
        sizes.append(int(value))
    if not sizes:
        raise FastBPEError("--vocab-sizes: no sizes given")
    return sorted(set(sizes))


def vocab_curve(tok, sources, sizes, docs="paragraphs") -> list[dict]:
    """Rows of :func:`measure_sources` for the tokenizer made of each prefix of ``tok``'s
    merge list that has ``vocab_size`` ids (train once to the largest size, measure every
    smaller vocabulary without retraining). Each row also has ``merges``."""
    rows = []
    for size in sizes:
        try:
            n = merges_for_vocab_size(tok, size)
        except ValueError as exc:
            raise FastBPEError(f"--vocab-sizes: {exc}") from None
        small = prefix_tokenizer(tok, n)
        for r in measure_sources(small, sources, docs):
            r["merges"] = n
            rows.append(r)
    return rows


# -------------------------------------------------------------------------- output
COST_COLUMNS = ["name", "chars", "bytes", "words", "tokens", "bytes_per_token",
                "tokens_per_char", "tokens_per_word", "tax"]
LENGTH_COLUMNS = ["name", "documents", "mean", "p50", "p90", "p99", "max"]
ALL_COLUMNS = ["name", "vocab_size", "chars", "bytes", "words", "tokens", "bytes_per_token",
               "tokens_per_char", "tokens_per_word", "tax", "documents", "mean", "p50", "p90",
               "p99", "max", "id_dtype"]


def _cell(key, value) -> str:
    if value is None:
        return ""
    if key in ("bytes_per_token", "tokens_per_word"):
        return f"{value:.2f}"
    if key == "tokens_per_char":
        return f"{value:.3f}"
    if key == "tax":
        return f"{value:.2f}×"
    if key == "mean":
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


_HEADERS = {"name": "file", "bytes_per_token": "bytes/token", "tokens_per_char": "tokens/char",
            "tokens_per_word": "tokens/word", "tax": "tax vs first", "documents": "docs",
            "mean": "mean", "vocab_size": "vocab"}


def format_markdown(rows, docs="paragraphs") -> str:
    """Markdown tables: cost per file and document lengths (at the largest vocabulary), and
    bytes/token and tokens/char per vocabulary size when there are several."""
    if not rows:
        return "(no files)"
    sizes = sorted({r["vocab_size"] for r in rows})
    top = [r for r in rows if r["vocab_size"] == sizes[-1]]
    out = [f"Cost per file (vocab_size {sizes[-1]:,}; ids fit in {top[0]['id_dtype']}):", ""]
    table = [[_HEADERS.get(c, c) for c in COST_COLUMNS]]
    table += [[_cell(c, r[c]) for c in COST_COLUMNS] for r in top]
    out.append(markdown_table(table, align="l" + "r" * (len(COST_COLUMNS) - 1)))
    unit = {"paragraphs": "paragraph", "lines": "line", "file": "file"}.get(docs, docs)
    out += ["", f"Document lengths in tokens (one document per {unit}):", ""]
    table = [[_HEADERS.get(c, c) for c in LENGTH_COLUMNS]]
    table += [[_cell(c, r[c]) for c in LENGTH_COLUMNS] for r in top]
    out.append(markdown_table(table, align="l" + "r" * (len(LENGTH_COLUMNS) - 1)))
    if len(sizes) > 1:
        names = list(dict.fromkeys(r["name"] for r in rows))
        merges = {r["vocab_size"]: r.get("merges") for r in rows}
        for key, title in (("bytes_per_token", "Bytes per token"),
                           ("tokens_per_char", "Tokens per character")):
            out += ["", f"{title} by vocabulary size (prefixes of one merge list):", ""]
            table = [["file"] + [f"{s:,}" for s in sizes]]
            by = {(r["name"], r["vocab_size"]): r[key] for r in rows}
            table += [[n] + [_cell(key, by.get((n, s))) for s in sizes] for n in names]
            if key == "bytes_per_token":
                table.insert(1, ["(merges)"] + [f"{merges[s]:,}" if merges[s] is not None
                                                else "" for s in sizes])
            out.append(markdown_table(table, align="l" + "r" * len(sizes)))
    return "\n".join(out)


def format_rows(rows, fmt="markdown", docs="paragraphs") -> str:
    """``rows`` as ``markdown`` tables, ``csv`` (one line per file and vocab size) or ``json``."""
    if fmt == "markdown":
        return format_markdown(rows, docs)
    columns = ALL_COLUMNS + (["merges"] if any("merges" in r for r in rows) else [])
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({c: r.get(c) for c in columns})
        return buf.getvalue().rstrip("\n")
    if fmt == "json":
        return json.dumps({"documents_are": docs, "rows": [{c: r.get(c) for c in columns}
                                                            for r in rows]}, indent=2)
    raise ValueError(f"format must be markdown, csv or json, not {fmt!r}")
