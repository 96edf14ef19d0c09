"""export: write a work tree's commits back to patches/ and series, deterministically."""

from __future__ import annotations

import tempfile
from pathlib import Path

from . import gitutil, patches
from .config import Package
from .errors import ForkError
from .source import BASE_TAG

# --zero-commit and --no-signature drop the two things that change between runs (commit ids
# and git's version); the rest of format-patch output depends only on the commits.
_FORMAT = ("format-patch", "-q", "-N", "--zero-commit", "--no-signature", "--stat=80", "--no-renames")


def render(repo: Path) -> dict[str, bytes]:
    """The patch files the work tree's commits since the upstream base export to."""
    if gitutil.git(repo, "rev-parse", "-q", "--verify", f"refs/tags/{BASE_TAG}", check=False).returncode:
        raise ForkError(f"{repo}: no '{BASE_TAG}' tag; not a tree made by 'lkfork prepare'")
    with tempfile.TemporaryDirectory() as tmp:
        gitutil.git(repo, *_FORMAT, "-o", tmp, f"{BASE_TAG}..HEAD")
        return {p.name: p.read_bytes() for p in sorted(Path(tmp).glob("*.patch"))}


def work_dir(pkg: Package) -> Path:
    return pkg.root / "build" / "work" / pkg.distribution


def write(pkg: Package, rendered: dict[str, bytes]) -> list[str]:
    """Make patches/ hold exactly ``rendered``; returns the names that changed."""
    changed = []
    for old in pkg.patches_dir.glob("*.patch"):
        if old.name not in rendered:
            old.unlink()
            changed.append(old.name)
    for name, data in rendered.items():
        target = pkg.patches_dir / name
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
            changed.append(name)
    series = patches.series_header(pkg) + "".join(f"{n}\n" for n in rendered)
    if pkg.series_file.read_text() != series:
        pkg.series_file.write_text(series)
        changed.append("series")
    return changed


def run(pkgs: list[Package]) -> None:
    for pkg in pkgs:
        repo = work_dir(pkg)
        if not (repo / ".git").is_dir():
            raise ForkError(f"{repo}: no work tree; run 'lkfork prepare {pkg.distribution}' first")
        if gitutil.is_dirty(repo):
            raise ForkError(f"{repo}: uncommitted changes; commit them (one commit per fix) before export")
        rendered = render(repo)
        problems = [
            p for name, data in rendered.items() for p in patches.problems(pkg, _parse_bytes(name, data))
        ]
        if problems:
            raise ForkError("not exported, fix the commit messages first:\n  " + "\n  ".join(problems))
        changed = write(pkg, rendered)
        print(
            f"{pkg.distribution}: {len(rendered)} patches"
            + (f", changed: {', '.join(changed)}" if changed else ", unchanged")
        )


def _parse_bytes(name: str, data: bytes) -> patches.Patch:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / name
        p.write_bytes(data)
        return patches.parse(p)
