"""Deferred handoff (livekit/agents#5936): time from an async tool's return (after
``ctx.update()``) to the new agent's on_enter, while the session is idle.

Goal: fork <= 10 ms; stock never hands off (reported as inf). Run:
`uv run python -m benchmarks.deferred_handoff`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from livekit.agents import Agent, AgentSession, RunContext, function_tool

from tests.fakes import Reply, ScriptedLLM, offline_session_kwargs, tool_call

ROUNDS = 5


class Next(Agent):
    def __init__(self, entered: asyncio.Event) -> None:
        super().__init__(instructions="next")
        self._entered = entered

    async def on_enter(self) -> None:
        self._entered.set()


class First(Agent):
    def __init__(self, release: asyncio.Event, entered: asyncio.Event) -> None:
        super().__init__(instructions="first")
        self.release, self.entered, self.returned_at = release, entered, 0.0

    @function_tool
    async def lookup(self, ctx: RunContext) -> Agent:
        """Look it up."""
        await ctx.update("hold on")
        await self.release.wait()
        agent = Next(self.entered)
        self.returned_at = time.perf_counter()
        return agent


async def one() -> float:
    release, entered = asyncio.Event(), asyncio.Event()
    first = First(release, entered)
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("lookup")])], fallback="ok")
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs(llm=fake))
    await session.start(first, record=False)
    try:
        await asyncio.wait_for(session.run(user_input="go"), 10)  # idle afterwards
        release.set()
        try:
            await asyncio.wait_for(entered.wait(), 2)
        except asyncio.TimeoutError:
            return float("inf")
        return time.perf_counter() - first.returned_at
    finally:
        await session.aclose()


async def measure() -> dict[str, float]:
    times = [await one() for _ in range(ROUNDS)]
    return {"tool_return_to_on_enter_s": statistics.median(times)}


if __name__ == "__main__":
    if "--measure" in sys.argv:
        from benchmarks._compare import main_measure

        main_measure(measure)
    else:
        from benchmarks._compare import compare

        compare("benchmarks.deferred_handoff", {"tool_return_to_on_enter_s": "fork <= 0.010, stock inf"})
