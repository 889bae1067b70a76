"""Build a ~10 GB training corpus of real text and seeded, transformed copies of it.

    python benchmarks/build_big_corpus.py --out /work/wt/data/big10g --gb 10 --file-gb 1
    python benchmarks/build_big_corpus.py --out /work/wt/data/big10g --describe
    python benchmarks/build_big_corpus.py --out /work/wt/data/big10g --count-unique

The *base* is every UTF-8 text file of Debian's Linux sources (``linux-source-6.1``, read
from its ``.tar.xz`` in archive order, as ``bench_data.corpus_path`` does), the Python
documentation (``python3.11-doc``: the reStructuredText sources and the HTML pages) and the
man pages of every installed language (``manpages-*``, ``bench_data.man_pages``). The
prose documents are spread evenly through the Linux files (by bytes), so any prefix of the
corpus holds both. Documents longer than 1 MB are cut at line ends.

Pass 0 writes the base as it is. Pass ``k >= 1`` writes it again, transformed by
transforms seeded by ``(seed, k)``, so that each pass adds words never seen before while
keeping the text's shape (the word-length and frequency distributions, the code/prose mix):

* letter substitution: 8 of the 26 ASCII letters, cycled (upper case alike), then, per
  block of about 4 KB (cut after a newline), one of 64 variants that each swap 3 more
  pairs of letters: a word thus comes back in up to 64 spellings per pass (the more
  often it occurs, the more of them), while words without the variants' letters stay
  shared, as a growing real corpus keeps its common words and adds rare ones;
* digit substitution: the ten digits, cycled in a seeded order;
* identifier mangling: a seeded two-letter tag before every ``_`` (``foo_bar`` ->
  ``fooqk_bar``);
* case changes: one document in ten upper-cased, one lower-cased, one swap-cased, one
  title-cased (chosen per document by a CRC of ``(seed, k, index)``; ASCII letters only);
* non-ASCII substitution: 6 accented Latin, 8 Cyrillic (upper case alike), 4 Greek and 12
  common CJK/kana characters, cycled.

Every transform maps ASCII to ASCII and characters to characters, so the output is valid
UTF-8. The output is ``part-000.txt``, ``part-001.txt`` ... of ``--file-gb`` each (the
*k*-th file ends before the stream passes ``k * file-gb``; documents are never split across
files), written atomically, with ``manifest.json`` recording where each file starts in the
stream. A rerun skips the files already complete (size as recorded) and resumes from there;
the output is the same bytes whatever the interruptions. Memory stays bounded: the prose
documents (about 210 MB) are held, the Linux files are streamed one by one.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # this checkout's fastbpe_nb, not an installed one
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_data import CACHE, MAN_ROOT, _linux_texts, linux_tarball, man_pages  # noqa: E402
from fastbpe_nb.io.atomic import atomic_write  # noqa: E402

FORMAT = 2
MAX_DOC = 1 << 20
BLOCK = 4096  # bytes (then to the next newline) that share one letter variant
VARIANTS = 64
VARIANT_SWAPS = 3
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
LATIN = "àáâãäåæçèéêëìíîïñòóôõöøùúûüýßÀÉÈÇÑÖÜ"
CYRILLIC = "абвгдежзийклмнопрстуфхцчшщъыьэюя"
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
CJK = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家"
       "学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经"
       "のにはをたがでてとしれさなあいうかくけこすせそまみむめもやよらりるろわん"
       "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン")


# ---------------------------------------------------------------------------------------
# The base: documents of the three sources, in a fixed order.

def prose_documents() -> list[tuple[str, bytes]]:
    """``(source, bytes)`` of every Python-doc file and man page, in a fixed order."""
    out = []
    for suffix in (".rst.txt", ".html"):
        for name in sorted(glob.glob(str(PYTHON_DOCS / "**" / f"*{suffix}"), recursive=True)):
            data = Path(name).read_bytes()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(("python-docs", data))
    languages = sorted(d.name for d in MAN_ROOT.iterdir() if d.is_dir() and not
                       d.name.startswith("man")) if MAN_ROOT.is_dir() else []
    for lang in ["", *languages]:  # "" is English (/usr/share/man/man*/)
        out.extend((f"man-{lang or 'en'}", page) for page in man_pages(lang))
    return out


def linux_documents():
    """The Linux source text files (or, without the tarball, the Python stdlib sources)."""
    tarball = linux_tarball()
    if tarball:
        yield from _linux_texts(tarball)
        return
    from fastbpe_nb.corpus import stdlib_texts

    for text in stdlib_texts(10**12):
        yield text.encode("utf-8")


def pieces(data: bytes):
    """``data`` newline-terminated, cut at line ends into pieces of at most MAX_DOC bytes."""
    if not data.endswith(b"\n"):
        data += b"\n"
    start = 0
    while len(data) - start > MAX_DOC:
        cut = data.rfind(b"\n", start, start + MAX_DOC) + 1
        if cut <= start:  # one line longer than MAX_DOC: cut it at a character start
            cut = start + MAX_DOC
            while data[cut] & 0xC0 == 0x80:
                cut -= 1
        yield data[start:cut]
        start = cut
    yield data[start:]


def measure_linux() -> dict:
    """Bytes and pieces of the Linux part of the base (one pass over the tarball)."""
    n_bytes = n_docs = 0
    for data in linux_documents():
        for piece in pieces(data):
            n_bytes += len(piece)
            n_docs += 1
    return {"linux_bytes": n_bytes, "linux_docs": n_docs, "tarball": linux_tarball()}


def base_stream(linux_bytes: int, prose: list[tuple[str, bytes]]):
    """The base documents: Linux pieces with the prose spread among them by bytes."""
    prose_total = sum(len(d) for _, d in prose) or 1
    done_linux = done_prose = 0
    i = 0
    for data in linux_documents():
        for piece in pieces(data):
            # Prose goes first while its share lags behind the Linux share.
            while i < len(prose) and done_prose * linux_bytes <= done_linux * prose_total:
                for p in pieces(prose[i][1]):
                    yield p
                done_prose += len(prose[i][1])
                i += 1
            yield piece
            done_linux += len(piece)
    for _, data in prose[i:]:
        yield from pieces(data)


# ---------------------------------------------------------------------------------------
# The transforms of pass k.

def _swaps(rng: random.Random) -> bytes:
    """A translation table swapping VARIANT_SWAPS seeded pairs of ASCII letters (both cases)."""
    letters = rng.sample("abcdefghijklmnopqrstuvwxyz", 2 * VARIANT_SWAPS)
    pairs = {a: b for a, b in zip(letters[::2], letters[1::2])}
    pairs.update({b: a for a, b in list(pairs.items())})
    pairs.update({a.upper(): b.upper() for a, b in list(pairs.items())})
    return bytes.maketrans(bytes(map(ord, pairs)), bytes(map(ord, pairs.values())))


def _cycle(rng: random.Random, alphabet: str, n: int) -> dict[str, str]:
    """``n`` characters of ``alphabet``, each mapped to the next of them (a seeded cycle)."""
    chosen = rng.sample(alphabet, n)
    return {a: b for a, b in zip(chosen, chosen[1:] + chosen[:1])}


class Transform:
    """The seeded transforms of pass ``k`` (``k == 0``: the identity)."""

    def __init__(self, seed: int, k: int):
        self.seed, self.k = seed, k
        if k == 0:
            return
        rng = random.Random(f"build_big_corpus:{seed}:{k}")
        letters = _cycle(rng, "abcdefghijklmnopqrstuvwxyz", 8)
        letters.update({a.upper(): b.upper() for a, b in letters.items()})
        digits = _cycle(rng, "0123456789", 10)
        ascii_map = {**letters, **digits}
        self.ascii_table = bytes.maketrans(bytes(map(ord, ascii_map)),
                                           bytes(map(ord, ascii_map.values())))
        self.variants = [bytes(swap[c] for c in self.ascii_table)
                         for swap in (_swaps(random.Random(f"build_big_corpus:{seed}:{k}:{v}"))
                                      for v in range(VARIANTS))]
        self.tag = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2))
        self.underscore = (self.tag + "_").encode()
        cyr = _cycle(rng, CYRILLIC, 8)
        cyr.update({a.upper(): b.upper() for a, b in cyr.items()})
        chars = {**_cycle(rng, LATIN, 6), **cyr, **_cycle(rng, GREEK, 4), **_cycle(rng, CJK, 12)}
        self.char_table = str.maketrans(chars)

    def describe(self) -> str:
        if self.k == 0:
            return "pass 0: the base as it is"
        swapped = bytes(range(256)).translate(self.ascii_table)
        letters = "".join(chr(c) for c in range(ord("a"), ord("z") + 1) if swapped[c] != c)
        return (f"pass {self.k}: letters {letters} -> "
                f"{letters.encode().translate(self.ascii_table).decode()}, digits 0123456789 -> "
                f"{b'0123456789'.translate(self.ascii_table).decode()}, '_' -> "
                f"{self.underscore.decode()!r}, {len(self.char_table)} non-ASCII characters; "
                f"{VARIANTS} variants of {VARIANT_SWAPS} more letter swaps, per ~{BLOCK} B block")

    def __call__(self, index: int, data: bytes) -> bytes:
        if self.k == 0:
            return data
        case = zlib.crc32(f"{self.seed}:{self.k}:{index}".encode()) % 10
        if case == 6:
            data = data.upper()  # bytes methods change ASCII letters only: UTF-8 stays valid
        elif case == 7:
            data = data.lower()
        elif case == 8:
            data = data.swapcase()
        elif case == 9:
            data = data.title()
        blocks, start, b = [], 0, 0
        while start < len(data):
            end = data.find(b"\n", start + BLOCK)
            end = len(data) if end < 0 else end + 1
            v = zlib.crc32(f"{self.seed}:{self.k}:{index}:{b}".encode()) % VARIANTS
            blocks.append(data[start:end].translate(self.variants[v]))
            start, b = end, b + 1
        data = b"".join(blocks).replace(b"_", self.underscore)
        if not data.isascii():
            data = data.decode("utf-8").translate(self.char_table).encode("utf-8")
        return data


def stream(base, seed: int, start: tuple[int, int]):
    """``(pass, index, bytes)`` of the corpus from position ``start`` on, pass after pass."""
    k, j = start
    while True:
        transform = Transform(seed, k)
        for index, data in enumerate(base()):
            if index >= j:  # documents before the resume point are skipped untransformed
                yield k, index, transform(index, data)
        k, j = k + 1, 0


# ---------------------------------------------------------------------------------------
# Files, manifest, resume.

def part_name(i: int) -> str:
    return f"part-{i:03d}.txt"


def load_manifest(out: Path, params: dict) -> dict:
    """The manifest of ``out`` (checked against ``params``), or a new one."""
    path = out / "manifest.json"
    if path.exists():
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("params") != params:
            raise SystemExit(f"{path} was built with {manifest.get('params')}, not {params}: "
                             "use another --out, or delete the folder to rebuild")
        return manifest
    return {"format": FORMAT, "params": params, "files": []}


def save_manifest(out: Path, manifest: dict) -> None:
    with atomic_write(out / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")


def complete_files(out: Path, manifest: dict) -> list[dict]:
    """The manifest's files that are on disk with their recorded size, up to the first that is not."""
    done = []
    for entry in manifest["files"]:
        path = out / entry["name"]
        if not path.exists() or path.stat().st_size != entry["bytes"]:
            break
        done.append(entry)
    return done


