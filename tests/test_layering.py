"""The package's layering, checked from the source (AST only: nothing is imported).

Dependencies point one way: kernels <- encoder/trainer core <- Tokenizer <- io/formats <-
API/CLI. Each ``find_*`` function below reads the ``fastbpe_nb`` package under a root
directory and returns its violations of one rule as readable lines; each rule has a
``test_*`` that runs it on this repository and a ``test_*_catches`` that runs it on a small
fake package written to a temporary directory, so that every check is shown to be able
to fail.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "fastbpe_nb"

#: Modules (paths relative to the root) that may use the Tokenizer's private names on
#: objects other than ``self``/``cls``: the Tokenizer's own helper modules.
TOKENIZER_MODULES = {"fastbpe_nb/tokenizer.py"}

#: What a kernel module may import, besides other ``fastbpe_nb.kernels`` modules.
KERNEL_IMPORTS = {"numpy", "numba", "math", "typing", "__future__"}

#: Line limits: files under these paths are not limited (kernels are long numeric code;
#: unicode_tables.py is generated data).
UNLIMITED = ("fastbpe_nb/kernels/", "fastbpe_nb/unicode_tables.py")
MAX_LINES = 600
#: Stricter limits for single files.
FILE_MAX_LINES = {"fastbpe_nb/tokenizer.py": 350,
                  # The specification holds every variant's slow trainer (DESIGN: one
                  # reference.py; production code may not import it). train()/train_files()
                  # thread one keyword per training variant, whose logic lives in its own
                  # module (superbpe, pruning, boundless): splitting training.py is due
                  # when the next variant lands.
                  "fastbpe_nb/reference.py": 820, "fastbpe_nb/training.py": 640}

#: Module-level names that njit functions may read. Only true constants belong here: values
#: that define a data layout or a protocol with the Python side, so that changing one is a
#: format change, not tuning. Tunables (window, chunk, cache and sweep sizes, thresholds
#: that pick an algorithm) must be kernel arguments instead, with the module constant as
#: the value the Python caller passes. Key: "module:NAME" of the module that assigns it.
KERNEL_CONSTANTS = {
    # Class-word bit layout of the Unicode tables (unicode_tables.py is generated with
    # these bits; the scanner's words carry them).
    *(f"fastbpe_nb.kernels.unicode_classes:{name}" for name in (
        "CLS_L", "CLS_N", "CLS_WS", "CLS_UPPERISH", "CLS_LOWERISH",
        "FOLD_S", "FOLD_D", "FOLD_M", "FOLD_T", "FOLD_L", "FOLD_V", "FOLD_E", "FOLD_R")),
    *(f"fastbpe_nb.kernels.scan:{name}" for name in (
        # Pattern ids agreed with _scanner.PATTERN_IDS.
        "PATTERN_GPT2", "PATTERN_CL100K", "PATTERN_O200K", "PATTERN_SUPERBPE",
        # The ASCII flag bits above the table's 16 bits, and masks combining class bits.
        "CH_SPACE", "CH_CRLF", "CH_SLASH", "CH_END",
        "_NOT_OTHER", "_STRETCH_BITS",
        # Marker code point of an undecodable byte (the decoded-character layout).
        "INVALID_CODE_POINT",
        # CH_END words after a document's last character: the matchers' look-ahead, so
        # the size of every word buffer.
        "N_SENTINELS",
        # Slots every piece buffer keeps beyond one per byte for the automata's
        # branch-free stores (their correctness, see _scan_automaton).
        "SCAN_SLACK",
        # Characters kept at each end of a shortened stretch: the patterns' longest
        # look-ahead (correctness, not speed; see _first_piece_shortened).
        "KEEP_CHARS",
    )),
    # gpt2's ASCII blocks: 64 bytes, one bit each in a 64-bit mask (the width of the masks).
    *(f"fastbpe_nb.kernels.ascii_blocks:{name}" for name in ("BLOCK_BYTES", "STORABLE")),
    # The gpt2, cl100k and o200k automata: their classes, states, action bits and the layout of
    # scanner_tables (what the patterns are, not tuning).
    *(f"fastbpe_nb.kernels.automata:{name}" for name in (
        "END_BEFORE_PREVIOUS", "END_BEFORE_THIS", "RETRACT", "PENDING", "ACTION_SHIFT",
        "G2_LETTER", "G2_STMD", "G2_RV", "G2_E", "G2_L", "G2_NUMBER", "G2_SPACE", "G2_WS",
        "G2_APOSTROPHE", "G2_OTHER", "G2_END", "G2_N_CLASSES", "G2_START", "G2_LETTERS",
        "G2_NUMBERS", "G2_OTHERS", "G2_ONE_SPACE", "G2_ONE_WS", "G2_WS_SPACE", "G2_WS_OTHER",
        "G2_QUOTE", "G2_QUOTE_RV", "G2_QUOTE_L", "G2_CONTRACTION", "G2_N_STATES", "C1_LETTER",
        "C1_STMD", "C1_RV", "C1_E", "C1_L", "C1_NUMBER", "C1_SPACE", "C1_WS", "C1_CRLF",
        "C1_APOSTROPHE", "C1_OTHER", "C1_END", "C1_N_CLASSES", "C1_START", "C1_LETTERS",
        "C1_N1", "C1_N2", "C1_N3", "C1_PFX_SPACE", "C1_PFX_WS", "C1_PFX_OTHER", "C1_QUOTE",
        "C1_QUOTE_RV", "C1_QUOTE_L", "C1_CONTRACTION", "C1_OTHERS", "C1_OTHERS_CRLF",
        "C1_RUN_SPACE", "C1_RUN_WS", "C1_CR", "C1_CR_SPACE1", "C1_CR_WS1", "C1_CR_SPACE",
        "C1_CR_WS", "C1_N_STATES", "O2_UP", "O2_LO", "O2_BOTH", "O2_MARK", "O2_UP_STMD",
        "O2_LO_STMD", "O2_UP_RV", "O2_LO_RV", "O2_UP_E", "O2_LO_E", "O2_UP_L", "O2_LO_L",
        "O2_NUMBER", "O2_SPACE", "O2_BLANK", "O2_CRLF", "O2_SLASH", "O2_APOSTROPHE",
        "O2_OTHER", "O2_END", "O2_N_CLASSES", "O2_START", "O2_N1", "O2_N2", "O2_N3",
        "O2_PFX_SPACE", "O2_PFX_BLANK", "O2_PFX_OTHER", "O2_OTHERS", "O2_OTHERS_CRLF",
        "O2_RUN_SPACE", "O2_RUN_BLANK", "O2_CR", "O2_CR_SPACE1", "O2_CR_BLANK1",
        "O2_CR_SPACE", "O2_CR_BLANK", "O2_UPPER", "O2_UPPER_BOTH", "O2_UPPER_CAND",
        "O2_LOWER", "O2_QUOTE", "O2_QUOTE_RV_UP", "O2_QUOTE_RV_LO", "O2_QUOTE_L_UP",
        "O2_QUOTE_L_LO", "O2_CONTRACTION", "O2_N_STATES", "G2_ASCII_AT", "C1_ASCII_AT",
        "O2_ASCII_AT", "G2_STEP_AT", "C1_STEP_AT", "O2_STEP_AT", "SCANNER_TABLES_SIZE",
    )),
    # The empty-slot marker of the open-addressing tables, and the seed that defines their
    # hash function: tables built by one kernel are probed by another.
    "fastbpe_nb.kernels.hashing:EMPTY", "fastbpe_nb.kernels.hashing:HASH_SEED",
    # Token status codes of the backtracking tables, agreed with model.backtrack_tables.
    *(f"fastbpe_nb.kernels.backtrack:{name}" for name in (
        "STATUS_UNREACHABLE", "STATUS_OK", "STATUS_BASE", "STATUS_OUT_OF_ORDER",
        # The compatibility memo's free-slot marker (its layout) and size (fixed by the L2
        # cache it must fit, like FRONT_SLOTS; measured flat from 2**13 to 2**18 slots).
        "MEMO_EMPTY", "MEMO_SLOTS")),
    *(f"fastbpe_nb.kernels.encode:{name}" for name in (
        # "No rank" sentinel and the 32-bit half of a packed pair.
        "NO_RANK", "LOW32",
        # The sweep's int32 positions: pieces longer than this cannot be swept at all.
        "SWEEP_MAX_UNITS",
        # Size of a block's front table: fixed by the L2 cache it must fit, not a per-call
        # tunable (no caller changes it; the kernels' arguments carry the tunables).
        "FRONT_SLOTS",
        # Prefetch distance in pieces, the size of the keys' ring: fixed by memory latency
        # over the time per piece (measured flat from 8 to 32), like FRONT_SLOTS.
        "LOOKAHEAD",
        "ONE_ID",
        "CHECK_AHEAD",
        # The first size of a block's growing table: where its growth starts, not a
        # tunable (the cap, the tunable, is an argument).
        "BLOCK_FIRST_SLOTS",
    )),
    *(f"fastbpe_nb.kernels.piece_cache:{name}" for name in (
        # Piece tables: short keys pack 15 bytes + length in two int64; values pack up to
        # 3 ids of 20 bits in one int64; hashed keys carry LONG_TAG (the layout every
        # piece table shares, see kernels/piece_cache.py).
        "SHORT_BYTES", "SHORT_ID_BITS", "SHORT_MAX_IDS", "SHORT_ID_MASK", "LONG_TAG",
        "HASH_MASK", "MAX_UNITS",
        # Indices of the cache's counter array, agreed with fastbpe_nb/piece_cache.py.
        "S_ENTRIES", "S_UNITS", "S_IDS", "S_MAX_BYTES", "S_HITS", "S_BLOCK_HITS", "S_MERGED",
        "S_PUBLISH", "S_DROPPED", "N_STATE",
    )),
    *(f"fastbpe_nb.kernels.count:{name}" for name in (
        # Key and value layout of the counting kernel's private tables (a short piece's
        # packed bytes vs a long piece's tag; a 32-bit count beside the word index).
        "LONG_KEY", "COUNT_MASK",
        # Prefetch distance of the global table's look-ups: fixed by memory latency over
        # the time per word, like encode.LOOKAHEAD.
        "LOOKUP_AHEAD",
    )),
    *(f"fastbpe_nb.kernels.pair_cut:{name}" for name in (
        # The largest value of a pair sketch's uint32 counter; the prefetch distance of
        # the cut's row look-ups (pieces found per batch): fixed by memory latency over the
        # time per piece, like encode.LOOKAHEAD.
        "SKETCH_CAP", "PIECE_BATCH",
    )),
    *(f"fastbpe_nb.kernels.merge:{name}" for name in (
        # Tie-rule codes (merge_loop maps TIE_RULES to them).
        "TIE_RANKS", "TIE_FIRST", "TIE_BYTES",
        # Columns of a pair record and of a heap entry, the "no first occurrence" sentinel,
        # the 32-bit half of a packed pair or mark, and the period of the merge stamps.
        "R_KEY", "R_COUNT", "R_HEAD", "R_MARK", "R_FIRST", "R_DIRTY", "N_RCOLS",
        "N_RCOLS_FIRST", "H_COUNT", "H_AUX", "H_KEY", "N_HCOLS", "NO_FIRST", "LOW32",
        "STAMP_PERIOD",
        # Slots of the rewrite's counters array.
        "C_PAIRS", "C_ROWS", "C_TOUCHED", "C_FREE", "C_LEAD", "C_SPARE", "C_TAIL", "C_SEEN",
        "C_DONE", "N_COUNTERS",
        # Slots and status codes of the progress array shared with merge_loop.
        "PROG_BUDGET", "PROG_NEED", "PROG_PHASE", "STOPPED_ASKED", "STOPPED_MEMORY",
        "PROG_REBUILDS", "PROG_RAISES", "PROG_PURGES", "PROG_GROWS", "N_PROGRESS",
    )),
    # The two-thread merge kernel's mailbox: its slots and commands (its layout).
    *(f"fastbpe_nb.kernels.merge_halves:{name}" for name in (
        "M_SEQ", "M_CMD", "M_A", "M_B", "M_X", "M_STAMP", "M_CLEAR", "M_THETA", "M_REC",
        "M_REC_ROWS", "W_DONE", "W_REC", "W_REC_ROWS", "W_PAIRS", "W_TOUCHED", "W_CAND",
        "W_CAND_COUNT", "W_FAILED", "MAILBOX_SLOTS", "CMD_REWRITE", "CMD_SUMS", "CMD_EXIT")),
    *(f"fastbpe_nb.kernels.word_order:{name}" for name in (
        # Bit widths of the word sort (its key, the word number beside it, a radix pass)
        # and the copy's prefetch distance in words, like encode.LOOKAHEAD.
        "KEY_BITS", "WORD_BITS", "RADIX_BITS", "AHEAD",
    )),
}

_EXCEPTION_ROOTS = {"BaseException", "Exception"}


# ---------------------------------------------------------------------------------------
# Reading the package
# ---------------------------------------------------------------------------------------


class Module:
    """One source file of the package: its dotted name, path relative to the root, tree."""

    def __init__(self, root: Path, path: Path):
        self.path = path
        self.rel = path.relative_to(root).as_posix()
        parts = list(path.relative_to(root).with_suffix("").parts)
        self.is_package = parts[-1] == "__init__"
        if self.is_package:
            parts = parts[:-1]
        self.name = ".".join(parts)
        self.source = path.read_text(encoding="utf-8")
        self.tree = ast.parse(self.source, filename=str(path))

    @property
    def in_kernels(self) -> bool:
        return self.rel.startswith(f"{PACKAGE}/kernels/")


def package_modules(root: Path) -> dict[str, Module]:
    """Every ``.py`` file of ``root/fastbpe_nb``, by dotted module name."""
    modules = [Module(root, p) for p in sorted((root / PACKAGE).rglob("*.py"))]
    return {m.name: m for m in modules}


def _resolve_base(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module name ``from <...> import`` refers to."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def imports(module: Module, known: set[str]) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import anywhere in ``module`` (function-level
    imports included). ``from pkg import name`` imports ``pkg.name`` when that is a module
    of the package, otherwise ``pkg`` itself."""
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_base(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((sub if sub in known else base, node.lineno))
    return found


def import_graph(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """Edges between the package's modules: ``graph[a][b]`` = a line where ``a`` imports
    ``b``. Importing a submodule also runs its parent packages' ``__init__``; that implicit
    edge is left out (it would make every package a cycle), explicit ones count."""
    known = set(modules)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, module in modules.items():
        for target, line in imports(module, known):
            if target in known and target != name:
                graph[name].setdefault(target, line)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _cycle_in(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module (breadth-first search)."""
    members = set(component)
    start = component[0]
    parent = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return list(reversed(path)) + [start]
                if w in members and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("a strongly connected component without a cycle")


# ---------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------


def find_import_cycles(root: Path) -> list[str]:
    """(a) Import cycles between the package's modules, function-level imports included."""
    modules = package_modules(root)
    graph = import_graph(modules)
    found = []
    for component in _strongly_connected(graph):
        cycle = _cycle_in(graph, component)
        steps = " -> ".join(
            f"{a} (line {graph[a][b]})" for a, b in zip(cycle[:-1], cycle[1:])
        ) + f" -> {cycle[-1]}"
        members = set(component)
        edges = ", ".join(f"{a} -> {b} (line {line})" for a in component
                          for b, line in sorted(graph[a].items()) if b in members)
        found.append(f"cycle among {', '.join(component)}: {steps}; "
                     f"all imports among them: {edges}")
    return found


def find_kernel_imports(root: Path) -> list[str]:
    """(b) Kernel modules importing anything but numpy, numba, math, typing, __future__
    and other kernel modules."""
    modules = package_modules(root)
    found = []
    for module in modules.values():
        if not module.in_kernels:
            continue
        for target, line in sorted(set(imports(module, set(modules))), key=lambda t: t[1]):
            top = target.split(".")[0]
            if top in KERNEL_IMPORTS or (target + ".").startswith(f"{PACKAGE}.kernels."):
                continue
            found.append(f"{module.rel}:{line} imports {target}")
    return _by_place(found)


def find_reference_imports(root: Path) -> list[str]:
    """(c) Production modules importing the specification module ``reference.py``."""
    modules = package_modules(root)
    found = []
    for module in modules.values():
        if module.name == f"{PACKAGE}.reference":
            continue
        for target, line in sorted(set(imports(module, set(modules))), key=lambda t: t[1]):
            if target == f"{PACKAGE}.reference" or target.startswith(f"{PACKAGE}.reference."):
                found.append(f"{module.rel}:{line} imports {target}")
    return _by_place(found)


def _jit_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Local names bound to ``numba.njit``/``numba.jit`` and to the ``numba`` module."""
    jit, numba = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "numba":
            jit |= {a.asname or a.name for a in node.names if a.name in ("njit", "jit")}
        elif isinstance(node, ast.Import):
            numba |= {a.asname or a.name for a in node.names if a.name == "numba"}
    return jit, numba


def _is_jit(node: ast.expr, jit: set[str], numba: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in jit
    return (isinstance(node, ast.Attribute) and node.attr in ("njit", "jit")
            and isinstance(node.value, ast.Name) and node.value.id in numba)


def _jit_problems(call: ast.expr, jit: set[str], numba: set[str]) -> list[str] | None:
    """What is wrong with one decorator or call; None when it is not a jit at all."""
    if _is_jit(call, jit, numba):
        return ["no arguments (needs cache=True, nogil=True)"]
    if not (isinstance(call, ast.Call) and _is_jit(call.func, jit, numba)):
        return None
    problems = []
    if call.args:
        problems.append("an eager signature (positional argument)")
    if any(k.arg in ("signature_or_function", "signature") for k in call.keywords):
        problems.append("an eager signature (keyword)")
    flags = {k.arg: k.value for k in call.keywords}
    for flag in ("cache", "nogil"):
        value = flags.get(flag)
        if not (isinstance(value, ast.Constant) and value.value is True):
            problems.append(f"no {flag}=True")
    return problems


def kernel_functions(module: Module) -> list[ast.FunctionDef]:
    """The functions of a module decorated with njit/jit (in any form)."""
    jit, numba = _jit_names(module.tree)
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef) and any(
            _jit_problems(d, jit, numba) is not None for d in node.decorator_list
        ):
            found.append(node)
    return found


def find_bad_jit(root: Path) -> list[str]:
    """(d) njit/jit in kernel modules without both cache=True and nogil=True, or with an
    eager signature; decorators and direct calls (``njit(...)(f)``) alike."""
    found = []
    for module in package_modules(root).values():
        if not module.in_kernels:
            continue
        jit, numba = _jit_names(module.tree)
        decorators = set()
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef):
                for d in node.decorator_list:
                    decorators.add(id(d))
                    problems = _jit_problems(d, jit, numba)
                    if problems:
                        found.append(f"{module.rel}:{d.lineno} {node.name}: {'; '.join(problems)}")
        for node in ast.walk(module.tree):
            if (isinstance(node, ast.Call) and id(node) not in decorators
                    and _is_jit(node.func, jit, numba)):
                problems = _jit_problems(node, jit, numba)
                if problems:
                    found.append(f"{module.rel}:{node.lineno} call: {'; '.join(problems)}")
    return _by_place(found)


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return ""


def find_stray_exceptions(root: Path) -> list[str]:
    """(e) Public exception classes defined outside ``errors.py``. A class is an exception
    when a base is Exception/BaseException, a name ending in Error or Exception, or a class
    of the package already found to be one."""
    classes = []
    for module in package_modules(root).values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                classes.append((module, node, {_base_name(b) for b in node.bases}))
    exceptional = set()
    changed = True
    while changed:
        changed = False
        for _, node, bases in classes:
            if node.name not in exceptional and any(
                b in _EXCEPTION_ROOTS or b.endswith(("Error", "Exception")) or b in exceptional
                for b in bases
            ):
                exceptional.add(node.name)
                changed = True
    return _by_place([
        f"{module.rel}:{node.lineno} class {node.name}({', '.join(sorted(bases))})"
        for module, node, bases in classes
        if node.name in exceptional and not node.name.startswith("_")
        and module.rel != f"{PACKAGE}/errors.py"
    ])


def find_long_files(root: Path) -> list[str]:
    """(f) Files over MAX_LINES lines (outside UNLIMITED) or over their FILE_MAX_LINES."""
    found = []
    for module in package_modules(root).values():
        n_lines = len(module.source.splitlines())
        limit = FILE_MAX_LINES.get(module.rel)
        if limit is None:
            if module.rel.startswith(UNLIMITED):
                continue
            limit = MAX_LINES
        if n_lines > limit:
            found.append(f"{module.rel}: {n_lines} lines (limit {limit})")
    return _by_place(found)


def tokenizer_private_names(root: Path) -> set[str]:
    """``_name``s of ``class Tokenizer`` in tokenizer.py: its ``def _x``, class-level
    ``_x = ...`` and ``self._x = ...`` (dunders are not private names)."""
    tree = ast.parse((root / PACKAGE / "tokenizer.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tokenizer")
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    for node in ast.walk(cls):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))}


def find_private_tokenizer_use(root: Path) -> list[str]:
    """(g) ``x._name`` (x not self/cls) on a Tokenizer private name outside the tokenizer's
    own modules (TOKENIZER_MODULES)."""
    private = tokenizer_private_names(root)
    found = []
    for module in package_modules(root).values():
        if module.rel in TOKENIZER_MODULES:
            continue
        for node in ast.walk(module.tree):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{module.rel}:{node.lineno} {ast.unparse(node)}")
    return _by_place(found)


def _module_assignments(tree: ast.Module) -> dict[str, int]:
    """Names assigned at module level (also inside module-level if/try/with blocks)."""
    names: dict[str, int] = {}

    def targets(t: ast.expr):
        if isinstance(t, ast.Name):
            yield t
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                yield from targets(e)

    def visit(body):
        for node in body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in targets(t):
                        names.setdefault(n.id, node.lineno)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                for n in targets(node.target):
                    names.setdefault(n.id, node.lineno)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return names


def _local_names(func: ast.FunctionDef) -> set[str]:
    """Parameters and names bound anywhere in the function (Python makes them local)."""
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not func:
            names.add(node.name)
    return names


def _is_alias(value: ast.expr) -> bool:
    """``U32 = np.uint32``-style aliases of numba/numpy names (not values)."""
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name) and value.id in ("np", "numpy", "numba", "nb", "types")


def find_kernel_globals(root: Path) -> list[str]:
    """(h) Module-level values read by njit functions that are not in KERNEL_CONSTANTS.
    Names a kernel module imports from another module of the package count as that
    module's (``from .hashing import EMPTY`` is ``fastbpe_nb.kernels.hashing:EMPTY``)."""
    modules = package_modules(root)
    assigned = {name: _module_assignments(m.tree) for name, m in modules.items()}
    found = []
    for name, module in modules.items():
        if not module.in_kernels:
            continue
        # Where each module-level value this module can see was assigned.
        origin = {n: name for n in assigned[name]}
        aliases = {
            t.id for node in module.tree.body if isinstance(node, ast.Assign)
            and _is_alias(node.value) for t in node.targets if isinstance(t, ast.Name)
        }
        for node in module.tree.body:
            if isinstance(node, ast.ImportFrom):
                base = _resolve_base(module, node)
                for alias in node.names:
                    if alias.name in assigned.get(base, {}):
                        origin[alias.asname or alias.name] = base
        for func in kernel_functions(module):
            local = _local_names(func)
            seen = set()
            for node in ast.walk(func):
                if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                        and node.id in origin and node.id not in local and node.id not in aliases
                        and node.id not in seen):
                    seen.add(node.id)
                    key = f"{origin[node.id]}:{node.id}"
                    if key not in KERNEL_CONSTANTS:
                        found.append(f"{module.rel}:{node.lineno} {func.name} reads {key}")
    return _by_place(found)


def find_recursive_kernels(root: Path) -> list[str]:
    """(i) njit functions of a kernel module that reach themselves through calls to the
    module's own functions: Numba compiles recursion, but a process that loads such a
    function from its cache crashed (a segmentation fault, numba 0.68.1, the first
    gpt2 automaton's table builder)."""
    found = []
    for module in package_modules(root).values():
        if not module.in_kernels:
            continue
        funcs = {f.name: f for f in kernel_functions(module)}
        calls = {name: {n.func.id for n in ast.walk(f) if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Name) and n.func.id in funcs}
                 for name, f in funcs.items()}
        for name, f in funcs.items():
            seen, todo = set(), list(calls[name])
            while todo:
                callee = todo.pop()
                if callee not in seen:
                    seen.add(callee)
                    todo.extend(calls[callee])
            if name in seen:
                found.append(f"{module.rel}:{f.lineno} {name} calls itself")
    return _by_place(found)


# ---------------------------------------------------------------------------------------
# The rules on this repository
# ---------------------------------------------------------------------------------------


def _by_place(found: list[str]) -> list[str]:
    """Violations ``path:line ...`` sorted by path, then line number."""
    def key(line: str):
        path, _, rest = line.partition(":")
        number = rest.split(" ")[0]
        return (path, int(number) if number.isdigit() else 0, line)
    return sorted(found, key=key)


def _report(rule: str, found: list[str]) -> str:
    return f"{rule}: {len(found)} violation(s)\n  " + "\n  ".join(found)


def test_no_import_cycles():
    found = find_import_cycles(REPO)
    assert not found, _report("import cycles (function-level imports count)", found)


def test_kernels_import_only_numpy_numba_and_kernels():
    found = find_kernel_imports(REPO)
    assert not found, _report("kernel modules import only numpy/numba/math/typing/kernels", found)


def test_production_does_not_import_reference():
    found = find_reference_imports(REPO)
    assert not found, _report("reference.py (the specification) is for tests only", found)


def test_kernels_are_cached_nogil_and_lazy():
    found = find_bad_jit(REPO)
    assert not found, _report("kernels need @njit(cache=True, nogil=True), no signature", found)


def test_exceptions_live_in_errors_py():
    found = find_stray_exceptions(REPO)
    assert not found, _report("public exception classes belong in fastbpe_nb/errors.py", found)


def test_files_are_short():
    found = find_long_files(REPO)
    assert not found, _report("file length limits", found)


def test_tokenizer_privates_stay_in_tokenizer_modules():
    found = find_private_tokenizer_use(REPO)
    assert not found, _report(
        f"Tokenizer private names used outside {sorted(TOKENIZER_MODULES)}", found)


def test_kernels_are_not_recursive():
    found = find_recursive_kernels(REPO)
    assert not found, _report("recursive kernels (write them as loops)", found)


def test_kernels_read_no_tunable_globals():
    found = find_kernel_globals(REPO)
    assert not found, _report(
        "kernels read module globals not in KERNEL_CONSTANTS (pass tunables as arguments)",
        found)


# ---------------------------------------------------------------------------------------
# Each rule catches a violation (fake packages in a temporary directory)
# ---------------------------------------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path under fastbpe_nb/ -> source) and return the root."""
    files = {"__init__.py": "", "kernels/__init__.py": "",
             "tokenizer.py": "class Tokenizer:\n    pass\n", **files}
    for rel, source in files.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return tmp_path


def test_import_cycles_catches(tmp_path):
    root = _package(tmp_path, {
        "a.py": "from . import b\n",
        "b.py": "def f():\n    from .c import g\n",  # a function-level import
        "c.py": "import fastbpe_nb.a\n",
        "d.py": "from .a import x\n",  # into the cycle, not part of it
    })
    found = find_import_cycles(root)
    assert len(found) == 1, found
    assert "fastbpe_nb.a, fastbpe_nb.b, fastbpe_nb.c" in found[0]
    assert "fastbpe_nb.b (line 2) -> fastbpe_nb.c" in found[0]
    (root / PACKAGE / "c.py").write_text("import numpy\n")
    assert find_import_cycles(root) == []


def test_import_cycles_catch_package_init(tmp_path):
    # `from fastbpe_nb import train` needs __init__, which imports the module back.
    root = _package(tmp_path, {
        "__init__.py": "from .api import train\n",
        "api.py": "def train():\n    from . import core\n",
        "core.py": "def run():\n    from fastbpe_nb import train\n",
    })
    found = find_import_cycles(root)
    assert len(found) == 1 and "fastbpe_nb.core" in found[0], found


def test_kernel_imports_catches(tmp_path):
    root = _package(tmp_path, {
        "kernels/k.py": """\
            from __future__ import annotations
            import math
            import numpy as np
            from numba import njit
            from .hashing import h
            from . import other
            import os
            from ..errors import FastBPEError
            def f():
                import fastbpe_nb.tokenizer
        """,
    })
    found = find_kernel_imports(root)
    assert [f.split(" imports ")[1] for f in found] == [
        "os", "fastbpe_nb.errors", "fastbpe_nb.tokenizer"], found


def test_reference_imports_catches(tmp_path):
    root = _package(tmp_path, {
        "reference.py": "import numpy\n",
        "a.py": "def f():\n    from .reference import encode\n",
        "io/b.py": "from .. import reference\n",
        "c.py": "from .referenced import x\n",
    })
    found = find_reference_imports(root)
    assert found == ["fastbpe_nb/a.py:2 imports fastbpe_nb.reference",
                     "fastbpe_nb/io/b.py:1 imports fastbpe_nb.reference"], found


def test_bad_jit_catches(tmp_path):
    root = _package(tmp_path, {
        "kernels/k.py": """\
            import numba
            from numba import njit, jit as jj
            @njit(cache=True, nogil=True)
            def good(x):
                return x
            @njit
            def bare(x):
                return x
            @numba.njit(cache=True)
            def no_nogil(x):
                return x
            @jj(nogil=True, cache=True, parallel=False)
            def also_good(x):
                return x
            @njit("int64(int64)", cache=True, nogil=True)
            def eager(x):
                return x
            @njit(cache=False, nogil=True)
            def uncached(x):
                return x
            wrapped = njit(nogil=True)(good)
        """,
    })
    found = find_bad_jit(root)
    assert found == [
        "fastbpe_nb/kernels/k.py:6 bare: no arguments (needs cache=True, nogil=True)",
        "fastbpe_nb/kernels/k.py:9 no_nogil: no nogil=True",
        "fastbpe_nb/kernels/k.py:15 eager: an eager signature (positional argument)",
        "fastbpe_nb/kernels/k.py:18 uncached: no cache=True",
        "fastbpe_nb/kernels/k.py:21 call: no cache=True",
    ], found


def test_stray_exceptions_catches(tmp_path):
    root = _package(tmp_path, {
        "errors.py": "class FastBPEError(Exception):\n    pass\n",
        "a.py": """\
            from .errors import FastBPEError
            class Oops(FastBPEError): pass
            class Bad(ValueError): pass
            class Base(Exception): pass
            class Derived(Base): pass
            class _Private(Exception): pass
            class Plain: pass
            def f():
                class Inner(KeyError): pass
        """,
    })
    found = find_stray_exceptions(root)
    assert sorted(f.split()[2].split("(")[0] for f in found) == ["Bad", "Base", "Derived", "Inner", "Oops"], found


def test_long_files_catches(tmp_path):
    root = _package(tmp_path, {
        "long.py": "x = 1\n" * (MAX_LINES + 1),
        "ok.py": "x = 1\n" * MAX_LINES,
        "kernels/big.py": "x = 1\n" * (MAX_LINES * 2),
        "unicode_tables.py": "x = 1\n" * (MAX_LINES * 2),
        "tokenizer.py": "class Tokenizer:\n    pass\n" + "x = 1\n" * 349,
    })
    found = find_long_files(root)
    assert found == ["fastbpe_nb/long.py: 601 lines (limit 600)",
                     "fastbpe_nb/tokenizer.py: 351 lines (limit 350)"], found


def test_private_tokenizer_use_catches(tmp_path):
    root = _package(tmp_path, {
        "tokenizer.py": """\
            class Tokenizer:
                _cache = None
                def __init__(self):
                    self._ranks = {}
                    self.public = 1
                def _encode(self, text):
                    return self._ranks, tok._ranks
        """,
        "io/fmt.py": """\
            def save(tok, other):
                self_like = tok._ranks
                tok._encode("x")
                other._cache
                tok.public, tok._unrelated, tok.__init__
                class A:
                    def f(self):
                        return self._ranks, cls._encode
        """,
    })
    assert tokenizer_private_names(root) == {"_cache", "_ranks", "_encode"}
    found = find_private_tokenizer_use(root)
    assert found == ["fastbpe_nb/io/fmt.py:2 tok._ranks",
                     "fastbpe_nb/io/fmt.py:3 tok._encode",
                     "fastbpe_nb/io/fmt.py:4 other._cache"], found


def test_kernel_globals_catches(tmp_path):
    root = _package(tmp_path, {
        "kernels/tun.py": "BLOCK = 64\n",
        "tables.py": "BIT = 1\nLAYOUT = 2\n",
        "kernels/scan.py": """\
            import numpy as np
            from numba import njit
            from .tun import BLOCK
            from fastbpe_nb.tables import BIT
            CH_END = 1 << 20
            WINDOW_BYTES = 1 << 15
            U32 = np.uint32
            if True:
                HIDDEN = 3
            @njit(cache=True, nogil=True)
            def helper(x):
                return x
            @njit(cache=True, nogil=True)
            def kernel(data, window=0):
                shadow = 1
                WINDOW = shadow
                a = np.empty(WINDOW_BYTES, dtype=U32)
                b = helper(CH_END) + BLOCK + HIDDEN + BIT
                return a, b, WINDOW_BYTES
            def python_side():
                return WINDOW_BYTES
        """,
    })
    found = find_kernel_globals(root)
    assert found == [
        "fastbpe_nb/kernels/scan.py:17 kernel reads fastbpe_nb.kernels.scan:WINDOW_BYTES",
        "fastbpe_nb/kernels/scan.py:18 kernel reads fastbpe_nb.kernels.scan:HIDDEN",
        "fastbpe_nb/kernels/scan.py:18 kernel reads fastbpe_nb.kernels.tun:BLOCK",
        "fastbpe_nb/kernels/scan.py:18 kernel reads fastbpe_nb.tables:BIT",
    ], found
    # CH_END, the helper function, the alias U32, locals and the Python function are fine.


def test_recursive_kernels_catches(tmp_path):
    root = _package(tmp_path, {"kernels/k.py": """
        from numba import njit

        @njit(cache=True, nogil=True)
        def step(s):
            return helper(s) if s > 0 else 0

        @njit(cache=True, nogil=True)
        def helper(s):
            return step(s - 1)

        @njit(cache=True, nogil=True)
        def loop(s):
            return helper2(s)

        @njit(cache=True, nogil=True)
        def helper2(s):
            return s
        """})
    found = find_recursive_kernels(root)
    assert [line.split(" ", 1)[1] for line in found] == ["step calls itself",
                                                          "helper calls itself"], found
