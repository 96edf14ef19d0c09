"""Nova Sonic: an async tool's later updates and its final result reach the model.

A tool that reports progress with ``ctx.update()`` answers its call with the first update; the
framework gives the session each later update and the final result as outputs of their own
(``<id>_update_N``, ``<id>_final``), then prompts the model to tell the user. Bedrock answers a
``toolUse`` once, so the session must send those as text, marked as a tool result (not the
user's words). Before the fix it skipped them without a log: the model was prompted about
results it never received.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent, RunContext, function_tool

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)


pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    TIMEOUT,
    FakeBedrock,
    model_turn,
    offline_session,
)

QUESTION = "book table 12"
FOLLOW_UP = "New results arrived"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.final = asyncio.Event()

    @function_tool
    async def book(self, ctx: RunContext, table: int) -> str:
        """Book a table."""
        await ctx.update("checking availability")
        await ctx.update("holding the table")
        await self.final.wait()
        return f"table {table} booked"


async def test_later_updates_and_final_result_reach_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.answer("checking availability", model_turn("Checking."))
    bedrock.answer(FOLLOW_UP, model_turn("Still holding it."))
    bedrock.answer(FOLLOW_UP, model_turn("Booked."))
    agent = Booker()
    async with offline_session() as session:
        await session.start(agent)
        stream = await bedrock.stream(0)
        await asyncio.wait_for(session.run(user_input=QUESTION), TIMEOUT)

        def follow_ups() -> list[int]:
            return [i for i, (_, _, t) in enumerate(stream.texts()) if t.startswith(FOLLOW_UP)]

        # the framework prompts the model after the second update, then after the final result
        await bedrock.wait_for(lambda: len(follow_ups()) >= 1, "the first follow-up prompt")
        agent.final.set()
        await bedrock.wait_for(lambda: len(follow_ups()) >= 2, "the second follow-up prompt")

        texts = stream.texts()
        first, second = follow_ups()[:2]
        update = [t for _, _, t in texts[:first] if "holding the table" in t]
        final = [t for _, _, t in texts[first:second] if "table 12 booked" in t]
        assert update, "the second update never reached the model"
        assert final, "the final result never reached the model"
        assert len(update) == 1 and len(final) == 1
        assert "tool result" in update[0] and "tool result" in final[0]
        # a toolResult answers the call once, with the first update
        assert [tool_id for tool_id, _ in stream.tool_results()] == ["tool-1"]
