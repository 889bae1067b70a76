"""Make asv's HTML report work offline: vendor the JavaScript/CSS it loads from CDNs.

``asv publish`` writes pages that load jQuery, flot, bootstrap, ... from public CDNs, which a
machine without general internet access cannot reach (the report then shows "Can not
determine continental origin of swallow"). This script fetches the same libraries from the
npm registry (``npm pack``, cached under .asv/vendor), copies them into .asv/html/vendor/
and rewrites the URLs. Run after every ``asv publish`` (``make bench`` does).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / ".asv" / "html"
CACHE = ROOT / ".asv" / "vendor"

# CDN URL pattern -> (npm package spec, file inside the package). stupidtable 1.0.1 is not on
# npm; 1.1.3 has the same API.
SOURCES = {
    r"https://code\.jquery\.com/jquery-[0-9.]+\.min\.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/flot/[0-9.]+/jquery\.flot\.min\.js":
        ("flot@0.8.3", "jquery.flot.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/flot/[0-9.]+/jquery\.flot\.time\.min\.js":
        ("flot@0.8.3", "jquery.flot.time.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/flot/[0-9.]+/jquery\.flot\.selection\.min\.js":
        ("flot@0.8.3", "jquery.flot.selection.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/flot/[0-9.]+/jquery\.flot\.categories\.min\.js":
        ("flot@0.8.3", "jquery.flot.categories.js"),
    r"https://cdn\.jsdelivr\.net/npm/flot-orderbars@[0-9.]+/js/jquery\.flot\.orderBars\.js":
        ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/stupidtable/[0-9.]+/stupidtable\.min\.js":
        ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    r"https://cdnjs\.cloudflare\.com/ajax/libs/blueimp-md5/[0-9.]+/js/md5\.min\.js":
        ("blueimp-md5@2.19.0", "js/md5.min.js"),
    r"https://cdn\.jsdelivr\.net/npm/bootstrap@[0-9.]+/dist/js/bootstrap\.min\.js":
        ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    r"https://cdn\.jsdelivr\.net/npm/bootstrap@[0-9.]+/dist/css/bootstrap\.min\.css":
        ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
}


def fetch(spec: str, member: str) -> bytes:
    CACHE.mkdir(parents=True, exist_ok=True)
    name = spec.replace("@", "-").lstrip("-") + ".tgz"
    tgz = CACHE / name
    if not tgz.exists():
        out = subprocess.run(["npm", "pack", spec, "--silent"], cwd=CACHE, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        (CACHE / out).rename(tgz)
    with tarfile.open(tgz) as tar:
        return tar.extractfile("package/" + member).read()


def main() -> int:
    pages = sorted(HTML.glob("*.html"))
    if not pages:
        print(f"no HTML under {HTML}: run asv publish first", file=sys.stderr)
        return 1
    vendor = HTML / "vendor"
    vendor.mkdir(exist_ok=True)
    done = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for pattern, (spec, member) in SOURCES.items():
            for url in set(re.findall(pattern, text)):
                local = f"vendor/{spec.split('@')[0]}-{Path(member).name}"
                if local not in done:
                    (HTML / local).write_bytes(fetch(spec, member))
                    done[local] = url
                text = text.replace(url, local)
        # The CDN tags carry subresource-integrity hashes of the minified CDN builds; the
        # vendored copies are served locally (some unminified), so the hashes go.
        text = re.sub(r'(<(?:script|link)[^>]*?(?:src|href)="vendor/[^"]*")\s+integrity="[^"]*"',
                      r"\1", text)
        page.write_text(text, encoding="utf-8")
    left = sorted({u for p in pages for u in re.findall(r'(?:src|href)="(https://[^"]+\.(?:js|css))"',
                                                          p.read_text(encoding="utf-8"))})
    print(f"vendored {len(done)} files into {vendor}" + (f"; still remote: {left}" if left else ""))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
