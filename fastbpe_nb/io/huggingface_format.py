"""Hugging Face ``tokenizers`` files: ``tokenizer.json``, and GPT-2's ``vocab.json`` + ``merges.txt``.

Writing is ``huggingface_export``. HF compiles the pattern with Oniguruma, not the ``regex`` module. The named patterns split the
same way in both, except for one construct: in Oniguruma's (Ruby) syntax ``{n,m}+`` is *not*
a possessive interval but a repeated one, ``(?:x{n,m})+``, so cl100k's ``\\p{N}{1,3}+`` would
take a whole digit run ("1234567") as one piece where ``regex``/tiktoken cut it in threes.
We therefore write cl100k with the plain greedy ``\\p{N}{1,3}``, which is equivalent in
``regex`` (the interval ends its alternative, so possessiveness changes nothing) and means
the same in Oniguruma. Loading maps that variant back to ``"cl100k"``; a file holding the
literal ``{1,3}+`` form is loaded with Oniguruma's meaning (``(?:\\p{N}{1,3})+``), since that is
what HF does with it.

Loading accepts exactly the byte-level BPE setups whose behaviour we reproduce and raises
ModelFormatError naming what is unsupported otherwise (never a silently different tokenizer).
"""

from __future__ import annotations

import json
import os
import re

from ..errors import ModelFormatError
from ..pretokenize import NAMED_PATTERNS
from ..byte_level import bytes_to_unicode

BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
_BYTE_STR = [BYTE_TO_CHAR[b] for b in range(256)]

#: A ``{n}+`` / ``{n,m}+`` quantifier: possessive in ``regex``, a repeated interval in Oniguruma.
POSSESSIVE_INTERVAL = re.compile(r"\{\d+(?:,\d*)?\}\+")
#: The same, after a simple atom (``\p{..}``, an escape, a bracket class, a plain character).
ATOM_INTERVAL_PLUS = re.compile(
    r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\()\[\]{}|])(\{\d+(?:,\d*)?\})\+")


def to_hf(token: bytes) -> str:
    return "".join([_BYTE_STR[b] for b in token])


def _unique_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    pass


def _read_json(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"not UTF-8 text (byte {exc.start})", path) from None
    if not text.strip():
        raise ModelFormatError("the file is empty", path)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise ModelFormatError(f"key {exc.args[0]!r} appears twice in one object", path,
                               str(exc.args[0])[:60]) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = (f"line {exc.lineno} column {exc.colno}: {exc.msg}"
                  if isinstance(exc, json.JSONDecodeError) else "nesting too deep")
        raise ModelFormatError(f"truncated or corrupt JSON ({detail})", path) from None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _unsupported(what: str, path, entry: str):
    return ModelFormatError(f"unsupported: {what} (fastbpe_nb reads byte-level BPE only; "
                            "loading it anyway would give a different tokenizer)", path, entry)


def _empty(value) -> bool:
    return value is None or value == "" or value is False


def pattern_from_hf_regex(source: str, path=None, entry="pre_tokenizer") -> str:
    """Our pattern for a Split regex string read by Oniguruma (a name when it is one)."""
    for name, string in NAMED_PATTERNS.items():
        if source == string.replace("{1,3}+", "{1,3}"):
            return name
    # Oniguruma: x{n,m}+ is (?:x{n,m})+ -- rewrite it so the regex module means the same.
    rewritten = ATOM_INTERVAL_PLUS.sub(r"(?:\1\2)+", source)
    if POSSESSIVE_INTERVAL.search(rewritten):
        raise _unsupported(
            f"the Split regex {source[:80]!r} has an interval '{{n,m}}+' after a group; "
            "Oniguruma reads it as a repeated interval and it cannot be translated safely",
            path, entry)
    if rewritten == NAMED_PATTERNS["gpt2"]:
        return "gpt2"
    if rewritten == NAMED_PATTERNS["o200k"]:
        return "o200k"
    from ..pretokenize import literal_regex

    return literal_regex(rewritten)


