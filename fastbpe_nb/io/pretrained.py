"""A ``transformers``-ready folder: ``save_pretrained`` writes it, ``from_pretrained`` reads it.

The folder holds what ``transformers.AutoTokenizer.from_pretrained(folder)`` reads:

* ``tokenizer.json``: the exporter's (``huggingface_export``), byte-level BPE; a tiktoken
  (``merge_mode="ranks"``) tokenizer is written rank-keyed (every split of every token,
  ``ignore_merges``: ``huggingface_export.rank_keyed_merges``) so that HF encodes as tiktoken;
  a SentencePiece-style one as HF writes Llama-style tokenizers (``huggingface_pieces``);
* ``tokenizer_config.json``: ``tokenizer_class: "PreTrainedTokenizerFast"``, the roles'
  tokens (``bos_token``, ``eos_token``, ``pad_token``, ``unk_token``), the special tokens
  (``added_tokens_decoder``), ``clean_up_tokenization_spaces: false`` (decode is exact) and
  the ``chat_template`` when one is set;
* ``special_tokens_map.json``: the roles' tokens again (older readers take them from here);

and ``fastbpe_model.json``, our model file (``model_file``), so that reading the folder back
gives exactly the tokenizer that wrote it (a rank-keyed ``tokenizer.json`` does not say
that it is one). It is used only while ``tokenizer.json`` is still the one it writes: a
folder whose ``tokenizer.json`` was changed since (saved again by ``transformers``, edited)
is read from ``tokenizer.json``, the file ``transformers`` reads too.

Every file is written atomically, and all of them are made before the first is written, so
a tokenizer that HF cannot express (a char-level one, a pattern Oniguruma would read
differently, a SentencePiece-style one with user-defined pieces or a charsmap, ...) is
refused with LossyExportError and writes nothing.
Reading the roles: ``tokenizer_config.json`` first, then ``special_tokens_map.json``; a chat
template from ``tokenizer_config.json`` or ``chat_template.jinja`` (transformers' own file).
"""

from __future__ import annotations

import json
import os

from ..errors import LossyExportError, ModelFormatError
from .atomic import atomic_write

CONFIG = "tokenizer_config.json"
SPECIAL_MAP = "special_tokens_map.json"
TOKENIZER_JSON = "tokenizer.json"
OUR_MODEL = "fastbpe_model.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
_HF_ROLES = {"bos": "bos_token", "eos": "eos_token", "pad": "pad_token", "unk": "unk_token"}


def _dump(doc) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def tokenizer_json(tok) -> str:
    """The folder's ``tokenizer.json`` text; LossyExportError when HF cannot express ``tok``."""
    from .huggingface_export import huggingface_json

    if tok.base == "pieces":
        from .huggingface_pieces import pieces_tokenizer_json

        return pieces_tokenizer_json(tok)
    try:
        return huggingface_json(tok, rank_keyed=True)
    except LossyExportError:
        raise
    except ValueError as exc:  # the exporter's refusals (char level, a pattern, ...)
        raise LossyExportError(f"save_pretrained: {exc}") from None


