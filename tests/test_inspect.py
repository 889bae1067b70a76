"""Seeing BPE: the merge trace, pieces, construction trees, per-file cost, the demo."""

import csv
import io
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb import cli
from fastbpe_nb.inspect import (
    TokenLookupError,
    construction_tree,
    format_trace,
    format_tree,
    merges_for_vocab_size,
    piece_id,
    prefix_tokenizer,
    print_trace,
    reorder_merges,
    trace_rows,
    tree_depth,
    tree_layout,
    word_rows,
)
from fastbpe_nb.stats import id_dtype, length_summary, parse_sizes, split_documents

from fbtest import CORPORA

GOLDEN_TREE = """\
aaab (258) = aa (256) + ab (257)   [merge 2]
├── aa (256) = a (97) + a (97)   [merge 0]
│   ├── a (97)   byte 0x61
│   └── a (97)   byte 0x61
└── ab (257) = a (97) + b (98)   [merge 1]
    ├── a (97)   byte 0x61
    └── b (98)   byte 0x62"""

PROSE = ("The lower the newer, the lowest the widest.\nThe newest low is lower than the lowest.\n\n"
         "Привет, мир! 東京 2024 😀\n\n\n  widest newest lowest\n")


@pytest.fixture(scope="module")
def golden():
    return fb.train(["aaabdaaabac"], vocab_size=259, pattern=None)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small model on disk, its corpus file, and the Tokenizer."""
    folder = tmp_path_factory.mktemp("small")
    corpus = folder / "corpus.txt"
    corpus.write_text(PROSE * 20, encoding="utf-8")
    model = folder / "m.json"
    tok = fb.train([PROSE * 20], vocab_size=300, special_tokens=["<|eot|>"])
    tok.save(model)
    return folder, corpus, model, tok


def run(argv, capsys):
    """``fastbpe argv`` in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# --------------------------------------------------------------------- construction tree
def test_golden_construction_tree(golden):
    tree = construction_tree(golden, 258)
    assert (tree["id"], tree["kind"], tree["rank"]) == (258, "merge", 2)
    left, right = tree["children"]
    assert (left["id"], right["id"]) == (256, 257)
    assert [c["id"] for c in left["children"]] == [97, 97]
    assert [c["id"] for c in right["children"]] == [97, 98]
    assert all(c["kind"] == "byte" and c["children"] == [] for c in left["children"])
    assert tree["bytes"] == b"aaab" and left["piece"] == "aa"
    assert tree_depth(tree) == 2
    assert format_tree(tree) == GOLDEN_TREE
    layout = tree_layout(tree)
    assert [n["id"] for n in layout] == [258, 256, 97, 97, 257, 97, 98]
    assert layout[0]["parent"] is None and layout[0]["y"] == 2.0
    assert [n["x"] for n in layout if n["kind"] == "byte"] == [0.0, 1.0, 2.0, 3.0]
    assert layout[1]["x"] == 0.5 and layout[0]["x"] == 1.5


def test_tree_of_base_and_special_tokens(small):
    *_, tok = small
    assert construction_tree(tok, 97) == {"id": 97, "piece": "a", "bytes": b"a", "rank": None,
                                          "children": [], "kind": "byte"}
    eot = tok.special_tokens["<|eot|>"]
    assert construction_tree(tok, eot)["kind"] == "special"
    # Every merged token's tree spells its bytes at the leaves, in order.
    for tid in range(tok.n_base, tok.n_regular):
        leaves = []

        def collect(n):
            if n["children"]:
                for c in n["children"]:
                    collect(c)
            else:
                leaves.append(n["bytes"])

        collect(construction_tree(tok, tid))
        assert b"".join(leaves) == tok.vocab[tid]


def test_cli_token_and_piece_trees(golden, tmp_path, capsys):
    model = tmp_path / "g.json"
    golden.save(model)
    code, out, _ = run(["inspect", "--model", model, "--token", "258"], capsys)
    assert code == 0 and out == GOLDEN_TREE + "\n"
    code, out2, _ = run(["inspect", "--model", model, "--piece", "aaab"], capsys)
    assert code == 0 and out2 == out
    assert piece_id(golden, "aa") == 256 and piece_id(golden, b"ab") == 257


