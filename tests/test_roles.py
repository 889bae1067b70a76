"""Special-token roles (``bos``/``eos``/``pad``/``unk``) and the chat template in the model:
set by training, loaders and ``with_roles``, validated, pickled, saved and loaded."""

from __future__ import annotations

import json
import pickle

import pytest

import fastbpe_nb as fb
import presets

TEXTS = ["low lower lowest newer wider", "the quick brown fox", "Grüße, Привет"] * 20
SPECIALS = ["<|endoftext|>", "<|pad|>", "<|im_end|>"]


@pytest.fixture(scope="module")
def tok():
    return fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS,
                    roles={"eos": "<|endoftext|>", "pad": "<|pad|>"})


def test_roles_from_training(tok):
    assert (tok.bos_token, tok.eos_token, tok.pad_token, tok.unk_token) == (
        None, "<|endoftext|>", "<|pad|>", None)
    assert tok.eos_token_id == tok.special_tokens["<|endoftext|>"]
    assert tok.pad_token_id == tok.special_tokens["<|pad|>"]
    assert tok.bos_token_id is None and tok.unk_token_id is None and tok.chat_template is None
    assert tok.roles == {"eos": "<|endoftext|>", "pad": "<|pad|>"}
    plain = fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS)
    assert plain.roles == {} and plain.eos_token_id is None  # train sets none by itself
    assert plain != tok  # roles are part of the model


def test_with_roles_makes_a_new_tokenizer(tok):
    new = tok.with_roles(bos="<|endoftext|>", pad=None, chat_template="{{ messages }}")
    assert new.roles == {"bos": "<|endoftext|>", "eos": "<|endoftext|>",
                         "chat_template": "{{ messages }}"}
    assert tok.roles == {"eos": "<|endoftext|>", "pad": "<|pad|>"}  # unchanged
    assert new.encode("the lowest fox") == tok.encode("the lowest fox")
    assert new.with_roles(bos=None, pad="<|pad|>", chat_template=None) == tok


def test_eot_token_is_the_eos_role(tok):
    assert tok.eot_token == tok.special_tokens["<|endoftext|>"]
    assert tok.with_roles(eos="<|im_end|>").eot_token == tok.special_tokens["<|im_end|>"]
    assert tok.with_roles(eos=None).eot_token == tok.special_tokens["<|endoftext|>"]


@pytest.mark.parametrize("call, role, token", [
    (lambda t: t.with_roles(eos="<|eot|>"), "eos", "<|eot|>"),
    (lambda t: t.with_roles(pad="low"), "pad", "low"),  # a regular token is no special one
    (lambda t: fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS,
                        roles={"bos": "<s>"}), "bos", "<s>"),
    (lambda t: fb.Tokenizer(t.merges, special_tokens=SPECIALS, roles={"unk": "<unk>"}),
     "unk", "<unk>"),
])
def test_a_role_must_name_a_special_token(tok, call, role, token):
    with pytest.raises(fb.TokenRoleError) as info:
        call(tok)
    assert info.value.role == role and info.value.token == token
    assert f"{role}_token" in str(info.value) and repr(token) in str(info.value)
    assert "<|endoftext|>" in str(info.value)  # lists the special tokens there are


@pytest.mark.parametrize("roles, match", [
    ({"end": "<|endoftext|>"}, "unknown role 'end'"),
    ({"eos": 5}, "must be a non-empty str"),
    ({"eos": ""}, "must be a non-empty str"),
    (["eos"], "must be a mapping"),
])
def test_malformed_roles(roles, match):
    with pytest.raises(fb.TokenRoleError, match=match):
        fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS, roles=roles)


def test_train_checks_the_roles_before_training(monkeypatch):
    import fastbpe_nb.training as training

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking the roles")

    monkeypatch.setattr(training, "count_corpus", no_training)
    with pytest.raises(fb.TokenRoleError, match="eos_token"):
        fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS, roles={"eos": "</s>"})


def test_train_files_roles(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS), encoding="utf-8")
    tok = fb.train_files([path], vocab_size=300, special_tokens=SPECIALS,
                         roles={"eos": "<|endoftext|>"})
    assert tok.eos_token == "<|endoftext|>"