def _byte_level_ok(spec: dict, path, entry: str) -> bool:
    """Validate a ByteLevel pre-tokenizer; returns its use_regex."""
    if spec.get("add_prefix_space", True):
        raise _unsupported("ByteLevel add_prefix_space=true (a space is added before the text)",
                           path, entry)
    use_regex = spec.get("use_regex", True)
    if not isinstance(use_regex, bool):
        raise ModelFormatError(f"use_regex must be true or false, got {use_regex!r}", path, entry)
    return use_regex


def _parse_pre_tokenizer(spec, path):
    """The pattern of a byte-level pre-tokenizer setup."""
    entry = "pre_tokenizer"
    if spec is None:
        raise _unsupported("no pre_tokenizer (a byte-level BPE needs a ByteLevel pre-tokenizer)",
                           path, entry)
    if not isinstance(spec, dict):
        raise ModelFormatError("pre_tokenizer must be an object", path, entry)
    kind = spec.get("type")
    if kind == "ByteLevel":
        return "gpt2" if _byte_level_ok(spec, path, entry) else None
    if kind != "Sequence":
        raise _unsupported(f"pre_tokenizer type {kind!r} (expected ByteLevel, or a Sequence of "
                           "Split and ByteLevel)", path, entry)
    steps = spec.get("pretokenizers")
    if not isinstance(steps, list):
        raise ModelFormatError("Sequence without a 'pretokenizers' list", path, entry)
    kinds = [s.get("type") if isinstance(s, dict) else None for s in steps]
    if kinds == ["ByteLevel"]:
        return "gpt2" if _byte_level_ok(steps[0], path, f"{entry}.pretokenizers[0]") else None
    if kinds != ["Split", "ByteLevel"]:
        raise _unsupported(f"pre_tokenizer Sequence of {kinds} (expected [Split, ByteLevel] or "
                           "[ByteLevel])", path, entry)
    split, byte_level = steps
    if _byte_level_ok(byte_level, path, f"{entry}.pretokenizers[1]"):
        raise _unsupported("a Split followed by ByteLevel with use_regex=true (two regex "
                           "splits in a row)", path, f"{entry}.pretokenizers[1]")
    where = f"{entry}.pretokenizers[0]"
    if split.get("behavior") != "Isolated":
        raise _unsupported(f"Split behavior {split.get('behavior')!r} (only 'Isolated' keeps "
                           "every piece as fastbpe_nb does)", path, where)
    if split.get("invert", False):
        raise _unsupported("Split invert=true", path, where)
    pattern = split.get("pattern")
    if isinstance(pattern, dict) and set(pattern) == {"Regex"} and isinstance(pattern["Regex"], str):
        return pattern_from_hf_regex(pattern["Regex"], path, where)
    if isinstance(pattern, dict) and set(pattern) == {"String"} and isinstance(pattern["String"], str):
        if not pattern["String"]:
            raise _unsupported("Split on an empty string", path, where)
        import regex

        from ..pretokenize import literal_regex

        return literal_regex(regex.escape(pattern["String"]))
    raise ModelFormatError(f"Split pattern must be {{'Regex': str}} or {{'String': str}}, got "
                           f"{pattern!r:.80}", path, where)


#: HF normalizers we reproduce: Unicode normalization forms (our ``normalization=``).
_HF_NORMALIZATIONS = ("NFC", "NFKC")


