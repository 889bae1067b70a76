"""``fb.load(path)``: any tokenizer file or folder fastbpe_nb reads, recognised by content.

What is recognised (the file's bytes decide; a name only breaks a tie):

* our model file (``Tokenizer.save``): JSON with ``"format": "fastbpe_nb"``;
* a Hugging Face ``tokenizer.json`` (JSON with a ``"model"`` object) or a GPT-2
  ``vocab.json`` (JSON ``{token: id}``, its ``merges.txt`` beside it), and a ``merges.txt``
  (``#version`` or ``left right`` lines; its ``vocab.json`` beside it): ``fb.from_huggingface``,
  roles from the ``tokenizer_config.json`` beside;
* a ``.tiktoken`` ranks file (``base64 rank`` lines), gzipped or not: ``fb.from_tiktoken``.
  The file does not record its pre-tokenization pattern: pass ``pattern=``, or it must be one
  of OpenAI's published files (recognised by its SHA-256, as tiktoken checks them), which
  load with their pattern and special tokens;
* a SentencePiece ``.model`` (a protobuf ``ModelProto``): ``fb.from_sentencepiece``;
* a folder: a ``save_pretrained`` one or any holding ``tokenizer.json``
  (``Tokenizer.from_pretrained``), ``vocab.json`` + ``merges.txt``, ``tokenizer.model``
  (SentencePiece) or ``fastbpe_model.json``.

Anything else is a ModelFormatError naming the file, what it looks like, and every format
tried with its loader.
"""

from __future__ import annotations

import binascii
import base64
import hashlib
import json
import os

from .errors import ModelFormatError
from .io.model_file import read_model
from .io.tiktoken_format import read_ranks_bytes
from .loaders import build, from_huggingface, from_tiktoken
from .sentencepiece_style import from_sentencepiece
from .tokenizer import Tokenizer

__all__ = ["load", "OPENAI_RANKS"]

_CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
                    "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                    "<|endofprompt|>": 100276}

#: SHA-256 of OpenAI's published ranks files (tiktoken_ext.openai_public's expected_hash)
#: -> (encoding name, our pattern, special tokens).
OPENAI_RANKS = {
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930":
        ("r50k_base", "gpt2", {"<|endoftext|>": 50256}),
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069":
        ("p50k_base", "gpt2", {"<|endoftext|>": 50256}),
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7":
        ("cl100k_base", "cl100k", _CL100K_SPECIALS),
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d":
        ("o200k_base", "o200k", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}

_TRIED = ("tried: our model file (JSON with \"format\": \"fastbpe_nb\"; fb.Tokenizer.save), "
          "a Hugging Face tokenizer.json or GPT-2 vocab.json (fb.from_huggingface), a GPT-2 "
          "merges.txt (with its vocab.json beside it), a .tiktoken ranks file, gzipped or not "
          "(fb.from_tiktoken(path, pattern=...)), a SentencePiece .model (fb.from_sentencepiece)")

#: Files a folder is searched for, in this order.
FOLDER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "fastbpe_model.json")


