"""Guards: a realtime reply dropped before it played leaves a model with a mutable context alone.

A reply the model starts on its own waits in the speech queue while another one plays; the user
interrupts, and the framework drops it before it was authorized: its tool calls are neither run
nor answered. The framework tells only a model whose context it cannot edit (Nova Sonic, which
waits for a result of every call it made) which calls were dropped, by giving it its context
back without them. An OpenAI-style model and Gemini Live (mutable contexts) see no new call:
no ``update_chat_ctx()`` after the interruption, on stock and on the fork alike.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import GEMINI_CAPABILITIES, Gate, MakeSession, Reply, ScriptedRealtimeModel, bounded
from tests.fakes.script import tool_call


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.booked: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.booked.append(table)
        return f"table {table} booked"


@pytest.mark.parametrize("kind", ["openai", "gemini"])
async def test_a_dropped_reply_sends_nothing_to_a_mutable_model(make_session: MakeSession, kind: str) -> None:
    model = ScriptedRealtimeModel(**(GEMINI_CAPABILITIES if kind == "gemini" else {}))
    assert model.capabilities.mutable_chat_context
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
    late = [e.method for e in rt.calls[before:] if e.method == "update_chat_ctx"]
    assert late == [], f"the model's context was updated after the interruption: {late}"
