"""The caller's audio during a handoff reaches the agent taking over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, llm, utils
from livekit.agents.llm import FunctionCall, GenerationCreatedEvent, MessageGeneration

from .fake_io import FakeAudioInput
from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

SAMPLE_RATE = 16000


def _frame(samples: int) -> rtc.AudioFrame:
    """A frame told apart from the others by its length."""
    return rtc.AudioFrame(
        data=b"\x00\x00" * samples,
        sample_rate=SAMPLE_RATE,
        num_channels=1,
        samples_per_channel=samples,
    )


def _generation(calls: list[FunctionCall]) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=True,
        response_id=utils.shortuuid("resp_"),
    )


class HearingSession(FakeRealtimeSession):
    """Answers each reply request at once, with the next scripted calls if any; wakes the
    test when the frame it waits for arrives."""

    def __init__(self, model: HearingModel) -> None:
        super().__init__(model)
        self._hearing_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        script = self._hearing_model.script
        fut.set_result(_generation(script.pop(0) if script else []))
        return fut

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        super().push_audio(frame)
        self._hearing_model.heard.append(frame.samples_per_channel)
        if frame.samples_per_channel == self._hearing_model.wait_for:
            self._hearing_model.arrived.set()


class HearingModel(FakeRealtimeModel):
    def __init__(self, script: list[list[FunctionCall]], **capabilities: bool) -> None:
        super().__init__(
            capabilities=fake_capabilities(auto_tool_reply_generation=False, **capabilities)
        )
        self.script = script
        self.heard: list[int] = []
        self.wait_for = -1
        self.arrived = asyncio.Event()

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = HearingSession(self)
        self.created_sessions.append(sess)
        return sess


class SlowSetup(llm.Toolset):
    """A toolset that takes a while to set up, like an MCP server connecting."""

    def __init__(self) -> None:
        super().__init__(id="slow_setup")
        self.setting_up = asyncio.Event()
        self.release = asyncio.Event()

    async def setup(self) -> SlowSetup:
        self.setting_up.set()
        await self.release.wait()
        return self


class Billing(Agent):
    def __init__(self, toolset: SlowSetup) -> None:
        super().__init__(instructions="You are the billing desk.", tools=[toolset])


class Desk(Agent):
    def __init__(self, toolset: SlowSetup) -> None:
        super().__init__(instructions="You are the front desk.")
        self.toolset = toolset

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return Billing(self.toolset)


@pytest.mark.parametrize("reuse", [True, False], ids=["session_reused", "session_replaced"])
async def test_audio_while_the_arriving_agent_starts_reaches_it(reuse: bool) -> None:
    caps = {} if reuse else {"mutable_chat_context": False, "mutable_instructions": False}
    model = HearingModel(
        [[FunctionCall(call_id="call_1", name="to_billing", arguments="{}")]], **caps
    )
    toolset = SlowSetup()
    audio = FakeAudioInput()
    session = AgentSession(llm=model)
    session.input.audio = audio
    await session.start(Desk(toolset))
    try:
        run = asyncio.ensure_future(session.run(user_input="Put me through to billing."))
        await asyncio.wait_for(toolset.setting_up.wait(), timeout=5)

        # the caller goes on talking while the billing desk sets up its tools
        said = [160, 161, 162]
        for samples in said:
            audio.push(_frame(samples))
        toolset.release.set()
        await asyncio.wait_for(run, timeout=5)

        # a frame after the handoff: once it is heard, every frame before it was delivered
        model.wait_for = 163
        audio.push(_frame(163))
        await asyncio.wait_for(model.arrived.wait(), timeout=5)

        after = model.heard[model.heard.index(163) - len(said) : model.heard.index(163)]
        assert after == said, f"the billing desk heard {model.heard}, not what was said {said}"
    finally:
        await asyncio.wait_for(session.aclose(), timeout=5)
