"""Guards: agent handoff from a tool call, alone or in parallel with a plain tool.

One LLM generation calls ``lookup`` (returns a string) and ``transfer`` (returns a new Agent)
in parallel, in both orders, with either tool finishing last (held on a Gate that the test
opens only after the other tool returned). The handoff must complete (current agent, one
``on_exit`` for the old agent, one ``on_enter`` for the new one) and the next user turn must
be answered by the new agent, with a bounded number of LLM calls.

Stock 1.8.9 may make one extra LLM call for the *leaving* agent after a parallel handoff
(tool reply with ``tool_choice="none"``); these guards neither require nor forbid it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunResult, function_tool

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

OLD_INSTRUCTIONS = "You are the triage agent."
NEW_INSTRUCTIONS = "You are the billing agent."
NEW_AGENT_ANSWER = "Billing here, how can I help?"


class Journal(fakes.Journal):
    """Lifecycle events and per-tool completion signals shared by the agents of one test."""

    def __init__(self) -> None:
        super().__init__()
        self.tool_returned: dict[str, asyncio.Event] = {
            "lookup": asyncio.Event(),
            "transfer": asyncio.Event(),
        }
        self.gates: dict[str, Gate] = {}

    def count(self, event: str, agent: str) -> int:
        return self.events.count(f"{event} {agent}")


class BillingAgent(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="billing", instructions=NEW_INSTRUCTIONS)

    @function_tool
    async def refund(self) -> str:
        """Issue a refund."""
        return "refunded"


class TriageAgent(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="triage", instructions=OLD_INSTRUCTIONS)
        self.billing: BillingAgent | None = None

    async def _maybe_hold(self, name: str) -> None:
        if (gate := self.journal.gates.get(name)) is not None:
            await gate.wait()

    @function_tool
    async def lookup(self) -> str:
        """Look up the customer's account."""
        await self._maybe_hold("lookup")
        self.journal.tool_returned["lookup"].set()
        return "account 42 is active"

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer the customer to billing."""
        await self._maybe_hold("transfer")
        self.billing = BillingAgent(self.journal)
        self.journal.tool_returned["transfer"].set()
        return self.billing


def answer_by_agent(call: LLMCall) -> str:
    """Fallback for every request after the scripted tool-call generation."""
    if call.instructions == NEW_INSTRUCTIONS:
        return NEW_AGENT_ANSWER
    # the leaving agent's (optional) tool reply: say nothing
    return ""


def _summary(fake: ScriptedLLM) -> list[tuple[int, str | None, object]]:
    return [(c.index, c.instructions, c.tool_choice) for c in fake.calls]


async def _assert_handoff_and_next_turn(
    session: AgentSession[Any],
    fake: ScriptedLLM,
    triage: TriageAgent,
    journal: Journal,
    *,
    max_leaving_calls: int,
) -> None:
    billing = triage.billing
    assert billing is not None, "transfer tool never ran"
    assert session.current_agent is billing
    assert journal.count("exit", "triage") == 1, journal.events
    assert journal.count("enter", "billing") == 1, journal.events
    assert journal.count("exit", "billing") == 0, journal.events
    first_turn_calls = len(fake.calls)

    result: RunResult[Any] = await bounded(session.run(user_input="I want a refund"), what="second run")

    # every request came from one of the two agents; the leaving agent made the tool-call
    # generation plus at most `max_leaving_calls - 1` more (stock's tool reply, whenever it runs)
    old = [c for c in fake.calls if c.instructions == OLD_INSTRUCTIONS]
    new = [c for c in fake.calls if c.instructions == NEW_INSTRUCTIONS]
    assert len(old) + len(new) == len(fake.calls), _summary(fake)
    assert 1 <= len(old) <= max_leaving_calls, _summary(fake)

    # the next user turn is answered by the new agent, once, with its own tools
    assert len(new) == 1, _summary(fake)
    call = new[0]
    assert call.index >= first_turn_calls, _summary(fake)
    assert call.last_user_text == "I want a refund"
    assert "refund" in call.tools and "transfer" not in call.tools and "lookup" not in call.tools
    assert call.tool_choice != "none", _summary(fake)
    result.expect.contains_message(role="assistant")
    assert any(ev.type == "message" and ev.item.text_content == NEW_AGENT_ANSWER for ev in result.events), (
        result.events
    )

    # the handoff happened once, and nothing looped afterwards
    assert journal.count("enter", "billing") == 1, journal.events
    assert journal.count("exit", "triage") == 1, journal.events
    assert session.current_agent is billing


async def test_single_tool_handoff(make_session: MakeSession) -> None:
    journal = Journal()
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("transfer")])], fallback=answer_by_agent)
    triage = TriageAgent(journal)
    session = await make_session(triage, llm=fake)
    assert journal.events == ["enter triage"]

    result: RunResult[Any] = await bounded(session.run(user_input="billing please"), what="first run")
    result.expect.contains_function_call(name="transfer")
    result.expect.contains_agent_handoff(new_agent_type=BillingAgent)

    # a bare handoff expects no tool reply: exactly one call for the first turn
    assert len(fake.calls) == 1, _summary(fake)
    await _assert_handoff_and_next_turn(session, fake, triage, journal, max_leaving_calls=1)


@pytest.mark.parametrize("order", [("lookup", "transfer"), ("transfer", "lookup")], ids="-".join)
@pytest.mark.parametrize("slow", [None, "lookup", "transfer"], ids=lambda s: f"slow={s}")
async def test_parallel_string_and_handoff(
    make_session: MakeSession, order: tuple[str, str], slow: str | None
) -> None:
    journal = Journal()
    calls = {name: tool_call(name) for name in order}
    fake = ScriptedLLM([Reply(tool_calls=list(calls.values()))], fallback=answer_by_agent)
    triage = TriageAgent(journal)
    session = await make_session(triage, llm=fake)

    fast_ended: asyncio.Future[object] | None = None
    if slow is not None:
        journal.gates[slow] = Gate(slow)
        fast_id = calls["transfer" if slow == "lookup" else "lookup"].call_id
        # the framework's own "this tool call is finished" signal for the fast tool
        fast_ended = asyncio.ensure_future(
            wait_for_event(
                session,
                "tool_execution_updated",
                lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == fast_id,
            )
        )

    result: RunResult[Any] = session.run(user_input="check my account and move me to billing")

    if slow is not None:
        assert fast_ended is not None
        gate = journal.gates[slow]
        await gate.reached()
        await fast_ended
        assert not journal.tool_returned[slow].is_set()
        gate.open()

    await bounded(result, what="first run")
    assert all(ev.is_set() for ev in journal.tool_returned.values())
    result.expect.contains_function_call(name="lookup")
    result.expect.contains_function_call(name="transfer")
    result.expect.contains_function_call_output(output="account 42 is active")
    result.expect.contains_agent_handoff(new_agent_type=BillingAgent)

    # tool calls happened in one generation
    assert fake.calls[0].instructions == OLD_INSTRUCTIONS
    assert {"lookup", "transfer"} <= set(fake.calls[0].tools)

    await _assert_handoff_and_next_turn(session, fake, triage, journal, max_leaving_calls=2)
