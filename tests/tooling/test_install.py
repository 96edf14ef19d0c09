"""Users install the fork straight from git, with pip or uv, and it is a drop-in:
unpatched upstream plugins install beside it without replacing it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lkfork.config import find_root, load_packages

pytestmark = [pytest.mark.tooling, pytest.mark.slow]

REPO = find_root(Path(__file__))


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def installed(python: Path, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    return run(python, "-c", code).strip()


def test_pip_and_uv_install_from_git_url(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    run("git", "clone", "-q", REPO, clone)
    fork_version = load_packages(clone)[0].fork_version
    sha = run("git", "-C", clone, "rev-parse", "HEAD").strip()
    url = f"git+{clone.as_uri()}@{sha}"
    run(sys.executable, "-m", "venv", tmp_path / "venv")
    python = tmp_path / "venv/bin/python"
    # the pip that ships with older Pythons cannot parse git+file:/// requirements
    run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")

    # pip, the way the README tells users to
    run(python, "-m", "pip", "install", "-q", f"livekit-agents @ {url}#subdirectory=livekit-agents")
    assert installed(python, "livekit-agents") == fork_version
    out = run(python, "-c", "import livekit.agents as a; print(a.__version__, a.AgentSession.__name__)")
    assert out.split() == [fork_version, "AgentSession"]

    # drop-in: an unpatched upstream plugin that requires livekit-agents>=1.8.9 keeps the fork
    run(python, "-m", "pip", "install", "-q", "livekit-plugins-openai==1.8.9")
    assert installed(python, "livekit-agents") == fork_version
    run(python, "-c", "import livekit.plugins.openai")

    # uv, for a plugin of ours from a subdirectory of the same URL
    subdir = "livekit-plugins/livekit-plugins-google"
    run(
        "uv",
        "pip",
        "install",
        "-q",
        "--python",
        python,
        f"livekit-plugins-google @ {url}#subdirectory={subdir}",
    )
    assert installed(python, "livekit-plugins-google") == fork_version
    assert installed(python, "livekit-agents") == fork_version
    run(python, "-c", "import livekit.plugins.google")
