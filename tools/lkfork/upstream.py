"""Other upstream releases than the pinned one: find them and lay them out in a git tree."""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from pathlib import Path

from . import gitutil, index_client
from .config import Package, sdist_name
from .errors import ForkError
from .fetch import cached_path, fetch, sha256_of
from .source import BASE_TAG, new_tree, unpack

PINNED_TAG = "pinned"


def latest_version(pkg: Package, index: str | None = None) -> str:
    """The newest final release of ``pkg`` that has an sdist on the index."""
    prefix = sdist_name(pkg.distribution, "")[: -len(".tar.gz")]
    versions = [
        f.filename[len(prefix) : -len(".tar.gz")]
        for f in index_client.project_files(pkg.distribution, index)
        if f.filename.startswith(prefix) and f.filename.endswith(".tar.gz")
    ]
    finals = [v for v in versions if re.fullmatch(r"\d+(\.\d+)*", v)]
    if not finals:
        raise ForkError(f"{pkg.distribution}: no final release with an sdist on the package index")
    return max(finals, key=lambda v: tuple(int(x) for x in v.split(".")))


def release(pkg: Package, version: str, index: str | None = None) -> Package:
    """``pkg`` pinned to another upstream release (or ``latest``), with the index's sha256."""
    if version == "latest":
        version = latest_version(pkg, index)
    if version == pkg.version:
        return pkg
    filename = sdist_name(pkg.distribution, version)
    found = index_client.find_sdist(pkg.distribution, filename, version, index)
    other = dataclasses.replace(pkg, version=version, sdist=filename, sha256=found.sha256 or "")
    if not other.sha256:  # an index without hashes: trust the download, once
        path = cached_path(other)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            part = Path(tmp) / filename
            index_client.download(found.url, part)
            other = dataclasses.replace(other, sha256=sha256_of(part))
            part.replace(path)
    return other


def two_version_tree(pinned: Package, other: Package, dest: Path) -> Path:
    """A git repo at ``dest``: the pinned release (tag ``pinned``), then ``other`` on top
    (tag ``upstream``). The pinned blobs let ``git am -3`` merge our patches forward."""
    if dest.exists():
        shutil.rmtree(dest)
    src, _ = new_tree(pinned, dest)
    gitutil.git(dest, "tag", "-f", PINNED_TAG)
    gitutil.git(dest, "tag", "-d", BASE_TAG)
    if other.version == pinned.version:
        gitutil.git(dest, "tag", BASE_TAG)
        return src
    shutil.rmtree(src)
    with tempfile.TemporaryDirectory() as tmp:
        new_src, epoch = unpack(other, fetch(other, log=False), Path(tmp))
        shutil.move(str(new_src), str(src))
    date = f"@{epoch} +0000"
    gitutil.git(dest, "add", "-A", "-f")
    gitutil.git(
        dest,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"{other.distribution} {other.version} (upstream sdist {other.sha256[:12]})",
        env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    gitutil.git(dest, "tag", BASE_TAG)
    return src


def conflicted_files(repo: Path) -> list[str]:
    out = gitutil.git(repo, "diff", "--name-only", "--diff-filter=U", check=False).stdout
    return sorted(set(out.split()))


def ensure_exists(pkg: Package, version: str, index: str | None = None) -> Package:
    try:
        return release(pkg, version, index)
    except ForkError as e:
        raise ForkError(f"unknown upstream version: {e}") from None
