"""The input side: pattern names, empty inputs, compressed / BOM / binary files, JSONL,
which files a folder or glob names, bounded chunks, and one invalid-UTF-8 policy."""

import bz2
import gzip
import json
import lzma
import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastbpe_nb as fb
from fastbpe_nb import reference as ref
from fastbpe_nb import pretokenize
from fastbpe_nb.cli import main as cli_main
from fastbpe_nb.training import count_files

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ipc = pytest.importorskip("pyarrow.ipc")


def make_docs(seed=0, n=120):
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "mat", "Grüße", "мир", "你好", "it's", "42", "x=1;",
             "don't", "naïve", "😀", "tokens", "merge", "byte", "pair"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(n)]


DOCS = make_docs()
TEXT = "".join(d + "\n" for d in DOCS)


def same_model(a, b):
    assert np.array_equal(a.merges, b.merges)
    assert a.vocab == b.vocab


def table(paths, **kw):
    """The counted word table of ``paths``: (words, counts) as Python lists."""
    counter, stats = count_files(paths, **kw)
    words, offsets, counts = counter.table()
    raw = words.tobytes()
    return [raw[a:b] for a, b in zip(offsets[:-1], offsets[1:])], counts.tolist(), stats


# ----------------------------------------------------------------------- 1. pattern names
ALIASES = [("GPT2", "gpt2"), ("Cl100K", "cl100k"), ("O200K", "o200k"), ("r50k_base", "gpt2"),
           ("p50k_base", "gpt2"), ("p50k_edit", "gpt2"), ("cl100k_base", "cl100k"),
           ("o200k_base", "o200k"), ("O200K_BASE", "o200k")]


@pytest.mark.parametrize("name,canonical", ALIASES)
def test_pattern_aliases_and_case(name, canonical, tmp_path):
    tok = fb.train(DOCS, vocab_size=300, pattern=name)
    assert tok.pattern == canonical
    same_model(tok, fb.train(DOCS, vocab_size=300, pattern=canonical))
    text = "Hello WORLD's 12345 \n\n  x"
    assert fb.split(text, pattern=name) == fb.split(text, pattern=canonical)
    assert fb.Tokenizer(tok.merges, pattern=name).pattern == canonical
    path = tmp_path / "m.json"
    tok.save(path)
    assert json.loads(path.read_text())["pattern"] == canonical  # the file stores the name


REFUSED = {"gpt4": "cl100k", "gpt-4": "cl100k", "gpt-4o": "o200k", "o200k-base": "o200k_base",
           "cl100": "cl100k", "gpt.2": "gpt2", "none": None, "abc": None, "default_": None,
           "p50k.edit": "p50k_edit"}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unknown_pattern_names_are_refused(name, tmp_path):
    suggestion = REFUSED[name]
    entry_points = [
        lambda: fb.train(DOCS, vocab_size=300, pattern=name),
        lambda: fb.train(DOCS, vocab_size=300, pattern=name, base="chars"),
        lambda: fb.split("some text", pattern=name),
        lambda: fb.Tokenizer([], pattern=name),
    ]
    for call in entry_points:
        with pytest.raises(fb.PatternError, match="known patterns: gpt2, cl100k, o200k") as info:
            call()
        assert isinstance(info.value, ValueError)
        assert repr(name) in str(info.value)
        if suggestion is not None:
            assert f"did you mean {suggestion!r}" in str(info.value)


