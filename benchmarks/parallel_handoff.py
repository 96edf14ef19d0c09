"""Parallel handoff (livekit/agents#5150): time from the batch's last tool return to the
arriving agent's on_enter, with a scripted model whose first token takes 100 ms.

The arriving agent is built the documented way, with the leaving agent's context, so it carries
the conversation on. Goal: the fork's parallel handoff within 1.05x of its single-tool handoff;
stock pays an extra leaving-agent round trip. An arriving agent with a fresh context starts
afresh, so the leaving agent voices the siblings' results itself on both builds (the `fresh_`
figures: the same round trip, by design). Run: `uv run python -m benchmarks.parallel_handoff`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import Reply, ScriptedLLM, offline_session_kwargs, tool_call

ROUNDS = 5
FIRST_TOKEN = 0.1


class Arriving(Agent):
    def __init__(self, entered: asyncio.Event, chat_ctx: Any = None) -> None:
        super().__init__(instructions="arriving", chat_ctx=chat_ctx)
        self._entered = entered

    async def on_enter(self) -> None:
        self._entered.set()


class Leaving(Agent):
    def __init__(self, entered: asyncio.Event, *, carry: bool) -> None:
        super().__init__(instructions="leaving")
        self.entered = entered
        self.carry = carry
        self.last_return = 0.0

    @function_tool
    async def save_data(self) -> str:
        """Save."""
        self.last_return = time.perf_counter()
        return "Saved: x"

    @function_tool
    async def switch(self) -> Agent:
        """Switch."""
        agent = Arriving(self.entered, self.chat_ctx if self.carry else None)
        self.last_return = time.perf_counter()
        return agent


async def one(parallel: bool, *, carry: bool = True) -> tuple[float, int]:
    calls = [tool_call("save_data"), tool_call("switch")] if parallel else [tool_call("switch")]
    fake = ScriptedLLM([Reply(tool_calls=calls)], fallback="ok", first_token_delay=FIRST_TOKEN)
    entered = asyncio.Event()
    leaving = Leaving(entered, carry=carry)
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs(llm=fake))
    await session.start(leaving, record=False)
    try:
        run = session.run(user_input="go")
        await asyncio.wait_for(entered.wait(), 10)
        latency = time.perf_counter() - leaving.last_return
        await asyncio.wait_for(run, 10)
        leaving_calls = sum(1 for c in fake.calls if c.instructions == "leaving") - 1
    finally:
        await session.aclose()
    return latency, leaving_calls


async def measure() -> dict[str, float]:
    single = [await one(False) for _ in range(ROUNDS)]
    parallel = [await one(True) for _ in range(ROUNDS)]
    fresh = [await one(True, carry=False) for _ in range(ROUNDS)]
    s = statistics.median(x for x, _ in single)
    p = statistics.median(x for x, _ in parallel)
    f = statistics.median(x for x, _ in fresh)
    return {
        "single_handoff_s": s,
        "parallel_handoff_s": p,
        "parallel/single": p / s,
        "leaving_llm_calls_after_batch": float(max(n for _, n in parallel)),
        "fresh_parallel/single": f / s,
        "fresh_leaving_llm_calls_after_batch": float(max(n for _, n in fresh)),
    }


if __name__ == "__main__":
    if "--measure" in sys.argv:
        from benchmarks._compare import main_measure

        main_measure(measure)
    else:
        from benchmarks._compare import compare

        compare(
            "benchmarks.parallel_handoff",
            {
                "parallel/single": "fork <= 1.05",
                "leaving_llm_calls_after_batch": "fork 0, stock 1",
                "fresh_leaving_llm_calls_after_batch": "1 on both: the leaving agent voices them",
            },
        )
