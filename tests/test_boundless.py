"""BoundlessBPE (``train(..., boundless=True)``) against its specification,
``reference.train_boundless`` / ``reference.encode_boundless``: merges, ids, counts and
supermerge flags identical for every tie rule, on hypothesis corpora and tie-heavy seeded
ones; encoding as the reference encodes; save/load, forked children, refused exports.
"""

import multiprocessing

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref

from fbtest import NOJIT, assert_same_model
from fbtest import SEPARATORS, punctuated_word_corpus

TIES = ["ids", "hf", "first", "bytes"]
EXAMPLES = 30 if NOJIT else 120

# Few letters with spaces: word pairs repeat, so supermerges compete with ordinary merges;
# punctuation, digits and newlines break the runs of word pre-tokens.
alphabets = st.sampled_from(["ab ", "ab  ", "ab .", "ab, \n", "a1 b", "aé !", "x中 .",
                             "abc 'd", "ab \t"])


@st.composite
def corpora(draw):
    alphabet = draw(alphabets)
    return draw(st.lists(st.text(alphabet=alphabet, min_size=0, max_size=40), min_size=1,
                         max_size=8))


def assert_same_boundless(tok, model):
    assert_same_model(tok, model)
    assert tok.model.superword.tolist() == model.superword


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), vocab=st.integers(256, 320),
       min_frequency=st.integers(0, 3), max_len=st.one_of(st.none(), st.integers(1, 8)),
       pattern=st.sampled_from(["gpt2", "cl100k"]))
def test_boundless_matches_reference(docs, tie, vocab, min_frequency, max_len, pattern):
    opts = dict(vocab_size=vocab, tie_break=tie, min_frequency=min_frequency,
                max_token_length=max_len, pattern=pattern)
    model = ref.train_boundless(docs, **opts)
    tok = fb.train(docs, boundless=True, **opts)
    assert_same_boundless(tok, model)
    for doc in docs:
        ids = tok.encode(doc)
        assert ids == ref.encode_boundless(doc, model)
        assert tok.decode(ids) == doc


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=corpora(), tie=st.sampled_from(TIES), num_merges=st.integers(0, 60),
       n_special=st.integers(0, 2))
def test_num_merges_and_special_tokens(docs, tie, num_merges, n_special):
    specials = ["<|s|>", "<|e|>"][:n_special]
    docs = [d + "<|s|>" + d for d in docs]
    opts = dict(num_merges=num_merges, tie_break=tie, special_tokens=specials)
    model = ref.train_boundless(docs, **opts)
    tok = fb.train(docs, boundless=True, **opts)
    assert_same_boundless(tok, model)
    assert len(tok.merges) <= num_merges
    for doc in docs:
        assert tok.encode(doc, allowed_special="all") == ref.encode_boundless(doc, model, "all")


def tie_heavy_corpus(seed, n_docs=40):
    """``punctuated_word_corpus`` with one space more among the separators: more runs of
    words, so more supermerge candidates tie."""
    return punctuated_word_corpus(seed, n_docs, (" ",) + SEPARATORS)


@pytest.mark.parametrize("seed", range(4 if NOJIT else 10))
@pytest.mark.parametrize("tie", TIES)
def test_tie_heavy_corpora_match_reference(seed, tie):
    docs = tie_heavy_corpus(seed)
    model = ref.train_boundless(docs, vocab_size=400, tie_break=tie)
    tok = fb.train(docs, vocab_size=400, boundless=True, tie_break=tie)
    assert sum(model.superword) > 5  # both kinds were learned
    assert_same_boundless(tok, model)
    for doc in tie_heavy_corpus(seed + 100, 8):
        assert tok.encode(doc) == ref.encode_boundless(doc, model)


def test_overlapping_pairs_join_left_to_right():
    # "a a a a a": (a, " a") then (" a", " a") pairs overlap; joins must not.
    docs = ["a a a a a. a a a"] * 5 + ["b a a b"] * 3
    for tie in TIES:
        model = ref.train_boundless(docs, vocab_size=280, tie_break=tie)
        tok = fb.train(docs, vocab_size=280, boundless=True, tie_break=tie)
        assert_same_boundless(tok, model)
        for doc in docs + ["a a a a a a a", " a a b a"]:
            assert tok.encode(doc) == ref.encode_boundless(doc, model)


