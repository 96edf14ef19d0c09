"""A turn the realtime model's server detects during a handoff is answered by the agent
taking over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import (
    FunctionCall,
    GenerationCreatedEvent,
    InputSpeechStartedEvent,
    InputSpeechStoppedEvent,
    InputTranscriptionCompleted,
    MessageGeneration,
)
from livekit.agents.voice.agent_activity import ActivityClosedError

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
SPOKEN = "Actually, it's about a refund."


class ServerTurnSession(FakeRealtimeSession):
    """A realtime session with server-side turn detection; it records each reply it is asked
    for, with the instructions and the last user message it had then."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self._turn_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        users = [i for i in self.chat_ctx.items if i.type == "message" and i.role == "user"]
        self._turn_model.requests.append(
            (self.updated_instructions, users[-1].text_content if users else None)
        )
        fut.set_result(_generation(text="ok", user_initiated=True))
        return fut

    def simulate_user_turn(self, transcript: str, calls: list[FunctionCall] | None = None) -> None:
        """The server hears the user, transcribes the turn and replies on its own."""
        item_id = utils.shortuuid("user_")
        self.emit("input_speech_started", InputSpeechStartedEvent())
        self.emit("input_speech_stopped", InputSpeechStoppedEvent(user_transcription_enabled=True))
        chat_ctx = self.chat_ctx.copy()
        chat_ctx.add_message(role="user", content=transcript, id=item_id)
        self._chat_ctx = chat_ctx
        self.emit(
            "input_audio_transcription_completed",
            InputTranscriptionCompleted(item_id=item_id, transcript=transcript, is_final=True),
        )
        self.emit(
            "generation_created",
            _generation(text=None if calls else "ok", calls=calls, user_initiated=False),
        )


class ServerTurnModel(FakeRealtimeModel):
    def __init__(self) -> None:
        super().__init__(capabilities=fake_capabilities(auto_tool_reply_generation=False))
        self.requests: list[tuple[str | None, str | None]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = ServerTurnSession(self)
        self.created_sessions.append(sess)
        return sess


def _generation(
    *, text: str | None, calls: list[FunctionCall] | None = None, user_initiated: bool
) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    if text is not None:
        text_ch = utils.aio.Chan[str]()
        text_ch.send_nowait(text)
        text_ch.close()
        audio_ch = utils.aio.Chan[rtc.AudioFrame]()
        audio_ch.close()
        modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        modalities.set_result(["text"])
        message_ch.send_nowait(
            MessageGeneration(
                message_id=utils.shortuuid("msg_"),
                text_stream=text_ch,
                audio_stream=audio_ch,
                modalities=modalities,
            )
        )
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls or []:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=user_initiated,
        response_id=utils.shortuuid("resp_"),
    )


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


async def _settled_on(session: AgentSession, agent: Agent) -> None:
    """The agent's activity is the session's, and idle."""

    async def settle() -> None:
        while True:
            try:
                activity = await session.wait_for_idle()
            except ActivityClosedError:
                activity = None  # a handoff is closing the activity: look again
            if activity is not None and activity.agent is agent:
                return
            await asyncio.sleep(0)

    await asyncio.wait_for(settle(), timeout=5)


async def test_server_detected_turn_during_on_exit_is_answered_by_the_arriving_agent() -> None:
    model = ServerTurnModel()
    desk = Desk()
    async with AgentSession(llm=model) as session:
        await session.start(desk)
        rt_session = model.active_session
        assert isinstance(rt_session, ServerTurnSession)

        rt_session.simulate_user_turn(
            TO_BILLING, calls=[FunctionCall(call_id="call_1", name="to_billing", arguments="{}")]
        )
        await asyncio.wait_for(desk.exiting.wait(), timeout=5)
        try:
            # the caller goes on talking while the desk leaves: the server hears a new turn
            rt_session.simulate_user_turn(SPOKEN)
        finally:
            desk.exit_gate.set()

        assert desk.billing is not None
        await _settled_on(session, desk.billing)

        # recorded once, and answered once, by the billing desk
        users = [
            i
            for i in session.history.items
            if i.type == "message" and i.role == "user" and i.text_content == SPOKEN
        ]
        assert len(users) == 1
        assert [who for who, text in model.requests if text == SPOKEN] == [BILLING]
