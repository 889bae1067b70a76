"""The documentation holds together: short README, links that resolve, no outside design doc.

README.md is the front page (at most 150 lines); docs/ holds the rest. Every relative link
in them must name a file of the repository and, with ``#anchor``, a heading of that file
(GitHub's heading slugs), so that no reference dangles after a file or a heading moves.
The team's founding design sketch is not part of the repository, so nothing may cite it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M)}


def links(path: Path):
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    for m in LINK.finditer(text):
        target = m.group(1)
        if not re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not checked
            yield target


def test_slug_matches_github():
    assert slug("Peers on one vocabulary (`make compare`)") == "peers-on-one-vocabulary-make-compare"
    assert slug("1. Three machines") == "1-three-machines"
    assert slug("Hugging Face tokenizer.json") == "hugging-face-tokenizerjson"


def test_readme_fits_a_few_screens():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= 150, f"README.md has {n} lines; move detail into docs/"


def test_docs_exist():
    names = {p.name for p in DOCS}
    assert {"architecture.md", "semantics.md", "formats.md", "performance.md",
            "reliability.md", "cli.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    bad = []
    for target in links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not bad, f"{page.name}: " + "; ".join(bad)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith(("#", "set ", "cd "))]
    assert command == ["make test"]
    assert re.search(r"^make test +#", readme, re.M)


# tokenizer.py is being rewritten in the same change; drop this exclusion once it is merged.
_NOT_YET: set = set()  # files still allowed to cite it (none)


def test_nothing_cites_the_outside_design_document():
    files = [*PAGES, ROOT / "Makefile"]
    for folder in ("fastbpe_nb", "benchmarks", "tests", "tools", "notebooks"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".ipynb")]
    word = "DESIGN" + ".md"  # spelled apart so that this file does not cite it either
    hits = [str(p.relative_to(ROOT)) for p in files
            if str(p.relative_to(ROOT)) not in _NOT_YET
            and word in p.read_text(encoding="utf-8", errors="replace")]
    assert not hits, f"{word} is not in the repository; cite docs/ instead: {hits}"


def test_cli_doc_is_current():
    """docs/cli.md's reference section is the CLI's own --help texts
    (tools/gen_cli_doc.py): an option added without regenerating it fails here."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_cli_doc.py"), "--check"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, ("docs/cli.md is out of date: run python tools/gen_cli_doc.py\n"
                                 + out.stdout[-2000:] + out.stderr[-2000:])
