"""Typed input queued during a handoff, then the session closes or the app interrupts.

While a handoff is under way, ``AgentSession.generate_reply(user_input=...)`` queues the input
on the session (``_handoff_input``) until the agent taking over runs. The rules (CONTRIBUTING,
"Speech around a handoff", "Spoken turns"): nothing a user said may be lost, a turn the
session closes on is recorded and needs no answer, and ``session.interrupt()`` interrupts the
replies queued as stock does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import Agent, AgentSession, RunResult, function_tool, llm

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    start_session,
    tool_call,
)
from tests.fakes.history import user_messages

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
TYPED = "My invoice number is 1234."
SPOKEN = "Actually, it's about a refund."


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.billing: Agent | None = None
        self.answered: list[tuple[str | None, str | None]] = []
        self.setup_gate: Gate | None = None
        self.setup_error: Exception | None = None


class SlowSetup(llm.Toolset):
    """An MCP-like toolset: its setup waits on a gate, or fails."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(id="slow_setup")
        self.journal = journal

    async def setup(self) -> SlowSetup:
        if self.journal.setup_gate is not None:
            await self.journal.setup_gate.wait()
        if self.journal.setup_error is not None:
            raise self.journal.setup_error
        return self


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        self.journal.billing = JournalingAgent(
            self.journal, name="billing", instructions=BILLING, tools=[SlowSetup(self.journal)]
        )
        return self.journal.billing


def answering(journal: Journal) -> Any:
    def answer(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
            return Reply(tool_calls=[tool_call("to_billing")])
        if call.tool_choice != "none":
            journal.answered.append((call.instructions, call.last_user_text))
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    return answer


def answers(journal: Journal, text: str) -> list[str | None]:
    return [instructions for instructions, last in journal.answered if last == text]


async def _handoff_held_in_on_exit(
    session: AgentSession[Any], journal: Journal
) -> tuple[RunResult[Any], Gate]:
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    run: RunResult[Any] = session.run(user_input=TO_BILLING)
    await gate.reached()
    return run, gate


# -- the session closes on typed input queued for the agent taking over --


async def test_typed_input_queued_in_a_handoff_the_session_closes_on_is_recorded() -> None:
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await start_session(desk, llm=ScriptedLLM([], fallback=answering(journal)))
    run, gate = await _handoff_held_in_on_exit(session, journal)
    closing: asyncio.Future[None] | None = None
    try:
        handle = session.generate_reply(user_input=TYPED)
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)
    finally:
        gate.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")
    await bounded(asyncio.gather(run, return_exceptions=True), what="session.run()")
    await bounded(handle.wait_for_playout(), what="the handle of the input the session closed on")

    # nothing the user said may be lost: the session closed on it, so it is recorded, unanswered
    assert user_messages(session, TYPED) == 1


# -- session.interrupt() while typed input is queued --


async def test_session_interrupt_interrupts_a_reply_queued_during_a_handoff(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answering(journal)))
    run, gate = await _handoff_held_in_on_exit(session, journal)
    try:
        handle = session.generate_reply(user_input=TYPED)
        # the user changes their mind: the app interrupts everything queued
        session.interrupt(force=True)
    finally:
        gate.open()
    await bounded(asyncio.gather(run, return_exceptions=True), what="session.run()")
    await bounded(handle.wait_for_playout(), what="the reply to the typed input")

    assert handle.interrupted
    assert not [text for text in spoken(session) if text.endswith(TYPED)]


# -- session.wait_for_idle() while typed input is queued --


async def test_wait_for_idle_waits_for_the_reply_to_input_given_during_a_handoff(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answering(journal)))
    run, gate = await _handoff_held_in_on_exit(session, journal)
    try:
        handle = session.generate_reply(user_input=TYPED)
        idle = asyncio.ensure_future(session.wait_for_idle())
        await asyncio.sleep(0)
    finally:
        gate.open()
    await bounded(idle, what="session.wait_for_idle()")
    answered_at_idle = handle.done()
    await bounded(asyncio.gather(run, return_exceptions=True), what="session.run()")

    # idle means what the user asked for was answered
    assert answered_at_idle
