"""Barging in on a realtime reply that has not played yet keeps the answer to the next turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

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

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

FIRST = "I need help with my invoice."
SECOND = "No wait, it's about my refund."


class _Response:
    """One server response; a cancel (``interrupt()`` while it is under way) ends it unsaid."""

    def __init__(self, text: str, hold: asyncio.Event | None) -> None:
        self.text = text
        self.hold = hold
        self.reading = asyncio.Event()
        self.cancelled = False
        self.finished = False

    async def messages(self) -> AsyncIterator[MessageGeneration]:
        self.reading.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.cancelled:
            self.finished = True
            return
        modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        modalities.set_result(["text"])
        yield MessageGeneration(
            message_id=utils.shortuuid("msg_"),
            text_stream=self._text(),
            audio_stream=_no_audio(),
            modalities=modalities,  # type: ignore[arg-type]
        )

    async def _text(self) -> AsyncIterator[str]:
        try:
            if not self.cancelled:
                yield self.text
        finally:
            self.finished = True


async def _no_audio() -> AsyncIterator[rtc.AudioFrame]:
    return
    yield


async def _no_calls() -> AsyncIterator[FunctionCall]:
    return
    yield


class ServerTurnSession(FakeRealtimeSession):
    """Server-side turn detection: the server answers each turn as soon as it ends, and
    ``interrupt()`` cancels whatever response is under way, as a realtime API's cancel does."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self.responses: list[_Response] = []

    def interrupt(self) -> None:
        super().interrupt()
        for response in self.responses:
            if not response.finished:
                response.cancelled = True

    def simulate_user_turn(
        self, transcript: str, *, hold: asyncio.Event | None = None
    ) -> _Response:
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
        response = _Response(f"answering: {transcript}", hold)
        self.responses.append(response)
        self.emit(
            "generation_created",
            GenerationCreatedEvent(
                message_stream=response.messages(),  # type: ignore[arg-type]
                function_stream=_no_calls(),  # type: ignore[arg-type]
                user_initiated=False,
                response_id=utils.shortuuid("resp_"),
            ),
        )
        return response


class ServerTurnModel(FakeRealtimeModel):
    def __init__(self) -> None:
        super().__init__(
            capabilities=fake_capabilities(turn_detection=True, user_transcription=True)
        )

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = ServerTurnSession(self)
        self.created_sessions.append(sess)
        return sess


async def test_barge_in_on_an_unplayed_reply_keeps_the_answer_to_the_next_turn() -> None:
    model = ServerTurnModel()
    first_words = asyncio.Event()
    async with AgentSession(llm=model) as session:
        await session.start(Agent(instructions="You are the front desk."))
        rt = model.created_sessions[-1]
        assert isinstance(rt, ServerTurnSession)

        first = rt.simulate_user_turn(FIRST, hold=first_words)
        # the first answer is on its way out, not a word of it played yet: the caller speaks
        # again, and the server answers that at once
        await asyncio.wait_for(first.reading.wait(), timeout=5)
        second = rt.simulate_user_turn(SECOND)
        first_words.set()
        await asyncio.wait_for(session.wait_for_idle(), timeout=5)

        users = [m.text_content for m in session.history.messages() if m.role == "user"]
        said = [m.text_content for m in session.history.messages() if m.role == "assistant"]
        assert users.count(SECOND) == 1
        # interrupting the first answer must not cancel the server's answer to the second turn
        assert not second.cancelled, "interrupting the first reply cancelled the next answer"
        assert said == [f"answering: {SECOND}"]
