"""The series as upstream PRs: Depends: trailers checked by `lkfork check`, the PR folders of
`lkfork export-upstream` (upstream test inside the patch, ISSUE.md, what is missing), and the
parts of `lkfork verify-upstream` that need no upstream checkout or network."""

from __future__ import annotations

from pathlib import Path

import pytest

from lkfork import gitutil
from lkfork.verify_upstream import Outcome, PRResult, export_checkout, parse_junit

from .conftest import lkfork
from .test_lkfork import AGENTS_VERSION_FILE, TRAILERS, commit_edit

pytestmark = pytest.mark.tooling

PATCHES = "livekit-agents/patches"


def two_stacked_patches(root: Path, depends: str = "") -> tuple[Path, Path]:
    """0001 adds a line; 0002 edits that very line, so it only applies on top of 0001."""
    assert lkfork(root, "prepare", "livekit-agents").returncode == 0
    commit_edit(root, f"Add a marker\n\nWhy.\n\n{TRAILERS}", line="MARKER = 1\n")
    work = root / "build/work/livekit-agents"
    path = work / AGENTS_VERSION_FILE
    path.write_text(path.read_text().replace("MARKER = 1\n", "MARKER = 2\n"))
    gitutil.git(
        work,
        "commit",
        "-q",
        "-a",
        "-m",
        f"Bump the marker\n\nWhy.\n\n{TRAILERS}{depends}",
        env={"GIT_AUTHOR_DATE": "@1700000000 +0000"},
    )
    res = lkfork(root, "export", "livekit-agents")
    assert res.returncode == 0, res.stderr
    first, second = sorted((root / PATCHES).glob("*.patch"))
    return first, second


def test_a_patch_that_needs_an_earlier_one_must_say_so(fork: Path) -> None:
    _, second = two_stacked_patches(fork)
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 1
    assert (
        f"{second.name}: does not apply to livekit-agents 1.8.9 with only the patches it depends on (none)"
        in (res.stderr)
    )
    assert "add the missing 'Depends:' trailer" in res.stderr


def test_depends_trailer_by_name_without_number(fork: Path) -> None:
    two_stacked_patches(fork, depends="Depends: Add-a-marker\n")
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(
    ("depends", "error"),
    [
        ("Depends: No-such-patch\n", "'Depends: No-such-patch' names no patch of the series"),
        ("Depends: Bump-the-marker\n", "'Depends: Bump-the-marker' names a patch that comes after it"),
    ],
)
def test_bad_depends_trailer(fork: Path, depends: str, error: str) -> None:
    two_stacked_patches(fork, depends=depends)
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 1 and error in res.stderr


def test_upstream_material_of_no_patch_is_reported(fork: Path) -> None:
    two_stacked_patches(fork, depends="Depends: Add-a-marker\n")
    (fork / PATCHES / "upstream/Renamed-away").mkdir(parents=True)
    res = lkfork(fork, "check", "livekit-agents")
    assert res.returncode == 1
    assert "livekit-agents/patches/upstream/Renamed-away: no patch of the series is named" in res.stderr


def test_export_upstream_puts_the_test_in_the_patch(fork: Path, tmp_path: Path) -> None:
    first, second = two_stacked_patches(fork, depends="Depends: Add-a-marker\n")
    beside = fork / PATCHES / "upstream/Bump-the-marker"
    beside.mkdir(parents=True)
    (beside / "test_marker.py").write_text("def test_marker() -> None:\n    assert True\n")
    (beside / "ISSUE.md").write_text("# The marker is 1\n")
    out = tmp_path / "out"
    res = lkfork(fork, "export-upstream", "livekit-agents", "--out", str(out))
    assert res.returncode == 0, res.stderr
    folder = out / "livekit-agents" / second.stem
    assert sorted(p.name for p in folder.iterdir()) == sorted([first.name, second.name, "PR.md", "ISSUE.md"])
    sent = (folder / second.name).read_text()
    assert "b/tests/test_marker.py" in sent and "MARKER = 2" in sent
    body = (folder / "PR.md").read_text()
    assert "## Depends on\n\n- Add-a-marker" in body and "`tests/test_marker.py`" in body
    # the first PR has neither a test nor an issue: listed as not ready, not silently exported
    assert "not ready to send" in res.stdout
    assert f"{first.name}: no upstream test in livekit-agents/patches/upstream/Add-a-marker/" in res.stdout
    assert f"{second.name}: not verified on an upstream checkout" in res.stdout
    assert f"{second.name}: no upstream issue" not in res.stdout  # TRAILERS cite an issue


