"""Review of 0014: the session closes while a result handed over at a handoff waits.

The front desk's own async tool (an agent-scoped ``AsyncToolset``) returns while the front
desk runs its ``on_exit()`` after ``update_agent()``. 0014 hands the result to a delivery of
its own (``_ToolExecutor._hand_over_to_session()``), which waits for the handoff. The session
closes before the handoff is done: ``aclose()`` must return, nothing answers the result after
the close began, and the result stays in the history, as a result the session closes on does.
On 1.8.9 the pipeline front desk answers the result after its ``on_exit()``, as the session
closes (livekit/agents#5841); a realtime one does not (parity).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, RunContext, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    bounded,
    scripted_model,
    tool_call,
    wait_for_event,
)

FRONT = "You are the front desk."
BILLING = "You are the billing desk."
CALL_ID = "call_order"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.exit_gates["front"] = Gate("front on_exit")
        self.tool_gate = Gate("check_order")


def order_tool(journal: Journal) -> llm.FunctionTool:
    @function_tool(name="check_order")
    async def check_order(ctx: RunContext) -> str:
        """Check the caller's order."""
        await ctx.update("Checking your order")
        await journal.tool_gate.wait()
        return "Order 42 shipped"

    return check_order


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("pipeline", marks=pytest.mark.upstream_bug("livekit/agents#5841")),
        "realtime-reused",
        "realtime-replaced",
    ],
)
async def test_the_session_closes_while_a_handed_over_result_waits(
    make_session: MakeSession, kind: str
) -> None:
    journal = Journal()
    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    front = JournalingAgent(journal, name="front", instructions=FRONT, tools=[toolset])
    model = scripted_model(
        kind, [Reply(tool_calls=[tool_call("check_order", call_id=CALL_ID)])], fallback="ok"
    )
    session: AgentSession[Any] = await make_session(front, llm=model)

    await bounded(session.run(user_input="Where is my order?"), what="order turn")
    await journal.tool_gate.reached()
    requests = len(model.calls) if isinstance(model.calls, list) else len(model.generations)

    session.update_agent(JournalingAgent(journal, name="billing", instructions=BILLING))
    await bounded(journal.exiting["front"].wait(), what="front on_exit")
    ended = asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == CALL_ID,
        )
    )
    journal.tool_gate.open()
    await bounded(ended, what="check_order ended")

    # the close begins before the front desk's on_exit returns
    closing = asyncio.ensure_future(session.aclose())
    journal.exit_gates["front"].open()
    await bounded(closing, what="AgentSession.aclose")

    assert "enter billing" not in journal.events, journal.events
    now = len(model.calls) if isinstance(model.calls, list) else len(model.generations)
    assert now == requests, "a reply was asked for after the close began"
    outputs = [
        i
        for i in session.history.items
        if i.type == "function_call_output" and i.call_id == f"{CALL_ID}_final"
    ]
    assert len(outputs) == 1
    assert not fakes.late_calls(model)
