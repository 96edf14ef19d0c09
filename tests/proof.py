"""The red-on-stock proof, as a pytest plugin (loaded from pyproject's addopts).

``--prove`` keeps only the tests marked ``upstream_bug(ref)`` and inverts their verdict: each
must fail on the environment under test (stock upstream) *for the bug it names*. A marked test
that passes there fails the run, because either it does not catch the bug or upstream has
fixed it (then drop the patch and keep the test as a guard, see MAINTAINING.md).

What counts as red for the bug, in the test's call phase only:

* an ``AssertionError`` raised by the test module's own code (an ``assert`` in the test or in
  a helper defined in its module, or ``pytest.fail(...)`` called from there);
* an exception the marker declares: ``upstream_bug(ref, raises=KeyError)`` when the bug *is*
  that exception (only that type, and its subclasses, counts); ``match="regex"`` narrows it
  to messages it finds (``re.search``), as ``pytest.raises`` does. A bug that *is* a hang
  declares the one wait that never ends:
  ``upstream_bug(ref, raises=BoundedWaitTimeout, match="session.run\\(\\) after the handoff")``;
* pytest.raises' ``DID NOT RAISE X`` only when the marker declares
  ``upstream_bug(ref, missing_raise=X)``: the bug is that stock does not raise ``X``.

Anything else proves nothing about the bug and fails the proof with its reason: setup errors,
teardown failures (the hygiene fixture's leaked tasks, unclosed sessions, error logs),
timeouts (``BoundedWaitTimeout``, ``asyncio.TimeoutError``) unless declared with ``raises=``,
other exceptions, an ``AssertionError`` raised inside a fake or the library, and a
``DID NOT RAISE`` nobody declared (a test of new fork API: mark it ``fork_api``).
Each verdict, with the exception type and message that decided it, is printed in the terminal
summary and attached to the test's report.

``fork_api`` marks tests of API the fork adds: they are never part of the proof, and a
``--lk-env stock`` run skips them.

``--lk-env fork|stock`` makes the run refuse to start on the wrong environment, so a proof can
never silently run against the patched build (or the tests against stock).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Generator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest

_VERDICT = pytest.StashKey["Verdict"]()
_VERDICTS = pytest.StashKey[list["Verdict"]]()
_CALLED = pytest.StashKey[bool]()
_PYTEST_DIR = os.path.dirname(pytest.__file__)
_PYTEST_PRIVATE_DIR = os.path.dirname(_PYTEST_DIR) + os.sep + "_pytest"
_MSG_LEN = 160


@dataclass
class Verdict:
    nodeid: str
    ref: str
    red: bool
    reason: str
    """``ExceptionType: first line of its message``, or what happened instead."""
    note: str = ""

    def line(self) -> str:
        head = "RED    " if self.red else "NOT RED"
        note = f" ({self.note})" if self.note else ""
        return f"{head} {self.nodeid} [{self.ref}]: {self.reason}{note}"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fork proof")
    group.addoption(
        "--prove", action="store_true", help="require every upstream_bug test to fail for its bug"
    )
    group.addoption(
        "--lk-env", choices=("fork", "stock"), help="assert which livekit-agents build is installed"
    )


def _installed() -> str:
    try:
        return version("livekit-agents")
    except PackageNotFoundError:
        return "not installed"


def pytest_configure(config: pytest.Config) -> None:
    if not any(m.startswith("fork_api") for m in config.getini("markers")):
        config.addinivalue_line(
            "markers", "fork_api: a test of API the fork adds; runs on the fork only, never proven"
        )
    if config.getoption("prove", default=False):
        # an xfail marks what the fork does not fix yet; stock must still fail for the bug,
        # so the proof runs those tests as plain tests (pytest --runxfail)
        config.option.runxfail = True
    env = config.getoption("lk_env")
    if env is None:
        return
    v = _installed()
    is_fork = "+" in v
    if (env == "fork") != is_fork:
        raise pytest.UsageError(f"--lk-env {env}: but livekit-agents {v} is installed here")


def pytest_report_header(config: pytest.Config) -> str:
    mode = (
        "proof run: upstream_bug tests must FAIL for their bug" if config.getoption("prove") else "normal run"
    )
    return f"livekit-agents {_installed()} ({mode})"


def _declared(marker: pytest.Mark, key: str, nodeid: str) -> tuple[type[BaseException], ...]:
    value = marker.kwargs.get(key, ())
    types = value if isinstance(value, tuple) else (value,)
    for t in types:
        if not (isinstance(t, type) and issubclass(t, BaseException)):
            raise pytest.UsageError(f"{nodeid}: upstream_bug({key}=...) takes exception types, not {t!r}")
        if key == "raises" and t in (AssertionError, Exception, BaseException):
            raise pytest.UsageError(
                f"{nodeid}: upstream_bug(raises={t.__name__}) would count any timeout or failure as "
                "the bug; an assert in the test already counts, declare the specific exception"
            )
    return types


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("upstream_bug") and item.get_closest_marker("fork_api"):
            raise pytest.UsageError(
                f"{item.nodeid}: upstream_bug and fork_api exclude each other (new API is not an upstream bug)"
            )
    if not config.getoption("prove"):
        if config.getoption("lk_env") == "stock":
            skip = pytest.mark.skip(reason="fork_api: new fork API, runs on the fork only")
            for item in items:
                if item.get_closest_marker("fork_api"):
                    item.add_marker(skip)
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
        declared = _declared(marker, "raises", item.nodeid) + _declared(marker, "missing_raise", item.nodeid)
        match = marker.kwargs.get("match")
        if match is not None and (not isinstance(match, str) or not declared):
            raise pytest.UsageError(f"{item.nodeid}: upstream_bug(match=...) is a regex for raises=")


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > _MSG_LEN:
        first = first[: _MSG_LEN - 3] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return True
    # tests/fakes/sync.py's BoundedWaitTimeout (an AssertionError subclass); by name, so this
    # plugin does not import the fakes (and livekit) to load
    return any(c.__name__ == "BoundedWaitTimeout" for c in type(exc).__mro__)


def _raised_in_module(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """Whether the innermost frame outside pytest's own code belongs to the test's module."""
    module = getattr(item, "module", None)
    path = os.path.realpath(getattr(module, "__file__", None) or str(item.path))
    for entry in reversed(excinfo.traceback):
        filename = os.path.realpath(str(entry.path))
        if filename.startswith((_PYTEST_DIR + os.sep, _PYTEST_PRIVATE_DIR + os.sep)):
            continue
        return filename == path
    return False


def _judge(item: pytest.Item, marker: pytest.Mark, excinfo: pytest.ExceptionInfo[BaseException]) -> Verdict:
    ref = str(marker.args[0])
    exc = excinfo.value
    why = _short(exc)
    raises = _declared(marker, "raises", item.nodeid)
    missing = _declared(marker, "missing_raise", item.nodeid)
    match = marker.kwargs.get("match")
    matches = match is None or re.search(match, str(exc)) is not None
    if raises and isinstance(exc, raises) and matches:
        return Verdict(item.nodeid, ref, True, why, "declared raises=")
    if _is_timeout(exc):
        return Verdict(item.nodeid, ref, False, why, "a timeout: assert what the user sees instead")
    if isinstance(exc, pytest.fail.Exception) and str(exc).startswith("DID NOT RAISE"):
        if missing and matches and any(t.__name__ in str(exc) for t in missing):
            return Verdict(item.nodeid, ref, True, why, "declared missing_raise=")
        return Verdict(
            item.nodeid,
            ref,
            False,
            why,
            "undeclared: mark it fork_api if it tests new API, or declare missing_raise=",
        )
    if isinstance(exc, (AssertionError, pytest.fail.Exception)):
        if _raised_in_module(item, excinfo):
            return Verdict(item.nodeid, ref, True, why)
        return Verdict(item.nodeid, ref, False, why, "raised outside the test module")
    return Verdict(
        item.nodeid, ref, False, why, "not an assertion: declare raises= if the bug is this exception"
    )


def _record(item: pytest.Item, verdict: Verdict) -> None:
    item.stash[_VERDICT] = verdict
    item.config.stash.setdefault(_VERDICTS, []).append(verdict)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    if not item.config.getoption("prove"):
        return
    rep: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("upstream_bug")
    if marker is None:
        return
    ref = str(marker.args[0])
    if rep.when == "setup":
        if rep.failed:
            # A broken fixture proves nothing about the bug: leave the error as it is.
            assert call.excinfo is not None
            _record(item, Verdict(item.nodeid, ref, False, _short(call.excinfo.value), "setup error"))
        return
    if rep.when == "call":
        item.stash[_CALLED] = True
        if rep.skipped:
            rep.outcome = "failed"
            rep.longrepr = f"{item.nodeid} [{ref}] was skipped on stock: a proof needs it to run and fail"
            _record(item, Verdict(item.nodeid, ref, False, "skipped"))
        elif rep.failed:
            assert call.excinfo is not None
            verdict = _judge(item, marker, call.excinfo)
            _record(item, verdict)
            if verdict.red:
                rep.sections.append(("proof", f"red on stock as required: {verdict.reason}"))
                rep.outcome = "passed"
                rep.longrepr = None
            else:
                rep.longrepr = (
                    f"PROOF FAILED: {item.nodeid} [{ref}] failed on stock, but not for the bug: "
                    f"{verdict.reason} ({verdict.note})\n\n{rep.longrepr}"
                )
        return
    # teardown
    verdict = item.stash.get(_VERDICT, None)
    if verdict is None and not item.stash.get(_CALLED, False):
        return  # skipped at setup (a skipif): nothing ran, nothing to judge
    if verdict is None:  # the call passed
        verdict = Verdict(item.nodeid, ref, False, "passed on stock")
        if rep.failed:
            assert call.excinfo is not None
            verdict.reason = "passed its body on stock"
            verdict.note = "only the teardown failed, which does not count: " + _short(call.excinfo.value)
        _record(item, verdict)
        rep.outcome = "failed"
        rep.longrepr = (
            f"PROOF FAILED: {item.nodeid} [{ref}] passed on stock livekit-agents {_installed()}"
            f"{' (' + verdict.note + ')' if verdict.note else ''}.\n"
            "Either the test does not catch the bug it names, or upstream fixed it "
            "(then drop the patch and keep the test as a guard)."
        )
    elif rep.failed:
        # After a failed call the hygiene checks often find what the bug left behind; that
        # says nothing more, so it neither adds an error nor turns a red test green.
        assert call.excinfo is not None
        if verdict.red:
            verdict.note = (verdict.note + "; " if verdict.note else "") + "teardown also failed"
        rep.outcome = "passed"
        rep.longrepr = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("prove") and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        # Nothing claims to catch an upstream bug, so there is nothing to prove.
        session.exitstatus = pytest.ExitCode.OK


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("prove"):
        return
    verdicts = config.stash.get(_VERDICTS, [])
    red = [v for v in verdicts if v.red]
    not_red = [v for v in verdicts if not v.red]
    terminalreporter.write_sep("=", "proof: why each upstream_bug test failed on stock")
    for v in red + not_red:
        terminalreporter.write_line(v.line(), red=not v.red)
    terminalreporter.write_sep(
        "=",
        f"proof: {len(red)} upstream_bug tests were red on stock for the bug, {len(not_red)} were not",
        red=bool(not_red),
        green=not not_red,
    )
