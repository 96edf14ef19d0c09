"""Nova Sonic: a session recycle does not ask the model a question a running tool answers.

When ``RealtimeSession`` recycles its Bedrock stream while a tool call runs (here: the tool
changed the tool set), the new stream gets the conversation as its history. The trailing user
message the model already answered with that tool call must stay in the history, not be sent
again as interactive text: the model would call the tool a second time. The call's result
answers it on the new stream.
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


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.release = asyncio.Event()
        self.bookings: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.bookings.append(table)
        if cancel_booking not in self.tools:
            await self.update_tools([*self.tools, cancel_booking])  # the session recycles
        await self.release.wait()
        return f"table {table} booked"


async def test_recycle_does_not_ask_the_question_again(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.answer(QUESTION, model_turn(tool=("tool-2", "book", {"table": 12})))
    bedrock.answer("table 12 booked", model_turn("Booked."))
    agent = Booker()
    async with offline_session() as session:
        await session.start(agent)
        run = asyncio.ensure_future(session.run(user_input=QUESTION))
        new = await bedrock.stream(1)  # the tool added a tool: a recycle while it runs
        agent.release.set()
        await asyncio.wait_for(run, TIMEOUT)

        asked = [t for role, interactive, t in new.texts() if interactive and t == QUESTION]
        assert asked == [], "the new stream asked the model the user's question again"
        assert agent.bookings == [12], f"the tool ran {len(agent.bookings)} times"
        assert ("USER", False, QUESTION) in new.texts()  # in the history
