"""Nova Sonic: an error result that asks for no reply is a result like any other, unless the
framework dropped its call.

The framework answers each call of a realtime reply it dropped before it played (a barge-in)
with an error output that asks for no reply, and the plugin sends it as an error ``toolResult``
only: the model is told nothing more, and a later stream never hears of it (see
test_nova_sonic_interrupted_tool_uses.py). Other error outputs ask for no reply too, and they
carry what a tool or the user said: a tool that failed on a turn the user interrupted (a handoff
the interruption cancelled answers "the agent handoff was interrupted and did not happen"), a
failed tool whose reply a ``function_tools_executed`` listener cancelled, an error result user
code adds to the agent's context. Each must reach the model as any result does: the session's
``chat_ctx`` (and so the history a new stream starts with) holds it once sent, and a call of an
earlier stream, or one the model never made, gets it as text. Stock 1.8.9 keeps no tool result
in that history and sends no result to a stream that did not issue its call.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's own
session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, ToolError, function_tool, llm

from tests.fakes import FakeAudioOutput, Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    audio_block,
    completion_end,
    completion_start,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
    text_block,
    tool_result_contents,
    tool_use,
    usage,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_sonic_2
from tests.fakes.sync import BoundedWaitTimeout

pytestmark = [*NOVA_SONIC_MARKS]

QUESTION = "book table 12"
DECLINED = "the card was declined"
HANDOFF_FAILED = "the agent handoff was interrupted and did not happen"
MARK = "This is a tool result, not the user speaking."


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="you are the other agent", llm=nova_sonic_2())


class Booker(Agent):
    def __init__(self, *, adds_tool: bool = False) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.adds_tool = adds_tool
        self.gate = Gate("booking")
        self.transferred: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        if self.adds_tool:
            # a tool change recycles the stream while the call is open
            await self.update_tools([*self.tools, cancel_booking])
            await self.gate.wait()
        raise ToolError(DECLINED)

    @function_tool
    async def transfer(self) -> Agent:
        """Hand the caller to the other agent."""
        if not self.transferred.done():
            self.transferred.set_result(None)
        return Other()


def _cancel_replies(session: AgentSession[Any]) -> None:
    """User code that answers failures itself: no reply to any tool result."""
    session.on("function_tools_executed", lambda ev: ev.cancel_tool_reply())


async def _recycle(bedrock: FakeBedrock, agent: Agent, index: int) -> BedrockConnection:
    """Change the tools (the session recycles its stream); the new stream, once set up."""
    await bounded(agent.update_tools([*agent.tools, cancel_booking]), what="the tool change")
    new = await bedrock.connection(index)
    await new.wait_ready()
    return new


async def _text_sent(conn: BedrockConnection, content: str) -> None:
    """Bounded wait for a text holding ``content``; the test's assertions say if none came."""
    try:
        await conn.wait_sent(
            lambda e: content in e["event"].get("textInput", {}).get("content", ""),
            timeout=2.0,
            what=f"a text holding {content!r}",
        )
    except BoundedWaitTimeout:
        pass


