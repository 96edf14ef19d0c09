"""pin: point a package at another upstream release (version, sdist name, sha256)."""

from __future__ import annotations

import re

from .config import Package, load_package
from .fetch import fetch
from .upstream import release


def run(pkg: Package, version: str, index: str | None = None) -> Package:
    other = release(pkg, version, index)
    fetch(other, index=index, log=False)  # downloads, checks the index's sha256, caches it
    text = pkg.pin_file.read_text()
    for key, value in (("version", other.version), ("sdist", other.sdist), ("sha256", other.sha256)):
        text = re.sub(rf'^{key} = ".*"$', f'{key} = "{value}"', text, count=1, flags=re.M)
    if other.version != pkg.version:  # a new upstream release starts our count again
        text = re.sub(r"^release = \d+$", "release = 1", text, count=1, flags=re.M)
    pkg.pin_file.write_text(text)
    new = load_package(pkg.dir, pkg.root)
    print(
        f"{pkg.distribution}: pinned {new.version} ({new.sdist}, sha256 {new.sha256}); now run 'lkfork check'"
    )
    return new
