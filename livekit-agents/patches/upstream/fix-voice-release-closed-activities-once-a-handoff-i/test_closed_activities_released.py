"""Activities closed by handoffs are freed, not kept alive for the whole session."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from livekit.agents import NOT_GIVEN, Agent, AgentSession, NotGivenOr, function_tool, stt, vad
from livekit.agents.llm import FunctionToolCall
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.utils.audio import AudioBuffer

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Next desk, please."
HANDOFFS = 12


class Desk(Agent):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=f"You are desk {name}.")
        self.name = name

    @function_tool
    async def switch(self) -> Agent:
        """Send the caller to the other desk."""
        return Desk("B" if self.name == "A" else "A")


class QuietVAD(vad.VAD):
    """A VAD that hears no speech: each activity runs a stream of it, which only takes audio in."""

    def __init__(self) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=0.032))

    def stream(self) -> vad.VADStream:
        return QuietVADStream(self)


class QuietVADStream(vad.VADStream):
    async def _main_task(self) -> None:
        async for _ in self._input_ch:
            pass


class QuietSTT(stt.STT):
    """A streaming STT that transcribes nothing; the session hands its stream over at handoffs."""

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=False))

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        raise NotImplementedError

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> stt.RecognizeStream:
        return QuietRecognizeStream(stt=self, conn_options=conn_options)


class QuietRecognizeStream(stt.RecognizeStream):
    async def _run(self) -> None:
        async for _ in self._input_ch:
            pass


def _current_activity(session: AgentSession) -> weakref.ref[object]:
    activity = session._activity
    assert activity is not None
    return weakref.ref(activity)


def _session_kwargs(setup: str) -> dict[str, Any]:
    if setup == "text":
        return {"vad": None}
    kwargs: dict[str, Any] = {"vad": QuietVAD(), "turn_handling": {"turn_detection": "vad"}}
    if setup == "vad-stt":
        kwargs["stt"] = QuietSTT()
    return kwargs


@pytest.mark.parametrize("setup", ["text", "vad", "vad-stt"])
async def test_activities_closed_by_handoffs_are_freed(setup: str) -> None:
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(
                input=USER,
                content="",
                ttft=0,
                duration=0,
                tool_calls=[FunctionToolCall(name="switch", arguments="{}", call_id="call_1")],
            )
        ]
    )
    async with AgentSession(llm=fake_llm, **_session_kwargs(setup)) as session:
        await session.start(Desk("A"))
        activities = [_current_activity(session)]
        for _ in range(HANDOFFS):
            await session.run(user_input=USER)
            activities.append(_current_activity(session))

        handoffs = [item for item in session.history.items if item.type == "agent_handoff"]
        assert len(handoffs) == HANDOFFS + 1  # the first one is the session's start

        gc.collect()
        # the current activity and the one before it may still be referenced by the last run
        alive = [i for i, ref in enumerate(activities[:-2]) if ref() is not None]
        assert alive == []
