"""Nova Sonic: the result of a tool still running when the session recycles its stream reaches
the model on the new stream.

A tool that changes the agent's tools makes ``RealtimeSession.update_tools()`` recycle the
Bedrock stream while the tool still runs. A ``toolResult`` only answers a ``toolUse`` of its own
stream, so the result must reach the new stream another way: as interactive text marked as a
tool result (not as the user's words), which the model answers. Before the fix the recycle
forgot the call and the result was skipped without a log: the model never answered it.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent, function_tool

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
RESULT = "table 12 booked"
ANSWER = "Your table is booked."


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.release = asyncio.Event()
        self.calls = 0

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.calls += 1
        # a new tool: Nova Sonic takes tools only when a stream starts, so the session recycles
        await self.update_tools([*self.tools, cancel_booking])
        await self.release.wait()
        return f"table {table} booked"


async def test_tool_result_reaches_the_stream_after_a_tool_change_recycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.answer(RESULT, model_turn(ANSWER))
    agent = Booker()
    async with offline_session() as session:
        await session.start(agent)
        run = asyncio.ensure_future(session.run(user_input=QUESTION))
        # the tool changed the tools: a new stream opens while the tool still runs
        new = await bedrock.stream(1)
        agent.release.set()
        await asyncio.wait_for(run, TIMEOUT)

        old = bedrock.streams[0]
        results = [t for t in new.texts() if RESULT in t[2]]
        assert len(results) == 1, f"the tool's result reached the new stream {len(results)} times"
        role, interactive, text = results[0]
        assert role == "USER" and interactive and "tool result" in text
        # no toolResult for a call the new stream never issued, none on the old one after it
        assert new.tool_results() == [] and old.tool_results() == []
        assert agent.calls == 1
        assert [m.text_content for m in session.history.messages() if m.role == "assistant"][
            -1
        ] == ANSWER
