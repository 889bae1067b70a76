"""``fastbpe encode`` without ``-o`` and ``fastbpe decode``: ids as lines, for the shell.

``encode`` prints one line of space-separated ids per document; ``decode`` reads such lines
(one document each, a blank line an empty document) and writes each document's bytes,
then a newline unless the document already ends with one. So
``printf 'hello world\\n' | fastbpe encode --model M | fastbpe decode --model M`` gives
back ``hello world\\n``, and ``fastbpe encode --model M a b | fastbpe decode --model M``
gives ``a\\nb\\n``.

Where encode's documents come from (``encode_sources``)
    An argument naming an existing file (or folder: walked) is read: ``.jsonl`` and
    Parquet/Arrow by ``--column``, one document per row; any other file as UTF-8 text
    (decompressed, BOM honoured, the invalid-UTF-8 policy), cut by ``--docs``; a named
    pipe (``<(zcat x.gz)``) is read as a stream, as standard input is. ``-`` or no
    argument at all reads standard input as text. Any other argument is a document; but an
    argument that looks like a path (no whitespace, and a path separator or a corpus
    suffix such as ``.txt``) and does not exist is an error, never encoded as text
    (``--text`` forces text).
"""

from __future__ import annotations

import os
import stat
import sys

import numpy as np

from .errors import CorpusReadError, TokenIdTypeError, UnknownTokenError
from .io.input_files import (ARROW_SUFFIXES, COMPRESSION_SUFFIXES, JSONL_SUFFIXES,
                             PARQUET_SUFFIXES, TEXT_SUFFIXES, expand_paths, file_kind)

#: How a text input is cut into documents (``--docs``).
DOC_UNITS = ("file", "lines", "paragraphs")
#: Bytes of text gathered into one encoder call when a text input is read by lines.
BATCH_BYTES = 8 << 20
_CORPUS_SUFFIXES = (TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES + ARROW_SUFFIXES
                    + tuple(COMPRESSION_SUFFIXES))


def looks_like_path(arg: str) -> bool:
    """No whitespace, and a path separator or a known corpus suffix (``.txt``, ``.gz``...)."""
    if not arg or any(ch.isspace() for ch in arg):
        return False
    if os.sep in arg or (os.altsep and os.altsep in arg):
        return True
    return arg.lower().endswith(_CORPUS_SUFFIXES)


def _is_pipe(path: str) -> bool:
    """A FIFO or pipe (``<(cmd)``, ``/dev/stdin`` on a pipe): read as a stream, like stdin.
    The corpus readers refuse them (they could block); here the user named one to read."""
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def encode_sources(inputs, texts):
    """``[(kind, value)]`` for encode's arguments: ``("stdin", None)``, ``("file", path)``,
    ``("pipe", path)`` or ``("text", str)``, in order (``--text`` documents after the arguments). A path-like
    argument that does not exist raises ``CorpusReadError`` before anything is encoded."""
    sources = []
    for arg in inputs:
        if arg == "-":
            sources.append(("stdin", None))
        elif _is_pipe(arg):  # process substitution, <(zcat x.gz): read as it is written
            sources.append(("pipe", arg))
        elif os.path.lexists(arg):  # a file, or a folder walked (hidden names skipped)
            sources += [("file", f) for f in expand_paths([arg])]
        elif looks_like_path(arg):
            raise CorpusReadError(f"no such file: {arg}; to encode this string as text, "
                                  f"pass --text {arg}")
        else:
            sources.append(("text", arg))
    sources += [("text", t) for t in texts or ()]
    if not sources:
        sources.append(("stdin", None))
    return sources


