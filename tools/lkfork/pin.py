"""pin: point a package at another upstream release (version, sdist name, sha256)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from . import index_client
from .config import Package, load_package, sdist_name
from .errors import ForkError
from .fetch import sha256_of


def run(pkg: Package, version: str, index: str | None = None) -> Package:
    filename = sdist_name(pkg.distribution, version)
    found = index_client.find_sdist(pkg.distribution, filename, version, index)
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / filename
        index_client.download(found.url, part)
        digest = sha256_of(part)
    if found.sha256 and found.sha256 != digest:
        raise ForkError(
            f"{filename}: sha256 mismatch: the index says {found.sha256}, the download has {digest}"
        )
    text = pkg.pin_file.read_text()
    for key, value in (("version", version), ("sdist", filename), ("sha256", digest)):
        text = re.sub(rf'^{key} = ".*"$', f'{key} = "{value}"', text, count=1, flags=re.M)
    if version != pkg.version:  # a new upstream release starts our count again
        text = re.sub(r"^release = \d+$", "release = 1", text, count=1, flags=re.M)
    pkg.pin_file.write_text(text)
    new = load_package(pkg.dir, pkg.root)
    print(f"{pkg.distribution}: pinned {new.version} ({filename}, sha256 {digest}); now run 'lkfork check'")
    return new