@pytest.fixture(scope="module")
def trained():
    docs = tie_heavy_corpus(21, 120) + ["the cat sat on the mat. " * 4] * 10
    model = ref.train_boundless(docs, vocab_size=420, special_tokens=["<|e|>"])
    tok = fb.train(docs, vocab_size=420, boundless=True, special_tokens=["<|e|>"])
    assert_same_boundless(tok, model)
    return tok, model


@settings(max_examples=200 if not NOJIT else 40, deadline=None)
@given(text=st.lists(st.sampled_from(
    list("abcd tehm.,\n12'") + ["<|e|>", "  ", "é", "中", "\U0001F600", "\u00a0", " the",
                                 " cat", " sat"]), max_size=30).map("".join))
def test_encode_matches_reference(trained, text):
    tok, model = trained
    ids = tok.encode(text, allowed_special="all")
    assert ids == ref.encode_boundless(text, model, "all")
    assert tok.decode(ids) == text
    assert tok.encode_ordinary(text) == ref.encode_boundless(text, model)


@pytest.fixture(scope="module")
def trained_cl100k():
    docs = tie_heavy_corpus(22, 120) + ["the cat sat on the mat. " * 4] * 10
    model = ref.train_boundless(docs, vocab_size=420, pattern="cl100k")
    tok = fb.train(docs, vocab_size=420, boundless=True, pattern="cl100k")
    assert_same_boundless(tok, model)
    return tok, model


@settings(max_examples=150 if not NOJIT else 30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(
    # The fixtures' superwords are pairs of these words: dense joins across every cut.
    [" a", " b", " c", " ca", " bb", " bad", " adaa", " cabb", "a", "b", "ca", " the", " cat",
     " sat", " mat", "  ", ".", ",", "\n", "12", "'s", "é", "中", "\u00a0", "!\n\n", " \n"]),
    min_size=10, max_size=80).map("".join),
       segment=st.sampled_from([8, 16, 48]), pattern=st.sampled_from(["gpt2", "cl100k"]))
@example(text=" the cat sat on the mat" * 10, segment=8, pattern="gpt2")
def test_huge_texts_are_cut_only_where_no_superword_spans(trained, trained_cl100k, text,
                                                          segment, pattern):
    """A text over SEGMENT_BYTES is encoded a segment at a time (bounded memory), cut
    only before a piece no superword can start with: the ids are the reference's."""
    from fastbpe_nb import encoder
    from fastbpe_nb.kernels import scan

    tok, model = trained if pattern == "gpt2" else trained_cl100k
    with pytest.MonkeyPatch.context() as patch:
        # The scanner emits a window's pieces at a time (32 KiB): small windows, so that
        # these short texts are cut too.
        patch.setattr(encoder, "SEGMENT_BYTES", segment)
        patch.setattr(scan, "WINDOW_BYTES", 32)
        patch.setattr(scan, "STREAM_BYTES", 8)
        assert tok.encode_ordinary(text) == ref.encode_boundless(text, model)
        assert tok.encode_batch([text, "the cat", text], num_threads=2) == \
            [ref.encode_boundless(t, model) for t in (text, "the cat", text)]


