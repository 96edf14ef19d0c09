"""What every stress scenario checks around its session, whatever drives it: ERROR records
on the livekit loggers, exceptions the loop's handler sees ("Task exception was never
retrieved"), tasks left running and tasks destroyed while pending."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from tests.fakes import ErrorLogCapture
from tests.fakes.hygiene import DestroyedTaskRecorder, settle_tasks

from . import invariants as inv
from .invariants import Violation


class ScenarioHygiene:
    """``install()`` before the session is made; ``await close()`` in the scenario's
    ``finally``; then ``violations()``."""

    def __init__(self, allowed_errors: Iterable[str]) -> None:
        self._capture = ErrorLogCapture()
        self._capture.allow(*allowed_errors)
        self._destroyed: DestroyedTaskRecorder | None = None
        self._unhandled: list[str] = []
        self._baseline: set[asyncio.Task[Any]] = set()
        self._leaks: list[str] = []

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self._capture.install()
        destroyed = self._destroyed = DestroyedTaskRecorder(loop)
        destroyed.install()

        def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if exc is not None:  # e.g. "Task exception was never retrieved"
                self._unhandled.append(f"{context.get('message')}: {exc!r}")
            destroyed._handle(loop, context)

        loop.set_exception_handler(on_loop_error)
        self._baseline = set(asyncio.all_tasks())

    async def close(self) -> None:
        assert self._destroyed is not None, "install() first"
        self._leaks = await settle_tasks(self._baseline, grace=inv.TASK_GRACE)
        self._destroyed.uninstall()  # also drops on_loop_error
        self._capture.uninstall()

    def violations(self) -> list[Violation]:
        assert self._destroyed is not None, "install() first"
        out = [Violation("no_leaked_tasks", msg) for msg in self._leaks + self._destroyed.failures()]
        out += [Violation("no_unexpected_error_logs", msg[:300]) for msg in self._unhandled]
        out += [
            Violation("no_unexpected_error_logs", f"[{r.name}] {r.getMessage()}"[:300])
            for r in self._capture.unexpected()
        ]
        return out
