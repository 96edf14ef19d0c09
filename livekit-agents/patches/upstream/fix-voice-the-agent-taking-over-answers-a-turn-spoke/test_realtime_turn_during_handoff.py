"""A turn the realtime model's server detects during a handoff is answered by the agent
taking over."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import FunctionCall

from .fake_server_turn_realtime import ServerTurnModel, ServerTurnSession, settled_on

pytestmark = pytest.mark.unit

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
SPOKEN = "Actually, it's about a refund."


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=BILLING)


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=DESK)
        self.exiting = asyncio.Event()
        self.exit_gate = asyncio.Event()
        self.billing: Billing | None = None

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.exit_gate.wait()

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        self.billing = Billing()
        return self.billing


async def test_server_detected_turn_during_on_exit_is_answered_by_the_arriving_agent() -> None:
    model = ServerTurnModel()
    desk = Desk()
    async with AgentSession(llm=model) as session:
        await session.start(desk)
        rt_session = model.active_session
        assert isinstance(rt_session, ServerTurnSession)

        rt_session.start_turn()
        rt_session.end_turn(
            TO_BILLING, calls=[FunctionCall(call_id="call_1", name="to_billing", arguments="{}")]
        )
        await asyncio.wait_for(desk.exiting.wait(), timeout=5)
        try:
            # the caller goes on talking while the desk leaves: the server hears a new turn
            rt_session.start_turn()
            rt_session.end_turn(SPOKEN)
        finally:
            desk.exit_gate.set()

        assert desk.billing is not None
        await settled_on(session, desk.billing)

        # recorded once, and answered once, by the billing desk
        users = [
            i
            for i in session.history.items
            if i.type == "message" and i.role == "user" and i.text_content == SPOKEN
        ]
        assert len(users) == 1
        assert [who for who, text in model.requests if text == SPOKEN] == [BILLING]