def test_export_upstream_adds_the_shared_helper_a_test_imports(fork: Path, tmp_path: Path) -> None:
    first, second = two_stacked_patches(fork, depends="Depends: Add-a-marker\n")
    upstream = fork / PATCHES / "upstream"
    (upstream / "_support").mkdir(parents=True)  # no patch of that name: not reported as stray
    (upstream / "_support/fake_marker.py").write_text("MARKER = 2\n")
    (upstream / "_support/fake_unused.py").write_text("UNUSED = 1\n")
    for key, test in (
        ("Add-a-marker", "def test_a() -> None:\n    pass\n"),
        (
            "Bump-the-marker",
            "from .fake_marker import MARKER\n\n\ndef test_b() -> None:\n    assert MARKER == 2\n",
        ),
    ):
        (upstream / key).mkdir()
        (upstream / key / f"test_{key[:3].lower()}.py").write_text(test)
    assert lkfork(fork, "check", "livekit-agents").returncode == 0
    out = tmp_path / "out"
    res = lkfork(fork, "export-upstream", "livekit-agents", "--out", str(out))
    assert res.returncode == 0, res.stderr
    sent = (out / "livekit-agents" / second.stem / second.name).read_text()
    assert "b/tests/fake_marker.py" in sent and "b/tests/fake_unused.py" not in sent
    assert "`tests/fake_marker.py` (helper)" in (out / "livekit-agents" / second.stem / "PR.md").read_text()
    # a PR whose tests import no helper carries none
    assert "fake_marker" not in (out / "livekit-agents" / first.stem / first.name).read_text()


def test_junit_outcomes_and_the_pr_verdict(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_x" name="test_ok"/>'
        '<testcase classname="tests.test_x" name="test_bug"><failure message="AssertionError: 2 != 1">'
        "tb</failure></testcase>"
        '<testcase classname="tests.test_x" name="test_setup"><error message="fixture"/></testcase>'
        "</testsuite></testsuites>"
    )
    got = parse_junit(xml)
    assert got.results == {
        "tests.test_x::test_ok": "passed",
        "tests.test_x::test_bug": "failed",
        "tests.test_x::test_setup": "error",
    }
    assert got.summary() == "1 passed, 1 failed, 1 error"
    red = Outcome({"t": "failed"}, {"t": "AssertionError"})
    green = Outcome({"t": "passed"}, {"t": ""})
    assert PRResult(None, red, green).ok  # type: ignore[arg-type]
    assert not PRResult(None, green, green).ok  # type: ignore[arg-type]  # not red on stock
    assert not PRResult(None, Outcome({"t": "error"}, {"t": ""}), green).ok  # type: ignore[arg-type]
    assert not PRResult(None, red, red).ok  # type: ignore[arg-type]
    assert not PRResult(None, red, Outcome()).ok  # type: ignore[arg-type]  # nothing ran patched


def test_the_record_of_a_red_test_is_the_same_every_run() -> None:
    # an assertion on objects names their addresses, which differ from run to run
    red = Outcome({"t": "failed"}, {"t": "assert <m.A object at 0x7fba48dd2ea0> is <m.B object at 0x7f1>"})
    report = PRResult(None, red, Outcome({"t": "passed"}, {"t": ""})).report()  # type: ignore[arg-type]
    assert "(assert <m.A object> is <m.B object>)" in report
    short = Outcome({"t": "failed"}, {"t": "assert [<livekit.age...7fc77d0d32c0>] == ['bees']"})
    report = PRResult(None, short, Outcome({"t": "passed"}, {"t": ""})).report()  # type: ignore[arg-type]
    assert "(assert [<livekit.age...>] == ['bees'])" in report
    # with several red tests, each says why it failed
    two = Outcome(
        {"m::test_a": "failed", "m::test_b": "failed"},
        {"m::test_a": "AssertionError: a", "m::test_b": "AssertionError: b"},
    )
    report = PRResult(None, two, Outcome({"t": "passed"}, {"t": ""})).report()  # type: ignore[arg-type]
    assert report.splitlines() == [
        "- stock: 2 failed",
        "  - `test_a`: AssertionError: a",
        "  - `test_b`: AssertionError: b",
        "- patched: 1 passed",
    ]
    # a red test without a message is listed too
    bare = Outcome({"m::test_a": "failed", "m::test_b": "failed"}, {"m::test_a": "AssertionError: a"})
    report = PRResult(None, bare, Outcome({"t": "passed"}, {"t": ""})).report()  # type: ignore[arg-type]
    assert "  - `test_b`: no message" in report.splitlines()


def test_the_suite_record_holds_only_for_the_wheels_it_ran(tmp_path: Path) -> None:
    from lkfork.verify_upstream import _FINGERPRINT, SUITE_RECORD, fingerprint, suite_record

    a, b = tmp_path / "a-1.whl", tmp_path / "b-1.whl"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    assert fingerprint([a, b]) == fingerprint([b, a])
    assert suite_record(tmp_path, [a, b]) is None  # nothing recorded
    record = tmp_path / SUITE_RECORD
    record.parent.mkdir(parents=True)
    line = "- upstream's suite, whole series applied: 9 pass on stock and patched, 0 pass on stock only"
    record.write_text(
        f"On a day, with `lkfork verify-upstream --suite`:\n{line}\n  - stock: 9 passed, 1 failed\n"
        f"  - patched: 9 passed, 1 failed\n\n{_FINGERPRINT}{fingerprint([a, b])}\n"
    )
    assert suite_record(tmp_path, [a, b]) == line
    b.write_bytes(b"b, changed")  # other code: the record no longer holds
    assert suite_record(tmp_path, [a, b]) is None


