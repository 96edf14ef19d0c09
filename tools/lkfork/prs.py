"""The series read as upstream PRs: what each patch needs before it, and what goes with it.

A patch says in ``Depends:`` trailers which earlier patches of its series it needs (by
:func:`patches.key`, the name without its number). Everything a PR carries besides the patch
lives beside it in ``patches/upstream/<key>/``:

- ``test_*.py``: tests written for upstream's ``tests/`` folder, run with upstream's own
  helpers inside an upstream checkout (``lkfork verify-upstream``);
- ``ISSUE.md``: the bug report to file first, for a fix that has no upstream issue;
- ``VERIFIED.md``: the last result of ``lkfork verify-upstream`` (CI cannot reach upstream's
  repository, so the result is recorded here and quoted in the PR).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import gitutil, patches
from .config import Package
from .errors import ForkError
from .source import BASE_TAG, new_tree

UPSTREAM_DIR = "upstream"
SUPPORT_DIR = "_support"
"""Beside the PR folders: helper modules for upstream's ``tests/`` that several PRs' tests use
(a fake of a service upstream has none of). Each PR whose tests import one (``from .<name>
import``) carries it."""
ISSUE_URL = "https://github.com/livekit/agents/issues/"


@dataclass
class PR:
    pkg: Package
    patch: patches.Patch
    depends: list[str]  # patch file names this one needs, all of them, in series order

    @property
    def name(self) -> str:
        return self.patch.name

    @property
    def key(self) -> str:
        return patches.key(self.name)

    @property
    def folder(self) -> Path:
        return upstream_root(self.pkg) / self.key

    @property
    def tests(self) -> list[Path]:
        return sorted(self.folder.glob("test_*.py")) if self.folder.is_dir() else []

    @property
    def support(self) -> list[Path]:
        """The helper modules of ``upstream/_support/`` this PR's tests import."""
        folder = upstream_root(self.pkg) / SUPPORT_DIR
        imported = {
            name
            for test in self.tests
            for name in re.findall(r"^from \.(\w+) import", test.read_text(), re.M)
        }
        return sorted(p for p in folder.glob("*.py") if p.stem in imported)

    @property
    def issue(self) -> Path | None:
        path = self.folder / "ISSUE.md"
        return path if path.is_file() else None

    @property
    def verified(self) -> Path | None:
        path = self.folder / "VERIFIED.md"
        return path if path.is_file() else None

    @property
    def has_upstream_issue(self) -> bool:
        return any(b.startswith(ISSUE_URL) for b in self.patch.trailers.get("Bug", []))

    def missing(self) -> list[str]:
        """What this PR still lacks before it can be sent."""
        out = []
        if not self.tests:
            out.append(f"no upstream test in {self.folder.relative_to(self.pkg.root)}/")
        if not self.has_upstream_issue and self.issue is None:
            out.append("no upstream issue (a 'Bug:' issue URL) and no ISSUE.md to file one")
        if self.tests and self.verified is None:
            out.append("not verified on an upstream checkout (lkfork verify-upstream)")
        return out


def upstream_root(pkg: Package) -> Path:
    return pkg.patches_dir / UPSTREAM_DIR


def load(pkg: Package) -> list[PR]:
    """The series as PRs, each with the closure of its ``Depends:`` trailers."""
    series = patches.read_series(pkg)
    by_key = {patches.key(n): n for n in series}
    prs: list[PR] = []
    closure: dict[str, set[str]] = {}
    problems = []
    for i, name in enumerate(series):
        patch = patches.parse(pkg.patches_dir / name)
        needed: set[str] = set()
        for dep in patch.trailers.get("Depends", []):
            dep_name = by_key.get(patches.key(dep))
            if dep_name is None:
                problems.append(f"{name}: 'Depends: {dep}' names no patch of the series")
            elif series.index(dep_name) >= i:
                problems.append(f"{name}: 'Depends: {dep}' names a patch that comes after it")
            else:
                needed |= {dep_name} | closure[dep_name]
        closure[name] = needed
        prs.append(PR(pkg, patch, [n for n in series if n in needed]))
    if problems:
        raise ForkError("\n  ".join(problems))
    return prs


def stray_folders(pkg: Package) -> list[str]:
    """Folders of upstream material whose patch is not in the series (renamed or dropped)."""
    root = upstream_root(pkg)
    if not root.is_dir():
        return []
    keys = {patches.key(n) for n in patches.read_series(pkg)}
    return [
        f"{p.relative_to(pkg.root)}: no patch of the series is named *-{p.name}.patch"
        for p in sorted(root.iterdir())
        if p.is_dir() and p.name not in keys and p.name != SUPPORT_DIR
    ]


def not_applying_alone(pkg: Package, prs: list[PR]) -> list[str]:
    """Each PR must apply to the pinned release on top of exactly the patches it depends on."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        new_tree(pkg, repo)
        for pr in prs:
            gitutil.git(repo, "reset", "-q", "--hard", BASE_TAG)
            files = [str(pkg.patches_dir / n) for n in (*pr.depends, pr.name)]
            proc = gitutil.git(repo, "am", "-q", *files, check=False)
            if proc.returncode != 0:
                gitutil.git(repo, "am", "--abort", check=False)
                where = patches.locate_failure(pr.patch, proc.stderr + proc.stdout)
                deps = ", ".join(patches.key(n) for n in pr.depends) or "none"
                found.append(
                    f"{pr.name}: does not apply to {pkg.distribution} {pkg.version} with only the "
                    f"patches it depends on ({deps}): {where}; add the missing 'Depends:' trailer"
                )
    return found
