"""Streaming corpus readers: text, JSON lines, Parquet and Arrow IPC files in bounded memory.

``iter_batches`` is the front door: it lists the files of the paths (``input_files``) and
reads each with the reader of its kind (``text_files``, ``jsonl_files``, ``table_files``).
Every reader yields batches as flat arrays, ``(data uint8[n], doc_offsets int64[d+1])``,
ready for ``WordCounter.add_batch`` (one scanner call and one counting call per batch),
and records what it read and skipped in a ``ReadStats``. A file that cannot be read raises
``CorpusReadError`` naming it (and the row group, line or byte offset), unless
``on_bad_input="skip"``, which skips it and counts it.

Which files are read and as what: ``input_files``. Decompression and byte order marks:
``file_bytes``. Invalid UTF-8 (``max_invalid_utf8``, default 1 % of the bytes; above it a
file is refused): ``utf8_policy``. Where text files are cut into chunks, and the
``max_chunk_bytes`` bound on one chunk: ``text_files``.
"""

from __future__ import annotations

from ..errors import CorpusReadError
from .input_files import check_on_bad_input, expand_paths, file_kind
from .jsonl_files import read_jsonl
from .read_stats import ReadStats
from .table_files import read_arrow, read_parquet
from .text_files import read_text
from .utf8_policy import DEFAULT_MAX_INVALID_UTF8, check_max_invalid_utf8


def iter_batches(paths, column="text", stats: ReadStats | None = None, splittable=True,
                 on_bad_input="error", chunk_bytes=16 << 20,
                 max_invalid_utf8: float = DEFAULT_MAX_INVALID_UTF8,
                 max_chunk_bytes: int | None = None):
    """Yield ``(data, doc_offsets)`` batches over every file of ``paths``, in order."""
    check_on_bad_input(on_bad_input)
    check_max_invalid_utf8(max_invalid_utf8)
    stats = stats if stats is not None else ReadStats()
    for path in expand_paths(paths, on_bad_input, stats.ignored, stats.skipped_files):
        kind = file_kind(path)
        if kind == "parquet":
            gen = read_parquet(path, column, stats, max_invalid_utf8)
        elif kind == "arrow":
            gen = read_arrow(path, column, stats, max_invalid_utf8)
        elif kind == "jsonl":
            gen = read_jsonl(path, column, stats, max_invalid_utf8)
        else:
            gen = read_text(path, stats, chunk_bytes, splittable, max_invalid_utf8,
                            max_chunk_bytes)
        try:
            # Batches of a file that fails midway were already counted: with "skip" the
            # report says so (the file is listed as skipped after a partial read).
            for batch in gen:
                yield batch
        except CorpusReadError as exc:
            if on_bad_input == "error":
                raise
            stats.skipped_files.append((path, str(exc)))
            continue
        stats.files += 1
