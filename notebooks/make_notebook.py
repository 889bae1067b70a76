"""Generate ``bpe_lifecycle.ipynb`` (the notebook is built from this file so that it stays
reviewable as plain Python; the committed ``.ipynb`` carries no outputs).

    python notebooks/make_notebook.py            # rewrite notebooks/bpe_lifecycle.ipynb
    python notebooks/make_notebook.py --check    # exit 1 if the .ipynb is out of date

Running the notebook writes its figures as PNG files into ``$FASTBPE_FIGURES`` (default:
``notebooks/figures``). The shared sample corpora are used when present
(``$FASTBPE_CORPORA`` or ``../shared/corpora`` beside the repository); otherwise the notebook
falls back to the standard-library sources and built-in sample sentences.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "bpe_lifecycle.ipynb"

CELLS: list[tuple[str, str]] = []


def md(text: str) -> None:
    CELLS.append(("markdown", textwrap.dedent(text).strip("\n")))


def code(text: str) -> None:
    CELLS.append(("code", textwrap.dedent(text).strip("\n")))


# ---------------------------------------------------------------------------------------
md("""
# The life of a BPE tokenizer

Byte-pair encoding in five acts: **train** a vocabulary on real text, **encode** text to ids,
**decode** ids back, then look inside — the merge trace, how one token is built, what the
model can and cannot see — and finally **break it** on purpose.

Every figure is also saved as a PNG into `$FASTBPE_FIGURES` (default `notebooks/figures`).
""")

code("""
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import fastbpe_nb as fb
from fastbpe_nb.corpus import stdlib_texts
from fastbpe_nb.inspect import (construction_tree, format_pieces, format_tree, print_trace,
                                reorder_merges, tree_depth, tree_layout, visible)
from fastbpe_nb.stats import (CORPUS_FILES, SAMPLE_TEXTS, find_corpora, format_markdown,
                              measure_sources, read_head, split_documents, vocab_curve)