@pytest.mark.parametrize("name", ["kjv.txt", "fortunes_ru.txt"])
def test_huge_text_segments_on_real_text(monkeypatch, name):
    """Real text as one text in 256-byte segments (English; Russian, whose superwords
    start with non-ASCII bytes): many cuts, and the ids of the whole-text path (which the
    tests above hold to the reference). A text with no safe cut at all (only words and
    spaces) is encoded whole, as it must be."""
    from fbtest import CORPORA
    from fastbpe_nb import encoder
    from fastbpe_nb.kernels import scan

    path = CORPORA / name
    if not path.exists():
        pytest.skip("no shared corpora")
    text = path.read_text(encoding="utf-8")[:150000]
    tok = fb.train(text.splitlines(keepends=True), vocab_size=3000, boundless=True)
    assert tok.model.superword.sum() > 80
    want = tok.encode(text)  # under SEGMENT_BYTES: the whole text at once
    words = " ".join(text.split()[:2000])  # no newline, digit or punctuation? then whole
    words = "".join(c for c in words if c.isalpha() or c == " ")
    want_words = tok.encode(words)
    monkeypatch.setattr(encoder, "SEGMENT_BYTES", 256)
    monkeypatch.setattr(scan, "WINDOW_BYTES", 256)
    monkeypatch.setattr(scan, "STREAM_BYTES", 64)
    segments = []
    real = encoder.Encoder._segment
    monkeypatch.setattr(encoder.Encoder, "_segment", lambda self, data, start, *rest:
                        segments.append(start) or real(self, data, start, *rest))
    assert tok._encoder.may_be_huge(text)
    assert tok.encode(text) == want
    assert len(segments) > 50  # cut about every 256 bytes (where a line begins)
    assert tok.encode_to_numpy(text).tolist() == want
    assert tok.encode_batch(["a b", text], num_threads=2)[1] == want
    segments.clear()
    assert tok.encode(words) == want_words
    assert segments == [0]  # no piece to cut before: one segment, the whole text
    # In a child forked after the parent's thread pool ran (the small segments inherited).
    from fastbpe_nb import parallel

    assert parallel._numba_pool_started()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got, inherited = pool.apply_async(_encode_in_child, (tok, text)).get(timeout=600)
    assert inherited and got == want


def _encode_in_child(tok, text):
    from fastbpe_nb import parallel

    return tok.encode(text), parallel._pool_inherited


def test_every_batch_entry_point_agrees(trained):
    import pyarrow as pa

    tok, model = trained
    docs = tie_heavy_corpus(33, 30) + ["", "the cat sat on the mat the cat"]
    want = [ref.encode_boundless(d, model) for d in docs]
    assert tok.encode_batch(docs) == want
    assert tok.encode_batch(docs, num_threads=2) == want
    got = tok.encode_batch(pa.array(docs)).to_pylist()
    assert got == want
    assert [tok.encode_to_numpy(d).tolist() for d in docs] == want
    assert tok.encode_bytes("the cat sat".encode()) == ref.encode_boundless("the cat sat", model)


def _child_ids(tok, docs, queue):
    queue.put(tok.encode_batch(docs))


def test_forked_child_gives_the_same_ids(trained):
    tok, _ = trained
    docs = tie_heavy_corpus(34, 10)
    want = tok.encode_batch(docs)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_ids, args=(tok, docs, queue))
    child.start()
    got = queue.get(timeout=120)
    child.join(timeout=60)
    assert got == want and child.exitcode == 0


def _train_in_child(docs):
    tok = fb.train(docs, vocab_size=450, boundless=True, num_threads=2)
    return tok.merges.tolist(), tok.model.superword.tolist()


def test_training_in_a_forked_child():
    """Training runs the unit look-up on all cores for a big enough corpus: in a child
    forked after the parent's thread pool ran it learns the parent's merges and flags."""
    docs = tie_heavy_corpus(35, 8000)  # over 2**16 pre-tokens: the parallel look-up
    tok = fb.train(docs, vocab_size=450, boundless=True, num_threads=2)
    want = (tok.merges.tolist(), tok.model.superword.tolist())
    assert sum(want[1]) > 5
    with multiprocessing.get_context("fork").Pool(1) as pool:
        # A timeout: a child that dies (a parallel region entered after fork) fails the test
        # instead of leaving the parent waiting for ever. It compiles the serial twins.
        assert pool.apply_async(_train_in_child, (docs,)).get(timeout=600) == want


