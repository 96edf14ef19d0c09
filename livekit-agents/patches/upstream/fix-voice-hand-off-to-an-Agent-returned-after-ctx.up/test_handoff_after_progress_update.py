"""An async tool that reports progress with ctx.update() and then returns an agent hands off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, RunContext, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "What's the weather in Paris?"


class WeatherDesk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the weather desk.")
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        self.entered.set()


class FrontDesk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.tool_waiting = asyncio.Event()
        self.release_tool = asyncio.Event()
        self.weather: WeatherDesk | None = None

    @function_tool
    async def get_weather(self, ctx: RunContext) -> Agent:
        """Look up the weather."""
        await ctx.update("Please hold on")
        self.tool_waiting.set()
        await self.release_tool.wait()
        self.weather = WeatherDesk()
        return self.weather


async def test_agent_returned_after_a_progress_update_takes_over() -> None:
    front = FrontDesk()
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(
                input=USER,
                content="",
                ttft=0,
                duration=0,
                tool_calls=[FunctionToolCall(name="get_weather", arguments="{}", call_id="call_1")],
            )
        ]
    )
    async with AgentSession(llm=fake_llm) as session:
        ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def on_update(ev: Any) -> None:
            if ev.update.type == "tool_call_ended" and not ended.done():
                ended.set_result(ev.update)

        session.on("tool_execution_updated", on_update)
        await session.start(front)

        # the first turn ends with the answer to the progress update; the tool still runs
        await asyncio.wait_for(session.run(user_input=USER), timeout=5)
        await asyncio.wait_for(front.tool_waiting.wait(), timeout=5)
        assert session.current_agent is front

        front.release_tool.set()
        update = await asyncio.wait_for(ended, timeout=5)
        assert update.status == "done", update.message

        assert front.weather is not None
        await asyncio.wait_for(front.weather.entered.wait(), timeout=5)
        assert session.current_agent is front.weather
