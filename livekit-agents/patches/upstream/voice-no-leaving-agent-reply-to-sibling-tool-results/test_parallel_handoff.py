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
    def __init__(
        self, requests: list[tuple[str, object]], chat_ctx: llm.ChatContext | None = None
    ) -> None:
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

    @function_tool
    async def switch_to_other(self) -> Agent:
        """Hand the conversation to another agent."""
        return Secondary(self.requests)


def _call(name: str, call_id: str, **arguments: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=call_id)


def _fake_llm(*calls: FunctionToolCall) -> FakeLLM:
    return FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=list(calls))
        ]
    )


@pytest.mark.parametrize("handoff_first", [False, True])
async def test_leaving_agent_does_not_reply_after_a_parallel_handoff(handoff_first: bool) -> None:
    calls = [_call("save_data", "call_save", value="x"), _call("switch_to_secondary", "call_sw")]
    if handoff_first:
        calls.reverse()
    requests: list[tuple[str, object]] = []
    triage = Triage(requests)
    async with AgentSession(llm=_fake_llm(*calls)) as session:
        await session.start(triage)
        result = await session.run(user_input=USER)

        result.expect.contains_function_call_output(output="Saved: x")
        assert session.current_agent is triage.secondary
        assert triage.secondary is not None

        # the leaving agent made only the request that called the tools
        assert [name for name, _ in requests] == ["triage"]

        # the arriving agent, built from the leaving agent's context, sees the whole batch
        items = triage.secondary.chat_ctx.items
        names = sorted(i.name for i in items if i.type == "function_call")
        assert names == ["save_data", "switch_to_secondary"]
        outputs = sorted(i.call_id for i in items if i.type == "function_call_output")
        assert outputs == ["call_save", "call_sw"]


async def test_two_handoffs_in_one_batch_tell_the_model_why() -> None:
    requests: list[tuple[str, object]] = []
    triage = Triage(requests)
    fake_llm = _fake_llm(_call("switch_to_secondary", "call_1"), _call("switch_to_other", "call_2"))
    async with AgentSession(llm=fake_llm) as session:
        await session.start(triage)
        await session.run(user_input=USER)

        # no handoff happens, and the model is told why, with its tools still available
        assert session.current_agent is triage
        outputs = [i for i in session.history.items if i.type == "function_call_output"]
        assert len(outputs) == 2
        assert all(out.is_error for out in outputs), [out.output for out in outputs]
        assert len(requests) == 2
        assert requests[1][0] == "triage"
        assert requests[1][1] != "none"