def test_iterator_and_arrow_inputs_and_train_files(tmp_path):
    import pyarrow as pa

    docs = tie_heavy_corpus(7)
    want = fb.train(docs, vocab_size=380, boundless=True)
    assert want.model.superword.any()
    for other in (fb.train(iter(docs), vocab_size=380, boundless=True),
                  fb.train(pa.array(docs), vocab_size=380, boundless=True)):
        assert np.array_equal(other.merges, want.merges)
        assert np.array_equal(other.model.superword, want.model.superword)
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"{i:03}.txt")
        paths[-1].write_text(doc, encoding="utf-8")
    from_files = fb.train_files([str(p) for p in paths], vocab_size=380, boundless=True)
    assert np.array_equal(from_files.merges, want.merges)
    assert np.array_equal(from_files.model.superword, want.model.superword)


def test_save_load_and_pickle_give_the_same_encoder(tmp_path):
    import pickle

    docs = tie_heavy_corpus(9)
    tok = fb.train(docs, vocab_size=380, boundless=True)
    tok.save(tmp_path / "m.json")
    back = fb.load(tmp_path / "m.json")
    again = pickle.loads(pickle.dumps(tok))
    for other in (back, again):
        assert np.array_equal(other.merges, tok.merges)
        assert np.array_equal(other.model.superword, tok.model.superword)
        for doc in tie_heavy_corpus(10, 10):
            assert other.encode(doc) == tok.encode(doc)


def test_equality_sees_the_supermerge_flags(tmp_path):
    """The same merges with fewer of them flagged as supermerges is another tokenizer (a
    supermerge left unflagged is an ordinary merge that never fires): not equal."""
    import json

    tok = fb.train(["the cat the dog the cat sat on the mat"] * 50, vocab_size=300,
                   boundless=True)
    tok.save(tmp_path / "m.json")
    assert fb.load(tmp_path / "m.json") == tok
    doc = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert len(doc["superword"]) >= 2
    doc["superword"] = doc["superword"][:-1]
    (tmp_path / "fewer.json").write_text(json.dumps(doc), encoding="utf-8")
    fewer = fb.load(tmp_path / "fewer.json")
    assert np.array_equal(fewer.merges, tok.merges) and fewer != tok


@pytest.mark.parametrize("entry, match", [
    ("[1]", "not a word pre-token|superword"),
    ("[0, 0]", "must rise"),
    ("[999999]", "not one of"),
    ('"x"', "list of merge ranks"),
    ("[true]", "list of merge ranks"),
])
def test_bad_superword_entries_are_refused(tmp_path, entry, match):
    import json

    tok = fb.train(tie_heavy_corpus(9), vocab_size=380, boundless=True)
    tok.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["superword"] = json.loads(entry)
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(fb.ModelFormatError, match=match):
        fb.load(tmp_path / "bad.json")


def test_superword_needs_an_allowed_pattern(tmp_path):
    import json

    tok = fb.train(tie_heavy_corpus(9), vocab_size=380, boundless=True)
    tok.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["pattern"] = "o200k"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(fb.ModelFormatError, match="pattern"):
        fb.load(tmp_path / "bad.json")


def test_exports_are_refused_naming_the_variant(tmp_path):
    tok = fb.train(tie_heavy_corpus(11, 60), vocab_size=400, boundless=True)
    for export in (tok.to_tiktoken, tok.to_huggingface, tok.to_sentencepiece):
        with pytest.raises(fb.LossyExportError, match="BoundlessBPE"):
            export(tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(base="chars"), fb.TrainingError, "byte-level"),
    (dict(pattern="o200k"), fb.TrainingError, "gpt2"),
    (dict(pattern=None), fb.TrainingError, "gpt2"),
    (dict(merge_batch=4), fb.TrainingError, "merge_batch"),
    (dict(normalization="NFC"), fb.TrainingError, "normalize"),
    (dict(superbpe_transition=280), TypeError, "superbpe_transition"),
    (dict(whitespace="\u2581"), TypeError, "whitespace"),
])
def test_refused_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        fb.train(["ab ab, ab"], vocab_size=300, boundless=True, **kwargs)


def test_boundless_must_be_a_bool():
    with pytest.raises(TypeError, match="boundless"):
        fb.train(["ab ab"], vocab_size=300, boundless="yes")