def test_checkout_from_a_git_repository_takes_only_tests_and_config(tmp_path: Path) -> None:
    src = tmp_path / "upstream"
    (src / "tests").mkdir(parents=True)
    (src / "tests/fake_llm.py").write_text("# upstream's helper\n")
    (src / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (src / "livekit-agents").mkdir()
    (src / "livekit-agents/big.py").write_text("x = 1\n")
    gitutil.init(src)
    gitutil.git(src, "add", "-A")
    gitutil.git(src, "commit", "-q", "-m", "upstream")
    dest = tmp_path / "checkout"
    used = export_checkout(src, dest)
    assert used.startswith("upstream commit ")
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "pyproject.toml",
        "tests",
        "tests/fake_llm.py",
    ]
    with pytest.raises(Exception, match="not an upstream checkout"):
        export_checkout(tmp_path / "nowhere", tmp_path / "c2")


def test_verify_upstream_needs_a_checkout(fork: Path) -> None:
    res = lkfork(fork, "verify-upstream", "livekit-agents")
    assert res.returncode == 2 and "--checkout" in res.stderr


def test_upstream_test_environment_pins_our_packages_with_their_extras(tmp_path: Path) -> None:
    from lkfork.config import find_root, load_packages
    from lkfork.errors import ForkError
    from lkfork.verify_upstream import REQUIREMENTS, _requirements

    root = find_root(Path(__file__))
    reqs = _requirements(root, load_packages(root))
    assert reqs[:3] == [
        "livekit-agents[openai,google,aws,silero,deepgram,elevenlabs,cartesia,anthropic,mcp]==1.8.9",
        "livekit-plugins-google==1.8.9",
        "livekit-plugins-aws[realtime]==1.8.9",
    ]
    assert any(r.startswith("pytest") for r in reqs[3:])
    (tmp_path / REQUIREMENTS).parent.mkdir(parents=True)
    (tmp_path / REQUIREMENTS).write_text("extras livekit-plugins-openai: realtime\n")
    with pytest.raises(ForkError, match="extras for livekit-plugins-openai, which we do not ship"):
        _requirements(tmp_path, load_packages(root))


def test_verify_upstream_only_selects_prs_by_name_key_or_number(fork: Path) -> None:
    from lkfork.config import find_root, load_packages
    from lkfork.errors import ForkError
    from lkfork.verify_upstream import select

    first, second = two_stacked_patches(fork, depends="Depends: Add-a-marker\n")
    pkgs = load_packages(fork)
    assert [pr.name for _, pr in select(pkgs, None)] == [first.name, second.name]
    for name in ("0002", "2", "Bump-the-marker", second.name, second.stem):
        assert [pr.name for _, pr in select(pkgs, [name])] == [second.name], name
    # several, in series order whatever the order asked
    assert [pr.name for _, pr in select(pkgs, ["Bump-the-marker", "1"])] == [first.name, second.name]
    with pytest.raises(ForkError, match="--only No-such-patch: no patch of"):
        select(pkgs, ["No-such-patch"])
    # a number names a patch of every package that has one: the package must be given
    real = load_packages(find_root(Path(__file__)))
    with pytest.raises(ForkError, match="--only 0001: names more than one patch"):
        select(real, ["0001"])
    assert len(select([p for p in real if p.distribution == "livekit-plugins-aws"], ["0001"])) == 1


def test_verify_upstream_only_fails_on_a_wrong_name_before_any_work(fork: Path, tmp_path: Path) -> None:
    two_stacked_patches(fork)
    res = lkfork(
        fork, "verify-upstream", "--checkout", str(tmp_path / "nowhere"), "--only", "0009", "livekit-agents"
    )
    assert res.returncode == 1
    assert "--only 0009: no patch of livekit-agents" in res.stderr
    assert not (fork / "build/verify").exists()  # no checkout read, no environment made


def test_a_folded_subject_is_read_whole(tmp_path: Path) -> None:
    """git format-patch folds a long subject onto a continuation line; the PR's title (PR.md's
    first line) is the whole subject, not its first line."""
    from lkfork.patches import parse

    patch = tmp_path / "0001-fix-voice-run-on_exit-once-when-the-session-closes-d.patch"
    patch.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Maintainers <maintainers@example.com>\n"
        "Subject: [PATCH] fix(voice): run on_exit once when the session closes during\n"
        " a handoff\n"
        "\n"
        "Body.\n"
        "\n"
        "Bug: not-yet\n"
        "Forwarded: not-yet\n"
        "---\n"
        "diff --git a/x.py b/x.py\n"
        "--- a/x.py\n"
        "+++ b/x.py\n"
        "@@ -1 +1 @@\n"
        "-a\n"
        "+b\n"
    )
    assert parse(patch).subject == "fix(voice): run on_exit once when the session closes during a handoff"
