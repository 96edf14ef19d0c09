"""The red-on-stock proof, as a pytest plugin (loaded from pyproject's addopts).

``--prove`` keeps only the tests marked ``upstream_bug(ref)`` and inverts their verdict:
each must fail on the environment under test (stock upstream). A marked test that passes
there fails the run, because either it does not catch the bug it names or upstream has
fixed that bug (then drop the patch and keep the test as a guard, see MAINTAINING.md).

``--lk-env fork|stock`` makes the run refuse to start on the wrong environment, so a
proof can never silently run against the patched build (or the tests against stock).
"""

from __future__ import annotations

from collections.abc import Generator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest

_RED = pytest.StashKey[bool]()
_PASSED_CALL = pytest.StashKey[bool]()
_RED_COUNT = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fork proof")
    group.addoption("--prove", action="store_true", help="require every upstream_bug test to fail")
    group.addoption(
        "--lk-env", choices=("fork", "stock"), help="assert which livekit-agents build is installed"
    )


def _installed() -> str:
    try:
        return version("livekit-agents")
    except PackageNotFoundError:
        return "not installed"


def pytest_configure(config: pytest.Config) -> None:
    env = config.getoption("lk_env")
    if env is None:
        return
    v = _installed()
    is_fork = "+" in v
    if (env == "fork") != is_fork:
        raise pytest.UsageError(f"--lk-env {env}: but livekit-agents {v} is installed here")


def pytest_report_header(config: pytest.Config) -> str:
    mode = "proof run: upstream_bug tests must FAIL" if config.getoption("prove") else "normal run"
    return f"livekit-agents {_installed()} ({mode})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("prove"):
        return
    kept = [i for i in items if i.get_closest_marker("upstream_bug")]
    config.hook.pytest_deselected(items=[i for i in items if i not in kept])
    items[:] = kept
    for item in kept:
        marker = item.get_closest_marker("upstream_bug")
        assert marker is not None
        ref = marker.args[0] if marker.args else None
        if not isinstance(ref, str) or ("#" not in ref and not ref.startswith("not-yet: ")):
            raise pytest.UsageError(
                f"{item.nodeid}: upstream_bug needs a reference like 'livekit/agents#5936', "
                "or 'not-yet: <what breaks>' for a bug with no upstream issue yet"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    if not item.config.getoption("prove"):
        return
    rep: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("upstream_bug")
    if marker is None or rep.when == "setup" and not rep.failed:
        return
    ref = marker.args[0]
    if rep.when == "setup":
        # A broken fixture proves nothing about the bug: leave the error as it is.
        return
    if rep.when == "call":
        if rep.skipped:
            rep.outcome = "failed"
            rep.longrepr = f"{item.nodeid} [{ref}] was skipped on stock: a proof needs it to run and fail"
        elif rep.failed:
            _mark_red(item)
            rep.sections.append(("proof", f"red on stock as required [{ref}]"))
            rep.outcome = "passed"
        else:
            item.stash[_PASSED_CALL] = True
        return
    # teardown: hygiene checks (leaked tasks, unclosed sessions, error logs) count as red too.
    if rep.failed:
        if not item.stash.get(_RED, False):
            _mark_red(item)
        rep.outcome = "passed"
        rep.longrepr = None
    elif item.stash.get(_PASSED_CALL, False) and not item.stash.get(_RED, False):
        rep.outcome = "failed"
        rep.longrepr = (
            f"PROOF FAILED: {item.nodeid} [{ref}] passed on stock livekit-agents {_installed()}.\n"
            "Either the test does not catch the bug it names, or upstream fixed it "
            "(then drop the patch and keep the test as a guard)."
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("prove") and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        # Nothing claims to catch an upstream bug, so there is nothing to prove.
        session.exitstatus = pytest.ExitCode.OK


def _mark_red(item: pytest.Item) -> None:
    item.stash[_RED] = True
    item.config.stash.setdefault(_RED_COUNT, []).append(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("prove"):
        return
    red = config.stash.get(_RED_COUNT, [])
    terminalreporter.write_sep("=", f"proof: {len(red)} upstream_bug tests were red on stock, as required")
