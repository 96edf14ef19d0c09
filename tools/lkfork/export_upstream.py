"""export-upstream: each patch as a PR, ready to send.

For every patch, ``build/upstream/<package>/<patch>/`` holds:

- the patch, with the tests kept beside it for upstream's ``tests/`` folder added to it
  (``patches/upstream/<key>/test_*.py``, see :mod:`lkfork.prs`), preceded by the patches it
  ``Depends:`` on when there are any (those are sent, or merged, first);
- ``PR.md``: the patch message as the PR description, its references, what it depends on,
  and the last upstream verification: the PR's own, and upstream's whole suite when it was
  last run on exactly the code the series builds now;
- ``ISSUE.md``: the bug report to file first, when the fix has no upstream issue.

Each export is checked offline: ``git am`` of the folder's patches, in order, on the pinned
sdist laid out at its monorepo path, exactly as on an upstream checkout of that release.
What a PR still lacks (an upstream test, an issue, a verification) is listed at the end.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import gitutil, patches, prs
from .config import Package
from .errors import ForkError
from .export import _FORMAT
from .source import new_tree
from .verify_upstream import SUITE_RECORD, series_wheels, suite_record

_TRAILER_KEYS = ("Bug", "Origin", "Applied-Upstream")


def pr_body(pr: prs.PR, suite: str | None = None) -> str:
    """The PR description: the patch message without its trailers, then the references."""
    patch = pr.patch
    paragraphs = patch.message.strip().split("\n\n")
    if paragraphs and all(":" in line for line in paragraphs[-1].splitlines()):
        paragraphs = paragraphs[:-1]
    body = "\n\n".join(paragraphs).strip()
    refs = [f"- {k}: {v}" for k in _TRAILER_KEYS for v in patch.trailers.get(k, [])]
    out = [f"# {patch.subject}", "", body, ""]
    if refs:
        out += ["## References", "", *refs, ""]
    if pr.depends:
        out += ["## Depends on", "", *[f"- {patches.key(n)}" for n in pr.depends], ""]
    if pr.tests:
        out += ["## Tests added", "", *[f"- `tests/{t.name}`" for t in pr.tests]]
        out += [f"- `tests/{t.name}` (helper)" for t in pr.support] + [""]
    if pr.verified is not None:
        out += ["## Verified", "", pr.verified.read_text().strip()]
        out += [suite, ""] if suite else [""]
    return "\n".join(out)


def _with_tests(pkg: Package, pr: prs.PR, repo: Path, dest: Path) -> None:
    """Write ``pr``'s patch to ``dest`` with its upstream tests added to the same commit."""
    gitutil.git(repo, "reset", "-q", "--hard", "upstream")
    files = [str(pkg.patches_dir / n) for n in (*pr.depends, pr.name)]
    gitutil.git(repo, "am", "-q", "--committer-date-is-author-date", *files)
    (repo / "tests").mkdir(exist_ok=True)
    for test in (*pr.tests, *pr.support):
        shutil.copy(test, repo / "tests" / test.name)
    gitutil.git(repo, "add", "-f", "tests")
    gitutil.git(repo, "commit", "-q", "--amend", "--no-edit", "--allow-empty")
    with tempfile.TemporaryDirectory() as tmp:
        gitutil.git(repo, *_FORMAT, "-o", tmp, "-1", "HEAD")
        (made,) = Path(tmp).glob("*.patch")
        dest.write_bytes(made.read_bytes())


def _applies(pkg: Package, files: list[Path]) -> str | None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        new_tree(pkg, repo)
        proc = gitutil.git(repo, "am", "-q", *[str(f) for f in files], check=False)
        return None if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()


def _suite(root: Path) -> str | None:
    """The suite's recorded result, if it still holds for the series as it is now."""
    if not (root / SUITE_RECORD).is_file():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return suite_record(root, series_wheels(root, Path(tmp)))


def run(pkgs: list[Package], out: Path | None = None) -> list[Path]:
    written = []
    incomplete: list[str] = []
    suite = _suite(pkgs[0].root)
    if suite is None:
        incomplete.append(
            f"upstream's whole suite not verified on the code the series builds now "
            f"(lkfork verify-upstream --suite --record; see {SUITE_RECORD})"
        )
    for pkg in pkgs:
        root = (out or pkg.root / "build" / "upstream") / pkg.distribution
        if root.exists():
            shutil.rmtree(root)
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp)
            new_tree(pkg, repo)
            for pr in prs.load(pkg):
                target = root / Path(pr.name).stem
                target.mkdir(parents=True)
                for dep in pr.depends:
                    shutil.copy(pkg.patches_dir / dep, target / dep)
                if pr.tests:
                    _with_tests(pkg, pr, repo, target / pr.name)
                else:
                    shutil.copy(pkg.patches_dir / pr.name, target / pr.name)
                error = _applies(pkg, [target / n for n in (*pr.depends, pr.name)])
                if error:
                    raise ForkError(
                        f"{pr.name}: does not apply to upstream {pkg.version} "
                        f"with the patches it depends on:\n{error}"
                    )
                (target / "PR.md").write_text(pr_body(pr, suite))
                if pr.issue is not None:
                    shutil.copy(pr.issue, target / "ISSUE.md")
                written.append(target)
                shown = target.relative_to(pkg.root) if target.is_relative_to(pkg.root) else target
                note = f" (after {len(pr.depends)} it depends on)" if pr.depends else ""
                print(f"{pkg.distribution}: {shown}{note}")
                incomplete += [f"{pr.name}: {m}" for m in pr.missing()]
    if incomplete:
        print(f"\nnot ready to send ({len(incomplete)}):\n  " + "\n  ".join(incomplete))
    return written
