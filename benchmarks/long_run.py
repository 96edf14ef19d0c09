"""Long runs in one session: 1,000 sequential handoffs A->B->A..., and 500 ordinary turns
with a tool call and no handoff.

Goals: handoff time, last decile / first decile <= 1.2, bounded memory growth with no leaked
activities, speech handles or tasks; ordinary turns fork/stock wall time within 1.00 +- 0.03 (our patches
cost nothing on the common path). Run: `uv run python -m benchmarks.long_run`.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from typing import Any

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.voice.agent_activity import AgentActivity
from livekit.agents.voice.speech_handle import SpeechHandle

from tests.fakes import LLMCall, Reply, ScriptedLLM, offline_session_kwargs, tool_call

HANDOFFS = 1000
TURNS = 500


class Ping(Agent):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=name)

    @function_tool
    async def switch(self) -> Agent:
        """Switch to the other agent."""
        return Ping("B" if self.instructions == "A" else "A")

    @function_tool
    async def lookup(self) -> str:
        """Look something up."""
        return "found"


async def handoffs() -> dict[str, float]:
    fake = ScriptedLLM(fallback=lambda call: Reply(tool_calls=[tool_call("switch")]))
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs(llm=fake))
    await session.start(Ping("A"), record=False)
    times: list[float] = []
    tracemalloc.start()
    try:
        for i in range(HANDOFFS):
            if i == HANDOFFS // 10:
                gc.collect()
                base, _ = tracemalloc.get_traced_memory()
            start = time.perf_counter()
            await asyncio.wait_for(session.run(user_input="switch"), 10)
            times.append(time.perf_counter() - start)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
        tasks = len(asyncio.all_tasks())
        activities = sum(isinstance(o, AgentActivity) for o in gc.get_objects())
        speeches = {id(o) for o in gc.get_objects() if isinstance(o, SpeechHandle)}
        # the session keeps a record of every event (its session report), speech_created included
        recorded = {id(ev.speech_handle) for ev in session._recorded_events if ev.type == "speech_created"}
    finally:
        tracemalloc.stop()
        await session.aclose()
    decile = HANDOFFS // 10
    return {
        "handoff_first_decile_ms": statistics.mean(times[:decile]) * 1000,
        "handoff_last_decile_ms": statistics.mean(times[-decile:]) * 1000,
        "handoff_last/first": statistics.mean(times[-decile:]) / statistics.mean(times[:decile]),
        "handoff_mem_growth_kib": (end - base) / 1024,
        "tasks_alive_after_handoffs": float(tasks),
        # closed activities and finished speeches still reachable (see docs/benchmarks.md)
        "activities_alive_after_handoffs": float(activities),
        "speech_handles_alive_after_handoffs": float(len(speeches)),
        "speech_handles_beyond_event_record": float(len(speeches - recorded)),
    }


async def turns() -> dict[str, float]:
    def script(call: LLMCall) -> Reply | str:
        # a tool call, then the reply to its output
        return (
            "done"
            if call.chat_ctx.items[-1].type == "function_call_output"
            else Reply(tool_calls=[tool_call("lookup")])
        )

    fake = ScriptedLLM(fallback=script)
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs(llm=fake))
    await session.start(Ping("A"), record=False)
    try:
        start = time.perf_counter()
        for _ in range(TURNS):
            await asyncio.wait_for(session.run(user_input="look it up"), 10)
        elapsed = time.perf_counter() - start
    finally:
        await session.aclose()
    return {"turns_500_wall_s": elapsed}


async def measure() -> dict[str, float]:
    return {**await handoffs(), **await turns()}


if __name__ == "__main__":
    if "--measure" in sys.argv:
        from benchmarks._compare import main_measure

        main_measure(measure)
    else:
        from benchmarks._compare import compare

        compare(
            "benchmarks.long_run",
            {
                "handoff_last/first": "<= 1.2",
                "handoff_mem_growth_kib": "bounded",
                "activities_alive_after_handoffs": "<= 2, whatever the count of handoffs",
                "speech_handles_beyond_event_record": "0",
                "turns_500_wall_s": "fork/stock <= 1.03 (1.00 +- 0.03, below is faster)",
            },
        )
