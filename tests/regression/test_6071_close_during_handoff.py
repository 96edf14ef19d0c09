"""``session.aclose()`` while a handoff closes the leaving agent: its ``on_exit`` runs twice.

No upstream issue reports this; the closest is livekit/agents#6071, the close of a session
racing an agent transition. A tool hands off (returns the next agent); the handoff drains the
leaving agent (its ``on_exit`` runs) and then closes its activity, here slowed down by the
agent's own toolset, whose ``aclose()`` takes a while (an MCP-like connection). The
application closes the session in that window. Stock 1.8.9 runs the leaving agent's
``on_exit`` a second time: the session close took the activity before the handoff replaced
it, and drains it once the handoff's close of it is done, which forgot that ``on_exit`` had
already run. The fork's drain leaves a closed activity alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, function_tool, llm

from tests.fakes import (
    MODEL_KINDS,
    Gate,
    Journal,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    bounded,
    scripted_model,
    tool_call,
)

BUG = pytest.mark.upstream_bug("livekit/agents#6071")

DESK = "You are the front desk."
BILLING = "You are the billing desk."


class SlowToClose(llm.Toolset):
    """An agent-scoped toolset whose connection takes a while to close."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(id="crm")
        self.gate = gate

    async def aclose(self) -> None:
        await self.gate.wait()
        await super().aclose()


class Desk(JournalingAgent):
    def __init__(self, journal: Journal, *, name: str, instructions: str, tools: list[Any]) -> None:
        super().__init__(journal, name=name, instructions=instructions, tools=tools)
        self.billing: Desk | None = None

    @function_tool
    async def to_billing(self) -> tuple[Agent, str]:
        """Hand the caller to the billing desk."""
        self.billing = Desk(self.journal, name="billing", instructions=BILLING, tools=[])
        return self.billing, "Transferring you to billing"


def answer(request: LLMCall | RTGeneration) -> str:
    return f"answer of {request.instructions}"


@BUG
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_close_while_the_handoff_closes_the_leaving_agent(make_session: MakeSession, kind: str) -> None:
    closing_gate = Gate("crm aclose")
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK, tools=[SlowToClose(closing_gate)])
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("to_billing")])], fallback=answer)
    session = await make_session(desk, llm=model)

    run = asyncio.ensure_future(session.run(user_input="I have a billing question"))
    run.add_done_callback(lambda f: f.cancelled() or f.exception())  # the close ends it
    # the desk has exited and the handoff is closing its activity
    await closing_gate.reached()
    assert journal.events == ["enter desk", "exit desk"]

    # the close, scheduled first, takes the desk's activity, which the handoff is still closing,
    # and waits for it
    close = asyncio.ensure_future(session.aclose())
    closing_gate.open()
    await bounded(close, what="AgentSession.aclose during the handoff")
    await bounded(asyncio.wait([run]), what="session.run() ended by the close")

    # the desk exited once; billing never started, the session was closing
    assert journal.events == ["enter desk", "exit desk"]
    assert desk.billing is not None
