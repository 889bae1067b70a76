"""Special tokens: near misses stay text, the default policy raises, ordinary == disallowed=()."""

from rel_harness import run_case


def test_near_misses_and_policies(models, tmp_path):
    res = run_case(f"""
        from rel_children import special_token_check
        emit(special_token_check({str(models['cl100k'])!r}, {str(tmp_path)!r}))
    """, timeout=240).check()
    out = res.result
    assert out["checked"] > 500, out
    assert not out["problems"], "\n".join(out["problems"])


def test_encode_ordinary_equals_disallowed_empty_hypothesis(models):
    res = run_case(f"""
        from rel_children import special_token_hypothesis
        emit(special_token_hypothesis({str(models['gpt2'])!r}, 400))
    """, timeout=240).check()
    assert res.result["examples"] >= 100
