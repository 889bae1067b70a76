"""Our model file: one versioned JSON document.

::

    {
      "format": "fastbpe_nb",
      "version": 1,
      "base": "bytes",                 # or "chars"
      "pattern": "gpt2",               # a named pattern, a regex string, or null
      "end_of_word": null,             # char mode: the marker, one of "alphabet"
      "alphabet": null,                # char mode: base symbols by id, code-point order
      "tie_break": "ids",              # how the merges were trained (metadata)
      "normalization": null,
      "byte_order": null,              # byte mode: byte value of ids 0..255 (null: identity)
      "merge_mode": "pairs",           # "pairs" (merge rank) or "ranks" (tiktoken's rule)
      "roles": {"eos": "<|endoftext|>"},   # optional: special-token roles (bos, eos, pad,
                                           # unk) and chat_template; absent: none
      "special_tokens": [["<|endoftext|>", 50256]],   # [token, id]: any unused ids from
                                                     # the number of regular tokens on
      "merges": [
        [97, 97],
        ...
      ],
      "pruned": [300, 412]             # optional (vocabulary pruning): removed token ids,
    }                                  # numbered as the merges make them; then the special
                                       # tokens' ids above are the compact ones

A SentencePiece-style model is stored as version 2, ``"base": "pieces"``, with its
SentencePiece ``ModelProto`` (exactly the ``.model`` file's bytes) in base64 under
``"sentencepiece"``; byte- and char-level models stay version 1. Either version may hold
``"roles"``: version 1 only when a role or a chat template is set (files of tokenizers
without roles are byte for byte as before); version 2 always (``{}``: none), and a version-2
document without it (an older file) has the roles its ModelProto names.

The vocabulary is not stored: it is derived from the merges (``vocab[new] = vocab[a] +
vocab[b]``). Loading validates everything before any kernel sees it and raises
ModelFormatError naming the path and the entry. Writing is deterministic, so
``save -> load -> save`` gives identical bytes, and atomic.
"""

from __future__ import annotations

import base64
import binascii
import json
import os

import numpy as np

from ..errors import ModelFormatError
from .atomic import atomic_write

FORMAT_NAME = "fastbpe_nb"
FORMAT_VERSION = 2
_KEYS = ("format", "version", "base", "pattern", "end_of_word", "alphabet", "tie_break",
         "normalization", "byte_order", "merge_mode", "roles", "special_tokens", "merges",
         "superword", "pruned")
