"""Counts that combine: shards counted apart merge exactly into the counts of the whole.

``fastbpe count --merge`` / ``fb.merge_counts_files`` sum every word's counts over counts
files (shards of a corpus, counted on different machines or at different times), in an
order-independent way; ``train --from-counts`` takes several files. The result must be what
one counting pass over the concatenated corpus gives (as a table, and as the merges trained
from it), whatever the order of the shards.
"""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

import fastbpe_nb as fb
from fastbpe_nb.errors import ModelFormatError, TrainingError
from fastbpe_nb.io.counts_file import load_counts


def _corpus(seed=0, n_docs=300):
    """Zipf-like words with punctuation, digits and non-ASCII (several pieces per word)."""
    rng = random.Random(seed)
    vocab = ["the", "cat", "sat", "on", "mat", "naïve", "café", "über", "дом", "猫", "x1",
             "2024", "hello,", "world!", "  ", "\n", "it's", "we'll"]
    vocab += ["".join(rng.choices("abcdefghij", k=rng.randint(2, 9))) for _ in range(300)]
    weights = [1 / (k + 1) for k in range(len(vocab))]
    return [" ".join(rng.choices(vocab, weights, k=rng.randint(5, 60))) for _ in range(n_docs)]


def _table(path) -> dict:
    data, offsets, counts, _ = load_counts(path)
    raw = data.tobytes()
    return {raw[offsets[i]:offsets[i + 1]]: int(counts[i]) for i in range(len(counts))}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three counts files of three text shards, and the counts file of their concatenation."""
    folder = tmp_path_factory.mktemp("shards")
    docs = _corpus()
    parts = [docs[:80], docs[80:210], docs[210:]]
    paths = []
    for k, part in enumerate(parts):
        text = folder / f"shard{k}.txt"
        text.write_text("\n".join(part) + "\n", encoding="utf-8")
        fb.count_to_file([text], folder / f"shard{k}.arrow", pattern="cl100k")
        paths.append(folder / f"shard{k}.arrow")
    whole = folder / "whole.txt"
    whole.write_text("".join((folder / f"shard{k}.txt").read_text(encoding="utf-8")
                             for k in range(3)), encoding="utf-8")
    fb.count_to_file([whole], folder / "whole.arrow", pattern="cl100k")
    return paths, folder / "whole.arrow", whole


def test_merged_shards_are_the_counts_of_the_whole_in_any_order(shards, tmp_path):
    paths, whole, _ = shards
    want = _table(whole)
    outputs = []
    for k, order in enumerate([paths, paths[::-1], [paths[1], paths[2], paths[0]]]):
        out = tmp_path / f"merged{k}.arrow"
        report = fb.merge_counts_files(order, out)
        assert _table(out) == want
        assert report["unique_words"] == len(want) and report["words_pruned"] == 0
        assert report["occurrences"] == sum(want.values())
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]  # byte-identical whatever the order
    data, offsets, _, meta = load_counts(tmp_path / "merged0.arrow")
    raw = data.tobytes()
    words = [raw[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    assert words == sorted(words) and meta["order"] == "bytes" and meta["pattern"] == "cl100k"
    # Merging a merged file with nothing new changes nothing.
    fb.merge_counts_files([tmp_path / "merged0.arrow"], tmp_path / "again.arrow")
    assert (tmp_path / "again.arrow").read_bytes() == outputs[0]


@pytest.mark.parametrize("tie_break", ["ids", "hf", "bytes"])
def test_training_from_shards_equals_training_on_the_corpus(shards, tie_break):
    paths, whole, corpus = shards
    from_shards = fb.train_files(paths[::-1], vocab_size=600, tie_break=tie_break)
    from_whole = fb.train_files([whole], vocab_size=600, tie_break=tie_break)
    from_text = fb.train_files([corpus], vocab_size=600, pattern="cl100k", tie_break=tie_break)
    assert len(from_text.merges) > 200
    assert np.array_equal(from_shards.merges, from_text.merges)
    assert np.array_equal(from_whole.merges, from_text.merges)
    assert from_shards.pattern == "cl100k"


def test_first_tie_rule_needs_a_corpus_order(shards):
    paths, whole, _ = shards
    with pytest.raises(TrainingError, match="first occurrences"):
        fb.train_files(paths, vocab_size=400, tie_break="first")
    assert len(fb.train_files([whole], vocab_size=400, tie_break="first").merges) > 0


def test_min_count_prunes_and_reports(shards, tmp_path):
    paths, whole, _ = shards
    want = _table(whole)
    report = fb.merge_counts_files(paths, tmp_path / "pruned.arrow", min_count=3)
    kept = {w: c for w, c in want.items() if c >= 3}
    assert _table(tmp_path / "pruned.arrow") == kept
    assert report["words_pruned"] == len(want) - len(kept) > 0
    assert report["occurrences_pruned"] == sum(c for c in want.values() if c < 3)
    with pytest.raises(ValueError, match="min_count"):
        fb.merge_counts_files(paths, tmp_path / "x.arrow", min_count=0)


def test_counts_of_other_pre_tokenizations_are_refused(shards, tmp_path):
    paths, _, corpus = shards
    fb.count_to_file([corpus], tmp_path / "gpt2.arrow", pattern="gpt2")
    with pytest.raises(ModelFormatError, match="gpt2.arrow") as info:
        fb.merge_counts_files([paths[0], tmp_path / "gpt2.arrow"], tmp_path / "bad.arrow")
    assert "pattern" in str(info.value)
    fb.count_to_file([corpus], tmp_path / "special.arrow", pattern="cl100k",
                     special_tokens=["<|x|>"])
    with pytest.raises(ModelFormatError, match="special"):
        fb.merge_counts_files([paths[0], tmp_path / "special.arrow"], tmp_path / "bad.arrow")
    assert not (tmp_path / "bad.arrow").exists()  # nothing written on refusal
    with pytest.raises(TrainingError, match="not both"):
        fb.train_files([paths[0], corpus], vocab_size=300)


def test_cli_count_merge_and_train_from_several_counts(shards, tmp_path):
    paths, whole, _ = shards

    def cli(*args):
        run = subprocess.run([sys.executable, "-m", "fastbpe_nb", *map(str, args)],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stdout

    out = cli("count", "--merge", *paths, "-o", tmp_path / "all.arrow", "--min-count", "2")
    assert "words under --min-count 2 pruned" in out
    assert _table(tmp_path / "all.arrow") == {w: c for w, c in _table(whole).items() if c >= 2}
    cli("train", "--from-counts", *paths, "-o", tmp_path / "m.json", "--vocab-size", "500", "-q")
    want = fb.train_files([whole], vocab_size=500)
    assert np.array_equal(fb.load(tmp_path / "m.json").merges, want.merges)


def _merge_and_train(paths, out):
    report = fb.merge_counts_files(paths, out)
    return report["unique_words"], fb.train_files(paths, vocab_size=500).merges.tolist()


def test_merging_and_training_from_shards_in_a_forked_child(shards, tmp_path):
    # After parallel kernels ran in the parent (Numba's pool started), a 'fork' child merges
    # the shards and trains from them: the same table and merges as the parent, no hang.
    import multiprocessing as mp

    paths, _, corpus = shards
    tok = fb.train_files([corpus], vocab_size=300, pattern="cl100k")
    tok.encode_batch(_corpus(seed=1, n_docs=50), num_threads=2)  # the pool runs now
    want = _merge_and_train(paths, tmp_path / "parent.arrow")
    with mp.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_merge_and_train, (paths, tmp_path / "child.arrow")).get(timeout=120)
    assert got == want
    assert (tmp_path / "child.arrow").read_bytes() == (tmp_path / "parent.arrow").read_bytes()


@pytest.mark.parametrize("tie_break", ["ids", "hf", "bytes"])
def test_one_shard_or_sixteen_give_byte_identical_counts_and_models(tmp_path, tie_break):
    """Issue 20's acceptance: the same corpus counted as 1 shard or as 16 shards (cut at
    document boundaries, some shards tiny), merged, gives a byte-identical counts file and
    byte-identical model files, whatever the order of the shards."""
    docs = _corpus(seed=7, n_docs=400)
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1, len(docs)), 15))
    parts = [docs[a:b] for a, b in zip([0] + cuts, cuts + [len(docs)])]
    assert len(parts) == 16

    def count(name, texts):
        text = tmp_path / f"{name}.txt"
        text.write_text("".join(d + "\n" for d in texts), encoding="utf-8")
        fb.count_to_file([text], tmp_path / f"{name}.arrow", pattern="cl100k")
        return tmp_path / f"{name}.arrow"

    one = count("whole", docs)
    shards = [count(f"shard{k:02d}", part) for k, part in enumerate(parts)]
    merged = {}
    for name, paths in (("one", [one]), ("sixteen", shards), ("shuffled", rng.sample(shards, 16))):
        fb.merge_counts_files(paths, tmp_path / f"{name}.counts.arrow")
        model = fb.train_files([tmp_path / f"{name}.counts.arrow"], vocab_size=700,
                               tie_break=tie_break)
        assert len(model.merges) > 300
        model.save(tmp_path / f"{name}.json")
        merged[name] = ((tmp_path / f"{name}.counts.arrow").read_bytes(),
                        (tmp_path / f"{name}.json").read_bytes())
    assert merged["one"] == merged["sixteen"] == merged["shuffled"]
    # Trained straight from the 16 shards (merged in memory): the same model again.
    direct = fb.train_files(shards, vocab_size=700, tie_break=tie_break)
    direct.save(tmp_path / "direct.json")
    assert (tmp_path / "direct.json").read_bytes() == merged["one"][1]


@pytest.mark.parametrize("tie_break", ["ids", "first"])
def test_min_word_count_prunes_before_merging(shards, tmp_path, tie_break):
    """``train_files(..., min_word_count=k)`` trains on the words counted k times or more:
    the same merges as from the counts pruned by ``merge_counts_files(min_count=k)`` (for
    ``first``: the pruned table keeps the corpus order, checked against a table pruned by
    hand), with what was pruned reported; the CLI passes it on; 0 is refused."""
    paths, whole, corpus = shards
    want = _table(whole)
    tok, report = fb.train_files([corpus], vocab_size=500, pattern="cl100k", min_word_count=3,
                                 tie_break=tie_break, return_report=True)
    assert report["words_pruned"] == sum(c < 3 for c in want.values()) > 0
    assert report["occurrences_pruned"] == sum(c for c in want.values() if c < 3)
    data, offsets, counts, _ = load_counts(whole)
    keep = counts >= 3
    kept = [bytes(data[offsets[i]:offsets[i + 1]]) for i in np.flatnonzero(keep)]
    sym = np.frombuffer(b"".join(kept), np.uint8).astype(np.int32)
    off = np.zeros(len(kept) + 1, np.int64)
    np.cumsum([len(w) for w in kept], out=off[1:])
    from fastbpe_nb.training import TrainOptions, train_from_table

    by_hand = train_from_table(sym, off, counts[keep], None,
                               TrainOptions.make(500, pattern="cl100k", tie_break=tie_break))
    assert np.array_equal(tok.merges, by_hand.merges) and len(tok.merges) > 200
    if tie_break == "ids":
        fb.merge_counts_files(paths, tmp_path / "pruned.arrow", min_count=3)
        from_counts = fb.train_files([tmp_path / "pruned.arrow"], vocab_size=500)
        assert np.array_equal(from_counts.merges, tok.merges)
        assert np.array_equal(fb.train_files([whole], vocab_size=500, min_word_count=3).merges,
                              tok.merges)
        run = subprocess.run([sys.executable, "-m", "fastbpe_nb", "train", str(corpus), "-o",
                              str(tmp_path / "m.json"), "--vocab-size", "500", "--pattern",
                              "cl100k", "--min-word-count", "3"],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert '"words_pruned"' in run.stdout
        assert np.array_equal(fb.load(tmp_path / "m.json").merges, tok.merges)
    for bad in (0, True, 1.0, "2"):  # checked before any work, even where it prunes nothing
        with pytest.raises(ValueError, match="min_word_count"):
            fb.train_files([corpus], vocab_size=300, min_word_count=bad)
