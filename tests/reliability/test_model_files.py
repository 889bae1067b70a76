"""Malformed model files (ours, .tiktoken, tokenizer.json): a ModelFormatError naming the
path (and the entry), never a crash, hang or other exception; bounded load memory.

Truncation of our own format is already covered by tests/test_model_file.py; here the
imported formats are truncated, every format gets seeded random byte flips, and the named
cases of the issue. Each batch runs in one subprocess (a crash or hang fails the test);
inside it, each load's memory is its peak RSS increase (VmHWM reset per case).
"""

import json

import pytest

from rel_harness import run_case

GENERIC = {"empty", "whitespace", "non_utf8", "nul_bytes", "other_format", "deep_nesting"}
MAX_SECONDS_PER_LOAD = 5.0


def load_memory_bound(size: int) -> int:
    return 4 * size + 64 * 2**20


def run_loader_batch(models, tmp_path, spec: str, timeout=300):
    base = str(models["gpt2"])[: -len(".json")]
    res = run_case(f"""
        from loader_cases import *
        base = {base!r}
        valid = {{f: open(base + s, "rb").read() for f, s in
                 (("ours", ".json"), ("tiktoken", ".tiktoken"), ("hf", ".tokenizer.json"))}}
        items = {spec}
        emit(run_batch(items, {str(tmp_path / "cases")!r}))
    """, timeout=timeout)
    res.check()
    return res.result


def check_results(results, require_entry=False):
    assert results
    problems = []
    for r in results:
        where = f"{r['name']} ({r['size']} bytes)"
        if r["outcome"].startswith("BAD"):
            problems.append(f"{where}: {r['outcome']}")
            continue
        if r["expect"] == "error" and r["outcome"] != "ModelFormatError":
            problems.append(f"{where}: loaded, expected a ModelFormatError")
        if r["expect"] == "ok" and r["outcome"] != "ok":
            problems.append(f"{where}: rejected ({r.get('reason')}), must be accepted")
        if (require_entry and r["outcome"] == "ModelFormatError"
                and r["name"].split(":")[1] not in GENERIC and not r.get("entry")):
            problems.append(f"{where}: the error names no entry ({r.get('reason')})")
        if r["load_mem"] > load_memory_bound(r["size"]):
            problems.append(f"{where}: load used {r['load_mem'] / 2**20:.0f} MiB")
        if r["seconds"] > MAX_SECONDS_PER_LOAD:
            problems.append(f"{where}: load took {r['seconds']:.1f} s")
    assert not problems, "\n".join(problems)


def test_named_malformed_cases(models, tmp_path):
    results = run_loader_batch(
        models, tmp_path, "[c for c in named_cases(valid) if c[0] != 'ours:many_specials_1e5']")
    names = {r["name"] for r in results}
    assert {"ours:nul_special_ok", "tiktoken:rank_1e9", "hf:token_200kb",
            "tiktoken:token_200kb_mergeable"} <= names
    check_results(results, require_entry=True)
    print(json.dumps({r["name"]: [r["outcome"], r.get("entry"), round(r["seconds"], 3),
                                  r["load_mem"] // 2**20] for r in results}, indent=0))


def test_many_special_tokens_load_memory(models, tmp_path):
    # 100,000 special tokens (a 2.1 MB file) within 4 x size + 64 MiB: it was ~73 MiB until
    # the unused id -> special token dict was dropped from Tokenizer.
    results = run_loader_batch(
        models, tmp_path, "[c for c in named_cases(valid) if c[0] == 'ours:many_specials_1e5']")
    assert len(results) == 1
    check_results(results, require_entry=True)


@pytest.mark.parametrize("fmt", ["tiktoken", "hf"])
def test_truncated_imported_files(models, tmp_path, fmt):
    results = run_loader_batch(
        models, tmp_path, f"[(f'{fmt}:cut{{k}}', {fmt!r}, d, 'either') "
                          f"for k, d in enumerate(truncations(valid[{fmt!r}]))]")
    assert len(results) == 64
    check_results(results)
    # Cutting a JSON file anywhere must be an error; a ranks file cut at a line end may
    # still be a valid (smaller) vocabulary, but most cuts must be rejected.
    errors = sum(r["outcome"] == "ModelFormatError" for r in results)
    assert errors == 64 if fmt == "hf" else errors >= 16, errors


def flip_spec(n_per_format, seed):
    return (f"[(f'{{fmt}}:flip{{i}}', fmt, d, 'either') for fmt in FORMATS "
            f"for i, d in enumerate(flips(valid[fmt], {n_per_format}, {seed}))]")


def test_random_byte_flips_fast(models, tmp_path):
    results = run_loader_batch(models, tmp_path, flip_spec(67, seed=1234))  # ~200 in all
    assert len(results) == 201
    check_results(results)


@pytest.mark.slow
def test_random_byte_flips_full(models, tmp_path):
    results = run_loader_batch(models, tmp_path, flip_spec(1000, seed=5678), timeout=3600)
    assert len(results) == 3000
    check_results(results)


def test_structure_aware_hypothesis_fuzzer(models, tmp_path):
    base = str(models["gpt2"])[: -len(".json")]
    res = run_case(f"""
        from fuzz_loaders import hypothesis_structure_fuzz
        emit(hypothesis_structure_fuzz({base!r}, {str(tmp_path)!r}, max_examples=150))
    """, timeout=300)
    res.check()
    out = res.result
    assert out["examples"] >= 100 and out["errors"] > 0, out
