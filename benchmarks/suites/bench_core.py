"""Training, splitting, encoding and decoding benchmarks (kernels warmed in setup)."""

import tempfile

import numpy as np

import fastbpe_nb as fb
from fastbpe_nb.training import TrainOptions, train_from_table
from fastbpe_nb.word_table import count_corpus

from .data import code_text, documents, language_text, parquet_file


def _warm():
    fb.train(["warm up the kernels " * 20], vocab_size=300)


class Counting:
    """Word counting (pre-tokenize + count) of 2 MB, per language."""

    params = ["en", "ru", "code"]
    param_names = ["language"]

    def setup(self, language):
        text = code_text(2_000_000) if language == "code" else language_text(language)
        self.docs = documents(text)
        _warm()

    def time_count_words(self, language):
        count_corpus(self.docs, "gpt2")


class Merging:
    """The merge loop alone, from a prepared word table (vocab 4k and 32k, two languages)."""

    params = (["en", "code"], [4096, 32768])
    param_names = ["language", "vocab_size"]
    timeout = 300

    def setup(self, language, vocab_size):
        text = code_text(4_000_000) if language == "code" else language_text("en", 4_000_000)
        counter = count_corpus(documents(text), "gpt2")
        word_bytes, self.offsets, self.counts = counter.table()
        self.symbols = word_bytes.astype(np.int32)
        self.opts = TrainOptions.make(vocab_size)
        _warm()

    def time_merge(self, language, vocab_size):
        train_from_table(self.symbols.copy(), self.offsets, self.counts, None, self.opts)


class TrainEndToEnd:
    params = [4096, 32768]
    param_names = ["vocab_size"]
    timeout = 300

    def setup(self, vocab_size):
        self.docs = documents(code_text(4_000_000))
        _warm()

    def time_train(self, vocab_size):
        fb.train(self.docs, vocab_size=vocab_size)

    def peakmem_train(self, vocab_size):
        fb.train(self.docs, vocab_size=vocab_size)


class Split:
    """Pre-tokenization alone (the Numba scanner), per named pattern."""

    params = ["gpt2", "cl100k", "o200k"]
    param_names = ["pattern"]

    def setup(self, pattern):
        self.text = language_text("en", 2_000_000)
        fb.split(self.text[:1000], pattern)

    def time_split(self, pattern):
        fb.split(self.text, pattern)


class Encode:
    """Encoding held-out text with a 16k vocabulary trained on other text."""

    timeout = 300

    def setup(self):
        text = code_text(4_000_000)
        cut = len(text) // 2
        self.tok = fb.train(documents(text[:cut]), vocab_size=16384,
                            special_tokens=["<|endoftext|>"])
        self.text = text[cut:]
        self.docs = documents(self.text)
        self.ids = self.tok.encode_ordinary(self.text)
        self.tok.encode_batch(self.docs[:100])
        self.parquet = parquet_file()
        self.out = tempfile.mkdtemp(prefix="fastbpe-bench-")
        self.model = self.out + "/model.json"
        self.tok.save(self.model)

    def time_encode_long_text(self):
        self.tok.encode_ordinary(self.text)

    def time_encode_batch(self):
        self.tok.encode_batch(self.docs)

    def time_decode(self):
        self.tok.decode(self.ids)

    def time_encode_parquet(self):
        fb.encode_parquet(self.tok, self.parquet, self.out, special="text")

    def peakmem_encode_parquet(self):
        fb.encode_parquet(self.tok, self.parquet, self.out, special="text")

    def time_load_model(self):
        fb.load(self.model)

    def track_bytes_per_token_code(self):
        return len(self.text.encode()) / len(self.ids)

    track_bytes_per_token_code.unit = "bytes/token"

    def track_bytes_per_token_english(self):
        text = language_text("en", 1_000_000)
        return len(text.encode()) / len(self.tok.encode_ordinary(text))

    track_bytes_per_token_english.unit = "bytes/token"


class EncodeAdversarial:
    """One huge pre-token of 1 MiB (the long-piece path: windowed rank sweep) and 16 MiB of
    a one-byte-per-piece text (the segmented huge-text path); 2k vocabulary trained on code."""

    params = ["digits", "spaces_then_x", "letters", "a_dot_16mib"]
    param_names = ["text"]
    timeout = 300

    def setup(self, kind):
        import random
        import string

        self.tok = fb.train(documents(code_text(1_000_000)), vocab_size=2048)
        rnd = random.Random(0)
        n = 1 << 20
        self.text = {
            "digits": lambda: "".join(rnd.choices(string.digits, k=n)),
            "spaces_then_x": lambda: " " * (n - 1) + "x",
            "letters": lambda: "".join(rnd.choices(string.ascii_letters, k=n)),
            "a_dot_16mib": lambda: "a." * (8 << 20),
        }[kind]()
        self.tok.encode_ordinary(self.text)  # loads every kernel this path uses

    def time_encode_ordinary(self, kind):
        self.tok.encode_ordinary(self.text)

    def peakmem_encode_ordinary(self, kind):
        self.tok.encode_ordinary(self.text)

    def time_encode_to_numpy(self, kind):
        # The same ids without the Python list (for a_dot_16mib, 16.8M ids: 128 MB of it).
        self.tok.encode_to_numpy(self.text)
