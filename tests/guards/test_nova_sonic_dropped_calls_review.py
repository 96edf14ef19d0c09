"""Review of the fix that closes the Nova Sonic toolUses of a dropped reply (in core and in aws).

The framework sends a realtime session whose context is not mutable an error output (one that
asks for no reply) for each call of a reply it dropped; the Nova Sonic plugin answers the open
``toolUse`` with it, as an error ``toolResult``. Nothing else closes a call: a context user code
gives the agent with ``Agent.update_chat_ctx()`` (a reset to an empty context, a rollback to
what the agent started with, the agent's context unchanged, or copied without its function calls
while the session holds no tool result yet) lacks the call whose tool is still running, and that
call must not be closed as "not run" then; it gets its own result, as on stock.

A call whose ``toolUse`` comes after the speech of its part of the response was dropped (the
model said something before it) is either run, or answered as not run once the response ended:
it is never left open. (Stock makes the late call a response of its own and runs it; the fix
drops it with the speech it belongs to, and the framework reads the dropped response to its end
before it answers the calls.)

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's own
session.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from livekit.agents import Agent, function_tool, llm

from tests.fakes import FakeAudioOutput, Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    audio_block,
    completion_end,
    completion_start,
    is_interactive_text,
    is_tool_result,
    model_turn,
    text_block,
    tool_result_contents,
    tool_use,
    usage,
)
from tests.fakes.sync import BoundedWaitTimeout

pytestmark = [
    pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

QUESTION = "book table 12"
RESULT = "table 12 booked"
ANSWER = "Your table is booked."
# the framework waits 5 s for an automatic reply to a tool result that never gets one
BOUND = 8.0


def _history() -> llm.ChatContext:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="hello, I would like a table")
    ctx.add_message(role="assistant", content="Sure, which one?")
    return ctx


class Booker(Agent):
    """Starts with an earlier exchange; its tool waits for a gate."""

    def __init__(self, gate: Gate) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        super().__init__(instructions="be brief", llm=RealtimeModel.with_nova_sonic_2(), chat_ctx=_history())
        self.gate = gate

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        await self.gate.wait()
        return f"table {table} booked"


@pytest.mark.parametrize("update", ["none", "reset", "rollback", "unchanged", "without_calls"])
async def test_a_users_context_update_leaves_a_running_call_open(
    bedrock: FakeBedrock, make_session: MakeSession, update: str
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn(ANSWER, audio=False))
    gate = Gate("booking")
    agent = Booker(gate)
    session = await make_session(agent)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await bounded(gate.reached(), what="the booking to start")
    # user code edits the agent's context while the tool runs: it forgets everything, goes back
    # to the exchange it started with (items the model's session holds too), or drops the calls
    ctx = {
        "reset": llm.ChatContext.empty(),
        "unchanged": agent.chat_ctx.copy(),
        "without_calls": agent.chat_ctx.copy(exclude_function_call=True),
    }.get(update, _history())
    if update == "rollback":
        for item, kept in zip(ctx.items, agent.chat_ctx.items, strict=False):
            item.id = kept.id
    if update != "none":
        await bounded(agent.update_chat_ctx(ctx), what="the user's context update")
    gate.open()
    await conn.wait_sent(is_tool_result("tool-1"), what="the booking's toolResult")
    await bounded(run, BOUND, what="session.run() of the booking")

    ((call_id, content),) = tool_result_contents(conn.sent)
    assert call_id == "tool-1" and RESULT in content, (
        f"the running call was closed by the user's context update: {content}"
    )
    assert bedrock.violations == []


class Counter(Agent):
    def __init__(self) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        super().__init__(instructions="be brief", llm=RealtimeModel.with_nova_sonic_2())
        self.ran: list[int] = []
        self.first_booking: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.ran.append(table)
        if not self.first_booking.done():
            self.first_booking.set_result(None)
        return f"table {table} booked"


async def test_a_tool_use_after_its_speech_was_dropped_is_not_left_open(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()  # the first speech plays until the barge-in
    agent = Counter()
    session = await make_session(agent, audio_output=audio)
    conn = await bedrock.connection(0)
    await conn.wait_ready()
    created: list[Any] = []
    two: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def _on_speech(ev: Any) -> None:
        created.append(ev.speech_handle)
        if len(created) == 2 and not two.done():
            two.set_result(None)

    session.on("speech_created", _on_speech)

    cid = "completion-1"
    events: list[Any] = [completion_start(cid)]
    events += text_block("ASSISTANT", "Booking it.", stage="SPECULATIVE", completion_id=cid)
    events += audio_block(stop_reason="PARTIAL_TURN", completion_id=cid)
    events += tool_use("use-12", "book", {"table": 12}, completion_id=cid)
    # the model says something before its second call
    events += text_block("ASSISTANT", "And the next one.", stage="SPECULATIVE", completion_id=cid)
    conn.push(*events)
    await bounded(two, what="the speeches of the two parts")
    await bounded(agent.first_booking, what="the first call")
    first, second = created[:2]
    assert audio.playing and not second.done(), "the second speech did not wait for the first"

    session.interrupt()
    for speech in (first, second):
        await bounded(speech.wait_for_playout(), what="the interrupted speeches")
    # the call of the second part comes once its speech was dropped
    conn.push(
        *tool_use("use-13", "book", {"table": 13}, completion_id=cid),
        usage(cid),
        completion_end(cid, stop_reason="TOOL_USE"),
    )
    await conn.wait_sent(is_tool_result("use-12"), what="the result of the call that ran")
    try:
        await conn.wait_sent(is_tool_result("use-13"), timeout=2.0, what="a toolResult for use-13")
    except BoundedWaitTimeout:
        pass

    results = tool_result_contents(conn.sent)
    late = [content for call_id, content in results if call_id == "use-13"]
    assert len(late) == 1, f"the late call got {len(late)} toolResults: {results}"
    if 13 in agent.ran:
        assert "table 13 booked" in late[0], late
    else:
        assert "error" in late[0], late
    assert bedrock.violations == []
