"""Per-test hygiene checks used by ``tests/conftest.py``.

* :class:`ErrorLogCapture` -- collects ERROR+ records of the ``livekit`` logger tree; records
  not matched by an allowed pattern fail the test.
* :class:`SessionTracker` -- records every ``AgentSession`` built during the test (by wrapping
  ``__init__``/``start``/``aclose`` on the class); a session started and never closed fails
  the test (it is closed by the fixture so it cannot leak into later tests).
* :func:`settle_tasks` -- gives tasks created during the test a bounded chance to finish,
  then cancels and reports the ones still running; :class:`DestroyedTaskRecorder` catches
  leaked tasks garbage-collected before that check could see them.

Failures are collected as messages; the conftest fixture stores them on the test item under
:data:`HYGIENE_KEY` (``item.stash[HYGIENE_KEY]``) and then fails the test's teardown.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import sysconfig
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from livekit.agents import AgentSession

from .sync import DEFAULT_TIMEOUT

__all__ = [
    "HYGIENE_KEY",
    "DestroyedTaskRecorder",
    "ErrorLogCapture",
    "SessionTracker",
    "TrackedSession",
    "describe_task",
    "settle_tasks",
]

HYGIENE_KEY = pytest.StashKey[list[str]]()
"""``item.stash[HYGIENE_KEY]``: hygiene failure messages of a test (absent when clean)."""

WATCHED_LOGGER = "livekit"


def _record_text(record: logging.LogRecord) -> str:
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text += f"\n{type(exc).__name__}: {exc}"
    return text


class ErrorLogCapture(logging.Handler):
    """Handler on the ``livekit`` logger collecting ERROR and above."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self._allowed: list[re.Pattern[str]] = []
        self._expected: list[re.Pattern[str]] = []
        self._logger = logging.getLogger(WATCHED_LOGGER)
        self._saved_level: int | None = None

    def install(self) -> None:
        self._logger.addHandler(self)
        # make sure ERROR records are not filtered before reaching the handler
        if self._logger.level > logging.ERROR:
            self._saved_level = self._logger.level
            self._logger.setLevel(logging.ERROR)

    def uninstall(self) -> None:
        self._logger.removeHandler(self)
        if self._saved_level is not None:
            self._logger.setLevel(self._saved_level)
            self._saved_level = None

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def allow(self, *patterns: str, expected: bool = False) -> None:
        """Tolerate ERROR records whose message (plus exception text) matches any pattern
        (``re.search``). With ``expected=True`` each pattern must also match at least once."""
        for p in patterns:
            rx = re.compile(p, re.DOTALL)
            self._allowed.append(rx)
            if expected:
                self._expected.append(rx)

    def matching(self, pattern: str) -> list[logging.LogRecord]:
        rx = re.compile(pattern, re.DOTALL)
        return [r for r in self.records if rx.search(_record_text(r))]

    def unexpected(self) -> list[logging.LogRecord]:
        return [r for r in self.records if not any(rx.search(_record_text(r)) for rx in self._allowed)]

    def missing_expected(self) -> list[str]:
        return [
            rx.pattern for rx in self._expected if not any(rx.search(_record_text(r)) for r in self.records)
        ]

    def failures(self) -> list[str]:
        out: list[str] = []
        if bad := self.unexpected():
            lines = [f"unexpected ERROR log record(s) from {WATCHED_LOGGER!r} loggers:"]
            for r in bad:
                text = _record_text(r).replace("\n", "\n      ")
                lines.append(f"  - [{r.name}] {r.levelname}: {text}")
            lines.append(
                "  (declare expected ones with @pytest.mark.allow_error_logs(r'regex') "
                "or error_logs.allow(r'regex'))"
            )
            out.append("\n".join(lines))
        if missing := self.missing_expected():
            out.append(f"expected ERROR log record(s) never logged: {missing}")
        return out


@dataclass
class TrackedSession:
    session: AgentSession[Any]
    created_at: str
    """``file:line`` of the test code that built it."""
    started: bool = False
    closed: bool = False
    close_events: int = 0
    agent_type: str = "?"
    """Class name of the agent it was (last) started with."""


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})
_FAKES_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_site() -> str:
    """``file:line`` of the innermost caller outside the fakes, stdlib and installed packages."""
    for frame in reversed(traceback.extract_stack()):
        path = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or path.startswith(_FAKES_DIR):
            continue
        if path.startswith(_LIBRARY_DIRS):
            continue
        return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


