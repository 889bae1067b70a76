"""The specification's own helpers against production's copies of them."""

from fastbpe_nb import byte_level, reference


def test_byte_level_alphabet_matches_the_specification():
    # Production keeps its own copy of GPT-2's byte alphabet (byte_level.py): the
    # specification must not share code with what it checks, so the copies are compared.
    assert byte_level.bytes_to_unicode() == reference.bytes_to_unicode()
    assert byte_level.hf_byte_ranks() == reference.hf_byte_ranks()
