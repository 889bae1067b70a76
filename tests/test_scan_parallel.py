"""The parallel scanner (``kernels.scan.scan_batch_parallel``) gives ``scan_batch``'s
boundaries exactly, whatever the number of blocks: documents of every size (empty ones,
one over the decode window, invalid UTF-8, every script), through ``_scanner.scan_offsets``
with threads and directly with any block count and tiny windows."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastbpe_nb import _scanner
from fastbpe_nb.kernels.scan import scan_batch, scan_batch_parallel

from fbtest import CORPORA, NOJIT

EXAMPLES = 20 if NOJIT else 150
PATTERNS = {"gpt2": 0, "cl100k": 1, "o200k": 2}


def _batch(docs):
    raw = [d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass") for d in docs]
    data = np.frombuffer(b"".join(raw) or b"\0", np.uint8)[:sum(map(len, raw))].copy()
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return data, offsets


def _both(data, offsets, pid, n_blocks, window=1 << 15, stream=1 << 16):
    stage1, stage2 = _scanner.class_table()
    tables = _scanner.scanner_tables()
    want = scan_batch(data, offsets, pid, stage1, stage2, tables, window, stream)
    got = scan_batch_parallel(data, offsets, pid, stage1, stage2, tables, window, stream,
                              n_blocks)
    # The same with the caller's buffer (scan_offsets' path): the regions joined in place.
    from fastbpe_nb.kernels.scan import SCAN_SLACK

    need = int(offsets[-1] - offsets[0]) + SCAN_SLACK * n_blocks
    regions = np.full(need + 3, -5, dtype=np.int64)
    in_place = scan_batch_parallel(data, offsets, pid, stage1, stage2, tables, window, stream,
                                   n_blocks, regions)
    assert np.array_equal(in_place[0], got[0]) and np.array_equal(in_place[1], got[1])
    assert np.shares_memory(in_place[0], regions)
    with pytest.raises(ValueError, match="regions"):
        scan_batch_parallel(data, offsets, pid, stage1, stage2, tables, window, stream,
                            n_blocks, regions[:need - 1])
    return want, got


docs_strategy = st.lists(
    st.one_of(st.text(alphabet="ab Ж中é'\n\r\t 1234.,!", max_size=80),
              st.binary(max_size=20)), min_size=1, max_size=12)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=docs_strategy, pattern=st.sampled_from(sorted(PATTERNS)),
       n_blocks=st.integers(1, 12), window=st.sampled_from([1, 2, 7, 1 << 15]))
def test_any_blocks_and_windows_give_the_serial_boundaries(docs, pattern, n_blocks, window):
    data, offsets = _batch(docs)
    n_blocks = min(n_blocks, max(1, len(docs)))
    want, got = _both(data, offsets, PATTERNS[pattern], n_blocks, window, max(1, window))
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_offsets_that_do_not_start_at_zero():
    data, offsets = _batch(["skip me", "hello world", "", "foo  bar\n\n", "x"])
    sub = offsets[1:].copy()  # documents 1.. only: pieces start at offsets[1]
    want, got = _both(data, sub, 1, 3)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    assert got[0][0] == sub[0]


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_real_corpora_many_documents_through_scan_offsets(pattern):
    files = sorted(CORPORA.glob("*.txt"))
    if not files:
        pytest.skip("no shared corpora")
    text = b"".join(f.read_bytes()[:300_000] for f in files)
    cuts = np.unique(np.r_[0, np.random.default_rng(0).integers(0, len(text), 2000), len(text)])
    data = np.frombuffer(text, np.uint8)
    want = _scanner.scan_offsets(data, cuts, pattern)
    got = _scanner.scan_offsets(data, cuts, pattern, n_threads=2)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    # A document longer than the decode window, among small ones.
    big = np.r_[0, 10, 20, len(text) - 10, len(text)]
    want = _scanner.scan_offsets(data, big, pattern)
    got = _scanner.scan_offsets(data, big, pattern, n_threads=2)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
