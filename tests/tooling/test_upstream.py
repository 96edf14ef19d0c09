"""The upstream workflow verbs on real releases from PyPI: export-upstream, upstream-status
and rebase. livekit-plugins-aws 1.8.8 -> 1.8.9 changed a few lines of its realtime model
and its version file; a fork pinned at 1.8.8 with four staged patches reaches every state."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from lkfork import gitutil

from .conftest import REPO, lkfork, make_index

pytestmark = [pytest.mark.tooling, pytest.mark.slow]

AWS = "livekit-plugins/livekit-plugins-aws"
PKG = f"{AWS}/livekit/plugins/aws"
RT = f"{PKG}/experimental/realtime/realtime_model.py"
TRAILERS = "Bug: https://github.com/livekit/agents/issues/1\nForwarded: not-yet\n"


def edit(root: Path, rel: str, change: Callable[[list[str]], None], subject: str) -> None:
    """One commit in the prepared aws work tree, as a developer would make it."""
    work = root / "build/work/livekit-plugins-aws"
    path = work / rel
    lines = path.read_text().splitlines(keepends=True)
    change(lines)
    path.write_text("".join(lines))
    gitutil.git(work, "commit", "-q", "-a", "-m", f"{subject}\n\nWhy.\n\n{TRAILERS}")


def line_index(lines: list[str], pattern: str) -> int:
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


@pytest.fixture
def at_188(fork: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fork copy with livekit-plugins-aws pinned to 1.8.8, through the real index."""
    monkeypatch.delenv("LKFORK_INDEX_URL")
    res = lkfork(fork, "pin", "livekit-plugins-aws", "1.8.8")
    assert res.returncode == 0, res.stderr
    assert lkfork(fork, "prepare", "livekit-plugins-aws").returncode == 0
    return fork


def stage_all_states(root: Path) -> None:
    # applies: a file upstream did not touch
    edit(root, f"{PKG}/log.py", lambda ls: ls.append("# fork note\n"), "Note in log")
    # applies only with a 3-way merge: an insertion two lines below a line upstream changed
    edit(
        root,
        RT,
        lambda ls: ls.insert(line_index(ls, r"^MAX_SESSION_DURATION_SECONDS") + 2, "# fork: keep the cap\n"),
        "Comment the session cap",
    )

    # conflicts: the very line upstream rewrote
    def rewrite_debug(ls: list[str]) -> None:
        ls[line_index(ls, r"^lk_bedrock_debug")] = "lk_bedrock_debug = 0\n"

    edit(root, RT, rewrite_debug, "Silence bedrock debug")
    # already upstream: the exact change upstream made
    edit(
        root,
        f"{PKG}/version.py",
        lambda ls: ls.__setitem__(line_index(ls, "__version__"), '__version__ = "1.8.9"\n'),
        "Bump version",
    )
    res = lkfork(root, "export", "livekit-plugins-aws")
    assert res.returncode == 0, res.stderr


def test_upstream_status_reports_every_state(at_188: Path) -> None:
    stage_all_states(at_188)
    res = lkfork(at_188, "upstream-status", "1.8.9", "livekit-plugins-aws", "--json")
    assert res.returncode == 3, res.stderr  # a conflict is reported with its own exit code
    rows = json.loads(res.stdout)
    assert [(r["patch"], r["state"], r["files"]) for r in rows] == [
        ("0001-Note-in-log.patch", "applies", []),
        ("0002-Comment-the-session-cap.patch", "applies-3way", []),
        ("0003-Silence-bedrock-debug.patch", "conflicts", [RT]),
        ("0004-Bump-version.patch", "already-upstream", []),
    ]
    table = lkfork(at_188, "upstream-status", "1.8.9", "livekit-plugins-aws").stdout
    assert "0003-Silence-bedrock-debug.patch" in table and f"conflicts ({RT})" in table


def test_upstream_status_unknown_version(fork: Path) -> None:
    res = lkfork(fork, "upstream-status", "9.9.9", "livekit-plugins-aws")
    assert res.returncode == 1 and "unknown upstream version" in res.stderr and "9.9.9" in res.stderr


def test_rebase_stops_on_conflict_with_the_work_tree_ready(at_188: Path) -> None:
    stage_all_states(at_188)
    before = (at_188 / AWS / "upstream.toml").read_text()
    res = lkfork(at_188, "rebase", "1.8.9", "livekit-plugins-aws")
    assert res.returncode == 1
    assert f"0003-Silence-bedrock-debug.patch conflicts with livekit-plugins-aws 1.8.9 in: {RT}" in res.stderr
    assert (at_188 / AWS / "upstream.toml").read_text() == before  # nothing pinned yet
    work = at_188 / "build/work/livekit-plugins-aws"
    assert (work / ".git/rebase-apply").is_dir(), "left in the middle of git am"
    assert "<<<<<<<" in (work / RT).read_text()


