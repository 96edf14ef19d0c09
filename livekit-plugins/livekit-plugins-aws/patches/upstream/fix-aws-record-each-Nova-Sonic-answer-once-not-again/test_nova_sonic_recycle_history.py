"""Nova Sonic: a session recycle replays each assistant turn once.

When ``RealtimeSession`` recycles its Bedrock stream (here: the tool set changed), the new
stream gets the conversation as its history. Nova sends each assistant turn twice, SPECULATIVE
text while it generates and FINAL text once it is spoken; the FINAL text arriving after the
turn's audio ``END_TURN`` closed the generation must not be appended to the turn again.
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


async def test_recycle_replays_each_turn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("hi", model_turn("Hello there."))
    agent = Booker()
    async with offline_session() as session:
        await session.start(agent)
        await asyncio.wait_for(session.run(user_input="hi"), TIMEOUT)

        await agent.update_tools([*agent.tools, cancel_booking])  # a recycle
        new = await bedrock.stream(1)

        history = [(role, text) for role, interactive, text in new.texts() if not interactive]
        assert history == [
            ("SYSTEM", "You book tables."),
            ("USER", "hi"),
            ("ASSISTANT", "Hello there."),
        ], f"the new stream's history does not replay each turn once: {history}"