def test_word_dict_and_counts_file_are_refused(tmp_path):
    with pytest.raises(fb.TrainingError, match="dict"):
        fb.train({"ab": 3, " b": 2}, vocab_size=300, boundless=True)
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab ab, ab\n" * 20, encoding="utf-8")
    fb.count_to_file([str(corpus)], tmp_path / "counts.arrow")
    with pytest.raises(fb.TrainingError, match="counts file"):
        fb.train_files([str(tmp_path / "counts.arrow")], vocab_size=300, boundless=True)


def test_kernel_word_test_equals_regex():
    """``kernels.boundless._is_word`` (the class table) against ``regex`` on the pieces of
    the shared corpora and of odd strings."""
    from fastbpe_nb import pretokenize
    from fastbpe_nb._scanner import class_table
    from fastbpe_nb.kernels.boundless import _is_word

    from fbtest import CORPORA

    texts = [p.read_text(encoding="utf-8")[:20_000] for p in sorted(CORPORA.glob("*.txt"))]
    pieces = {p for t in texts for p in pretokenize.split(t, "gpt2")}
    pieces |= {" ", "", "  a", "a ", "é", " é", "ǅ", "\u00a0a", " 1", "a1", "x\u0301", "中文"}
    stage1, stage2 = class_table()
    for piece in pieces:
        data = np.frombuffer(piece.encode("utf-8"), np.uint8)
        assert _is_word(data, 0, len(data), stage1, stage2) == ref.is_boundless_word(piece), piece


def test_cli_train_boundless(tmp_path):
    from fastbpe_nb.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(tie_heavy_corpus(17, 60)), encoding="utf-8")
    out = tmp_path / "m.json"
    assert main(["train", str(corpus), "-o", str(out), "--vocab-size", "380", "--boundless",
                 "-q"]) == 0
    tok = fb.load(out)
    want = fb.train_files([str(corpus)], vocab_size=380, boundless=True)
    assert np.array_equal(tok.merges, want.merges)
    assert np.array_equal(tok.model.superword, want.model.superword)
    assert tok.model.superword.any()


def test_cli_refuses_boundless_with_whitespace_and_clusters(tmp_path):
    from fastbpe_nb.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("ab ab ab\n", encoding="utf-8")
    out = tmp_path / "m.json"
    assert main(["train", str(corpus), "-o", str(out), "--boundless", "--whitespace",
                 "\u2581", "-q"]) != 0
    assert main(["train", str(corpus), "-o", str(out), "--boundless", "--dask", "local:1",
                 "-q"]) != 0
    assert not out.exists()


@pytest.mark.skipif(NOJIT, reason="minutes of pure-Python kernels; the small corpora cover it")
@pytest.mark.parametrize("tie", ["ids", "first"])
def test_shared_corpus_matches_reference(tie):
    """Real text (KJV, 5-line documents): many supermerges among thousands of ordinary
    pair counts, as the reference trains and encodes them."""
    from fbtest import CORPORA

    path = CORPORA / "kjv.txt"
    if not path.exists():
        pytest.skip("no shared corpora")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:800]
    docs = ["".join(lines[i:i + 5]) for i in range(0, len(lines), 5)]
    train, held = docs[:120], docs[120:]
    model = ref.train_boundless(train, vocab_size=1000, tie_break=tie)
    tok = fb.train(train, vocab_size=1000, tie_break=tie, boundless=True)
    assert sum(model.superword) > 50
    assert_same_boundless(tok, model)
    # Training hands the model its vocabulary (not derived again): the one derived.
    from fastbpe_nb.model import derive_vocab

    merge_ids, token_bytes, _ = derive_vocab(np.asarray(tok.merges),
                                             [bytes([i]) for i in range(256)])
    assert tok.merge_ids.tolist() == merge_ids.tolist() and tok.vocab == token_bytes
    for doc in held:
        assert tok.encode(doc) == ref.encode_boundless(doc, model)


@pytest.mark.parametrize("key, value", [("base", "chars"), ("merge_mode", "ranks"),
                                        ("normalization", "NFC")])
