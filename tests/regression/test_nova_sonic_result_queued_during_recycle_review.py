"""Nova Sonic (review of the split recycle PRs): a tool result that comes in while the timed
recycle is ending the old stream still reaches the model.

The timed recycle stops the old stream's audio input (which sends the queued toolResults and
closes its channels), ends the stream (contentEnd, promptEnd, sessionEnd), waits for the reader,
and only then opens the new stream. A tool that returns while the old stream is being ended must
not find a closed channel, and its result must not go out as a toolResult the new stream never
asked for. This test pins that interleaving by holding the old stream's ``sessionEnd`` until the
plugin took the result, and checks that the result reaches the new stream once, as marked
interactive text, and that the model's answer lands in the history.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; ``FakeBedrock.fire_recycle_timer()`` makes the recycle timer fire at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    SentEvent,
    is_event,
    is_interactive_text,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2, tool_output_taken

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug(
        "not-yet: a Nova Sonic timed recycle drops a tool result queued as it ends the stream"
    ),
]

QUESTION = "book table 12"
RESULT = "table 12 booked"
ANSWER = "Your table is booked."
MARK = "This is a tool result, not the user speaking."
# the framework waits 5 s for an automatic reply to a tool result that never gets one
BOUND = 8.0


class Booker(Agent):
    def __init__(self, gate: Gate) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = gate

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        await self.gate.wait()
        return f"table {table} booked"


@pytest.mark.parametrize(
    "slow_end",
    [
        pytest.param(True, id="slow_session_end"),
        pytest.param(False, id="as_fast_as_it_goes"),
    ],
)
async def test_result_queued_while_the_timed_recycle_ends_the_stream(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch, slow_end: bool
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))

    # resolves once the plugin took the tool's output (update_chat_ctx returned with it)
    taken, errors = tool_output_taken(monkeypatch)

    gate = Gate("booking")
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))

    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()

    # the old stream's sessionEnd waits until the result was queued; the tool returns as soon
    # as the recycle sent promptEnd (after it sent the queued results)
    # (slow_end: a sessionEnd that takes a while to go out, as over a network, pins the
    # interleaving; without it the tool returns whenever the loop gets to it)
    session_end = Gate("old stream's sessionEnd")
    if slow_end:
        old.hold_matching = (is_event("sessionEnd"), session_end)

    def _open_tool_gate(conn: Any, sent: SentEvent) -> list[Any]:
        gate.open()
        return []

    bedrock.reply_when(is_event("promptEnd"), _open_tool_gate)
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    if slow_end:
        await bounded(taken, BOUND, what="the plugin to take the tool's output")
        session_end.open()

    new = await bedrock.connection(1)
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == [], f"the plugin failed to take the tool's result: {errors!r}"
    await bounded(run, BOUND, what="session.run() of the booking")

    results = [(role, inter, t) for role, inter, t in sent_texts(new.sent) if RESULT in t]
    assert len(results) == 1, f"the tool's result reached the new stream {len(results)} times: {results}"
    role, interactive, text = results[0]
    assert MARK in text and "tool-1" in text and interactive and role == "USER"
    assert tool_result_contents(new.sent) == [], "a toolResult for a call the new stream never issued"
    assert bedrock.violations == []
    await answered
