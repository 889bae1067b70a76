"""The hardening guarantees hold for every preset of tests/presets.py: threads and Ctrl-C.

One fresh interpreter per preset (``presets.FACTORIES``):

* **threads**: 8 Python threads at once run ``encode_batch`` (list and Arrow, 2 kernel
  threads each), ``encode`` and ``count_tokens``: every result is the serial one, nothing
  aborts;
* **Ctrl-C**: a SIGINT delivered while ``encode_batch`` / ``count_tokens`` run in a loop is
  a clean ``KeyboardInterrupt`` within seconds (no segfault, no hang), after which the same
  tokenizer still gives the serial ids.

(The fork guarantees run over the same presets in test_fork.py / rel_fork_child.py.)
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from presets import FACTORIES

CHILD = textwrap.dedent('''
    import json, random, sys, threading
    sys.path[:0] = [{repo!r}, {tests!r}]
    import pyarrow as pa
    import pytest
    import presets

    def emit(obj):
        print("RESULT " + json.dumps(obj), flush=True)

    def threads_phase(tok, docs, want, counts):
        errors = []
        def work(k):
            try:
                for _ in range(3):
                    assert tok.encode_batch(docs, num_threads=2) == want, "encode_batch"
                    assert tok.encode_batch(pa.array(docs), num_threads=2).to_pylist() == want, "arrow"
                    assert [tok.encode(d) for d in docs[k::8]] == want[k::8], "encode"
                    assert tok.count_tokens(docs, num_threads=2).tolist() == counts, "count_tokens"
            except BaseException as exc:
                errors.append(f"thread {{k}}: {{type(exc).__name__}}: {{exc}}"[:300])
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def interrupt_phase(tok, docs, want, counts):
        """Encode in a loop until the parent's SIGINT; how it ended, and the ids after."""
        big = docs * 20
        try:  # the loop must run before a signal can mean anything (no READY otherwise)
            tok.encode_batch(docs[:5], num_threads=2)
            tok.count_tokens(docs[:5], num_threads=2)
        except Exception as exc:
            return f"the loop cannot run: {{type(exc).__name__}}: {{exc}}"[:300], None
        print("READY", flush=True)
        try:
            while True:
                tok.encode_batch(big, num_threads=2)
                tok.count_tokens(big, num_threads=2)
        except KeyboardInterrupt:
            ended = "KeyboardInterrupt"
        except BaseException as exc:  # reported: a Ctrl-C must surface as KeyboardInterrupt
            chain, link = [], exc
            while link is not None:  # the exceptions it came from
                chain.append(type(link).__name__)
                link = link.__cause__ or link.__context__
            ended = f"{{type(exc).__name__}}: {{exc}}"[:300] + f" (chain: {{' <- '.join(chain)}})"
        try:
            same = (tok.encode_batch(docs, num_threads=2) == want
                    and tok.count_tokens(docs, num_threads=2).tolist() == counts)
        except Exception as exc:
            same = f"{{type(exc).__name__}}: {{exc}}"[:300]
        return ended, same

    rnd = random.Random(3)
    words = " ".join(presets.SAMPLE).split(" ")
    docs = [" ".join(rnd.choices(words, k=rnd.randint(0, 80))) for _ in range(300)]
    for name, factory in presets.FACTORIES:
        try:
            tok = factory()
        except pytest.skip.Exception as exc:
            emit({{"preset": name, "skip": str(exc)}})
            continue
        want = tok.encode_batch(docs, num_threads=1)
        counts = [len(w) for w in want]
        emit({{"preset": name, "thread_errors": threads_phase(tok, docs, want, counts)}})
        ends, same = [], True
        for trial in range({trials}):
            ended, same_now = interrupt_phase(tok, docs, want, counts)
            ends.append(ended)
            same = same if same_now is True else same_now
            if ended.startswith("the loop cannot run"):
                break
        emit({{"preset": name, "interrupt": ends, "same_ids_after": same}})
    emit({{"done": True}})
''')


#: A SIGINT not answered by the child within this many seconds was lost (a defect).
ANSWER_SECONDS = 20


def _run_child() -> dict:
    """Run the child over every preset: {preset: its results}, ``"_log"`` the output.

    At each READY line the child is in its loop of kernel calls; it gets a SIGINT there
    (``len(DELAYS)`` times per preset, after each delay in turn: a signal can land in any
    kernel or in the Python between them, and each must end the same way). A signal the
    child does not answer within ``ANSWER_SECONDS`` is recorded as lost and the child is
    killed (a lost Ctrl-C would otherwise hang the test).
    """
    code = CHILD.format(repo=str(TESTS.parent), tests=str(TESTS), trials=len(DELAYS))
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(TESTS.parent))
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    results: dict = {"_log": []}
    current = None
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            pending = current is not None and results[current].get("pending")
            try:
                line = lines.get(timeout=ANSWER_SECONDS if pending else 600)
            except queue.Empty:
                if pending:
                    results[current]["lost"] = "the child did not answer a SIGINT"
                break
            if line is None:
                break
            results["_log"].append(line)
            if line.startswith("RESULT "):
                obj = json.loads(line[7:])
                current = obj.pop("preset", None)
                if current is not None:
                    results.setdefault(current, {}).update(obj, pending=False)
                    if "interrupt" in obj and "sent" in results[current]:  # the last trial
                        results[current]["stop_seconds"] = time.monotonic() - results[current]["sent"]
            elif line.strip() == "READY" and current is not None:
                trial = results[current].get("trials", 0)
                results[current]["trials"] = trial + 1
                time.sleep(DELAYS[trial % len(DELAYS)])  # inside the loop, at varied points
                results[current].update(sent=time.monotonic(), pending=True)
                proc.send_signal(signal.SIGINT)
    finally:
        if proc.poll() is None and (deadline < time.monotonic() or results.get(current, {}).get("lost")):
            proc.kill()
        try:
            results["_stderr"] = proc.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            results["_stderr"] = proc.communicate()[1]
    results["_returncode"] = proc.returncode
    return results


#: Seconds between a READY and its SIGINT (one Ctrl-C trial each).
DELAYS = (0.5, 0.1, 0.25, 0.05, 0.35, 0.15)


@pytest.fixture(scope="module")
def children():
    return _run_child()


@pytest.fixture(params=[name for name, _ in FACTORIES])
def child(request, children):
    name = request.param
    result = children.get(name)
    if result is None:
        pytest.fail(f"the child never reached preset {name}:\n" + _context(children))
    if result.get("skip"):
        pytest.skip(result["skip"])
    return name, result


def _context(children) -> str:
    return ("".join(children["_log"])[-1500:] + "\n" + children.get("_stderr", "")[-3000:]
            + f"\nexit status {children.get('_returncode')}")


def test_eight_python_threads_give_the_serial_ids(child):
    name, result = child
    assert result["thread_errors"] == [], result["thread_errors"]


def test_ctrl_c_while_encoding_is_a_clean_keyboard_interrupt(child, children):
    name, result = child
    assert not result.get("lost"), result["lost"]
    assert "interrupt" in result, _context(children)
    assert result["interrupt"] == ["KeyboardInterrupt"] * len(DELAYS)
    assert result["same_ids_after"] is True, result["same_ids_after"]
    assert result["stop_seconds"] < 10.0  # generous on a loaded machine; a hang takes minutes


def test_the_child_ran_every_preset_and_exited_cleanly(children):
    assert children["_returncode"] == 0, _context(children)
    assert all(name in children for name, _ in FACTORIES), _context(children)
