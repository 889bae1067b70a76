"""Which output each ``encode_parquet`` input gets, refusing collisions before any work.

One output per input file, at the input's path relative to the common parent of the
inputs (a folder given is its own root, a glob's root is its folder before the first
wildcard, a file's root is its folder), with the extension replaced:
``encode(["dup/a/train.parquet", "dup/b/train.parquet"], "out")`` writes
``out/a/train.parquet`` and ``out/b/train.parquet``. Two inputs that would still map to one
output (``x.parquet`` and ``x.arrow``, or a file given twice) are refused before anything
is encoded, naming both; so is an output folder that is, or is inside, an input folder,
and any output path that is an input path. Inside a folder or a glob, files that are not
Parquet/Arrow by their name are not read (listed in the report as ``ignored_files``).
"""

from __future__ import annotations

import dataclasses
import os

from ..errors import CorpusReadError, EncodeOptionsError
from .encode_inputs import TABLE_KINDS, TABLE_SUFFIXES
from .input_files import expand_paths, file_kind

_MAGIC = "*?["


@dataclasses.dataclass
class _Spec:
    spec: str  # the argument as given
    kind: str  # "folder", "glob" or "file"
    root: str  # absolute folder the relative output paths start from


@dataclasses.dataclass
class Job:
    path: str  # the input file
    spec: str  # the argument that named it
    outs: list  # parquet: [x.parquet]; bin: [x.bin, x.idx.npy, x.bin.json]; else [x.<fmt>.json]


def _spec_list(inputs) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return [os.fspath(p) for p in inputs]


def _glob_root(pattern: str) -> str:
    """The folder of ``pattern`` before its first component holding a wildcard."""
    parts = os.path.abspath(pattern).split(os.sep)
    keep = []
    for part in parts[:-1]:
        if any(ch in part for ch in _MAGIC):
            break
        keep.append(part)
    return os.sep.join(keep) or os.sep


def _out_names(base: str, fmt: str) -> list[str]:
    if fmt == "parquet":
        return [base + ".parquet"]
    if fmt == "bin":
        return [base + ".bin", base + ".idx.npy", base + ".bin.json"]
    return [base + f".{fmt}.json"]  # a training-stack format's marker (see token_formats)


def plan_jobs(inputs, output, fmt):
    """``(jobs, ignored, specs)``: the input files, their outputs, the files not read."""
    specs, found, ignored = [], [], []
    for spec in _spec_list(inputs):
        if os.path.isdir(spec):
            kind, root = "folder", os.path.abspath(spec)
        elif any(ch in spec for ch in _MAGIC):
            kind, root = "glob", _glob_root(spec)
        else:
            kind, root = "file", os.path.dirname(os.path.abspath(spec))
        specs.append(_Spec(spec, kind, root))
        for path in expand_paths([spec]):
            if file_kind(path) not in TABLE_KINDS:
                if kind == "file":
                    raise CorpusReadError(f"{path}: not a Parquet or Arrow file (encode reads "
                                          f"tables: files ending in {', '.join(TABLE_SUFFIXES)})")
                ignored.append(path)
                continue
            found.append((path, spec))
    if not specs:
        raise CorpusReadError("no input given (give Parquet/Arrow files, folders or globs)")
    if not found:
        extra = f"; {len(ignored)} other file(s) ignored" if ignored else ""
        raise CorpusReadError(f"no Parquet or Arrow input found in {', '.join(s.spec for s in specs)} "
                              f"(looked for files ending in {', '.join(TABLE_SUFFIXES)}{extra})")
    roots = [s.root for s in specs] + [os.path.dirname(os.path.abspath(p)) for p, _ in found]
    common = os.path.commonpath(roots)
    jobs, taken, reals = [], {}, {}
    for path, spec in found:
        real = os.path.realpath(path)
        if real in reals and reals[real] != path:
            raise EncodeOptionsError(f"{reals[real]} and {path} are the same file (a link): its "
                                     "rows would be encoded twice; name it once")
        reals.setdefault(real, path)
        rel = os.path.relpath(os.path.abspath(path), common)
        base = os.path.splitext(rel)[0]
        outs = [] if output is None else _out_names(os.path.join(os.fspath(output), base), fmt)
        job = Job(path, spec, outs)
        for out in outs:
            key = os.path.normcase(os.path.abspath(out))
            if key in taken:
                other = taken[key]
                if os.path.realpath(other.path) == os.path.realpath(path):
                    why = f"{path} is given twice (by {other.spec!r} and by {spec!r})"
                else:
                    why = f"{other.path} and {path} would both be encoded to {out}"
                raise EncodeOptionsError(f"{why}: no row may be lost, so nothing was encoded; "
                                         "rename one input or encode them into separate folders")
            taken[key] = job
        jobs.append(job)
    return jobs, ignored, specs


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_not_over_inputs(jobs, specs, output) -> None:
    """Refuse an output folder in an input folder, and any output that is an input."""
    out_real = os.path.realpath(output)
    for s in specs:
        if s.kind == "folder" or (s.kind == "glob" and "**" in s.spec):
            root = os.path.realpath(s.root)
            if _inside(out_real, root):
                where = "is" if out_real == root else "is inside"
                raise EncodeOptionsError(
                    f"the output folder {output} {where} the input folder {s.root} (of "
                    f"{s.spec!r}): outputs would replace inputs or be read as inputs; choose an "
                    "output folder outside the inputs")
        elif s.kind == "file" and _inside(out_real, os.path.realpath(s.spec)):
            raise EncodeOptionsError(f"the output folder {output} is the input file {s.spec}")
    # (A glob without ``**`` cannot list the outputs: they lie deeper than its inputs.)
    inputs = {os.path.realpath(j.path): j.path for j in jobs}
    for job in jobs:
        for out in job.outs:
            real = os.path.realpath(out)
            if real in inputs:
                raise EncodeOptionsError(f"the output {out} would replace the input "
                                         f"{inputs[real]}; choose another output folder")


def keep_list(keep_columns, column, fmt) -> list[str]:
    keep = [keep_columns] if isinstance(keep_columns, str) else list(keep_columns or ())
    if keep and fmt != "parquet":
        raise EncodeOptionsError(f"keep_columns {keep} cannot be carried into format={fmt!r} (a "
                                 "flat id array); use format='parquet' or drop keep_columns")
    seen = set()
    for c in keep:
        if c == "ids":
            raise EncodeOptionsError("keep_columns: the input column 'ids' cannot be kept: the "
                                     "output column of the token ids is named 'ids' (rename the "
                                     "input column first)")
        if c in seen:
            raise EncodeOptionsError(f"keep_columns names the column {c!r} twice")
        seen.add(c)
    return keep
