"""An async tool result that comes back while its agent is handed off is answered by the
agent taking over, not by the one that left."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, ModelSettings, RunContext, function_tool, llm
from livekit.agents.llm import FunctionToolCall
from livekit.agents.llm.async_toolset import AsyncToolset

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Where is my order?"
SHIPPED = "Order 42 shipped"


class Requests(list[tuple[str, bool]]):
    """The LLM requests made, by agent and whether they carry the tool's result."""

    def __init__(self) -> None:
        super().__init__()
        self.result_answered = asyncio.Event()

    def record(self, agent: str, chat_ctx: llm.ChatContext) -> None:
        has_result = _has_result(chat_ctx)
        self.append((agent, has_result))
        if has_result:
            self.result_answered.set()


def _has_result(chat_ctx: llm.ChatContext) -> bool:
    return any(i.type == "function_call_output" and i.output == SHIPPED for i in chat_ctx.items)


class Front(Agent):
    def __init__(self, requests: Requests, tools: list[Any]) -> None:
        super().__init__(instructions="You are the front desk.", tools=tools)
        self.requests = requests
        self.exit_gate = asyncio.Event()
        self.exiting = asyncio.Event()

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.exit_gate.wait()

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        self.requests.record("front", chat_ctx)
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            yield chunk


class Billing(Agent):
    def __init__(self, requests: Requests) -> None:
        super().__init__(instructions="You are the billing desk.")
        self.requests = requests
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        self.entered.set()

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        self.requests.record("billing", chat_ctx)
        yield "Billing here: your order shipped."


class OrderTool:
    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

        @function_tool(name="check_order")
        async def check_order(ctx: RunContext) -> str:
            """Check the caller's order."""
            await ctx.update("Checking your order")
            self.waiting.set()
            await self.release.wait()
            return SHIPPED

        self.tool = check_order


@pytest.mark.parametrize("scope", ["session", "agent"])
async def test_result_returned_during_on_exit_is_answered_by_the_arriving_agent(
    scope: str,
) -> None:
    order = OrderTool()
    toolset = AsyncToolset(id="orders", tools=[order.tool])
    requests = Requests()
    front = Front(requests, [toolset] if scope == "agent" else [])
    call = FunctionToolCall(name="check_order", arguments="{}", call_id="call_order")
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=[call])
        ]
    )
    session_tools: list[Any] = [toolset] if scope == "session" else []
    async with AgentSession(llm=fake_llm, tools=session_tools) as session:
        ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def on_update(ev: Any) -> None:
            if ev.update.type == "tool_call_ended" and not ended.done():
                ended.set_result(ev.update)

        session.on("tool_execution_updated", on_update)
        await session.start(front)
        await asyncio.wait_for(session.run(user_input=USER), timeout=5)
        await asyncio.wait_for(order.waiting.wait(), timeout=5)

        billing = Billing(requests)
        session.update_agent(billing)
        await asyncio.wait_for(front.exiting.wait(), timeout=5)
        at_exit = len(requests)

        # the tool returns while the front desk is in its on_exit
        order.release.set()
        assert (await asyncio.wait_for(ended, timeout=5)).status == "done"
        front.exit_gate.set()
        await asyncio.wait_for(requests.result_answered.wait(), timeout=5)
        await asyncio.wait_for(billing.entered.wait(), timeout=5)

        assert session.current_agent is billing
        # no request on behalf of the front desk once its on_exit started
        assert requests[at_exit:] == [("billing", True)]