def test_superword_needs_a_plain_byte_level_model(tmp_path, key, value):
    import json

    tok = fb.train(tie_heavy_corpus(9), vocab_size=380, boundless=True)
    tok.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc[key] = value
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(fb.ModelFormatError, match=f"{key}|alphabet"):  # (chars: no alphabet)
        fb.load(tmp_path / "bad.json")


def pair_table_by_hand(units):
    """``kernels.boundless.pair_table`` in Python: pairs numbered by first occurrence."""
    index, left, right, count, where = {}, [], [], [], []
    pid = [-1] * len(units)
    for q in range(len(units) - 1):
        a, b = int(units[q]), int(units[q + 1])
        if a < 0 or b < 0:
            continue
        if (a, b) not in index:
            index[(a, b)] = len(left)
            left.append(a)
            right.append(b)
            count.append(0)
            where.append([])
        p = index[(a, b)]
        pid[q] = p
        count[p] += 1
        where[p].append(q)
    occ_off = np.cumsum([0] + count)
    return pid, left, right, count, occ_off.tolist(), [q for w in where for q in w]


@pytest.mark.parametrize("n, n_words, cut", [(0, 1, 0.5), (1, 1, 0.0), (9, 2, 0.3),
                                             (200_000, 1000, 0.1), (300_000, 5000, 0.02)])
def test_pair_table_equals_counting_by_hand(n, n_words, cut):
    """Up to ~290 k distinct pairs: the table, which starts at 64 k slots, doubles 3 times."""
    from fastbpe_nb.kernels.boundless import pair_table

    rng = np.random.default_rng(n + n_words)
    units = rng.integers(0, n_words, n).astype(np.int32)
    units[rng.random(n) < cut] = -1
    got = pair_table(units)
    want = pair_table_by_hand(units)
    for g, w in zip(got, want):
        assert g.tolist() == list(w)
    if n == 300_000:
        assert len(want[1]) > 4 * (1 << 15)  # the doubling was reached


@pytest.mark.parametrize("n, n_words, cut", [(2, 1, 0.0), (9, 2, 0.3), (70_000, 50, 0.0),
                                             (200_000, 1000, 0.1), (300_000, 5000, 0.02),
                                             (300_000, 3, 0.5)])
