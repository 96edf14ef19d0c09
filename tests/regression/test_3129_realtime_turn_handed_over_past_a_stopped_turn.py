"""livekit/agents#3129: the caller's next turn, heard to its end before its transcript and reply
came, supersedes the turn handed over; it is no noise.

The caller's turn ends while the desk is handed over to billing, which answers it. As billing
comes in, its model's server hears the caller start the next turn and stop: a speech start
and its end. Billing's reply to the turn handed over comes up before the server sent anything
else. A noise looks the same until then (no transcript and no reply ever come,
test_3129_realtime_turn_handed_over_past_a_noise.py); a turn's transcript and the model's reply
come a little later. The reply played as if it were a noise: billing answered the turn handed
over after the caller's next turn ended, and then that turn too. The caller hears a stale
answer. Billing's reply waits for what the server makes of the speech it heard end: here the
next turn, which supersedes the turn handed over (answered once, with it in the model's
context). Stock drops the turn handed over (the assertion on the model's context).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import llm, utils

from tests.fakes import Gate, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, TO_BILLING, Desk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_turn_handed_over_past_a_noise import NoisyBilling
from tests.regression.test_3129_realtime_turn_superseded_across_a_handoff import (
    FIRST,
    SECOND,
    Journal,
    _model,
    _took_the_turn,
)

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

# loop iterations billing's reply to the turn handed over gets to come up once authorized: it
# asks the model for its answer within a few, or waits for the server
COME_UP_TICKS = 20


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_the_caller_stopping_the_next_turn_as_the_arriving_agent_comes_in_supersedes_the_turn(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    # billing's server hears the caller start the next turn, and its end, as billing comes in
    journal.billing_cls = NoisyBilling
    journal.speaks_as_billing_enters = True
    model = _model(journal, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)
    # the speeches created from here on: billing's (the desk's model replies during the handoff
    # are skipped)
    replies: list[Any] = []
    session.on("speech_created", lambda ev: replies.append(ev.speech_handle))

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: its model's reply is skipped, billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    billing = await _took_the_turn(session, journal)
    rt = model.live_sessions[-1]
    assert (rt is model.sessions[0]) is reuse

    # billing's reply to the turn handed over comes up (stock asks for none) before the server
    # sent the next turn's transcript or the model's reply to it
    for reply in replies:
        await bounded(reply._wait_for_authorization(), what="billing's reply coming up")
    for _ in range(COME_UP_TICKS):
        if journal.context_of_answers_to(FIRST):
            break  # the model was asked for an answer to the turn handed over
        await asyncio.sleep(0)

    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=SECOND, id=item_id)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SECOND, is_final=True),
    )
    second = rt.emit_generation()
    await settled_on(session, billing)
    await bounded(second.done, what="the answer to the caller's next turn")

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    # the model answering the caller's next turn knows the turn handed over (stock drops it),
    # and is asked once
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    # the bug: billing's model asked for its answer to the turn handed over as the server still
    # had to say what the speech it heard end was, that answer played after the next turn ended
    assert not journal.context_of_answers_to(FIRST), journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