class IdWriter:
    """Writes the ids of documents as lines to a binary stream, counting what it wrote."""

    def __init__(self, out):
        self.out = out
        self.documents = 0
        self.null_rows = 0

    def write_flat(self, ids, offsets, valid=None) -> None:
        """One line per row of a flat batch (``encode_batch_flat``'s arrays); a null row
        (``valid`` False) is an empty line, counted."""
        strs = ids.astype(np.int64).astype(str).tolist() if len(ids) else []
        bounds = offsets.tolist()
        lines = [" ".join(strs[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        if valid is not None:
            self.null_rows += int(len(valid) - np.count_nonzero(valid))
        self.documents += len(lines)
        if lines:
            self.out.write(("\n".join(lines) + "\n").encode("ascii"))


def _special_kwargs(special: str) -> dict:
    """``--special error|allow|text`` as the Tokenizer's keyword arguments."""
    return {"allowed_special": "all" if special == "allow" else (),
            "disallowed_special": () if special == "text" else "all"}


def _stream_raw_blocks(path=None):
    """The bytes of standard input (or of the pipe ``path``) in blocks as they arrive."""
    if path is not None:
        with open(path, "rb") as stream:
            yield from _read_blocks(stream)
        return
    if sys.stdin is None:
        return
    if sys.stdin.isatty():
        print("fastbpe: reading the text to encode from standard input (end it with Ctrl-D)",
              file=sys.stderr)
    yield from _read_blocks(sys.stdin.buffer)


def _read_blocks(stream):
    read = getattr(stream, "read1", stream.read)
    while True:
        block = read(1 << 20)
        if not block:
            return
        yield block


def _clean_blocks(raw_blocks, name: str, max_invalid_utf8: float):
    """UTF-8 blocks cut after newlines (never inside a character), each invalid sequence
    replaced by U+FFFD and counted by the invalid-UTF-8 policy of ``name``."""
    from .io.read_stats import ReadStats
    from .io.utf8_policy import Utf8Policy

    policy = Utf8Policy(name, max_invalid_utf8, ReadStats())
    offset, pending = 0, []
    for block in raw_blocks:
        end = block.rfind(b"\n") + 1
        if not end:
            pending.append(block)
            continue
        data = b"".join(pending) + block[:end]
        pending = [block[end:]]
        yield policy.clean(data, offset)
        policy.check()
        offset += len(data)
    tail = b"".join(pending)
    if tail:
        yield policy.clean(tail, offset)
    policy.check(final=True)


def _text_blocks(kind: str, path, max_invalid_utf8: float):
    """The cleaned UTF-8 blocks of standard input or of a text file (decompressed, BOM)."""
    if kind in ("stdin", "pipe"):
        return _clean_blocks(_stream_raw_blocks(path), path or "<stdin>", max_invalid_utf8)
    from .io.file_bytes import text_blocks
    from .io.read_stats import ReadStats
    from .io.utf8_policy import Utf8Policy

    # The reader's own policy only sniffs for NUL bytes and counts UTF-16 units here;
    # ours judges the share over the whole file.
    sniff = Utf8Policy(path, max_invalid_utf8, ReadStats())
    return _clean_blocks(text_blocks(path, 1 << 20, sniff.stats, sniff), path, max_invalid_utf8)


def _text_documents(blocks, docs: str):
    """Batches (lists of str) of the documents of a text's UTF-8 ``blocks``, cut by ``docs``.

    ``file``: the whole text is one document. ``lines``: each line is one (without its
    "\\n"; an empty line is an empty document), batched by BATCH_BYTES as read.
    ``paragraphs``: blank-line-separated, as ``fastbpe stats --docs paragraphs``."""
    if docs == "lines":
        pending, batch, size = b"", [], 0
        for block in blocks:
            data = pending + block
            end = data.rfind(b"\n")
            if end < 0:
                pending = data
                continue
            pending = data[end + 1:]
            lines = data[:end].decode("utf-8").split("\n")
            batch += lines
            size += end
            if size >= BATCH_BYTES:
                yield batch
                batch, size = [], 0
        if pending:
            batch.append(pending.decode("utf-8"))
        if batch:
            yield batch
        return
    text = b"".join(blocks).decode("utf-8")
    if docs == "file":
        yield [text]
        return
    from .stats import split_documents

    yield split_documents(text, "paragraphs")


def _encode_table(tok, path, column, writer, kwargs, num_threads):
    """Rows of a Parquet/Arrow/JSONL file, a slice of ~8 MB of text per encoder call."""
    from .io.encode_inputs import open_input, text_slices

    _, batches = open_input(path, [column])
    for row0, table in text_slices(batches, column, path):
        texts = table.column(column).combine_chunks()
        ids, offsets, valid = tok.encode_batch_flat(texts, num_threads, row_base=row0, **kwargs)
        writer.write_flat(ids, offsets, valid)


def _group_texts(sources):
    """``sources`` with each run of ``("text", str)`` joined into one ``("texts", [str])``."""
    grouped = []
    for kind, value in sources:
        if kind == "text" and grouped and grouped[-1][0] == "texts":
            grouped[-1][1].append(value)
        else:
            grouped.append(("texts", [value]) if kind == "text" else (kind, value))
    return grouped


def encode_to_lines(tok, args, sources=None, out=None) -> dict:
    """``fastbpe encode`` without ``-o``: see the module docstring. Returns counts."""
    out = out if out is not None else sys.stdout.buffer
    if sources is None:
        sources = encode_sources(args.inputs, args.text)
    kwargs = _special_kwargs(args.special)
    threads = args.threads
    limit = 0.01 if args.max_invalid_utf8 is None else args.max_invalid_utf8
    writer = IdWriter(out)
    for kind, value in _group_texts(sources):
        if kind == "file" and file_kind(value) != "text":
            _encode_table(tok, value, args.column, writer, kwargs, threads)
            continue
        if kind == "texts":  # consecutive text arguments: one encoder call
            batches = [value]
        else:
            batches = _text_documents(_text_blocks(kind, value, limit), args.docs)
        for batch in batches:
            ids, offsets, _ = tok.encode_batch_flat(batch, threads, **kwargs)
            writer.write_flat(ids, offsets)
    out.flush()
    if writer.null_rows and not args.quiet:
        print(f"fastbpe: note: {writer.null_rows:,} null rows (no text in column "
              f"{args.column!r}) printed as empty lines", file=sys.stderr)
    return {"documents": writer.documents, "null_rows": writer.null_rows}


def _line_ids(line: str, number: int) -> list[int]:
    """The ids of one line of ``fastbpe encode`` output; a bad entry names line and place."""
    fields = line.split()
    try:
        return [int(f) for f in fields]
    except ValueError:
        for k, f in enumerate(fields):
            try:
                int(f)
            except ValueError:
                raise TokenIdTypeError(f, k, 0, reason=f"on line {number} is not an integer "
                                       "(decode reads lines of whitespace-separated ids)") from None
        raise


def _decode_line(tok, ids, number) -> bytes:
    try:
        return tok.decode_bytes(ids)
    except UnknownTokenError as exc:
        position = getattr(exc, "position", None)
        bad = ids[position] if isinstance(position, int) and 0 <= position < len(ids) else None
        raise UnknownTokenError(bad, position, tok.vocab_size,
                                reason=f"on line {number} is not in the vocabulary (valid ids "
                                f"are 0..{tok.vocab_size - 1})") from None


def _write_document(out, data: bytes) -> None:
    out.write(data if data.endswith(b"\n") else data + b"\n")


def decode_lines(tok, args, out=None) -> int:
    """``fastbpe decode``: the ids given as arguments (one document), else standard input,
    one document per line. Writes each document's bytes and a newline unless it ends in one."""
    out = out if out is not None else sys.stdout.buffer
    if args.ids:
        _write_document(out, _decode_line(tok, _line_ids(" ".join(args.ids), 1), 1))
        out.flush()
        return 1
    n = 0
    stream = sys.stdin.buffer
    for n, raw in enumerate(stream, 1):
        try:
            line = raw.decode("ascii")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", "replace")
        _write_document(out, _decode_line(tok, _line_ids(line, n), n))
    out.flush()
    return n