_PIECES_KEYS = ("format", "version", "base", "roles", "special_tokens", "sentencepiece")
_ROLE_KEYS = ("bos", "eos", "pad", "unk", "chat_template")
_TIE_RULES = ("ids", "hf", "first", "bytes")


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def model_to_json(tok) -> str:
    """The model file text of ``tok`` (deterministic)."""
    if tok.base == "pieces":
        from .sentencepiece_model import model_proto

        doc = {"format": FORMAT_NAME, "version": 2, "base": "pieces", "special_tokens": [],
               "sentencepiece": base64.b64encode(model_proto(tok)).decode("ascii")}
        doc = {**dict(list(doc.items())[:3]), "roles": tok.roles, **dict(list(doc.items())[3:])}
        return json.dumps(doc, indent=2) + "\n"
    specials = sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    lines = ["{"]
    header = {
        "format": FORMAT_NAME,
        "version": 1,
        "base": tok.base,
        "pattern": tok.pattern,
        "end_of_word": tok.end_of_word,
        "alphabet": tok.alphabet,
        "tie_break": tok.tie_break,
        "normalization": tok.normalization,
        "byte_order": tok.byte_order,
        "merge_mode": tok.merge_mode,
    }
    if tok.roles:
        header["roles"] = tok.roles
    superword = getattr(tok.model, "superword", None)  # BoundlessBPE: supermerge ranks
    if superword is not None:
        header["superword"] = np.flatnonzero(superword).tolist()
    if hasattr(tok.model, "pruned_ids"):  # vocabulary pruning: removed ids (unpruned numbering;
        header["pruned"] = tok.pruned_ids  # a pruning that removed none stays a pruned model)
    for key, value in header.items():
        lines.append(f"  {_dump(key)}: {_dump(value)},")
    lines.append('  "special_tokens": [' + ", ".join(_dump([t, i]) for t, i in specials) + "],")
    # A flat list of ints: a list per merge would make 10^5 small containers, each a
    # candidate for the garbage collector's passes (4x slower for cl100k).
    flat = tok.merges.ravel().tolist()
    if flat:
        pairs = iter(flat)
        lines.append('  "merges": [')
        lines.append(",\n".join(f"    [{a}, {b}]" for a, b in zip(pairs, pairs)))
        lines.append("  ]")
    else:
        lines.append('  "merges": []')
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_model(tok, path) -> None:
    """Write ``tok`` to ``path`` atomically."""
    data = model_to_json(tok).encode("utf-8")
    with atomic_write(path) as f:
        f.write(data)


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ModelFormatError(f"key {key!r} appears twice in one object", None, key)
        out[key] = value
    return out


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def parse_model(text_bytes: bytes, source=None) -> dict:
    """Validate a model document: the Tokenizer arguments it describes (a dict; a
    SentencePiece-style one is ``{"sentencepiece": <ModelProto bytes>}``)."""
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"not UTF-8 text (byte {exc.start})", source) from None
    if not text.strip():
        raise ModelFormatError("the file is empty", source)
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except ModelFormatError as exc:
        raise ModelFormatError(exc.reason, source, exc.entry) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = f"line {exc.lineno} column {exc.colno}: {exc.msg}" if isinstance(
            exc, json.JSONDecodeError) else "nesting too deep"
        raise ModelFormatError(f"truncated or corrupt JSON ({detail})", source) from None
    if not isinstance(doc, dict):
        raise ModelFormatError("the document is not a JSON object", source)
    if doc.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"format is {doc.get('format')!r}, expected {FORMAT_NAME!r}",
                               source, "format")
    version = doc.get("version")
    if not _is_int(version) or version < 1:
        raise ModelFormatError(f"version {version!r} is not a positive integer", source, "version")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"version {version} is newer than this fastbpe_nb reads ({FORMAT_VERSION}); upgrade",
            source, "version")
    if doc.get("base") == "pieces":
        return _parse_pieces(doc, source)
    if version != 1:
        raise ModelFormatError(f"version {version} is for SentencePiece-style models (base "
                               f"'pieces'); a {doc.get('base')!r} model is version 1", source,
                               "version")
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        raise ModelFormatError(f"unknown key {unknown[0]!r}", source, unknown[0])
    missing = [k for k in ("base", "merges") if k not in doc]
    if missing:
        raise ModelFormatError(f"missing key {missing[0]!r}", source, missing[0])

    base = doc["base"]
    if base not in ("bytes", "chars"):
        raise ModelFormatError(f"base must be 'bytes' or 'chars', got {base!r}", source, "base")
    pattern = doc.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise ModelFormatError("pattern must be a string or null", source, "pattern")
    tie_break = doc.get("tie_break")
    if tie_break is not None and tie_break not in _TIE_RULES:
        raise ModelFormatError(f"unknown tie_break {tie_break!r}", source, "tie_break")
    normalization = doc.get("normalization")
    if normalization not in (None, "NFC", "NFKC"):
        raise ModelFormatError(f"normalization {normalization!r} is not supported (null, NFC, "
                               "NFKC)", source, "normalization")
    merge_mode = doc.get("merge_mode", "pairs")
    if merge_mode not in ("pairs", "ranks"):
        raise ModelFormatError(f"unknown merge_mode {merge_mode!r}", source, "merge_mode")
    byte_order = doc.get("byte_order")
    if byte_order is not None:
        if base != "bytes" or not isinstance(byte_order, list) or len(byte_order) != 256 or any(
                not _is_int(b) for b in byte_order) or sorted(byte_order) != list(range(256)):
            raise ModelFormatError("byte_order must be null or list each byte value 0..255 once"
                                   " (byte mode only)", source, "byte_order")
    end_of_word = doc.get("end_of_word")
    alphabet = doc.get("alphabet")
    if base == "bytes":
        if alphabet is not None or end_of_word is not None:
            entry = "alphabet" if alphabet is not None else "end_of_word"
            raise ModelFormatError(f"{entry} must be null in byte mode", source, entry)
        n_base = 256
    else:
        if not isinstance(alphabet, list):
            raise ModelFormatError("char mode needs an alphabet list", source, "alphabet")
        for i, s in enumerate(alphabet):
            if not isinstance(s, str) or not s:
                raise ModelFormatError("not a non-empty string", source, f"alphabet[{i}]")
        if end_of_word is not None and not isinstance(end_of_word, str):
            raise ModelFormatError("end_of_word must be a string or null", source, "end_of_word")
        n_base = len(alphabet)

    merges = doc["merges"]
    if not isinstance(merges, list):
        raise ModelFormatError("merges must be a list of [left, right] id pairs", source, "merges")
    # Cheap structural checks first: the exact "defined before use" check happens while
    # deriving the vocabulary, but no id can exceed the number of merges before it.
    for k, m in enumerate(merges):
        if not (isinstance(m, list) and len(m) == 2 and _is_int(m[0]) and _is_int(m[1])):
            raise ModelFormatError(f"expected [left, right] integer ids, got {m!r:.60}",
                                   source, f"merges[{k}]")
        if not (0 <= m[0] < n_base + k and 0 <= m[1] < n_base + k):
            bad = m[0] if not 0 <= m[0] < n_base + k else m[1]
            raise ModelFormatError(
                f"merge {m} uses id {bad}, which is not defined before rank {k}",
                source, f"merges[{k}]")
    merges_arr = np.array(merges, dtype=np.int64).reshape(-1, 2)

    specials = doc.get("special_tokens", [])
    if not isinstance(specials, list):
        raise ModelFormatError("special_tokens must be a list of [token, id]", source,
                               "special_tokens")
    special_map = {}
    seen_ids = set()
    for k, entry in enumerate(specials):
        where = f"special_tokens[{k}]"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and _is_int(entry[1])):
            raise ModelFormatError(f"expected [token, id], got {entry!r:.60}", source, where)
        token, tid = entry
        if not token:
            raise ModelFormatError("empty special token", source, where)
        if token in special_map:
            raise ModelFormatError(f"duplicate special token {token!r}", source, where)
        if tid in seen_ids:
            raise ModelFormatError(f"duplicate special token id {tid}", source, where)
        special_map[token] = tid
        seen_ids.add(tid)

    # The ids are checked by the Tokenizer (ModelFormatError naming "special_tokens"): any
    # unused ids from the number of regular tokens on, gaps allowed (cl100k has gaps). So
    # are the roles' tokens (ModelFormatError naming "roles.<role>").
    return {"merges": merges_arr, "pattern": pattern, "special_tokens": special_map,
            "base": base, "alphabet": alphabet if base == "chars" else None,
            "end_of_word": end_of_word, "tie_break": tie_break, "byte_order": byte_order,
            "merge_mode": merge_mode, "normalization": normalization,
            "roles": _parse_roles(doc, source), "_source": source,
            **_parse_superword(doc, len(merges_arr), source), **_parse_pruned(doc, source)}


