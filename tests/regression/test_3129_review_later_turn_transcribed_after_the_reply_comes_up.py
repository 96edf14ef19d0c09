"""livekit/agents#3129: the caller's next turn supersedes the answer to a turn handed over also
when its transcript comes in only after that answer came up.

The caller's turn ends while the desk is handed over to billing, which answers it. As billing
comes in, the caller starts the next turn (its realtime model's server hears the speech start)
and stops: the answer to the first turn, waiting for the caller's silence, comes up at that
speech stop, before the server's transcript of the next turn and its reply to it. Servers send
both a moment after the speech stop (OpenAI: the audio buffer is committed, then the response
created, then the transcript). At that moment a speech start and stop with nothing after them
looks like a noise; it is the next turn. The caller went on before any answer to the first
turn played (CONTRIBUTING.md, "Spoken turns"): the model answers the next turn with the first
in its context, and the first turn's answer is not said after it. Stock drops the first turn
(the assertion on the model's context).
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm, utils

from tests.fakes import Gate, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, Desk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_turn_superseded_across_a_handoff import (
    FIRST,
    SECOND,
    TO_BILLING,
    Journal,
    _model,
    _took_the_turn,
)

ASK_TICKS = 50
"""Loop ticks billing is given to ask the model for its answer to the first turn once the caller
stopped (a few; stock never asks: it dropped the turn)."""


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_later_turn_transcribed_after_the_answer_came_up_supersedes_it(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    journal.speaks_as_billing_enters = True
    # the model works on its answer to the first turn until the later turn is in
    journal.first_answer = Gate("the model's answer to the first turn")
    model = _model(journal, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: its model's reply is skipped, billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    billing = await _took_the_turn(session, journal)
    rt = model.live_sessions[-1]

    # the caller, who started speaking as billing came in, stops: billing's answer to the
    # first turn comes up and the model is asked for it
    asked = len(journal.answers)
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))

    for _ in range(ASK_TICKS):
        if len(journal.answers) > asked:
            break
        await asyncio.sleep(0)
    # then the server's commit of the later turn, its reply, its transcript
    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=SECOND, id=item_id)
    second = rt.emit_generation()
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SECOND, is_final=True),
    )
    journal.first_answer.open()
    await bounded(second.done, what="the answer to the caller's next turn")
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    # the bug: the answer to the first turn plays after the caller started the next one
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]
