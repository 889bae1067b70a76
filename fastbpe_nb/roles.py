"""Special-token roles: which special token is the model's BOS, EOS, padding, unknown token.

A *role* names one of the tokenizer's special tokens (a ``str``) or is None. The roles are
part of the model: saved in our model file, written by ``save_pretrained`` to
``tokenizer_config.json`` / ``special_tokens_map.json`` (Hugging Face's ``bos_token``,
``eos_token``, ``pad_token``, ``unk_token``), and read back by the loaders. A chat template
(a Jinja string, as ``transformers``' ``apply_chat_template`` renders it) is kept in the
same record.

One spelling everywhere: the keys ``"bos"``, ``"eos"``, ``"pad"``, ``"unk"`` and
``"chat_template"``, as a mapping (``fb.train(..., roles={"eos": "<|endoftext|>"})``,
``Tokenizer.from_parts(..., roles=...)``) or as keyword arguments of ``tok.with_roles``.

Which tokens can have a role: the registered special tokens (``tok.special_tokens``) and,
in a SentencePiece-style model, its control, unknown and user-defined pieces (``<s>``,
``</s>``, ``<unk>``, ...: regular ids there, special in SentencePiece's sense). ``unk`` is
only for models that have an unknown token (SentencePiece-style ones); byte-level models
encode every text and have none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from .errors import ModelFormatError, TokenRoleError
from .io.sentencepiece_model import CONTROL, UNKNOWN, USER_DEFINED

#: The roles a special token can have, in the order files list them.
ROLE_NAMES = ("bos", "eos", "pad", "unk")

_KEEP = object()  # with_roles: "leave this role as it is"


@dataclass(frozen=True)
class TokenRoles:
    """The roles of a tokenizer's special tokens (each a token string or None) and its
    chat template. Immutable: ``with_roles`` makes a new tokenizer with a new record."""

    bos: str | None = None
    eos: str | None = None
    pad: str | None = None
    unk: str | None = None
    chat_template: str | None = None

    def to_dict(self) -> dict:
        """``{key: value}`` of the entries that are set (the model file's ``"roles"``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def from_mapping(cls, roles, entry: str = "roles") -> "TokenRoles":
        """A record of ``roles``: None, a TokenRoles or a mapping of the keys above.

        Raises TokenRoleError for an unknown key or a value that is not a str or None
        (the role's token is checked against the tokenizer by ``check_roles``).
        """
        if roles is None:
            return cls()
        if isinstance(roles, TokenRoles):
            return roles
        if not hasattr(roles, "items"):
            raise TokenRoleError(f"{entry} must be a mapping such as {{'eos': '<|endoftext|>'}}"
                                 f", not {type(roles).__name__}")
        known = [f.name for f in fields(cls)]
        values = {}
        for key, value in roles.items():
            if key not in known:
                raise TokenRoleError(f"{entry}: unknown role {key!r} (the keys are "
                                     f"{', '.join(known)})", role=key)
            if value is not None and (not isinstance(value, str) or not value):
                raise TokenRoleError(f"{entry}: the {_label(key)} must be a non-empty str or "
                                     f"None, not {value!r:.60}", role=key)
            values[key] = value
        return cls(**values)


def _label(role: str) -> str:
    return role if role == "chat_template" else f"{role}_token"


def role_candidates(model, special_ids: dict) -> dict[str, int]:
    """``{token: id}`` of the tokens a role may name (see the module docstring)."""
    out = dict(special_ids)
    types = getattr(model, "types", None)
    pieces = getattr(model, "pieces", None)
    if types is not None and pieces is not None:  # SentencePiece-style: its special pieces
        for i, (piece, kind) in enumerate(zip(pieces, types.tolist())):
            if kind in (UNKNOWN, CONTROL, USER_DEFINED):
                out.setdefault(piece, i)
    return out


def check_roles(roles, model, special_ids: dict, source=None) -> TokenRoles:
    """The validated roles of a tokenizer of ``model`` and ``special_ids``.

    Raises TokenRoleError naming the role and the token when a role names a token that is
    not a special token of this tokenizer; ModelFormatError naming the file and the entry
    (``roles.eos``) when the tokenizer is read from ``source``, a file.
    """
    record = TokenRoles.from_mapping(roles)
    candidates = None
    for role in ROLE_NAMES:
        token = getattr(record, role)
        if token is None:
            continue
        if candidates is None:
            candidates = role_candidates(model, special_ids)
        if token not in candidates:
            shown = sorted(candidates)[:20]
            reason = (f"{role}_token {token!r:.60} is not a special token of this tokenizer "
                      f"(its special tokens: {shown}{' ...' if len(candidates) > 20 else ''})")
            if source is not None:  # read from a file: name the file and the entry
                raise ModelFormatError(reason, source, f"roles.{role}")
            raise TokenRoleError(reason + "; register it with special_tokens=[...] first",
                                 role=role, token=token)
    return record


class SpecialTokenRoles:
    """``bos_token``/``eos_token``/``pad_token``/``unk_token`` and their ids, the chat
    template, and ``with_roles``: a mixin of ``Tokenizer`` (the record is ``self._roles``,
    set by the Tokenizer's constructor through ``check_roles``)."""

    @property
    def roles(self) -> dict:
        """``{role: token}`` of the roles that are set (and ``chat_template`` if any)."""
        return self._roles.to_dict()

    bos_token = property(lambda self: self._roles.bos, doc="The BOS token (str) or None.")
    eos_token = property(lambda self: self._roles.eos, doc="The EOS token (str) or None.")
    pad_token = property(lambda self: self._roles.pad, doc="The padding token (str) or None.")
    unk_token = property(lambda self: self._roles.unk,
                         doc="The unknown token (SentencePiece-style models) or None.")
    chat_template = property(lambda self: self._roles.chat_template,
                             doc="The chat template (a Jinja string) or None.")
    bos_token_id = property(lambda self: self._role_id("bos"), doc="The BOS id or None.")
    eos_token_id = property(lambda self: self._role_id("eos"), doc="The EOS id or None.")
    pad_token_id = property(lambda self: self._role_id("pad"), doc="The padding id or None.")
    unk_token_id = property(lambda self: self._role_id("unk"), doc="The unknown id or None.")

    def role_tokens(self) -> dict[str, int]:
        """``{token: id}`` of the tokens a role may name: the special tokens (SentencePiece
        style: also its control, unknown and user-defined pieces)."""
        return role_candidates(self.model, self.special_tokens)

    def _roles_for(self, roles, specials, source=None) -> TokenRoles:
        """``check_roles`` for this tokenizer's model and ``specials`` (a SpecialTokens)."""
        return check_roles(roles, self.model, specials.ids, source)

    def _role_id(self, role: str):
        token = getattr(self._roles, role)
        if token is None:
            return None
        special = self.special_tokens.get(token)
        return special if special is not None else role_candidates(self.model, {})[token]

    def with_roles(self, *, bos=_KEEP, eos=_KEEP, pad=_KEEP, unk=_KEEP, chat_template=_KEEP):
        """A copy of this tokenizer with the given roles changed (None unsets one; a role
        not given keeps its value). Raises TokenRoleError for a token that is not special.

        >>> tok = tok.with_roles(eos="<|endoftext|>", pad="<|pad|>")  # doctest: +SKIP
        """
        changes = {k: v for k, v in dict(bos=bos, eos=eos, pad=pad, unk=unk,
                                         chat_template=chat_template).items() if v is not _KEEP}
        TokenRoles.from_mapping(changes, "with_roles")  # types first, naming with_roles
        state = self.__getstate__()
        state["roles"] = replace(self._roles, **changes)
        new = type(self).__new__(type(self))
        new.__setstate__(state)
        return new

    # ------------------------------------------------------------------ transformers
    def save_pretrained(self, folder) -> list[str]:
        """Write a folder that ``transformers.AutoTokenizer.from_pretrained`` loads with the
        same ids, roles (bos/eos/pad/unk) and chat template: ``tokenizer.json``,
        ``tokenizer_config.json``, ``special_tokens_map.json`` and our model file
        (``io.pretrained``). Returns the paths written. LossyExportError (nothing written)
        for a tokenizer HF cannot express: char level, SentencePiece style with
        user-defined pieces or a charsmap normalizer, ...
        """
        from .io.pretrained import save_pretrained

        return save_pretrained(self, folder)

    @classmethod
    def from_pretrained(cls, folder):
        """The tokenizer of a ``save_pretrained`` folder (exactly the one saved), or of any
        Hugging Face folder (or ``tokenizer.json``) that ``fb.from_huggingface`` reads,
        with the roles and chat template of its ``tokenizer_config.json`` /
        ``special_tokens_map.json``."""
        from .io.pretrained import pretrained_spec, read_folder

        folder = os.fspath(folder)
        if os.path.isdir(folder):
            tok = read_folder(folder, cls._from_model_spec)
            if tok is not None:
                return tok
        return cls(**pretrained_spec(folder))

    @classmethod
    def _from_model_spec(cls, spec: dict):
        """The tokenizer of a parsed model file (``io.model_file.parse_model``)."""
        if "sentencepiece" in spec:  # see sentencepiece_build: the parts, then the class
            from .io.sentencepiece_model import parse_model
            from .sentencepiece_build import proto_parts

            source = spec.get("_source")
            return cls.from_parts(**proto_parts(parse_model(spec["sentencepiece"], source),
                                                source, spec.get("roles")))
        return cls(**spec)
