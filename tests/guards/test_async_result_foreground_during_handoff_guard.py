"""A session-scoped async result that comes back during a handoff, on the fork, waits for
the handoff (``await asyncio.wait([handoff])`` in ``_deliver_reply()``). A tool of the same
toolset that enters ``ctx.foreground()`` meanwhile waits for that delivery
(``_drain_pending_reply()``), and the handoff's drain waits for that tool's speech: nothing
ever moves again. ``session.run()`` never returns, the handoff never completes.

Stock 1.8.9 delivers the result at once (to the leaving agent, which the fork rightly
avoids), so ``foreground()`` goes on, the tool returns and the handoff completes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import AgentSession, RunContext, function_tool
from livekit.agents.llm.async_toolset import AsyncToolset

from tests import fakes
from tests.fakes import (
    DEFAULT_TIMEOUT,
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

FRONT = "You are the front desk."
BILLING = "You are the billing desk."
LOOKUP_ID = "call_lookup"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.lookup_gate = Gate("lookup")
        self.confirm_gate = Gate("confirm")
        self.exit_gates["front"] = Gate("front on_exit")


def toolset(journal: Journal) -> AsyncToolset:
    @function_tool
    async def lookup(ctx: RunContext) -> str:
        """Look the order up."""
        await ctx.update("Looking it up")
        await journal.lookup_gate.wait()
        return "Order 42 shipped"

    @function_tool
    async def confirm(ctx: RunContext) -> str:
        """Confirm the booking."""
        await journal.confirm_gate.wait()
        async with ctx.foreground():
            journal.events.append("confirm holds the floor")
        return "confirmed"

    tools: list[Any] = [lookup, confirm]
    return AsyncToolset(id="desk", tools=tools)


def lookup_ended(ev: Any) -> bool:
    return ev.update.type == "tool_call_ended" and ev.update.call_id == LOOKUP_ID


async def test_foreground_during_a_handoff_does_not_wedge_the_session(make_session: MakeSession) -> None:
    journal = Journal()
    front = JournalingAgent(journal, name="front", instructions=FRONT)

    def answer(call: LLMCall) -> str:
        return {FRONT: "Front desk here.", BILLING: "Billing here."}[call.instructions or ""]

    fake = ScriptedLLM(
        [
            Reply(tool_calls=[tool_call("lookup", call_id=LOOKUP_ID)]),
            "Looking it up.",
            Reply(tool_calls=[tool_call("confirm")]),
        ],
        fallback=answer,
    )
    session: AgentSession[Any] = await make_session(front, llm=fake, tools=[toolset(journal)])
    await bounded(session.run(user_input="Where is my order?"), what="order turn")
    await journal.lookup_gate.reached()

    confirm_run = session.run(user_input="Confirm my booking.")
    await journal.confirm_gate.reached()

    billing = JournalingAgent(journal, name="billing", instructions=BILLING)
    session.update_agent(billing)
    await bounded(journal.exiting["front"].wait(), what="front on_exit")
    # the result comes back during the handoff...
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", lookup_ended))
    journal.lookup_gate.open()
    await ended
    # ...then confirm enters ctx.foreground(), and the front desk's on_exit ends
    journal.confirm_gate.open()
    journal.exit_gates["front"].open()

    run_fut = asyncio.ensure_future(confirm_run)
    run_done, _ = await asyncio.wait([run_fut], timeout=DEFAULT_TIMEOUT)
    if not run_done:
        run_fut.cancel()
    assert run_done, f"session.run() never returned: {journal.events}"
    assert "confirm holds the floor" in journal.events
    await bounded(journal.entered["billing"].wait(), what="billing on_enter")
    assert session.current_agent is billing
    close = asyncio.ensure_future(session.aclose())
    closed, _ = await asyncio.wait([close], timeout=DEFAULT_TIMEOUT)
    assert closed, "session.aclose() never completed"
