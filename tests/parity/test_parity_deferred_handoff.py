"""Parity: an async tool (``ctx.update()`` then a final return) next to the deferred-handoff
patches (0002, 0014): what stock 1.8.9 gets right must stay right.

Stock drops an Agent returned after ``ctx.update()`` (it logs "agent handoff after a progress
update is not supported" and records an error output): these tests do not ask for the handoff,
only for what stock already guarantees around it. The tool's final return is recorded and
answered by someone, other tools of the same agent keep working (``ctx.foreground()``
included), ``session.run()`` returns and ``aclose()`` completes within bounded waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
    wait_for_event,
)
from tests.parity._support import assert_every_call_answered, outputs_in, transcript

FRONT = "You are the front desk."
WEATHER = "You are the weather desk."
# stock drops the handoff with this ERROR; the fork hands off instead
STOCK_DROPS_HANDOFF = r"returned an Agent after ctx\.update\(\)"

pytestmark = pytest.mark.allow_error_logs(STOCK_DROPS_HANDOFF)


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.transfer_gate = Gate("transfer_later")
        self.confirm_gate = Gate("confirm")
        self.in_foreground = asyncio.Event()
        self.gates: dict[str, Gate] = {}
        self.fake = ScriptedLLM()
        self.weather_entered_after: int | None = None
        """How many model requests were made when the weather desk took over (the fork's way
        of acting on the returned agent)."""
        self.handoff_decided_after: int | None = None
        """How many model requests were made when the returned agent's handoff was decided
        (``function_tools_executed`` with it flagged); the queued turns may still drain."""

    def gate(self, name: str) -> Gate:
        return self.gates.setdefault(name, Gate(name))


class WeatherDesk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="weather", instructions=WEATHER)

    async def on_enter(self) -> None:
        self.journal.weather_entered_after = len(self.journal.fake.calls)
        await super().on_enter()


class FrontDesk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="front", instructions=FRONT)

    @function_tool
    async def transfer_later(self, ctx: RunContext) -> Agent:
        """Look up the weather desk and transfer the caller there."""
        await ctx.update("please hold on")
        await self.journal.transfer_gate.wait()
        return WeatherDesk(self.journal)

    @function_tool
    async def confirm(self, ctx: RunContext) -> str:
        """Confirm the booking with the caller."""
        await self.journal.confirm_gate.wait()
        async with ctx.foreground():
            self.journal.in_foreground.set()
        return "booking confirmed"

    @function_tool
    async def lookup(self, ctx: RunContext) -> str:
        """Look up the caller's account."""
        await self.journal.gate(ctx.function_call.call_id).wait()
        return f"account for {ctx.function_call.call_id}"


def by_agent(call: LLMCall) -> str:
    return "Weather desk here." if call.instructions == WEATHER else "Front desk here."


def acted_on_at(journal: Journal, final_id: str) -> int | None:
    """How many model requests were made before the tool's final return was acted on: a reply
    asked for it (stock answers its error output) or the agent it returned took over (fork)."""
    asked = [c.index for c in journal.fake.calls if any(final_id in t for t in c.system_texts)]
    candidates = [
        *asked[:1],
        *([journal.weather_entered_after] if journal.weather_entered_after is not None else []),
        *([journal.handoff_decided_after] if journal.handoff_decided_after is not None else []),
    ]
    return min(candidates) if candidates else None


def final_ended(session: AgentSession[Any], call_id: str) -> asyncio.Future[Any]:
    return asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == call_id,
        )
    )


