"""Vocabulary pruning (``train(..., prune_min_count=, prune_ratio=)``, ``tok.pruned``)
against the specification (``reference.prune_select`` / ``encode_pruned``): the same
removed tokens and the same compact ids on hypothesis corpora and tie-heavy seeded corpora,
every tie rule, byte and char level; the model file, exports, CLI and a forked child.
"""

import json
import multiprocessing
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb.errors import LossyExportError, ModelFormatError, TrainingError

from fbtest import NOJIT, REPO, assert_same_model
from fbtest import spaced_word_corpus as tie_heavy_corpus

TIES = ["ids", "hf", "first", "bytes"]
EXAMPLES = 25 if NOJIT else 120
SPECIALS = ["<|s|>", "<|e|>"]

alphabets = st.sampled_from(["ab", "abc", "ab ", "aab ", "abé ", "a中b ", "ab\n", "abcd "])
min_counts = st.one_of(st.none(), st.integers(1, 12))
ratios = st.one_of(st.none(), st.sampled_from([0.05, 0.1, 0.25, 1 / 3, 0.5, 0.75, 1.0]))


@st.composite
def corpora(draw):
    alphabet = draw(alphabets)
    return draw(st.lists(st.text(alphabet=alphabet, min_size=0, max_size=30), min_size=1,
                         max_size=8))


def check_against_reference(tok, model, removed, texts, allowed=(), full=None):
    """``tok`` (pruned) encodes and decodes every text as the specification does, with
    compact ids (char level: decodes as the unpruned ``full`` does)."""
    assert tok.pruned_ids == removed
    assert tok.pruned_tokens == [model.token_bytes[t] for t in removed]
    n_kept = len(model.token_bytes) - len(removed)
    assert tok.n_regular == n_kept
    assert tok.vocab_size == model.vocab_size - len(removed)
    for text in texts:
        ids = tok.encode(text, allowed_special=allowed)
        assert ids == ref.encode_pruned(text, model, removed, allowed), text
        if model.base == "bytes":
            assert tok.decode_bytes(ids) == ref.decode_pruned(ids, model, removed)
            assert tok.decode(ids) == text
        else:
            assert tok.decode(ids) == full.decode(full.encode(text))
        assert all(0 <= i < tok.vocab_size for i in ids)
        if not any(s in text for s in model.special_tokens):
            assert all(i < n_kept for i in ids)


def assert_pruning_matches(docs, *, min_count, ratio, extra=(), **opts):
    model = ref.train(docs, **opts)
    words = ref.pruning_words(docs, model, opts.get("special_tokens", ()))
    removed = ref.prune_select(model, words, min_count, ratio)
    tok = fb.train(docs, prune_min_count=min_count, prune_ratio=ratio, **opts)
    full = fb.train(docs, **opts)
    assert_same_model(full, model)
    check_against_reference(tok, model, removed, list(docs) + list(extra), allowed="all")
    # The same tokenizer from tok.pruned() on the same documents.
    again = full.pruned(docs, min_count=min_count, ratio=ratio)
    assert again == tok and again.pruned_ids == removed
    return tok, model, removed


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), min_count=min_counts, ratio=ratios,
       vocab_size=st.integers(256, 320), n_special=st.integers(0, 2),
       pattern=st.sampled_from([None, "gpt2", r"\S+|\s+"]), extra=st.lists(
           st.text(alphabet="abcé中 \n", max_size=30), max_size=3))
def test_byte_level_pruning_matches_reference(docs, tie, min_count, ratio, vocab_size,
                                              n_special, pattern, extra):
    if min_count is None and ratio is None:
        min_count = 2
    specials = SPECIALS[:n_special]
    vocab_size = max(vocab_size, 256 + n_special)
    assert_pruning_matches(docs, min_count=min_count, ratio=ratio, extra=extra,
                           vocab_size=vocab_size, tie_break=tie, special_tokens=specials,
                           pattern=pattern)


