"""An order lookup that outlives a handoff: the async tool, agents and waits the
livekit/agents#5841 tests (a result that comes back while its agent is handed off) share.

The front desk's ``check_order`` reports progress with ``ctx.update()``, then waits on
``journal.tool_gate`` before it returns :data:`SHIPPED` (its final output is :data:`FINAL_ID`);
the application hands the caller to :class:`Billing` meanwhile, and :func:`is_final` tells the
``tool_execution_updated`` event of the tool's end::

    journal = OrderJournal()
    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    session = await make_session(Front(journal, [toolset]), llm=fake)
"""

from __future__ import annotations

from typing import Any

from livekit.agents import Agent, RunContext, function_tool, llm

from .agents import Journal, JournalingAgent
from .sync import Gate

__all__ = [
    "BILLING",
    "CALL_ID",
    "FINAL_ID",
    "FRONT",
    "SHIPPED",
    "Billing",
    "Front",
    "OrderJournal",
    "is_final",
    "order_tool",
]

FRONT = "You are the front desk."
BILLING = "You are the billing desk."
CALL_ID = "call_order"
FINAL_ID = f"{CALL_ID}_final"
SHIPPED = "Order 42 shipped"


class OrderJournal(Journal):
    """A :class:`Journal` with the gate ``check_order`` waits on before it returns
    (``tool_gate``) and, unless ``hold_front=False``, one on the front desk's ``on_exit``."""

    def __init__(self, *, hold_front: bool = True) -> None:
        super().__init__()
        if hold_front:
            self.exit_gates["front"] = Gate("front on_exit")
        self.tool_gate = Gate("check_order")


class Front(JournalingAgent):
    """The front desk (``name="front"``), with ``tools``."""

    journal: OrderJournal

    def __init__(self, journal: OrderJournal, tools: list[Any] | None = None) -> None:
        super().__init__(journal, name="front", instructions=FRONT, tools=tools or [])


class Billing(Agent):
    """The billing desk: journals its ``on_enter`` as ``"billing"``, and nothing else."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(instructions=BILLING)
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.on_enter("billing")


def order_tool(journal: OrderJournal, result: str | None = SHIPPED) -> llm.FunctionTool:
    """``check_order``: an update, then ``result`` once ``journal.tool_gate`` opens."""

    @function_tool(name="check_order")
    async def check_order(ctx: RunContext) -> str | None:
        """Check the caller's order."""
        await ctx.update("Checking your order")
        await journal.tool_gate.wait()
        return result

    return check_order


def is_final(ev: Any) -> bool:
    """A ``tool_execution_updated`` event: the ``check_order`` call ended."""
    return ev.update.type == "tool_call_ended" and ev.update.call_id == CALL_ID
