"""prepare: a git work tree of the pinned upstream with each patch as one commit, for editing."""

from __future__ import annotations

import shutil
from pathlib import Path

from . import gitutil
from .config import Package
from .errors import ForkError
from .export import render, work_dir
from .source import apply_series, new_tree


def check_discardable(pkg: Package, repo: Path) -> None:
    """Refuse to throw away uncommitted or unexported work in a work tree."""
    if not (repo / ".git").is_dir():
        return
    if gitutil.is_dirty(repo):
        raise ForkError(
            f"{repo}: uncommitted changes; commit and export them, or pass --force to discard them"
        )
    on_disk = {p.name: p.read_bytes() for p in pkg.patches_dir.glob("*.patch")}
    if render(repo) != on_disk:
        raise ForkError(
            f"{repo}: has commits that are not exported; run 'lkfork export', or pass --force to discard them"
        )


def run(pkgs: list[Package], *, force: bool = False) -> None:
    for pkg in pkgs:
        repo = work_dir(pkg)
        if not force:
            check_discardable(pkg, repo)
        if repo.exists():
            shutil.rmtree(repo)
        try:
            new_tree(pkg, repo)
            applied = apply_series(pkg, repo, commit=True)
        except BaseException:
            shutil.rmtree(repo, ignore_errors=True)  # no half-prepared tree
            raise
        print(
            f"{pkg.distribution} {pkg.version}: {repo.relative_to(pkg.root)} ready, {len(applied)} patches applied as commits on tag 'upstream'"
        )
