"""A ranks cache file with consistent zip members but arrays out of bounds or inconsistent
(what a bug or a hostile writer could leave) is ignored and rebuilt, never handed to the
kernels (which do not check bounds). In a subprocess: if validation failed, a kernel could
crash the interpreter."""

from rel_harness import run_case

# (array, index or "slice", value) -> the reason the warning must name.
CASES = [
    ("merges", (5, 1), 10**6, "not defined before"),
    ("merges", (5, 0), -1, "not defined before"),
    ("merges", (0, 0), 300, "not defined before"),
    ("merges", "reverse", None, "not defined before"),
    ("merges", "int64", None, "expected int32"),
    ("pairs", (0, 0), 2**31 - 1, "out of bounds"),
    ("pairs", (3, 1), -7, "out of bounds"),
    ("pairs", "one column", None, "out of bounds"),
    ("results", 0, 5, "out of bounds"),
    ("results", -1, 10**6, "out of bounds"),
    ("tok_off", -1, 10**9, "do not span"),
    ("tok_off", 280, 0, "empty or its offsets descend"),
    ("tok_data", "drop last", None, "do not span"),
    ("tok_data", 3, 0, "single bytes"),
    ("pairs", "swap lengths", None, "parts do not add up"),
    ("merges", "swap lengths", None, "length"),
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
            elif where == "int64":
                a = a.astype(np.int64)
            elif where == "one column":
                a = a[:, :1].copy()
            elif where == "drop last":
                a = a[:-1]
            elif where == "swap lengths":  # a part id of another length, still in bounds
                lengths = np.diff(arrays["tok_off"])
                k = int(np.flatnonzero(lengths[a[:, 0]] > 1)[0])
                a[k, 0] = int(np.flatnonzero(lengths == 1)[0])
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
