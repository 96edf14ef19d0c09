"""A fake realtime model whose server detects the caller's turns: a test says when the caller
starts and stops speaking, and the session transcribes the turn and answers it on its own, as
models with server-side turn detection do. It records each reply the framework asks of it."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit import rtc
from livekit.agents import Agent, AgentSession, utils
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


class ServerTurnSession(FakeRealtimeSession):
    """A realtime session with server-side turn detection; it records each reply it is asked
    for, with the instructions and the last user message it had then."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self._turn_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        self._turn_model.requests.append((self.updated_instructions, _last_user_text(self)))
        fut.set_result(generation(text="ok", user_initiated=True))
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
            generation(text=None if calls else reply, calls=calls, user_initiated=False),
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


def generation(
    *, text: str | None, calls: list[FunctionCall] | None = None, user_initiated: bool
) -> GenerationCreatedEvent:
    """A generation that says ``text`` (if any) and calls ``calls``, both already complete."""
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


async def settled_on(session: AgentSession, agent: Agent) -> None:
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


def user_messages(session: AgentSession, text: str) -> int:
    """How many times the session's history holds the user saying ``text``."""
    return sum(
        1
        for i in session.history.items
        if i.type == "message" and i.role == "user" and i.text_content == text
    )
