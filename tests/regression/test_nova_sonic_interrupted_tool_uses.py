"""Nova Sonic: a barge-in drops tool calls of the model's turn; Bedrock still gets a result for each.

Nova Sonic makes parallel tool calls as several ``toolUse`` blocks of one completion, and the
plugin hands each to the framework as a generation of its own (a speech each). Bedrock keeps the
completion open until every ``toolUse`` of it has a ``toolResult``: it answers none before.

The user barges in (``session.interrupt()`` + typed input) while the first speech plays and the
other two wait for their turn. The framework drops the speeches interrupted before they were
authorized (``AgentActivity._realtime_generation_task_impl``): their calls are never run nor
answered. On stock 1.8.9 their ``toolUse``s stay open for good, so the result of the call that
did run gets no answer. Now the framework sends the session an error output for each dropped
call and the plugin answers its ``toolUse`` with an error ``toolResult``; the call that ran gets
its own result, once.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream; a paused
``FakeAudioOutput`` keeps the first speech playing until the barge-in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm

from tests.fakes import FakeAudioOutput, MakeSession, bounded, wait_for_event
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    audio_block,
    completion_end,
    completion_start,
    is_interactive_text,
    model_turn,
    text_block,
    tool_result_contents,
    tool_use,
    usage,
)

pytestmark = [
    pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

QUESTION = "book tables 12, 13 and 14"
BARGE_IN = "actually, just table 12"
ANSWER = "Only table 12 then."
CALLS = ("use-12", "use-13", "use-14")


class Booker(Agent):
    def __init__(self) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        super().__init__(instructions="be brief", llm=RealtimeModel.with_nova_sonic_2())
        self.booked: list[int] = []
        self.first_booking: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.booked.append(table)
        if not self.first_booking.done():
            self.first_booking.set_result(None)
        return f"table {table} booked"


def _three_calls() -> list[Any]:
    """One completion: the model says something, then calls ``book`` three times."""
    cid = "completion-1"
    events: list[Any] = [completion_start(cid)]
    events += text_block("ASSISTANT", "Booking them.", stage="SPECULATIVE", completion_id=cid)
    events += audio_block(stop_reason="PARTIAL_TURN", completion_id=cid)
    for call_id, table in zip(CALLS, (12, 13, 14), strict=True):
        events += tool_use(call_id, "book", {"table": table}, completion_id=cid)
    return [*events, usage(cid), completion_end(cid, stop_reason="TOOL_USE")]


def _speeches(session: AgentSession[Any], n: int) -> asyncio.Future[Any]:
    created: list[Any] = []
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def _on(ev: Any) -> None:
        created.append(ev.speech_handle)
        if len(created) == n and not done.done():
            done.set_result(created)

    session.on("speech_created", _on)
    return done


@pytest.mark.upstream_bug(
    "not-yet: a barge-in leaves the Nova Sonic toolUses of the dropped speeches without a toolResult"
)
async def test_each_tool_use_of_an_interrupted_turn_gets_one_result(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), _three_calls())
    bedrock.reply_when(is_interactive_text(BARGE_IN), model_turn(ANSWER, audio=False))
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()  # the first speech plays until the barge-in
    agent = Booker()
    session = await make_session(agent, audio_output=audio)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    # the reply to the question (what it says and the first call), then a speech per other call
    speeches = _speeches(session, 3)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await bounded(speeches, what="the speeches of the three calls")
    await bounded(agent.first_booking, what="the first call")
    # the first call ran while what the model said before it plays; the others wait their turn
    assert audio.playing and agent.booked == [12]

    answered = asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: isinstance(ev.item, llm.ChatMessage) and ev.item.text_content == ANSWER,
        )
    )
    session.interrupt()
    session.generate_reply(user_input=BARGE_IN)
    await bounded(answered, what="the answer to the barge-in")
    await bounded(run, what="session.run() of the question")

    assert agent.booked == [12], "a dropped call ran"
    results = dict(tool_result_contents(conn.sent))
    assert sorted(results) == sorted(CALLS), f"toolUses left open: {set(CALLS) - set(results)}"
    assert len(tool_result_contents(conn.sent)) == len(CALLS), "a toolUse got two results"
    assert "table 12 booked" in results["use-12"]
    for call_id in ("use-13", "use-14"):
        assert "error" in json.loads(results[call_id]), results[call_id]
    assert bedrock.violations == []
