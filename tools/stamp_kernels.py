"""Write each kernel module's dependency stamp (run after changing a kernel module).

Numba's on-disk cache keys a compiled function by its own source file's contents only. A
kernel that calls a function of another kernel module has that function compiled into it,
so editing ``encode.py`` leaves ``recover.py``'s cached code calling the old version
(seen: a changed slot hash made every merge recovery fail on a warm cache, and a user who
upgrades would get the same). Each kernel module that imports another one therefore
carries a line ``#: kernel cache stamp: <sha256>`` of the sources it depends on; a change
of a dependency changes the stamp, hence the module's own contents, hence its cache key.
``tests/test_kernel_stamps.py`` fails when a stamp is out of date.

    python tools/stamp_kernels.py          # rewrite the stamps
    python tools/stamp_kernels.py --check  # exit 1 if one is out of date
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "fastbpe_nb" / "kernels"
STAMP = re.compile(r"^#: kernel cache stamp: [0-9a-f]*\n", re.M)
IMPORT = re.compile(r"^from \.(\w+) import", re.M)


def _source(name: str) -> str:
    return STAMP.sub("", (KERNELS / f"{name}.py").read_text(encoding="utf-8"))


def dependencies(name: str) -> list[str]:
    """Kernel modules ``name`` imports, directly or not (sorted, itself excluded)."""
    seen, todo = set(), [name]
    while todo:
        for dep in IMPORT.findall(_source(todo.pop())):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    seen.discard(name)
    return sorted(seen)


def expected_stamp(name: str) -> str | None:
    deps = dependencies(name)
    if not deps:
        return None
    digest = hashlib.sha256()
    for dep in deps:
        digest.update(dep.encode() + b"\0" + _source(dep).encode() + b"\0")
    return digest.hexdigest()


def current_stamp(name: str) -> str | None:
    m = re.search(r"^#: kernel cache stamp: ([0-9a-f]*)$", (KERNELS / f"{name}.py").read_text(),
                  re.M)
    return m.group(1) if m else None


def stale() -> list[tuple[str, str | None, str | None]]:
    """``(module, recorded, expected)`` for every module whose stamp is out of date."""
    out = []
    for path in sorted(KERNELS.glob("*.py")):
        name = path.stem
        if name == "__init__":
            continue
        want, have = expected_stamp(name), current_stamp(name)
        if want != have:
            out.append((name, have, want))
    return out


def write() -> None:
    for name, _, want in stale():
        path = KERNELS / f"{name}.py"
        text = STAMP.sub("", path.read_text(encoding="utf-8"))
        if want is not None:
            # Right after the module's last import statement.
            import ast

            lines = text.splitlines(keepends=True)
            end = max(node.end_lineno for node in ast.parse(text).body
                      if isinstance(node, (ast.Import, ast.ImportFrom)))
            lines.insert(end, f"#: kernel cache stamp: {want}\n")
            text = "".join(lines)
        path.write_text(text, encoding="utf-8")
        print(f"{name}: stamp {want}")


if __name__ == "__main__":
    if "--check" in sys.argv:
        bad = stale()
        for name, have, want in bad:
            print(f"{name}.py: kernel cache stamp {have} is out of date (expected {want})")
        sys.exit(1 if bad else 0)
    write()
