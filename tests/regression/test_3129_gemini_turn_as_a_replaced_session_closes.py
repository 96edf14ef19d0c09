"""livekit/agents#3129 on Gemini Live: a turn the caller speaks as the desk leaves, its Live
session replaced in the handoff (Gemini's tools cannot change on a session).

The desk hands the caller to billing with a tool. While the desk leaves, the caller speaks: the
server transcribes them as they speak and starts its reply at once (the plugin announces the
reply with a speech start), and the turn's final transcript comes only as the server ends its
turn. It ends it as the desk's session closes. Billing, on its own session, answers the turn,
once. Driven on the real plugin over the Live socket fake.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, function_tool
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

CLOSE_TICKS = 50
"""Loop ticks the desk's session is given to close once its on_exit returned."""


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> FakeLiveServer:
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
    def __init__(self, exit_gate: Gate, exited: asyncio.Event, billing_entered: asyncio.Event) -> None:
        super().__init__(instructions=DESK)
        self.exit_gate, self.exited, self.billing_entered = exit_gate, exited, billing_entered

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return Billing(self.billing_entered)

    async def on_exit(self) -> None:
        await self.exit_gate.wait()
        self.exited.set()


def is_reply_request(message: dict[str, Any]) -> bool:
    return bool((client_content(message) or {}).get("turnComplete"))


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_caller_turn_the_desks_gemini_session_heard_is_answered_by_billing(
    live: FakeLiveServer, make_session: MakeSession
) -> None:
    exit_gate, exited, billing_entered = Gate("desk on_exit"), asyncio.Event(), asyncio.Event()
    session = await make_session(GeminiDesk(exit_gate, exited, billing_entered), llm=gemini())
    conn = await live.connection(0)
    try:
        run = session.run(user_input=TO_BILLING)
        await conn.wait_sent(is_reply_request, what="the caller's turn")
        conn.push(tool_call_message(("fc-1", "to_billing", {})))
        await bounded(exit_gate.reached(), what="the desk's on_exit")
        await conn.wait_sent(lambda m: bool(function_responses(m)), what="the handoff tool's result")
        # the caller speaks as the desk leaves: the server transcribes them and starts its reply
        heard = asyncio.ensure_future(
            wait_for_event(session, "user_input_transcribed", lambda ev: ev.transcript == SPOKEN)
        )
        conn.push({"serverContent": {"inputTranscription": {"text": SPOKEN}}})
        conn.push(model_text_message("Sure, a refund.", turn_complete=False))
        await heard
    finally:
        exit_gate.open()
    await bounded(exited.wait(), what="the desk's on_exit to return")
    for _ in range(CLOSE_TICKS):
        if conn.closed:
            break
        await asyncio.sleep(0)
    if not conn.closed:
        # the server ends its turn: the plugin reports the speech stop and the final transcript
        conn.push({"serverContent": {"generationComplete": True, "turnComplete": True}})
    await bounded(billing_entered.wait(), what="billing's on_enter")

    # the bug: the desk's session closed before the turn's transcript, nobody answers it
    assert [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"].count(
        SPOKEN
    ) == 1
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
