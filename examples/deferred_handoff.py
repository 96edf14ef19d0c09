"""An async tool that reports progress, then hands off (livekit/agents#5936, fixed by the fork).

The tool tells the caller to hold on with ``ctx.update()``, keeps working, and returns the
next agent. Stock 1.8.9 drops that return ("agent handoff after a progress update is not
supported"); the fork hands off at the next turn boundary.

    OPENAI_API_KEY=... uv run --with livekit-plugins-openai python examples/deferred_handoff.py

tests/examples runs it against a scripted model.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from livekit.agents import Agent, AgentSession, RunContext, function_tool, llm


class ForecastAgent(Agent):
    def __init__(self, report: str, entered: asyncio.Event) -> None:
        super().__init__(instructions=f"You are the forecast agent. The report: {report}")
        self._entered = entered

    async def on_enter(self) -> None:
        self._entered.set()


class FrontDesk(Agent):
    def __init__(self, entered: asyncio.Event, lookup: asyncio.Future[str] | None = None) -> None:
        super().__init__(instructions="You are the front desk. Use get_weather for forecasts.")
        self._entered = entered
        self._lookup = lookup  # a test can control when the slow work finishes

    async def _slow_lookup(self) -> str:
        if self._lookup is not None:
            return await self._lookup
        await asyncio.sleep(2)  # stands in for a slow backend call
        return "sunny, 21 degrees"

    @function_tool
    async def get_weather(self, ctx: RunContext) -> Agent:
        """Look up the forecast and hand over to the forecast agent."""
        await ctx.update("Please hold on a minute while I look that up.")
        report = await self._slow_lookup()
        return ForecastAgent(report, self._entered)


async def run_demo(model: llm.LLM, lookup: asyncio.Future[str] | None = None) -> AgentSession[Any]:
    """Ask for the weather; returns once the forecast agent took over (or after 30 s)."""
    entered = asyncio.Event()
    session: AgentSession[Any] = AgentSession(llm=model, vad=None, turn_handling={"turn_detection": None})
    await session.start(FrontDesk(entered, lookup), record=False)
    try:
        result = await session.run(user_input="What's the weather tomorrow?")
        for ev in result.events:
            if ev.type == "message":
                print(f"{type(session.current_agent).__name__}: {ev.item.text_content}")
        await asyncio.wait_for(entered.wait(), 30)
        print(f"now talking to: {type(session.current_agent).__name__}")
    finally:
        await session.aclose()
    return session


def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (and install livekit-plugins-openai) to run this with a real model")
    from livekit.plugins import openai

    asyncio.run(run_demo(openai.LLM(model="gpt-4o-mini")))


if __name__ == "__main__":
    main()
