"""The merge kernel on tables its callers never build, in a child process (the kernel does
not bound-check its indices: a wrong one is a crash, which must fail a test, not end the
run). See also tests/test_merge_kernel.py."""

from rel_harness import run_case


def test_zero_count_words_keep_their_pairs():
    """Words of count 0 first (their pairs are then in the setup's table when it grows and
    is copied: the copy must keep count-0 records, or the word index is built through
    empty slots), then ordinary words: the kernel learns the ordinary words' merges.
    Counted densely (the byte alphabet) and by probing (``dense_base`` 0): a count-0 pair
    is a record in both (each run on a copy: the kernel rewrites the symbols)."""
    out = run_case("""
        import sys
        sys.path.insert(0, "tests")
        import numpy as np
        from test_merge_kernel import kernel_merges, zipf_words
        from fastbpe_nb.kernels.merge import TIE_RANKS, train_merges, word_index_rows

        words = zipf_words(3, 400)
        want, _ = kernel_merges(words, "ids", 60)
        mixed = {f"zq{w}qz": 0 for w in list(words)[:50]}
        mixed.update(words)
        raw = [w.encode() for w in mixed]
        symbols = np.frombuffer(b"".join(raw), np.uint8).astype(np.int32)
        offsets = np.zeros(len(raw) + 1, np.int64)
        np.cumsum([len(r) for r in raw], out=offsets[1:])
        counts = np.array(list(mixed.values()), np.int64)
        rows = word_index_rows(len(symbols), len(counts), int(np.diff(offsets).max()))
        got = [[a.tolist() for a in train_merges(
                   symbols.copy(), offsets, counts, np.arange(257, dtype=np.int64),
                   np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.int64), TIE_RANKS,
                   60, 1 << 40, 1, 1 << 40, np.zeros(3, np.int64),
                   np.empty((rows, 2), np.int32), 1 << 20, 16, 1024, None, 1, dense)]
               for dense in (256, 0)]
        emit(got == [want, want])
    """, timeout=300)
    out.check()
    assert out.result is True
