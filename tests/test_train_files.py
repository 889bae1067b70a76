"""Training from files: streaming readers, invariance, counts artefacts, faults."""

import os
import random

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.io.text_files import safe_cut

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ipc = pytest.importorskip("pyarrow.ipc")


def make_docs(seed=0, n=300):
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "mat", "Grüße", "мир", "你好", "it's", "42", "x=1;",
             "  ", "\n", "\t", "😀", "don't", "I'M", "2024", "naïve", "\n#define", "\n/*",
             "*/\n", ";\n", "\n}", "\n's", "\n\u3000", "!\n\n/", "\r\n", "\n\u00a0"]
    docs = []
    for _ in range(n):
        k = rng.randint(0, 40)
        docs.append(" ".join(rng.choice(words) for _ in range(k)) + rng.choice(["", "\n", "!\n"]))
    return docs


DOCS = make_docs()


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(d if d.endswith("\n") else d + "\n" for d in DOCS), encoding="utf-8")
    return path


def same_model(a, b):
    assert np.array_equal(a.merges, b.merges)
    assert a.vocab == b.vocab


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_text_chunking_does_not_change_the_model(text_file, pattern):
    # (read_bytes: read_text would translate \r\n, which the corpus contains on purpose)
    whole = fb.train([text_file.read_bytes().decode("utf-8")], vocab_size=400, pattern=pattern)
    assert len(whole.merges) > 50
    for chunk in (97, 1000, 1 << 20):
        tok = fb.train_files([text_file], vocab_size=400, pattern=pattern, chunk_bytes=chunk)
        same_model(tok, whole)


def test_safe_cut_rule():
    assert safe_cut(b"abc\ndef") == 4
    assert safe_cut(b"abc \ndef") == -1  # whitespace before the newline: not safe
    assert safe_cut(b"abc\n def") == -1  # whitespace after it: not safe
    assert safe_cut(b"abc\n/def") == -1  # o200k's [\r\n/]* tail could take '/'
    assert safe_cut(b"a;\n#define") == 3  # punctuation on both sides is fine
    assert safe_cut("abc\n\u3000x".encode()) == -1  # U+3000 is whitespace
    assert safe_cut("ж\nж".encode()) == len("ж\n".encode())
    assert safe_cut(b"x\n\n") == -1


def test_thread_count_and_order_invariance(tmp_path):
    paths = []
    for i in range(4):
        p = tmp_path / f"part{i}.txt"
        p.write_text("\n".join(make_docs(i, 80)) + "\n", encoding="utf-8")
        paths.append(p)
    base = fb.train_files(paths, vocab_size=420, num_threads=1)
    same_model(fb.train_files(paths, vocab_size=420, num_threads=2), base)
    same_model(fb.train_files(list(reversed(paths)), vocab_size=420), base)  # ids rule: order-free
    for tie in ("hf", "bytes"):
        same_model(fb.train_files(list(reversed(paths)), vocab_size=420, tie_break=tie),
                   fb.train_files(paths, vocab_size=420, tie_break=tie))
    # The `first` rule follows corpus order: it equals training on the texts in that order.
    texts = [p.read_bytes().decode("utf-8") for p in reversed(paths)]
    same_model(fb.train_files(list(reversed(paths)), vocab_size=420, tie_break="first"),
               fb.train(texts, vocab_size=420, tie_break="first"))


def write_parquet(path, docs, row_group_size=50, extra=True):
    table = pa.table({"text": pa.array(docs, pa.string()),
                      "id": pa.array(range(len(docs)), pa.int64())})
    pq.write_table(table, path, row_group_size=row_group_size)


def test_parquet_equals_in_memory_and_counts_nulls(tmp_path):
    docs = DOCS[:150] + [None] * 7 + DOCS[150:]
    path = tmp_path / "c.parquet"
    write_parquet(path, docs)
    tok, report = fb.train_files([path], vocab_size=400, return_report=True)
    same_model(tok, fb.train(DOCS, vocab_size=400))
    assert report["null_rows_skipped"] == 7
    assert report["documents"] == len(DOCS)


def test_arrow_ipc_file_and_stream(tmp_path):
    table = pa.table({"text": pa.array(DOCS, pa.large_string())})
    file_path = tmp_path / "c.arrow"
    with ipc.new_file(str(file_path), table.schema) as w:
        w.write_table(table, max_chunksize=64)
    stream_path = tmp_path / "s.arrows"
    with ipc.new_stream(str(stream_path), table.schema) as w:
        w.write_table(table, max_chunksize=64)
    expected = fb.train(DOCS, vocab_size=380)
    same_model(fb.train_files([file_path], vocab_size=380), expected)
    same_model(fb.train_files([stream_path], vocab_size=380), expected)


