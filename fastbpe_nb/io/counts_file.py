"""Word-count tables as an artefact: one expensive counting pass serves many trainings.

An Arrow IPC file with two columns, ``word`` (large_binary: the pre-token's UTF-8 bytes) and
``count`` (int64), and schema metadata recording how the words were made (pattern, special
tokens, format version) and the rows' order: first occurrence in the corpus (``fastbpe
count``), or sorted by the words' bytes (``merge_counts`` of several files, e.g. shards
counted on different machines). Training from it reuses that pattern, so the model file
describes the tokenizer that the counts imply.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import ModelFormatError
from ..validation import check_min_count
from .atomic import atomic_write

COUNTS_FORMAT = "fastbpe_nb.counts"
COUNTS_VERSION = 1


def _word_array(word_bytes: np.ndarray, offsets: np.ndarray):
    """The words (``word_bytes`` cut at ``offsets``) as a ``large_binary`` array, no copy."""
    import pyarrow as pa

    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1,
        [None, pa.py_buffer(np.ascontiguousarray(offsets, np.int64)),
         pa.py_buffer(np.ascontiguousarray(word_bytes, np.uint8))])


def _word_parts(words):
    """``(data uint8, offsets int64 from 0, start)`` of a ``large_binary`` array's rows:
    the data buffer (its rows begin at byte ``start``) and the offsets rebased to 0,
    honouring the array's slice offset. Nothing is checked here."""
    buffers = words.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[words.offset:words.offset + len(words) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    start = int(offsets[0]) if len(offsets) else 0
    return data, offsets - start, start


def save_counts(path, word_bytes: np.ndarray, offsets: np.ndarray, counts: np.ndarray,
                pattern, special_tokens=(), extra=None) -> None:
    """Write a counts file atomically."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    words = _word_array(word_bytes, offsets)
    meta = {"format": COUNTS_FORMAT, "version": COUNTS_VERSION, "pattern": pattern,
            "special_tokens": list(special_tokens), **(extra or {})}
    schema = pa.schema([("word", pa.large_binary()), ("count", pa.int64())],
                       metadata={"fastbpe_nb": json.dumps(meta)})
    table = pa.Table.from_arrays([words, pa.array(counts, pa.int64())], schema=schema)
    with atomic_write(path) as f:
        with ipc.new_file(f, schema) as writer:
            writer.write_table(table)


def is_counts_file(path) -> bool:
    """True when ``path`` is an Arrow IPC file written by ``save_counts``."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        with pa.OSFile(os.fspath(path), "rb") as source:  # not mmap: see load_counts
            meta = ipc.open_file(source).schema.metadata or {}
    except Exception:
        return False
    return b"fastbpe_nb" in meta


def load_counts(path):
    """Read a counts file: ``(word_bytes uint8, offsets int64, counts int64, meta dict)``."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    path = os.fspath(path)
    try:
        # Read into memory, not memory-mapped: a file truncated while it is read gives
        # an error here, not a SIGBUS later when training touches a vanished page.
        with pa.OSFile(path, "rb") as source:
            table = ipc.open_file(source).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ModelFormatError(f"not a readable Arrow IPC counts file ({exc})", path) from None
    raw_meta = (table.schema.metadata or {}).get(b"fastbpe_nb")
    try:
        meta = json.loads(raw_meta) if raw_meta else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != COUNTS_FORMAT:
        raise ModelFormatError("not a fastbpe_nb counts file (schema metadata missing)", path)
    if meta.get("version") != COUNTS_VERSION:
        raise ModelFormatError(f"unsupported counts version {meta.get('version')!r}", path, "version")
    if table.schema.names != ["word", "count"] or table.schema.field("word").type != pa.large_binary() \
            or table.schema.field("count").type != pa.int64():
        raise ModelFormatError(f"expected columns word: large_binary, count: int64, got "
                               f"{table.schema}", path, "schema")
    if table.column("word").null_count or table.column("count").null_count:
        raise ModelFormatError("null words or counts", path, "rows")
    words = table.column("word").combine_chunks()
    counts = table.column("count").combine_chunks().to_numpy().astype(np.int64)
    if len(counts) and counts.min() <= 0:
        row = int(np.argmin(counts))
        raise ModelFormatError(f"count {counts[row]} is not positive", path, f"row {row}")
    from ..errors import ArrowDataError
    from .arrow_text import check_offsets

    try:
        check_offsets(words, "column 'word'")  # before NumPy slices the buffers
    except ArrowDataError as exc:
        raise ModelFormatError(str(exc), path, "word") from None
    data, offsets, start = _word_parts(words)
    if len(offsets) and (offsets[-1] > len(data) - start or (np.diff(offsets) <= 0).any()):
        raise ModelFormatError("empty or malformed word entries", path, "word")
    data = data[start : start + (int(offsets[-1]) if len(offsets) else 0)]
    return data, offsets.astype(np.int64), counts, meta


#: ``meta["order"]`` of a counts file: the rows in first-occurrence order of one corpus
#: (``fastbpe count``; a file without the key is one of these), or sorted by the words'
#: bytes (a merge of several files, which has no corpus order: the ``first`` tie rule
#: cannot be used on it).
ORDER_FIRST, ORDER_BYTES = "first", "bytes"


def merge_counts(paths, min_count: int = 1):
    """Merge counts files exactly: ``(word_bytes, offsets, counts, meta, report)``.

    Every word's counts are summed in int64 over all files; the rows come out sorted by
    the words' bytes, so the result is the same whatever the order of ``paths`` (and the
    same as counting the concatenated corpora, up to row order). The files must have
    been counted with the same pattern and special tokens (ModelFormatError otherwise,
    naming the file). Words counted fewer than ``min_count`` times in total are pruned;
    ``report`` says how many words and occurrences were (and per file what was read).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("merge_counts needs at least one counts file")
    min_count = check_min_count(min_count)
    words, counts, first_meta, files = [], [], None, []
    for path in paths:
        data, offsets, cnt, meta = load_counts(path)
        key = {k: meta.get(k) for k in ("pattern", "special_tokens")}
        if first_meta is None:
            first_meta = dict(meta, **key)
        elif key != {k: first_meta.get(k) for k in key}:
            raise ModelFormatError(
                f"counted with pattern {key['pattern']!r} and special tokens "
                f"{key['special_tokens']}, but {paths[0]} with {first_meta.get('pattern')!r} and "
                f"{first_meta.get('special_tokens')}: counts of different pre-tokenizations do "
                "not add up", path, "metadata")
        words.append(_word_array(data, offsets))
        counts.append(cnt)
        files.append({"path": path, "words": int(len(cnt)), "occurrences": int(cnt.sum())})
    # Exactness: int64 sums cannot overflow while the total stays below 2**62.
    if sum(float(c.sum()) for c in counts) >= 2.0**62:
        raise ModelFormatError("the counts add up to 2**62 or more, beyond exact int64 sums",
                               paths[0], "count")
    all_words = pa.concat_arrays(words) if len(words) > 1 else words[0]
    all_counts = np.concatenate(counts)
    order = pc.sort_indices(all_words).to_numpy()
    sorted_words = all_words.take(pa.array(order))
    new = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        new[1:] = ~pc.equal(sorted_words[1:], sorted_words[:-1]).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(new)
    summed = np.add.reduceat(all_counts[order], starts) if len(starts) else all_counts[:0]
    keep = summed >= min_count
    data, out_offsets, start = _word_parts(sorted_words.take(pa.array(starts[keep])))
    if not len(out_offsets):
        out_offsets = np.zeros(1, np.int64)
    out_data = data[start:start + int(out_offsets[-1])]
    report = {"files": files, "unique_words": int(keep.sum()),
              "words_pruned": int((~keep).sum()), "occurrences_pruned": int(summed[~keep].sum()),
              "min_count": int(min_count)}
    meta = {k: v for k, v in first_meta.items() if k not in ("format", "version")}
    meta["order"] = ORDER_BYTES
    return out_data.copy(), out_offsets.astype(np.int64), summed[keep].astype(np.int64), meta, report


def merge_counts_files(paths, output, min_count: int = 1) -> dict:
    """Merge counts files (shards of a corpus, counted anywhere) into one, exactly: counts
    summed per word, rows sorted by the words' bytes (the same file whatever the order of
    ``paths``), words below ``min_count`` pruned; returns the report (what was read and
    pruned). ``fastbpe count --merge a.arrow b.arrow -o all.arrow``."""
    import time

    t0 = time.perf_counter()
    word_bytes, offsets, counts, meta, report = merge_counts(paths, min_count)
    extra = {k: v for k, v in meta.items() if k not in ("pattern", "special_tokens")}
    save_counts(output, word_bytes, offsets, counts, meta.get("pattern"),
                meta.get("special_tokens", ()), extra=extra)
    report.update(occurrences=int(counts.sum()), seconds=time.perf_counter() - t0)
    return report
