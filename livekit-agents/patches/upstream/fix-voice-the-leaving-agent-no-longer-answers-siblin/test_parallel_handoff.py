"""A batch of parallel tool calls where one tool hands off to another agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable

import pytest

from livekit.agents import Agent, AgentSession, ModelSettings, function_tool, llm
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Save x and move me on."


class RecordingAgent(Agent):
    """Records each LLM request it makes, with its tool choice."""

    def __init__(self, name: str, requests: list[tuple[str, object]], **kwargs: object) -> None:
        super().__init__(instructions=f"You are the {name} agent.", **kwargs)  # type: ignore[arg-type]
        self.name = name
        self.requests = requests

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        self.requests.append((self.name, model_settings.tool_choice))
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            yield chunk


class Secondary(RecordingAgent):
    def __init__(self, requests: list[tuple[str, object]], chat_ctx: llm.ChatContext) -> None:
        super().__init__("secondary", requests, chat_ctx=chat_ctx)


class Triage(RecordingAgent):
    def __init__(self, requests: list[tuple[str, object]]) -> None:
        super().__init__("triage", requests)
        self.secondary: Secondary | None = None

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent:
        """Hand the conversation to the secondary agent."""
        # the documented way to carry the conversation on
        self.secondary = Secondary(self.requests, chat_ctx=self.chat_ctx)
        return self.secondary


def _call(name: str, call_id: str, **arguments: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=call_id)


@pytest.mark.parametrize("handoff_first", [False, True])
async def test_leaving_agent_does_not_reply_after_a_parallel_handoff(handoff_first: bool) -> None:
    calls = [_call("save_data", "call_save", value="x"), _call("switch_to_secondary", "call_sw")]
    if handoff_first:
        calls.reverse()
    requests: list[tuple[str, object]] = []
    triage = Triage(requests)
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=calls)
        ]
    )
    async with AgentSession(llm=fake_llm) as session:
        await session.start(triage)
        result = await session.run(user_input=USER)

        result.expect.contains_function_call_output(output="Saved: x")
        assert triage.secondary is not None
        assert session.current_agent is triage.secondary

        # the leaving agent made only the request that called the tools: the sibling's result
        # went to the arriving agent, which carries the conversation on
        assert [name for name, _ in requests] == ["triage"]
