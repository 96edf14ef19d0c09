"""livekit/agents#3129: the caller's turn ends while the desk hands over to billing, whose
``on_enter()`` starts an inline AgentTask at once (an intake form, as many agents do). The turn
is answered once (by billing or the intake, whichever is current when it is taken), the
intake, current, answers the caller's next turn, billing says nothing while it is suspended,
and the desk nothing after its ``on_exit``. Stock drops the turn. The parity guard
(tests/guards/test_spoken_turn_to_an_inline_task_started_by_the_arriving_agent_guard.py) runs
the same agents with no turn ending during the handoff.
"""

from __future__ import annotations

import pytest

from tests.fakes import Gate, JournalingAgent, JournalingTask, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, DESK, TO_BILLING, Desk, DeskJournal, spoken_session
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

INTAKE = "You take the caller's details."
FIRST = "My name is Ada."
SECOND = "My account number is 42."


class Intake(JournalingTask[str]):
    pass


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.intake: Intake | None = None


class IntakeBilling(JournalingAgent):
    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        intake = self.journal.intake = Intake(self.journal, name="intake", instructions=INTAKE)
        self.journal.results.append(await intake)


async def the_caller_speaks_to_an_inline_task_the_arriving_agent_started(
    make_session: MakeSession, *, while_handing_off: bool
) -> None:
    journal = Journal()
    journal.billing_cls = IntakeBilling
    session, caller, _ = await spoken_session(make_session, Desk(journal, message=None), journal)
    await caller.say(TO_BILLING)
    if while_handing_off:
        gate = journal.exit_gates["desk"] = Gate("desk on_exit")
        async with gate.held():
            await caller.say(FIRST)
    await bounded(journal.entered["intake"].wait(), what="the intake's on_enter")
    intake = journal.intake
    assert intake is not None
    await settled_on(session, intake)
    if not while_handing_off:
        await caller.say(FIRST)
        await settled_on(session, intake)
    await caller.say(SECOND)
    await settled_on(session, intake)

    said = spoken(session)
    for text in (FIRST, SECOND):
        assert user_messages(session, text) == 1, said
    if while_handing_off:
        # the turn that ended while the desk left: once, by billing or the intake
        assert sum(t in (f"{BILLING} answers: {FIRST}", f"{INTAKE} answers: {FIRST}") for t in said) == 1, (
            said
        )
    else:
        assert said.count(f"{INTAKE} answers: {FIRST}") == 1, said
    # the intake, current, answers the caller's next turn; billing, suspended, does not
    assert said.count(f"{INTAKE} answers: {SECOND}") == 1, said
    assert f"{BILLING} answers: {SECOND}" not in said, said
    assert not [t for t in said if t.startswith(DESK)], said
    assert journal.events == ["enter desk", "exit desk", "enter billing", "enter intake"]

    intake.complete("Ada, 42")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert journal.results == ["Ada, 42"]
    assert journal.events[-1] == "exit intake"


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_ending_during_the_handoff_to_an_agent_that_starts_an_inline_task_is_answered_once(
    make_session: MakeSession,
) -> None:
    await the_caller_speaks_to_an_inline_task_the_arriving_agent_started(make_session, while_handing_off=True)
