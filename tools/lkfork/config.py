"""The fork's packages: where they live and what upstream release each is pinned to."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import ForkError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PIN_FILE = "upstream.toml"
# The package directories, in build order (the plugins depend on livekit-agents).
PACKAGE_DIRS = (
    "livekit-agents",
    "livekit-plugins/livekit-plugins-google",
    "livekit-plugins/livekit-plugins-aws",
)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
_LABEL = re.compile(r"[a-z][a-z0-9]*")


def normalize(name: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sdist_name(distribution: str, version: str) -> str:
    """The file name PyPI uses for a modern (PEP 625) sdist."""
    return f"{normalize(distribution).replace('-', '_')}-{version}.tar.gz"


@dataclass(frozen=True)
class Package:
    """One package of the fork: a directory holding ``upstream.toml`` and ``patches/``."""

    root: Path  # the repository root
    dir: Path  # the package directory, e.g. <root>/livekit-agents
    distribution: str
    version: str
    sdist: str
    sha256: str
    monorepo_path: str
    label: str
    release: int

    @property
    def name(self) -> str:
        return self.distribution

    @property
    def patches_dir(self) -> Path:
        return self.dir / "patches"

    @property
    def series_file(self) -> Path:
        return self.patches_dir / "series"

    @property
    def fork_version(self) -> str:
        return f"{self.version}+{self.label}.{self.release}"

    @property
    def pin_file(self) -> Path:
        return self.dir / PIN_FILE


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest directory above ``start`` holding our packages."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / PACKAGE_DIRS[0] / PIN_FILE).is_file():
            return candidate
    raise ForkError(f"not inside the fork's repository (no {PACKAGE_DIRS[0]}/{PIN_FILE} above {here})")


def load_package(pkg_dir: Path, root: Path | None = None) -> Package:
    pin = pkg_dir / PIN_FILE
    try:
        data = tomllib.loads(pin.read_text())
    except FileNotFoundError:
        raise ForkError(f"{pin}: missing pin file") from None
    except tomllib.TOMLDecodeError as e:
        raise ForkError(f"{pin}: not valid TOML: {e}") from None
    up = data.get("upstream", {})
    fork = data.get("fork", {})
    missing = [
        f"[upstream].{k}"
        for k in ("distribution", "version", "sdist", "sha256", "monorepo-path")
        if not isinstance(up.get(k), str)
    ] + [f"[fork].{k}" for k, t in (("label", str), ("release", int)) if not isinstance(fork.get(k), t)]
    if missing:
        raise ForkError(f"{pin}: missing or mistyped keys: {', '.join(missing)}")
    if not _VERSION.fullmatch(up["version"]):
        raise ForkError(f"{pin}: '{up['version']}' is not a release version")
    if not _SHA256.fullmatch(up["sha256"]):
        raise ForkError(f"{pin}: sha256 must be 64 lowercase hex digits")
    expected = sdist_name(up["distribution"], up["version"])
    if up["sdist"] != expected:
        raise ForkError(
            f"{pin}: sdist '{up['sdist']}' does not match {up['distribution']} {up['version']} (expected '{expected}')"
        )
    if not _LABEL.fullmatch(fork["label"]) or fork["release"] < 0:
        raise ForkError(f"{pin}: [fork] label must be lowercase alphanumeric and release >= 0")
    root = root or find_root(pkg_dir)
    return Package(
        root=root,
        dir=pkg_dir.resolve(),
        distribution=up["distribution"],
        version=up["version"],
        sdist=up["sdist"],
        sha256=up["sha256"],
        monorepo_path=up["monorepo-path"],
        label=fork["label"],
        release=fork["release"],
    )


def load_packages(root: Path, names: list[str] | None = None) -> list[Package]:
    """All packages (or those named, by distribution name or directory), in build order."""
    pkgs = [load_package(root / d, root) for d in PACKAGE_DIRS]
    if not names:
        return pkgs
    chosen: list[Package] = []
    for name in names:
        match = [
            p
            for p in pkgs
            if normalize(name) in (normalize(p.distribution), normalize(Path(p.monorepo_path).name))
        ]
        if not match:
            known = ", ".join(p.distribution for p in pkgs)
            raise ForkError(f"unknown package '{name}' (known: {known})")
        chosen.extend(m for m in match if m not in chosen)
    return [p for p in pkgs if p in chosen]
