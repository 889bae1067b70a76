"""Constants and helpers shared by the test modules (imported as ``fbtest``).

Not in conftest.py: tests/reliability has a conftest of its own, and two modules both
named ``conftest`` shadow each other when test files import from them by name.
"""

import os
import random
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


def spaced_word_corpus(seed, n_docs=60):
    """Tie-heavy training documents: twelve short words over ``abcde``, joined by spaces
    (many pairs with equal counts)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcde", k=rng.randint(1, 6))) for _ in range(12)]
    return [" ".join(rng.choices(words, k=rng.randint(0, 15))) for _ in range(n_docs)]


#: The separators of ``punctuated_word_corpus``: mostly spaces, some punctuation, digits
#: and line breaks that cut runs of words.
SEPARATORS = (" ", " ", " ", ", ", ". ", "\n", " 12 ", "!! ")


def punctuated_word_corpus(seed, n_docs=40, seps=SEPARATORS):
    """Tie-heavy training documents for the variants that join words: eight short words
    over ``abcd``, each followed by a separator from ``seps``, so word pairs repeat with
    equal counts and punctuation cuts their runs."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcd", k=rng.randint(1, 4))) for _ in range(8)]
    seps = list(seps)
    docs = []
    for _ in range(n_docs):
        parts = [rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 12))]
        docs.append("".join(parts))
    return docs
