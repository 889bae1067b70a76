"""Model file: save/load round trip and validation of every malformed input."""

import json

import pytest

import fastbpe_nb as fb

TEXTS = ["the cat sat on the mat; the dog ate the cat's hat.\n" * 3, "Привет мир 你好 😀"]


@pytest.fixture(scope="module")
def tok():
    return fb.train(TEXTS, vocab_size=300, special_tokens=["<|endoftext|>"], tie_break="hf")


def test_save_load_save_is_byte_identical(tok, tmp_path):
    first = tmp_path / "m.json"
    tok.save(first)
    loaded = fb.load(first)
    assert loaded == tok
    assert loaded.tie_break == "hf"
    second = tmp_path / "m2.json"
    loaded.save(second)
    assert first.read_bytes() == second.read_bytes()
    for text in TEXTS:
        assert loaded.encode(text) == tok.encode(text)


def test_char_mode_round_trip(tmp_path):
    tok = fb.train({"low": 5, "lower": 2, "newest": 6}, num_merges=5, base="chars",
                   end_of_word="</w>")
    path = tmp_path / "c.json"
    tok.save(path)
    loaded = fb.load(path)
    assert loaded == tok
    assert loaded.encode("lower newest") == tok.encode("lower newest")


def test_no_temp_files_left(tok, tmp_path):
    tok.save(tmp_path / "m.json")
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_save_to_missing_folder_names_path(tok, tmp_path):
    with pytest.raises(OSError) as info:
        tok.save(tmp_path / "missing" / "m.json")
    assert "missing" in str(info.value)


def doc_of(tok, tmp_path):
    path = tmp_path / "m.json"
    tok.save(path)
    return json.loads(path.read_text())


def write(tmp_path, doc, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


@pytest.mark.parametrize("mutate, entry, message", [
    (lambda d: d.update(format="other"), "format", "expected 'fastbpe_nb'"),
    (lambda d: d.update(version=99), "version", "newer"),
    (lambda d: d.update(version="1"), "version", "positive integer"),
    (lambda d: d.update(base="words"), "base", "base must be"),
    (lambda d: d.update(merges=[[256, 119], [108, 111]]), "merges[0]", "not defined"),
    (lambda d: d.update(merges=[[97, 98], [-1, 3]]), "merges[1]", "not defined"),
    (lambda d: d.update(merges=[[97, 98], [10**12, 3]]), "merges[1]", "not defined"),
    (lambda d: d.update(merges=[[97, 98, 99]]), "merges[0]", "[left, right]"),
    (lambda d: d.update(merges=[[97, True]]), "merges[0]", "[left, right]"),
    (lambda d: d.update(merges="nope"), "merges", "list"),
    (lambda d: d.update(special_tokens=[["<a>", 300], ["<a>", 301]]), "special_tokens[1]",
     "duplicate special token"),
    (lambda d: d.update(special_tokens=[["<a>", 5]]), "special_tokens", "right after"),
    (lambda d: d.update(special_tokens=[["<a>", -3]]), "special_tokens", "right after"),
    (lambda d: d.update(special_tokens=[["", 300]]), "special_tokens[0]", "empty"),
    (lambda d: d.update(pattern="(unclosed"), "pattern", "invalid"),
    (lambda d: d.update(extra=1), "extra", "unknown key"),
    (lambda d: d.pop("merges"), "merges", "missing"),
    (lambda d: d.update(tie_break="coin"), "tie_break", "unknown tie_break"),
    (lambda d: d.update(normalization="NFKD"), "normalization", "not supported"),
    (lambda d: d.update(alphabet=["a"]), "alphabet", "byte mode"),
])
def test_malformed_documents(tok, tmp_path, mutate, entry, message):
    doc = doc_of(tok, tmp_path)
    mutate(doc)
    path = write(tmp_path, doc)
    with pytest.raises(fb.ModelFormatError) as info:
        fb.load(path)
    err = info.value
    assert err.path == str(path)
    assert err.entry == entry
    assert message in str(err)
    assert str(path) in str(err)
    assert isinstance(err, ValueError)


def test_special_ids_must_follow_regular_tokens(tok, tmp_path):
    doc = doc_of(tok, tmp_path)
    n = len(tok.vocab) - 1
    doc["special_tokens"] = [["<a>", n], ["<b>", n]]
    with pytest.raises(fb.ModelFormatError, match="duplicate special token id"):
        fb.load(write(tmp_path, doc))


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ('{"format": "fastbpe_nb", "version": 1, "base": "bytes", "merges": [[97, 9', "truncated"),
    ("[1, 2]", "not a JSON object"),
    ('{"format": "fastbpe_nb", "format": "fastbpe_nb"}', "twice"),
])
def test_malformed_text(tmp_path, content, message):
    with pytest.raises(fb.ModelFormatError, match=message):
        fb.load(write(tmp_path, content))


def test_not_utf8(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(fb.ModelFormatError, match="UTF-8"):
        fb.load(path)


def test_truncation_everywhere_is_a_clean_error(tok, tmp_path):
    path = tmp_path / "m.json"
    tok.save(path)
    data = path.read_bytes()
    cut_path = tmp_path / "cut.json"
    for k in range(0, 64):
        cut_path.write_bytes(data[: len(data) * k // 64])
        with pytest.raises(fb.ModelFormatError):
            fb.load(cut_path)


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        fb.load(tmp_path / "nope.json")


def test_tokenizer_rejects_undefined_ids():
    with pytest.raises(fb.ModelFormatError, match=r"merges\[0\]"):
        fb.Tokenizer(merges=[(256, 119), (108, 111)])
    with pytest.raises(ValueError, match="shape"):
        fb.Tokenizer(merges=[1, 2, 3])