def test_rebase_clean_exports_drops_merged_and_pins(at_188: Path) -> None:
    stage_all_states(at_188)
    patches = at_188 / AWS / "patches"
    # the developer drops the conflicting patch first
    (patches / "0003-Silence-bedrock-debug.patch").unlink()
    series = patches / "series"
    series.write_text(series.read_text().replace("0003-Silence-bedrock-debug.patch\n", ""))
    assert lkfork(at_188, "prepare", "--force", "livekit-plugins-aws").returncode == 0
    assert lkfork(at_188, "export", "livekit-plugins-aws").returncode == 0  # renumbers
    res = lkfork(at_188, "rebase", "1.8.9", "livekit-plugins-aws")
    assert res.returncode == 0, res.stderr
    assert "dropped 0003-Bump-version.patch" in res.stdout
    assert sorted(p.name for p in patches.glob("*.patch")) == [
        "0001-Note-in-log.patch",
        "0002-Comment-the-session-cap.patch",
    ]
    pin = (at_188 / AWS / "upstream.toml").read_text()
    assert 'version = "1.8.9"' in pin and "release = 1" in pin
    real_pin = (REPO / AWS / "upstream.toml").read_text()
    assert re.search(r'sha256 = "(\w+)"', pin)[1] == re.search(r'sha256 = "(\w+)"', real_pin)[1]  # type: ignore[index]
    res = lkfork(at_188, "check", "livekit-plugins-aws")
    assert res.returncode == 0, res.stderr


def test_rebase_refuses_dirty_tree_unknown_version_and_bad_hash(
    at_188: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage_all_states(at_188)
    work = at_188 / "build/work/livekit-plugins-aws"
    (work / f"{PKG}/log.py").write_text("dirty\n")
    res = lkfork(at_188, "rebase", "1.8.9", "livekit-plugins-aws")
    assert res.returncode == 1 and "uncommitted changes" in res.stderr
    gitutil.git(work, "checkout", "-q", "--", ".")
    res = lkfork(at_188, "rebase", "9.9.9", "livekit-plugins-aws")
    assert res.returncode == 1 and "unknown upstream version" in res.stderr
    # an index that serves a tampered 1.8.9 with an honest-looking page
    bad = tmp_path / "bad" / "livekit_plugins_aws-1.8.9.tar.gz"
    bad.parent.mkdir()
    with tarfile.open(bad, "w:gz") as tar:
        tar.add(REPO / "README.md", arcname="livekit_plugins_aws-1.8.9/README.md")
    index = make_index(tmp_path / "evil", {"livekit-plugins-aws": bad})
    page = tmp_path / "evil/livekit-plugins-aws/index.html"
    page.write_text(page.read_text().replace('.tar.gz"', ".tar.gz#sha256=" + "0" * 64 + '"'))
    monkeypatch.setenv("LKFORK_INDEX_URL", index)
    res = lkfork(at_188, "rebase", "1.8.9", "livekit-plugins-aws")
    assert res.returncode == 1 and "sha256 mismatch" in res.stderr and "0" * 64 in res.stderr


def test_export_upstream_real_series(tmp_path: Path, cached_sdists: dict[str, Path]) -> None:
    out = tmp_path / "out"
    res = lkfork(REPO, "export-upstream", "livekit-agents", "--out", str(out))
    assert res.returncode == 0, res.stderr
    exports = sorted(p.name for p in (out / "livekit-agents").iterdir())
    series = [
        n[: -len(".patch")]
        for n in (REPO / "livekit-agents/patches/series").read_text().split()
        if n.endswith(".patch")
    ]
    assert exports == sorted(series)
    for name in series:
        body = (out / "livekit-agents" / name / "PR.md").read_text()
        assert body.startswith("# ") and "## References" in body and "Forwarded:" not in body
        # branch-ready: git am on the pinned sdist laid out at its monorepo path
        repo = tmp_path / "am" / name
        repo.mkdir(parents=True)
        gitutil.init(repo)
        with tarfile.open(cached_sdists["livekit-agents"]) as tar:
            tar.extractall(repo / "_x", filter="data")
        (repo / "_x/livekit_agents-1.8.9").rename(repo / "livekit-agents")
        (repo / "livekit-agents/PKG-INFO").unlink()
        gitutil.git(repo, "add", "-A", "-f")
        gitutil.git(repo, "commit", "-q", "-m", "upstream 1.8.9")
        patches = sorted(str(p) for p in (out / "livekit-agents" / name).glob("*.patch"))
        proc = gitutil.git(repo, "am", "-q", *patches, check=False)
        assert proc.returncode == 0, proc.stderr
