import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: ../shared/corpora beside the repository (present on the team's machines, not in a user's clone).
CORPORA = REPO.parent / "shared" / "corpora"
NOJIT = os.environ.get("NUMBA_DISABLE_JIT") == "1"


def corpus_text(name: str, n_bytes: int) -> str:
    """The first ``n_bytes`` (cut at a line end) of a shared corpus file, or skip."""
    path = CORPORA / name
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared corpora exist only on the team's machines)")
    with open(path, "rb") as f:
        data = f.read(n_bytes)
    cut = data.rfind(b"\n")
    if cut > 0:
        data = data[: cut + 1]
    return data.decode("utf-8", "replace")


@pytest.fixture
def corpora_dir():
    if not CORPORA.exists():
        pytest.skip(f"{CORPORA} is absent (the shared corpora exist only on the team's machines)")
    return CORPORA