@settings(max_examples=EXAMPLES // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), min_count=min_counts, ratio=ratios, vocab_size=st.integers(1, 60))
def test_char_level_pruning_matches_reference(docs, min_count, ratio, vocab_size):
    if min_count is None and ratio is None:
        ratio = 0.5
    docs = [d for d in docs if d.strip()] or ["ab ab"]
    n_alpha = len(set("".join(docs)) - set(" \n")) + 1
    opts = dict(vocab_size=n_alpha + vocab_size, base="chars", end_of_word="</w>",
                pattern="default")
    model = ref.train(docs, **opts)
    words = ref.pruning_words(docs, model)
    removed = ref.prune_select(model, words, min_count, ratio)
    tok = fb.train(docs, prune_min_count=min_count, prune_ratio=ratio, **opts)
    check_against_reference(tok, model, removed, docs, full=fb.train(docs, **opts))


@pytest.mark.parametrize("seed", range(3 if NOJIT else 6))
@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("rule", [(2, None), (None, 0.5), (5, 0.25), (10**9, None)])
def test_tie_heavy_corpora_match_reference(seed, tie, rule):
    docs = tie_heavy_corpus(seed)
    min_count, ratio = rule
    tok, model, removed = assert_pruning_matches(
        docs + ["<|e|>" + docs[0]], min_count=min_count, ratio=ratio, vocab_size=380,
        tie_break=tie, special_tokens=["<|e|>"], extra=tie_heavy_corpus(seed + 100, 10))
    assert len(model.merges) >= 20
    if min_count == 10**9:  # every merged token goes: ids are the bytes, then the special
        assert tok.vocab_size == 257 and tok.encode("abc") == [97, 98, 99]
    check_against_reference(tok, model, removed, ["<|e|>ab<|e|>"], allowed="all")


def test_word_count_dict_and_pruned_of_other_texts():
    docs = tie_heavy_corpus(3, 100)
    full = fb.train(docs, vocab_size=360)
    model = ref.train(docs, vocab_size=360)
    words = {"abc": 5, " abc": 40, "de": 1, " ddd": 3}
    removed = ref.prune_select(model, words, 4, 0.3)
    tok = full.pruned(words, min_count=4, ratio=0.3)
    check_against_reference(tok, model, removed, docs)
    other = tie_heavy_corpus(9, 30)  # measured on other texts than trained on
    removed = ref.prune_select(model, ref.pruning_words(other, model), 3)
    check_against_reference(full.pruned(other, min_count=3), model, removed, docs)


def test_compact_ids_and_freed_ids_reported():
    docs = tie_heavy_corpus(1, 200)
    tok, report = fb.train(docs, vocab_size=400, special_tokens=["<|endoftext|>"],
                           prune_min_count=20, return_report=True)
    full = fb.train(docs, vocab_size=400, special_tokens=["<|endoftext|>"])
    assert report["pruned"]["removed"] == tok.n_pruned == len(tok.pruned_ids) > 0
    assert report["pruned"]["vocab_size_before"] == full.vocab_size
    assert report["pruned"]["vocab_size_after"] == tok.vocab_size == full.vocab_size - tok.n_pruned
    assert tok.special_tokens == {"<|endoftext|>": tok.n_regular}  # right after the kept
    ids = tok.encode_batch(docs + ["<|endoftext|>"], allowed_special="all")
    assert max(max(i) for i in ids if i) == tok.vocab_size - 1
    assert tok.unused_ids == []
    assert [full.vocab[t] for t in tok.pruned_ids] == tok.pruned_tokens
    kept = [t for t in full.vocab[:full.n_regular] if t not in set(tok.pruned_tokens)]
    assert tok.vocab[:tok.n_regular] == kept  # kept tokens renumbered in id order


def test_all_entry_points_give_the_pruned_ids(tmp_path):
    import pyarrow as pa

    docs = tie_heavy_corpus(2, 100)
    tok = fb.train(docs, vocab_size=400, prune_ratio=0.5)
    model = ref.train(docs, vocab_size=400)
    removed = ref.prune_select(model, ref.pruning_words(docs, model), None, 0.5)
    expected = [ref.encode_pruned(d, model, removed) for d in docs]
    assert tok.encode_batch(docs, num_threads=2) == expected
    assert tok.encode_batch(pa.array(docs), num_threads=2).to_pylist() == expected
    assert [tok.encode_to_numpy(d).tolist() for d in docs] == expected
    assert [tok.encode_ordinary(d) for d in docs] == expected
    assert tok.encode_bytes("\n".join(docs).encode()) == ref.encode_pruned("\n".join(docs),
                                                                           model, removed)
    ids, offsets = tok.encode_with_offsets(docs[5])
    assert ids == expected[5]
    assert "".join(docs[5][a:b] for a, b in offsets) == docs[5]
    assert tok.decode_batch(expected) == docs


def test_huge_text_takes_the_segmented_path(monkeypatch):
    from fastbpe_nb import encoder

    docs = tie_heavy_corpus(4, 100)
    tok = fb.train(docs, vocab_size=400, prune_min_count=8)
    model = ref.train(docs, vocab_size=400)
    removed = ref.prune_select(model, ref.pruning_words(docs, model), 8)
    text = " ".join(docs)
    monkeypatch.setattr(encoder, "SEGMENT_BYTES", 64)
    assert tok._encoder.may_be_huge(text)
    assert tok.encode(text) == ref.encode_pruned(text, model, removed)


def _encode_in_child(args):
    path, texts = args
    return fb.load(path).encode_batch(texts, num_threads=2)


def test_model_file_pickle_and_forked_child(tmp_path):
    import pickle

    docs = tie_heavy_corpus(5, 100)
    tok = fb.train(docs, vocab_size=400, special_tokens=["<|endoftext|>"], prune_min_count=6,
                   roles={"eos": "<|endoftext|>"})
    path = tmp_path / "pruned.json"
    tok.save(path)
    doc = json.loads(path.read_text())
    assert doc["pruned"] == tok.pruned_ids
    assert doc["special_tokens"] == [["<|endoftext|>", tok.n_regular]]
    loaded = fb.load(path)
    assert loaded == tok and loaded.pruned_ids == tok.pruned_ids
    assert loaded.special_tokens == tok.special_tokens and loaded.roles == tok.roles
    loaded.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert pickle.loads(pickle.dumps(tok)) == tok
    expected = tok.encode_batch(docs)
    assert loaded.encode_batch(docs) == expected
    ctx = multiprocessing.get_context("fork")
    tok.encode_batch(docs, num_threads=2)  # the parent's thread pool exists before the fork
    with ctx.Pool(2) as pool:
        # Timeouts: a child that dies fails the test instead of hanging the parent.
        got = pool.map_async(_encode_in_child,
                             [(str(path), docs[:50]), (str(path), docs[50:])]).get(timeout=600)
    assert got[0] + got[1] == expected
    with ctx.Pool(1) as pool:  # the parent's tokenizer, inherited
        assert pool.map_async(tok.encode, docs[:10]).get(timeout=600) == expected[:10]


def _prune_in_child(args):
    tok, docs = args
    pruned = tok.pruned(docs, min_count=6, num_threads=2)
    return pruned.pruned_ids, pruned.encode_batch(docs[:20], num_threads=2)


def test_pruning_and_training_in_a_forked_child():
    """``tok.pruned`` and ``train(..., prune_min_count=)`` encode the word table on all
    cores: in a child forked after the parent's thread pool ran, they give the parent's
    removed ids and encodings, and do not hang."""
    docs = tie_heavy_corpus(5, 100)
    full = fb.train(docs, vocab_size=400)
    pruned = full.pruned(docs, min_count=6, num_threads=2)  # the pool runs in the parent
    expected = (pruned.pruned_ids, pruned.encode_batch(docs[:20], num_threads=2))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.map_async(_prune_in_child, [(full, docs)], chunksize=1).get(timeout=600)
        assert got[0] == expected
        trained = pool.apply_async(fb.train, (docs,),
                                   {"vocab_size": 400, "prune_min_count": 6}).get(timeout=600)
    assert trained.pruned_ids == expected[0]


@pytest.mark.parametrize("pruned, reason", [
    ("[1, 2]", "is a base symbol"),
    ('"300"', "list of integer"),
    ("[300.0]", "list of integer"),
    ("[true]", "list of integer"),
    ("[301, 300]", "ascending"),
    ("[300, 300]", "ascending"),
    ("[99999]", "not a merged token"),
    ("[-3]", "not a merged token"),
])
def test_bad_pruned_entries_are_rejected(tmp_path, pruned, reason):
    docs = tie_heavy_corpus(6, 100)
    tok = fb.train(docs, vocab_size=400, prune_min_count=3)
    path = tmp_path / "m.json"
    tok.save(path)
    text = path.read_text()
    start = text.index('"pruned": ')
    end = text.index("\n", start)
    path.write_text(text[:start] + f'"pruned": {pruned},' + text[end:])
    with pytest.raises(ModelFormatError, match=reason) as info:
        fb.load(path)
    assert str(path) in str(info.value) and "pruned" in str(info.value)


def test_special_ids_of_a_pruned_file_are_the_compact_ones(tmp_path):
    docs = tie_heavy_corpus(6, 100)
    tok = fb.train(docs, vocab_size=400, prune_min_count=3, special_tokens=["<|e|>"])
    path = tmp_path / "m.json"
    tok.save(path)
    doc = json.loads(path.read_text())
    doc["special_tokens"] = [["<|e|>", tok.n_regular - 1]]  # a kept regular token's id
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match="special"):
        fb.load(path)


