"""Recording a turn's tool call does not read the whole session history."""

from __future__ import annotations

from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, function_tool, llm
from livekit.agents.llm import FunctionToolCall, chat_context

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

ID_READS = [0]


class CountedMessage(llm.ChatMessage):
    """An earlier message of the conversation that counts the reads of its ``id``."""

    def __getattribute__(self, name: str) -> Any:
        if name == "id":
            ID_READS[0] += 1
        return super().__getattribute__(name)


CountedMessage.model_rebuild(_types_namespace=vars(chat_context))


class Clerk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You look things up.")

    @function_tool
    async def lookup(self) -> str:
        """Look something up."""
        return "found"


def _fake_llm(turns: int) -> FakeLLM:
    responses = [
        FakeLLMResponse(
            input=f"Look it up ({n}).",
            content="",
            ttft=0,
            duration=0,
            tool_calls=[FunctionToolCall(name="lookup", arguments="{}", call_id=f"call_{n}")],
        )
        for n in range(turns)
    ]
    responses.append(FakeLLMResponse(input="found", content="Here it is.", ttft=0, duration=0))
    return FakeLLM(fake_responses=responses)


@pytest.mark.parametrize("earlier", [300, 3000])
async def test_tool_call_turn_does_not_scan_the_history(earlier: int) -> None:
    turns = 3
    async with AgentSession(llm=_fake_llm(turns)) as session:
        await session.start(Clerk())
        # a long conversation already in the session's history
        session.history.insert(
            [
                CountedMessage(role="user", content=[f"earlier {n}"], created_at=float(n + 1))
                for n in range(earlier)
            ]
        )

        reads: list[int] = []
        for n in range(turns):
            ID_READS[0] = 0
            result = await session.run(user_input=f"Look it up ({n}).")
            result.expect.contains_function_call(name="lookup")
            reads.append(ID_READS[0])

        calls = [
            item
            for item in session.history.items
            if item.type in ("function_call", "function_call_output")
        ]
        assert len(calls) == 2 * turns

    # the first turn may index the history once; later turns read none of it
    assert reads[1:] == [0] * (turns - 1)
