"""A realtime model that answers tool outputs on its own replies to an output it got after the
caller began their next turn: that reply is not the answer to the turn, and does not play over
the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import (
    ChatContext,
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
BALANCE = "What's my balance?"
TOOL_ANSWER = "Your balance is 42 EUR."
SPOKEN = "Actually, it's about a refund."
TURN_ANSWER = "Let me look at the refund."


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
        self.emit("generation_created", _generation(text=TOOL_ANSWER, user_initiated=False))
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
        await _settled_on(session, desk)

        assert _user_messages(session, SPOKEN) == 1
        said = [
            i.text_content
            for i in session.history.items
            if i.type == "message" and i.role == "assistant"
        ]
        # the reply to the lookup, which the caller talked over, does not play after they went
        # on: the model's answer to their turn does
        assert said == [TURN_ANSWER]