def test_refused_pattern_everywhere_else(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    with pytest.raises(fb.PatternError, match="gpt4"):
        fb.train_files([corpus], vocab_size=300, pattern="gpt4")
    with pytest.raises(fb.PatternError, match="gpt4"):
        fb.count_to_file([corpus], tmp_path / "n.arrow", pattern="gpt4")
    tok = fb.train(DOCS, vocab_size=300, pattern="cl100k")
    tt = tmp_path / "m.tiktoken"
    tok.to_tiktoken(tt)
    with pytest.raises(fb.PatternError, match="gpt4"):
        fb.from_tiktoken(tt, pattern="gpt4")
    assert fb.from_tiktoken(tt, pattern="cl100k_base").pattern == "cl100k"
    # The command line: a clean error (exit 2), not a model without pre-tokenization.
    out = tmp_path / "m.json"
    assert cli_main(["train", str(corpus), "-o", str(out), "--pattern", "gpt4", "-q"]) == 2
    assert not out.exists()
    assert cli_main(["train", str(corpus), "-o", str(out), "--pattern", "GPT2", "-q",
                     "--vocab-size", "300"]) == 0
    assert json.loads(out.read_text())["pattern"] == "gpt2"
    assert cli_main(["count", str(corpus), "-o", str(tmp_path / "c.arrow"), "--pattern",
                     "o200k_base", "-q"]) == 0
    assert fb.train_files([tmp_path / "c.arrow"], vocab_size=300).pattern == "o200k"
    # An invalid regex on the command line is a clean error too.
    assert cli_main(["train", str(corpus), "-o", str(out), "--pattern", "(", "-q"]) == 2


def test_model_file_with_unknown_pattern_name(tmp_path):
    tok = fb.train(DOCS, vocab_size=300)
    path = tmp_path / "m.json"
    tok.save(path)
    doc = json.loads(path.read_text())
    doc["pattern"] = "gpt4"
    path.write_text(json.dumps(doc))
    with pytest.raises(fb.ModelFormatError, match="gpt4"):
        fb.load(path)
    doc["pattern"] = "GPT2"
    path.write_text(json.dumps(doc))
    assert fb.load(path).pattern == "gpt2"


@pytest.mark.parametrize("regex_pattern", [r"\S+", ".", "...", "a.b", "[a-z]+", "(?:abc)",
                                           r"\w+|\s+", "x|y"])
def test_regexes_are_still_regexes(regex_pattern):
    assert pretokenize.resolve_pattern(regex_pattern) == regex_pattern
    fb.train(DOCS, vocab_size=280, pattern=regex_pattern)


# ----------------------------------------------------------------------- 2. empty inputs
@pytest.mark.parametrize("texts", [[], iter([]), {}])
def test_training_on_nothing_is_an_error(texts):
    with pytest.raises(fb.TrainingError, match="nothing to learn"):
        fb.train(texts, vocab_size=300, special_tokens=["<|endoftext|>"])


@pytest.mark.parametrize("texts", [[""], ["", ""], ["<|endoftext|>"]])
def test_documents_without_a_pre_token_train_what_the_specification_does(texts):
    # Not "no input": the documents are there and hold nothing to merge (reference.train
    # gives no merge on them either). Files are held to "no byte read", below.
    tok = fb.train(texts, vocab_size=300, special_tokens=["<|endoftext|>"])
    model = ref.train(texts, vocab_size=300, special_tokens=["<|endoftext|>"])
    assert tok.merges.tolist() == [list(m) for m in model.merges] == []


def test_char_mode_on_nothing_is_an_error():
    with pytest.raises(fb.TrainingError, match="nothing to learn"):
        fb.train([], vocab_size=300, base="chars")
    for texts in ([], [""]):  # sentencepiece itself refuses a corpus without text
        with pytest.raises(fb.TrainingError, match="nothing to learn"):
            fb.train(texts, vocab_size=300, base="chars", whitespace="\u2581")


def test_no_input_files_is_an_error(tmp_path):
    empty = tmp_path / "emptydir"
    empty.mkdir()
    for paths in ([empty], [str(empty) + "/"], [str(tmp_path / "*.nothing")],
                  [str(tmp_path / "**" / "*.txt")]):
        with pytest.raises(fb.CorpusReadError, match="no input files") as info:
            fb.train_files(paths, vocab_size=300)
        assert ".parquet" in str(info.value) and ".jsonl" in str(info.value)  # what is read
    with pytest.raises(fb.CorpusReadError, match="no input files"):
        fb.train_files([], vocab_size=300)
    with pytest.raises(fb.CorpusReadError, match="no input files"):
        count_files([empty])
    (empty / "sub").mkdir()  # a glob matching only folders names no file either
    with pytest.raises(fb.CorpusReadError, match="no input files"):
        fb.train_files([str(empty / "*")], vocab_size=300)
    (empty / ".hidden.txt").write_text("hidden")
    with pytest.raises(fb.CorpusReadError, match="1 hidden"):
        fb.train_files([empty], vocab_size=300)
    out = tmp_path / "x.json"
    assert cli_main(["train", str(empty), "-o", str(out), "-q"]) == 2
    assert not out.exists()
    assert cli_main(["count", str(empty), "-o", str(tmp_path / "c.arrow"), "-q"]) == 2


def test_only_empty_documents_is_an_error(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes(b"")
    with pytest.raises(fb.TrainingError, match="nothing to learn.*2 files"):
        fb.train_files([tmp_path], vocab_size=300)
    pq.write_table(pa.table({"text": pa.array(["", None], pa.string())}), tmp_path / "c.parquet")
    with pytest.raises(fb.TrainingError, match="nothing to learn"):
        fb.train_files([tmp_path / "c.parquet"], vocab_size=300)
    # Counting an empty corpus is a true answer (an empty table); training on it is not.
    fb.count_to_file([tmp_path / "a.txt"], tmp_path / "n.arrow")
    with pytest.raises(fb.TrainingError, match="nothing to learn"):
        fb.train_files([tmp_path / "n.arrow"], vocab_size=300)


# ------------------------------------------------- 3. compressed, BOM, binary, hidden files
def zstd_bytes(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as f:
        f.write(data)
    return sink.getvalue().to_pybytes()


COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
               ".zst": zstd_bytes}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_compressed_text_is_decompressed(tmp_path, suffix):
    plain = tmp_path / "corpus.txt"
    plain.write_text(TEXT, encoding="utf-8")
    packed = tmp_path / f"corpus.txt{suffix}"
    packed.write_bytes(COMPRESSORS[suffix](TEXT.encode()))
    expected = table([plain])[:2]
    words, counts, stats = table([packed])
    assert (words, counts) == expected
    assert stats.bytes_read == len(TEXT.encode())  # decompressed bytes
    # By magic bytes too: a compressed file without the suffix.
    hidden_packing = tmp_path / f"plain_name{suffix}.txt"
    hidden_packing.write_bytes(packed.read_bytes())
    assert table([hidden_packing])[:2] == expected
    # A truncated stream is an error naming the file.
    broken = tmp_path / f"broken.txt{suffix}"
    broken.write_bytes(packed.read_bytes()[: len(packed.read_bytes()) // 2])
    with pytest.raises(fb.CorpusReadError, match=f"broken.txt{suffix}"):
        table([broken])


def test_compressed_suffix_with_other_content(tmp_path):
    fake = tmp_path / "fake.txt.gz"
    fake.write_text("not gzip at all\n")
    with pytest.raises(fb.CorpusReadError, match="fake.txt.gz.*not gzip"):
        table([fake])
    pq.write_table(pa.table({"text": pa.array(DOCS)}), tmp_path / "t.parquet")
    (tmp_path / "t.parquet.gz").write_bytes(gzip.compress((tmp_path / "t.parquet").read_bytes()))
    with pytest.raises(fb.CorpusReadError, match="decompress"):
        table([tmp_path / "t.parquet.gz"])


@pytest.mark.parametrize("encoding,bom", [("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"),
                                          ("utf-16-be", b"\xfe\xff"),
                                          ("utf-32-le", b"\xff\xfe\x00\x00"),
                                          ("utf-32-be", b"\x00\x00\xfe\xff")])
def test_byte_order_marks(tmp_path, encoding, bom):
    plain = tmp_path / "plain.txt"
    plain.write_text(TEXT, encoding="utf-8")
    marked = tmp_path / "marked.txt"
    marked.write_bytes(bom + TEXT.encode(encoding))
    assert table([marked])[:2] == table([plain])[:2]
    # Compressed and with a BOM.
    gz = tmp_path / "marked.txt.gz"
    gz.write_bytes(gzip.compress(marked.read_bytes()))
    assert table([gz])[:2] == table([plain])[:2]


def test_utf16_without_bom_and_binary_files_are_refused(tmp_path):
    (tmp_path / "u16.txt").write_bytes(TEXT.encode("utf-16-le"))
    with pytest.raises(fb.CorpusReadError, match=r"u16.txt.*NUL"):
        table([tmp_path / "u16.txt"])
    rng = random.Random(3)
    blob = bytes(rng.randrange(256) for _ in range(100_000))
    (tmp_path / "blob.bin").write_bytes(blob)
    with pytest.raises(fb.CorpusReadError, match=r"blob.bin.*offset \d+.*max_invalid_utf8") as info:
        fb.train_files([tmp_path / "blob.bin"], vocab_size=300)
    assert "%" in str(info.value)
    # The flag accepts it (and the replacements are reported).
    _, report = fb.train_files([tmp_path / "blob.bin"], vocab_size=300, max_invalid_utf8=1.0,
                               return_report=True)
    assert report["invalid_utf8_sequences_replaced"] > 10_000
    # The command line: --max-invalid-utf8.
    out = tmp_path / "m.json"
    assert cli_main(["train", str(tmp_path / "blob.bin"), "-o", str(out), "-q",
                     "--vocab-size", "300"]) == 2
    assert cli_main(["train", str(tmp_path / "blob.bin"), "-o", str(out), "-q",
                     "--vocab-size", "300", "--max-invalid-utf8", "1"]) == 0
    with pytest.raises(ValueError, match="max_invalid_utf8"):
        fb.train_files([tmp_path / "blob.bin"], vocab_size=300, max_invalid_utf8=2)


def test_latin1_text_is_refused_a_few_bad_bytes_are_not(tmp_path):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(("Grüße aus Köln, schöne Straße. " * 300).encode("latin-1"))
    with pytest.raises(fb.CorpusReadError, match="latin1.txt.*offset 2\\b"):
        table([latin])
    few = tmp_path / "few.txt"
    few.write_bytes(TEXT.encode() * 4 + b"\xff\xfe" + TEXT.encode())
    words, counts, stats = table([few])
    assert stats.invalid_utf8_replaced == 2


def test_hidden_files_and_folders_are_not_walked(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / ".git" / "objects").mkdir(parents=True)
    (corpus / ".git" / "objects" / "ab").write_bytes(gzip.compress(b"blob junk"))
    (corpus / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (corpus / ".notes.txt").write_text("private private private\n")
    (corpus / "a.txt").write_text(TEXT)
    words, counts, stats = table([corpus])
    assert (words, counts) == table([corpus / "a.txt"])[:2]
    ignored = dict((os.path.basename(p), r) for p, r in stats.ignored)
    assert set(ignored) == {".git", ".notes.txt"}
    _, report = fb.train_files([corpus], vocab_size=300, return_report=True)
    assert report["files"] == 1
    assert {e["path"] for e in report["files_ignored"]} == {str(corpus / ".git"),
                                                            str(corpus / ".notes.txt")}
    # Named explicitly, a hidden file is read.
    assert table([corpus / ".notes.txt"])[:2] == ([b"private", b" private", b"\n"], [1, 2, 1])


# ------------------------------------------------------------------------------ 4. JSONL
def write_jsonl(path, rows, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n")


def test_jsonl_is_read_by_field(tmp_path):
    rows = [{"id": i, "text": d, "body": d.upper()} for i, d in enumerate(DOCS)]
    rows[5]["text"] = None
    del rows[7]["text"]
    write_jsonl(tmp_path / "c.jsonl", rows)
    expected = [d for i, d in enumerate(DOCS) if i not in (5, 7)]
    tok, report = fb.train_files([tmp_path / "c.jsonl"], vocab_size=300, return_report=True)
    same_model(tok, fb.train(expected, vocab_size=300))
    assert report["documents"] == len(expected) and report["null_rows_skipped"] == 2
    same_model(fb.train_files([tmp_path / "c.jsonl"], vocab_size=300, column="body"),
               fb.train([d.upper() for d in DOCS], vocab_size=300))
    # .ndjson and compressed forms.
    write_jsonl(tmp_path / "c.ndjson.gz", rows, gzip.open)
    (tmp_path / "c.jsonl.zst").write_bytes(zstd_bytes((tmp_path / "c.jsonl").read_bytes()))
    for name in ("c.ndjson.gz", "c.jsonl.zst"):
        same_model(fb.train_files([tmp_path / name], vocab_size=300), tok)
    # fastbpe count --column.
    counts = tmp_path / "counts.arrow"
    assert cli_main(["count", str(tmp_path / "c.jsonl"), "-o", str(counts), "--column", "body",
                     "-q"]) == 0
    same_model(fb.train_files([counts], vocab_size=300),
               fb.train([d.upper() for d in DOCS], vocab_size=300))


def test_jsonl_small_blocks_and_long_lines(tmp_path):
    from fastbpe_nb.io.jsonl_files import read_jsonl
    from fastbpe_nb.io.read_stats import ReadStats

    docs = DOCS + ["a long line " * 50_000]
    write_jsonl(tmp_path / "c.jsonl", [{"text": d} for d in docs])
    stats = ReadStats()
    batches = list(read_jsonl(str(tmp_path / "c.jsonl"), "text", stats, block_bytes=1000))
    assert len(batches) > 10
    got = [bytes(data[a:b]).decode() for data, off in batches
           for a, b in zip(off[:-1], off[1:])]
    assert got == docs and stats.documents == len(docs)


@pytest.mark.parametrize("line,reason", [
    ('{"text": "a", ', "line 3: not valid JSON"),
    ('{"text": 5}', "line 3: field 'text' is a number, not a string"),
    ('{"text": ["a"]}', "line 3: field 'text' is an array, not a string"),
    ('["text"]', "line 3: not a JSON object"),
    ('"text"', "line 3: not a JSON object"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    write_jsonl(path, [{"text": "ok"}, {"text": "fine"}, line, {"text": "after"}])
    with pytest.raises(fb.CorpusReadError, match=f"bad.jsonl: {reason}"):
        fb.train_files([path], vocab_size=300)
    tok = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>"])
    with pytest.raises(fb.CorpusReadError, match=f"bad.jsonl: {reason}"):
        fb.encode_parquet(tok, str(path), str(tmp_path / "out"))


def test_jsonl_field_in_no_row(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"content": d} for d in DOCS])
    with pytest.raises(fb.CorpusReadError, match="c.jsonl: no row has a field 'text'.*content"):
        fb.train_files([tmp_path / "c.jsonl"], vocab_size=300)


def test_jsonl_encode(tmp_path):
    rows = [{"id": i, "text": d} for i, d in enumerate(DOCS)]
    rows[3]["text"] = None
    write_jsonl(tmp_path / "c.jsonl.gz", rows, gzip.open)
    tok = fb.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>"])
    report = fb.encode_parquet(tok, str(tmp_path / "c.jsonl.gz"), str(tmp_path / "out"),
                               keep_columns=["id"])
    assert report["rows"] == len(DOCS) and report["null_rows"] == 1
    out = pq.read_table(tmp_path / "out" / "c.jsonl.parquet")
    expected = [None if r["text"] is None else tok.encode(r["text"]) for r in rows]
    assert out.column("ids").to_pylist() == expected
    assert out.column("id").to_pylist() == list(range(len(DOCS)))
    assert cli_main(["encode", "--model", str(_saved(tok, tmp_path)), str(tmp_path / "c.jsonl.gz"),
                     "-o", str(tmp_path / "out2"), "--format", "bin", "-q"]) == 0


def _saved(tok, tmp_path):
    path = tmp_path / "model.json"
    tok.save(path)
    return path


# ---------------------------------------------------------------- 5. what a path names
def test_symlinked_folders_are_followed_once(tmp_path):
    corpus = tmp_path / "corpus"
    other = tmp_path / "other"
    corpus.mkdir()
    other.mkdir()
    (corpus / "a.txt").write_text(TEXT)
    (other / "b.txt").write_text("other words here\n")
    os.symlink(other, corpus / "linked")  # a symlinked subfolder: followed
    os.symlink(corpus, corpus / "loop")  # a loop: followed once, then detected
    os.symlink(corpus / "a.txt", corpus / "a_again.txt")  # the same file twice
    from fastbpe_nb.io.input_files import expand_paths

    ignored = []
    files = expand_paths([corpus], ignored=ignored)
    assert sorted(os.path.basename(f) for f in files) == ["a.txt", "b.txt"]
    reasons = " ".join(r for _, r in ignored)
    assert "loop" in reasons and "same file" in reasons
    ignored = []
    globbed = expand_paths([str(corpus / "**" / "*.txt")], ignored=ignored)
    assert sorted(os.path.basename(f) for f in globbed) == ["a.txt", "b.txt"]


def test_dangling_symlink(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(TEXT)
    os.symlink(tmp_path / "gone.txt", corpus / "dangling.txt")
    with pytest.raises(fb.CorpusReadError, match="dangling.txt.*dangling symlink"):
        fb.train_files([corpus], vocab_size=300)
    with pytest.raises(fb.CorpusReadError, match="dangling.txt.*dangling symlink"):
        fb.train_files([corpus / "dangling.txt"], vocab_size=300)
    _, report = fb.train_files([corpus], vocab_size=300, on_bad_input="skip", return_report=True)
    assert [s["path"] for s in report["files_skipped"]] == [str(corpus / "dangling.txt")]


def test_unreadable_subfolder_is_not_silently_skipped(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    (corpus / "locked").mkdir(parents=True)
    (corpus / "locked" / "x.txt").write_text("x\n")
    (corpus / "a.txt").write_text(TEXT)
    # os.walk drops a folder it cannot list unless told: make "locked" unlistable (chmod
    # does not stop root, so os.scandir is made to fail for it as it would for a user).
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(fb.CorpusReadError, match="locked: cannot list folder"):
        fb.train_files([corpus], vocab_size=300)
    _, report = fb.train_files([corpus], vocab_size=300, on_bad_input="skip", return_report=True)
    assert [s["path"] for s in report["files_skipped"]] == [str(corpus / "locked")]


# --------------------------------------------------------------- 6. bounded text chunks
@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_long_lines_are_cut_at_spaces_without_changing_the_model(tmp_path, pattern):
    line = " ".join(make_docs(5, 400)).replace("\n", " ")  # ~40 KB, one line
    text = (line + "\n") * 3
    path = tmp_path / "long.txt"
    path.write_text(text)
    whole = fb.train([text], vocab_size=330, pattern=pattern)
    tok, report = fb.train_files([path], vocab_size=330, pattern=pattern, chunk_bytes=1000,
                                 max_chunk_bytes=4096, return_report=True)
    same_model(tok, whole)
    assert report["forced_cuts"] == 0 and report["cuts_at_spaces"] > 10


def test_no_cut_point_at_all_is_a_counted_forced_cut(tmp_path):
    path = tmp_path / "one_token.txt"
    path.write_text("ж" * 50_000)  # 100,000 bytes, one pre-token, no space
    from fastbpe_nb.io.read_stats import ReadStats
    from fastbpe_nb.io.text_files import read_text

    stats = ReadStats()
    batches = list(read_text(str(path), stats, chunk_bytes=1000, max_chunk_bytes=4097))
    assert max(len(d) for d, _ in batches) <= 4097
    assert b"".join(bytes(d) for d, _ in batches) == path.read_bytes()  # cut between characters
    assert stats.forced_cuts == len(batches) - 1 >= 20
    _, report = fb.train_files([path], vocab_size=300, chunk_bytes=1000, max_chunk_bytes=4097,
                               return_report=True)
    assert report["forced_cuts"] == stats.forced_cuts
    # A custom regex: the file is no longer read whole, every cut is counted.
    stats = ReadStats()
    batches = list(read_text(str(path), stats, chunk_bytes=1000, splittable=False,
                             max_chunk_bytes=4097))
    assert len(batches) > 20 and stats.forced_cuts == len(batches) - 1


_LINE_PARTS = ["a", "bc", " ", "  ", "\n", "\n\n", "/", "ж", "\u3000", "\t", "1", ";", "'s",
               "\r\n", "中文"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_LINE_PARTS), max_size=120), st.integers(8, 48),
       st.sampled_from([None, 64, 200]), st.sampled_from(["gpt2", "cl100k", "o200k"]))
def test_read_text_chunks_are_the_file_cut_where_no_piece_spans(tmp_path_factory, parts,
                                                                chunk_bytes, max_chunk, pattern):
    """Every chunk ``read_text`` emits (blocks joined at their first safe cut, the rest of a
    block as a view, and the general path) is the file's bytes in order, nothing lost or
    repeated, none over ``max_chunk_bytes``, and the pieces of the chunks are the pieces of
    the whole text."""
    import regex

    from fastbpe_nb.io.read_stats import ReadStats
    from fastbpe_nb.io.text_files import read_text

    raw = "".join(parts).encode()
    path = tmp_path_factory.mktemp("chunks") / "t.txt"
    path.write_bytes(raw)
    stats = ReadStats()
    chunks = [bytes(d) for d, _ in read_text(str(path), stats, chunk_bytes=chunk_bytes,
                                              max_chunk_bytes=max_chunk)]
    assert b"".join(chunks) == raw
    assert all(chunks) and max(map(len, chunks), default=0) <= (max_chunk or 4096)
    if stats.forced_cuts == 0:
        matcher = regex.compile(pretokenize.NAMED_PATTERNS[pattern])
        pieces = [p for c in chunks for p in matcher.findall(c.decode())]
        assert pieces == matcher.findall(raw.decode())


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_LINE_PARTS), max_size=30), st.integers(0, 40))
def test_first_safe_cut_is_the_first_of_the_safe_cuts(parts, start):
    from fastbpe_nb.io.text_files import first_safe_cut, safe_cut

    buf = "".join(parts).encode()
    # safe_cut of a one-byte range says whether the newline there ends a safe chunk.
    cuts = [i + 1 for i in range(start, len(buf)) if safe_cut(buf, i, i + 1) > 0]
    assert first_safe_cut(buf, start) == (cuts[0] if cuts else -1)
    assert safe_cut(buf, start) == (cuts[-1] if cuts else -1)


# ---------------------------------------------------------- 7. one invalid-UTF-8 policy
BAD_ROWS = [b"ok \xff bad", None, b"\xe2\x82", b"\xac fine", b"clean row"] + [
    d.encode() for d in DOCS]
REPLACED = ["ok \ufffd bad", "\ufffd", "\ufffd fine", "clean row"] + DOCS


def invalid_string_array(rows):
    return pa.array(rows, pa.binary()).cast(pa.string(), safe=False)


def test_invalid_utf8_in_parquet_and_arrow_is_replaced_and_counted(tmp_path):
    tbl = pa.table({"text": invalid_string_array(BAD_ROWS)})
    pq.write_table(tbl, tmp_path / "bad.parquet", row_group_size=3)
    with ipc.new_file(str(tmp_path / "bad.arrow"), tbl.schema) as w:
        w.write_table(tbl, max_chunksize=2)
    with open(tmp_path / "bad.jsonl", "wb") as f:
        for row in BAD_ROWS:
            f.write(b'{"text": null}\n' if row is None else b'{"text": "' + row + b'"}\n')
    expected = fb.train(REPLACED, vocab_size=300)
    for name in ("bad.parquet", "bad.arrow", "bad.jsonl"):
        tok, report = fb.train_files([tmp_path / name], vocab_size=300, return_report=True)
        assert report["invalid_utf8_sequences_replaced"] == 3, name
        same_model(tok, expected)


def test_invalid_utf8_share_is_refused_for_every_kind(tmp_path):
    rows = [b"text \xff\xfe\xfd"] * 2000  # (not at the start: FF FE is a UTF-16 BOM)
    tbl = pa.table({"text": invalid_string_array(rows)})
    pq.write_table(tbl, tmp_path / "bad.parquet")
    with ipc.new_file(str(tmp_path / "bad.arrow"), tbl.schema) as w:
        w.write_table(tbl)
    with open(tmp_path / "bad.jsonl", "wb") as f:
        f.writelines(b'{"text": "' + r + b'"}\n' for r in rows)
    (tmp_path / "bad.txt").write_bytes(b"\n".join(rows))
    for name in ("bad.parquet", "bad.arrow", "bad.jsonl", "bad.txt"):
        with pytest.raises(fb.CorpusReadError, match=f"{name}.*invalid UTF-8.*max_invalid_utf8"):
            fb.train_files([tmp_path / name], vocab_size=300)
        _, report = fb.train_files([tmp_path / name], vocab_size=300, max_invalid_utf8=0.5,
                                   return_report=True)
        assert report["invalid_utf8_sequences_replaced"] == 6000, name  # 3 per row


def test_lone_surrogate_escapes_in_jsonl(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "a\\ud800b"}\n' + "".join(json.dumps({"text": d}) + "\n"
                                                        for d in DOCS))
    tok, report = fb.train_files([path], vocab_size=300, return_report=True)
    assert report["invalid_utf8_sequences_replaced"] == 1
    same_model(tok, fb.train(["a\ufffdb"] + DOCS, vocab_size=300))


def test_foreign_literal_regex_stays_a_regex(tmp_path):
    # A tokenizer.json splitting on the literal word "GPT2" must not become our gpt2 pattern.
    from fastbpe_nb.io.huggingface_format import pattern_from_hf_regex

    assert pattern_from_hf_regex("GPT2") == "(?:GPT2)"
    assert pattern_from_hf_regex("abc") == "(?:abc)"
    assert pattern_from_hf_regex(r"\s+") == r"\s+"
    assert fb.split("xGPT2y", pattern="(?:GPT2)") == ["x", "GPT2", "y"]


def test_char_mode_cli_reads_like_train_files(tmp_path):
    plain = tmp_path / "c.txt"
    plain.write_text(TEXT)
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + TEXT.encode()))
    models = []
    for name in ("c.txt", "c.txt.gz"):
        out = tmp_path / f"{name}.json"
        assert cli_main(["train", str(tmp_path / name), "-o", str(out), "--base", "chars",
                         "--vocab-size", "200", "-q"]) == 0
        models.append(fb.load(out))
    same_model(*models)
    same_model(models[0], fb.train([TEXT], vocab_size=200, base="chars"))


