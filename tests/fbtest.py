"""Constants and helpers shared by the test modules (imported as ``fbtest``).

Not in conftest.py: tests/reliability has a conftest of its own, and two modules both
named ``conftest`` shadow each other when test files import from them by name.
"""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: ../shared/corpora beside the repository (present on the team's machines, not in a user's clone).
CORPORA = REPO.parent / "shared" / "corpora"
NOJIT = os.environ.get("NUMBA_DISABLE_JIT") == "1"

