"""Guards: a realtime reply dropped before it played leaves a model with a mutable context alone.

A reply the model starts on its own waits in the speech queue while another one plays; the user
interrupts, and the framework drops it before it was authorized: its tool calls are neither run
nor answered. The framework tells only a model whose context it cannot edit (Nova Sonic, which
waits for a result of every call it made) which calls were dropped, with an error output for each
(see test_realtime_dropped_calls_error_output.py). An OpenAI-style model and Gemini Live (mutable
contexts) see no new call: no ``update_chat_ctx()`` after the interruption, on stock and on the
fork alike.

Whatever the model, the agent's context and the session's history never record a dropped call
(nor an output for it): only a call that ran is recorded.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import GEMINI_CAPABILITIES, Gate, MakeSession, Reply, ScriptedRealtimeModel, bounded
from tests.fakes.script import tool_call

MODELS: dict[str, dict[str, Any]] = {
    "openai": {},
    "gemini": GEMINI_CAPABILITIES,
    # a model whose context cannot be edited (as Nova Sonic's)
    "immutable": {"mutable_chat_context": False},
}


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.booked: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.booked.append(table)
        return f"table {table} booked"


async def _drop_a_reply_with_a_call(
    make_session: MakeSession, kind: str
) -> tuple[Booker, AgentSession[Any], ScriptedRealtimeModel, int]:
    """The model starts a reply that holds, then one with a call; the user interrupts both.
    Returns the number of session calls made before the interruption."""
    model = ScriptedRealtimeModel(**MODELS[kind])
    agent = Booker()
    session: AgentSession[Any] = await make_session(agent, llm=model)
    (rt,) = model.live_sessions
    speeches: list[Any] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))

    gate = Gate("the reply that plays")
    rt.emit_generation(Reply("One moment.", hold=gate))
    rt.emit_generation(Reply(tool_calls=[tool_call("book", {"table": 12}, call_id="call_12")]))
    await gate.reached()
    assert len(speeches) == 2 and not speeches[1].done()

    before = len(rt.calls)
    session.interrupt()
    gate.open()
    for speech in speeches:
        await bounded(speech.wait_for_playout(), what="the interrupted speeches")
    assert speeches[1].interrupted and agent.booked == [], "the dropped reply's call ran"
    return agent, session, model, before


@pytest.mark.parametrize("kind", ["openai", "gemini"])
async def test_a_dropped_reply_sends_nothing_to_a_mutable_model(make_session: MakeSession, kind: str) -> None:
    _, _, model, before = await _drop_a_reply_with_a_call(make_session, kind)
    assert model.capabilities.mutable_chat_context
    (rt,) = model.live_sessions
    late = [e.method for e in rt.calls[before:] if e.method == "update_chat_ctx"]
    assert late == [], f"the model's context was updated after the interruption: {late}"


@pytest.mark.parametrize("kind", list(MODELS))
async def test_a_dropped_call_is_not_in_the_history(make_session: MakeSession, kind: str) -> None:
    agent, session, _, _ = await _drop_a_reply_with_a_call(make_session, kind)
    for where, ctx in (("agent's context", agent.chat_ctx), ("session history", session.history)):
        dropped = [
            item.type
            for item in ctx.items
            if item.type in ("function_call", "function_call_output") and item.call_id == "call_12"
        ]
        assert dropped == [], f"the {where} records the dropped call: {dropped}"