def test_word_table_gathered_in_groups(monkeypatch, tmp_path):
    # WordCounter.table gathers the words in groups of GATHER_BYTES (bounded temporaries):
    # tiny groups, and single words longer than a group, give the same table.
    from fastbpe_nb.counting import WordCounter

    texts = DOCS + ["y" * 5000, "z" * 3]
    ref = WordCounter("gpt2")
    ref.add_texts(texts)
    expected = ref.table()
    for size in (1, 7, 4096):
        monkeypatch.setattr(WordCounter, "GATHER_BYTES", size)
        got = ref.table()
        for a, b in zip(got, expected):
            assert np.array_equal(a, b)
    words = ref.words()
    assert words["y" * 5000] == 1 and words[" cat"] > 1


HOSTILE = ["the", "cat", "Grüße", "мир", "你好", "it's", "42", "x=1;", "  ", "\t", "😀", "don't",
           "I'M", "2024", "naïve", "#define", "/*", "*/", ";", "}", "'s", "\u3000", "!/",
           "\u00a0", "a\u00a0b", "...", "'", "\u2028", "12345678", "'ll", "$", "x\u3000"]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
@pytest.mark.parametrize("seed", range(2))
def test_space_cuts_are_exact_on_hostile_text(tmp_path, pattern, seed):
    from fastbpe_nb.counting import WordCounter

    rng = random.Random(seed)
    text = " ".join(rng.choice(HOSTILE) for _ in range(6000))  # one line, ~30 KB
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode())
    ref = WordCounter(pattern)
    ref.add_texts([text])
    counter, stats = count_files([path], pattern=pattern, chunk_bytes=64, max_chunk_bytes=200)
    assert stats.cuts_at_spaces > 100 and stats.forced_cuts == 0
    for a, b in zip(counter.table(), ref.table()):
        assert np.array_equal(a, b)


