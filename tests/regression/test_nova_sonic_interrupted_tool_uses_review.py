"""Nova Sonic: the toolUses of speeches a barge-in drops get a result, whatever their tool and model.

Review of the fix for a barge-in that drops the speeches of a completion's later tool calls
(see test_nova_sonic_interrupted_tool_uses.py). Here the model starts the completion on its own
(no typed question: Nova Sonic 1 takes no text input), the barge-in is ``session.interrupt()``
alone, and the dropped calls' tools are of every kind: a plain tool, one that hands off to
another agent, one that awaits an inline ``AgentTask``. None of them may run (no handoff, no
task), each dropped ``toolUse`` gets exactly one (error) ``toolResult``, the call that ran gets its
own. On stock 1.8.9 the dropped toolUses are left open.

A call whose ``toolUse`` comes after its speech was dropped: see
tests/guards/test_nova_sonic_dropped_calls_review.py.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream; a paused
``FakeAudioOutput`` keeps the first speech playing until the barge-in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, AgentTask, function_tool

from tests.fakes import FakeAudioOutput, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    audio_block,
    completion_end,
    completion_start,
    is_tool_result,
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

CID = "completion-1"


class Confirm(AgentTask[str]):
    def __init__(self, model: Any) -> None:
        super().__init__(instructions="confirm", llm=model)

    async def on_enter(self) -> None:
        self.complete("confirmed")


class Other(Agent):
    def __init__(self, model: Any) -> None:
        super().__init__(instructions="you are the other agent", llm=model)


class Booker(Agent):
    def __init__(self, model: Any) -> None:
        super().__init__(instructions="be brief", llm=model)
        self.model = model
        self.ran: list[str] = []
        self.first_booking: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.ran.append(f"book {table}")
        if not self.first_booking.done():
            self.first_booking.set_result(None)
        return f"table {table} booked"

    @function_tool
    async def transfer(self) -> Agent:
        """Hand the caller to the other agent."""
        self.ran.append("transfer")
        return Other(self.model)

    @function_tool
    async def confirm(self) -> str:
        """Ask the caller to confirm."""
        self.ran.append("confirm")
        return await Confirm(self.model)


def _model(version: int) -> Any:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_1() if version == 1 else RealtimeModel.with_nova_sonic_2()


def _speeches(session: AgentSession[Any], n: int) -> asyncio.Future[list[Any]]:
    created: list[Any] = []
    done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

    def _on(ev: Any) -> None:
        created.append(ev.speech_handle)
        if len(created) == n and not done.done():
            done.set_result(list(created))

    session.on("speech_created", _on)
    return done


async def _result_sent(conn: BedrockConnection, call_id: str) -> None:
    """Bounded wait for a toolResult for ``call_id``; the test's assertions say if none came."""
    try:
        await conn.wait_sent(is_tool_result(call_id), timeout=2.0, what=f"a toolResult for {call_id}")
    except BoundedWaitTimeout:
        pass


async def _start(
    bedrock: FakeBedrock, make_session: MakeSession, version: int
) -> tuple[Booker, AgentSession[Any], FakeAudioOutput, BedrockConnection]:
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()  # the first speech plays until the barge-in
    agent = Booker(_model(version))
    session = await make_session(agent, audio_output=audio)
    conn = await bedrock.connection(0)
    await conn.wait_ready()
    return agent, session, audio, conn


@pytest.mark.upstream_bug(
    "not-yet: a barge-in leaves the Nova Sonic toolUses of the dropped speeches without a toolResult"
)
@pytest.mark.parametrize("dropped", ["book", "transfer", "confirm"])
@pytest.mark.parametrize("version", [1, 2])
async def test_each_dropped_tool_use_gets_one_result(
    bedrock: FakeBedrock, make_session: MakeSession, version: int, dropped: str
) -> None:
    agent, session, audio, conn = await _start(bedrock, make_session, version)
    calls = {
        "use-12": ("book", {"table": 12}),
        "use-x": (dropped, {"table": 13} if dropped == "book" else {}),
    }

    speeches = _speeches(session, 2)
    events: list[Any] = [completion_start(CID)]
    events += text_block("ASSISTANT", "Booking it.", stage="SPECULATIVE", completion_id=CID)
    events += audio_block(stop_reason="PARTIAL_TURN", completion_id=CID)
    for call_id, (name, args) in calls.items():
        events += tool_use(call_id, name, args, completion_id=CID)
    conn.push(*events, usage(CID), completion_end(CID, stop_reason="TOOL_USE"))
    first, second = await bounded(speeches, what="the speeches of the two calls")
    await bounded(agent.first_booking, what="the first call")
    assert audio.playing and not second.done(), "the second speech did not wait for the first"

    session.interrupt()
    for speech in (first, second):
        await bounded(speech.wait_for_playout(), what="the interrupted speeches")
    await conn.wait_sent(is_tool_result("use-12"), what="the result of the call that ran")
    await _result_sent(conn, "use-x")

    assert second.interrupted and agent.ran == ["book 12"], f"a dropped call ran: {agent.ran}"
    assert session.current_agent is agent, "the dropped handoff took place"
    results = tool_result_contents(conn.sent)
    assert {c for c, _ in results} == {"use-12", "use-x"}, f"a toolUse is left open: {results}"
    assert len(results) == 2, f"a toolUse got two results: {results}"
    contents = dict(results)
    assert "table 12 booked" in contents["use-12"]
    assert "error" in json.loads(contents["use-x"]), contents["use-x"]
    assert bedrock.violations == []


