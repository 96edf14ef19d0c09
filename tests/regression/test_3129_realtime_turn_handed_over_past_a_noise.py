"""livekit/agents#3129: a noise as the arriving realtime agent comes in does not cost the turn
handed over its answer.

The caller's turn ends while the desk is handed over to billing, which answers it. As billing
comes in, its model's server hears a noise: it reports a start of speech and its end, with no
transcript and no reply (a cough, a door; servers do not answer every start of speech). No
later turn of the caller's exists: nothing supersedes the turn handed over, and billing answers
it, once. Also when the realtime session is handed on and the noise is heard as the desk
leaves. Stock drops the turn (the assertion on the model's context).
"""

from __future__ import annotations

import pytest
from livekit.agents import llm

from tests.fakes import Gate, MakeSession, ScriptedRealtimeSession, spoken
from tests.fakes.desks import BILLING, Desk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_turn_superseded_across_a_handoff import (
    FIRST,
    TO_BILLING,
    Billing,
    Journal,
    _model,
    _took_the_turn,
)

BUG = pytest.mark.upstream_bug("livekit/agents#3129")


class NoisyBilling(Billing):
    async def on_enter(self) -> None:
        await super().on_enter()  # the server reports a start of speech
        assert self._activity is not None
        rt = self._activity.realtime_llm_session
        assert isinstance(rt, ScriptedRealtimeSession)
        # ... and its end: a noise, no transcript, no reply
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_noise_as_the_arriving_agent_comes_in_does_not_supersede_the_turn(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    journal.billing_cls = NoisyBilling
    journal.speaks_as_billing_enters = True
    model = _model(journal, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: its model's reply is skipped, billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    billing = await _took_the_turn(session, journal)
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    # billing's model answers the turn handed over (stock: it never gets it)
    assert [users[-1:] for users in journal.context_of_answers_to(FIRST)] == [[FIRST]], journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {FIRST}"]


@BUG
async def test_a_noise_as_the_leaving_agent_exits_does_not_supersede_the_turn(
    make_session: MakeSession,
) -> None:
    """The realtime session is handed on: the desk's server hears the noise as the desk leaves,
    after the turn ended there."""
    journal = Journal()
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        rt.simulate_user_turn(FIRST)
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    billing = await _took_the_turn(session, journal)
    assert model.live_sessions == [rt]
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert [users[-1:] for users in journal.context_of_answers_to(FIRST)] == [[FIRST]], journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {FIRST}"]
