"""Review of 0014: an async result that came in before a handoff that carries the conversation on.

The front desk's session-scoped ``check_order`` tool (an ``AsyncToolset``) returns while the
front desk is busy with its ``transfer`` tool, which then hands off to a billing desk built
with the front desk's context (``Billing(chat_ctx=self.chat_ctx)``): the result is already part
of the billing desk's context when it arrives, copied with the rest of the conversation. The
reply to the result goes to the billing desk; its context must hold each item once, as the
front desk's did: a call recorded twice is two calls for the model (and the second copy of an
item id is refused by a realtime API that keys its conversation by item id).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from livekit.agents import Agent, AgentSession, RunContext, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset

from tests import fakes
from tests.fakes import Gate, JournalingAgent, MakeSession, Reply, ScriptedLLM, bounded, tool_call

FRONT = "You are the front desk."
BILLING = "You are the billing desk."
CALL_ID = "call_order"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.order_gate = Gate("check_order")
        self.transfer_gate = Gate("transfer")


class Front(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="front", instructions=FRONT)

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer the caller to billing."""
        await self.journal.transfer_gate.wait()
        return JournalingAgent(self.journal, name="billing", instructions=BILLING, chat_ctx=self.chat_ctx)


def order_tool(journal: Journal) -> llm.FunctionTool:
    @function_tool(name="check_order")
    async def check_order(ctx: RunContext) -> str:
        """Check the caller's order."""
        await ctx.update("Checking your order")
        await journal.order_gate.wait()
        return "Order 42 shipped"

    return check_order


def duplicated(ctx: llm.ChatContext) -> list[str]:
    return [item_id for item_id, n in Counter(i.id for i in ctx.items).items() if n > 1]


async def test_the_carried_over_context_holds_the_result_once(make_session: MakeSession) -> None:
    journal = Journal()
    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    model = ScriptedLLM(
        [
            Reply(tool_calls=[tool_call("check_order", call_id=CALL_ID)]),
            "Checking.",
            Reply(tool_calls=[tool_call("transfer")]),
        ],
        fallback="ok",
    )
    session: AgentSession[Any] = await make_session(Front(journal), llm=model, tools=[toolset])

    await bounded(session.run(user_input="Where is my order?"), what="order turn")
    await journal.order_gate.reached()

    run = session.run(user_input="Put me through to billing.")
    await journal.transfer_gate.reached()
    # the result comes in while the front desk is busy with the transfer
    ended = fakes.wait_for_event(
        session,
        "tool_execution_updated",
        lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == CALL_ID,
    )
    journal.order_gate.open()
    await bounded(ended, what="check_order ended")
    journal.transfer_gate.open()
    await bounded(run, what="transfer turn")
    await bounded(journal.entered["billing"].wait(), what="billing on_enter")
    await bounded(session.wait_for_idle(), what="idle")
    await bounded(session.run(user_input="Thanks."), what="next turn")

    billing = session.current_agent
    assert billing.instructions == BILLING
    assert duplicated(billing.chat_ctx) == [], [(i.type, i.id) for i in billing.chat_ctx.items]
    last = [c for c in model.calls if c.instructions == BILLING][-1]
    assert duplicated(last.chat_ctx) == [], [(i.type, i.id) for i in last.chat_ctx.items]
    await bounded(session.aclose(), what="AgentSession.aclose")
