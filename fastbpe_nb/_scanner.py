"""Python front end of the Numba pre-tokenizer (``fastbpe_nb.kernels.scan``).

Importing this module compiles nothing and does not decode the Unicode
table: both happen on the first call.
"""

from __future__ import annotations

import numpy as np

# Must agree with PATTERN_* in fastbpe_nb.kernels.scan; the pattern strings whose
# ``regex.findall`` boundaries the kernel reproduces are pretokenize.NAMED_PATTERNS and,
# under the scanner's name "superbpe" (no model file names it: they store the regex),
# pretokenize.SUPERBPE_PATTERN (``pretokenize.scanner_name`` maps a pattern to its name
# here; pretokenize calls this module, which does not import it back).
PATTERN_IDS = {"gpt2": 0, "cl100k": 1, "o200k": 2, "superbpe": 3}
#: A single text longer than this (in UTF-8 bytes) is scanned this many bytes at a time
#: (``scan_prefix_offsets``): the per-piece arrays of one call stay small.
SEGMENT_BYTES = 2 << 20
#: Batches of at least this many bytes are scanned on several threads when asked to (a
#: parallel region costs ~10 us now that the OpenMP team is kept: 1,000 KJV lines, 58 KB,
#: scan in 0.25 ms instead of 0.45 on two threads).
PARALLEL_SCAN_BYTES = 1 << 14

_class_table = None
_scanner_tables = None
_scan_tail = None
_document_scan = None  # (call_kernel, scan_batch)


def class_table() -> tuple[np.ndarray, np.ndarray]:
    """The decoded ``(stage1, stage2)`` uint16 tables, loaded on first use."""
    global _class_table
    if _class_table is None:
        from fastbpe_nb.unicode_tables import load_class_table

        _class_table = tuple(read_only(table) for table in load_class_table())
    return _class_table


def scanner_tables() -> np.ndarray:
    """The scanner's ASCII class words and automata (``kernels.scan.scanner_tables``),
    built on first use and kept: every scanning kernel takes them, and building them
    (~10 us) was most of the cost of scanning a short text."""
    global _scanner_tables
    if _scanner_tables is None:
        from fastbpe_nb.kernels.scan import scanner_tables as build
        from fastbpe_nb.parallel import call_kernel

        _scanner_tables = read_only(call_kernel(build, *class_table()))
    return _scanner_tables


def scan_tail() -> tuple:
    """``(stage1, stage2, tables, WINDOW_BYTES, STREAM_BYTES)``: the arguments every
    scanning kernel takes after the pattern id, built on first use."""
    global _scan_tail
    if _scan_tail is None:
        from fastbpe_nb.kernels.scan import STREAM_BYTES, WINDOW_BYTES

        _scan_tail = (*class_table(), scanner_tables(), WINDOW_BYTES, STREAM_BYTES)
    return _scan_tail


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array``: what every kernel gets as its input bytes.

    Numba compiles one specialization per array "readonly" flag, so a kernel given the
    read-only bytes of a big file or an Arrow buffer and the writable bytes of a joined
    batch compiled twice (seconds each, the second inside a user's first big call)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _as_bytes_array(data) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return read_only(np.frombuffer(data, dtype=np.uint8))
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise ValueError(f"data must be 1-D, got shape {data.shape}")
        if data.dtype != np.uint8:
            raise TypeError(f"data must have dtype uint8, got {data.dtype}")
        return read_only(np.ascontiguousarray(data))
    raise TypeError(f"data must be bytes or a uint8 numpy array, got {type(data).__name__}")


def _as_doc_offsets(doc_offsets, n_bytes: int) -> np.ndarray:
    if doc_offsets is None:
        return read_only(np.array([0, n_bytes], dtype=np.int64))
    offsets = np.asarray(doc_offsets)
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        raise ValueError("doc_offsets must be a 1-D array with at least one entry")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"doc_offsets must have an integer dtype, got {offsets.dtype}")
    if offsets.dtype.kind == "u" and offsets.size and offsets.max() > np.iinfo(np.int64).max:
        raise ValueError("doc_offsets do not fit in int64")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    # The kernel does no bounds checks: reject anything that would read outside data.
    if offsets[0] < 0 or offsets[-1] > n_bytes:
        raise ValueError(f"doc_offsets must lie in [0, {n_bytes}]")
    if offsets.shape[0] > 1 and np.any(np.diff(offsets) < 0):
        raise ValueError("doc_offsets must be non-decreasing")
    return read_only(offsets)