@pytest.mark.parametrize("ending", ["-1", "one run"])
def test_pair_table_on_two_halves_is_the_same_table(monkeypatch, n, n_words, cut, ending):
    """``pair_table_of`` on two halves at once (cut after a -1 near the middle; the second
    half's pairs looked up in the first's table and renumbered; positions written by both
    at once): ``pair_table``'s arrays exactly, pairs that recur in both halves, pairs of one
    half only, a second half that is one run to the end (no -1 but the last: a cut at the
    very end, so one part), and arrays small enough for any cut."""
    from fastbpe_nb import boundless
    from fastbpe_nb.kernels.boundless import pair_table

    monkeypatch.setattr(boundless, "PAIR_HALVES_MIN_UNITS", 0)
    rng = np.random.default_rng(n + n_words)
    units = rng.integers(0, n_words, n).astype(np.int32)
    units[rng.random(n) < cut] = -1
    if ending == "one run":
        units[n // 3:] = rng.integers(0, n_words, n - n // 3)
    units[-1] = -1  # (as the units always end)
    want = pair_table(units)
    got = boundless.pair_table_of(units, num_threads=2)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert boundless.pair_table_of(units, num_threads=1)[1].tolist() == want[1].tolist()


def units_by_hand(data, doc_offsets, pattern, unit_of):
    """The runs of two units or more of each document, each followed by a -1: a piece's
    unit is ``unit_of[its bytes]`` (or -1), the pieces those of ``pretokenize``."""
    from fastbpe_nb import pretokenize

    pieces, doc_pieces = pretokenize.piece_offsets(data, doc_offsets, pattern, 1)
    raw = data.tobytes()
    out = []
    for d in range(len(doc_pieces) - 1):
        run = []
        for j in range(doc_pieces[d], doc_pieces[d + 1] + 1):
            unit = -1
            if j < doc_pieces[d + 1]:
                unit = unit_of.get(raw[pieces[j]:pieces[j + 1]], -1)
            if unit >= 0:
                run.append(unit)
                continue
            if len(run) >= 2:
                out += run + [-1]
            run = []
    return out


#: A long word that becomes one token, and a piece of its length with its first and last 8
#: bytes (the same piece key) that is not a token: compared byte by byte.
LONG_WORD = b" Supercalifragilisticexpialidocious"
LOOKALIKE = LONG_WORD.replace(b"fra", b"frX")


def unit_corpus(pattern, prose, code, extra_pieces, seed):
    """A classic model trained on ``prose``, ``code`` and ``LONG_WORD`` (vocab 1200), its
    units (``use``, ``{bytes: token}``), and the bytes ``b"xx" + prose + code + mixed +
    prose[:5000]`` (``mixed``: 30 k pieces drawn from 40 unit tokens, other pieces,
    ``LONG_WORD``, ``LOOKALIKE`` and ``extra_pieces``) with the ends of its parts:
    ``(classic, use, unit_of, data, ends)``."""
    from fastbpe_nb.boundless import word_units

    classic = fb.train([prose.decode(), code.decode(), (LONG_WORD * 500).decode()],
                       vocab_size=1200, pattern=pattern)
    use, _ = word_units(classic)
    tokens = classic.model.token_bytes
    unit_of = {tokens[t]: int(t) for t in np.flatnonzero(use)}
    assert LONG_WORD in unit_of and LOOKALIKE not in unit_of
    pool = [tokens[t] for t in np.flatnonzero(use)[:40]] + [b".", b"\n", b" 12", b"  ", b"x",
                                                            *extra_pieces, LONG_WORD, LOOKALIKE]
    rng = np.random.default_rng(seed)
    mixed = b"".join(pool[i] for i in rng.integers(0, len(pool), 30_000))
    data = np.frombuffer(b"xx" + prose + code + mixed + prose[:5000], np.uint8).copy()
    n = len(data)
    return classic, use, unit_of, data, [2 + len(prose), 2 + len(prose) + len(code), n - 5000]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_scan_units_equals_units_by_hand(pattern):
    """``scan_units`` (scan and look-up in one pass, blocks cut at safe cuts, in parallel
    or not, any block count) writes the runs of units found by hand from the scanner's
    pieces: real prose and code, several documents, empty ones, a batch that does not start
    at byte 0, and a synthetic text of units and other pieces in every order."""
    from fbtest import CORPORA

    from fastbpe_nb._scanner import PATTERN_IDS, scan_tail
    from fastbpe_nb.counting import COUNT_CHUNK_BYTES
    from fastbpe_nb.kernels.boundless import scan_units, scan_units_serial, token_slots
    from fastbpe_nb.model import token_arrays

    path = CORPORA / "kjv.txt"
    if not path.exists():
        pytest.skip("no shared corpora")
    import inspect

    classic, use, unit_of, data, ends = unit_corpus(
        pattern, path.read_bytes()[:400_000], inspect.getsource(np).encode() * 3, [], 7)
    tok_off, tok_data = token_arrays(classic.model.token_bytes)
    slots = token_slots(tok_off, tok_data, use)
    n = len(data)
    for doc_offsets in ([2, n], [2, 2, ends[0], ends[0], ends[1], ends[2], n], [2, 3, n]):
        doc_offsets = np.array(doc_offsets, np.int64)
        want = units_by_hand(data, doc_offsets, pattern, unit_of)
        assert sum(x >= 0 for x in want) > 20_000
        args = (data, doc_offsets, PATTERN_IDS[pattern], *scan_tail(), COUNT_CHUNK_BYTES,
                slots, tok_off, tok_data)
        for n_blocks in (1, 2, 8, 33):
            assert scan_units(*args, n_blocks).tolist() == want
            assert scan_units_serial(*args, n_blocks).tolist() == want


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
@pytest.mark.parametrize("block_words", [None, 300])
def test_units_from_counting_equal_units_by_hand(pattern, block_words):
    """The units from the runs counting keeps (``WordCounter(keep_runs=True)``, then
    ``units_from_runs``): those found by hand from the scanner's pieces, and those of the
    corpus scanned again (``UnitCollector``, training under a memory budget): real prose
    and code, a synthetic mix of units, other pieces, a long token and a same-key
    look-alike that is no token, empty documents, a batch that does not start at byte 0,
    special tokens, two batches, two threads (``block_words=300``: the private tables
    fill up, blocks resume)."""
    from fbtest import CORPORA

    from fastbpe_nb.boundless import UnitCollector, units_from_runs
    from fastbpe_nb.counting import WordCounter, cut_special_tokens
    from fastbpe_nb.pretokenize import SpecialTokenMatcher

    path = CORPORA / "kjv.txt"
    if not path.exists():
        pytest.skip("no shared corpora")
    import inspect

    # (Russian: units whose first byte is a UTF-8 lead byte, after a space or not.)
    prose = path.read_bytes()[:200_000] + (CORPORA / "fortunes_ru.txt").read_bytes()[:100_000]
    classic, use, unit_of, data, ends = unit_corpus(
        pattern, prose, inspect.getsource(np).encode() * 2, [b" ", b"<s>"], 11)
    tokens = classic.model.token_bytes
    n = len(data)
    batches = [(data, np.array([2, 2, ends[0], ends[0], ends[1]], np.int64)),
               (data, np.array([ends[1], ends[2], n], np.int64))]
    specials = ["<s>"]
    counter = WordCounter(pattern, specials, num_threads=2, keep_runs=True)
    counter.block_words = block_words or counter.block_words
    collector = UnitCollector(classic, use, pattern, specials, num_threads=2)
    want = []
    for batch in batches:
        counter.add_batch(*batch)
        collector.add_batch(*batch)
        want += units_by_hand(*cut_special_tokens(*batch, SpecialTokenMatcher(specials)),
                              pattern, unit_of)
    assert sum(x >= 0 for x in want) > 20_000 and want.count(-1) > 1000
    assert sum(tokens[x].lstrip(b" ")[:1] >= b"\xc0" for x in want if x >= 0) > 1000
    got = units_from_runs(classic, use, counter.word_runs(joined=False),
                          counter.indexed_words())
    assert got.tolist() == want + [-1] == collector.units().tolist()


def test_train_files_under_a_budget_scans_again_to_the_same_model(tmp_path):
    """Under ``max_memory`` counting keeps no runs and the unit pass scans the corpus again
    (``UnitCollector``): the same merges, flags and counts as from the kept runs."""
    docs = tie_heavy_corpus(37, 8000)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(docs), encoding="utf-8")
    kept, rep = fb.train_files([str(path)], vocab_size=450, boundless=True,
                               return_report=True)
    scanned = fb.train_files([str(path)], vocab_size=450, boundless=True,
                             max_memory=2 << 30)
    assert sum(kept.model.superword) > 5 and rep["seconds_boundless_units"] >= 0
    assert kept.merges.tolist() == scanned.merges.tolist()
    assert kept.model.superword.tolist() == scanned.model.superword.tolist()
    assert kept.merge_counts.tolist() == scanned.merge_counts.tolist()


def test_train_files_in_a_forked_child(tmp_path):
    """``train_files`` keeps the runs while counting, on all cores (``joined_runs``): in a
    child forked after the parent's pool ran it, the same merges and flags."""
    docs = tie_heavy_corpus(36, 8000)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(docs), encoding="utf-8")
    tok = fb.train_files([str(path)], vocab_size=450, boundless=True, num_threads=2)
    want = (tok.merges.tolist(), tok.model.superword.tolist())
    assert sum(want[1]) > 5
    assert want == (lambda t: (t.merges.tolist(), t.model.superword.tolist()))(
        fb.train_files([str(path)], vocab_size=450, boundless=True, num_threads=1))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_train_files_in_child, (str(path),)).get(timeout=600) == want


def _train_files_in_child(path):
    tok = fb.train_files([path], vocab_size=450, boundless=True, num_threads=2)
    return tok.merges.tolist(), tok.model.superword.tolist()