def config_docs(tok, hf_json: str) -> dict[str, bytes]:
    """``tokenizer_config.json`` and ``special_tokens_map.json`` of ``tok``."""
    added = json.loads(hf_json)["added_tokens"]
    roles = {hf: getattr(tok, hf) for hf in _HF_ROLES.values() if getattr(tok, hf) is not None}
    config = {
        "added_tokens_decoder": {str(t["id"]): {k: t[k] for k in (
            "content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in added},
        **roles,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    if tok.chat_template is not None:
        config["chat_template"] = tok.chat_template
    return {CONFIG: _dump(config), SPECIAL_MAP: _dump(roles)}


def save_pretrained(tok, folder) -> list[str]:
    """Write the folder (created if missing); returns the paths written."""
    from .model_file import model_to_json

    folder = os.fspath(folder)
    hf_json = tokenizer_json(tok)  # refuses before anything is written
    files = {TOKENIZER_JSON: hf_json.encode("utf-8"), **config_docs(tok, hf_json),
             OUR_MODEL: model_to_json(tok).encode("utf-8")}
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise LossyExportError(f"{folder}: save_pretrained needs a folder; this is a file")
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, data in files.items():
        path = os.path.join(folder, name)
        with atomic_write(path) as f:
            f.write(data)
        written.append(path)
    return written


def our_model_if_current(folder, build):
    """The tokenizer of the folder's ``fastbpe_model.json`` when its ``tokenizer.json`` is
    still the one that model writes (else None: read ``tokenizer.json``). ``build`` makes
    the Tokenizer of a parsed model file (the caller's: this module is below the Tokenizer)."""
    from .model_file import read_model

    ours = os.path.join(folder, OUR_MODEL)
    hf_path = os.path.join(folder, TOKENIZER_JSON)
    if not (os.path.isfile(ours) and os.path.isfile(hf_path)):
        return None
    tok = build(read_model(ours))
    try:
        expected = tokenizer_json(tok).encode("utf-8")
    except LossyExportError:
        return None
    with open(hf_path, "rb") as f:
        return tok if f.read() == expected else None


def _read_json_object(path):
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFormatError(f"not a valid JSON file ({exc})", path) from None
    if not isinstance(doc, dict):
        raise ModelFormatError("not a JSON object", path)
    return doc


def _token_of(value, path, entry):
    """A role's token as HF writes it: a str, ``{"content": str, ...}`` (an AddedToken), null."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"] or None
    raise ModelFormatError(f"expected a token string, an AddedToken object or null, got "
                           f"{value!r:.60}", path, entry)


def _chat_template(config, config_path, folder):
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if "default" not in named:
            raise ModelFormatError(f"named chat templates {sorted(map(str, named))} without a "
                                   "'default' one (fastbpe_nb keeps one template)",
                                   config_path, "chat_template")
        template = named["default"]
    if template is not None and not isinstance(template, str):
        raise ModelFormatError("chat_template must be a string", config_path, "chat_template")
    jinja = os.path.join(folder, CHAT_TEMPLATE_FILE)
    if template is None and os.path.isfile(jinja):
        with open(jinja, "rb") as f:
            try:
                template = f.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ModelFormatError(f"not UTF-8 text (byte {exc.start})", jinja) from None
    return template


def read_roles(folder, candidates: dict) -> dict | None:
    """``{role: token, "chat_template": ...}`` of the HF config files in ``folder`` (None
    when it has none). ``candidates``: the tokens a role may name (the tokenizer's special
    tokens); a role naming another token is a ModelFormatError naming the file and entry."""
    config_path, map_path = os.path.join(folder, CONFIG), os.path.join(folder, SPECIAL_MAP)
    have_config, have_map = os.path.isfile(config_path), os.path.isfile(map_path)
    if not (have_config or have_map or os.path.isfile(os.path.join(folder, CHAT_TEMPLATE_FILE))):
        return None
    config = _read_json_object(config_path) if have_config else {}
    special_map = _read_json_object(map_path) if have_map else {}
    roles = {}
    for role, key in _HF_ROLES.items():
        path, doc = (config_path, config) if key in config else (map_path, special_map)
        token = _token_of(doc.get(key), path, key)
        if token is not None and token not in candidates:
            raise ModelFormatError(f"{key} {token!r:.60} is not a special token of the "
                                   f"tokenizer (its special tokens: {sorted(candidates)[:20]}); "
                                   "pass roles={} to ignore the config files", path, key)
        if token is not None:
            roles[role] = token
    template = _chat_template(config, config_path, folder)
    if template is not None:
        roles["chat_template"] = template
    return roles


def pretrained_spec(path, merges=None, roles=None) -> dict:
    """``load_huggingface``'s Tokenizer arguments plus ``"roles"``: ``roles`` when given
    (``{}``: none), else those of the config files beside the ``tokenizer.json`` /
    ``vocab.json`` (``read_roles``; None when there are none)."""
    from .huggingface_format import load_huggingface

    spec = load_huggingface(path, merges)
    if roles is None:
        folder = os.path.dirname(os.path.abspath(spec["_source"]))
        roles = read_roles(folder, spec.get("special_tokens") or {})
    spec["roles"] = roles
    return spec


def read_folder(folder, build):
    """The tokenizer of a ``save_pretrained`` folder, or None when it is not one that our
    model file still describes (see the module docstring). Roles and chat template come
    from the config files, which a user may have edited since (``transformers`` reads them)."""
    tok = our_model_if_current(folder, build)
    if tok is None:
        return None
    roles = read_roles(folder, tok.role_tokens())
    if roles is not None and roles != tok.roles:
        full = dict.fromkeys(("bos", "eos", "pad", "unk", "chat_template"))
        tok = tok.with_roles(**{**full, **roles})
    return tok
