"""Core training and encoding benchmarks (kernels warmed in setup: compile time excluded)."""

import fastbpe_nb as fb

from .data import code_text


class TrainStdlib:
    """Training on 2 MB of standard-library sources (pattern gpt2, tie rule ids)."""

    params = [1024, 4096]
    param_names = ["vocab_size"]
    timeout = 300

    def setup(self, vocab_size):
        text = code_text(2_000_000)
        self.docs = text.split("\n\n")
        fb.train(self.docs[:50], vocab_size=300)  # compile / load the kernels

    def time_train(self, vocab_size):
        fb.train(self.docs, vocab_size=vocab_size)


class EncodeStdlib:
    """Encoding held-out standard-library sources with a 4,096-token vocabulary."""

    timeout = 300

    def setup(self):
        text = code_text(2_000_000)
        cut = len(text) // 2
        self.tok = fb.train(text[:cut].split("\n\n"), vocab_size=4096)
        self.text = text[cut:]
        self.docs = self.text.split("\n\n")
        self.tok.encode(self.text[:1000])
        self.tok.encode_batch(self.docs[:100])

    def time_encode_long_text(self):
        self.tok.encode_ordinary(self.text)

    def time_encode_batch(self):
        self.tok.encode_batch(self.docs)

    def track_bytes_per_token(self):
        return len(self.text.encode()) / len(self.tok.encode_ordinary(self.text))

    track_bytes_per_token.unit = "bytes/token"
