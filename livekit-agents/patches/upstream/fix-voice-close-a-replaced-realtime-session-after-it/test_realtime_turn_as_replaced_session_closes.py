"""A turn the caller ends on the leaving agent's realtime session, which the handoff replaces,
is answered by the agent taking over when its transcript only comes as that session closes."""

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
CLOSE_TICKS = 50
"""Loop ticks the leaving agent's realtime session is given to close once its on_exit returned
(it closes in a few when it does not wait for the transcript)."""


class ServerTurnSession(FakeRealtimeSession):
    """A realtime session with server-side turn detection; it records each reply it is asked
    for, with the instructions and the last user message it had then."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self._turn_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        self._turn_model.requests.append((self.updated_instructions, _last_user_text(self)))
        fut.set_result(_generation(text="ok", user_initiated=True))
        return fut

    def start_turn(self) -> None:
        """The server hears the caller start speaking."""
        self.emit("input_speech_started", InputSpeechStartedEvent())

    def end_turn(
        self, transcript: str, *, calls: list[FunctionCall] | None = None, reply: str | None = "ok"
    ) -> None:
        """The caller stops speaking: the server transcribes the turn and replies on its own."""
        item_id = utils.shortuuid("user_")
        self.emit("input_speech_stopped", InputSpeechStoppedEvent(user_transcription_enabled=True))
        self._chat_ctx = self.chat_ctx.copy()
        self._chat_ctx.add_message(role="user", content=transcript, id=item_id)
        self.emit(
            "input_audio_transcription_completed",
            InputTranscriptionCompleted(item_id=item_id, transcript=transcript, is_final=True),
        )
        self.emit(
            "generation_created",
            _generation(text=None if calls else reply, calls=calls, user_initiated=False),
        )


class ServerTurnModel(FakeRealtimeModel):
    def __init__(self, *, auto_tool_reply_generation: bool = False) -> None:
        super().__init__(
            capabilities=fake_capabilities(auto_tool_reply_generation=auto_tool_reply_generation)
        )
        self.requests: list[tuple[str | None, str | None]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = ServerTurnSession(self)
        self.created_sessions.append(sess)
        return sess


def _last_user_text(rt_session: FakeRealtimeSession) -> str | None:
    users = [i for i in rt_session.chat_ctx.items if i.type == "message" and i.role == "user"]
    return users[-1].text_content if users else None


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


def _user_messages(session: AgentSession, text: str) -> int:
    return sum(
        1
        for i in session.history.items
        if i.type == "message" and i.role == "user" and i.text_content == text
    )


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
        await _settled_on(session, desk.billing)
        assert rt_session.closed
        assert billing_model.active_session is not rt_session

        # recorded once, and answered once, by the billing desk
        assert _user_messages(session, SPOKEN) == 1
        assert [who for who, text in billing_model.requests if text == SPOKEN] == [BILLING]