def test_exports_are_refused_by_name(tmp_path):
    docs = tie_heavy_corpus(7, 100)
    tok = fb.train(docs, vocab_size=400, prune_min_count=3)
    for verb in ("to_tiktoken", "to_huggingface", "to_sentencepiece", "save_pretrained"):
        with pytest.raises(LossyExportError, match="vocabulary pruning"):
            getattr(tok, verb)(tmp_path / verb)
        assert not (tmp_path / verb).exists() or not any((tmp_path / verb).iterdir())
    with pytest.raises(LossyExportError, match="vocabulary pruning"):
        tok.to_tiktoken(tmp_path / "lossy", allow_lossy=True)  # not a lossy normalization


def test_bad_options_are_refused():
    docs = tie_heavy_corpus(8, 20)
    for bad in (dict(prune_min_count=0), dict(prune_min_count=2.5), dict(prune_ratio=0),
                dict(prune_ratio=1.5), dict(prune_ratio="0.5"), dict(prune_min_count=True)):
        with pytest.raises(ValueError, match="prune"):
            fb.train(docs, vocab_size=300, **bad)
    with pytest.raises(TrainingError, match="SuperBPE"):
        fb.train(docs, vocab_size=320, superbpe_transition=300, prune_min_count=2)
    with pytest.raises(TrainingError, match="whitespace"):
        fb.train(docs, vocab_size=320, whitespace="\u2581", prune_min_count=2)
    tok = fb.train(docs, vocab_size=300, prune_min_count=2)
    with pytest.raises(TrainingError, match="unpruned"):
        tok.pruned(docs, min_count=3)
    with pytest.raises(ValueError, match="min_count or ratio"):
        fb.train(docs, vocab_size=300).pruned(docs)