def test_piece_accepts_visible_space(small, capsys):
    _, _, model, tok = small
    the = tok.encode(" the")
    assert len(the) == 1
    code, out, _ = run(["inspect", "--model", model, "--piece", "␣the"], capsys)
    assert code == 0 and out.startswith(f"␣the ({the[0]}) = ")


# --------------------------------------------------------------------------- trace
def test_trace_rows_and_text(golden):
    rows = trace_rows(golden)
    assert [(r["left"], r["right"], r["new"], r["count"], r["vocab_size"]) for r in rows] == [
        (97, 97, 256, 4, 257), (97, 98, 257, 2, 258), (256, 257, 258, 2, 259)]
    text = format_trace(golden)
    lines = text.splitlines()
    assert lines[0].split() == ["rank", "left", "+", "right", "->", "new", "token", "count", "vocab"]
    assert lines[3].split() == ["2", "aa", "+", "ab", "->", "aaab", "2", "259"]
    buf = io.StringIO()
    print_trace(golden, file=buf)
    assert buf.getvalue() == text + "\n"
    limited = format_trace(golden, limit=1).splitlines()
    assert len(limited) == 3 and limited[-1] == "... (2 more merges)"


def test_trace_shows_spaces_and_control_bytes():
    tok = fb.train(["a b\ta b\ta b\x01\x01"], vocab_size=260, pattern=None)
    text = format_trace(tok)
    assert "␣" in text and "⇥" in text and " " not in "".join(r["new_piece"] for r in trace_rows(tok))
    assert "<01>" in format_trace(fb.Tokenizer([(1, 1)], pattern=None))


def test_cli_train_trace_and_inspect_merges(tmp_path, capsys):
    corpus = tmp_path / "g.txt"
    corpus.write_text("aaabdaaabac")
    model = tmp_path / "g.json"
    code, out, _ = run(["train", corpus, "-o", model, "--vocab-size", "259", "--pattern", "none",
                        "--trace", "-q"], capsys)
    assert code == 0
    tok = fb.load(model)
    assert out.splitlines()[1].split() == ["0", "a", "+", "a", "->", "aa", "4", "257"]
    assert len(out.splitlines()) == 4
    # From the saved model: same merges, the counts are not stored (a note says so).
    code, out, err = run(["inspect", "--model", model, "--merges"], capsys)
    assert code == 0 and tok.merge_counts is None and "count" in err
    assert out.splitlines()[3].split() == ["2", "aa", "+", "ab", "->", "aaab", "259"]
    code, out, _ = run(["inspect", "--model", model, "--merges", "--limit", "2"], capsys)
    assert len(out.splitlines()) == 4 and "1 more merges" in out


# ---------------------------------------------------------------------------- pieces
def test_cli_pieces_and_words(small, tmp_path, capsys):
    _, _, model, tok = small
    code, out, _ = run(["inspect", "--model", model, "the lower"], capsys)
    ids = tok.encode("the lower")
    pieces = "|".join(tok.vocab[i].decode().replace(" ", "␣") for i in ids)
    assert code == 0 and out == f"{pieces}   ({len(ids)} tokens: {ids})\n"
    code, out, _ = run(["inspect", "--model", model, "--words", "lowest", "the", "zebra"], capsys)
    lines = out.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["word", "tokens", "count"]
    rows = {line.split("|")[1].strip(): line for line in lines[2:]}
    assert set(rows) == {"lowest", "the", "zebra"}
    assert rows["zebra"].rstrip("| ").endswith(str(len(tok.encode("zebra"))))
    words = tmp_path / "words.txt"
    words.write_text("lowest\n\nthe\nzebra\n", encoding="utf-8")
    code, out2, _ = run(["inspect", "--model", model, "--words-file", words], capsys)
    assert code == 0 and out2 == out
    # With --space each word is encoded as inside a sentence.
    spaced = word_rows(tok, ["the"], leading_space=True)[0]
    assert spaced["word"] == " the" and spaced["ids"] == tok.encode(" the")
    code, out, _ = run(["inspect", "--model", model, "--words", "the", "--space"], capsys)
    assert "␣the" in out