_UTF8_EDGES = [b"a", b"\x80", b"\xbf", b"\xc0", b"\xc2", b"\xdf", b"\xe0", b"\xed", b"\xef",
               b"\xf0", b"\xf4", b"\xf5", b"\xff", b"\xa0", b"\x9f", b"\x90", b"\x8f", b"\x00"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_UTF8_EDGES), max_size=10), st.binary(max_size=6))
def test_is_utf8_judges_as_pythons_strict_decoder(parts, tail):
    """The fast validity check of the read path (Arrow's validator) agrees with
    ``bytes.decode`` on the bytes that make UTF-8 tricky: lead bytes, continuation
    bytes, surrogates (ED A0..BF), overlong forms (C0, E0 80), beyond U+10FFFF (F4 90,
    F5), truncated sequences."""
    from fastbpe_nb.io.utf8_policy import is_utf8

    raw = b"".join(parts) + tail
    try:
        raw.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert is_utf8(raw) == valid
    assert is_utf8(memoryview(raw)) == valid


def _three_batch_files(tmp_path):
    table = pa.table({"text": ["the cat sat on the mat"] * 50})
    arrow = str(tmp_path / "c.arrow")
    with ipc.new_file(arrow, table.schema) as writer:
        for _ in range(3):
            writer.write_table(table)
    parquet = str(tmp_path / "c.parquet")
    pq.write_table(pa.concat_tables([table] * 3), parquet, row_group_size=50)
    return arrow, parquet