def scan_offsets(data, doc_offsets, name: str, n_threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Pre-token byte boundaries of a batch of UTF-8 documents.

    Parameters
    ----------
    data : bytes or numpy.ndarray
        UTF-8 bytes of all documents, ``bytes``-like or ``uint8[n_bytes]``.
    doc_offsets : numpy.ndarray or None
        ``int[n_docs + 1]`` non-decreasing byte offsets of the documents in
        ``data`` (``None``: one document, all of ``data``).
    name : str
        ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or ``"superbpe"`` (``pretokenize.scanner_name``).
    n_threads : int
        Above 1, documents are scanned in parallel blocks (``scan_batch_parallel``; the
        same results; a forked child runs the serial kernel).

    Returns
    -------
    piece_offsets : numpy.ndarray
        ``int64[n_pieces + 1]``; piece ``k`` is ``data[piece_offsets[k]:piece_offsets[k + 1]]``.
    doc_piece_offsets : numpy.ndarray
        ``int64[n_docs + 1]``; document ``d`` owns pieces
        ``doc_piece_offsets[d]:doc_piece_offsets[d + 1]``.
    """
    try:
        pattern_id = PATTERN_IDS[name]
    except KeyError:
        raise ValueError(f"unknown pattern {name!r}; expected one of {sorted(PATTERN_IDS)}") from None
    data_array = _as_bytes_array(data)
    offsets = _as_doc_offsets(doc_offsets, data_array.shape[0])
    from fastbpe_nb.kernels.scan import scan_batch, scan_batch_parallel
    from fastbpe_nb.parallel import call_kernel, run_parallel

    args = (data_array, offsets, pattern_id, *scan_tail())
    n_docs = offsets.shape[0] - 1
    if n_threads > 1 and n_docs > 1 and offsets[-1] - offsets[0] >= PARALLEL_SCAN_BYTES:
        from fastbpe_nb.kernels.scan import SCAN_SLACK

        n_blocks = min(n_docs, 4 * n_threads)
        # The blocks' regions, joined in place (see scan_batch_parallel), in NumPy's memory.
        regions = np.empty(int(offsets[-1] - offsets[0]) + SCAN_SLACK * n_blocks,
                           dtype=np.int64)
        return run_parallel(scan_batch_parallel, n_threads, *args, n_blocks, regions,
                            serial=(scan_batch, args))
    return call_kernel(scan_batch, *args)


def scan_document(data: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``scan_offsets(data, None, name)`` for ``data`` that is already read-only ``uint8``
    (``np.frombuffer`` of ``bytes``): one text's scan without the batch's checks, which
    cost several times the scan of a short text."""
    global _document_scan
    if _document_scan is None:  # imports inside a call cost ~1 us each
        from fastbpe_nb.kernels.scan import scan_batch
        from fastbpe_nb.parallel import call_kernel

        _document_scan = (call_kernel, scan_batch)
    call, kernel = _document_scan
    return call(kernel, data, read_only(np.array([0, len(data)], dtype=np.int64)),
                PATTERN_IDS[name], *scan_tail())


def scan_prefix_offsets(data: np.ndarray, start: int, limit: int, name: str, buffer=None):
    """``(piece_offsets, next_start)``: the pieces of the one document ``data`` (uint8,
    C-contiguous) from piece start ``start`` until one ends at or after ``limit``; the
    same pieces as ``scan_offsets`` of the whole document (see ``kernels.scan.scan_prefix``).
    ``buffer``: a writable int64 array (``prefix_buffer``) the offsets may be written to,
    reused from call to call (the result is then a view of it)."""
    from fastbpe_nb.kernels.scan import scan_prefix
    from fastbpe_nb.parallel import call_kernel

    args = (data, int(start), len(data), int(limit), PATTERN_IDS[name], *scan_tail())
    if buffer is not None:
        if not (isinstance(buffer, np.ndarray) and buffer.dtype == np.int64
                and buffer.ndim == 1 and buffer.flags.c_contiguous and buffer.flags.writeable):
            raise ValueError("buffer must be a writable contiguous int64 array")
        args += (buffer,)  # the kernel checks its size
    offsets, next_start = call_kernel(scan_prefix, *args)
    return offsets, int(next_start)


def prefix_buffer(limit: int) -> np.ndarray:
    """A buffer that ``scan_prefix_offsets`` uses for any call whose ``limit - start`` is at
    most ``limit``."""
    from fastbpe_nb.kernels.scan import SCAN_SLACK, WINDOW_BYTES

    return np.empty(limit + WINDOW_BYTES + SCAN_SLACK, dtype=np.int64)


def split(text: str, name: str) -> list[str]:
    """Pre-tokenize one ``str`` (convenience for tests; same pieces as ``regex.findall``)."""
    encoded = text.encode("utf-8")
    piece_offsets, _ = scan_offsets(encoded, None, name)
    bounds = piece_offsets.tolist()
    return [encoded[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