def _parse_normalizer(normalizer, path):
    """Our ``normalization`` (None, "NFC", "NFKC") for a tokenizer.json ``normalizer``.

    Accepted: null, an empty Sequence, ``{"type": "NFC"}`` / ``{"type": "NFKC"}``, or a
    Sequence holding just one of those. Anything else changes the text in ways we do not
    reproduce (lowercasing, stripping, replacing, NFD, ...) and is refused by name.
    """
    spec = normalizer
    if isinstance(spec, dict) and spec.get("type") == "Sequence":
        steps = spec.get("normalizers")
        if steps == []:
            return None
        if isinstance(steps, list) and len(steps) == 1:
            spec = steps[0]
    if spec is None:
        return None
    kind = spec.get("type") if isinstance(spec, dict) else spec
    if isinstance(spec, dict) and kind in _HF_NORMALIZATIONS and set(spec) == {"type"}:
        return kind
    if isinstance(normalizer, dict) and normalizer.get("type") == "Sequence":
        steps = normalizer.get("normalizers")
        kinds = [s.get("type") if isinstance(s, dict) else s for s in steps] if isinstance(
            steps, list) else steps
        raise _unsupported(f"normalizer Sequence of {kinds!r:.120} (text is changed before "
                           "tokenization; only NFC or NFKC alone is reproduced)", path, "normalizer")
    raise _unsupported(f"normalizer {kind!r} (text is changed before tokenization; only NFC "
                       "and NFKC are reproduced)", path, "normalizer")


def _no_op_template(post) -> bool:
    """A TemplateProcessing whose single-sequence template is the sequence alone, adding no
    token (what ``transformers`` v5 writes when it saves a tokenizer without BOS/EOS
    post-processing; the pair template does not apply to one text)."""
    return (isinstance(post, dict) and post.get("type") == "TemplateProcessing"
            and post.get("single") == [{"Sequence": {"id": "A", "type_id": 0}}])


def _check_pipeline(doc: dict, path):
    """Everything around the model: normalizer, decoder, post-processor, truncation, padding.

    Returns the normalization (None, "NFC" or "NFKC").
    """
    normalization = _parse_normalizer(doc.get("normalizer"), path)
    decoder = doc.get("decoder")
    if not (isinstance(decoder, dict) and decoder.get("type") == "ByteLevel"):
        kind = decoder.get("type") if isinstance(decoder, dict) else decoder
        raise _unsupported(f"decoder {kind!r} (expected ByteLevel)", path, "decoder")
    post = doc.get("post_processor")
    if post is not None and not (isinstance(post, dict) and post.get("type") == "ByteLevel"
                                 or _no_op_template(post)):
        kind = post.get("type") if isinstance(post, dict) else post
        raise _unsupported(f"post_processor {kind!r} (it adds tokens on encode; only null, "
                           "ByteLevel, which changes offsets only, or a TemplateProcessing that "
                           "adds nothing to one sequence)", path, "post_processor")
    for key in ("truncation", "padding"):
        if doc.get(key) is not None:
            raise _unsupported(f"{key} is set (encode output would be cut or padded)", path, key)
    return normalization


def _parse_added_tokens(added, path, normalization=None) -> dict[str, int]:
    """``{content: id}`` of the added tokens (special ones only). With a normalizer, each
    must be ``"normalized": true``: we look for special tokens in the normalized text, HF
    looks for the others in the raw text first (``"e<|x|>\u0338"`` would then differ)."""
    if added is None:
        return {}
    if not isinstance(added, list):
        raise ModelFormatError("added_tokens must be a list", path, "added_tokens")
    out: dict[str, int] = {}
    ids = set()
    for k, entry in enumerate(added):
        where = f"added_tokens[{k}]"
        if not (isinstance(entry, dict) and isinstance(entry.get("content"), str)
                and entry["content"] and _is_int(entry.get("id"))):
            raise ModelFormatError(f"expected an object with 'id' and 'content', got {entry!r:.80}",
                                   path, where)
        if not entry.get("special", False):
            raise _unsupported(f"non-special added token {entry['content']!r} (HF always splits "
                               "it out of the text; fastbpe_nb has special tokens only)", path, where)
        for flag in ("single_word", "lstrip", "rstrip"):
            if entry.get(flag, False):
                raise _unsupported(f"added token {entry['content']!r} with {flag}=true", path, where)
        # A missing flag means false for a special token (HF: normalized = not special).
        if normalization is not None and entry.get("normalized", False) is not True:
            raise _unsupported(f"added token {entry['content']!r} with normalized=false under the "
                               f"{normalization} normalizer (HF finds it in the raw text, "
                               "fastbpe_nb in the normalized text)", path, where)
        if entry["content"] in out or entry["id"] in ids:
            raise ModelFormatError(f"added token {entry['content']!r} (id {entry['id']}) is given "
                                   "twice", path, where)
        out[entry["content"]] = entry["id"]
        ids.add(entry["id"])
    return out


