"""livekit/agents#3129 on Gemini Live: a turn the caller speaks as the desk leaves is answered by
billing also when the server withholds its final transcript past the close's bound.

Gemini Live transcribes the caller as they speak and sends the turn's final transcript only with
``turnComplete``, which it delays until it thinks the client played its reply out (the plugin
ends the reply's streams on ``generationComplete`` for that reason). Nobody plays the reply the
server starts to a turn the caller ends as the desk leaves: ``turnComplete`` comes as late as the
reply is long, past the bound the desk's closing session waits for a transcript. The server
transcribed the caller's words all along: they are the turn, and billing answers them, once.
Driven on the real plugin over the Live socket fake; the bound is shortened for the test.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, function_tool
from livekit.agents.voice import agent_activity
from livekit.plugins.google.realtime import RealtimeModel

from tests.fakes import Gate, MakeSession, bounded, spoken, wait_for_event
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING
from tests.fakes.genai_live import (
    FakeLiveServer,
    client_content,
    function_responses,
    model_text_message,
    offline_live_server,
    tool_call_message,
    turn_texts,
)

BOUND = 0.05
"""Seconds the desk's closing session waits for the transcript here (in place of 2 s)."""


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> FakeLiveServer:
    # stock has no such bound (it does not wait): raising=False
    monkeypatch.setattr(agent_activity, "_RT_TURN_TRANSCRIPT_TIMEOUT", BOUND, raising=False)
    return offline_live_server(monkeypatch)


def gemini() -> RealtimeModel:
    return RealtimeModel(modalities=[types.Modality.TEXT])


class Billing(Agent):
    def __init__(self, entered: asyncio.Event) -> None:
        super().__init__(instructions=BILLING, llm=gemini())
        self.entered = entered

    async def on_enter(self) -> None:
        self.entered.set()


class GeminiDesk(Agent):
    def __init__(self, exit_gate: Gate, billing_entered: asyncio.Event) -> None:
        super().__init__(instructions=DESK)
        self.exit_gate, self.billing_entered = exit_gate, billing_entered

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return Billing(self.billing_entered)

    async def on_exit(self) -> None:
        await self.exit_gate.wait()


def is_reply_request(message: dict[str, Any]) -> bool:
    return bool((client_content(message) or {}).get("turnComplete"))


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_caller_turn_whose_final_transcript_gemini_withholds_is_answered_by_billing(
    live: FakeLiveServer, make_session: MakeSession
) -> None:
    exit_gate, billing_entered = Gate("desk on_exit"), asyncio.Event()
    session = await make_session(GeminiDesk(exit_gate, billing_entered), llm=gemini())
    conn = await live.connection(0)
    try:
        run = session.run(user_input=TO_BILLING)
        await conn.wait_sent(is_reply_request, what="the caller's turn")
        conn.push(tool_call_message(("fc-1", "to_billing", {})))
        await bounded(exit_gate.reached(), what="the desk's on_exit")
        await conn.wait_sent(lambda m: bool(function_responses(m)), what="the handoff tool's result")
        # the caller speaks as the desk leaves: the server transcribes them and replies, and
        # holds its turnComplete (with the final transcript) until its reply would have played
        heard = asyncio.ensure_future(
            wait_for_event(session, "user_input_transcribed", lambda ev: ev.transcript == SPOKEN)
        )
        conn.push({"serverContent": {"inputTranscription": {"text": SPOKEN}}})
        conn.push(model_text_message("Sure, a refund.", turn_complete=False))
        conn.push({"serverContent": {"generationComplete": True}})
        await heard
    finally:
        exit_gate.open()
    await conn.wait_closed()
    await bounded(billing_entered.wait(), what="billing's on_enter")

    # the bug: the desk's session closed before the turn's final transcript, nobody answers it
    users = [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"]
    assert users.count(SPOKEN) == 1, users
    billing_conn = await live.connection(1)
    await billing_conn.wait_sent(is_reply_request, what="billing's reply to the turn")
    assert any(("user", SPOKEN) in turn_texts(m) for m in billing_conn.sent)
    said = asyncio.ensure_future(
        wait_for_event(session, "conversation_item_added", lambda ev: ev.item.text_content == "Refunds here.")
    )
    billing_conn.push(model_text_message("Refunds here."))
    await said
    await bounded(run, what="session.run")
    assert "Sure, a refund." not in spoken(session)
