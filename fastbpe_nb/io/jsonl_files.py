"""JSON-lines corpus files: one JSON object per line, the text in one field.

``read_jsonl`` yields the text field as corpus batches (training, counting);
``jsonl_tables`` yields blocks of rows as Arrow tables (``encode_parquet``). Both read
one block of whole lines at a time and hold the text to the UTF-8 policy.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import CorpusReadError
from .file_bytes import text_blocks
from .read_stats import ReadStats
from .utf8_policy import DEFAULT_MAX_INVALID_UTF8, Utf8Policy


_JSON_KINDS = {dict: "an object", list: "an array", bool: "a boolean", int: "a number",
               float: "a number", str: "a string", type(None): "null"}


def _json_kind(value) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def jsonl_records(path: str, columns, stats: ReadStats, max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8,
                  block_bytes: int = 8 << 20):
    """Yield ``(first_row, {column: [values]})`` per block of whole lines of a JSONL file.

    ``columns[0]`` is the text column: its values are str or None (null or absent); any
    other type is an error naming the file and line, as is a line that is not a JSON
    object. Other columns are taken as parsed. Blank lines are not rows. Memory: one block
    of lines (a single line longer than a block is read whole). Raises ``CorpusReadError``
    when no row has the text field at all.
    """
    policy = Utf8Policy(path, max_invalid_utf8, stats)
    text_col = columns[0]
    state = {"line": 1, "row": 0, "offset": 0, "present": False, "first_keys": None}
    loads = json.loads

    newline = b"\n"

    def parse(raw: bytes):
        line0 = state["line"]
        base = state["offset"]
        text = policy.clean(raw, base, lambda i: (
            f"line {line0 + raw.count(newline, 0, i)} (byte offset {base + i:,})"))
        policy.check()
        state["offset"] += len(raw)
        lines = text.decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        values = {c: [] for c in columns}
        row0 = state["row"]
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            where = f"{path}: line {line0 + i}"
            try:
                obj = loads(line)
            except ValueError as exc:
                msg = getattr(exc, "msg", str(exc))
                col = getattr(exc, "colno", None)
                raise CorpusReadError(f"{where}: not valid JSON ({msg}"
                                      + (f" at column {col})" if col else ")")) from None
            if not isinstance(obj, dict):
                raise CorpusReadError(f"{where}: not a JSON object (it is {_json_kind(obj)})")
            if state["first_keys"] is None:
                state["first_keys"] = (line0 + i, list(obj)[:20])
            value = obj.get(text_col)
            if text_col in obj:
                state["present"] = True
            if value is not None and not isinstance(value, str):
                raise CorpusReadError(f"{where}: field {text_col!r} is {_json_kind(value)}, "
                                      "not a string")
            if value is not None:
                value = policy.clean_str(value, f"line {line0 + i} (a lone surrogate escape)")
            values[text_col].append(value)
            for c in columns[1:]:
                values[c].append(obj.get(c))
        state["line"] += text.count(b"\n")
        state["row"] += len(values[text_col])
        return row0, values

    pending = b""
    for block in text_blocks(path, block_bytes, stats, policy):
        buf = pending + block if pending else block
        end = buf.rfind(b"\n", max(0, len(buf) - len(block))) + 1
        if end == 0:
            pending = buf  # a line longer than the block: read on
            continue
        yield parse(buf[:end])
        pending = buf[end:]
    if pending:
        yield parse(pending)
    policy.check(final=True)
    if state["row"] and not state["present"]:
        line, keys = state["first_keys"]
        raise CorpusReadError(f"{path}: no row has a field {text_col!r} (the fields of line "
                              f"{line}: {keys})")


def read_jsonl(path: str, column: str, stats: ReadStats,
               max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8, block_bytes: int = 8 << 20):
    """Yield ``(data, doc_offsets)`` batches of the ``column`` field of a JSONL file."""
    for _, values in jsonl_records(path, [column], stats, max_invalid_utf8, block_bytes):
        texts = values[column]
        encoded = [t.encode("utf-8") for t in texts if t is not None]
        stats.null_rows += len(texts) - len(encoded)
        stats.documents += len(encoded)
        if not encoded:
            continue
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        yield np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def jsonl_tables(path: str, columns, max_invalid_utf8=DEFAULT_MAX_INVALID_UTF8,
                 block_bytes: int = 8 << 20):
    """Yield ``(first_row, pa.Table)`` of the ``columns`` of a JSONL file, block by block
    (``columns[0]``, the text column, typed ``string``; the others inferred, then held to
    the first block's types)."""
    import pyarrow as pa

    schema = None
    stats = ReadStats()
    for row0, values in jsonl_records(path, columns, stats, max_invalid_utf8, block_bytes):
        arrays = [pa.array(values[columns[0]], pa.string())]
        for c in columns[1:]:
            try:
                arrays.append(pa.array(values[c], None if schema is None else schema.field(c).type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise CorpusReadError(f"{path}: rows {row0}..{row0 + len(values[c]) - 1}: "
                                      f"field {c!r} cannot be one column ({exc})") from None
        tbl = pa.Table.from_arrays(arrays, names=list(columns))
        if schema is None or any(pa.types.is_null(f.type) for f in schema):
            schema = tbl.schema if schema is None else _widen(schema, tbl.schema)
        yield row0, tbl


def _widen(schema, new):
    """The first block's schema with its all-null columns typed by a later block."""
    import pyarrow as pa

    return pa.schema([n if pa.types.is_null(o.type) else o for o, n in zip(schema, new)])