async def test_foreground_tool_while_a_deferred_handoff_is_queued(make_session: MakeSession) -> None:
    """A tool that reported progress returns an Agent while a tool of the next turn is running;
    that tool then enters ``ctx.foreground()``. Stock answers everything and closes."""
    journal = Journal()
    transfer, confirm = tool_call("transfer_later"), tool_call("confirm")
    fake = journal.fake
    fake.push(Reply(tool_calls=[transfer]), "Please hold on.", Reply(tool_calls=[confirm]))
    fake.script.fallback = by_agent
    session = await make_session(FrontDesk(journal), llm=fake)
    await bounded(session.run(user_input="transfer me to the weather desk"), what="first run")

    second = session.run(user_input="and confirm my booking")
    await journal.confirm_gate.reached()
    ended = final_ended(session, transfer.call_id)
    journal.transfer_gate.open()
    await bounded(ended, what="the deferred return of transfer_later")
    journal.confirm_gate.open()
    try:
        await bounded(second, what="run() with a foreground tool and a deferred return")
        await bounded(journal.in_foreground.wait(), what="ctx.foreground() to be entered")
        await bounded(session.aclose(), what="aclose()")
    finally:
        await _unwedge(session)

    assert_every_call_answered(session)
    # the foreground tool's result was put to a model, and the deferred return acted on
    assert any(confirm.call_id in outputs_in(c.chat_ctx) for c in fake.calls), transcript(session)
    assert acted_on_at(journal, f"{transfer.call_id}_final") is not None, transcript(session)


async def _unwedge(session: AgentSession[Any]) -> None:
    """On a wedged fork, break the wait cycle so the fixtures can close the session and the
    expected failure stays a failure of the test body, not of its teardown."""
    activity = session._activity
    if activity is None:
        return
    reply_task = activity._tool_executor._reply_task
    if reply_task is not None and not reply_task.done():
        reply_task.cancel()
        await asyncio.wait([reply_task], timeout=2)


def answers_turns(call: LLMCall) -> Reply | str:
    """A user turn ``turn N`` calls ``lookup`` (call id ``lookup_N``); anything else is text."""
    last = call.chat_ctx.items[-1] if call.chat_ctx.items else None
    if last is not None and last.type == "message" and last.role == "user":
        text = last.text_content or ""
        if text.startswith("turn "):
            return Reply(tool_calls=[tool_call("lookup", call_id=f"lookup_{text.split()[1]}")])
    return by_agent(call)


async def test_deferred_return_is_answered_while_the_user_keeps_talking(make_session: MakeSession) -> None:
    """The user keeps talking: each turn calls a tool that is still running when the next turn
    starts. Stock answers the async tool's final return at once (an error it voices); the fork
    hands off at the end of the turn in flight when it came in. Neither may wait until the user
    stops talking."""
    journal = Journal()
    transfer = tool_call("transfer_later")
    final_id = f"{transfer.call_id}_final"
    fake = journal.fake
    fake.push(Reply(tool_calls=[transfer]), "Please hold on.")
    fake.script.fallback = answers_turns
    session = await make_session(FrontDesk(journal), llm=fake)

    def _decided(ev: Any) -> None:
        if ev.has_agent_handoff and any(c.call_id == final_id for c in ev.function_calls):
            journal.handoff_decided_after = len(fake.calls)

    session.on("function_tools_executed", _decided)
    await bounded(session.run(user_input="transfer me to the weather desk"), what="first run")

    run = session.run(user_input="turn 2")
    await journal.gate("lookup_2").reached()
    ended = final_ended(session, transfer.call_id)
    journal.transfer_gate.open()
    await bounded(ended, what="the deferred return of transfer_later")

    handles = []
    for turn in (3, 4, 5):
        handles.append(session.generate_reply(user_input=f"turn {turn}"))
        await journal.gate(f"lookup_{turn}").reached()
        journal.gate(f"lookup_{turn - 1}").open()
    journal.gate("lookup_5").open()
    await bounded(run, what="run() of turn 2")
    for handle in handles:
        await bounded(handle.wait_for_playout(), what="the user's later turns")
    # acted on by the time the user's last turn was answered, not only once the user stopped
    acted_while_talking = acted_on_at(journal, final_id)

    # once the user stopped, the return is acted on either way
    async def _settled() -> None:
        while acted_on_at(journal, final_id) is None:
            await fake.wait_for_calls(len(fake.calls) + 1)

    await bounded(_settled(), what="the deferred return to be acted on")
    await bounded(session.aclose(), what="aclose()")

    assert_every_call_answered(session)
    assert acted_while_talking is not None, (
        f"the async tool's return was acted on only after the user stopped talking: {transcript(session)}"
    )
