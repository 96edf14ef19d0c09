"""export-upstream: each patch as a branch-ready ``git am`` series plus a PR body.

For every patch, ``build/upstream/<package>/<patch>/`` holds the patch (preceded by the
earlier patches of the series when it does not apply on its own) and ``PR.md``, made from
the patch message. Every export is verified offline: ``git am`` on the pinned sdist laid out
at its monorepo path, exactly as on an upstream checkout of that release.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import gitutil, patches
from .config import Package
from .errors import ForkError
from .source import new_tree

_TRAILER_KEYS = ("Bug", "Origin", "Forwarded", "Applied-Upstream")


def pr_body(patch: patches.Patch, prerequisites: list[str]) -> str:
    """The PR description: the patch message without its trailers, then the references."""
    paragraphs = patch.message.strip().split("\n\n")
    if paragraphs and all(":" in line for line in paragraphs[-1].splitlines()):
        paragraphs = paragraphs[:-1]
    body = "\n\n".join(paragraphs).strip()
    refs = [f"- {k}: {v}" for k in _TRAILER_KEYS for v in patch.trailers.get(k, []) if k != "Forwarded"]
    out = [f"# {patch.subject}", "", body, ""]
    if refs:
        out += ["## References", "", *refs, ""]
    if prerequisites:
        out += ["## Depends on", "", *[f"- {p}" for p in prerequisites], ""]
    return "\n".join(out)


def _applies(pkg: Package, files: list[Path]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        new_tree(pkg, repo)
        proc = gitutil.git(repo, "am", "-q", *[str(f) for f in files], check=False)
        return proc.returncode == 0


def run(pkgs: list[Package], out: Path | None = None) -> list[Path]:
    written = []
    for pkg in pkgs:
        series = patches.read_series(pkg)
        root = (out or pkg.root / "build" / "upstream") / pkg.distribution
        if root.exists():
            shutil.rmtree(root)
        for i, name in enumerate(series):
            patch_files = [pkg.patches_dir / name]
            prerequisites: list[str] = []
            if not _applies(pkg, patch_files):
                prerequisites = series[:i]
                patch_files = [pkg.patches_dir / n for n in series[: i + 1]]
                if not _applies(pkg, patch_files):
                    raise ForkError(
                        f"{name}: does not apply to upstream {pkg.version}, even after its predecessors"
                    )
            target = root / Path(name).stem
            target.mkdir(parents=True)
            for f in patch_files:
                shutil.copy(f, target / f.name)
            (target / "PR.md").write_text(pr_body(patches.parse(pkg.patches_dir / name), prerequisites))
            written.append(target)
            note = f" (with {len(prerequisites)} earlier patches)" if prerequisites else ""
            print(
                f"{pkg.distribution}: {target.relative_to(pkg.root) if target.is_relative_to(pkg.root) else target}{note}"
            )
    return written
