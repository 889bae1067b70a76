"""The contract every preset keeps: each entry point of ``fastbpe_nb.Tokenizer``, the same ids.

Run over ``presets.FACTORIES`` (byte-level gpt2, the real cl100k_base, char-level with
``</w>``, SentencePiece-style with byte fallback and with an unknown piece, a Hugging Face
``tokenizer.json``) on the texts below:

* round trip: ``decode(encode(t))`` is ``t``, or the preset's own normalization of ``t``
  (char-level: words joined by one space; SentencePiece: what ``sentencepiece`` decodes);
* ``encode`` = ``encode_batch`` row = ``encode_to_numpy`` = Arrow ``encode_batch`` row
  (nulls stay null) = ``count_tokens`` = the ids ``encode_parquet`` writes (Parquet and
  ``.bin``) = the ids ``python -m fastbpe_nb encode`` prints for the saved model;
* ``encode_ordinary``, ``encode_bytes``, special tokens, ``stream_decoder``;
* ``save`` + ``fb.load`` and pickling give an equal tokenizer with the same ids;
* 8 threads give the serial ids; ``fastbpe_nb.inspect`` and ``fastbpe_nb.stats`` run;
* the same ids as the peer library where there is one (tiktoken, tokenizers, sentencepiece).

A preset that is not a ``fastbpe_nb.Tokenizer`` (or lacks an entry point) fails here: the
presets are configurations of the one class, not classes of their own.
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys

import numpy as np
import presets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from presets import FACTORIES, SAMPLE, SENTENCEPIECE, UNSEEN

import fastbpe_nb as fb

EOT = "<|endoftext|>"
ALL = {"allowed_special": "all"}

TEXTS = {
    "english": SAMPLE[0],
    "german": SAMPLE[1],
    "russian": SAMPLE[2],
    "chinese": SAMPLE[3],
    "emoji": SAMPLE[4],
    "digits": SAMPLE[5],
    "whitespace": "  \t\n\n   x  \r\n  \t  y   \n",
    "code": SAMPLE[7],
    "empty": "",
    "special": f"first document{EOT}second one, {EOT} and <|endoftext| almost",
}


def _long_text() -> str:
    """~200 KB of the short texts in a fixed random order (every preset's alphabet has them)."""
    rnd = random.Random(16)
    parts, size = [], 0
    while size < 200_000:
        part = rnd.choice(SAMPLE) + rnd.choice([" ", "\n", "\n\n", "  ", "\t"])
        parts.append(part)
        size += len(part.encode("utf-8"))
    return "".join(parts)


LONG = _long_text()
ALL_TEXTS = dict(TEXTS, long=LONG)


@pytest.fixture(params=[name for name, _ in FACTORIES], scope="module")
def preset(request):
    """``(name, tokenizer)`` of one preset."""
    return request.param, presets.build(request.param)


# ------------------------------------------------------------------------------- peers
_SPM: dict = {}


def sentencepiece_peer(name, tok, tmp_path_factory):
    """The ``sentencepiece.SentencePieceProcessor`` of a SentencePiece preset's export."""
    if name not in _SPM:
        spm = pytest.importorskip("sentencepiece")
        path = tmp_path_factory.mktemp("spm") / f"{name}.model"
        if hasattr(tok, "to_sentencepiece"):
            tok.to_sentencepiece(path)
        else:
            fb.to_sentencepiece(tok, path)
        _SPM[name] = spm.SentencePieceProcessor(model_file=str(path))
    return _SPM[name]


def expected_text(name, tok, text, tmp_path_factory) -> str:
    """What ``decode(encode(text))`` must give for this preset."""
    if name in SENTENCEPIECE:  # SentencePiece's normalization (whitespace, unknowns)
        sp = sentencepiece_peer(name, tok, tmp_path_factory)
        return sp.decode(sp.encode(text))
    if getattr(tok, "normalization", None):
        import unicodedata

        text = unicodedata.normalize(tok.normalization, text)
    if getattr(tok, "base", "bytes") == "chars":  # the words, one space apart
        return " ".join(fb.split(text, tok.pattern, keep_gaps=False))
    return text


def peer_encoder(name, tok, tmp_path_factory):
    """``text -> ids`` of the peer library for this preset, or None when there is none."""
    if name == "cl100k-tiktoken":
        tiktoken = pytest.importorskip("tiktoken")
        from tiktoken.load import load_tiktoken_bpe

        enc = tiktoken.Encoding("cl100k_local", pat_str=fb.NAMED_PATTERNS["cl100k"],
                                mergeable_ranks=load_tiktoken_bpe(str(presets.cl100k_ranks_path())),
                                special_tokens=presets.CL100K_SPECIALS)
        return lambda t: enc.encode(t, allowed_special="all")
    if name == "gpt2-bytes":
        pytest.importorskip("tiktoken")
        import peers

        enc = peers.tiktoken_encoding(tok.vocab[:tok.n_regular], "gpt2", tok.special_tokens)
        return lambda t: enc.encode(t, allowed_special="all")
    if name == "hf-tokenizer-json":
        tokenizers = pytest.importorskip("tokenizers")
        hf = tokenizers.Tokenizer.from_file(str(presets.hf_json_path()))
        return lambda t: hf.encode(t, add_special_tokens=False).ids
    if name in SENTENCEPIECE:
        sp = sentencepiece_peer(name, tok, tmp_path_factory)
        return sp.encode
    if name == "superbpe":  # its tokenizer.json export, in Hugging Face's library
        tokenizers = pytest.importorskip("tokenizers")
        path = tmp_path_factory.mktemp("superbpe") / "tokenizer.json"
        tok.to_huggingface(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        return lambda t: hf.encode(t, add_special_tokens=False).ids
    return None


# ------------------------------------------------------------------------------ checks
def test_preset_is_a_tokenizer(preset):
    name, tok = preset
    assert isinstance(tok, fb.Tokenizer), f"{name} is a {type(tok).__name__}, not a fb.Tokenizer"


def test_round_trip(preset, tmp_path_factory):
    name, tok = preset
    for key, text in ALL_TEXTS.items():
        ids = tok.encode(text, **ALL)
        assert tok.decode(ids) == expected_text(name, tok, text, tmp_path_factory), key


def test_same_ids_as_the_peer_library(preset, tmp_path_factory):
    name, tok = preset
    peer = peer_encoder(name, tok, tmp_path_factory)
    if peer is None:
        pytest.skip(f"no peer library encodes the {name} preset")
    for key, text in ALL_TEXTS.items():
        assert tok.encode(text, **ALL) == peer(text), key


def test_every_encode_entry_point_gives_the_same_ids(preset):
    name, tok = preset
    texts = list(ALL_TEXTS.values())
    want = [tok.encode(t, **ALL) for t in texts]
    for text, ids in zip(texts, want):
        arr = tok.encode_to_numpy(text, **ALL)
        assert arr.dtype == np.uint32 and arr.tolist() == ids
        assert tok.count_tokens(text, **ALL) == len(ids)
    assert tok.encode_batch(texts, **ALL) == want
    assert tok.count_tokens(texts, **ALL).tolist() == [len(ids) for ids in want]
    # Arrow in, Arrow out: nulls stay null (and count 0 tokens), in every string layout.
    rows = [None] + texts[:5] + [None, None] + texts[5:] + [None]
    row_ids = [None if r is None else want[texts.index(r)] for r in rows]
    for array in (pa.array(rows, pa.string()),
                  pa.chunked_array([rows[:4], rows[4:]], pa.large_string())):
        out = tok.encode_batch(array, **ALL)
        assert isinstance(out, (pa.ListArray, pa.LargeListArray)), type(out)
        assert out.null_count == 4
        assert out.to_pylist() == row_ids
        counts = tok.count_tokens(array, **ALL)
        assert counts.tolist() == [0 if r is None else len(r) for r in row_ids]


def test_encode_parquet_writes_the_same_ids(preset, tmp_path):
    name, tok = preset
    texts = list(ALL_TEXTS.values())
    rows = texts[:4] + [None] + texts[4:]
    src = tmp_path / "in" / "docs.parquet"
    src.parent.mkdir()
    pq.write_table(pa.table({"text": pa.array(rows, pa.large_string())}), src, row_group_size=3)
    want = [None if r is None else tok.encode(r, **ALL) for r in rows]
    report = fb.encode_parquet(tok, src, tmp_path / "pq", special="allow", num_threads=2)
    assert report["rows"] == len(rows) and report["null_rows"] == 1
    assert pq.read_table(tmp_path / "pq" / "docs.parquet").column("ids").to_pylist() == want
    # .bin: every non-null document followed by the separator.
    sep = tok.special_tokens.get(EOT, 0)
    fb.encode_parquet(tok, src, tmp_path / "bin", format="bin", separator=sep, special="allow")
    ids, index = fb.read_bin(tmp_path / "bin" / "docs.bin")
    real = [w for w in want if w is not None]
    assert len(index) == len(real) + 1
    for k, doc_ids in enumerate(real):
        assert ids[index[k]:index[k + 1]].tolist() == doc_ids + [sep], k


def test_cli_encode_prints_the_same_ids(preset, tmp_path):
    name, tok = preset
    model = tmp_path / "model.json"
    tok.save(model)
    text = "\n".join(TEXTS.values())
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    out = subprocess.run([sys.executable, "-m", "fastbpe_nb", "encode", "--model", str(model),
                          "--special", "allow"], input=text.encode("utf-8"),
                         capture_output=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert [int(x) for x in out.stdout.split()] == tok.encode(text, **ALL)


def test_encode_ordinary_and_special_tokens(preset):
    name, tok = preset
    for key, text in TEXTS.items():
        ordinary = tok.encode_ordinary(text)
        assert ordinary == tok.encode(text, disallowed_special=()), key
        if EOT not in text:
            assert ordinary == tok.encode(text), key
    text = TEXTS["special"]
    if EOT in tok.special_tokens:
        eot = tok.special_tokens[EOT]
        with pytest.raises(fb.DisallowedSpecialTokenError):
            tok.encode(text)
        assert tok.encode(text, allowed_special="all").count(eot) == 2
        assert tok.encode(text, allowed_special={EOT}).count(eot) == 2
        assert eot not in tok.encode_ordinary(text)
    else:
        assert tok.encode(text) == tok.encode_ordinary(text)


def test_encode_bytes(preset):
    name, tok = preset
    try:
        tok.encode_bytes(b"probe")
    except Exception as exc:
        # A preset without a byte-level form refuses with a clear error of our own.
        assert isinstance(exc, fb.FastBPEError), f"{type(exc).__name__}: {exc}"
        return
    for key, text in TEXTS.items():
        data = text.encode("utf-8")
        ids = tok.encode_bytes(data)
        assert ids == tok.encode_ordinary(text), key
        assert tok.decode_bytes(ids) == data, key
    for data in (b"\xff\xfe invalid \xc3", b"\xe6\x9d", bytes(range(256))):
        assert tok.decode_bytes(tok.encode_bytes(data)) == data


def test_stream_decoder_equals_decode(preset):
    name, tok = preset
    for key, text in TEXTS.items():
        ids = tok.encode(text, **ALL)
        sd = tok.stream_decoder()
        parts = [sd.push(i) for i in ids]
        assert all(isinstance(p, str) for p in parts)
        assert "".join(parts) + sd.flush() == tok.decode(ids), key


def test_save_and_load(preset, tmp_path):
    name, tok = preset
    path = tmp_path / "model.json"
    tok.save(path)
    back = fb.load(path)
    assert type(back) is type(tok) and back == tok
    for key, text in TEXTS.items():
        assert back.encode(text, **ALL) == tok.encode(text, **ALL), key


def test_pickle_round_trip(preset):
    name, tok = preset
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(tok, protocol=protocol))
        assert type(back) is type(tok) and back == tok
        assert back.encode_batch(list(TEXTS.values()), **ALL) == \
            tok.encode_batch(list(TEXTS.values()), **ALL)


def _documents(n: int) -> list[str]:
    """``n`` documents of 0..60 words of the short texts (a fixed random mix)."""
    rnd = random.Random(8)
    words = " ".join(SAMPLE).split(" ")
    return [" ".join(rnd.choices(words, k=rnd.randint(0, 60))) for _ in range(n)]


def test_eight_threads_give_the_serial_ids(preset):
    name, tok = preset
    docs = _documents(200)
    serial = tok.encode_batch(docs, num_threads=1)
    assert serial == [tok.encode(d) for d in docs]
    assert tok.encode_batch(docs, num_threads=8) == serial
    assert tok.encode_batch(pa.array(docs), num_threads=8).to_pylist() == serial
    assert tok.count_tokens(docs, num_threads=8).tolist() == [len(s) for s in serial]


def test_inspect_and_stats(preset):
    from fastbpe_nb import inspect, stats

    name, tok = preset
    text = TEXTS["english"]
    got = inspect.pieces(tok, text)
    assert [i for i, _ in got] == tok.encode(text)
    assert str(len(got)) in inspect.format_pieces(tok, text)
    assert [r["count"] for r in inspect.word_rows(tok, ["the", "Straße"])] == \
        [len(tok.encode("the")), len(tok.encode("Straße"))]
    assert len(inspect.trace_rows(tok, limit=5)) == 5
    last = int(tok.merge_ids[-1])
    if getattr(tok, "n_pruned", 0):  # merge ids number the unpruned tokens: the last kept one
        last = tok.n_regular - 1
    tree = inspect.construction_tree(tok, last)
    assert tree["kind"] == "merge" and inspect.format_tree(tree)

    def leaves(node):
        return node["bytes"] if not node["children"] else b"".join(map(leaves, node["children"]))

    assert leaves(tree) == tok.vocab[last]
    row = stats.measure_text(tok, LONG[:20_000])
    assert row["tokens"] == tok.count_tokens(LONG[:20_000], disallowed_special=())
    assert row["bytes_per_token"] > 1


def test_unseen_characters(preset, tmp_path_factory):
    name, tok = preset
    text = f"known {UNSEEN} words"
    if name in SENTENCEPIECE:
        sp = sentencepiece_peer(name, tok, tmp_path_factory)
        ids = tok.encode(text)
        assert ids == sp.encode(text)
        assert (sp.unk_id() in ids) == (name == "sp-unk")  # unk, or byte pieces
        assert tok.decode(ids) == sp.decode(ids)
    elif getattr(tok, "base", None) == "chars":
        with pytest.raises(fb.UnknownCharacterError, match="U\\+13E3"):
            tok.encode(text)
    else:
        assert tok.decode(tok.encode(text)) == text