def build(out: Path, total_bytes: int, file_bytes: int, seed: int, log=print) -> dict:
    """Write the corpus into ``out`` (resuming), return the manifest."""
    if file_bytes < 2 * MAX_DOC:
        raise SystemExit(f"--file-gb must give files of at least {2 * MAX_DOC} bytes")
    out.mkdir(parents=True, exist_ok=True)
    params = {"seed": seed, "total_bytes": total_bytes, "file_bytes": file_bytes,
              "max_doc": MAX_DOC, "format": FORMAT, "block": BLOCK, "variants": VARIANTS,
              "variant_swaps": VARIANT_SWAPS}
    manifest = load_manifest(out, params)
    n_files = -(-total_bytes // file_bytes)
    manifest["files"] = complete_files(out, manifest)
    if len(manifest["files"]) == n_files:
        log(f"{out}: all {n_files} files complete")
        return manifest
    t0 = time.perf_counter()
    if "base" not in manifest:
        log("measuring the Linux sources (one pass over the tarball) ...")
        prose = prose_documents()
        sources: dict[str, list[int]] = {}
        for name, data in prose:
            entry = sources.setdefault(name, [0, 0])
            entry[0] += 1
            entry[1] += len(data)
        manifest["base"] = {**measure_linux(), "prose": sources}
        save_manifest(out, manifest)
    else:
        prose = prose_documents()
    base = manifest["base"]
    base_fn = lambda: base_stream(base["linux_bytes"], prose)  # noqa: E731
    i = len(manifest["files"])
    written = sum(e["bytes"] for e in manifest["files"])
    start = tuple(manifest["files"][-1]["end"]) if manifest["files"] else (0, 0)
    log(f"{out}: {i} of {n_files} files complete; resuming at pass {start[0]}, document {start[1]}")
    docs = stream(base_fn, seed, start)
    pending = next(docs)
    while i < n_files:
        limit = min(total_bytes, (i + 1) * file_bytes)  # the stream offset this file stays under
        name, size, count, first = part_name(i), 0, 0, pending[:2]
        t1 = time.perf_counter()
        with atomic_write(out / name, "wb") as f:
            while written + size + len(pending[2]) <= limit:
                f.write(pending[2])
                size += len(pending[2])
                count += 1
                pending = next(docs)
        written += size
        manifest["files"].append({"name": name, "bytes": size, "docs": count,
                                  "start": list(first), "end": list(pending[:2])})
        save_manifest(out, manifest)
        log(f"  {name}: {size / 1e9:.3f} GB, {count:,} documents, passes {first[0]}-"
            f"{pending[0]} ({time.perf_counter() - t1:.0f} s)")
        i += 1
    manifest["seconds_build_last_run"] = round(time.perf_counter() - t0, 1)
    manifest["passes"] = [Transform(seed, k).describe() for k in range(pending[0] + 1)]
    save_manifest(out, manifest)
    return manifest


def count_unique(out: Path, manifest: dict, log=print) -> dict:
    """Count the corpus's gpt2 pre-tokens (``fastbpe_nb.count_files``) into the manifest."""
    import resource

    from fastbpe_nb.training import count_files

    t0 = time.perf_counter()
    counter, _stats = count_files([out / e["name"] for e in manifest["files"]], pattern="gpt2")
    manifest["unique_words_gpt2"] = counter.n_unique
    manifest["pre_tokens_gpt2"] = counter.n_pieces
    manifest["seconds_count"] = round(time.perf_counter() - t0, 1)
    manifest["count_peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    save_manifest(out, manifest)
    log(f"counted in {manifest['seconds_count']:.0f} s")
    return manifest


def describe(manifest: dict) -> str:
    """A few lines for the README / a report."""
    base = manifest.get("base", {})
    files = manifest["files"]
    total = sum(e["bytes"] for e in files)
    prose = ", ".join(f"{k} {v[1] / 1e6:.1f} MB" for k, v in sorted(base.get("prose", {}).items()))
    lines = [f"{total / 1e9:.2f} GB in {len(files)} files ({total:,} bytes, "
             f"{sum(e['docs'] for e in files):,} documents of at most {MAX_DOC:,} bytes)",
             f"base: Linux {base.get('linux_bytes', 0) / 1e9:.3f} GB in "
             f"{base.get('linux_docs', 0):,} pieces ({base.get('tarball')}); {prose}"]
    lines += manifest.get("passes", [])
    if "unique_words_gpt2" in manifest:
        lines.append(f"gpt2 pre-tokens: {manifest['pre_tokens_gpt2']:,}, unique: "
                     f"{manifest['unique_words_gpt2']:,} (counted in {manifest['seconds_count']} s, "
                     f"peak RSS {manifest['count_peak_rss_mib']} MiB)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--out", type=Path, default=CACHE / "big",
                   help="output folder (default: $FASTBPE_BENCH_CACHE/big)")
    p.add_argument("--gb", type=float, default=10, help="total size, in 10^9 bytes")
    p.add_argument("--file-gb", type=float, default=1, help="size of each file, in 10^9 bytes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--describe", action="store_true", help="print the description and stop")
    p.add_argument("--count-unique", action="store_true",
                   help="after building, count the unique gpt2 pre-tokens (minutes at 10 GB)")
    args = p.parse_args(argv)
    if args.describe:
        print(describe(json.loads((args.out / "manifest.json").read_text(encoding="utf-8"))))
        return 0
    manifest = build(args.out, int(args.gb * 1e9), int(args.file_gb * 1e9), args.seed)
    if args.count_unique:
        manifest = count_unique(args.out, manifest)
    print(describe(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
