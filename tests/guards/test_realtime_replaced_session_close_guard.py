"""Guards: closing a realtime session the handoff replaces takes no longer than on upstream.

A realtime session the arriving agent cannot reuse is closed as the leaving agent's activity
closes. Nothing it could still report makes that close wait when nothing of the caller's is
left to come: the server's own reply to the handoff tool's result (Gemini Live announces every
reply it starts on its own with a speech start, and transcribes no caller in it), or the
session closing meanwhile.

Each measures the loop time the handoff (or the close) takes from the moment nothing holds it
any more; upstream takes a few milliseconds. ``SLOW`` is far below any wait for a transcript
that is not coming and far above a loaded machine's scheduling noise.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, function_tool, llm, utils
from livekit.plugins.google.realtime import RealtimeModel

from tests.fakes import Gate, MakeSession, Reply, RTGeneration, ScriptedRealtimeModel, bounded, tool_call
from tests.fakes.desks import BILLING, DESK, TO_BILLING, Desk, DeskJournal
from tests.fakes.genai_live import (
    FakeLiveServer,
    client_content,
    function_responses,
    model_text_message,
    offline_live_server,
    tool_call_message,
)
from tests.fakes.session import settled_on

SLOW = 1.0
"""Seconds of loop time past which a step counts as held up."""

CLOSE_TICKS = 50
"""Loop ticks the desk's activity is given to get on with its close once its on_exit returned."""


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> FakeLiveServer:
    return offline_live_server(monkeypatch)


# -- Gemini Live: the server's reply to the handoff tool's result --------------------------------


class GeminiBilling(Agent):
    def __init__(self, entered: asyncio.Event) -> None:
        super().__init__(instructions=BILLING)
        self.entered = entered

    async def on_enter(self) -> None:
        self.entered.set()


class GeminiDesk(Agent):
    def __init__(self, exit_gate: Gate, billing_entered: asyncio.Event) -> None:
        super().__init__(instructions=DESK)
        self.exit_gate = exit_gate
        self.billing_entered = billing_entered

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return GeminiBilling(self.billing_entered)

    async def on_exit(self) -> None:
        await self.exit_gate.wait()


def is_reply_request(message: dict[str, Any]) -> bool:
    return bool((client_content(message) or {}).get("turnComplete"))


async def test_gemini_handoff_is_not_held_by_the_servers_reply_to_the_tool_result(
    live: FakeLiveServer, make_session: MakeSession
) -> None:
    """Gemini Live answers the handoff tool's result on its own, a moment after the tool
    returned: the plugin announces that reply with a speech start and ends it with a speech
    stop, and no caller's transcript (the caller said nothing). The billing agent, on a new
    session (the desk's tools cannot change on Gemini), takes over at once once the desk's
    on_exit returned."""
    exit_gate, billing_entered = Gate("desk on_exit"), asyncio.Event()
    model = RealtimeModel(modalities=[types.Modality.TEXT])
    session = await make_session(GeminiDesk(exit_gate, billing_entered), llm=model)
    conn = await live.connection(0)
    loop = asyncio.get_running_loop()
    try:
        run = session.run(user_input=TO_BILLING)
        await conn.wait_sent(is_reply_request, what="the caller's turn")
        conn.push(tool_call_message(("fc-1", "to_billing", {})))
        await bounded(exit_gate.reached(), what="the desk's on_exit")
        await conn.wait_sent(lambda m: bool(function_responses(m)), what="the handoff tool's result")
        # the server answers the result on its own, while the desk leaves
        listening = asyncio.ensure_future(
            bounded(_user_state(session, "listening"), what="the end of the server's reply")
        )
        conn.push(model_text_message("Transferring you now."))
        await listening
    finally:
        exit_gate.open()
    released = loop.time()
    await bounded(billing_entered.wait(), what="billing's on_enter")
    took = loop.time() - released
    await bounded(run, what="session.run")

    assert took < SLOW, f"the handoff took {took:.2f}s of loop time once the desk's on_exit returned"


async def _user_state(session: Any, state: str) -> None:
    # speaking, then back to listening: the plugin's speech start and stop around the reply
    seen_speaking = asyncio.Event()
    done = asyncio.Event()

    def on_change(ev: Any) -> None:
        if ev.new_state == "speaking":
            seen_speaking.set()
        elif ev.new_state == state and seen_speaking.is_set():
            done.set()

    session.on("user_state_changed", on_change)
    try:
        await done.wait()
    finally:
        session.off("user_state_changed", on_change)


# -- a scripted model: the session closes while the desk's session waits for a transcript ----


def desk_model(journal: DeskJournal, *, user_transcription: bool = True) -> ScriptedRealtimeModel:
    def fallback(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers: {gen.last_user_text}"

    return ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("to_billing")])],
        fallback=fallback,
        reuse=False,
        turn_detection=True,
        user_transcription=user_transcription,
    )


async def _desk_heard_a_turn_end_while_leaving(
    make_session: MakeSession, *, user_transcription: bool = True
) -> tuple[Any, Any, DeskJournal, Gate]:
    """The caller asks for billing; while the desk's on_exit is held, its session's server
    hears the caller speak a whole turn whose transcription never completes (the provider
    failed it, or the model transcribes no caller). Returns (session, the desk's realtime session, journal,
    the desk's exit gate), the gate still closed."""
    journal = DeskJournal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_model(journal, user_transcription=user_transcription)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)
    await bounded(gate.reached(), what="the desk's on_exit")
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    rt.emit(
        "input_speech_stopped",
        llm.InputSpeechStoppedEvent(user_transcription_enabled=user_transcription),
    )
    rt._chat_ctx.add_message(role="user", content="", id=utils.shortuuid("fake_user_"))
    return session, rt, journal, gate


async def test_session_close_during_a_handoff_is_not_held_by_a_transcript_that_never_comes(
    make_session: MakeSession,
) -> None:
    """The caller hangs up as the desk's activity closes in the handoff: the session's close
    ends as soon as on upstream, whatever the desk's session heard."""
    session, rt, journal, gate = await _desk_heard_a_turn_end_while_leaving(make_session)
    gate.open()
    await bounded(journal.exited["desk"].wait(), what="the desk's on_exit to return")
    for _ in range(CLOSE_TICKS):
        if rt.closed:
            break
        await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await bounded(session.aclose(), what="AgentSession.aclose")
    took = loop.time() - started

    assert took < SLOW, f"the session's close took {took:.2f}s of loop time"
    assert rt.closed


async def test_handoff_on_a_model_that_does_not_transcribe_the_caller(make_session: MakeSession) -> None:
    """The desk's model transcribes no caller (``user_transcription`` off): whatever its session
    heard, no transcript is coming, and billing takes over at once once the desk's on_exit
    returned."""
    session, rt, journal, gate = await _desk_heard_a_turn_end_while_leaving(
        make_session, user_transcription=False
    )
    loop = asyncio.get_running_loop()
    gate.open()
    released = loop.time()
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    took = loop.time() - released
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert took < SLOW, f"the handoff took {took:.2f}s of loop time once the desk's on_exit returned"