def _parse_superword(doc: dict, n_merges: int, source) -> dict:
    """BoundlessBPE's ``"superword"`` entry (checked in ``boundless.parse_superword``)."""
    if "superword" not in doc:
        return {}
    from ..boundless_model import parse_superword

    return {"superword": parse_superword(doc, n_merges, source)}


def _parse_pruned(doc: dict, source) -> dict:
    """``{"pruned": [ids]}`` of a pruned model ({} without the key). Ids are checked
    against the merges when the tokenizer is built (``pruning.check_removed``)."""
    if "pruned" not in doc:
        return {}
    pruned = doc["pruned"]
    if not isinstance(pruned, list) or not all(_is_int(t) for t in pruned):
        raise ModelFormatError("pruned must be a list of integer token ids", source, "pruned")
    return {"pruned": pruned}


def _parse_roles(doc: dict, source):
    """The ``"roles"`` object (None when absent): known keys, each a non-empty str or null."""
    roles = doc.get("roles")
    if roles is None:
        return None
    if not isinstance(roles, dict):
        raise ModelFormatError("roles must be an object {role: token}", source, "roles")
    for key, value in roles.items():
        if key not in _ROLE_KEYS:
            raise ModelFormatError(f"unknown role {key!r} (known: {', '.join(_ROLE_KEYS)})",
                                   source, f"roles.{key}")
        if value is not None and (not isinstance(value, str) or not value):
            raise ModelFormatError(f"expected a non-empty string or null, got {value!r:.60}",
                                   source, f"roles.{key}")
    return roles


def _parse_pieces(doc: dict, source) -> dict:
    """A version-2 SentencePiece-style document: its ModelProto bytes."""
    unknown = sorted(set(doc) - set(_PIECES_KEYS))
    if unknown:
        raise ModelFormatError(f"unknown key {unknown[0]!r}", source, unknown[0])
    if doc.get("special_tokens", []) != []:
        raise ModelFormatError("a SentencePiece-style model keeps its special pieces in its "
                               "ModelProto", source, "special_tokens")
    proto = doc.get("sentencepiece")
    if not isinstance(proto, str):
        raise ModelFormatError("missing the base64 ModelProto", source, "sentencepiece")
    try:
        data = base64.b64decode(proto, validate=True)
    except (binascii.Error, ValueError):
        raise ModelFormatError("not valid base64", source, "sentencepiece") from None
    return {"sentencepiece": data, "roles": _parse_roles(doc, source), "_source": source}


def read_model(path) -> dict:
    """The Tokenizer arguments of a model file written by ``Tokenizer.save``.

    Raises
    ------
    ModelFormatError
        The file is not a valid model (names the path and the entry).
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return parse_model(data, path)
