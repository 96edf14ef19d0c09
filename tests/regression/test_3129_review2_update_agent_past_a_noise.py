"""livekit/agents#3129: update_agent() as the reply to a turn handed over waits on a noise is not
held up by that wait; the agent it puts in answers the turn.

The caller's turn ends while the desk is handed over to billing, which answers it. As billing
comes in, its model's server hears a noise (a speech start and its end, nothing else): billing's
reply waits, bounded, for the server to tell a turn from a noise. Meanwhile the application
puts another agent in (``session.update_agent()``): billing's reply will not play, the turn
goes to the agent taking over whatever the server says, yet billing's on_exit only begins once
the wait ran out (2 s), and the new agent comes in that late. Stock drops the turn (nobody
answers it; the assertion on what was spoken).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import Gate, JournalingAgent, MakeSession, bounded, spoken
from tests.fakes.desks import Desk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_turn_handed_over_past_a_noise import NoisyBilling
from tests.regression.test_3129_realtime_turn_superseded_across_a_handoff import (
    FIRST,
    TO_BILLING,
    Journal,
    _model,
    _took_the_turn,
)

THIRD = "You are the refunds desk."
# loop iterations billing's reply to the turn handed over gets to come up and begin its wait
COME_UP_TICKS = 20
# far below the wait's bound (2 s); the handoff itself takes milliseconds here
PROMPT = 1.0


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_update_agent_while_the_reply_to_a_turn_handed_over_waits_on_a_noise(
    make_session: MakeSession,
) -> None:
    """The realtime session is handed on (a replaced one waits for the noise's transcript as
    it closes, by design: see _await_rt_turn_transcript)."""
    journal = Journal()
    journal.billing_cls = NoisyBilling
    journal.speaks_as_billing_enters = True
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    await _took_the_turn(session, journal)
    for _ in range(COME_UP_TICKS):
        await asyncio.sleep(0)

    loop = asyncio.get_running_loop()
    started = loop.time()
    refunds = JournalingAgent(journal, name="refunds", instructions=THIRD)
    session.update_agent(refunds)
    await bounded(journal.exiting["billing"].wait(), what="billing's on_exit")
    exited = loop.time() - started
    await bounded(journal.entered["refunds"].wait(), what="the refunds desk's on_enter")
    held = loop.time() - started
    await settled_on(session, refunds)

    assert user_messages(session, FIRST) == 1, spoken(session)
    # stock: nobody answers the turn
    assert spoken(session) == [f"{THIRD} answers: {FIRST}"], journal.answers
    # the bug: billing's handoff waits for a wait whose outcome no longer matters
    assert held < PROMPT, f"on_exit {exited:.2f}s, the refunds desk in {held:.2f}s after update_agent()"
