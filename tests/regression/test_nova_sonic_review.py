"""Nova Sonic: the session's restarts and recycles, the cases a review of the aws recycle fixes found.

The graceful recycle (``_graceful_session_recycle()``: the timed one and the tool-change one)
keeps the conversation: a call in flight, or its queued result, reaches the new stream as marked
interactive text, the question it answers is not asked again, the old stream is ended. The
review found the cases below, each failing on stock 1.8.9 (and on the recycle patches before
their fixes):

* **A stream error restarts the session** (``_restart_session()`` on a retryable error such as a
  ``ModelStreamErrorException``): it opens the new stream with ``initialize_streams(is_restart=True)``
  directly, outside everything the recycle does. A call in flight keeps its id in
  ``_pending_tools``, so its result goes out as a ``toolResult`` for an id the new stream never
  issued, and the trailing user message is sent again as interactive text: the question is
  asked again while its tool still runs.
* **The session closes while its timed recycle opens the new stream.** The recycle runs in the
  timer's task, and ``initialize_streams()`` replaces ``_session_recycle_task`` with the next
  timer before it sends the history: ``aclose()`` (inactive during the recycle) cancels that new
  timer, not the recycle, which goes on sending on the stream ``aclose()`` just ended and marks
  the closed session active again. Stock's recycle cancels itself there and leaves the new
  stream open.
* **The tools change while the timed recycle sends the new stream's history.** The new
  ``promptStart`` already went out with the old tools, and ``update_tools()`` schedules no
  recycle while the session is not active: the new tool is never declared.
* **The session closes as a tool-change recycle starts.** ``aclose()`` does not stop the
  recycle (``_deferred_tool_recycle_tasks`` is cancelled only on the inactive path, and the
  recycle clears ``_is_sess_active`` only after it ended the old stream): the recycle opens a
  new stream for the closed session and leaves it open.
* **Nova Sonic 1 (audio only) recycles after a spoken turn it has not answered.** The fork
  drops the transcript the server already sent (the recycle stops the response reader without
  draining it); stock sends the trailing user message as interactive text, which Nova Sonic 1
  does not take.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; ``FakeBedrock.fire_recycle_timer()`` makes the recycle timer fire at once,
``BedrockConnection.fail()`` makes the next ``receive()`` raise.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    SentEvent,
    completion_end,
    completion_start,
    event_kind,
    is_interactive_text,
    model_turn,
    next_recycle,
    sent_texts,
    text_block,
    tool_result_contents,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

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
    """Its tool waits for a gate before it returns."""

    def __init__(self, gate: Gate, *, sonic_1: bool = False) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        model = RealtimeModel.with_nova_sonic_1() if sonic_1 else RealtimeModel.with_nova_sonic_2()
        super().__init__(instructions="be brief", llm=model)
        self.gate = gate
        self.bookings: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.bookings.append(table)
        await self.gate.wait()
        return f"table {table} booked"


def _holds_result(e: SentEvent) -> bool:
    body = e["event"].get("textInput") or e["event"].get("toolResult") or {}
    return RESULT in str(body.get("content", ""))


# -- a stream error restarts the session with a tool in flight --


@pytest.mark.upstream_bug(
    "not-yet: a Nova Sonic stream error restarts the session and loses the tool call in flight"
)
async def test_stream_error_with_a_tool_in_flight(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    from aws_sdk_bedrock_runtime.models import ModelStreamErrorException

    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    gate = Gate("booking")
    agent = Booker(gate)
    session = await make_session(agent)
    old = await bedrock.connection(0)
    await old.wait_ready()

    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    # a retryable error on the stream: the session restarts on a new one
    old.fail(ModelStreamErrorException(message="stream error"))
    new = await bedrock.connection(1)
    await new.wait_ready()
    gate.open()
    await new.wait_sent(_holds_result, timeout=BOUND, what="the tool's result")

    assert tool_result_contents(new.sent) == [], "a toolResult for a call the new stream never issued"
    asked = [t for role, interactive, t in sent_texts(new.sent) if interactive and t == QUESTION]
    assert asked == [], "the question was asked again while its tool still ran"
    results = [(interactive, t) for _, interactive, t in sent_texts(new.sent) if RESULT in t]
    assert len(results) == 1 and results[0][0] and MARK in results[0][1]
    await bounded(run, BOUND, what="session.run() of the booking")
    await answered
    assert agent.bookings == [12]
    assert bedrock.violations == []


# -- the session closes while its timed recycle opens the new stream --


def _hold_history(bedrock: FakeBedrock, index: int, gate: Gate) -> None:
    """Hold every history TEXT block (a non-SYSTEM contentStart) connection ``index`` sends."""

    def _is_history(e: SentEvent) -> bool:
        start = e["event"].get("contentStart", {})
        return start.get("type") == "TEXT" and start.get("role") in ("USER", "ASSISTANT")

    def _arm(conn: BedrockConnection, sent: SentEvent) -> list[Any]:
        if conn.index == index:
            conn.hold_matching = (_is_history, gate)
        return []

    bedrock.reply_when(lambda e: event_kind(e) == "promptStart", _arm, once=False)


async def _first_turn(bedrock: FakeBedrock, session: AgentSession[Any]) -> BedrockConnection:
    old = await bedrock.connection(0)
    await old.wait_ready()
    # (stock recycles only once the assistant has spoken on the stream)
    await bounded(session.run(user_input="hi"))
    return old


@pytest.mark.upstream_bug("not-yet: a Nova Sonic session closed during its timed recycle keeps a stream open")
async def test_close_during_the_timed_recycle(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    gate = Gate("new stream's history")
    _hold_history(bedrock, 1, gate)
    session = await make_session(Booker(Gate("unused")))
    await _first_turn(bedrock, session)

    recycled = next_recycle(monkeypatch)
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_sent(lambda e: event_kind(e) == "promptStart", what="the new prompt")
    try:
        await bounded(session.aclose(), what="AgentSession.aclose during the recycle")
    finally:
        gate.open()
    outcome = await bounded(recycled, BOUND, what="the recycle to end")

    assert new.closed, f"the new stream stayed open after the session closed (recycle: {outcome})"
    assert bedrock.violations == [], "the recycle went on sending after the session closed"
    assert not bedrock.sessions[0]._is_sess_active.is_set(), "the closed session is active again"


# -- the tools change while the timed recycle sends the new stream's history --


@pytest.mark.upstream_bug("not-yet: tools given to Nova Sonic during its timed recycle are never declared")
async def test_tools_changed_during_the_timed_recycle(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    gate = Gate("new stream's history")
    _hold_history(bedrock, 1, gate)
    agent = Booker(Gate("unused"))
    session = await make_session(agent)
    await _first_turn(bedrock, session)

    recycled = next_recycle(monkeypatch)
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_sent(lambda e: event_kind(e) == "promptStart", what="the new prompt")
    try:
        await agent.update_tools([*agent.tools, cancel_booking])
    finally:
        gate.open()
    await bounded(recycled, BOUND, what="the recycle to end")
    rt = bedrock.sessions[0]
    pending = [t for t in rt._deferred_tool_recycle_tasks if not t.done()]
    if pending:
        await bounded(asyncio.gather(*pending), BOUND, what="the tool-change recycle")

    last = bedrock.connections[-1]
    prompt = next(e for e in last.sent if event_kind(e) == "promptStart")
    assert "cancel_booking" in json.dumps(prompt), (
        f"the tool given during the recycle was never declared ({len(bedrock.connections)} streams)"
    )


# -- the session closes as a tool-change recycle starts --


class ToolChanger(Agent):
    """Its tool adds a tool (a recycle) and returns."""

    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        await self.update_tools([*self.tools, cancel_booking])
        return f"table {table} booked"


def _recycle_started(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Future[None], asyncio.Future[None]]:
    """(started, ended) of the next ``_graceful_session_recycle()``."""
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    loop = asyncio.get_running_loop()
    started: asyncio.Future[None] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()
    recycle = RealtimeSession._graceful_session_recycle

    async def _watched(self: Any) -> None:
        if not started.done():
            started.set_result(None)
        try:
            await recycle(self)
        finally:
            if not ended.done():
                ended.set_result(None)

    monkeypatch.setattr(RealtimeSession, "_graceful_session_recycle", _watched)
    return started, ended


@pytest.mark.upstream_bug(
    "not-yet: a Nova Sonic session closed as a tool-change recycle starts opens a new stream"
)
async def test_close_as_a_tool_change_recycle_starts(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    started, ended = _recycle_started(monkeypatch)
    session, conn = await nova_session(bedrock, make_session, ToolChanger())

    session.generate_reply(user_input=QUESTION)
    await bounded(started, what="the tool-change recycle to start")
    # the framework closes the model's session (the agent leaves, the room closes)
    await bounded(bedrock.sessions[0].aclose(), BOUND, what="RealtimeSession.aclose")
    await bounded(ended, BOUND, what="the recycle to end")

    assert [c.index for c in bedrock.connections if not c.closed] == [], (
        "a stream is open after the session closed"
    )
    assert bedrock.violations == []
    assert not bedrock.sessions[0]._is_sess_active.is_set(), "the closed session is active again"


# -- Nova Sonic 1 (audio only): a recycle after a spoken turn the model has not answered --

SPOKEN = "what time do you close"


@pytest.mark.upstream_bug("not-yet: Nova Sonic 1 is sent interactive text when its session recycles")
async def test_sonic_1_recycle_after_an_unanswered_spoken_turn(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    agent = Booker(Gate("unused"), sonic_1=True)
    await make_session(agent)
    old = await bedrock.connection(0)
    await old.wait_ready()

    # the user speaks; the model has not answered yet when the tools change
    old.push(completion_start("c2"), text_block("USER", SPOKEN, completion_id="c2"), completion_end("c2"))
    await agent.update_tools([*agent.tools, cancel_booking])
    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_ready()

    typed = [t for role, interactive, t in sent_texts(new.sent) if interactive]
    assert typed == [], f"Nova Sonic 1 was sent interactive text: {typed}"
    history = [t for role, interactive, t in sent_texts(new.sent) if role == "USER" and not interactive]
    assert any(SPOKEN in t for t in history), f"the spoken turn is not in the new stream's history: {history}"
    assert bedrock.violations == []