def test_folder_and_glob(tmp_path):
    (tmp_path / "sub").mkdir()
    write_parquet(tmp_path / "sub" / "a.parquet", DOCS[:100])
    write_parquet(tmp_path / "sub" / "b.parquet", DOCS[100:])
    a = fb.train_files([tmp_path / "sub"], vocab_size=350)
    b = fb.train_files([str(tmp_path / "sub" / "*.parquet")], vocab_size=350)
    same_model(a, b)
    same_model(a, fb.train(DOCS, vocab_size=350))


def test_counts_file_round_trip(tmp_path, text_file):
    counts = tmp_path / "counts.arrow"
    report = fb.count_to_file([text_file], counts, pattern="cl100k")
    assert report["unique_words"] > 10
    table = ipc.open_file(str(counts)).read_all()
    assert table.schema.field("word").type == pa.large_binary()
    assert table.schema.field("count").type == pa.int64()
    for vocab_size in (300, 420):
        from_counts = fb.train_files([counts], vocab_size=vocab_size)
        assert from_counts.pattern == "cl100k"
        same_model(from_counts, fb.train_files([text_file], vocab_size=vocab_size, pattern="cl100k"))
    with pytest.raises(fb.TrainingError, match="pattern"):
        fb.train_files([counts], vocab_size=300, pattern="gpt2")


def test_bad_counts_file(tmp_path):
    from fastbpe_nb.io.counts_file import load_counts

    path = tmp_path / "bad.arrow"
    table = pa.table({"word": pa.array([b"ab"], pa.large_binary()), "count": pa.array([-1])})
    with ipc.new_file(str(path), table.schema) as w:
        w.write_table(table)
    with pytest.raises(fb.ModelFormatError, match="not a fastbpe_nb counts file"):
        load_counts(path)


@pytest.mark.parametrize("content", [b"", b"PAR1garbage", b"not parquet at all"])
def test_corrupt_parquet_names_the_file(tmp_path, content):
    path = tmp_path / "broken.parquet"
    path.write_bytes(content)
    with pytest.raises(fb.CorpusReadError, match="broken.parquet"):
        fb.train_files([path], vocab_size=300)


def test_truncated_parquet_and_skip(tmp_path):
    good = tmp_path / "a_good.parquet"
    write_parquet(good, DOCS)
    bad = tmp_path / "b_bad.parquet"
    data = good.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(fb.CorpusReadError, match="b_bad.parquet"):
        fb.train_files([good, bad], vocab_size=300)
    tok, report = fb.train_files([good, bad], vocab_size=300, on_bad_input="skip",
                                 return_report=True)
    assert [s["path"] for s in report["files_skipped"]] == [str(bad)]
    same_model(tok, fb.train(DOCS, vocab_size=300))


def test_wrong_column(tmp_path):
    path = tmp_path / "c.parquet"
    write_parquet(path, DOCS[:10])
    with pytest.raises(fb.CorpusReadError, match="no column 'body'"):
        fb.train_files([path], vocab_size=300, column="body")
    with pytest.raises(fb.CorpusReadError, match="'id' has type int64"):
        fb.train_files([path], vocab_size=300, column="id")


def test_missing_paths():
    with pytest.raises(fb.CorpusReadError, match="no such file"):
        fb.train_files(["/nonexistent/x.txt"], vocab_size=300)
    with pytest.raises(fb.CorpusReadError, match="no file matches"):
        fb.train_files(["/nonexistent/*.txt"], vocab_size=300)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"hello \xff\xfe world\nabc \xc3\n")
    tok, report = fb.train_files([path], vocab_size=270, return_report=True)
    assert report["invalid_utf8_sequences_replaced"] == 3
    same_model(tok, fb.train(["hello \ufffd\ufffd world\nabc \ufffd\n"], vocab_size=270))


def test_memory_budget(tmp_path, text_file):
    with pytest.raises(fb.MemoryBudgetError, match="max_memory"):
        fb.train_files([text_file], vocab_size=300, max_memory=1 << 20)


def test_report_has_phases(text_file):
    _, report = fb.train_files([text_file], vocab_size=300, return_report=True)
    for key in ("bytes_read", "documents", "pre_tokens", "unique_words", "seconds_counting",
                "seconds_merging", "peak_rss_bytes", "files_skipped"):
        assert key in report, key
    assert report["bytes_read"] == os.path.getsize(text_file)
