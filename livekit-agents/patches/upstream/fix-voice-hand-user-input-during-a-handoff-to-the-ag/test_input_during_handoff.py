"""User input given while a handoff is under way is answered by the agent taking over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import pytest

from livekit.agents import Agent, AgentSession, ModelSettings, function_tool, llm
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Put me through to billing."
BARGE_IN = "Actually, it's about a refund."


def _last_user_text(chat_ctx: llm.ChatContext) -> str | None:
    for item in reversed(chat_ctx.items):
        if item.type == "message" and item.role == "user":
            return item.text_content
    return None


class RecordingAgent(Agent):
    """Records which user message each of its LLM requests answers."""

    def __init__(self, name: str, answered: list[tuple[str, str | None]], **kwargs: object) -> None:
        super().__init__(instructions=f"You are the {name}.", **kwargs)  # type: ignore[arg-type]
        self.name = name
        self.answered = answered
        self.exit_gate: asyncio.Event | None = None
        self.exiting = asyncio.Event()

    async def on_exit(self) -> None:
        self.exiting.set()
        if self.exit_gate is not None:
            await self.exit_gate.wait()

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        self.answered.append((self.name, _last_user_text(chat_ctx)))
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            yield chunk


class Billing(RecordingAgent):
    def __init__(self, answered: list[tuple[str, str | None]], tools: list[object]) -> None:
        super().__init__("billing desk", answered, tools=tools)

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        # the arriving agent's context opens with its instructions after the user's message,
        # which FakeLLM cannot key on: answer directly
        self.answered.append((self.name, _last_user_text(chat_ctx)))
        yield "Billing here, let me help."


class SlowSetup(llm.Toolset):
    """A toolset that takes a while to set up, like an MCP server connecting."""

    def __init__(self) -> None:
        super().__init__(id="slow_setup")
        self.setting_up = asyncio.Event()
        self.release = asyncio.Event()

    async def setup(self) -> SlowSetup:
        self.setting_up.set()
        await self.release.wait()
        return self


class Desk(RecordingAgent):
    def __init__(self, answered: list[tuple[str, str | None]], billing_tools: list[object]) -> None:
        super().__init__("front desk", answered)
        self.billing_tools = billing_tools
        self.billing: Billing | None = None

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        self.billing = Billing(self.answered, self.billing_tools)
        return self.billing


def _fake_llm() -> FakeLLM:
    call = FunctionToolCall(name="to_billing", arguments="{}", call_id="call_1")
    return FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=USER, content="", ttft=0, duration=0, tool_calls=[call]),
            FakeLLMResponse(input=BARGE_IN, content="Let me help.", ttft=0, duration=0),
        ]
    )


@pytest.mark.parametrize("where", ["leaving_on_exit", "arriving_setup"])
async def test_barge_in_during_a_handoff_is_answered_by_the_arriving_agent(where: str) -> None:
    answered: list[tuple[str, str | None]] = []
    toolset = SlowSetup()
    desk = Desk(answered, [toolset] if where == "arriving_setup" else [])
    held: asyncio.Event
    if where == "leaving_on_exit":
        desk.exit_gate = held = asyncio.Event()
        reached = desk.exiting
    else:
        held, reached = toolset.release, toolset.setting_up

    async with AgentSession(llm=_fake_llm()) as session:
        await session.start(desk)
        run = session.run(user_input=USER)
        await asyncio.wait_for(reached.wait(), timeout=5)

        # the user barges in while the handoff is held there
        session.interrupt()
        try:
            handle = session.generate_reply(user_input=BARGE_IN)
        except RuntimeError as e:
            pytest.fail(f"the user's input was refused: {e}")
        finally:
            held.set()

        await asyncio.wait_for(run, timeout=5)
        await asyncio.wait_for(handle, timeout=5)

        assert session.current_agent is desk.billing
        # answered once, by the agent taking over
        assert [who for who, text in answered if text == BARGE_IN] == ["billing desk"]
