"""fastbpe_nb against its peers, side by side on one machine, one run.

Training (same corpus, vocabulary size, pattern and byte alphabet, all cores): bpeasy,
Hugging Face ``tokenizers`` and ``sentencepiece`` (BPE mode, which splits on whitespace
and has its own rules, so its merges are not comparable: only its time and compression
are). Encoding (same vocabulary: ours exported): tiktoken and Hugging Face. Compared
outputs are checked to agree (bpeasy's and HF's merges with ours under the matching tie
rule; tiktoken's and HF's ids with ours). Prints Markdown: medians, ratios, and held-out
bytes/token. docs/performance.md, "Peers on one vocabulary", is this script's output.

    python benchmarks/compare_peers.py            # default: 20 MB, vocab 16384, ~5 min
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastbpe_nb as fb  # noqa: E402
from bench_data import chunks, corpus_path  # noqa: E402
from compare_encoding import mixed_documents  # noqa: E402
from compare_training import machine  # noqa: E402
from fastbpe_nb.io.text_files import safe_cut  # noqa: E402


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def hf_pre_tokenizer(pattern_str):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern_str.replace("{1,3}+", "{1,3}")), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=20, help="training corpus size")
    p.add_argument("--vocab-size", type=int, default=16384)
    p.add_argument("--pattern", default="gpt2")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-sentencepiece", action="store_true")
    args = p.parse_args(argv)

    import bpeasy
    import tiktoken
    from tokenizers import Tokenizer, decoders, models, trainers
    from tokenizers import pre_tokenizers as hf_pre

    held_out_mb = 5
    path, what = corpus_path(int((args.mb + held_out_mb) * 1e6))
    raw = path.read_bytes()
    cut = int(args.mb * 1e6)
    cut = safe_cut(raw[:cut])
    train_raw, held_raw = raw[:cut], raw[cut:]
    train_file = os.path.join(tempfile.mkdtemp(prefix="fastbpe-peers-"), "train.txt")
    with open(train_file, "wb") as f:
        f.write(train_raw)
    docs = chunks(train_raw)
    held_out = held_raw.decode("utf-8", "replace")
    batch = mixed_documents(held_out, 10000)
    pattern = fb.NAMED_PATTERNS[args.pattern]
    held_bytes = len(held_out.encode())

    print("## Performance\n")
    print(f"Machine: {machine()}. Data: {what}; training on the first "
          f"{len(train_raw) / 1e6:.1f} MB, held-out {held_bytes / 1e6:.1f} MB. Vocabulary "
          f"{args.vocab_size}, pattern `{args.pattern}`, byte-level alphabet, all cores. "
          f"Medians of {args.repeat} runs in one process run; Numba cache warm (first-call "
          f"cost reported below).\n")

    t0 = time.perf_counter()
    fb.train(["warm up the kernels " * 30], vocab_size=300).encode("warm")
    warm = time.perf_counter() - t0

    rows = []  # (task, tool, seconds, ok text, bytes/token)
    t_ours, tok = timed(lambda: fb.train_files([train_file], vocab_size=args.vocab_size,
                                               pattern=args.pattern), args.repeat)
    bpt = held_bytes / len(tok.encode_ordinary(held_out))
    rows.append(("train", "fastbpe_nb (`tie_break='ids'`)", t_ours, "—", bpt))

    t, vocab = timed(lambda: bpeasy.train_bpe(iter(docs), pattern, 10**6, args.vocab_size),
                     args.repeat)
    theirs = [b for b, _ in sorted(vocab.items(), key=lambda kv: kv[1])][256:]
    rows.append(("train", "bpeasy", t, "merges identical" if theirs == tok.vocab[256:]
                 else "MERGES DIFFER", bpt))

    t_hf_ours, tok_hf = timed(lambda: fb.train_files([train_file], vocab_size=args.vocab_size,
                                                     pattern=args.pattern, tie_break="hf"),
                              args.repeat)
    rows.append(("train", "fastbpe_nb (`tie_break='hf'`)", t_hf_ours, "—",
                 held_bytes / len(tok_hf.encode_ordinary(held_out))))

    def hf_train():
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = hf_pre_tokenizer(pattern)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, show_progress=False,
                                      initial_alphabet=hf_pre.ByteLevel.alphabet())
        hf.train_from_iterator(docs, trainer=trainer)
        return hf

    t, hf = timed(hf_train, args.repeat)
    import json

    hf_merges = json.loads(hf.to_str())["model"]["merges"]
    from fastbpe_nb.reference import bytes_to_unicode

    inverse = {c: b for b, c in bytes_to_unicode().items()}
    to_bytes = lambda s: bytes(inverse[c] for c in s)  # noqa: E731
    hf_pairs = [tuple(to_bytes(x) for x in (m.split(" ") if isinstance(m, str) else m))
                for m in hf_merges]
    ours_pairs = [(tok_hf.vocab[a], tok_hf.vocab[b]) for a, b in tok_hf.merges.tolist()]
    rows.append(("train", "Hugging Face tokenizers", t, "merges identical (hf rule)"
                 if hf_pairs == ours_pairs else "MERGES DIFFER",
                 held_bytes / len(hf.encode(held_out).ids)))

    if not args.skip_sentencepiece:
        import sentencepiece as spm

        model_prefix = os.path.join(os.path.dirname(train_file), "sp")

        def sp_train():
            spm.SentencePieceTrainer.train(
                input=train_file, model_prefix=model_prefix, model_type="bpe",
                vocab_size=args.vocab_size, byte_fallback=True, character_coverage=1.0,
                num_threads=os.cpu_count(), max_sentence_length=1 << 20,
                input_sentence_size=0, minloglevel=2, split_digits=False,
                normalization_rule_name="identity", remove_extra_whitespaces=False)

        t, _ = timed(sp_train, 1)
        sp = spm.SentencePieceProcessor(model_file=model_prefix + ".model")
        rows.append(("train", "sentencepiece (BPE, 1 run)", t, "own rules: not comparable",
                     held_bytes / len(sp.encode(held_out))))

    # Encoding: the same vocabulary in every tool.
    enc = tiktoken.Encoding(name="ours", pat_str=pattern, special_tokens={},
                            mergeable_ranks={bytes(t): i for i, t in enumerate(tok.vocab)})
    hf_file = os.path.join(os.path.dirname(train_file), "tokenizer.json")
    tok.to_huggingface(hf_file)
    hf_enc = Tokenizer.from_file(hf_file)
    ours_ids = tok.encode_ordinary(held_out)
    same_tt = enc.encode_ordinary(held_out) == ours_ids
    same_hf = hf_enc.encode(held_out).ids == ours_ids
    ours_batch = tok.encode_batch(batch)
    same_tt_b = enc.encode_ordinary_batch(batch, num_threads=os.cpu_count()) == ours_batch
    same_hf_b = [e.ids for e in hf_enc.encode_batch(batch)] == ours_batch
    batch_bytes = sum(len(d.encode()) for d in batch)

    enc_rows = []
    t_o, _ = timed(lambda: tok.encode_ordinary(held_out), args.repeat)
    enc_rows.append(("one long text, 1 thread", "fastbpe_nb", held_bytes / t_o / 1e6, "—"))
    t, _ = timed(lambda: enc.encode_ordinary(held_out), args.repeat)
    enc_rows.append(("one long text, 1 thread", "tiktoken", held_bytes / t / 1e6,
                     "ids identical" if same_tt else "IDS DIFFER"))
    t, _ = timed(lambda: hf_enc.encode(held_out), args.repeat)
    enc_rows.append(("one long text, 1 thread", "Hugging Face", held_bytes / t / 1e6,
                     "ids identical" if same_hf else "IDS DIFFER"))
    t_ob, _ = timed(lambda: tok.encode_batch(batch), args.repeat)
    enc_rows.append(("10,000 documents, all cores", "fastbpe_nb", batch_bytes / t_ob / 1e6, "—"))
    t, _ = timed(lambda: enc.encode_ordinary_batch(batch, num_threads=os.cpu_count()), args.repeat)
    enc_rows.append(("10,000 documents, all cores", "tiktoken", batch_bytes / t / 1e6,
                     "ids identical" if same_tt_b else "IDS DIFFER"))
    t, _ = timed(lambda: hf_enc.encode_batch(batch), args.repeat)
    enc_rows.append(("10,000 documents, all cores", "Hugging Face", batch_bytes / t / 1e6,
                     "ids identical" if same_hf_b else "IDS DIFFER"))

    print("### Training\n")
    print("| tool | median s | fastbpe_nb time / tool time | outputs | held-out bytes/token |")
    print("|---|---:|---:|---|---:|")
    for _, tool, t, ok, b in rows:
        base = t_hf_ours if "Hugging Face" in tool else t_ours
        ratio = "—" if tool.startswith("fastbpe") else f"{base / t:.2f}"
        print(f"| {tool} | {t:.2f} | {ratio} | {ok} | {b:.3f} |")
    print("\n### Encoding (same vocabulary)\n")
    print("| workload | tool | MB/s | fastbpe_nb speed-up | outputs |")
    print("|---|---|---:|---:|---|")
    for work, tool, mbps, ok in enc_rows:
        ours = next(m for w, t, m, _ in enc_rows if w == work and t == "fastbpe_nb")
        print(f"| {work} | {tool} | {mbps:.1f} | {'—' if tool == 'fastbpe_nb' else f'{ours / mbps:.2f}x'} | {ok} |")
    print(f"\nFirst call in this process (Numba cache load), excluded above: {warm:.2f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
