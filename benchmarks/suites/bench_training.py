"""Training rates on ~10 MB of real text: counting MB/s, merges/s, the scanner alone.

``train_files`` on the first 10 MB of the Linux sources (``bench_data.corpus_path``; the
Python standard library where the kernel sources are not installed), vocabulary 32768,
pattern gpt2, all cores. ``setup_cache`` warms the kernels on a small file, then trains
three times and takes the medians of the report's phases, so every ``track_*`` value is a
median of three runs of one process:

* ``track_counting_mb_per_s``: corpus bytes / ``seconds_counting`` (reading, pre-tokenizing,
  counting and building the word table);
* ``track_merges_per_s``: merges / ``seconds_merging``;
* ``track_scanner_mb_per_s``: the pre-tokenizer alone over the same batches, cut into 4
  documents per core (``compare_training.run_scanner``);
* ``track_counting_over_scanner``: counting time / scanner time (issue 20's goal: <= 2).

Run: ``cd benchmarks && asv run --bench bench_training`` (or ``asv run --python=same``).
"""

import statistics
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

N_BYTES = 10_000_000
VOCAB = 32768
RUNS = 3


class TrainFilesRates:
    """``train_files`` on ~10 MB: rates of its two phases, and of the scanner alone."""

    timeout = 900

    def setup_cache(self):
        import fastbpe_nb as fb
        from bench_data import corpus_path
        from compare_training import run_scanner

        path, _ = corpus_path(N_BYTES)
        size = path.stat().st_size
        with tempfile.TemporaryDirectory() as tmp:
            warm = Path(tmp) / "warm.txt"
            with open(path, "rb") as f:
                warm.write_bytes(f.read(200_000).rsplit(b"\n", 1)[0] + b"\n")
            fb.train_files([str(warm)], vocab_size=300)
        reports = [fb.train_files([str(path)], vocab_size=VOCAB, return_report=True)[1]
                   for _ in range(RUNS)]
        scans = [run_scanner({"corpus": str(path), "pattern": "gpt2"}) for _ in range(RUNS)]
        counting = statistics.median(r["seconds_counting"] for r in reports)
        merging = statistics.median(r["seconds_merging"] for r in reports)
        scanner = statistics.median(s["seconds"] for s in scans)
        return {"counting_mb_per_s": size / 1e6 / counting,
                "merges_per_s": reports[0]["merges"] / merging,
                "scanner_mb_per_s": size / 1e6 / scanner,
                "counting_over_scanner": counting / scanner}

    def track_counting_mb_per_s(self, rates):
        return rates["counting_mb_per_s"]

    track_counting_mb_per_s.unit = "MB/s"

    def track_merges_per_s(self, rates):
        return rates["merges_per_s"]

    track_merges_per_s.unit = "merges/s"

    def track_scanner_mb_per_s(self, rates):
        return rates["scanner_mb_per_s"]

    track_scanner_mb_per_s.unit = "MB/s"

    def track_counting_over_scanner(self, rates):
        return rates["counting_over_scanner"]

    track_counting_over_scanner.unit = "ratio"
