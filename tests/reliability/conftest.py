"""Fixtures of the reliability suite (helpers live in rel_harness.py)."""

import pytest

from rel_harness import build_models


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """{pattern: path} of trained model files (vocab 1200, 3 special tokens), plus the
    same models as .tiktoken and tokenizer.json next to them."""
    return build_models(tmp_path_factory.mktemp("models"))
