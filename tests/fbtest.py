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


def assert_same_model(tok, model):
    """A trained Tokenizer equals a ``reference`` model: merges, their ids and counts, and
    the regular vocabulary."""
    assert [tuple(m) for m in tok.merges.tolist()] == model.merges
    assert tok.merge_ids.tolist() == model.merge_ids
    assert tok.merge_counts.tolist() == model.merge_counts
    assert tok.vocab[: len(model.token_bytes)] == model.token_bytes


def merges_over_bytes(raw, alphabet=b"abc "):
    """Explicit byte-level merges over ``alphabet`` from hypothesis' pairs of indices into
    the usable ids (the alphabet's bytes, then each merge's result), ids defined before use."""
    tokens = [bytes([b]) for b in range(256)]
    known = {t: i for i, t in enumerate(tokens)}
    usable = [known[bytes([b])] for b in alphabet]
    pairs = []
    for a, b in raw:
        a, b = usable[a % len(usable)], usable[b % len(usable)]
        pairs.append((a, b))
        made = tokens[a] + tokens[b]
        if made not in known:
            known[made] = len(tokens)
            tokens.append(made)
            usable.append(known[made])
    return pairs
