"""build: patched wheel and sdist for each package, with upstream's own build backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .config import Package, normalize
from .errors import ForkError
from .source import build_system, patched_tree

# Runs upstream's backend in a child process so its imports never mix with ours.
_HOOKS = """
import importlib, sys
mod, _, obj = sys.argv[1].partition(":")
backend = importlib.import_module(mod)
for part in filter(None, obj.split(".")):
    backend = getattr(backend, part)
print(backend.build_sdist(sys.argv[2]))
print(backend.build_wheel(sys.argv[2]))
"""


def build_one(
    pkg: Package, scratch: Path, out: Path, python: str = sys.executable, names: list[str] | None = None
) -> list[Path]:
    """Wheel and sdist of ``pkg`` with its series applied (or only the patches ``names``)."""
    src, epoch = patched_tree(pkg, scratch / pkg.distribution, names)
    requires, backend = build_system(src)
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch), PYTHONHASHSEED="0")
    proc = subprocess.run(
        [python, "-c", _HOOKS, backend, str(out)], cwd=src, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        if "ModuleNotFoundError" in proc.stderr:
            raise ForkError(
                f"{pkg.distribution}: upstream's build backend '{backend}' is not installed "
                f"for {python} (it needs: {', '.join(requires)}); run 'uv sync' first"
            )
        raise ForkError(f"{pkg.distribution}: upstream's build backend failed:\n{proc.stderr.strip()}")
    built = [out / line.strip() for line in proc.stdout.splitlines()[-2:]]
    for path in built:
        if pkg.fork_version not in path.name:
            raise ForkError(
                f"{pkg.distribution}: built {path.name}, which lacks the fork version {pkg.fork_version}"
            )
    return built


def run(pkgs: list[Package], dist: Path) -> list[Path]:
    """Build every package into a staging directory, then move the results into ``dist``.

    Nothing reaches ``dist`` unless every package built, so a failure never leaves a
    mixture of old and new artefacts behind.
    """
    (pkgs[0].root / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pkgs[0].root / "build", prefix="stage-") as tmp:
        stage = Path(tmp) / "out"
        stage.mkdir()
        built: list[Path] = []
        for pkg in pkgs:
            built += build_one(pkg, Path(tmp), stage)
            print(f"{pkg.distribution}: built {pkg.fork_version}")
        dist.mkdir(parents=True, exist_ok=True)
        stems = {normalize(p.distribution).replace("-", "_") + "-" for p in pkgs}
        for old in dist.iterdir():
            if old.is_file() and any(old.name.startswith(s) for s in stems):
                old.unlink()  # an older build of a package we just rebuilt
        results = []
        for path in built:
            target = dist / path.name
            shutil.move(str(path), target)
            results.append(target)
    return results
