"""The identity record of an ``encode_parquet`` output, and the resume check against it.

Every output records (Parquet: the schema metadata key ``fastbpe_nb.encode``; bin: the
marker) the SHA-256 of the model's canonical serialization (``model_to_json``), the
input's size, ``mtime_ns`` and row count, and the options that change the ids (column,
format, dtype, separator, special policy, kept columns). ``resume=True`` skips an input
whose output is complete and whose record matches; any other output is encoded again, and
the report's ``reencoded`` says which and why. An input that changes while it is read
raises ``CorpusReadError`` (its output is not written).
"""

from __future__ import annotations

import hashlib
import json
import os

from ..errors import CorpusReadError
from .atomic import folder_lock
from .encode_plan import Job
from .input_files import file_kind

#: Key of the identity record in an output Parquet file's schema metadata.
META_KEY = "fastbpe_nb.encode"
#: Version of the identity record (outputs without one were made by an older version).
LAYOUT_VERSION = 1


def model_sha256(tok) -> str:
    """SHA-256 of the model's canonical serialization (the model file text).

    Kept on the tokenizer after the first call (a Tokenizer does not change; ``with_roles``
    and ``pruned`` make new ones): serializing o200k costs 0.11 s, which every
    ``encode_parquet`` call paid before it read a row (10% of the 86 MB benchmark file's
    encode)."""
    digest = getattr(tok, "_model_sha256", None)
    if digest is None:
        from .model_file import model_to_json

        digest = hashlib.sha256(model_to_json(tok).encode("utf-8")).hexdigest()
        tok._model_sha256 = digest
    return digest


def input_identity(path: str) -> dict:
    """``{"size", "mtime_ns", "rows"}`` of an input file (rows from its metadata)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CorpusReadError(f"{path}: cannot open ({exc.strerror or exc})") from None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "rows": input_rows(path)}


def input_rows(path: str) -> int | None:
    """Rows of a Parquet/Arrow file from its metadata; None when it cannot be read."""
    import pyarrow.parquet as pq

    try:
        if file_kind(path) == "parquet":
            return pq.ParquetFile(path).metadata.num_rows
    except Exception:
        return None
    # Arrow IPC has no row count without reading every batch, and memory-mapping it to read
    # them is what let a file cut meanwhile end in SIGBUS: size and mtime identify it.
    return None


_COMPARED = ("layout", "format", "model_sha256", "column", "dtype", "separator_id", "special",
             "keep_columns", "bos_id", "shard_bytes", "val_fraction", "seed",
            "concat_tokens", "ids_column", "token_count_column")


def _mismatch(found: dict, expected: dict) -> str | None:
    """Why an output's record does not match this run (None: it matches)."""
    if not isinstance(found, dict) or found.get("layout") != LAYOUT_VERSION:
        return "no identity recorded (made by an older version)"
    if found.get("model_sha256") != expected["model_sha256"]:
        return "made with another model (model_sha256 differs)"
    for key in _COMPARED:
        if found.get(key) != expected.get(key):
            return f"{key} was {found.get(key)!r}, now {expected[key]!r}"
    got, want = found.get("input") or {}, expected["input"]
    for key in ("size", "mtime_ns", "rows"):
        if got.get(key) != want[key]:
            return f"the input changed ({key} was {got.get(key)!r}, now {want[key]!r})"
    return None


def output_complete(job: Job, fmt: str, expected: dict):
    """``(complete, reason)``: reason says why an existing output is not reusable (None
    when there is no output at all)."""
    import pyarrow.parquet as pq

    if fmt not in ("parquet", "bin"):
        from .token_formats import token_output_complete

        return token_output_complete(job.outs[0], expected, _mismatch)
    if fmt == "parquet":
        out = job.outs[0]
        if not os.path.exists(out):
            return False, None
        try:
            pf = pq.ParquetFile(out)
            raw = (pf.schema_arrow.metadata or {}).get(META_KEY.encode())
            found = json.loads(raw) if raw is not None else None
            rows = pf.metadata.num_rows
        except Exception as exc:
            return False, f"unreadable output ({exc})"
        reason = _mismatch(found, expected)
        if reason is None and rows != expected["input"]["rows"]:
            reason = f"the output has {rows} rows, the input {expected['input']['rows']}"
        return reason is None, reason
    bin_path, idx_path, marker = job.outs
    with folder_lock(os.path.dirname(os.path.abspath(bin_path)), exclusive=False):
        if not os.path.exists(marker):
            if os.path.exists(bin_path) or os.path.exists(idx_path):
                return False, f"incomplete (no marker {os.path.basename(marker)})"
            return False, None
        try:
            with open(marker, encoding="utf-8") as f:
                found = json.load(f)
            sizes = (os.path.getsize(bin_path), os.path.getsize(idx_path))
        except (OSError, ValueError) as exc:
            return False, f"incomplete ({exc})"
        reason = _mismatch(found, expected)
        if reason is None and sizes != (found.get("bin_bytes"), found.get("idx_bytes")):
            reason = (f"incomplete (.bin/.idx.npy are {sizes[0]}/{sizes[1]} bytes, the marker "
                      f"says {found.get('bin_bytes')}/{found.get('idx_bytes')})")
        return reason is None, reason


def check_unchanged(path, record, rows) -> None:
    """An input rewritten while it was read gives an output of neither version: refuse."""
    try:
        st = os.stat(path)
        now = (st.st_size, st.st_mtime_ns)
    except OSError as exc:
        raise CorpusReadError(f"{path}: vanished while being encoded ({exc.strerror})") from None
    ident = record["input"]
    if now != (ident["size"], ident["mtime_ns"]) or (ident["rows"] is not None
                                                     and rows != ident["rows"]):
        raise CorpusReadError(f"{path}: changed while being encoded (size, mtime or row count); "
                              "its output was not written")
    ident["rows"] = rows
