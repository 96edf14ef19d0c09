"""check: the series is consistent, every patch follows our conventions and applies exactly,
prepare -> export reproduces patches/ byte for byte, and each patch applies on the release
with only the earlier patches its ``Depends:`` trailers name (so it can be sent as one PR)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from . import patches, prs
from .config import Package
from .errors import ForkError
from .export import render
from .source import apply_series, new_tree


def problems(pkg: Package) -> list[str]:
    found: list[str] = []
    listed = patches.read_series(pkg)
    on_disk = sorted(p.name for p in pkg.patches_dir.glob("*.patch"))
    series = pkg.series_file.relative_to(pkg.root)
    found += [f"{series}: lists {n} twice" for n in sorted({n for n in listed if listed.count(n) > 1})]
    found += [f"{series}: lists {n}, but there is no such file" for n in listed if n not in on_disk]
    found += [f"{series}: does not list {n}" for n in on_disk if n not in listed]
    for name in on_disk:
        try:
            found += patches.problems(pkg, patches.parse(pkg.patches_dir / name))
        except ForkError as e:
            found.append(str(e))
    found += prs.stray_folders(pkg)
    if found:
        return found  # applying an inconsistent series would only repeat these
    try:
        as_prs = prs.load(pkg)
    except ForkError as e:
        return [str(e)]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        new_tree(pkg, repo)
        try:
            apply_series(pkg, repo, commit=True)
        except ForkError as e:
            return [str(e)]
        rendered = render(repo)
    if list(rendered) != listed:
        found.append(
            f"{series}: export would name the patches {list(rendered)}; run 'lkfork prepare' and 'lkfork export'"
        )
    for name in listed:
        if name in rendered and rendered[name] != (pkg.patches_dir / name).read_bytes():
            found.append(
                f"{name}: differs from its export (hand-edited?); run 'lkfork prepare' and 'lkfork export'"
            )
    # each patch is a PR of its own: on the release, with only what its Depends: name
    return found or prs.not_applying_alone(pkg, as_prs)


def run(pkgs: list[Package]) -> None:
    failures = []
    for pkg in pkgs:
        found = problems(pkg)
        n = len(patches.read_series(pkg))
        print(
            f"{pkg.distribution} {pkg.version}: {n} patches, "
            + ("ok" if not found else f"{len(found)} problems")
        )
        failures += found
    if failures:
        raise ForkError("check failed:\n  " + "\n  ".join(failures))
