"""GPT-2's byte-level alphabet: the printable character standing for each byte value.

Hugging Face's ``ByteLevel`` pre-tokenizer writes tokens in these characters
(``tokenizer.json`` vocabularies), and its trainer orders the base bytes by them (our
``hf`` tie rule). ``reference.py`` keeps its own copy: the specification does not share
code with what it checks.
"""

from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def hf_byte_ranks() -> list[int]:
    """``ranks[b]``: the position of byte ``b``'s GPT-2 character in code-point order."""
    chars = bytes_to_unicode()
    ranks = [0] * 256
    for rank, b in enumerate(sorted(range(256), key=lambda b: ord(chars[b]))):
        ranks[b] = rank
    return ranks