def _token_bytes(s: str, path, entry: str) -> bytes:
    try:
        return bytes([CHAR_TO_BYTE[c] for c in s])
    except KeyError as exc:
        raise _unsupported(f"token {s!r:.60} has the character {exc.args[0]!r}, which is not a "
                           "GPT-2 byte-level character", path, entry) from None


def _parse_merges(raw, path, entry="model.merges") -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise ModelFormatError("merges must be a list", path, entry)
    out = []
    for k, m in enumerate(raw):
        if isinstance(m, str):
            parts = m.split(" ")
        elif isinstance(m, list):
            parts = m
        else:
            parts = None
        if not (parts and len(parts) == 2 and all(isinstance(p, str) and p for p in parts)):
            raise ModelFormatError(f"expected 'left right' or [left, right], got {m!r:.60}",
                                   path, f"{entry}[{k}]")
        out.append((parts[0], parts[1]))
    return out


def build_from_vocab(vocab: dict, merges: list[tuple[str, str]], specials: dict[str, int],
                     pattern, path, vocab_entry="model.vocab", merges_entry="model.merges",
                     merge_lines=None, normalization=None):
    """The Tokenizer arguments (a dict) of HF's byte-level vocab, merges and specials, all
    validated (``merge_mode="pairs"``).

    ``vocab`` must not contain the special tokens. Our layout is required: the 256 single
    bytes hold ids 0..255 (any order), the merge results follow in merge order (a merge whose
    result already exists reuses its id), and the special tokens come right after.
    """
    import numpy as np

    from ..layout import resolve_pattern
    from ..model import MergeModel

    if not isinstance(vocab, dict):
        raise ModelFormatError("vocab must be an object {token: id}", path, vocab_entry)
    n = len(vocab)
    by_id: list = [None] * n
    for s, tid in vocab.items():
        if not _is_int(tid):
            raise ModelFormatError(f"id {tid!r} of {s!r:.60} is not an integer", path, vocab_entry)
        if not 0 <= tid < n:
            raise _unsupported(f"token {s!r:.60} has id {tid}, outside 0..{n - 1}: the regular "
                               "ids must be contiguous from 0 (our layout)", path, vocab_entry)
        if by_id[tid] is not None:
            raise ModelFormatError(f"id {tid} is used by {by_id[tid]!r:.40} and {s!r:.40}",
                                   path, vocab_entry)
        by_id[tid] = s
    for b in range(256):
        tid = vocab.get(_BYTE_STR[b])
        if tid is None:
            raise _unsupported(f"the byte 0x{b:02x} ({_BYTE_STR[b]!r}) has no token (a byte-level "
                               "vocabulary holds all 256 bytes)", path, vocab_entry)
        if tid >= 256:
            raise _unsupported(f"the byte 0x{b:02x} ({_BYTE_STR[b]!r}) has id {tid}; our layout "
                               "needs the 256 bytes at ids 0..255", path, vocab_entry)
    byte_order = [CHAR_TO_BYTE[by_id[i]] for i in range(256)]
    expected = [_token_bytes(s, path, f"{vocab_entry}[{s!r:.40}]") for s in by_id]
    merge_ids = np.empty((len(merges), 2), dtype=np.int64)
    seen_pairs = {}
    for k, (a, b) in enumerate(merges):
        where = f"{merges_entry}[{k}]" if merge_lines is None else f"line {merge_lines[k]}"
        ia, ib = vocab.get(a), vocab.get(b)
        if ia is None or ib is None:
            missing = a if ia is None else b
            raise ModelFormatError(f"merge ({a!r}, {b!r}): {missing!r:.60} is not in the vocabulary",
                                   path, where)
        if (ia, ib) in seen_pairs:
            raise ModelFormatError(f"merge ({a!r}, {b!r}) is listed twice (first at "
                                   f"{merges_entry}[{seen_pairs[ia, ib]}])", path, where)
        seen_pairs[ia, ib] = k
        if a + b not in vocab:
            raise ModelFormatError(f"merge ({a!r}, {b!r}): its result {a + b!r:.60} is not in the "
                                   "vocabulary", path, where)
        merge_ids[k] = ia, ib
    try:
        pattern = resolve_pattern(pattern, "bytes")
    except ValueError as exc:
        raise ModelFormatError(str(exc), path, "pre_tokenizer") from None
    try:
        base_bytes = [bytes([b]) for b in byte_order]
        got = MergeModel(merge_ids, base_bytes, "pairs", path).token_bytes
    except ModelFormatError as exc:
        m = re.fullmatch(r"merges\[(\d+)\]", exc.entry or "")
        if m is None:
            raise
        k = int(m.group(1))
        where = f"{merges_entry}[{k}]" if merge_lines is None else f"line {merge_lines[k]}"
        raise _unsupported(
            f"merge {merges[k]!r:.80} uses a token whose id is not yet defined at merge {k} "
            f"({exc.reason}); our layout numbers bytes 0..255, then each merge's new token in "
            "merge order", path, where) from None
    if got != expected:
        i = next((i for i in range(min(len(got), n)) if got[i] != expected[i]), min(len(got), n))
        if i < n and i < len(got):
            reason = (f"id {i} is {by_id[i]!r:.40} in the vocabulary, but the merges create "
                      f"{to_hf(got[i])!r:.40} there")
        elif i < n:
            reason = (f"the vocabulary has {n} tokens but the bytes and merges make only "
                      f"{len(got)}: {by_id[i]!r:.40} (id {i}) is not the result of any merge")
        else:
            reason = f"the merges make {len(got)} tokens, the vocabulary has {n}"
        raise _unsupported(reason + " (our layout: bytes 0..255, then each merge's new token "
                           "in merge order)", path, vocab_entry)
    return {"merges": merge_ids, "pattern": pattern, "byte_order": byte_order,
            "merge_mode": "pairs", "normalization": normalization, "_source": path,
            "special_tokens": _specials_after(specials, n, path, "added_tokens") if specials else ()}


