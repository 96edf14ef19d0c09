"""A realtime model that answers tool outputs on its own replies to an output it got after the
caller began their next turn: that reply is not the answer to the turn, and does not play over
the caller."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
)

from .fake_realtime import FakeRealtimeSession
from .fake_server_turn_realtime import (
    ServerTurnModel,
    ServerTurnSession,
    generation,
    settled_on,
    user_messages,
)

pytestmark = pytest.mark.unit

DESK = "You are the front desk."
BALANCE = "What's my balance?"
TOOL_ANSWER = "Your balance is 42 EUR."
SPOKEN = "Actually, it's about a refund."
TURN_ANSWER = "Let me look at the refund."


class AutoReplySession(ServerTurnSession):
    """Replies on its own to the tool outputs it is given, as models with automatic tool
    replies do."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self.auto_replied = asyncio.Event()

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        known = {i.id for i in self.chat_ctx.items if i.type == "function_call_output"}
        await super().update_chat_ctx(chat_ctx)
        if any(i.type == "function_call_output" and i.id not in known for i in chat_ctx.items):
            asyncio.get_running_loop().call_soon(self._reply_to_outputs)

    def _reply_to_outputs(self) -> None:
        self.emit("generation_created", generation(text=TOOL_ANSWER, user_initiated=False))
        self.auto_replied.set()


class AutoReplyModel(ServerTurnModel):
    def __init__(self) -> None:
        super().__init__(auto_tool_reply_generation=True)

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = AutoReplySession(self)
        self.created_sessions.append(sess)
        return sess


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=DESK)
        self.looking_up = asyncio.Event()
        self.lookup_gate = asyncio.Event()

    @function_tool
    async def look_up_balance(self) -> str:
        """Look the caller's balance up."""
        self.looking_up.set()
        await self.lookup_gate.wait()
        return "42 EUR"


async def test_the_models_own_tool_reply_does_not_answer_the_callers_next_turn() -> None:
    model = AutoReplyModel()
    desk = Desk()
    async with AgentSession(llm=model) as session:
        await session.start(desk)
        rt_session = model.active_session
        assert isinstance(rt_session, AutoReplySession)

        rt_session.start_turn()
        rt_session.end_turn(
            BALANCE,
            calls=[FunctionCall(call_id="call_1", name="look_up_balance", arguments="{}")],
        )
        await asyncio.wait_for(desk.looking_up.wait(), timeout=5)

        # the caller speaks again while the tool runs; its output reaches the model meanwhile,
        # which answers it on its own (the caller's turn is not in its context yet)
        rt_session.start_turn()
        desk.lookup_gate.set()
        await asyncio.wait_for(rt_session.auto_replied.wait(), timeout=5)
        # then the caller's turn ends, and the model answers it
        rt_session.end_turn(SPOKEN, reply=TURN_ANSWER)
        await settled_on(session, desk)

        assert user_messages(session, SPOKEN) == 1
        said = [
            i.text_content
            for i in session.history.items
            if i.type == "message" and i.role == "assistant"
        ]
        # the reply to the lookup, which the caller talked over, does not play after they went
        # on: the model's answer to their turn does
        assert said == [TURN_ANSWER]