def test_train_files_prunes_like_train(tmp_path):
    docs = tie_heavy_corpus(10, 200)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(d + "\n" for d in docs), encoding="utf-8")
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    from_files = fb.train_files([corpus], vocab_size=400, prune_min_count=4, prune_ratio=0.2)
    from_texts = fb.train(["".join(lines)], vocab_size=400, prune_min_count=4, prune_ratio=0.2)
    assert from_files.pruned_ids == from_texts.pruned_ids and from_files.n_pruned > 0


def test_cli_train_prunes(tmp_path):
    docs = tie_heavy_corpus(11, 200)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(d + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "m.json"
    res = subprocess.run([sys.executable, "-m", "fastbpe_nb", "train", str(corpus), "-o",
                          str(out), "--vocab-size", "400", "--prune-min-count", "4",
                          "--prune-ratio", "0.2"], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout[:res.stdout.rindex("}") + 1])
    tok = fb.load(out)
    assert report["pruned"]["removed"] == tok.n_pruned > 0
    assert tok.pruned_ids == fb.train_files([corpus], vocab_size=400, prune_min_count=4,
                                            prune_ratio=0.2).pruned_ids
    cluster = subprocess.run([sys.executable, "-m", "fastbpe_nb", "train", str(corpus), "-o",
                              str(tmp_path / "c.json"), "--prune-min-count", "4", "--dask",
                              "local:1"], capture_output=True, text=True, cwd=REPO)
    assert cluster.returncode != 0 and "--prune-min-count is not supported" in cluster.stderr
    bad = subprocess.run([sys.executable, "-m", "fastbpe_nb", "train", str(corpus), "-o",
                          str(tmp_path / "x.json"), "--prune-ratio", "2"],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode != 0 and "prune-ratio" in bad.stderr


def test_postprocess_kernel_tables_directly():
    """The demolish table of a chain: every removed token splits into kept ones, left to
    right, and a kept token is its own compact id."""
    from fastbpe_nb.kernels.prune import demolish_table, occurrence_totals

    # ids 0..3 base; 4 = 0+1, 5 = 4+2, 6 = 5+4; remove 4 and 5.
    left = np.array([-1, -1, -1, -1, 0, 4, 5], np.int32)
    right = np.array([-1, -1, -1, -1, 1, 2, 4], np.int32)
    keep = np.array([1, 1, 1, 1, 0, 0, 1], bool)
    compact = (np.cumsum(keep) - 1).astype(np.int32)
    off, seqs = demolish_table(keep, compact, left, right, 4)
    assert [seqs[off[t]:off[t + 1]].tolist() for t in range(7)] == [
        [0], [1], [2], [3], [0, 1], [0, 1, 2], [4]]
    final = np.array([0, 0, 0, 0, 1, 2, 3], np.int64)
    assert occurrence_totals(final, left, right, 4).tolist() == [
        6 + 3, 6 + 3, 5, 0, 1 + 5 + 3, 2 + 3, 3]


def test_unpruned_view_and_inspect():
    from fastbpe_nb import inspect

    docs = tie_heavy_corpus(12, 200)
    full = fb.train(docs, vocab_size=400, special_tokens=["<|e|>"])
    tok = full.pruned(docs, ratio=0.5)
    assert tok.unpruned == full and full.unpruned is full
    assert np.array_equal(tok.merges, full.merges)  # the encoder's program, unpruned ids
    removed = set(tok.pruned_ids)
    for u in range(full.vocab_size):
        c = tok.compact_id(u)
        assert (c is None) == (u in removed)
        if c is not None:
            assert tok.unpruned_id(c) == u and tok.vocab[c] == full.vocab[u]
    # A kept token made from a removed one: the tree shows it without an id.
    parts = {int(m): tuple(p) for p, m in zip(full.merges.tolist(), full.merge_ids.tolist())}
    kept = next(u for u, (a, b) in parts.items() if u not in removed and (a in removed or b in removed))
    tree = inspect.construction_tree(tok, tok.compact_id(kept))
    assert tree["id"] == tok.compact_id(kept) and None in [c["id"] for c in tree["children"]]
    assert "(pruned)" in inspect.format_tree(tree)
    assert len(inspect.trace_rows(tok)) == len(full.merges)


def test_a_pruning_that_removes_nothing_round_trips(tmp_path):
    docs = tie_heavy_corpus(13, 50)
    full = fb.train(docs, vocab_size=330, special_tokens=["<|e|>"])
    tok = full.with_pruned([])
    assert tok.n_pruned == 0 and tok.vocab == full.vocab
    assert tok.encode_batch(docs) == full.encode_batch(docs)
    tok.save(tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text())["pruned"] == []
    assert fb.load(tmp_path / "m.json") == tok


def test_a_loaded_tokenizer_json_and_special_ids_with_gaps():
    """A tokenizer.json loaded with its byte order (HF numbers the bytes otherwise) prunes
    like ours: every id is the demolished unpruned id; explicit special ids keep their gap."""
    import presets

    hf = presets.hf_tokenizer_json()
    docs = list(presets.corpus())
    tok = hf.pruned(docs, min_count=3)
    assert tok.n_pruned > 0
    for doc in docs[:40] + presets.SAMPLE:
        ids = tok.encode(doc)
        assert tok.decode(ids) == doc
        assert ids == [c for t in hf.encode(doc) for c in tok.model.demolished(t)]
    n = hf.n_regular
    gaps = fb.Tokenizer(hf.merges, pattern="gpt2", byte_order=hf.byte_order,
                        special_tokens={"<a>": n + 3, "<b>": n}).pruned(docs, min_count=3)
    m = gaps.n_regular
    assert gaps.special_tokens == {"<a>": m + 3, "<b>": m} and gaps.unused_ids == [m + 1, m + 2]
    assert gaps.encode("x<a>y<b>", allowed_special="all")[1::2] == [m + 3, m]


def test_train_files_from_a_counts_file(tmp_path):
    docs = tie_heavy_corpus(14, 200)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(d + "\n" for d in docs), encoding="utf-8")
    counts = tmp_path / "counts.arrow"
    fb.count_to_file([corpus], counts)
    from_counts = fb.train_files([counts], vocab_size=400, prune_min_count=4)
    from_corpus = fb.train_files([corpus], vocab_size=400, prune_min_count=4)
    assert from_counts == from_corpus and from_counts.n_pruned > 0
