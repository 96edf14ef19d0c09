"""fetch: download each pinned sdist into the cache and verify its sha256."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from . import index_client
from .config import Package
from .errors import ForkError


def cache_dir() -> Path:
    if os.environ.get("LKFORK_CACHE_DIR"):
        return Path(os.environ["LKFORK_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lkfork"


def offline() -> bool:
    return os.environ.get("LKFORK_OFFLINE", "") not in ("", "0")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def cached_path(pkg: Package) -> Path:
    return cache_dir() / "sdists" / pkg.sdist


def _expected_from(pkg: Package) -> str:
    """Where the expected hash comes from: our pin, or the index (for another release)."""
    if f'version = "{pkg.version}"' in pkg.pin_file.read_text():
        return f"{pkg.pin_file.relative_to(pkg.root)} pins"
    return f"the package index publishes for {pkg.version}"


def fetch(pkg: Package, *, index: str | None = None, log: bool = True) -> Path:
    """The verified sdist in the cache, downloading it if needed. Never leaves a bad file cached."""
    path = cached_path(pkg)
    if path.is_file():
        got = sha256_of(path)
        if got == pkg.sha256:
            return path
        # A truncated download or a tampered file: never use it, fetch a fresh copy.
        path.unlink()
        problem = f"cached {path} was corrupt (sha256 {got}, pinned {pkg.sha256}); removed it"
        if offline():
            raise ForkError(f"{problem}, and LKFORK_OFFLINE is set so it cannot be fetched again")
        if log:
            print(f"warning: {problem}; downloading again")
    elif offline():
        raise ForkError(f"{pkg.sdist} is not in the cache ({path.parent}) and LKFORK_OFFLINE is set")
    found = index_client.find_sdist(pkg.distribution, pkg.sdist, pkg.version, index)
    if found.sha256 and found.sha256 != pkg.sha256:
        raise ForkError(
            f"{pkg.sdist}: sha256 mismatch: the index has {found.sha256}, {_expected_from(pkg)} {pkg.sha256}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        part = Path(tmp) / pkg.sdist
        if log:
            print(f"fetching {found.url}")
        index_client.download(found.url, part)
        got = sha256_of(part)
        if got != pkg.sha256:
            raise ForkError(
                f"{pkg.sdist}: sha256 mismatch: downloaded {got}, {_expected_from(pkg)} {pkg.sha256}"
            )
        os.replace(part, path)
    return path


def run(pkgs: list[Package], index: str | None = None) -> None:
    for pkg in pkgs:
        path = fetch(pkg, index=index)
        print(f"{pkg.distribution} {pkg.version}: {path} (sha256 ok)")
