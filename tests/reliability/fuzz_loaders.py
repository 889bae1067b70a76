"""Fuzzing the model loaders (ours, .tiktoken, tokenizer.json).

Accepted outcomes for any input: a tokenizer that encodes and decodes a sample exactly, or
a ModelFormatError naming the file. Anything else (another exception, a crash, a hang, a
blow-up of memory) is a finding.

Three engines:

* ``atheris`` (coverage-guided, libFuzzer) when installed::

      .venv/bin/python tests/reliability/fuzz_loaders.py -max_total_time=300 -rss_limit_mb=2048

* without atheris, the same harness runs as a seeded random-mutation loop (byte flips,
  truncations, splices, interesting values) for ``--seconds``::

      .venv/bin/python tests/reliability/fuzz_loaders.py --no-atheris --seconds 300

* ``hypothesis_structure_fuzz``: a structure-aware hypothesis fuzzer of the JSON formats
  (values replaced by other JSON types, huge ints, keys deleted, values nested), used by
  tests/reliability/test_model_files.py.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SUFFIX = {"ours": ".json", "tiktoken": ".tiktoken", "hf": ".tokenizer.json"}


class Finding(Exception):
    pass


def _seeds():
    """Small valid files of each format (trained here; deterministic)."""
    import fastbpe_nb as fb
    from fastbpe_nb.io.huggingface_export import huggingface_json
    from fastbpe_nb.io.model_file import model_to_json
    from fastbpe_nb.io.tiktoken_format import tiktoken_bytes
    from rel_harness import code_like, prose

    tok = fb.train([prose(30_000) + code_like(5_000)], vocab_size=400,
                   special_tokens=["<|endoftext|>", "<|fim|>"])
    chars = fb.train([prose(5_000)], num_merges=40, base="chars", end_of_word="</w>")
    return {"ours": [model_to_json(tok).encode(), model_to_json(chars).encode()],
            "tiktoken": [tiktoken_bytes(tok)], "hf": [huggingface_json(tok).encode()]}


class Harness:
    def __init__(self, workdir):
        from loader_cases import check_load

        self.check_load = check_load
        self.workdir = workdir
        self.n = 0

    def one(self, fmt: str, data: bytes) -> dict:
        path = os.path.join(self.workdir, "input" + SUFFIX[fmt])
        with open(path, "wb") as f:
            f.write(data)
        self.n += 1
        r = self.check_load(fmt, path)
        if r["outcome"].startswith("BAD"):
            keep = os.path.join(self.workdir, f"finding-{self.n}{SUFFIX[fmt]}")
            os.replace(path, keep)
            raise Finding(f"{fmt}: {r['outcome']} (input kept at {keep})")
        return r


FORMAT_OF_BYTE = ("ours", "tiktoken", "hf")
INTERESTING = [b"0", b"-1", b"1000000000", b"9" * 30, b"[]", b"{}", b"null", b"true", b'""',
               b"\x00", b"\xff", b"1e309", b"[[[[[[[[", b'"\\ud800"', b" ", b"\n", b"=="]


def mutate(data: bytes, rnd: random.Random, seeds) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 6)):
        op = rnd.randrange(6)
        if not b:
            b += rnd.choice(INTERESTING)
            continue
        i = rnd.randrange(len(b))
        if op == 0:
            b[i] = rnd.randrange(256)
        elif op == 1:
            del b[i:i + rnd.randint(1, 64)]
        elif op == 2:
            b[i:i] = rnd.choice(INTERESTING)
        elif op == 3:
            del b[i:]
        elif op == 4:
            other = rnd.choice(seeds)
            j = rnd.randrange(len(other))
            b[i:i] = other[j:j + rnd.randint(1, 200)]
        else:
            j = rnd.randrange(len(b))
            b[i:i] = b[j:j + rnd.randint(1, 200)]
    return bytes(b)


def random_loop(seconds: float, seed: int = 0, workdir=None) -> dict:
    """The atheris-free engine: seeded random mutations of the seeds for ``seconds``."""
    workdir = workdir or tempfile.mkdtemp(prefix="fuzz-loaders-")
    h = Harness(workdir)
    seeds = _seeds()
    everything = [s for v in seeds.values() for s in v]
    rnd = random.Random(seed)
    outcomes = {}
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        fmt = rnd.choice(FORMAT_OF_BYTE)
        data = mutate(rnd.choice(seeds[fmt]), rnd, everything)
        r = h.one(fmt, data)
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    return {"inputs": h.n, "outcomes": outcomes}


def atheris_main(argv):
    import atheris

    with atheris.instrument_imports():
        import fastbpe_nb  # noqa: F401
        import fastbpe_nb.io.huggingface_format  # noqa: F401
        import fastbpe_nb.io.model_file  # noqa: F401
        import fastbpe_nb.io.tiktoken_format  # noqa: F401
    workdir = tempfile.mkdtemp(prefix="fuzz-loaders-")
    h = Harness(workdir)
    # Seed corpus: the valid files, prefixed by their format byte.
    corpus = os.path.join(workdir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for k, fmt in enumerate(FORMAT_OF_BYTE):
        for j, data in enumerate(_seeds()[fmt]):
            with open(os.path.join(corpus, f"{fmt}{j}"), "wb") as f:
                f.write(bytes([k]) + data)

    def test_one(data: bytes):
        if not data:
            return
        h.one(FORMAT_OF_BYTE[data[0] % 3], data[1:])

    atheris.Setup(argv + [corpus], test_one)
    atheris.Fuzz()


def hypothesis_structure_fuzz(model_base: str, workdir: str, max_examples: int = 200) -> dict:
    """Structure-aware fuzzing of our model JSON and tokenizer.json with hypothesis."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    h = Harness(workdir)
    docs = {"ours": json.loads(Path(model_base + ".json").read_text()),
            "hf": json.loads(Path(model_base + ".tokenizer.json").read_text())}
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.sampled_from(
            [10**9, -(10**9), 2**31, 2**63, 10**30, -1, 0, 255, 256]) | st.floats(allow_nan=False)
        | st.text(max_size=8),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids,
                                                                 max_size=3),
        max_leaves=6)
    ops = st.lists(st.tuples(st.sampled_from(["replace", "delete", "nest_list", "nest_dict",
                                              "huge", "dup", "empty"]),
                             st.integers(0, 2**32), json_values), min_size=1, max_size=4)
    stats = {"examples": 0, "errors": 0, "ok": 0}

    def containers(node, out):
        if isinstance(node, dict):
            out.append(node)
            for v in node.values():
                containers(v, out)
        elif isinstance(node, list):
            out.append(node)
            # sample long lists rather than walking every merge
            for v in node[:3] + node[-2:] if len(node) > 5 else node:
                containers(v, out)
        return out

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["ours", "hf"]), ops)
    def prop(fmt, operations):
        doc = json.loads(json.dumps(docs[fmt]))
        for op, pick, value in operations:
            nodes = containers(doc, [])
            node = nodes[pick % len(nodes)]
            if not node:
                continue
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            key = keys[(pick // len(nodes)) % len(keys)]
            if op == "replace":
                node[key] = value
            elif op == "delete":
                del node[key]
            elif op == "nest_list":
                node[key] = [node[key]]
            elif op == "nest_dict":
                node[key] = {"x": node[key]}
            elif op == "huge":
                node[key] = 10 ** (pick % 40) * (-1 if pick % 2 else 1)
            elif op == "dup" and isinstance(node, list):
                node.insert(key, node[key])
            elif op == "empty":
                node[key] = type(node[key])() if isinstance(node[key], (list, dict, str)) else None
        stats["examples"] += 1
        r = h.one(fmt, json.dumps(doc).encode())
        stats["errors" if r["outcome"] == "ModelFormatError" else "ok"] += 1

    prop()
    return stats


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    if "--no-atheris" not in argv:
        try:
            import atheris  # noqa: F401
        except ImportError:
            print("atheris is not installed: running the random-mutation loop instead")
        else:
            return atheris_main(argv)
    seconds = 60.0
    for arg in argv:  # libFuzzer's flag works for the fallback loop too
        if arg.startswith("-max_total_time="):
            seconds = float(arg.split("=", 1)[1])
    if "--seconds" in argv:
        seconds = float(argv[argv.index("--seconds") + 1])
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
    print(json.dumps(random_loop(seconds, seed)))


if __name__ == "__main__":
    main()