@pytest.mark.parametrize("kind", ["arrow", "parquet"])
@pytest.mark.parametrize("on_bad_input", ["error", "skip"])
def test_reading_out_of_memory_is_not_an_unreadable_file(tmp_path, monkeypatch, kind,
                                                         on_bad_input):
    """pyarrow running out of memory in the middle of a file is OutOfMemoryError naming the
    file, not CorpusReadError "not a readable file": the file is fine, and on_bad_input=
    "skip" must not drop it from the training as a bad file."""
    from fastbpe_nb.io import arrow_text

    arrow, parquet = _three_batch_files(tmp_path)
    name = "ipc_batches" if kind == "arrow" else "row_group_batches"
    real = getattr(arrow_text, name)

    def failing(*args, **kwargs):
        batches = real(*args, **kwargs)
        yield next(batches)
        raise pa.ArrowMemoryError("malloc of size 1073741824 failed")

    monkeypatch.setattr(arrow_text, name, failing)
    if kind == "parquet":  # each row group read alone (small ones are read together)
        monkeypatch.setattr(arrow_text, "parquet_read_plan",
                            lambda pf: [([g], 1000) for g in range(pf.num_row_groups)])
    path = arrow if kind == "arrow" else parquet
    with pytest.raises(fb.OutOfMemoryError, match=r"c\.(arrow|parquet).*out of memory") as info:
        fb.train_files([path], vocab_size=300, on_bad_input=on_bad_input)
    assert not isinstance(info.value, fb.CorpusReadError)
    assert "1073741824" in str(info.value)