@dataclass
class SessionTracker:
    """Tracks sessions built while installed (public API only: init/start/aclose/'close')."""

    sessions: list[TrackedSession] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        tracker = self
        orig_init = AgentSession.__init__
        orig_start = AgentSession.start
        orig_aclose = AgentSession.aclose

        @functools.wraps(orig_init)
        def __init__(self: AgentSession[Any], *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            tracked = TrackedSession(session=self, created_at=_caller_site())
            tracker.sessions.append(tracked)

            def _on_close(_: Any) -> None:
                tracked.close_events += 1
                tracked.closed = True

            self.on("close", _on_close)

        @functools.wraps(orig_start)
        async def start(self: AgentSession[Any], *args: Any, **kwargs: Any) -> Any:
            t = tracker._find(self)
            closes_before = t.close_events if t is not None else 0
            agent = args[0] if args else kwargs.get("agent")
            if t is not None and agent is not None:
                t.agent_type = type(agent).__name__
            result = await orig_start(self, *args, **kwargs)
            if t is not None:
                # a (re)start opens the session again unless it already closed meanwhile
                t.started = True
                t.closed = t.close_events > closes_before
            return result

        @functools.wraps(orig_aclose)
        async def aclose(self: AgentSession[Any]) -> None:
            await orig_aclose(self)
            if (t := tracker._find(self)) is not None:
                t.closed = True

        monkeypatch.setattr(AgentSession, "__init__", __init__)
        monkeypatch.setattr(AgentSession, "start", start)
        monkeypatch.setattr(AgentSession, "aclose", aclose)

    def _find(self, session: AgentSession[Any]) -> TrackedSession | None:
        return next((t for t in self.sessions if t.session is session), None)

    def unclosed(self) -> list[TrackedSession]:
        return [t for t in self.sessions if t.started and not t.closed]

    async def close_unclosed(self, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
        """Close leaked sessions; return failure messages (empty when none leaked)."""
        leaked = self.unclosed()
        if not leaked:
            return []
        lines = ["AgentSession(s) started but never closed (closed by the hygiene fixture):"]
        for t in leaked:
            lines.append(f"  - AgentSession running {t.agent_type} created at {t.created_at}")
            try:
                await asyncio.wait_for(t.session.aclose(), timeout)
            except BaseException as e:  # report, keep tearing down
                lines.append(f"      aclose() failed: {type(e).__name__}: {e}")
        return ["\n".join(lines)]


class DestroyedTaskRecorder:
    """Loop exception handler recording tasks garbage-collected while still pending.

    A leaked task that nothing references can be collected before the end-of-test check
    sees it (asyncio then reports "Task was destroyed but it is pending!"). Installed on the
    test's own loop, this attributes such tasks to the test exactly. Every context is still
    passed on to the previous (or default) handler.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._previous = loop.get_exception_handler()
        self.destroyed: list[str] = []

    def install(self) -> None:
        self._loop.set_exception_handler(self._handle)

    def uninstall(self) -> None:
        self._loop.set_exception_handler(self._previous)

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        task = context.get("task")
        if isinstance(task, asyncio.Task) and str(context.get("message", "")).startswith(
            "Task was destroyed but it is pending"
        ):
            coro = task.get_coro()
            self.destroyed.append(f"{task.get_name()} ({getattr(coro, '__qualname__', coro)!r})")
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def failures(self, allowed: Iterable[str] = ()) -> list[str]:
        allowed_rx = [re.compile(p) for p in allowed]
        reported = [d for d in self.destroyed if not any(rx.search(d) for rx in allowed_rx)]
        if not reported:
            return []
        lines = [f"{len(reported)} task(s) garbage-collected while still pending (leaked):"]
        lines += [f"  - {d}" for d in reported]
        return ["\n".join(lines)]


def describe_task(task: asyncio.Task[Any]) -> str:
    """``name (coroutine) at innermost file:line [from outermost file:line]``."""
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", repr(coro))
    stack = task.get_stack()
    if not stack:
        return f"{task.get_name()} ({name})"

    def _loc(frame: Any) -> str:
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"

    where = f" at {_loc(stack[-1])}"
    if len(stack) > 1:
        where += f" from {_loc(stack[0])}"
    return f"{task.get_name()} ({name}){where}"


async def settle_tasks(
    baseline: Iterable[asyncio.Task[Any]],
    *,
    grace: float = 1.0,
    allowed: Iterable[str] = (),
) -> list[str]:
    """Wait up to ``grace`` seconds for tasks not in ``baseline`` to finish; cancel the rest.

    Returns a failure message listing tasks still running after the grace period, except
    those whose description matches an ``allowed`` regex (those are cancelled silently).
    """
    base = set(baseline)
    me = asyncio.current_task()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace

    def leftovers() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if t not in base and t is not me and not t.done()]

    left = leftovers()
    while left:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await asyncio.wait(left, timeout=remaining)
        left = leftovers()  # finishing tasks may have spawned new ones

    if not left:
        return []

    allowed_rx = [re.compile(p) for p in allowed]
    described = [(t, describe_task(t)) for t in left]
    for t, _ in described:
        t.cancel()
    await asyncio.wait([t for t, _ in described], timeout=grace)

    reported = [d for _, d in described if not any(rx.search(d) for rx in allowed_rx)]
    if not reported:
        return []
    lines = [f"{len(reported)} task(s) still running {grace:g}s after the test (now cancelled):"]
    lines += [f"  - {d}" for d in sorted(reported)]
    return ["\n".join(lines)]
