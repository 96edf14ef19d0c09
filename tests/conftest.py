"""Shared fixtures: strict per-test hygiene (autouse) and an AgentSession factory.

Hygiene, applied to every test (see ``tests/fakes/hygiene.py``); a violation fails the test's
teardown with a ``[hygiene]`` message and is stored in ``item.stash[HYGIENE_KEY]``:

* asyncio tasks created during the test still running after it (1 s grace, then cancelled),
  or garbage-collected while pending during it;
  tolerate known ones with ``@pytest.mark.allow_leaked_tasks(r"regex on 'name (coro) at file'")``;
* ``AgentSession`` started during the test and never closed (it is closed for you);
* ERROR+ records on the ``livekit`` logger tree; declare expected ones with
  ``@pytest.mark.allow_error_logs(r"regex", ...)`` (add ``expected=True`` to also require
  them), or at runtime via the ``error_logs`` fixture: ``error_logs.allow(r"regex")``.

When the test itself already failed, hygiene still cleans up but does not add a second error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession

from tests.fakes import session as fake_session
from tests.fakes.hygiene import (
    HYGIENE_KEY,
    DestroyedTaskRecorder,
    ErrorLogCapture,
    SessionTracker,
    settle_tasks,
)
from tests.fakes.session import MakeSession
from tests.fakes.sync import DEFAULT_TIMEOUT, bounded

_CALL_REPORT_KEY = pytest.StashKey[pytest.TestReport]()
TASK_GRACE_SECONDS = 1.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "allow_error_logs(*patterns, expected=False): tolerate ERROR log records of the "
        "livekit loggers matching any regex; expected=True also requires each to appear",
    )
    config.addinivalue_line(
        "markers",
        "allow_leaked_tasks(*patterns): tolerate (still cancel) tasks left running after the "
        "test whose 'name (coro) at file:line' matches any regex",
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT_KEY] = report
    return report


@pytest.fixture
def error_logs(request: pytest.FixtureRequest) -> Iterator[ErrorLogCapture]:
    """ERROR+ records of the ``livekit`` loggers during this test; ``.allow(regex)`` to
    tolerate some, ``.allow(regex, expected=True)`` to require them, ``.records`` to inspect."""
    capture = ErrorLogCapture()
    for marker in request.node.iter_markers("allow_error_logs"):
        capture.allow(*marker.args, expected=bool(marker.kwargs.get("expected", False)))
    capture.install()
    try:
        yield capture
    finally:
        capture.uninstall()


@pytest.fixture(autouse=True)
async def _hygiene(
    request: pytest.FixtureRequest,
    error_logs: ErrorLogCapture,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[None]:
    tracker = SessionTracker()
    tracker.install(monkeypatch)
    destroyed = DestroyedTaskRecorder(asyncio.get_running_loop())
    destroyed.install()
    baseline = set(asyncio.all_tasks())

    yield

    allowed_tasks = [p for m in request.node.iter_markers("allow_leaked_tasks") for p in m.args]
    failures: list[str] = []
    try:
        failures += await tracker.close_unclosed()
        failures += await settle_tasks(baseline, grace=TASK_GRACE_SECONDS, allowed=allowed_tasks)
        failures += destroyed.failures(allowed=allowed_tasks)
    finally:
        destroyed.uninstall()
    failures += error_logs.failures()
    if not failures:
        return

    request.node.stash[HYGIENE_KEY] = failures
    call_report = request.node.stash.get(_CALL_REPORT_KEY, None)
    if call_report is not None and call_report.failed:
        return  # the test already failed; don't pile a teardown error on top
    pytest.fail("[hygiene]\n" + "\n\n".join(failures), pytrace=False)


@pytest.fixture
async def make_session() -> AsyncIterator[MakeSession]:
    """``session = await make_session(agent, llm=fake, tts=..., audio_output=...)``.

    Builds an offline session (``tests.fakes.session.offline_session_kwargs``), starts it and
    closes it at teardown (before the hygiene checks run).
    """
    sessions: list[AgentSession[Any]] = []

    async def _make(agent: Agent, **kwargs: Any) -> AgentSession[Any]:
        session = await fake_session.start_session(agent, **kwargs)
        sessions.append(session)
        return session

    yield _make

    for session in reversed(sessions):
        await bounded(session.aclose(), DEFAULT_TIMEOUT, what="AgentSession.aclose")


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The recording fake of the Bedrock stream, installed for Nova Sonic (Python 3.12+)."""
    from tests.fakes.bedrock_stream import offline_bedrock

    return offline_bedrock(monkeypatch)
