"""mock_tools() passes a mock the parameters it declares, by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, RunContext, function_tool, mock_tools
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Research bees."


class Researcher(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the research agent.")

    @function_tool
    async def research(self, ctx: RunContext, topic: str, depth: int = 1) -> str:
        """Research a topic.

        Args:
            topic: what to research
            depth: how deep to go
        """
        return "the real research tool ran"


def _fake_llm() -> FakeLLM:
    call = FunctionToolCall(
        name="research", arguments=json.dumps({"topic": "bees", "depth": 2}), call_id="call_1"
    )
    return FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=[call])
        ]
    )


async def _mocked_research(mock: Any) -> list[str]:
    async with AgentSession(llm=_fake_llm()) as session:
        await session.start(Researcher())
        with mock_tools(Researcher, {"research": mock}):
            result = await session.run(user_input=USER)
    return [ev.item.output for ev in result.events if ev.type == "function_call_output"]


async def test_mock_gets_the_parameter_it_names() -> None:
    seen: list[Any] = []

    def mock(topic: str) -> str:
        seen.append(topic)
        return f"mocked research on {topic}"

    outputs = await _mocked_research(mock)

    assert seen == ["bees"]
    assert outputs == ["mocked research on bees"]


async def test_mock_gets_the_parameters_it_names_in_any_order() -> None:
    seen: list[tuple[Any, Any]] = []

    def mock(depth: int, topic: str) -> str:
        seen.append((depth, topic))
        return "mocked"

    await _mocked_research(mock)

    assert seen == [(2, "bees")]


async def test_mock_with_kwargs_gets_every_argument() -> None:
    seen: list[dict[str, Any]] = []

    def mock(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "mocked"

    await _mocked_research(mock)

    assert [{k: kwargs.get(k) for k in ("topic", "depth")} for kwargs in seen] == [
        {"topic": "bees", "depth": 2}
    ]