def test_cli_dropout_pieces(small, capsys):
    _, _, model, tok = small
    text = "the lowest the newest"
    code, out, _ = run(["inspect", "--model", model, text, "--dropout", "0.5", "--seed", "3"], capsys)
    ids = tok.encode(text, dropout=0.5, seed=3)
    assert code == 0 and out.strip().endswith(f"{ids})") and tok.decode(ids) == text


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("argv, message", [
    (["--token", "99999"], "token id 99999 is not in the vocabulary"),
    (["--token", "-1"], "token id -1 is not in the vocabulary"),
    (["--token", "abc"], "is not an integer"),
    (["--piece", "qqqq"], "is not a single token"),
    ([], "nothing to inspect"),
    (["--words-file", "/nonexistent/words.txt"], "/nonexistent/words.txt"),
    (["--merges", "--limit", "-3"], "--limit"),
])
def test_cli_inspect_bad_input(small, capsys, argv, message):
    _, _, model, _ = small
    code, out, err = run(["inspect", "--model", model, *argv], capsys)
    assert code == 2 and message in err and "Traceback" not in err and out == ""


def test_cli_bad_input_through_the_real_entry_point(small, tmp_path):
    _, _, model, _ = small
    for argv, message in ((["inspect", "--model", model, "--token", "99999"], "99999"),
                          (["inspect", "--model", tmp_path / "no.json", "x"], "no.json"),
                          (["stats", "--model", model, tmp_path / "absent.txt"], "absent.txt")):
        out = subprocess.run([sys.executable, "-m", "fastbpe_nb", *map(str, argv)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert message in out.stderr and "Traceback" not in out.stderr


def test_lookup_errors_are_value_errors(golden):
    with pytest.raises(TokenLookupError, match="valid ids are 0..258"):
        construction_tree(golden, 259)
    with pytest.raises(ValueError, match="encodes as 2 tokens: aa|d"):
        piece_id(golden, "aad")


# ----------------------------------------------------------------------------- stats
def paragraphs(text):
    """Another statement of the rule: blank (whitespace-only) lines separate documents."""
    parts = re.split(r"\n[^\S\n]*(?:\n[^\S\n]*)*\n", "\n" + text + "\n")
    return [p.strip("\n") for p in parts if p.strip()]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def test_split_documents():
    text = "a b\nc\n\n \t\nd\n\n\n\ne  \n"
    assert [d.strip() for d in split_documents(text)] == ["a b\nc", "d", "e"]
    assert [d.strip() for d in split_documents(text)] == [d.strip() for d in paragraphs(text)]
    assert split_documents(text, "lines") == ["a b", "c", "d", "e  "]
    assert split_documents(text, "file") == [text]
    assert split_documents(" \n\n", "file") == []


def test_stats_numbers_match_a_direct_computation(small, tmp_path, capsys):
    _, corpus, model, tok = small
    other = tmp_path / "ru.txt"
    other.write_text("Привет, мир!\n\nКак дела? Всё хорошо.\n" * 7 + "\n\nконец", encoding="utf-8")
    code, out, _ = run(["stats", "--model", model, corpus, other, "--format", "json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["documents_are"] == "paragraphs"
    rows = report["rows"]
    assert [r["name"] for r in rows] == ["corpus.txt", "ru.txt"]
    first_tpc = None
    for path, row in zip((corpus, other), rows):
        text = path.read_text(encoding="utf-8")
        n_tokens = len(tok.encode(text))
        assert row["chars"] == len(text)
        assert row["bytes"] == len(text.encode("utf-8"))
        assert row["words"] == len(text.split())
        assert row["tokens"] == n_tokens
        assert row["bytes_per_token"] == pytest.approx(len(text.encode()) / n_tokens)
        assert row["tokens_per_char"] == pytest.approx(n_tokens / len(text))
        assert row["tokens_per_word"] == pytest.approx(n_tokens / len(text.split()))
        first_tpc = first_tpc or n_tokens / len(text)
        assert row["tax"] == pytest.approx((n_tokens / len(text)) / first_tpc)
        lengths = [len(tok.encode(d)) for d in paragraphs(text)]
        assert row["documents"] == len(lengths)
        assert row["mean"] == pytest.approx(np.mean(lengths))
        for q in (50, 90, 99):
            assert row[f"p{q}"] == percentile(lengths, q)
        assert row["max"] == max(lengths)
        assert row["id_dtype"] == "uint16" and row["vocab_size"] == tok.vocab_size
    assert rows[0]["tax"] == 1.0 and rows[1]["tax"] > 1.5  # Cyrillic costs more here


def test_stats_markdown_and_csv(small, capsys):
    _, corpus, model, tok = small
    code, md, _ = run(["stats", "--model", model, corpus, "--docs", "lines"], capsys)
    assert code == 0
    assert "Cost per file (vocab_size 300; ids fit in uint16)" in md
    assert "one document per line" in md
    header = [c.strip() for c in md.splitlines()[2].strip("|").split("|")]
    assert header == ["file", "chars", "bytes", "words", "tokens", "bytes/token", "tokens/char",
                      "tokens/word", "tax vs first"]
    code, out, _ = run(["stats", "--model", model, corpus, "--docs", "lines", "--format", "csv"],
                       capsys)
    (row,) = list(csv.DictReader(io.StringIO(out)))
    text = corpus.read_text(encoding="utf-8")
    assert int(row["tokens"]) == len(tok.encode(text))
    assert int(row["documents"]) == sum(1 for line in text.splitlines() if line.strip())


def test_stats_vocab_sizes_are_prefixes_of_one_merge_list(small, capsys):
    _, corpus, model, tok = small
    code, out, _ = run(["stats", "--model", model, corpus, "--vocab-sizes", "257,270,300",
                        "--format", "json"], capsys)
    assert code == 0
    rows = json.loads(out)["rows"]
    assert [r["vocab_size"] for r in rows] == [257, 270, 300]
    text = corpus.read_text(encoding="utf-8")
    for row in rows:
        k = row["merges"]
        small_tok = fb.Tokenizer(tok.merges[:k], pattern=tok.pattern, special_tokens=["<|eot|>"])
        assert small_tok.vocab_size == row["vocab_size"]
        assert row["tokens"] == len(small_tok.encode(text))
    assert rows[0]["merges"] == 0 and rows[0]["bytes_per_token"] == 1.0
    assert rows[0]["bytes_per_token"] < rows[1]["bytes_per_token"] < rows[2]["bytes_per_token"]
    code, md, _ = run(["stats", "--model", model, corpus, "--vocab-sizes", "257,300"], capsys)
    assert "Bytes per token by vocabulary size" in md and "(merges)" in md
    code, _, err = run(["stats", "--model", model, corpus, "--vocab-sizes", "1k"], capsys)
    assert code == 2 and "larger than the model's 300" in err
    code, _, err = run(["stats", "--model", model, corpus, "--vocab-sizes", "lots"], capsys)
    assert code == 2 and "--vocab-sizes" in err


def test_stats_trains_when_no_model_is_given(small, capsys):
    _, corpus, _, _ = small
    code, out, err = run(["stats", corpus, "--train", corpus, "--vocab-sizes", "260,280",
                          "--format", "csv"], capsys)
    assert code == 0 and "trained a vocabulary of 280" in err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [int(r["vocab_size"]) for r in rows] == [260, 280]
    direct = fb.train_files([str(corpus)], vocab_size=280)
    assert int(rows[1]["tokens"]) == len(direct.encode(corpus.read_text(encoding="utf-8")))
    # No --train: the standard-library sources.
    code, out, err = run(["stats", corpus, "--train-mb", "0.3", "--vocab-size", "300", "-q",
                          "--format", "json"], capsys)
    assert code == 0 and err == "" and json.loads(out)["rows"][0]["vocab_size"] == 300


def test_stats_reads_parquet_rows_as_documents(small, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _, _, model, tok = small
    docs = ["the lowest", None, "newest widest", "Привет"]
    pq.write_table(pa.table({"body": docs}), tmp_path / "d.parquet")
    code, out, _ = run(["stats", "--model", model, tmp_path / "d.parquet", "--column", "body",
                        "--format", "json"], capsys)
    (row,) = json.loads(out)["rows"]
    lengths = [len(tok.encode(d)) for d in docs if d is not None]
    assert row["documents"] == 3 and row["tokens"] == sum(lengths) and row["max"] == max(lengths)


def test_stats_helpers():
    assert parse_sizes("4k,1k, 16k,1k") == [1024, 4096, 16384]
    assert parse_sizes("1000,300") == [300, 1000]
    assert id_dtype(65536) == "uint16" and id_dtype(65537) == "uint32"
    assert id_dtype(100277) == "uint32"
    assert length_summary([]) == {"documents": 0, "mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    s = length_summary(list(range(1, 101)))
    assert (s["p50"], s["p90"], s["p99"], s["max"]) == (50, 90, 99, 100)


# --------------------------------------------------------- prefixes, orders, dropout
def test_prefix_tokenizer_and_vocab_sizes(small):
    *_, tok = small
    assert merges_for_vocab_size(tok, tok.vocab_size) == len(tok.merges)
    assert merges_for_vocab_size(tok, 257) == 0
    with pytest.raises(ValueError):
        merges_for_vocab_size(tok, 256)
    p = prefix_tokenizer(tok, 10)
    assert p.vocab_size == 256 + 10 + 1 and p.special_tokens == {"<|eot|>": 266}
    assert p.vocab[:266] == tok.vocab[:266]


def test_reordered_merges_same_vocabulary_worse_encoding():
    text = dropout_corpus()
    tok = fb.train([text[:40_000]], vocab_size=600)
    same = reorder_merges(tok, range(len(tok.merges)))
    assert np.array_equal(same.merges, tok.merges)
    backwards = reorder_merges(tok, [-k for k in range(len(tok.merges))])
    assert sorted(backwards.vocab[:backwards.n_regular]) == sorted(tok.vocab[:tok.n_regular])
    assert not np.array_equal(backwards.merges, tok.merges)
    held_out = text[40_000:]
    assert backwards.decode(backwards.encode(held_out)) == held_out
    assert len(backwards.encode(held_out)) > 1.05 * len(tok.encode(held_out))


def dropout_corpus():
    path = CORPORA / "fortunes_en.txt"
    if path.exists():
        with open(path, "rb") as f:
            return f.read(60_000).decode("utf-8", "ignore")
    from fastbpe_nb.corpus import stdlib_texts

    return "".join(stdlib_texts(60_000))


def test_dropout_on_a_corpus(small):
    *_, tok = small
    text = dropout_corpus()
    plain = tok.encode(text)
    assert tok.encode(text, dropout=0.0, seed=11) == plain
    for p in (0.05, 0.3, 1.0):
        for seed in (0, 1):
            ids = tok.encode(text, dropout=p, seed=seed)
            assert tok.decode(ids) == text
            assert ids == tok.encode(text, dropout=p, seed=seed)
            assert len(ids) >= len(plain)


# ------------------------------------------------------------------------------ demo
@pytest.mark.parametrize("corpora", ["default", "absent"])
def test_demo_shows_every_part(capsys, monkeypatch, tmp_path, corpora):
    if corpora == "absent":
        monkeypatch.setenv("FASTBPE_CORPORA", str(tmp_path / "none"))
    code, out, _ = run(["demo", "--max-mb", "0.5", "--held-out-mb", "0.1", "--vocab-size", "500",
                        "--corpus-bytes", "20000", "--no-progress", "--show", "5"], capsys)
    assert code == 0
    for part in ("== 1. The merge trace", "== 2. How token", "== 3. Pieces", "== 4. What text",
                 "== 5. Bigger vocabulary", "Cost per file", "Document lengths",
                 "decoded back identical"):
        assert part in out, part
    assert re.search(r"^\s+0 .* -> ", out, re.M)  # a trace line
    assert "└── " in out  # a construction tree
    assert "\\xf0|\\x9f|\\x98|\\x80" in out or "😀" in out  # the emoji's bytes
    if corpora == "absent":
        assert "built-in sample sentences" in out and "Russian (UDHR art. 1)" in out
