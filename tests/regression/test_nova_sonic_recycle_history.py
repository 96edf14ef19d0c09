"""Nova Sonic: a session recycle replays each turn once and does not ask the model again.

When ``RealtimeSession`` recycles its Bedrock stream (the tool set changed, the 8-minute limit,
credential expiry), the new stream gets the conversation as its history. Stock 1.8.9 records
each assistant turn twice in that history: the SPECULATIVE text while the turn is generated, and
the FINAL text that arrives after the turn's audio ``END_TURN`` closed its generation, appended
to the same message. And it sends a trailing user message as interactive text on the new
stream, so when the model had answered that message with a tool call still running, the model
is asked the same question again and runs the tool a second time. Now each turn is replayed
once, and a trailing user message answered by a tool call in flight stays in the history: the
call's result, carried over to the new stream, prompts the answer.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from livekit.agents import Agent, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    SentEvent,
    ServerEvent,
    is_interactive_text,
    model_turn,
    sent_texts,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

QUESTION = "book table 12"
# the framework waits 5 s for an automatic reply to a tool result that never gets one
BOUND = 8.0


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Booker(Agent):
    """Its tool adds a tool (which recycles the session), then waits for a gate."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = gate
        self.bookings: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.bookings.append(table)
        if cancel_booking not in self.tools:
            await self.update_tools([*self.tools, cancel_booking])
        await self.gate.wait()
        return f"table {table} booked"


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session recycle replays each assistant turn twice")
async def test_recycle_replays_each_turn_once(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    agent = Booker(Gate("booking"))
    session, _ = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))

    await agent.update_tools([*agent.tools, cancel_booking])  # the tool set changes: a recycle
    new = await bedrock.connection(1)
    await new.wait_ready()

    history = [(role, text) for role, interactive, text in sent_texts(new.sent) if not interactive]
    assert history == [("SYSTEM", "be brief"), ("USER", "hi"), ("ASSISTANT", "Hello there.")], (
        f"the new stream's history does not replay each turn once: {history}"
    )
    assert bedrock.violations == []


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session recycle asks the model the user's question again")
async def test_recycle_does_not_ask_again(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    ids = itertools.count(1)

    def _call_book(conn: BedrockConnection, sent: SentEvent) -> list[ServerEvent]:
        # the model answers the question with a call, each time it is asked
        return model_turn(tool=(f"tool-{next(ids)}", "book", {"table": 12}))

    bedrock.reply_when(is_interactive_text(QUESTION), _call_book, once=False)
    bedrock.reply_when(is_interactive_text(containing="table 12 booked"), model_turn("Booked."))
    gate = Gate("booking")
    agent = Booker(gate)
    session, _ = await nova_session(bedrock, make_session, agent)

    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    new = await bedrock.connection(1)  # the tool added a tool: a recycle while it runs
    await new.wait_ready()
    gate.open()
    await bounded(run, BOUND, what="session.run() of the booking")

    asked = [text for role, interactive, text in sent_texts(new.sent) if interactive and text == QUESTION]
    assert asked == [], "the new stream asked the model the user's question again"
    assert agent.bookings == [12], f"the tool ran {len(agent.bookings)} times"
    assert ("USER", False, QUESTION) in sent_texts(new.sent)  # in the history
    assert bedrock.violations == []
