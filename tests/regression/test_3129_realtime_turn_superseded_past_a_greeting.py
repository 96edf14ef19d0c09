"""livekit/agents#3129: the caller speaks again before the answer to a turn handed over exists,
while the arriving agent greets them.

As in test_3129_realtime_turn_superseded_across_a_handoff.py: the caller's turn ends while the
desk is handed over to billing (billing answers it), and billing's model hears the caller start
the next turn before billing asked the model for that answer. Here billing also greets the
caller as it comes in, a greeting the caller cannot talk over
(``generate_reply(instructions=..., allow_interruptions=False)`` in ``on_enter()``), whose
generation clears the activity's note that the server heard a turn start. The greeting is not the
model's answer to the caller's next turn: the caller went on, the first turn is superseded, and
the model answers the next turn once, with the first in its context. Stock drops the turn that
ends during the handoff (the assertion on the context).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    bounded,
    spoken,
)
from tests.fakes.desks import BILLING, TO_BILLING, Desk, desk_realtime_model
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_turn_superseded_across_a_handoff import (
    FIRST,
    SECOND,
    Billing,
    Journal,
    _rest_of_the_turn,
)

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

GREET = "Greet the caller."
GREETING = "Billing here, hello."


class GreetingJournal(Journal):
    def __init__(self) -> None:
        super().__init__()
        self.greeted = asyncio.Event()

    def answer(self, gen: RTGeneration) -> Reply:
        if gen.extra_instructions == GREET:
            self.greeted.set()
            return Reply(GREETING)
        return super().answer(gen)


class GreetingBilling(Billing):
    journal: GreetingJournal

    async def on_enter(self) -> None:
        await super().on_enter()  # the caller starts speaking again, as billing comes in
        self.session.generate_reply(instructions=GREET, allow_interruptions=False)
        # the model is under way with the greeting before billing takes the turn handed over
        await bounded(self.journal.greeted.wait(), what="the greeting's generation")


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_greeting_does_not_stand_in_for_the_callers_next_turn(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = GreetingJournal()
    journal.billing_cls = GreetingBilling
    journal.speaks_as_billing_enters = True
    model = desk_realtime_model(journal.answer, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: its model's reply is skipped, billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    await bounded(journal.greeted.wait(), what="billing's greeting")
    rt = model.live_sessions[-1]
    # the caller, who started the next turn as billing came in, finishes it
    second = _rest_of_the_turn(rt, SECOND)
    await bounded(second.done, what="the answer to the caller's next turn")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    # the bug: billing's answer to the first turn plays after the caller's next turn ended
    assert not journal.context_of_answers_to(FIRST), (journal.answers, spoken(session))
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]
