"""upstream-status: does each patch still apply to another upstream release?

Per patch, in series order: ``applies`` (exactly), ``applies-3way`` (only with a 3-way
merge), ``already-upstream`` (it reverse-applies cleanly: upstream has the change) or
``conflicts`` (with the files). Patches are applied cumulatively, as a rebase would.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import gitutil, patches
from .config import Package
from .upstream import conflicted_files, ensure_exists, two_version_tree

STATES = ("applies", "applies-3way", "already-upstream", "conflicts")


@dataclass
class PatchStatus:
    package: str
    version: str
    patch: str
    state: str
    files: list[str] = field(default_factory=list)


def apply_forward(repo: Path, patch: Path) -> tuple[str, list[str]]:
    """Apply one patch on top of ``repo`` the way a rebase would; returns its state."""
    if (
        gitutil.git(repo, "am", "-q", "--committer-date-is-author-date", str(patch), check=False).returncode
        == 0
    ):
        return "applies", []
    gitutil.git(repo, "am", "--abort", check=False)
    if gitutil.git(repo, "apply", "-R", "--check", str(patch), check=False).returncode == 0:
        return "already-upstream", []
    proc = gitutil.git(repo, "am", "-q", "-3", "--committer-date-is-author-date", str(patch), check=False)
    if proc.returncode == 0:
        return "applies-3way", []
    files = conflicted_files(repo) or sorted(
        f[len("a/") :] for f in patches.parse(patch).files if f.startswith("a/")
    )
    return "conflicts", files


def statuses(pkg: Package, version: str, index: str | None = None) -> list[PatchStatus]:
    other = ensure_exists(pkg, version, index)
    result = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "tree"
        two_version_tree(pkg, other, repo)
        for name in patches.read_series(pkg):
            state, files = apply_forward(repo, pkg.patches_dir / name)
            if state == "conflicts":
                gitutil.git(repo, "am", "--abort", check=False)
            result.append(PatchStatus(pkg.distribution, other.version, name, state, files))
    return result


def run(
    pkgs: list[Package], version: str, *, as_json: bool = False, index: str | None = None
) -> list[PatchStatus]:
    rows = [row for pkg in pkgs for row in statuses(pkg, version, index)]
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return rows
    print(f"patch status against upstream {version}:")
    if not rows:
        print("  (no patches)")
    for r in rows:
        extra = f" ({', '.join(r.files)})" if r.files else ""
        print(f"  {r.package:<24} {r.version:<8} {r.patch:<64} {r.state}{extra}")
    return rows
