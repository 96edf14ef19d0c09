"""livekit/agents#5841 with a deferred handoff (#5936) that a listener cancels: the reply to the
result is handed over to the agent the listener routes to, and nothing claims a handoff was
dropped.

The front desk's async ``check_order`` (it reports progress with ``ctx.update()``) returns the
billing desk's rival with its result. A ``function_tools_executed`` listener cancels that handoff
and routes the caller to the billing desk itself (``update_agent()``). The reply to the result is
scheduled on the front desk before its handoff begins, and comes up once its ``on_exit()`` runs:
nothing of it was said, so the billing desk answers the result instead. The handoff the tool
returned was cancelled by the listener, not dropped: no warning says it was. On stock 1.8.9 an
agent returned after ``ctx.update()`` hands off nowhere and no listener sees it (#5936).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, function_tool
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import MakeSession, Reply, ScriptedLLM, bounded, scripted_model, tool_call, wait_for_event
from tests.fakes.orders import BILLING, CALL_ID, FINAL_ID, FRONT, SHIPPED, Billing, Front, OrderJournal

BUG = pytest.mark.upstream_bug("livekit/agents#5936")


def answer(instructions: str | None) -> str:
    return {FRONT: "Front desk here.", BILLING: "Billing here."}.get(instructions or "", "ok")


def is_reply(status: str) -> Any:
    def check(ev: Any) -> bool:
        return (
            ev.update.type == "tool_reply_updated"
            and ev.update.status == status
            and FINAL_ID in ev.update.update_ids
        )

    return check


def requests(model: Any) -> list[str | None]:
    """The instructions of every request the model got, in order."""
    if isinstance(model, ScriptedLLM):
        return [c.instructions for c in model.calls]
    return [g.instructions for g in model.generations]


@BUG
@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
async def test_a_reply_whose_handoff_a_listener_cancelled_is_handed_over(
    make_session: MakeSession, kind: str, scope: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="livekit.agents")
    journal = OrderJournal()
    billing = Billing(journal)

    @function_tool(name="check_order")
    async def check_order(ctx: RunContext) -> Any:
        """Check the caller's order."""
        await ctx.update("Checking your order")
        await journal.tool_gate.wait()
        return Agent(instructions="You are the returns desk."), SHIPPED

    toolset = AsyncToolset(id="orders", tools=[check_order])
    front = Front(journal, [toolset] if scope == "agent_toolset" else [])
    kwargs: dict[str, Any] = {"tools": [toolset]} if scope == "session_toolset" else {}
    model = scripted_model(
        kind,
        [Reply(tool_calls=[tool_call("check_order", call_id=CALL_ID)])],
        fallback=lambda call: answer(call.instructions),
    )
    session: AgentSession[Any] = await make_session(front, llm=model, **kwargs)

    statuses: dict[str, list[str]] = {}

    @session.on("tool_execution_updated")
    def _on_update(ev: Any) -> None:
        if ev.update.type == "tool_reply_updated" and FINAL_ID in ev.update.update_ids:
            statuses.setdefault(ev.update.speech_id, []).append(ev.update.status)

    @session.on("function_tools_executed")
    def _route(ev: Any) -> None:
        if any(o.call_id == FINAL_ID for o in ev.function_call_outputs):
            ev.cancel_agent_handoff()
            session.update_agent(billing)

    try:
        await bounded(session.run(user_input="Where is my order?"), what="the order turn")
        await journal.tool_gate.reached()
        scheduled = asyncio.ensure_future(
            wait_for_event(session, "tool_execution_updated", is_reply("scheduled"))
        )
        completed = asyncio.ensure_future(
            wait_for_event(session, "tool_execution_updated", is_reply("completed"))
        )
        journal.tool_gate.open()
        await bounded(scheduled, what="the reply to the order result scheduled")
        # the listener routed the caller to billing as the result came in
        assert session.current_agent is billing

        await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
        at_exit = len(requests(model))
        journal.exit_gates["front"].open()
        await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")
        await bounded(completed, what="the reply to the order result")
        await bounded(session.wait_for_idle(), what="idle")

        # the billing desk answered the result; the front desk asked nothing once it was leaving
        assert FRONT not in requests(model)[at_exit:], requests(model)
        assert BILLING in requests(model)[at_exit:], requests(model)
        outputs = [
            i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID
        ]
        assert len(outputs) == 1 and outputs[0].output == SHIPPED
        # the listener cancelled the returned handoff: nothing says a handoff was dropped
        assert not [r for r in caplog.records if "dropping the agent handoff" in r.getMessage()], [
            r.getMessage() for r in caplog.records
        ]
    finally:
        # on stock the front desk never leaves: let a failing run close
        journal.exit_gates["front"].open()
    await bounded(session.aclose(), what="AgentSession.aclose")
    # each reply to the result ended with a status of its own, and one was said
    assert all(
        s[0] == "scheduled" and s[-1] in ("interrupted", "completed") and len(s) == 2
        for s in statuses.values()
    ), statuses
    assert [s[-1] for s in statuses.values()].count("completed") == 1, statuses