class SlowBooker(Booker):
    """Its first booking waits for a gate: the call is open across the recycle."""

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.gate = asyncio.Event()
        self.reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.ran.append(f"book {table}")
        if not self.reached.done():
            self.reached.set_result(None)
            await self.gate.wait()
        return f"table {table} booked"


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(
            "recycle_then_barge_in",
            marks=pytest.mark.upstream_bug(
                "not-yet: Nova Sonic's timed session recycle cancels itself; the session dies",
                raises=BoundedWaitTimeout,
                match="Bedrock connection 1 to open",
            ),
        ),
        pytest.param(
            "barge_in_then_recycle",
            marks=pytest.mark.upstream_bug(
                "not-yet: a barge-in leaves the Nova Sonic toolUses of the dropped speeches without a "
                "toolResult"
            ),
        ),
    ],
)
async def test_dropped_and_running_calls_across_a_timed_recycle(
    bedrock: FakeBedrock, make_session: MakeSession, order: str
) -> None:
    audio = FakeAudioOutput(mode="realtime")
    audio.pause()
    agent = SlowBooker(_model(2))
    session = await make_session(agent, audio_output=audio)
    old = await bedrock.connection(0)
    await old.wait_ready()

    speeches = _speeches(session, 3)
    events: list[Any] = [completion_start(CID)]
    events += text_block("ASSISTANT", "Booking them.", stage="SPECULATIVE", completion_id=CID)
    events += audio_block(stop_reason="PARTIAL_TURN", completion_id=CID)
    for call_id, table in (("use-12", 12), ("use-13", 13), ("use-14", 14)):
        events += tool_use(call_id, "book", {"table": table}, completion_id=CID)
    old.push(*events, usage(CID), completion_end(CID, stop_reason="TOOL_USE"))
    created = await bounded(speeches, what="the speeches of the three calls")
    await bounded(agent.reached, what="the first call")

    async def recycle() -> BedrockConnection:
        bedrock.fire_recycle_timer(bedrock.sessions[0])
        new = await bedrock.connection(1)
        await new.wait_ready()
        return new

    async def barge_in() -> None:
        session.interrupt()
        # (the first speech is done once its tool is)
        for speech in created[1:]:
            await bounded(speech.wait_for_playout(), what="the dropped speeches")

    if order == "recycle_then_barge_in":
        new = await recycle()
        await barge_in()
    else:
        await barge_in()
        await _result_sent(old, "use-13")
        await _result_sent(old, "use-14")
        # the old stream was still open at the barge-in: the dropped toolUses got their result
        assert sorted(dict(tool_result_contents(old.sent))) == ["use-13", "use-14"], old.sent
        new = await recycle()
    agent.gate.set()
    # the running call's result reaches the new stream as text (a toolResult answers only a
    # toolUse of its own stream)
    await new.wait_sent(
        lambda e: "table 12 booked" in e["event"].get("textInput", {}).get("content", ""),
        what="the running call's result on the new stream",
    )

    assert agent.ran == ["book 12"], f"a dropped call ran: {agent.ran}"
    assert bedrock.violations == []
    assert tool_result_contents(new.sent) == []
    texts = [e["event"]["textInput"]["content"] for e in new.sent if "textInput" in e["event"]]
    assert not [t for t in texts if "use-13" in t or "use-14" in t], "a dropped call reached the new stream"
    old_results = dict(tool_result_contents(old.sent))
    assert "use-12" not in old_results or "table 12 booked" in old_results["use-12"]
