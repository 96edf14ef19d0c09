"""A turn the caller ends on the leaving agent's realtime session, which the handoff replaces,
is answered by the agent taking over when its transcript only comes as that session closes."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import (
    FunctionCall,
    InputSpeechStoppedEvent,
    InputTranscriptionCompleted,
)

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
SPOKEN = "Actually, it's about a refund."
CLOSE_TICKS = 50
"""Loop ticks the leaving agent's realtime session is given to close once its on_exit returned
(it closes in a few when it does not wait for the transcript)."""


class Billing(Agent):
    def __init__(self, model: ServerTurnModel) -> None:
        # a model of its own: the desk's realtime session is closed, not handed on
        super().__init__(instructions=BILLING, llm=model)


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


async def test_turn_transcribed_as_the_replaced_session_closes_is_answered() -> None:
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
        item_id = utils.shortuuid("user_")
        try:
            # the caller says a whole turn while the desk leaves: the desk's session hears it
            # start and stop, and holds it; its transcript is still to come
            rt_session.start_turn()
            rt_session.emit(
                "input_speech_stopped", InputSpeechStoppedEvent(user_transcription_enabled=True)
            )
            rt_session._chat_ctx = rt_session.chat_ctx.copy()
            rt_session._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        finally:
            desk.exit_gate.set()

        # providers transcribe the caller asynchronously: the transcript comes a moment later,
        # as the desk's session closes
        for _ in range(CLOSE_TICKS):
            if rt_session.aclose_entered.is_set():
                break
            await asyncio.sleep(0)
        rt_session.emit(
            "input_audio_transcription_completed",
            InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
        )

        assert desk.billing is not None
        await settled_on(session, desk.billing)
        assert rt_session.closed
        assert billing_model.active_session is not rt_session

        # recorded once, and answered once, by the billing desk
        assert user_messages(session, SPOKEN) == 1
        assert [who for who, text in billing_model.requests if text == SPOKEN] == [BILLING]
