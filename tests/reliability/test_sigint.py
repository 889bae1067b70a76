"""A Ctrl-C is never lost: wherever its handler runs during a call, the caller gets it.

CPython runs a Python signal handler at the next "check" of the thread that takes signals
(function entries, loop back-edges, returns from C calls), in whatever Python code runs
there -- including code run *from a finalizer or weakref callback*, where an exception is
printed as "Exception ignored in ..." and dropped. ``parallel.run_shielded`` once ran each
kernel in a ``threading.Thread``; every Thread is in ``threading._dangling``, a WeakSet
whose Python callback ran on the calling thread when the Thread object was freed. A SIGINT
handled in that callback was dropped and the encode loop went on for ever (seen as about
one lost Ctrl-C in 500 in test_preset_hardening.py).

Waiting for a random SIGINT to hit a window of microseconds is slow and flaky, so the
handler's run is injected instead, at *every* point in turn: a profile function raises
KeyboardInterrupt at the n-th Python function entry or C call of the main thread (what a
handler raising KeyboardInterrupt does there), for n = 0, 1, ... until the call completes
without reaching n. Each point must end as a KeyboardInterrupt in the caller, with no
exception reported as unraisable, the work not left running behind the caller's back (or
run twice), and the same results afterwards. Before the fix the ``_remove`` point of every
call returned normally (the interrupt swallowed).
"""

from __future__ import annotations

import textwrap

from rel_harness import run_case

CHILD = textwrap.dedent(r'''
    import collections, dis, faulthandler, inspect, os, sys, time
    sys.path.insert(0, os.getcwd())
    import fastbpe_nb as fb
    from fastbpe_nb import parallel

    unraisable = []
    sys.unraisablehook = lambda u: unraisable.append(
        f"{type(u.exc_value).__name__} in {u.object!r}"[:200])

    GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
    first_resume = {}

    def is_resumption(frame):
        """A generator's frame resumed (or thrown into, as when it is closed): CPython
        3.11 runs no signal handler when an exception is thrown in, and one run when it
        resumes after a yield raises as if in the consumer's next() (covered there)."""
        code = frame.f_code
        if not code.co_flags & GENERATOR:
            return False
        if code not in first_resume:
            first_resume[code] = next(i.offset for i in dis.get_instructions(code)
                                      if i.opname == "RESUME")
        return frame.f_lasti != first_resume[code]

    class Inject:
        """Profile function: KeyboardInterrupt at the n-th event of the code under test:
        function entries ("call") and returns from C functions ("c_return"), where
        CPython 3.11 runs pending signal handlers."""
        def __init__(self, n):
            self.n, self.seen, self.where = n, 0, None
        def __call__(self, frame, event, arg):
            if event not in ("call", "c_return") or frame.f_code in HARNESS:
                return
            if event == "call" and is_resumption(frame):
                return
            if self.seen == self.n:
                name = getattr(arg, "__qualname__", None) or frame.f_code.co_qualname
                self.where = (f"{event} {name} "
                              f"({os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno})")
                raise KeyboardInterrupt
            self.seen += 1

    def sweep(label, call, check, max_points=20000):
        """Interrupt ``call()`` at each point in turn; the points that went wrong."""
        bad, ends, n = [], collections.Counter(), 0
        while n < max_points:
            inject = Inject(n)
            del unraisable[:]
            faulthandler.dump_traceback_later(30, exit=True)  # a hang is a failure too
            sys.setprofile(inject)
            try:
                result = call()
                ended = "returned"
            except KeyboardInterrupt:
                ended = "KeyboardInterrupt"
            except BaseException as exc:
                ended = f"{type(exc).__name__}: {exc}"[:200]
            sys.setprofile(None)
            faulthandler.cancel_dump_traceback_later()
            problems = list(unraisable) + after_call()
            if inject.where is None:  # the call ran to its end before point n
                if ended != "returned" or not check(result) or problems:
                    bad.append(["no interrupt", ended, problems])
                break
            ends[ended] += 1
            if ended != "KeyboardInterrupt" or problems:
                bad.append([inject.where, ended, problems])
            n += 1
        emit({"case": label, "points": n, "ends": dict(ends), "bad": bad[:20],
              "n_bad": len(bad)})

    HARNESS = {sweep.__code__}
    RUNNING = {"now": 0, "runs": 0}

    def work(values):
        """The shielded function: records that it runs (and how often)."""
        RUNNING["now"] += 1
        RUNNING["runs"] += 1
        time.sleep(0.001)
        RUNNING["now"] -= 1
        return sum(values)

    def after_call():
        """run_shielded must not return while work runs, nor run it twice."""
        time.sleep(0.002)  # a helper started twice would have begun by now
        problems = []
        if RUNNING["now"]:
            problems.append("work still running after the call ended")
        if RUNNING["runs"] > 1:
            problems.append(f"work ran {RUNNING['runs']} times")
        RUNNING["runs"] = 0
        return problems

    sweep("run_shielded", lambda: parallel.run_shielded(work, [1, 2, 3]), lambda r: r == 6)

    after_call = lambda: []
    corpus = ["the quick brown fox jumps over the lazy dog", "Grüße aus Köln, 123 45"] * 30
    docs = ["the quick brown fox", "jumps over", "the lazy dog", "Köln 12"] * 3
    same_after = {}
    for name, options in [("bytes", {}), ("chars", {"base": "chars", "end_of_word": "</w>"}),
                          ("sentencepiece", {"base": "chars", "whitespace": "\u2581",
                                             "byte_fallback": True})]:
        tok = fb.train(corpus, vocab_size=300, **options)
        want = tok.encode_batch(docs, num_threads=1)
        counts = [len(w) for w in want]
        tok.count_tokens(docs, num_threads=2)  # compiled (or loaded) before the sweep
        sweep(f"{name} count_tokens", lambda: tok.count_tokens(docs, num_threads=2),
              lambda r: r.tolist() == counts)
        sweep(f"{name} encode_batch", lambda: tok.encode_batch(docs, num_threads=2),
              lambda r: r == want)
        same_after[name] = tok.encode_batch(docs, num_threads=2) == want
    emit({"same_after": same_after})
''')


def test_a_ctrl_c_at_any_point_of_a_call_reaches_the_caller():
    res = run_case(CHILD, timeout=240).check()
    results = {r.get("case", "after"): r for r in res.results}
    cases = ["run_shielded"] + [f"{name} {verb}" for name in ("bytes", "chars", "sentencepiece")
                                for verb in ("count_tokens", "encode_batch")]
    for case in cases:
        r = results.get(case)
        assert r is not None, res.describe()
        assert r["points"] > 5, r  # the sweep reached the code under test
        assert r["n_bad"] == 0, (case, r["n_bad"], r["bad"])
    assert results["after"]["same_after"] == {"bytes": True, "chars": True,
                                              "sentencepiece": True}
