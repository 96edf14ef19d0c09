"""A realtime model whose context cannot be edited gets an error output for each call of a reply
the framework dropped.

A reply the model starts on its own waits in the speech queue while another one plays; the user
interrupts, and the framework drops it before it was authorized
(``AgentActivity._realtime_generation_task_impl``): its tool call is neither run nor answered. A
model that keeps each call it made open until it has a result, and whose history the framework
cannot edit (``RealtimeCapabilities.mutable_chat_context`` False: Nova Sonic), waits for that
call for good on stock 1.8.9: nothing tells it. Now the framework sends it, through
``update_chat_ctx()``, the call with an error output that says it was not run and asks for no
reply (the user's interruption is what gets answered).

Models with a mutable context see no change, and no model's history records the dropped call:
see tests/guards/test_realtime_dropped_calls_guard.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import Gate, MakeSession, Reply, ScriptedRealtimeModel, bounded
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


@pytest.mark.upstream_bug(
    "not-yet: an interrupted realtime reply's function calls are left open on the model"
)
async def test_a_model_with_an_immutable_context_gets_an_error_output_for_a_dropped_call(
    make_session: MakeSession,
) -> None:
    model = ScriptedRealtimeModel(mutable_chat_context=False)
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

    session.interrupt()
    gate.open()
    for speech in speeches:
        await bounded(speech.wait_for_playout(), what="the interrupted speeches")

    assert speeches[1].interrupted and agent.booked == [], "the dropped reply's call ran"
    items = [
        item
        for item in rt.chat_ctx.items
        if item.type in ("function_call", "function_call_output") and item.call_id == "call_12"
    ]
    assert [item.type for item in items] == ["function_call", "function_call_output"], (
        f"the model was not told the call was not run: {items}"
    )
    # marked, so a plugin tells it from any other error that asks for no reply (a tool that failed
    # on an interrupted turn), which the model must hear
    assert items[0].extra.get("__livekit_agents_tool_dropped"), "the dropped call is not marked"
    output = items[1]
    assert output.is_error and "not run" in output.output, output
    assert not output.reply_required, "the framework asks for a reply to a call it dropped"
