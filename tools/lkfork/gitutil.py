"""Run git the same way on every machine: no user or system config, fixed identities."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import ForkError

# Commits lkfork makes itself (the upstream base, and the committer of applied patches) use
# this identity, so that commit ids, and therefore exports, do not depend on who ran it.
IDENTITY = {
    "GIT_AUTHOR_NAME": "lkfork",
    "GIT_AUTHOR_EMAIL": "lkfork@invalid",
    "GIT_COMMITTER_NAME": "lkfork",
    "GIT_COMMITTER_EMAIL": "lkfork@invalid",
}


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # A user's diff.noprefix, format.signature, core.autocrlf... would change what we
    # export, so git sees no configuration but what we pass.
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C", TZ="UTC")
    env.update(IDENTITY)
    env.update(extra or {})
    return env


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, env=git_env(env)
        )
    except FileNotFoundError:
        raise ForkError("git is not installed; lkfork needs git to apply patches") from None
    if check and proc.returncode != 0:
        raise ForkError(
            f"git {' '.join(args)} failed in {repo}:\n{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def init(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")


def is_dirty(repo: Path) -> bool:
    return bool(git(repo, "status", "--porcelain").stdout.strip())
