"""A ranks cache file with consistent zip members but arrays out of bounds or inconsistent
(what a bug or a hostile writer could leave) is ignored and rebuilt, never handed to the
kernels (which do not check bounds). In a subprocess: if validation failed, a kernel could
crash the interpreter."""

from rel_harness import run_case

# (array, index or how, value) -> the reason the warning must name.
CASES = [
    ("merges", (5, 1), 10**6, "not defined before"),
    ("merges", (5, 0), -1, "not defined before"),
    ("merges", (0, 0), 300, "not defined before"),
    ("merges", "reverse", None, "not defined before"),
    ("merges", "int64", None, "expected int32"),
    ("tok_off", -1, 10**9, "do not span"),
    ("tok_off", 280, 0, "empty or its offsets descend"),
    ("tok_data", "drop last", None, "do not span"),
    ("tok_data", 3, 0, "single bytes"),
    ("merges", "swap lengths", None, "length"),
    # The encoder's hash tables (stored as their sizes, occupied slots and entries): a slot
    # or an id or rank out of bounds, or no free slot left to end a probe.
    ("whole_slots", 0, 2**30, "whole-token table"),
    ("whole_slots", 0, -1, "whole-token table"),
    ("whole_slots", "drop last", None, "whole-token table"),
    ("whole_slots", "int64", None, "expected int32"),
    ("caps", 0, 3, "whole-token table"),
    ("caps", 1, 2**40, "sizes are out of bounds"),
    ("caps", 1, 4, "pair-rank table"),
    ("caps", 2, 2, "short-piece table"),
    ("pair_slots", 0, 2**30, "pair-rank table"),
    ("pair_entries", (0, 0), 10**6 << 32, "pair-rank table has an id"),
    ("pair_entries", (0, 0), -(1 << 40), "pair-rank table has an id"),
    ("pair_entries", (0, 1), 10**9 << 32, "pair-rank table has an id or rank"),
    ("pair_entries", "one column", None, "pair-rank table"),
    ("byte_pairs", "byte pair id", None, "byte-pair table"),
    ("byte_pairs", "drop last", None, "byte-pair table"),
    ("short_slots", 0, 2**30, "short-piece table"),
    ("short_entries", (0, 2), 5 << 60, "wrong id count"),
    ("short_entries", (0, 2), (1 << 60) | 10**6, "token id out of bounds"),
    ("short_entries", (0, 0), -1, "short-piece table"),
    ("sweep_ranks", 0, 10**9, "sweep"),
    ("sweep_ranks", 0, 0, "pair-rank table has an id or rank"),
]


def test_inconsistent_cache_arrays_are_rejected(tmp_path):
    res = run_case(f"""
        import os, warnings
        import numpy as np
        os.environ["FASTBPE_CACHE_DIR"] = {str(tmp_path / "cache")!r}
        import fastbpe_nb as fb
        from fastbpe_nb.io import rank_cache
        text = "The quick brown fox jumps over the lazy dog. naïve café 我能吞下玻璃 " * 30
        path = {str(tmp_path / "v.tiktoken")!r}
        fb.train([text], vocab_size=300, pattern="cl100k").to_tiktoken(path)
        def ids():
            tok = fb.from_tiktoken(path, pattern="cl100k")
            return [tok.encode(s) for s in ("Hello world", text[:300])]
        want = ids()
        key = rank_cache.file_key(open(path, "rb").read())
        cpath = rank_cache.cache_path(rank_cache.cache_dir(), key)
        out = []
        for name, where, value, _ in {CASES!r}:
            ids()  # a valid cache file
            with np.load(cpath) as z:
                arrays = {{n: z[n].copy() for n in z.files}}
            a = arrays[name]
            if where == "reverse":
                a = a[::-1].copy()
            elif where in ("int64", "int32"):
                a = a.astype(where)
            elif where == "one column":
                a = a[:, :1].copy()
            elif where == "drop last":
                a = a[:-1]
            elif where == "swap lengths":  # a part id of another length, still in bounds
                lengths = np.diff(arrays["tok_off"])
                k = int(np.flatnonzero(lengths[a[:, 0]] > 1)[0])
                a[k, 0] = int(np.flatnonzero(lengths == 1)[0])
            elif where == "byte pair id":
                i = int(np.flatnonzero(a != -1)[0])
                a[i] = ((a[i] >> 32) << 32) | 10**6
            else:
                a[where] = value
            arrays[name] = a
            with open(cpath, "wb") as f:
                np.savez(f, **arrays)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                same = ids() == want
            out.append({{"same": same, "warnings": [str(w.message) for w in caught]}})
        emit(out)
    """, timeout=300).check().result
    for (name, where, _, reason), got in zip(CASES, res):
        assert got["same"], (name, where)
        assert len(got["warnings"]) == 1 and reason in got["warnings"][0], (name, where, got)
