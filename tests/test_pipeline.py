"""The read/encode/write overlap of encode_parquet (``fastbpe_nb/io/pipeline.py``)."""

import threading
import time

import pytest

from fastbpe_nb.io.pipeline import OrderedWriter, prefetch


def test_prefetch_keeps_order_and_reads_ahead_by_at_most_depth_plus_one():
    produced = []

    def source():
        for i in range(50):
            produced.append(i)
            yield i

    seen = []
    for item in prefetch(source(), depth=2):
        time.sleep(0.002)
        assert len(produced) - len(seen) <= 2 + 2, (len(produced), len(seen))  # queued + in hand
        seen.append(item)
    assert seen == list(range(50))


def test_a_read_error_is_raised_where_the_item_is_asked_for():
    def source():
        yield 1
        yield 2
        raise OSError("bad row group 3")

    got = []
    with pytest.raises(OSError, match="bad row group 3"):
        for item in prefetch(source()):
            got.append(item)
    assert got == [1, 2]


def test_leaving_the_loop_stops_the_reader_and_closes_the_source():
    closed = threading.Event()
    produced = []

    def source():
        try:
            for i in range(10**6):
                produced.append(i)
                yield i
        finally:
            closed.set()

    gen = prefetch(source(), depth=1)
    for item in gen:
        if item == 3:
            break
    gen.close()
    assert closed.is_set()
    n = len(produced)
    time.sleep(0.05)
    assert len(produced) == n <= 6


def test_writer_runs_in_order_and_reports_errors_at_the_next_call():
    done = []

    def job(i):
        time.sleep(0.001)
        done.append(i)

    out = OrderedWriter()
    for i in range(20):
        out.submit(job, i)
    out.finish()
    assert done == list(range(20))

    def fails():
        raise OSError("disk full")

    out.submit(fails)
    with pytest.raises(OSError, match="disk full"):
        out.submit(job, 99)
    assert 99 not in done
    out.submit(fails)
    with pytest.raises(OSError, match="disk full"):
        out.finish()
    out.finish()  # the error is raised once