def load(path, *, pattern=None, special_tokens=None) -> Tokenizer:
    """Load any tokenizer file or folder fastbpe_nb reads (see the module docstring).

    ``pattern`` and ``special_tokens`` are for ``.tiktoken`` files only (as in
    ``fb.from_tiktoken``); OpenAI's own files need neither.

    Raises ModelFormatError naming the file (and the entry) when it is malformed, or when it
    is none of the formats (listing them and their loaders); OSError when it cannot be read.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _load_folder(path, pattern, special_tokens)
    with open(path, "rb") as f:
        head = f.read(4096)
    kind = sniff(head, path)
    if kind != "tiktoken" and (pattern is not None or special_tokens is not None):
        raise ModelFormatError(f"pattern= and special_tokens= are for .tiktoken ranks files; "
                               f"this file is {_NAMES[kind]}", path)
    if kind == "ours":
        return build(read_model(path), model_file=True)  # the reader names any problem
    if kind == "huggingface":
        return from_huggingface(path)
    if kind == "merges":
        vocab = os.path.join(os.path.dirname(path), "vocab.json")
        if not os.path.isfile(vocab):
            raise ModelFormatError("a GPT-2 merges.txt needs its vocab.json beside it (or load "
                                   "them with fb.from_huggingface(vocab, merges=path))", path)
        return from_huggingface(vocab, merges=path)
    if kind == "tiktoken":
        return _load_ranks(path, pattern, special_tokens)
    if kind == "sentencepiece":
        return from_sentencepiece(path)
    raise ModelFormatError(f"not a tokenizer file fastbpe_nb recognises ({kind}); {_TRIED}",
                           path)


_NAMES = {"ours": "our model file", "huggingface": "a Hugging Face JSON file",
          "merges": "a GPT-2 merges.txt", "sentencepiece": "a SentencePiece .model"}


def sniff(head: bytes, path: str = "") -> str:
    """What the file starting with ``head`` is: ``"ours"``, ``"huggingface"``, ``"merges"``,
    ``"tiktoken"``, ``"sentencepiece"``, or a description of what it is not."""
    if not head:
        return "the file is empty"
    if head[:2] == b"\x1f\x8b":  # gzip: only ranks files are shipped gzipped
        return "tiktoken"
    if head.lstrip()[:1] in (b"{", b"["):  # JSON (an array: our reader names the error)
        return "ours" if _is_ours(path) else "huggingface"
    if _looks_like_model_proto(head) or path.endswith(".model"):
        return "sentencepiece"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start}) and not a SentencePiece ModelProto"
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > 1 and not text.endswith("\n"):
        lines.pop()  # the head may end inside a line: check whole lines only
    if lines and all(_is_rank_line(line) for line in lines[:20]):
        return "tiktoken"
    if lines and (lines[0].startswith("#version") or all(map(_is_merge_line, lines[:20]))):
        return "merges"
    return f"its first line is {lines[0][:60]!r}" if lines else "it holds only whitespace"


def _looks_like_model_proto(head: bytes) -> bool:
    """A SentencePiece ``ModelProto`` starts with its first piece: field 1 (``0x0a``), a
    varint length, then the piece's own field 1 (``0x0a``)."""
    if head[:1] != b"\x0a":
        return False
    pos = 1
    while pos < len(head) and head[pos] & 0x80 and pos < 6:
        pos += 1
    return head[pos + 1:pos + 2] == b"\x0a"


def _is_rank_line(line: str) -> bool:
    fields = line.split()
    if len(fields) != 2 or not fields[1].isdigit():
        return False
    try:
        return bool(base64.b64decode(fields[0], validate=True))
    except (binascii.Error, ValueError):
        return False


def _is_merge_line(line: str) -> bool:
    parts = line.rstrip("\r").split(" ")
    return len(parts) == 2 and all(parts)


def _is_ours(path) -> bool:
    """Whether a JSON file is our model document (its "format" key), without parsing it all
    twice: our writer puts ``"format"`` first."""
    with open(path, "rb") as f:
        head = f.read(256).decode("utf-8", "replace")
    if '"format"' in head:
        return True
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except (ValueError, RecursionError):
        return True  # let our reader name the JSON error
    return not (isinstance(doc, dict) and ("model" in doc or all(
        isinstance(v, int) for v in doc.values())))


def _load_ranks(path, pattern, special_tokens) -> Tokenizer:
    if pattern is None:
        known = OPENAI_RANKS.get(hashlib.sha256(read_ranks_bytes(path)).hexdigest())
        if known is None:
            raise ModelFormatError(
                "a .tiktoken ranks file does not record its pre-tokenization pattern and this "
                "is not one of OpenAI's published files (r50k_base, p50k_base, cl100k_base, "
                "o200k_base): load it with fb.load(path, pattern=...) or "
                "fb.from_tiktoken(path, pattern=...)", path)
        _, pattern, specials = known
        if special_tokens is None:
            special_tokens = specials
    return from_tiktoken(path, pattern, special_tokens)


def _load_folder(folder, pattern, special_tokens) -> Tokenizer:
    found = next((name for name in FOLDER_FILES if os.path.isfile(os.path.join(folder, name))),
                 None)
    if found is None:
        raise ModelFormatError(f"no tokenizer file in this folder (looked for "
                               f"{', '.join(FOLDER_FILES)}); {_TRIED}", folder)
    if found == "tokenizer.json":
        return Tokenizer.from_pretrained(folder)
    return load(os.path.join(folder, found), pattern=pattern, special_tokens=special_tokens)