def test_roles_survive_pickle_and_the_model_file(tok, tmp_path):
    full = tok.with_roles(bos="<|endoftext|>", chat_template="{% for m in messages %}{% endfor %}")
    assert pickle.loads(pickle.dumps(full)) == full
    assert pickle.loads(pickle.dumps(full)).roles == full.roles
    path = tmp_path / "m.json"
    full.save(path)
    back = fb.load(path)
    assert back == full and back.roles == full.roles
    back.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_a_file_without_roles_is_as_before(tmp_path):
    plain = fb.train(TEXTS, vocab_size=300, special_tokens=SPECIALS)
    plain.save(tmp_path / "plain.json")
    assert '"roles"' not in (tmp_path / "plain.json").read_text(encoding="utf-8")
    tok = plain.with_roles(eos="<|endoftext|>")
    tok.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert doc["roles"] == {"eos": "<|endoftext|>"}
    del doc["roles"]  # an older file
    (tmp_path / "old.json").write_text(json.dumps(doc), encoding="utf-8")
    old = fb.load(tmp_path / "old.json")
    assert old.roles == {} and old.eos_token is None and old == plain


@pytest.mark.parametrize("roles, entry", [
    ({"eos": "<|nope|>"}, "roles.eos"),
    ({"beginning": "<|endoftext|>"}, "roles.beginning"),
    ({"pad": 7}, "roles.pad"),
    (["eos"], "roles"),
])
def test_bad_roles_in_a_model_file(tok, tmp_path, roles, entry):
    tok.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    doc["roles"] = roles
    (tmp_path / "bad.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(fb.ModelFormatError) as info:
        fb.load(tmp_path / "bad.json")
    assert info.value.entry == entry and str(tmp_path / "bad.json") in str(info.value)


def test_tiktoken_defaults_eos_to_endoftext():
    tok = presets.cl100k_tiktoken()
    assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id == 100257
    assert tok.bos_token is None and tok.pad_token is None
    bare = fb.from_tiktoken(presets.cl100k_ranks_path(), "cl100k_base", roles={})
    assert bare.roles == {} and bare.special_tokens == {}
    none = fb.from_tiktoken(presets.cl100k_ranks_path(), "cl100k",
                            special_tokens=["<|im_end|>"])
    assert none.roles == {}  # no <|endoftext|>: no default


def test_sentencepiece_roles_are_its_pieces(tmp_path):
    sp = presets.sp_byte_fallback()
    assert sp.roles == {"bos": "<s>", "eos": "</s>", "unk": "<unk>"}
    assert (sp.unk_token_id, sp.bos_token_id, sp.eos_token_id, sp.pad_token_id) == (0, 1, 2, None)
    spm = pytest.importorskip("sentencepiece")
    sp.to_sentencepiece(tmp_path / "m.model")
    proc = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    back = fb.from_sentencepiece(tmp_path / "m.model")
    assert (back.unk_token_id, back.bos_token_id, back.eos_token_id) == (
        proc.unk_id(), proc.bos_id(), proc.eos_id())
    assert proc.pad_id() == -1 and back.pad_token_id is None
    # Changed roles are kept by our model file; an older file (no "roles") has the proto's.
    changed = sp.with_roles(bos=None, pad="<unk>")
    changed.save(tmp_path / "sp.json")
    again = fb.load(tmp_path / "sp.json")
    assert again.roles == {"eos": "</s>", "pad": "<unk>", "unk": "<unk>"} and again == changed
    doc = json.loads((tmp_path / "sp.json").read_text(encoding="utf-8"))
    del doc["roles"]
    (tmp_path / "old.json").write_text(json.dumps(doc), encoding="utf-8")
    assert fb.load(tmp_path / "old.json").roles == sp.roles
    with pytest.raises(fb.TokenRoleError, match="eos_token"):
        sp.with_roles(eos="▁the")  # a normal piece is no special one


def test_sentencepiece_style_training_roles():
    sp = fb.train(TEXTS, vocab_size=400, whitespace="\u2581", special_tokens=["<sep>"],
                  roles={"pad": "<sep>"})
    assert sp.pad_token == "<sep>" and sp.eos_token == "</s>"
    assert sp.pad_token_id == sp.token_to_id(b"<sep>")
