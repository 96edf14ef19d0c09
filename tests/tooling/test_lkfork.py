"""The patch-queue tool on the real pinned sdists: the happy path and every kind of bad input."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from lkfork import gitutil

from .conftest import lkfork, make_index

pytestmark = pytest.mark.tooling

AGENTS_VERSION_FILE = "livekit-agents/livekit/agents/version.py"
TRAILERS = "Bug: https://github.com/livekit/agents/issues/1\nForwarded: not-yet\n"


def commit_edit(
    root: Path, message: str, rel: str = AGENTS_VERSION_FILE, line: str = "# fork test\n"
) -> None:
    """Make one commit in the prepared livekit-agents work tree, as a developer would."""
    work = root / "build/work/livekit-agents"
    with open(work / rel, "a") as f:
        f.write(line)
    gitutil.git(work, "commit", "-q", "-a", "-m", message, env={"GIT_AUTHOR_DATE": "@1700000000 +0000"})


def add_patch(root: Path, message: str = f"Add a marker line\n\nWhy it matters.\n\n{TRAILERS}") -> Path:
    assert lkfork(root, "prepare", "livekit-agents").returncode == 0
    commit_edit(root, message)
    res = lkfork(root, "export", "livekit-agents")
    assert res.returncode == 0, res.stderr
    return next((root / "livekit-agents/patches").glob("*.patch"))


def test_fetch_verifies_and_works_offline_from_a_warm_cache(
    fork: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = lkfork(fork, "fetch")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("sha256 ok") == 3
    monkeypatch.setenv("LKFORK_OFFLINE", "1")
    monkeypatch.setenv("LKFORK_INDEX_URL", "file:///nonexistent/")
    assert lkfork(fork, "fetch").returncode == 0


def test_sha256_mismatch_names_both_hashes(
    fork: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad" / "livekit_plugins_aws-1.8.9.tar.gz"
    bad.parent.mkdir()
    bad.write_bytes(b"not the real sdist")
    monkeypatch.setenv("LKFORK_INDEX_URL", make_index(tmp_path / "evil", {"livekit-plugins-aws": bad}))
    res = lkfork(fork, "fetch", "livekit-plugins-aws")
    assert res.returncode == 1
    pinned = (
        (fork / "livekit-plugins/livekit-plugins-aws/upstream.toml").read_text().split('sha256 = "')[1][:64]
    )
    assert hashlib.sha256(b"not the real sdist").hexdigest() in res.stderr and pinned in res.stderr
    assert res.stderr.count("\n") == 1  # one clear message, no traceback
    assert not (tmp_path / "cache/sdists/livekit_plugins_aws-1.8.9.tar.gz").exists()


def test_missing_cache_offline_is_a_clear_error(fork: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LKFORK_OFFLINE", "1")
    res = lkfork(fork, "build")
    assert res.returncode == 1
    assert "is not in the cache" in res.stderr and "LKFORK_OFFLINE" in res.stderr
    assert not (fork / "dist").exists()


def test_corrupt_cache_is_replaced_or_reported(
    fork: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lkfork(fork, "fetch", "livekit-plugins-aws").returncode == 0
    cached = tmp_path / "cache/sdists/livekit_plugins_aws-1.8.9.tar.gz"
    cached.write_bytes(cached.read_bytes()[:1000])  # a truncated download
    monkeypatch.setenv("LKFORK_OFFLINE", "1")
    res = lkfork(fork, "fetch", "livekit-plugins-aws")
    assert res.returncode == 1 and "was corrupt" in res.stderr and not cached.exists()
    monkeypatch.delenv("LKFORK_OFFLINE")
    cached.write_bytes(b"garbage")
    res = lkfork(fork, "fetch", "livekit-plugins-aws")
    assert res.returncode == 0 and "downloading again" in res.stdout


def test_unknown_upstream_version(fork: Path) -> None:
    res = lkfork(fork, "pin", "livekit-plugins-aws", "9.9.9")
    assert res.returncode == 1
    assert "livekit-plugins-aws 9.9.9: no sdist 'livekit_plugins_aws-9.9.9.tar.gz'" in res.stderr
    pin = fork / "livekit-plugins/livekit-plugins-aws/upstream.toml"
    pin.write_text(pin.read_text().replace("1.8.9", "9.9.9"))
    res = lkfork(fork, "build")
    assert res.returncode == 1 and "no sdist" in res.stderr
    assert not (fork / "dist").exists()


def test_bad_pin_file(fork: Path) -> None:
    pin = fork / "livekit-agents/upstream.toml"
    pin.write_text(pin.read_text().replace('sha256 = "', 'sha256 = "zz'))
    res = lkfork(fork, "check")
    assert res.returncode == 1 and "sha256 must be 64 lowercase hex digits" in res.stderr


def test_series_and_files_must_match(fork: Path) -> None:
    patches = fork / "livekit-agents/patches"
    (patches / "0001-orphan.patch").write_text("x")
    with open(patches / "series", "a") as f:
        f.write("0002-missing.patch\n")
    res = lkfork(fork, "check")
    assert res.returncode == 1
    assert "lists 0002-missing.patch, but there is no such file" in res.stderr
    assert "does not list 0001-orphan.patch" in res.stderr
    res = lkfork(fork, "build")
    assert res.returncode == 1 and "0002-missing.patch" in res.stderr
    assert not (fork / "dist").exists()


def test_missing_trailers(fork: Path) -> None:
    patch = add_patch(fork)
    patch.write_text(patch.read_text().replace("Forwarded: not-yet\n", ""))
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 1 and f"{patch.name}: missing 'Forwarded:' trailer" in res.stderr
    # export refuses to write a patch without them in the first place
    assert lkfork(fork, "prepare", "--force", "livekit-agents").returncode == 0
    commit_edit(fork, "No trailers here\n\nJust prose.\n")
    res = lkfork(fork, "export", "livekit-agents")
    assert res.returncode == 1 and "missing 'Bug:' trailer" in res.stderr


def test_patch_that_does_not_apply_names_patch_file_and_hunk(fork: Path, tmp_path: Path) -> None:
    patch = add_patch(fork)
    text = patch.read_text()
    # Break the context of the only hunk: upstream's licence header line it expects.
    broken = text.replace(' __version__ = "1.8.9"', ' __version__ = "0.0.0"')
    assert broken != text
    patch.write_text(broken)
    (fork / "dist").mkdir()
    (fork / "dist/keep.txt").write_text("old")
    for verb in ("check", "build"):
        res = lkfork(fork, verb)
        assert res.returncode == 1, res.stdout
        assert (
            f"{patch.name} does not apply to livekit-agents 1.8.9: file {AGENTS_VERSION_FILE}, hunk #1 (@@ -"
            in res.stderr
        )
    assert sorted(p.name for p in (fork / "dist").iterdir()) == ["keep.txt"]
    # prepare leaves no half-made work tree behind either
    res = lkfork(fork, "prepare", "--force", "livekit-agents")
    assert res.returncode == 1 and not (fork / "build/work/livekit-agents").exists()


def test_prepare_export_round_trip_and_reproducible_build(fork: Path) -> None:
    patch = add_patch(fork)
    before = {p.name: p.read_bytes() for p in patch.parent.iterdir()}
    assert patch.name == "0001-Add-a-marker-line.patch"
    assert (patch.parent / "series").read_text().endswith("\n0001-Add-a-marker-line.patch\n")
    assert patch.read_text().startswith("From 0000000000000000000000000000000000000000 ")
    assert "a/livekit-agents/livekit/agents/version.py" in patch.read_text()
    # prepare -> export with no edits changes nothing, byte for byte
    assert lkfork(fork, "prepare", "livekit-agents").returncode == 0
    res = lkfork(fork, "export", "livekit-agents")
    assert res.returncode == 0 and "unchanged" in res.stdout
    assert {p.name: p.read_bytes() for p in patch.parent.iterdir()} == before
    res = lkfork(fork, "check")
    assert res.returncode == 0, res.stderr
    # two builds from the same inputs are byte-identical, and carry the patch and the label
    assert lkfork(fork, "build").returncode == 0
    first = {p.name: p.read_bytes() for p in (fork / "dist").iterdir()}
    assert lkfork(fork, "build").returncode == 0
    assert {p.name: p.read_bytes() for p in (fork / "dist").iterdir()} == first
    assert "livekit_agents-1.8.9+fork.1-py3-none-any.whl" in first
    with tarfile.open(fileobj=io.BytesIO(first["livekit_agents-1.8.9+fork.1.tar.gz"])) as tar:
        member = tar.extractfile("livekit_agents-1.8.9+fork.1/livekit/agents/version.py")
        assert member is not None
        assert member.read().decode().endswith('__version__ = "1.8.9+fork.1"\n# fork test\n')


def test_prepare_refuses_to_discard_work(fork: Path) -> None:
    add_patch(fork)
    work = fork / "build/work/livekit-agents"
    (work / AGENTS_VERSION_FILE).write_text("dirty")
    res = lkfork(fork, "prepare", "livekit-agents")
    assert res.returncode == 1 and "uncommitted changes" in res.stderr
    assert lkfork(fork, "export", "livekit-agents").returncode == 1
    gitutil.git(work, "checkout", "-q", "--", ".")
    commit_edit(fork, f"Second\n\n{TRAILERS}")
    res = lkfork(fork, "prepare", "livekit-agents")
    assert res.returncode == 1 and "not exported" in res.stderr
    assert lkfork(fork, "prepare", "--force", "livekit-agents").returncode == 0


def test_hand_edited_patch_fails_the_round_trip(fork: Path) -> None:
    patch = add_patch(fork)
    # git am still takes it without the index line, but export writes one: the round trip differs
    lines = patch.read_text().splitlines(keepends=True)
    patch.write_text("".join(line for line in lines if not line.startswith("index ")))
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 1 and "differs from its export" in res.stderr


def test_unknown_package_and_outside_repo(fork: Path, tmp_path: Path) -> None:
    res = lkfork(fork, "build", "livekit-plugins-nope")
    assert res.returncode == 1 and "unknown package 'livekit-plugins-nope'" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "lkfork", "check"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 1 and "not inside the fork's repository" in res.stderr


def test_index_serves_the_builds(fork: Path) -> None:
    assert lkfork(fork, "index").returncode == 1  # nothing built yet
    assert lkfork(fork, "build", "livekit-plugins-aws").returncode == 0
    res = lkfork(fork, "index")
    assert res.returncode == 0, res.stderr
    page = (fork / "dist/simple/livekit-plugins-aws/index.html").read_text()
    assert 'href="../../livekit_plugins_aws-1.8.9+fork.1-py3-none-any.whl#sha256=' in page
