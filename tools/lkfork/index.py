"""index: a PEP 503 simple index of dist/, so pip can pick the fork with --extra-index-url."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from .config import normalize
from .errors import ForkError
from .fetch import sha256_of

_DIST = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-\d[^-]*(-py\d.*\.whl|\.tar\.gz)$")


def run(dist: Path) -> Path:
    files = sorted(p for p in dist.glob("*") if p.is_file() and _DIST.match(p.name)) if dist.is_dir() else []
    if not files:
        raise ForkError(f"{dist}: no wheels or sdists to index; run 'lkfork build' first")
    root = dist / "simple"
    if root.exists():
        shutil.rmtree(root)
    projects: dict[str, list[Path]] = {}
    for f in files:
        m = _DIST.match(f.name)
        assert m is not None
        projects.setdefault(normalize(m.group("name")), []).append(f)
    for name, members in projects.items():
        page = root / name
        page.mkdir(parents=True)
        links = "".join(
            f'<a href="../../{html.escape(f.name)}#sha256={sha256_of(f)}">{html.escape(f.name)}</a><br/>\n'
            for f in members
        )
        (page / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    links = "".join(f'<a href="{n}/">{n}</a><br/>\n' for n in sorted(projects))
    (root / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    print(
        f"{root}: {len(files)} files in {len(projects)} projects; use --extra-index-url {root.resolve().as_uri()}"
    )
    return root
