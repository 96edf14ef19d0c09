"""The agent a tool batch hands off to, built from the leaving agent's context, gets the batch."""

from __future__ import annotations

import json

import pytest

from livekit.agents import Agent, AgentSession, function_tool, llm
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Save x and move me on."


class Secondary(Agent):
    def __init__(self, chat_ctx: llm.ChatContext | None = None) -> None:
        super().__init__(instructions="You are the secondary agent.", chat_ctx=chat_ctx)


class Triage(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the triage agent.")
        self.secondary: Secondary | None = None

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent:
        """Hand the conversation to the secondary agent."""
        # the documented way to carry the conversation on
        self.secondary = Secondary(chat_ctx=self.chat_ctx)
        return self.secondary


def _call(name: str, call_id: str, **arguments: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=call_id)


@pytest.mark.parametrize("handoff_first", [False, True])
async def test_arriving_agent_built_from_the_context_gets_the_whole_batch(
    handoff_first: bool,
) -> None:
    calls = [_call("save_data", "call_save", value="x"), _call("switch_to_secondary", "call_sw")]
    if handoff_first:
        calls.reverse()
    triage = Triage()
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=calls)
        ]
    )
    async with AgentSession(llm=fake_llm) as session:
        await session.start(triage)
        await session.run(user_input=USER)

        assert triage.secondary is not None
        assert session.current_agent is triage.secondary

        # the arriving agent knows what the turn did: both calls, both outputs
        items = triage.secondary.chat_ctx.items
        calls_seen = sorted(i.call_id for i in items if i.type == "function_call")
        outputs_seen = sorted(i.call_id for i in items if i.type == "function_call_output")
        assert (calls_seen, outputs_seen) == (["call_save", "call_sw"], ["call_save", "call_sw"])
        saved = [i for i in items if i.type == "function_call_output" and i.call_id == "call_save"]
        assert saved[0].output == "Saved: x"
