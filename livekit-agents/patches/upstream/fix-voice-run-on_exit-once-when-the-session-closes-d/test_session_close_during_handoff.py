"""Closing the session while a handoff closes the leaving agent runs its on_exit once."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, function_tool, llm
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "I have a billing question"


class SlowToClose(llm.Toolset):
    """An agent's toolset whose connection takes a while to close (e.g. an MCP server)."""

    def __init__(self) -> None:
        super().__init__(id="crm")
        self.closing = asyncio.Event()
        self.release = asyncio.Event()

    async def aclose(self) -> None:
        self.closing.set()
        await self.release.wait()
        await super().aclose()


class Billing(Agent):
    def __init__(self, exits: list[str]) -> None:
        super().__init__(instructions="You are the billing desk.")
        self._exits = exits

    async def on_exit(self) -> None:
        self._exits.append("billing")


class Desk(Agent):
    def __init__(self, toolset: SlowToClose) -> None:
        super().__init__(instructions="You are the front desk.", tools=[toolset])
        self.exits: list[str] = []

    async def on_exit(self) -> None:
        self.exits.append("desk")

    @function_tool
    async def to_billing(self) -> tuple[Agent, str]:
        """Hand the caller to the billing desk."""
        return Billing(self.exits), "Transferring you to billing"


async def test_session_close_while_the_handoff_closes_the_leaving_agent() -> None:
    toolset = SlowToClose()
    desk = Desk(toolset)
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(
                input=USER,
                content="",
                ttft=0,
                duration=0,
                tool_calls=[FunctionToolCall(name="to_billing", arguments="{}", call_id="call_1")],
            )
        ]
    )
    session = AgentSession(llm=fake_llm)
    await session.start(desk)

    run = asyncio.ensure_future(session.run(user_input=USER))
    # the handoff has drained the desk (its on_exit ran) and is closing its activity
    await asyncio.wait_for(toolset.closing.wait(), timeout=5)
    assert desk.exits == ["desk"]

    # the application closes the session in that window
    close = asyncio.ensure_future(session.aclose())
    toolset.release.set()
    await asyncio.wait_for(close, timeout=5)
    await asyncio.wait({run}, timeout=5)
    if run.done() and not run.cancelled():
        run.exception()  # the close ends the run; its outcome is not what is tested here

    # the desk exited once, and billing never started
    assert desk.exits == ["desk"]
