"""livekit/agents#5841 (async tools): a result that comes back while its agent is handed off.

The front desk's ``check_order`` tool reports progress with ``ctx.update()`` and returns later.
Meanwhile the application hands the caller to the billing desk (``session.update_agent()``).
If the tool returns while the front desk runs its ``on_exit()``, stock 1.8.9 has the front desk
answer the result after that ``on_exit()``: the leaving activity looks idle and is not paused
yet, so ``_ToolExecutor._deliver_reply()`` asks it for the reply and the drain lets it run. The
fork waits for the handoff: the result is answered by the billing desk, whether the tool is
session-scoped or the front desk's own (its activity closes, but the result is not lost with
it), and the front desk makes no request after its ``on_exit()``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import (
    ErrorLogCapture,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    orders,
    tool_call,
    wait_for_event,
)
from tests.fakes.orders import (
    BILLING,
    CALL_ID,
    FINAL_ID,
    FRONT,
    SHIPPED,
    Billing,
    OrderJournal,
    is_final,
    order_tool,
)

BUG = pytest.mark.upstream_bug("livekit/agents#5841")


class Front(orders.Front):
    async def on_exit(self) -> None:
        await super().on_exit()  # held on the front desk's exit gate
        self.journal.events.append("exited front")


def is_reply_done(ev: Any) -> bool:
    return (
        ev.update.type == "tool_reply_updated"
        and ev.update.status == "completed"
        and FINAL_ID in ev.update.update_ids
    )


@BUG
@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
async def test_result_returned_during_on_exit_is_not_answered_by_the_leaving_agent(
    make_session: MakeSession, error_logs: ErrorLogCapture, scope: str
) -> None:
    journal = OrderJournal()
    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    front = Front(journal, [toolset] if scope == "agent_toolset" else [])
    kwargs: dict[str, Any] = {"tools": [toolset]} if scope == "session_toolset" else {}
    calls_at_exit: list[int] = []

    def answer(call: LLMCall) -> str:
        return {FRONT: "Front desk here.", BILLING: "Billing here: your order shipped."}[
            call.instructions or ""
        ]

    fake = ScriptedLLM([Reply(tool_calls=[tool_call("check_order", call_id=CALL_ID)])], fallback=answer)
    session: AgentSession[Any] = await make_session(front, llm=fake, **kwargs)

    await bounded(session.run(user_input="Where is my order?"), what="order turn")
    await journal.tool_gate.reached()

    billing = Billing(journal)
    session.update_agent(billing)
    await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
    calls_at_exit.append(len(fake.calls))

    # the tool returns while the front desk is in its on_exit
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_final))
    delivered = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_reply_done))
    journal.tool_gate.open()
    assert (await bounded(ended, what="check_order ended")).update.status == "done"
    journal.exit_gates["front"].open()
    await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")

    await bounded(delivered, what="the reply to the order result")
    await bounded(session.run(user_input="Thanks."), what="next turn")

    assert session.current_agent is billing
    assert journal.events == ["enter front", "exit front", "exited front", "enter billing"]
    # nothing on behalf of the front desk once its on_exit started
    late = [c.instructions for c in fake.calls[calls_at_exit[0] :]]
    assert FRONT not in late, late
    outputs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID]
    assert len(outputs) == 1 and outputs[0].output == SHIPPED
    # the billing desk answered the result, then the next turn
    assert late == [BILLING, BILLING], late
    answered = fake.calls[calls_at_exit[0]]
    assert any(i.type == "function_call_output" and i.call_id == FINAL_ID for i in answered.chat_ctx.items)
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]
