"""Unicode: one lone-surrogate policy everywhere, NFC/NFD unchanged, invalid UTF-8 as bytes."""

from rel_harness import run_case


def test_unicode_policies(models, tmp_path):
    res = run_case(f"""
        from rel_children import unicode_check
        emit(unicode_check({str(models['o200k'])!r}, {str(tmp_path)!r}, 300))
    """, timeout=240).check()
    out = res.result
    assert out["examples"] >= 100
    assert not out["problems"], "\n".join(out["problems"])
