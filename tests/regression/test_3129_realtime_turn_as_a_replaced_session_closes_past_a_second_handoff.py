"""livekit/agents#3129: a turn the leaving agent's replaced realtime session heard end, and a
second handoff asked for while that session closes.

The caller speaks a whole turn while the desk leaves for billing: the desk's session (which
billing does not reuse) hears it start and stop, and its transcript is a moment behind. Before
it comes, the application moves the caller on again (``update_agent()`` from outside the
agents, e.g. on a room event): to a third agent, or back to the desk. The agent the caller
ends with answers the turn, once, also when the desk's model replies to it before its
transcript comes.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm, utils

from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    RTGeneration,
    bounded,
    spoken,
)
from tests.fakes.desks import SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on

REFUNDS = "You are the refunds desk."

CLOSE_TICKS = 50
"""Loop ticks the desk's session is given to close once its on_exit returned."""


def answers(gen: RTGeneration) -> str:
    return f"{gen.instructions} answers: {gen.last_user_text}"


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("then", ["refunds", "back-to-desk", "back-to-desk-reply-first"])
async def test_a_turn_heard_as_the_desk_closes_goes_to_the_agent_of_the_second_handoff(
    make_session: MakeSession, then: str
) -> None:
    journal = DeskJournal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(answers, reuse=False)
    desk = Desk(journal, message=None)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    item_id = utils.shortuuid("fake_user_")
    try:
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
    finally:
        gate.open()
    await bounded(journal.exited["desk"].wait(), what="the desk's on_exit")
    for _ in range(CLOSE_TICKS):
        if rt.closed:
            break
        await asyncio.sleep(0)
    # the application moves the caller on again, then the transcript comes
    final = JournalingAgent(journal, name="refunds", instructions=REFUNDS) if then == "refunds" else desk
    session.update_agent(final)
    if then == "back-to-desk-reply-first":
        # the model replies to the turn before its transcript comes, a moment later
        rt.emit_generation()
        for _ in range(CLOSE_TICKS):
            if rt.closed:
                break
            await asyncio.sleep(0)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await settled_on(session, final)
    assert [e for e in journal.events if e.startswith("enter")][-1] == (
        "enter refunds" if then == "refunds" else "enter desk"
    )

    # the bug: the turn never reaches the history, nobody answers it
    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    # (the desk's own reply to it, on the session that closed, never played)
    answered = [
        g.instructions for g in model.generations if g.last_user_text == SPOKEN and g.session is not rt
    ]
    assert answered == [final.instructions]
    assert spoken(session).count(f"{final.instructions} answers: {SPOKEN}") == 1