def _history(conn: BedrockConnection) -> list[str]:
    return [text for _, interactive, text in sent_texts(conn.sent) if not interactive]


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session's chat_ctx never holds the tool results it sent")
async def test_a_failed_tool_without_reply_stays_in_the_history(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("call-7", "book", {"table": 12})))
    agent = Booker()
    session = await make_session(agent)
    _cancel_replies(session)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    await bounded(session.run(user_input=QUESTION), what="the run of the question")
    await conn.wait_sent(is_tool_result("call-7"), what="the failed booking's toolResult")
    ((_, content),) = tool_result_contents(conn.sent)
    assert DECLINED in content

    rt = bedrock.sessions[0]
    outputs = [item.call_id for item in rt.chat_ctx.items if item.type == "function_call_output"]
    assert outputs == ["call-7"], f"the session's chat_ctx misses the error result it sent: {outputs}"
    new = await _recycle(bedrock, agent, 1)
    assert [t for t in _history(new) if DECLINED in t], (
        f"the new stream's history misses what the tool said: {_history(new)}"
    )
    assert bedrock.violations == []


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session's chat_ctx never holds the tool results it sent")
async def test_an_interrupted_handoff_stays_in_the_history(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()  # the speech that hands off plays until the barge-in
    agent = Booker()
    session = await make_session(agent, audio_output=audio)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    cid = "completion-1"
    events: list[Any] = [completion_start(cid)]
    events += text_block("ASSISTANT", "Transferring you.", stage="SPECULATIVE", completion_id=cid)
    events += audio_block(stop_reason="PARTIAL_TURN", completion_id=cid)
    events += tool_use("use-t", "transfer", {}, completion_id=cid)
    conn.push(*events, usage(cid), completion_end(cid, stop_reason="TOOL_USE"))
    await bounded(agent.transferred, what="the transfer tool")
    session.interrupt()
    await conn.wait_sent(is_tool_result("use-t"), what="the interrupted handoff's toolResult")

    assert session.current_agent is agent, "the interrupted handoff took place"
    ((_, content),) = tool_result_contents(conn.sent)
    assert HANDOFF_FAILED in content
    rt = bedrock.sessions[0]
    outputs = [item.call_id for item in rt.chat_ctx.items if item.type == "function_call_output"]
    assert outputs == ["use-t"], f"the session's chat_ctx misses the handoff's result: {outputs}"
    new = await _recycle(bedrock, agent, 1)
    assert [t for t in _history(new) if HANDOFF_FAILED in t], (
        f"the new stream's history does not say the handoff did not happen: {_history(new)}"
    )
    assert bedrock.violations == []


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session recycle drops the result of a tool in flight")
async def test_a_failed_tool_in_flight_across_a_recycle_reaches_the_new_stream(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("call-7", "book", {"table": 12})))
    agent = Booker(adds_tool=True)
    session = await make_session(agent)
    _cancel_replies(session)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    new = await bedrock.connection(1)
    await new.wait_ready()
    agent.gate.open()
    await bounded(run, what="the run of the question")
    await _text_sent(new, DECLINED)

    texts = [(interactive, t) for _, interactive, t in sent_texts(new.sent) if DECLINED in t]
    assert len(texts) == 1, f"the failed booking's result reached the new stream {len(texts)} times"
    assert MARK in texts[0][1], texts
    # no reply was asked for
    assert not texts[0][0], "the result asked the model for a reply"
    assert tool_result_contents(new.sent) == []
    assert bedrock.violations == []


@pytest.mark.upstream_bug(
    "not-yet: Nova Sonic never sends a tool result user code adds to the agent's context"
)
@pytest.mark.parametrize("is_error", [False, True])
async def test_a_result_user_code_adds_reaches_the_model(
    bedrock: FakeBedrock, make_session: MakeSession, is_error: bool
) -> None:
    agent = Booker()
    session = await make_session(agent)
    conn = await bedrock.connection(0)
    await conn.wait_ready()
    assert session.current_agent is agent

    # user code records a booking the front desk tried (a call of an agent tool), whose
    # outcome the model should know
    ctx = agent.chat_ctx.copy()
    ctx.items.append(llm.FunctionCall(call_id="desk-1", name="book", arguments='{"table": 12}'))
    ctx.items.append(
        llm.FunctionCallOutput(
            call_id="desk-1", name="book", output=DECLINED, is_error=is_error, reply_required=False
        )
    )
    await bounded(agent.update_chat_ctx(ctx), what="the user's context update")
    await _text_sent(conn, DECLINED)

    texts = [t for _, _, t in sent_texts(conn.sent) if DECLINED in t]
    assert len(texts) == 1, f"the result user code added reached the model {len(texts)} times"
    assert tool_result_contents(conn.sent) == []
    assert bedrock.violations == []
