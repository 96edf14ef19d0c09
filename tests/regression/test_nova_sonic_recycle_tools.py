"""Nova Sonic: a tool in flight across a session recycle still delivers its result.

``RealtimeSession`` recycles its Bedrock stream when the tool set changes (``update_tools()``,
often from inside a tool) and on a timer (the 8-minute Bedrock limit, credential expiry). A
``toolResult`` only answers a ``toolUse`` of its own stream, so a call the old stream issued
cannot be answered with one on the new stream. Stock 1.8.9's tool-change recycle clears
``_pending_tools`` and discards the queued results, so the result of the tool that changed the
tools is skipped without a log when it arrives, and the model never answers it; the timed
recycle keeps ``_pending_tools``, so the result would go out as a ``toolResult`` for an id the new
stream never issued. Now such a result reaches the new stream as text marked as a tool result
(not as the user's words), interactive, so the model answers it as it answers a toolResult.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; ``FakeBedrock.fire_recycle_timer()`` makes the recycle timer fire at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    is_interactive_text,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: a Nova Sonic session recycle drops the result of a tool in flight"),
]

QUESTION = "book table 12"
RESULT = "table 12 booked"
ANSWER = "Your table is booked."
MARK = "This is a tool result, not the user speaking."
# the framework waits 5 s for an automatic reply to a tool result that never gets one
BOUND = 8.0


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Booker(Agent):
    """Its tool waits for a gate; with ``adds_tool`` it first adds a tool (a recycle)."""

    def __init__(self, gate: Gate, *, adds_tool: bool) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = gate
        self.adds_tool = adds_tool

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        if self.adds_tool:
            await self.update_tools([*self.tools, cancel_booking])
        await self.gate.wait()
        return f"table {table} booked"


def _script(bedrock: FakeBedrock) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))


async def _check_result_reached_new_stream(bedrock: FakeBedrock, session: AgentSession[Any]) -> None:
    old, new = bedrock.connections[0], bedrock.connections[1]
    results = [(role, interactive, t) for role, interactive, t in sent_texts(new.sent) if RESULT in t]
    assert len(results) == 1, f"the tool's result reached the new stream {len(results)} times: {results}"
    role, interactive, text = results[0]
    assert MARK in text and "tool-1" in text and interactive and role == "USER"
    # no toolResult for a call the stream did not issue, none on the old stream after the recycle
    assert tool_result_contents(old.sent) == [] and tool_result_contents(new.sent) == []
    assert all(MARK not in (m.text_content or "") for m in session.history.messages() if m.role == "user")
    assert bedrock.violations == []


async def test_tool_that_changes_the_tools(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    _script(bedrock)
    gate = Gate("booking")
    session, _ = await nova_session(bedrock, make_session, Booker(gate, adds_tool=True))

    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    # the tool added a tool: the session recycles while the tool still runs
    new = await bedrock.connection(1)
    await new.wait_ready()
    gate.open()
    await bounded(run, BOUND, what="session.run() of the booking")

    await _check_result_reached_new_stream(bedrock, session)
    await answered


async def test_tool_in_flight_across_the_timed_recycle(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    _script(bedrock)
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    gate = Gate("booking")
    session, _ = await nova_session(bedrock, make_session, Booker(gate, adds_tool=False))
    # (stock recycles only once the assistant has spoken on the stream)
    await bounded(session.run(user_input="hi"))

    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    new = await bedrock.connection(1)
    # (stock: the timed recycle cancels itself; the new stream never comes up, see
    # test_nova_sonic_recycle.py: the result is lost all the same)
    await new.wait_sent(
        lambda e: e["event"].get("contentStart", {}).get("role") == "SYSTEM", what="the new prompt"
    )
    gate.open()
    await bounded(run, BOUND, what="session.run() of the booking")

    await _check_result_reached_new_stream(bedrock, session)
    await answered
