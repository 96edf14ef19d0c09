"""Two tools of one LLM generation each return an agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable

import pytest

from livekit.agents import Agent, AgentSession, ModelSettings, function_tool, llm
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Move me on."


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


class Triage(RecordingAgent):
    def __init__(self, requests: list[tuple[str, object]]) -> None:
        super().__init__("triage", requests)

    @function_tool
    async def switch_to_billing(self) -> Agent:
        """Hand the conversation to billing."""
        return RecordingAgent("billing", self.requests, chat_ctx=self.chat_ctx)

    @function_tool
    async def switch_to_support(self) -> Agent:
        """Hand the conversation to support."""
        return RecordingAgent("support", self.requests)


def _call(name: str, call_id: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps({}), call_id=call_id)


async def test_two_handoffs_in_one_batch_tell_the_model_why() -> None:
    requests: list[tuple[str, object]] = []
    triage = Triage(requests)
    calls = [_call("switch_to_billing", "call_1"), _call("switch_to_support", "call_2")]
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=calls)
        ]
    )
    async with AgentSession(llm=fake_llm) as session:
        await session.start(triage)
        await session.run(user_input=USER)

        # no handoff happens, and the model is told why, with its tools still available
        assert session.current_agent is triage
        outputs = [i for i in session.history.items if i.type == "function_call_output"]
        assert len(outputs) == 2
        assert all(out.is_error for out in outputs), [out.output for out in outputs]
        assert [name for name, _ in requests] == ["triage", "triage"]
        assert requests[1][1] != "none"
