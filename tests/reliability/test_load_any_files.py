"""``fb.load`` on hostile files of every format: it recognises the format by content, so
each malformed file (the named cases, truncations and random byte flips of our model file,
a .tiktoken file and a tokenizer.json) must either load into a working tokenizer or raise
ModelFormatError naming the path; never a crash, a hang, another exception, or more than
the loaders' memory and time bounds. Each batch runs in one subprocess."""

from rel_harness import run_case
from test_model_files import check_results


def run_by_content(models, tmp_path, spec: str, timeout=300):
    base = str(models["gpt2"])[: -len(".json")]
    res = run_case(f"""
        from loader_cases import *
        base = {base!r}
        valid = {{f: open(base + s, "rb").read() for f, s in
                 (("ours", ".json"), ("tiktoken", ".tiktoken"), ("hf", ".tokenizer.json"))}}
        items = [(n, f, d, "either") for n, f, d, _ in {spec}]
        emit(run_batch(items, {str(tmp_path / "cases")!r}, by_content=True))
    """, timeout=timeout)
    res.check()
    return res.result


def test_named_cases_by_content(models, tmp_path):
    results = run_by_content(
        models, tmp_path, "[c for c in named_cases(valid) if c[0] != 'ours:many_specials_1e5']")
    assert len(results) > 60
    check_results(results)
    # Valid files of another format load (fb.load's point); the generic junk never does.
    outcome = {r["name"]: r["outcome"] for r in results}
    assert outcome["ours:other_format"] == outcome["tiktoken:other_format"] == "ok"
    assert outcome["hf:other_format"] == "ok"
    for fmt in ("ours", "tiktoken", "hf"):
        for junk in ("empty", "whitespace", "non_utf8", "nul_bytes", "deep_nesting"):
            assert outcome[f"{fmt}:{junk}"] == "ModelFormatError", (fmt, junk)


def test_truncations_and_flips_by_content(models, tmp_path):
    spec = ("[(f'{fmt}:cut{k}', fmt, d, 'either') for fmt in FORMATS "
            "for k, d in enumerate(truncations(valid[fmt], 32))] + "
            "[(f'{fmt}:flip{i}', fmt, d, 'either') for fmt in FORMATS "
            "for i, d in enumerate(flips(valid[fmt], 40, 4321))]")
    results = run_by_content(models, tmp_path, spec)
    assert len(results) == 3 * 32 + 3 * 40
    check_results(results)
