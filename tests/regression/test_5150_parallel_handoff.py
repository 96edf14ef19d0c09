"""livekit/agents#5150: parallel tool calls where one tool hands off.

One generation of the triage agent calls ``save_data`` (returns "Saved: x") and
``switch_to_secondary`` (returns a new Agent). Stock 1.8.9 completes the handoff but asks the
leaving agent for one more generation with the results (its instructions,
``tool_choice="none"``) and voices it, even after the leaving agent's ``on_exit``; the
arriving agent, built from the leaving agent's context inside the tool, never sees the
batch; two agents returned in one batch silently drop both handoffs. The fork gives an
arriving agent that carries the conversation on (built with the leaving agent's context) the
whole batch and keeps the leaving agent silent; an arriving agent with a context of its own
starts afresh, so the leaving agent still voices the results as the end of its turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunResult, function_tool, llm
from livekit.agents.voice.events import FunctionToolsExecutedEvent

from tests import fakes
from tests.fakes import (
    FakeAudioOutput,
    FakeTTS,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    tool_call,
    wait_for_event,
)

BUG = pytest.mark.upstream_bug("livekit/agents#5150")

TRIAGE = "You are the triage agent."
SECONDARY = "You are the secondary agent."
LEAVING_REPLY = "triage agent speaking after the handoff"
ARRIVING_REPLY = "secondary agent here"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, Gate] = {}
        self.ended: dict[str, asyncio.Event] = {"save_data": asyncio.Event(), "switch": asyncio.Event()}


class SecondaryAgent(JournalingAgent):
    def __init__(self, journal: Journal, chat_ctx: llm.ChatContext | None = None) -> None:
        super().__init__(journal, name="secondary", instructions=SECONDARY, chat_ctx=chat_ctx)


class TriageAgent(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, *, carry_context: bool = False, say: str | None = None) -> None:
        super().__init__(journal, name="triage", instructions=TRIAGE)
        self.carry_context = carry_context
        self.say = say
        self.secondary: SecondaryAgent | None = None

    async def _hold(self, name: str) -> None:
        if (gate := self.journal.gates.get(name)) is not None:
            await gate.wait()

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        await self._hold("save_data")
        self.journal.ended["save_data"].set()
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent | tuple[Agent, str]:
        """Hand the conversation to the secondary agent."""
        await self._hold("switch")
        self.secondary = SecondaryAgent(self.journal, self.chat_ctx if self.carry_context else None)
        self.journal.ended["switch"].set()
        return (self.secondary, self.say) if self.say else self.secondary

    @function_tool
    async def switch_to_other(self) -> Agent:
        """Hand the conversation to another secondary agent."""
        return SecondaryAgent(self.journal)


def by_agent(call: LLMCall) -> str:
    return ARRIVING_REPLY if call.instructions == SECONDARY else LEAVING_REPLY


def batch(order: tuple[str, ...]) -> list[llm.FunctionToolCall]:
    calls = {"save_data": tool_call("save_data", {"value": "x"}), "switch": tool_call("switch_to_secondary")}
    return [calls[name] for name in order]


ORDERS = pytest.mark.parametrize("order", [("save_data", "switch"), ("switch", "save_data")], ids="-".join)
SLOW = pytest.mark.parametrize("slow", [None, "save_data", "switch"], ids=lambda s: f"slow={s}")
OUTPUT = pytest.mark.parametrize("output", ["text", "audio"])


async def run_batch(
    make_session: MakeSession,
    triage: TriageAgent,
    fake: ScriptedLLM,
    *,
    slow: str | None = None,
    output: str = "text",
) -> tuple[AgentSession[Any], RunResult[Any]]:
    kwargs: dict[str, Any] = {"llm": fake}
    if output == "audio":
        kwargs.update(tts=FakeTTS(), audio_output=FakeAudioOutput(mode="instant"))
    session = await make_session(triage, **kwargs)
    if slow is not None:
        triage.journal.gates[slow] = Gate(slow)
    result: RunResult[Any] = session.run(user_input="save x and move me on")
    if slow is not None:
        fast = "switch" if slow == "save_data" else "save_data"
        await triage.journal.gates[slow].reached()
        await bounded(triage.journal.ended[fast].wait(), what=f"{fast} returned")
        triage.journal.gates[slow].open()
    await bounded(result, what="session.run")
    return session, result


def assert_every_call_answered_once(session: AgentSession[Any]) -> None:
    calls = [i.call_id for i in session.history.items if i.type == "function_call"]
    outputs = [i.call_id for i in session.history.items if i.type == "function_call_output"]
    assert sorted(calls) == sorted(outputs) and len(set(outputs)) == len(outputs), (calls, outputs)


@BUG
@ORDERS
@SLOW
@OUTPUT
async def test_leaving_agent_says_nothing_after_parallel_handoff(
    make_session: MakeSession, order: tuple[str, ...], slow: str | None, output: str
) -> None:
    journal = Journal()
    # the documented way: the arriving agent carries the conversation on
    triage = TriageAgent(journal, carry_context=True)
    fake = ScriptedLLM([Reply(tool_calls=batch(order))], fallback=by_agent)
    session, result = await run_batch(make_session, triage, fake, slow=slow, output=output)

    assert session.current_agent is triage.secondary
    assert journal.events == ["enter triage", "exit triage", "enter secondary"]
    leaving_calls = [c for c in fake.calls if c.instructions == TRIAGE]
    assert len(leaving_calls) == 1, [(c.index, c.tool_choice) for c in leaving_calls]
    assert LEAVING_REPLY not in spoken(session)
    result.expect.contains_function_call_output(output="Saved: x")
    result.expect.contains_agent_handoff(new_agent_type=SecondaryAgent)
    assert_every_call_answered_once(session)


@BUG
@ORDERS
@SLOW
async def test_arriving_agent_built_from_context_sees_the_whole_batch(
    make_session: MakeSession, order: tuple[str, ...], slow: str | None
) -> None:
    journal = Journal()
    triage = TriageAgent(journal, carry_context=True)
    fake = ScriptedLLM([Reply(tool_calls=batch(order))], fallback=by_agent)
    session, _ = await run_batch(make_session, triage, fake, slow=slow)
    assert session.current_agent is triage.secondary

    await bounded(session.run(user_input="what did you save?"), what="next turn")
    first = next(c for c in fake.calls if c.instructions == SECONDARY)
    items = first.chat_ctx.items
    names = sorted(i.name for i in items if i.type == "function_call")
    assert names == ["save_data", "switch_to_secondary"], first.item_types()
    outputs = [i.output for i in items if i.type == "function_call_output"]
    assert "Saved: x" in outputs and len(outputs) == 2, outputs
    assert first.last_user_text == "what did you save?"
    assert_every_call_answered_once(session)


@ORDERS
async def test_fresh_arriving_agent_loses_no_sibling_result(
    make_session: MakeSession, order: tuple[str, ...]
) -> None:
    """Parity: an arriving agent built without the leaving one's context. Stock has the leaving
    agent voice the sibling's result; the fork gives it to the arriving agent, call and output
    together. Either way the model sees the result, and never a call without its output."""
    journal = Journal()
    triage = TriageAgent(journal)
    fake = ScriptedLLM([Reply(tool_calls=batch(order))], fallback=by_agent)
    session, _ = await run_batch(make_session, triage, fake)
    await bounded(session.run(user_input="hello"), what="next turn")

    later = fake.calls[1:]
    assert any(
        i.type == "function_call_output" and i.name == "save_data" and i.output == "Saved: x"
        for call in later
        for i in call.chat_ctx.items
    ), "no request after the batch saw the sibling's result"
    for call in later:
        ids = [i.call_id for i in call.chat_ctx.items if i.type == "function_call"]
        outs = [i.call_id for i in call.chat_ctx.items if i.type == "function_call_output"]
        assert sorted(ids) == sorted(outs), call.item_types()


@BUG
@ORDERS
async def test_two_handoffs_in_one_batch_tell_the_model_why(
    make_session: MakeSession, order: tuple[str, ...]
) -> None:
    journal = Journal()
    triage = TriageAgent(journal)
    names = {"switch": "switch_to_secondary", "save_data": "switch_to_other"}
    fake = ScriptedLLM(
        [Reply(tool_calls=[tool_call(names[n]) for n in order]), "sorry, one at a time"], fallback=by_agent
    )
    session = await make_session(triage, llm=fake)
    await bounded(session.run(user_input="move me twice"), what="session.run")

    assert session.current_agent is triage, "no handoff happens with two agents returned"
    assert journal.events == ["enter triage"]
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert len(outputs) == 2
    for out in outputs:
        assert out.is_error and "one handoff per turn" in out.output, out
    assert len(fake.calls) == 2
    reply = fake.calls[1]
    assert reply.instructions == TRIAGE and reply.tool_choice != "none"
    assert "switch_to_secondary" in reply.tools
    assert "sorry, one at a time" in spoken(session)
    assert_every_call_answered_once(session)


@ORDERS
async def test_handoff_tool_output_is_voiced_once_by_the_leaving_agent(
    make_session: MakeSession, order: tuple[str, ...]
) -> None:
    journal = Journal()
    triage = TriageAgent(journal, say="Transferring you now")
    fake = ScriptedLLM([Reply(tool_calls=batch(order))], fallback=by_agent)
    session, _ = await run_batch(make_session, triage, fake)
    assert session.current_agent is triage.secondary
    leaving = [c for c in fake.calls if c.instructions == TRIAGE]
    assert len(leaving) == 2 and leaving[1].tool_choice == "none"
    assert spoken(session).count(LEAVING_REPLY) == 1


async def test_single_tool_handoff_makes_no_leaving_reply(make_session: MakeSession) -> None:
    journal = Journal()
    triage = TriageAgent(journal)
    fake = ScriptedLLM([Reply(tool_calls=batch(("switch",)))], fallback=by_agent)
    session, _ = await run_batch(make_session, triage, fake)
    assert session.current_agent is triage.secondary
    assert [c.instructions for c in fake.calls] == [TRIAGE]


@ORDERS
async def test_cancelled_handoff_gets_the_normal_reply(
    make_session: MakeSession, order: tuple[str, ...]
) -> None:
    journal = Journal()
    triage = TriageAgent(journal)
    fake = ScriptedLLM([Reply(tool_calls=batch(order)), "staying with triage"], fallback=by_agent)
    session = await make_session(triage, llm=fake)

    def veto(ev: FunctionToolsExecutedEvent) -> None:
        ev.cancel_agent_handoff()

    session.on("function_tools_executed", veto)
    executed = asyncio.ensure_future(wait_for_event(session, "function_tools_executed"))
    await bounded(session.run(user_input="save x and move me on"), what="session.run")
    await executed
    assert session.current_agent is triage
    assert journal.events == ["enter triage"]
    assert len(fake.calls) == 2
    assert fake.calls[1].instructions == TRIAGE and fake.calls[1].tool_choice != "none"
    assert "save_data" in fake.calls[1].tools
    assert "staying with triage" in spoken(session)
