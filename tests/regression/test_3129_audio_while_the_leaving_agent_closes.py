"""livekit/agents#3129: the caller's audio while the leaving agent's activity closes.

A handoff drains the leaving activity (its ``on_exit``, what it was saying), which then hands
its STT stream, or its realtime session, on to the arriving agent
(``AgentActivity._detach_reusable_resources()``), and closes (``aclose()``: its own toolsets,
an MCP server disconnecting, which can take a while). Until that close ends, the leaving
activity stays the session's, and ``AgentSession._forward_audio_task()`` hands it the caller's
audio. On stock it has no STT left to hear it (the stream was handed on), and its realtime
session was handed on or closed: whatever the caller says in that window is lost, the
arriving agent never hears it.

The caller's audio goes through the session's own audio input (``tests.fakes.speech``): the
frames the STT stream the session reuses across the handoff, or the realtime sessions, heard
are counted.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import (
    Caller,
    FakeAudioInput,
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    tool_call,
)
from tests.fakes.desks import (
    MARK,
    TO_BILLING,
    Desk,
    DeskJournal,
    SlowClose,
    answer,
    billing_runs,
    stt_heard_a_mark,
)

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

WHILE_CLOSING = 25  # frames of 20 ms: half a second of the caller talking


@BUG
async def test_the_callers_audio_while_the_leaving_agent_closes_reaches_the_stt(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    closing = Gate("the desk's toolset closing")
    caller = Caller()
    session = await make_session(
        Desk(journal, tools=[SlowClose(closing)]),
        llm=ScriptedLLM([], fallback=answer),
        **caller.session_kwargs(),
    )
    caller.attach(session)

    await caller.say(TO_BILLING)
    async with closing.held():
        # the desk drained (on_exit ran, its STT stream was handed on) and closes: the caller
        # talks on
        assert journal.events == ["enter desk", "exit desk"]
        caller.audio.push(WHILE_CLOSING)
        await caller.audio.forwarded()
    await billing_runs(session, journal)
    stream = await stt_heard_a_mark(caller)  # the one STT stream, reused across the handoff

    # the bug: the frames said while the desk closes never reach the STT; what came after does
    assert caller.stt.streams == [stream]
    assert stream.frames == caller.audio.frames_pushed, (
        f"the STT heard {stream.frames} of the {caller.audio.frames_pushed} frames the caller said"
    )
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_the_callers_audio_while_the_leaving_agent_closes_reaches_the_realtime_model(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = DeskJournal()
    closing = Gate("the desk's toolset closing")

    def reply(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers"

    model = ScriptedRealtimeModel(fallback=reply, reuse=reuse)
    audio = FakeAudioInput()
    session = await make_session(
        Desk(journal, tools=[SlowClose(closing)]),
        llm=model,
        audio_input=audio,
    )

    audio.push(3)
    await audio.forwarded()
    model.push(Reply(tool_calls=[tool_call("to_billing")]))
    handoff = asyncio.ensure_future(session.run(user_input=TO_BILLING))
    try:
        await closing.reached()
        assert journal.events == ["enter desk", "exit desk"]
        audio.push(WHILE_CLOSING)
        await audio.forwarded()
    finally:
        closing.open()
    await bounded(handoff, what="session.run() handing off")
    await billing_runs(session, journal)

    audio.push(seconds=MARK)
    await audio.forwarded()  # push_audio() hands each frame to the realtime session at once

    heard = [e for e in model.calls("push_audio")]
    assert [e.args["duration"] for e in heard][-1:] == [MARK]
    assert heard[-1].session is model.live_sessions[-1]
    # the bug: the frames said while the desk closes reach no session, or one already closed
    live = [e for e in heard if not e.after_close]
    assert len(live) == audio.frames_pushed, (
        f"the model heard {len(live)} of the {audio.frames_pushed} frames the caller said "
        f"({len(heard) - len(live)} more on a session it had closed)"
    )
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
