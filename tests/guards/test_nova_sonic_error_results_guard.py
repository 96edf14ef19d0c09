"""Guard: an error output user code gives a running Nova Sonic call answers its toolUse, once.

The framework closes the calls of a reply it dropped with an error output that asks for no
reply, which the Nova Sonic plugin sends as an error ``toolResult`` only. An error output that
asks for no reply may as well come from user code: one it adds to the agent's context with
``Agent.update_chat_ctx()`` for a call whose tool still runs (it gave up on the tool) answers
the call's ``toolUse`` with what it says, and the tool's own result, later, gets no second
``toolResult``: on stock 1.8.9 and on the fork alike.

The session also closes cleanly while a reply it dropped is still streaming (the model said
something, its call has not come yet, and the framework reads the rest of the reply in the
background to close the calls it holds): ``session.aclose()`` returns, and no call gets two
results.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's own
session.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from livekit.agents import Agent, function_tool, llm

from tests.fakes import FakeAudioOutput, Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    audio_block,
    completion_start,
    is_interactive_text,
    is_tool_result,
    model_turn,
    text_block,
    tool_result_contents,
    tool_use,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

QUESTION = "book table 12"
GAVE_UP = "the booking system did not answer in time"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = Gate("booking")
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        await self.gate.wait()
        if not self.done.done():
            self.done.set_result(None)
        return f"table {table} booked"


async def test_a_users_error_output_answers_a_running_call_once(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("call-7", "book", {"table": 12})))
    bedrock.reply_when(is_tool_result("call-7"), model_turn("Sorry, please try again later.", audio=False))
    agent = Booker()
    session, conn = await nova_session(bedrock, make_session, agent)

    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await bounded(agent.gate.reached(), what="the booking to start")
    ctx = agent.chat_ctx.copy()
    ctx.items.append(
        llm.FunctionCallOutput(
            call_id="call-7", name="book", output=GAVE_UP, is_error=True, reply_required=False
        )
    )
    await bounded(agent.update_chat_ctx(ctx), what="the user's context update")
    await conn.wait_sent(is_tool_result("call-7"), what="the toolResult of the user's output")
    agent.gate.open()
    await bounded(agent.done, what="the tool to end")
    await bounded(run, 8.0, what="session.run() of the booking")

    ((call_id, content),) = tool_result_contents(conn.sent)
    assert call_id == "call-7" and GAVE_UP in json.loads(content)["error"], content
    assert bedrock.violations == []


async def test_closing_while_a_dropped_reply_still_streams(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()  # the first speech plays until the barge-in
    agent = Booker()
    agent.gate.open()
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
    # the model says something before its next call, which does not come before the close
    events += text_block("ASSISTANT", "And the next one.", stage="SPECULATIVE", completion_id=cid)
    conn.push(*events)
    await bounded(two, what="the speeches of the two parts")
    await bounded(agent.done, what="the first call")

    session.interrupt()
    await bounded(session.aclose(), what="session.aclose() while the dropped reply streams")

    results = [call_id for call_id, _ in tool_result_contents(conn.sent)]
    assert len(results) == len(set(results)), f"a toolUse got two results: {results}"
    assert bedrock.violations == []
