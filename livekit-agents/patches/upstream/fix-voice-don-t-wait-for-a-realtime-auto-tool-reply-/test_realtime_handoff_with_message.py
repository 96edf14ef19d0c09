"""A realtime handoff that carries a message does not wait for an automatic tool reply."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import FunctionCall, GenerationCreatedEvent, MessageGeneration

from .fake_realtime import FakeRealtimeModel, fake_capabilities

pytestmark = pytest.mark.unit

# well under the 5 s the leaving activity would wait for an automatic reply it then discards
RUN_BOUND = 2.5


class Secondary(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the secondary agent.")
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        self.entered.set()


class Triage(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the triage agent.")
        self.secondary: Secondary | None = None

    @function_tool
    async def switch_to_secondary(self) -> tuple[Agent, str]:
        """Hand the conversation to the secondary agent."""
        self.secondary = Secondary()
        return self.secondary, "Transferring you now"


async def _reply_request(model: FakeRealtimeModel) -> asyncio.Future[GenerationCreatedEvent]:
    async def requested() -> None:
        while not model.created_sessions or not model.active_session._reply_futs:
            await asyncio.sleep(0)

    await asyncio.wait_for(requested(), timeout=5)
    return model.active_session._reply_futs[0]


def _generation(call: FunctionCall) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=True,
        response_id="response-1",
    )


async def _entered(triage: Triage) -> None:
    while triage.secondary is None:
        await asyncio.sleep(0)
    await triage.secondary.entered.wait()


async def test_run_returns_once_the_arriving_agent_entered() -> None:
    # the model answers tool outputs on its own (auto_tool_reply_generation), like Gemini
    model = FakeRealtimeModel(capabilities=fake_capabilities(auto_tool_reply_generation=True))
    triage = Triage()
    async with AgentSession(llm=model) as session:
        await session.start(triage)

        run = session.run(user_input="Move me on, please.")

        async def wait_run() -> Any:
            return await run

        run_task = asyncio.ensure_future(wait_run())
        request = await _reply_request(model)
        request.set_result(
            _generation(FunctionCall(call_id="call_1", name="switch_to_secondary", arguments="{}"))
        )

        await asyncio.wait_for(_entered(triage), timeout=5)

        # nothing is left to wait for once the arriving agent entered
        await asyncio.wait({run_task}, timeout=RUN_BOUND)
        returned_in_time = run_task.done()
        await asyncio.wait_for(run_task, timeout=10)

        assert returned_in_time, "session.run() still waited after the handoff completed"
        assert session.current_agent is triage.secondary
