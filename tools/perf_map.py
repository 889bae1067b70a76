"""Profile Numba kernels with Linux ``perf``: name the JIT-compiled functions, and see
which instructions of one of them the samples fall on.

Numba's compiled code lives in anonymous memory that ``perf`` cannot name. In the process
to be profiled, once the kernels have run (compiled or loaded from the cache)::

    import sys; sys.path.insert(0, "tools")
    from perf_map import write_perf_map, dump_function
    write_perf_map()                       # /tmp/perf-<pid>.map: perf reads it itself
    dump_function("14_rewrite_words")      # its machine code, for the histogram below

then, from a shell, while it runs the code of interest::

    perf record -F 2000 -p <pid> -o /tmp/perf.data -- sleep 4
    perf report -i /tmp/perf.data --no-children --sort sym
    python tools/perf_map.py 14_rewrite_words [--all]   # samples per instruction

A function is matched by a part of its mangled name (``<len><name>``: ``14_rewrite_words``
is ``_rewrite_words``). A sample lands on the instruction after the one that stalled (a
load that missed the cache shows on the next instruction). Used for the merge kernel's
profile in docs/performance.md (2026-12-04).
"""

from __future__ import annotations

import collections
import ctypes
import os
import re
import subprocess
import sys

DUMP = "/tmp/perf-dump-{name}"


def _symbols() -> list[tuple[int, str]]:
    """``(address, name)`` of every function Numba's JIT engine has defined, by address."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    found = []
    for name in set(getattr(engine, "_defined_symbols", ())):
        try:
            address = engine._ee.get_function_address(name)
        except Exception:  # a symbol that is not a function
            continue
        if address:
            found.append((address, name))
    return sorted(found)


def write_perf_map(path: str | None = None) -> int:
    """Write ``/tmp/perf-<pid>.map`` (each function sized up to the next one's address, at
    most 1 MiB); returns the number of functions."""
    rows = _symbols()
    if not rows:  # no kernel has run yet in this process
        return 0
    with open(path or f"/tmp/perf-{os.getpid()}.map", "w", encoding="ascii") as f:
        for (address, name), (after, _) in zip(rows, rows[1:] + [(rows[-1][0] + 4096, "")]):
            f.write(f"{address:x} {min(after - address, 1 << 20):x} {name}\n")
    return len(rows)


def dump_function(part: str) -> str:
    """Save the machine code of the largest function whose name holds ``part`` (and its
    address) for ``annotate``; returns its name."""
    rows = _symbols()
    sized = [(after - address, address, name)
             for (address, name), (after, _) in zip(rows, rows[1:]) if part in name]
    if not sized:
        raise ValueError(f"no compiled function matches {part!r}")
    size, address, name = max(sized)
    base = DUMP.format(name=part)
    with open(base + ".bin", "wb") as f:
        f.write(ctypes.string_at(address, size))
    with open(base + ".addr", "w", encoding="ascii") as f:
        f.write(hex(address))
    return name


def annotate(part: str, data: str = "/tmp/perf.data", top: int = 40, everything=False):
    """Print the share of ``data``'s samples on each instruction of the dumped function."""
    base = DUMP.format(name=part)
    with open(base + ".addr", encoding="ascii") as f:
        address = int(f.read(), 16)
    size = os.path.getsize(base + ".bin")
    ips = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True,
                         text=True, check=True).stdout.split()
    hits = collections.Counter(int(ip, 16) for ip in ips if address <= int(ip, 16) < address + size)
    total = max(1, sum(hits.values()))
    listing = subprocess.run(["objdump", "-D", "-b", "binary", "-mi386:x86-64",
                              f"--adjust-vma={address}", base + ".bin"],
                             capture_output=True, text=True, check=True).stdout
    code = {}
    for line in listing.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)", line)
        if m:
            code[int(m.group(1), 16)] = m.group(2)
    print(f"{sum(hits.values())} samples in {part}")
    rows = sorted(code) if everything else [a for a, _ in hits.most_common(top)]
    for a in rows:
        print(f"{100 * hits.get(a, 0) / total:5.1f} {a - address:6x} {code.get(a, '?')}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    annotate(sys.argv[1], everything="--all" in sys.argv)
