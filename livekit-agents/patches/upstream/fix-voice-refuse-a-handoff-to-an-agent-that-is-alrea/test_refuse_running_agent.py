"""A handoff to an agent that already runs elsewhere is refused."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit


def _respond(text: str, call: FunctionToolCall) -> FakeLLMResponse:
    return FakeLLMResponse(input=text, content="", ttft=0, duration=0, tool_calls=[call])


class Elsewhere(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You run in another session.")


class Transfer(Agent):
    def __init__(self, target: Agent) -> None:
        super().__init__(instructions="You are the front desk.")
        self.target = target

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer the caller."""
        return self.target


async def test_handoff_to_an_agent_running_elsewhere_is_refused() -> None:
    elsewhere = Elsewhere()
    transfer = FunctionToolCall(name="transfer", arguments="{}", call_id="c1")
    fake_llm = FakeLLM(fake_responses=[_respond("Put me through.", transfer)])
    async with AgentSession(llm=FakeLLM()) as other, AgentSession(llm=fake_llm) as session:
        await other.start(elsewhere)
        desk = Transfer(elsewhere)
        await session.start(desk)

        await asyncio.wait_for(session.run(user_input="Put me through."), timeout=5)

        # nothing changed, and the call answers the model with why
        assert session.current_agent is desk
        assert other.current_agent is elsewhere
        outputs = [i for i in session.history.items if i.type == "function_call_output"]
        assert len(outputs) == 1
        assert outputs[0].is_error