def _specials_after(specials: dict, n: int, path, entry: str) -> dict:
    """``specials`` checked as the Tokenizer checks them: ids from ``n`` (the number of
    regular tokens) on, unique; unused ids may be left between them (as in cl100k)."""
    from ..specials import check_special_tokens

    try:
        return check_special_tokens(specials, n, entry, path)
    except ModelFormatError as exc:
        raise _unsupported(exc.reason, path, entry) from None


def _load_tokenizer_json(doc: dict, path):
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ModelFormatError("not a tokenizer.json (no 'model' object)", path, "model")
    model = doc["model"]
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise _unsupported(f"model type {kind!r} (only BPE)", path, "model.type")
    for key in ("dropout",):
        if model.get(key) not in (None, 0, 0.0):
            raise _unsupported(f"BPE dropout={model[key]!r} (encoding would be random)", path,
                               f"model.{key}")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if not _empty(model.get(key)):
            raise _unsupported(f"{key}={model[key]!r} (a char-level/WordPiece-style BPE, not "
                               "byte-level)", path, f"model.{key}")
    for key in ("byte_fallback", "ignore_merges"):
        if model.get(key, False):
            what = ("byte_fallback=true (SentencePiece-style <0xXX> byte pieces)"
                    if key == "byte_fallback" else
                    "ignore_merges=true (whole-word vocabulary lookup before the pair merges)")
            raise _unsupported(what, path, f"model.{key}")
    normalization = _check_pipeline(doc, path)
    pattern = _parse_pre_tokenizer(doc.get("pre_tokenizer"), path)
    specials = _parse_added_tokens(doc.get("added_tokens"), path, normalization)
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ModelFormatError("model.vocab must be an object {token: id}", path, "model.vocab")
    regular = {}
    for s, tid in vocab.items():
        if s in specials:
            if tid != specials[s]:
                raise ModelFormatError(f"special token {s!r} has id {tid} in the vocabulary but "
                                       f"{specials[s]} in added_tokens", path, "model.vocab")
        else:
            regular[s] = tid
    merges = _parse_merges(model.get("merges"), path)
    return build_from_vocab(regular, merges, specials, pattern, path, normalization=normalization)


