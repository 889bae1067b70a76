"""``small_pages.empty_in_small_pages``: an array without NumPy's huge-page advice, NumPy's
own advice left as it was."""

import threading

import numpy as np
import pytest

from fastbpe_nb.small_pages import _advice_switch, empty_in_small_pages

SIZE = 64 << 20  # above glibc's largest mmap threshold (32 MiB): a mapping of its own


def vm_flags(array: np.ndarray) -> list[str]:
    """The kernel's VmFlags of the mapping that holds ``array``'s data (Linux only)."""
    address = array.ctypes.data + array.nbytes // 2  # (NumPy advises from the 2nd page)
    flags, inside = None, False
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                flags = line.split()[1:]
    assert flags is not None, "no mapping holds the array"
    return flags


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="Linux only")
def test_no_huge_page_advice_where_numpy_gives_it():
    switch = _advice_switch()
    if switch is False:
        pytest.skip("this NumPy has no huge-page switch")
    advised = np.empty(SIZE, np.uint8)
    if "hg" not in vm_flags(advised):
        pytest.skip("NumPy's advice is off here (NUMPY_MADVISE_HUGEPAGE=0, or no THP)")
    plain = empty_in_small_pages(SIZE, np.uint8)
    assert plain.shape == (SIZE,) and plain.dtype == np.uint8
    assert "hg" not in vm_flags(plain)
    # NumPy's own setting is back: the next array is advised again.
    assert "hg" in vm_flags(np.empty(SIZE, np.uint8))


def test_shapes_dtypes_and_the_flag_restored_under_threads():
    switch = _advice_switch()
    before = None if switch is False else switch(True)
    try:
        out = []

        def allocate(k):
            for _ in range(50):
                out.append(empty_in_small_pages((k + 1, 3), np.int64 if k % 2 else np.int32))

        threads = [threading.Thread(target=allocate, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(out) == 200
        assert {(a.shape, a.dtype) for a in out} == {
            ((k + 1, 3), np.dtype(np.int64 if k % 2 else np.int32)) for k in range(4)}
        if switch is not False:
            assert switch(True) is True  # left on, as it was before
    finally:
        if switch is not False:
            switch(before)
