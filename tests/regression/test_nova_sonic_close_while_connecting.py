"""Nova Sonic: a session closed while it is still connecting closes its stream.

``RealtimeSession`` connects in a background task (``initialize_streams()``): it opens the
Bedrock stream, then waits up to 500 ms for the tools, instructions and chat context before it
sends anything. Stock 1.8.9's ``aclose()`` returns at once when the session is not active yet,
so the setup goes on after the close: the stream stays open, the session start goes out on it
and its reader and audio tasks run on with no owner. An ``AgentTask`` that completes in its
``on_enter`` is closed that fast, so every such task with a Nova Sonic model of its own leaves a
stream open, even after ``AgentSession.aclose()``. Now ``aclose()`` stops the setup and closes
the stream, after the ``promptEnd`` and ``sessionEnd`` of a session it already started (as it
does for a session whose stream the service ended). A session already active whose stream has
not had the service's initial response yet (``output_stream`` is still ``None``) made stock's
``aclose()`` raise ``AttributeError``; it now closes that stream the same way.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentTask, function_tool, llm

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    event_kind,
    is_interactive_text,
    model_turn,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: a Nova Sonic session closed while connecting keeps its stream open"),
]


def _nova() -> Any:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_2()


class LookupTask(AgentTask[str]):
    """Has a Nova Sonic model of its own, and already knows its answer."""

    def __init__(self) -> None:
        super().__init__(instructions="You look up records.", llm=_nova())

    async def on_enter(self) -> None:
        self.complete("record 7")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=_nova())

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        return f"found {await LookupTask()}"


async def test_session_closed_while_connecting(bedrock: FakeBedrock) -> None:
    session = _nova().session()
    conn = await bedrock.connection(0)  # opened; the session waits for its setup
    await bounded(session.aclose())

    assert conn.closed, "the stream of a session closed while connecting stays open"
    assert conn.sent == [] and bedrock.violations == []


async def test_task_done_in_on_enter_leaves_no_stream_open(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text("look it up"), model_turn(tool=("tool-1", "look_up", {})))
    bedrock.reply_when(is_interactive_text(), model_turn("Your record is number 7."))
    session, _ = await nova_session(bedrock, make_session, Desk())

    await bounded(session.run(user_input="look it up"))
    # the desk, the task (done in its on_enter), the desk resumed
    await (await bedrock.connection(2)).wait_ready()
    await bounded(session.wait_for_idle())
    await bounded(session.aclose())

    still_open = [c.index for c in bedrock.connections if not c.closed]
    assert still_open == [], f"streams left open after AgentSession.aclose(): {still_open}"
    for conn in bedrock.connections:
        kinds = [event_kind(e) for e in conn.sent]
        if "sessionStart" in kinds:  # what a stream started, it ended
            assert kinds[-2:] == ["promptEnd", "sessionEnd"], f"connection {conn.index}: {kinds}"
    assert bedrock.violations == []


async def test_session_whose_stream_ended_is_closed(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    session, conn = await nova_session(bedrock, make_session, Desk())
    rt = bedrock.sessions[0]
    # the service ends the stream; the session is no longer active
    conn.close_from_server()
    await bounded(rt._response_task, what="the session's response task to end")
    await bounded(session.aclose())

    assert conn.closed, "the stream of a session the service ended stays open after its close"
    kinds = [event_kind(e) for e in conn.sent]
    assert kinds[-3:] == ["contentEnd", "promptEnd", "sessionEnd"], kinds[-3:]
    assert bedrock.violations == []


async def test_session_closed_before_the_initial_response(bedrock: FakeBedrock) -> None:
    bedrock.hold(0)  # the service's initial response has not arrived
    session = _nova().session()
    await session.update_instructions("be brief")
    await session.update_tools([])
    await session.update_chat_ctx(llm.ChatContext.empty())
    conn = await bedrock.connection(0)
    await conn.wait_sent(lambda e: event_kind(e) == "promptStart", what="the prompt start")
    await bounded(session._is_sess_active.wait(), what="the session to be active")
    try:
        await bounded(session.aclose())
    except AttributeError as e:
        pytest.fail(f"aclose() of a session waiting for the service's initial response raised {e!r}")

    assert conn.closed, "the stream stays open after the close"
    kinds = [event_kind(e) for e in conn.sent]
    assert kinds[-2:] == ["promptEnd", "sessionEnd"], kinds
    # no audio input content was started: no contentEnd for it
    started = {
        e["event"]["contentStart"]["contentName"] for e in conn.sent if event_kind(e) == "contentStart"
    }
    ended = {e["event"]["contentEnd"]["contentName"] for e in conn.sent if event_kind(e) == "contentEnd"}
    assert ended <= started, "a contentEnd for a content the stream never started"
    assert bedrock.violations == []
