"""Review of 0021: an inline ``AgentTask`` completes while its own inline task runs, and the
session closes before the completed task got back to its ``__await_impl()``.

The desk's tool awaits a verification task, whose tool awaits a lookup task; the verification
task completes in its ``on_enter()`` while the lookup runs, and the session closes before the
verification task's wait resumed. ``AgentTask.__await_impl()`` waits for the task it awaits
only while the session is not closing: past that, it takes the lookup for an
``update_agent()``, leaves the desk behind, and nobody closes the verification task's
activity (its ``on_exit()`` never runs, its scheduling task outlives the session). Closing,
the lookup hands back to the verification task as it would otherwise, and then the
verification task to the desk: every activity exits, innermost first. Stock cancels the
chain recursively (``RecursionError``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool

from tests.fakes import BoundedWaitTimeout, Gate, Journal, JournalingTask, MakeSession, ScriptedLLM, bounded
from tests.regression.test_task_completing_while_its_own_task_runs import (
    CHECK_ME,
    FIND_IT,
    LOOKUP,
    VERIFY,
    Desk,
    answer,
)

BUG = pytest.mark.upstream_bug(
    "not-yet: an inline task completing while its own inline task runs is never left"
)


class Lookup(JournalingTask[str]):
    def __init__(self, journal: Journal, gate: Gate, cancelled: asyncio.Event) -> None:
        super().__init__(journal, name="lookup", instructions=LOOKUP)
        self.gate = gate
        self.cancelled = cancelled

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.gate.wait()
        if not self.done():
            self.complete("record 7")

    def cancel(self) -> None:
        # the session's close cancels the innermost task first
        super().cancel()
        self.cancelled.set()


class Verify(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="verify", instructions=VERIFY)
        self.verified = Gate("verify's on_enter")
        self.after = Gate("verify's on_enter, completed")
        self.found = Gate("lookup's on_enter")
        self.lookup_cancelled = asyncio.Event()
        self.completed = asyncio.Event()

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.verified.wait()
        self.complete("verified")
        self.completed.set()
        await self.after.wait()

    @function_tool
    async def find_record(self) -> str:
        """Find the caller's record."""
        result = await Lookup(self.journal, self.found, self.lookup_cancelled)
        self.journal.results.append(result)
        return result


@BUG
async def test_a_task_completed_under_its_own_task_as_the_session_closes_exits(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    verify = Verify(journal)
    desk = Desk(journal, verify)  # type: ignore[arg-type]
    session: Any = await make_session(desk, llm=ScriptedLLM([], fallback=answer))

    session.generate_reply(user_input=CHECK_ME)
    closing: asyncio.Future[None] | None = None
    close_error: BaseException | None = None
    try:
        await verify.verified.reached()
        session.generate_reply(user_input=FIND_IT)
        await verify.found.reached()
        # the verification task completes while the lookup runs; its on_enter goes on
        verify.verified.open()
        await bounded(verify.completed.wait(), what="verify completing")
        # the session closes before the verification task's await resumes
        closing = asyncio.ensure_future(session.aclose())
        await bounded(verify.lookup_cancelled.wait(), what="the close cancelling the lookup")
    finally:
        verify.verified.open()
        verify.after.open()
        verify.found.open()
    try:
        await bounded(closing, what="the session closing")
    except (RecursionError, BoundedWaitTimeout) as e:  # stock
        close_error = e

    # the bug: the verification task's activity is never closed (no on_exit)
    assert journal.events == [
        "enter desk",
        "enter verify",
        "enter lookup",
        "exit lookup",
        "exit verify",
        "exit desk",
    ], close_error
    assert close_error is None