def _read_merges_txt(path) -> tuple[list[tuple[str, str]], list[int]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ModelFormatError("merges.txt not found (pass merges=... or put it beside vocab.json)",
                               path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"not UTF-8 text (byte {exc.start})", path) from None
    merges, lines = [], []
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line or (lineno == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ModelFormatError(f"expected 'left right', got {line[:60]!r}", path, f"line {lineno}")
        merges.append((parts[0], parts[1]))
        lines.append(lineno)
    return merges, lines


def _load_vocab_merges(vocab_path, merges_path):
    vocab = _read_json(vocab_path)
    if not isinstance(vocab, dict):
        raise ModelFormatError("vocab.json must be an object {token: id}", vocab_path)
    merges, lines = _read_merges_txt(merges_path)
    # Regular tokens: the 256 bytes and the merge results; anything else (GPT-2's
    # <|endoftext|>) is a special token and must come after them.
    regular_strings = set(_BYTE_STR)
    regular_strings.update(a + b for a, b in merges)
    regular = {s: i for s, i in vocab.items() if s in regular_strings}
    specials = {s: i for s, i in vocab.items() if s not in regular_strings}
    for s, i in specials.items():
        if not _is_int(i):
            raise ModelFormatError(f"id {i!r} of {s!r:.60} is not an integer", vocab_path, s[:60])
    try:
        spec = build_from_vocab(regular, merges, {}, "gpt2", vocab_path, vocab_entry="vocab",
                               merges_entry=os.path.basename(merges_path), merge_lines=lines)
    except ModelFormatError as exc:
        if exc.entry is not None and exc.entry.startswith("line "):
            raise ModelFormatError(exc.reason, merges_path, exc.entry) from None
        raise
    if specials:
        n = len(regular)
        bad = next((s for s, i in specials.items() if i < n), None)
        if bad is not None:
            raise _unsupported(
                f"{bad!r:.60} (id {specials[bad]}) is neither a byte nor a merge result and does "
                f"not come after the {n} regular tokens (special tokens must have ids >= {n})",
                vocab_path, "vocab")
        spec["special_tokens"] = _specials_after(specials, n, vocab_path, "vocab")
    return spec


def load_huggingface(path, merges=None) -> dict:
    """The Tokenizer arguments of a byte-level BPE in Hugging Face files.

    ``path`` is a ``tokenizer.json``, a GPT-2 style ``vocab.json`` (its ``merges.txt`` is
    found beside it unless ``merges=`` names it), or a folder holding either. The result has
    ``merge_mode="pairs"`` (HF's rule). Raises ModelFormatError naming the file and what is
    unsupported (a normalizer other than NFC / NFKC, a non-BPE model, a continuing-subword
    prefix, ...).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "tokenizer.json")):
            path = os.path.join(path, "tokenizer.json")
        else:
            path = os.path.join(path, "vocab.json")
    if merges is not None:
        return _load_vocab_merges(path, os.fspath(merges))
    doc = _read_json(path)
    if isinstance(doc, dict) and "model" in doc:
        return _load_tokenizer_json(doc, path)
    if isinstance(doc, dict) and doc and all(_is_int(v) for v in doc.values()):
        return _load_vocab_merges(path, os.path.join(os.path.dirname(path), "merges.txt"))
    raise ModelFormatError("neither a tokenizer.json (no 'model' object) nor a vocab.json "
                           "({token: id})", path)
