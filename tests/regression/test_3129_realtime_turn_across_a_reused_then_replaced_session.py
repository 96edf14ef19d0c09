"""livekit/agents#3129: a turn the caller ends as the desk leaves, its realtime session handed
on to a router agent that passes the caller on at once, to an agent on another model.

The desk puts the caller through to a router on the same realtime model: the router reuses
the desk's session. While the desk leaves, the caller speaks a whole turn: the session's server
hears it start and stop, and its transcript is a moment behind. The router hands the caller on
as it enters, to an agent on another model, and its session closes: the transcript of the turn
its server heard end comes as it does. The agent the caller ends with answers that turn, once,
as it does when the desk's own session is replaced
(test_3129_realtime_turn_as_a_replaced_session_closes.py).
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent, llm, utils

from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
)
from tests.fakes.desks import SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on

FINAL = "You are the refunds desk."

CLOSE_TICKS = 50
"""Loop ticks the router's session is given to close once its on_exit returned."""


def answers(gen: RTGeneration) -> str:
    return f"{gen.instructions} answers: {gen.last_user_text}"


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.final_model = ScriptedRealtimeModel(
            fallback=answers, reuse=True, turn_detection=True, user_transcription=True
        )
        self.final: Agent | None = None


class Router(JournalingAgent):
    """Passes the caller on to the refunds desk, on another model, as it enters."""

    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        final = self.journal.final = JournalingAgent(
            self.journal, name="final", instructions=FINAL, llm=self.journal.final_model
        )
        self.session.update_agent(final)


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_the_desk_heard_end_is_answered_past_a_router_on_its_session(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    journal.billing_cls = Router
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(answers, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    item_id = utils.shortuuid("fake_user_")
    try:
        # the caller speaks a whole turn while the desk leaves: the session's server hears it
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
    finally:
        gate.open()
    # the router takes the session over and leaves at once; the transcript comes a moment
    # later: once the session closed, or CLOSE_TICKS into the router's close
    await bounded(journal.exited["billing"].wait(), what="the router's on_exit")
    for _ in range(CLOSE_TICKS):
        if rt.closed:
            break
        await asyncio.sleep(0)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    await bounded(journal.entered["final"].wait(), what="the refunds desk's on_enter")
    assert journal.final is not None
    await settled_on(session, journal.final)
    assert model.sessions == [rt], "the router reused the desk's session"
    assert journal.events[:4] == ["enter desk", "exit desk", "enter billing", "exit billing"]

    # the bug: the turn never reaches the history, nobody answers it
    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    answered = [g.last_user_text for g in journal.final_model.generations]
    assert answered.count(SPOKEN) == 1