FIGURES = Path(os.environ.get("FASTBPE_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)
CORPORA = find_corpora()  # None on a machine without the shared sample corpora
print("figures go to", FIGURES.resolve())
print("shared corpora:", CORPORA or "absent (using built-in samples)")


def save(fig, name):
    path = FIGURES / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print("saved", path)
""")

md("""
## 1. Train → encode → decode

Training is a *compiler*: it counts adjacent pairs in the corpus, merges the most frequent
pair into a new token, and repeats. Its output is an ordered list of merges. We train on
English prose (the fortunes corpus when present, else Python's own standard library) and
keep the last tenth of the documents aside to measure on.
""")

code("""
if CORPORA is not None:
    text = read_head(CORPORA / "fortunes_en.txt", 1_500_000)
    docs = [d for d in text.split("\\n%\\n") if d.strip()]  # fortunes are separated by '%' lines
    source = "fortunes_en.txt"
else:
    docs = list(stdlib_texts(1_500_000))
    source = "the standard-library sources"
cut = len(docs) * 9 // 10
train_docs, held_docs = docs[:cut], docs[cut:]
held_text = "\\n".join(held_docs)

t0 = time.perf_counter()
tok, report = fb.train(train_docs, vocab_size=8192, special_tokens=["<|endoftext|>"],
                       return_report=True)
print(f"trained on {len(train_docs):,} documents of {source} in {time.perf_counter() - t0:.1f} s:"
      f" {len(tok.merges):,} merges, vocab_size {tok.vocab_size:,}")

sample = held_docs[0].strip()[:300]
ids = tok.encode(sample)
print(repr(sample))
print("ids:", ids[:40], "..." if len(ids) > 40 else "")
back = tok.decode(ids)
assert back == sample
print(f"{len(sample.encode())} bytes -> {len(ids)} tokens -> decoded back identical: {back == sample}")
print(format_pieces(tok, sample[:120]))
""")

md("""
## 2. The merge trace

Each line is one merge, in the order training learned it: the two tokens joined, the new
token (`␣` is a space, `↵` a newline), how often the pair occurred at that moment, and the
vocabulary size after it. The first merges are the most frequent pairs of the corpus.
""")

code("""
print_trace(tok, limit=25)
""")

md("""
## 3. How a token is built

Every token above the 256 bytes was made by one merge of two *earlier* tokens, so each token
is a binary tree whose leaves are bytes. The encoder rebuilds exactly these trees, merge by
merge, in rank order.
""")

code("""
candidates = [" something", " understand", " everything", " government", " remember",
              " import", " return"]
single = [tok.encode(w)[0] for w in candidates if len(tok.encode(w)) == 1]
tree_id = max(single, key=lambda i: tree_depth(construction_tree(tok, i))) if single else \\
    max(range(256, tok.n_regular), key=lambda i: len(tok.vocab[i]))
tree = construction_tree(tok, tree_id)
print(format_tree(tree))


def draw_tree(tree, ax):
    \"\"\"Boxes and lines: leaves (bytes) at the bottom, each merge one level up.\"\"\"
    nodes = tree_layout(tree)
    for n in nodes:
        if n["parent"] is not None:
            p = nodes[n["parent"]]
            ax.plot([p["x"], n["x"]], [p["y"], n["y"]], color="0.55", lw=1.2, zorder=1)
    for n in nodes:
        color = "#cfe3ff" if n["kind"] == "merge" else "#ffe8b0"
        ax.text(n["x"], n["y"], f"{n['piece']}\\n{n['id']}", ha="center", va="center",
                fontsize=9, zorder=2, family="DejaVu Sans Mono",
                bbox=dict(boxstyle="round,pad=0.35", fc=color, ec="0.3"))
    xs = [n["x"] for n in nodes]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(-0.6, max(n["y"] for n in nodes) + 0.6)
    ax.set_yticks(range(int(max(n["y"] for n in nodes)) + 1))
    ax.set_ylabel("merge level")
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


leaves = sum(1 for n in tree_layout(tree) if n["kind"] != "merge")
fig, ax = plt.subplots(figsize=(max(6, 0.9 * leaves), 1.2 + 0.9 * tree_depth(tree)))
draw_tree(tree, ax)
ax.set_title(f"token {tree_id} {visible(tok.vocab[tree_id])!r}: built from bytes by merges")
save(fig, "construction_tree")
plt.show()
""")

md("""
## 4. What the model sees: ids, not letters

A language model receives only the ids. The letters are inside the vocabulary entries, which
the model never looks at: `" strawberry"` is one id or a few opaque ids, and nothing in
those numbers says how many `r`s the word has. The model can only learn such facts
indirectly, from text that spells words out.
""")

code("""
for word in ["strawberry", " strawberry", " Strawberry", " STRAWBERRY"]:
    print(f"{word!r:16} {format_pieces(tok, word)}")
ids = tok.encode(" strawberry")
print("\\nwhat the model receives:", ids)
print("what only the tokenizer knows:", [tok.vocab[i] for i in ids])
print("letters 'r' hidden inside those ids:", sum(tok.vocab[i].count(b"r") for i in ids))
""")

md("""
### `"the"` and `" the"` are different tokens

Byte-level BPE keeps the space *in front of* a word as part of the word's token. The same
word at the start of a text, after a space, or capitalised gets unrelated ids.
""")

code("""
for word in ["the", " the", "The", " The", " THE"]:
    print(f"{word!r:8} -> {tok.encode(word)}")
print(format_pieces(tok, "the cat and the dog"))
""")

md("""
### An emoji is four bytes

Byte-level BPE has all 256 bytes as base tokens, so any text can be encoded — an emoji the
training text never contained becomes its UTF-8 bytes, one token each. A token may hold
*part* of a character: the streaming decoder holds such bytes back until the character is
complete.
""")

code("""
emoji = "😀"
print(emoji, "=", list(emoji.encode("utf-8")), "(UTF-8 bytes)")
ids = tok.encode(emoji)
print("tokens:", ids, [tok.vocab[i] for i in ids])
stream = tok.stream_decoder()
print("streaming decode, one id at a time:", [stream.push(i) for i in ids])
print(format_pieces(tok, "Привет 東京 😀"))
""")

md("""
## 5. What a language costs

Tokens per character of text in several languages, with the English-trained vocabulary. A
vocabulary spends its merges on what was frequent in its training text; other languages and
scripts fall apart into short pieces (down to single bytes: 2 per Cyrillic letter, 3 per
Chinese character) and cost several times more tokens for the same content — the
*multilingual tax* (the last column: tokens/char relative to the first row).
""")

code("""
if CORPORA is not None:
    lang_sources = [(name, read_head(CORPORA / file, 200_000), None)
                    for name, file in CORPUS_FILES.items() if (CORPORA / file).exists()]
else:
    lang_sources = [(lang, text, None) for lang, text in SAMPLE_TEXTS.items()]
rows = measure_sources(tok, lang_sources)
print(format_markdown(rows))

fig, ax = plt.subplots(figsize=(7, 3.5))
names = [r["name"] for r in rows]
values = [r["tokens_per_char"] for r in rows]
bars = ax.bar(names, values, color="#4c72b0")
ax.bar_label(bars, fmt="%.2f")
ax.set_ylabel("tokens per character")
ax.set_title(f"Cost per language (vocabulary of {tok.vocab_size:,} trained on {source})")
ax.tick_params(axis="x", rotation=20)
save(fig, "tokens_per_char")
plt.show()
""")

md("""
## 6. Bigger vocabulary, fewer tokens

A merge list is ordered, so its first *k* merges are themselves a tokenizer (the one training
would have produced with a smaller `vocab_size`). One training run gives the whole curve:
compression (bytes per token) on the held-out text against vocabulary size. Returns
diminish: each new merge covers rarer pairs than the one before.
""")

code("""
sizes = [s for s in (257, 300, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
         if s <= tok.vocab_size]
curve_sources = [("held-out English" if CORPORA is not None else "held-out", held_text[:300_000], None)]
if CORPORA is not None and (CORPORA / "fortunes_de.txt").exists():
    curve_sources.append(("German", read_head(CORPORA / "fortunes_de.txt", 300_000), None))
curve = vocab_curve(tok, curve_sources, sizes)

fig, ax = plt.subplots(figsize=(7, 3.5))
for name, *_ in curve_sources:
    pts = [(r["vocab_size"], r["bytes_per_token"]) for r in curve if r["name"] == name]
    ax.plot(*zip(*pts), marker="o", label=name)
ax.set_xscale("log", base=2)
ax.set_xlabel("vocabulary size (prefixes of one merge list)")
ax.set_ylabel("bytes per token")
ax.set_title("Compression against vocabulary size")
ax.grid(alpha=0.3)
ax.legend()
save(fig, "bytes_per_token")
plt.show()
by = {(r["name"], r["vocab_size"]): r for r in curve}
print(f"{'vocab':>6} {'merges':>6}  " + "  ".join(f"{n:>18}" for n, *_ in curve_sources)
      + "   (bytes per token)")
for size in sizes:
    row = [by[(n, size)] for n, *_ in curve_sources]
    print(f"{size:>6} {row[0]['merges']:>6}  " + "  ".join(f"{r['bytes_per_token']:>18.2f}" for r in row))
""")

md("""
## 7. BPE-dropout

At training time of a language model, skipping each applicable merge with probability *p*
shows the model other segmentations of the same words (Provilkov et al., 2020), which makes
it more robust. `p = 0` is ordinary encoding; every result still decodes to the same text,
and the same seed gives the same ids.
""")

code("""
phrase = " unbelievable tokenization"
for p in (0.0, 0.1, 0.3, 0.6):
    for seed in (0, 1):
        ids = tok.encode(phrase, dropout=p, seed=seed)
        assert tok.decode(ids) == phrase
        print(f"p={p:<4} seed={seed}: {format_pieces(tok, phrase, dropout=p, seed=seed)}")
assert tok.encode(phrase, dropout=0.3, seed=7) == tok.encode(phrase, dropout=0.3, seed=7)
""")

md("""
## 8. Break it

**No merges at all.** A tokenizer with an empty merge list is the bytes themselves: one token
per byte.
""")

code("""
bytes_only = fb.Tokenizer([], pattern=tok.pattern)
text = held_docs[1][:200] if len(held_docs) > 1 else sample
print(f"{len(text.encode())} bytes -> {len(bytes_only.encode(text))} tokens with 0 merges, "
      f"{len(tok.encode(text))} tokens with {len(tok.merges):,}")
""")

md("""
**Merges in the wrong order.** Reversing the merge list is not even a valid model — a merge
would use a token that no earlier merge has made:
""")

code("""
try:
    fb.Tokenizer(tok.merges[::-1], pattern=tok.pattern)
except fb.ModelFormatError as exc:
    print("ModelFormatError:", str(exc)[:160])
""")

md("""
So we apply the **same merges** (the same vocabulary!) in the order closest to reversed that
is still valid: late merges first wherever their parts exist. The encoder replays merges by
rank, so the pieces change — and the text needs more tokens. BPE is not longest-match:
the order of the merges is part of the model.
""")

code("""
backwards = reorder_merges(tok, [-k for k in range(len(tok.merges))])
assert sorted(backwards.vocab[:backwards.n_regular]) == sorted(tok.vocab[:tok.n_regular])
probe = held_text[:200_000]
n_right, n_wrong = len(tok.encode(probe)), len(backwards.encode(probe))
assert backwards.decode(backwards.encode(probe)) == probe
print(f"held-out text: {n_right:,} tokens in rank order, {n_wrong:,} in reversed order "
      f"({n_wrong / n_right - 1:+.0%})")
for phrase in [" nevertheless", " interesting", " the government"]:
    print(f"{phrase!r:18} right: {format_pieces(tok, phrase)}")
    print(f"{'':18} wrong: {format_pieces(backwards, phrase)}")
""")

md("""
**Trained on one language, encoding another.** A vocabulary trained on Russian text against
the English one, each measured on both languages.
""")

code("""
if CORPORA is not None and (CORPORA / "fortunes_ru.txt").exists():
    ru_text = read_head(CORPORA / "fortunes_ru.txt", 1_200_000)
    cut = ru_text.index("\\n", len(ru_text) * 5 // 6)  # train on 5/6, measure on the rest
    ru_train, ru_test = ru_text[:cut], ru_text[cut:]
    ru_vocab = 8192
else:
    ru_train = ru_test = SAMPLE_TEXTS["Russian"]
    ru_vocab = 400
en_test = held_text[:200_000]
tok_ru = fb.train(split_documents(ru_train), vocab_size=ru_vocab, special_tokens=["<|endoftext|>"])
print(f"{'':22}{'English text':>14}{'Russian text':>14}   (tokens per character)")
for name, t in (("English-trained", tok), ("Russian-trained", tok_ru)):
    cells = [len(t.encode(x)) / len(x) for x in (en_test, ru_test)]
    print(f"{name:22}" + "".join(f"{c:14.3f}" for c in cells))
word = " спасибо"
print(f"{word!r}: English-trained {format_pieces(tok, word)}")
print(f"{'':12} Russian-trained {format_pieces(tok_ru, word)}")
""")

md("""
## Where to go next

- `fastbpe inspect --model m.json --merges --limit 50` prints the trace of a saved model;
  `--token ID` / `--piece TEXT` draw construction trees; `--words w1 w2` tabulates words.
- `fastbpe stats --model m.json a.txt b.txt` measures the cost per file (`--vocab-sizes 1k,4k,16k`
  for the curve); `fastbpe demo` runs a tour like this one on your Python's standard library.
""")

code("""
print(sorted(p.name for p in FIGURES.glob("*.png")))
""")


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for index, (kind, source) in enumerate(CELLS):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell["id"] = f"cell-{index:02d}"  # stable ids: regenerating changes nothing
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render() -> str:
    return nbformat.writes(build()) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        current = NOTEBOOK.read_text(encoding="utf-8") if NOTEBOOK.exists() else ""
        if current != text:
            print(f"{NOTEBOOK} is out of date: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    NOTEBOOK.write_text(text, encoding="utf-8")
    print(f"wrote {NOTEBOOK} ({len(CELLS)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
