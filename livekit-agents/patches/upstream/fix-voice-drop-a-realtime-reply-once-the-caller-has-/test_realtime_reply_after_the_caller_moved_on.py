"""The caller starts their next turn before the agent taking over asked the realtime model for
its answer to a turn handed over: that answer is not asked for any more, the next turn's answers
the caller."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import FunctionCall

from .fake_server_turn_realtime import (
    ServerTurnModel,
    ServerTurnSession,
    settled_on,
    user_messages,
)

pytestmark = pytest.mark.unit

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
FIRST = "I was charged twice."
SECOND = "Actually, it's about a refund."


class Billing(Agent):
    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(instructions=BILLING, llm=model)
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        # the caller starts speaking again as billing comes in, before it takes the turn
        # handed over to it
        rt_session = self.realtime_llm_session
        assert isinstance(rt_session, ServerTurnSession)
        rt_session.start_turn()
        self.entered.set()


class Desk(Agent):
    def __init__(self, billing_model: ServerTurnModel) -> None:
        super().__init__(instructions=DESK)
        self.exiting = asyncio.Event()
        self.exit_gate = asyncio.Event()
        self.billing_model = billing_model
        self.billing: Billing | None = None

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.exit_gate.wait()

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        self.billing = Billing(self.billing_model)
        return self.billing


async def test_the_callers_next_turn_supersedes_the_answer_to_a_turn_handed_over() -> None:
    desk_model, billing_model = ServerTurnModel(), ServerTurnModel()
    desk = Desk(billing_model)
    async with AgentSession(llm=desk_model) as session:
        await session.start(desk)
        rt_session = desk_model.active_session
        assert isinstance(rt_session, ServerTurnSession)

        rt_session.start_turn()
        rt_session.end_turn(
            TO_BILLING, calls=[FunctionCall(call_id="call_1", name="to_billing", arguments="{}")]
        )
        await asyncio.wait_for(desk.exiting.wait(), timeout=5)
        try:
            # a whole turn while the desk leaves: the billing desk is to answer it
            rt_session.start_turn()
            rt_session.end_turn(FIRST)
        finally:
            desk.exit_gate.set()

        billing = desk.billing
        assert billing is not None
        await asyncio.wait_for(billing.entered.wait(), timeout=5)
        billing_session = billing_model.active_session
        assert isinstance(billing_session, ServerTurnSession)
        assert billing_session is not rt_session
        activity = billing._activity
        assert activity is not None
        if (turn_task := activity._user_turn_completed_atask) is not None:
            # billing took the turn handed over
            await asyncio.wait_for(asyncio.shield(turn_task), timeout=5)

        # the caller finishes their next turn: the server answers it
        billing_session.end_turn(SECOND, reply="billing answers the second turn")
        await settled_on(session, billing)

        assert user_messages(session, FIRST) == 1
        assert user_messages(session, SECOND) == 1
        # the model answering the next turn knows the turn handed over
        users = [
            i.text_content
            for i in billing_session.chat_ctx.items
            if i.type == "message" and i.role == "user"
        ]
        assert users[-2:] == [FIRST, SECOND]
        # and is not asked for an answer to it after the caller went on (it would answer the
        # caller's next turn a second time)
        assert billing_model.requests == []
