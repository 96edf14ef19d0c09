"""A run lasts until the agent answered the result of an inline AgentTask that completed at once."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel

pytestmark = pytest.mark.unit


class LookupTask(AgentTask[str]):
    """An inline task that already knows its answer: it completes in its on_enter."""

    def __init__(self, n: int) -> None:
        super().__init__(instructions=f"You look up record {n}.")
        self.n = n

    async def on_enter(self) -> None:
        self.complete(f"record {self.n}")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.results: list[str] = []

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        result = await LookupTask(len(self.results) + 1)
        self.results.append(result)
        return result


def _look_up(n: int) -> list[FunctionCall]:
    return [FunctionCall(call_id=f"call_{n}", name="look_up", arguments="{}")]


async def test_consecutive_tasks_each_answered_before_run_returns() -> None:
    # each turn: the model calls look_up, then answers its output
    model = AnsweringModel(
        [_look_up(1), [], _look_up(2), []],
        auto_tool_reply_generation=False,
    )
    desk = Desk()
    async with AgentSession(llm=model) as session:
        await session.start(desk)

        for n in (1, 2):
            await asyncio.wait_for(session.run(user_input=f"Look up record {n}."), timeout=5)

            # the run returns once the desk got the task's result and asked for its answer
            assert desk.results == [f"record {i}" for i in range(1, n + 1)]
            assert len(model.requests) == 2 * n
            assert session.current_agent is desk
