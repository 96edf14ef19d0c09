"""rebase: move a package's series onto another upstream release.

Prepares ``build/work/<package>`` on the new release with a 3-way ``git am``. When every
patch goes on (patches upstream already has are dropped), exports the series and pins the
new release; otherwise stops with the work tree mid-``am`` and lists the conflicts.
"""

from __future__ import annotations

import shutil

from . import export, gitutil, patches, pin
from .config import Package
from .errors import ForkError
from .prepare import check_discardable
from .status import apply_forward
from .upstream import ensure_exists, two_version_tree


def run(pkg: Package, version: str, index: str | None = None) -> None:
    if version == pkg.version:
        raise ForkError(f"{pkg.distribution} is already pinned to {version}")
    other = ensure_exists(pkg, version, index)
    repo = export.work_dir(pkg)
    check_discardable(pkg, repo)
    if repo.exists():
        shutil.rmtree(repo)
    two_version_tree(pkg, other, repo)
    dropped = []
    for name in patches.read_series(pkg):
        state, files = apply_forward(repo, pkg.patches_dir / name)
        if state == "already-upstream":
            dropped.append(name)
        elif state == "conflicts":
            rel = repo.relative_to(pkg.root)
            raise ForkError(
                f"{name} conflicts with {pkg.distribution} {version} in: {', '.join(files)}\n"
                f"The work tree {rel} is stopped in 'git am': resolve the files, `git add` them and "
                f"`git am --continue` (or `git am --skip` if upstream has the change), repeat for "
                f"the rest, then run `lkfork export {pkg.distribution}` and "
                f"`lkfork pin {pkg.distribution} {version}`."
            )
    gitutil.git(repo, "tag", "-d", "pinned", check=False)
    changed = export.write(pkg, export.render(repo))
    pin.run(pkg, version, index)
    for name in dropped:
        print(f"  dropped {name}: upstream {version} already has it (add Applied-Upstream to its notes)")
    print(f"{pkg.distribution}: rebased onto {version}; changed: {', '.join(changed) or 'nothing'}")
