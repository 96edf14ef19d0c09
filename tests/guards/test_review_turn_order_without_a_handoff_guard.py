"""Guards: with no handoff, the order in which an agent answers spoken turns and typed input is
upstream's.

0016 orders the caller's input queued for the agent taking over a handoff by when it was given
(a spoken turn still in the leaving agent's ``on_user_turn_completed()`` before typed input given
after it). Without a handoff nothing is queued and upstream's order stands: a turn ending while
the one before it is still looked up supersedes it (only the later one is answered), and input
typed while a turn is looked up is answered at once, the turn after its lookup.
"""

from __future__ import annotations

from livekit.agents import llm

from tests.fakes import Gate, JournalingAgent, MakeSession, bounded, spoken
from tests.fakes.desks import DESK, DeskJournal, spoken_session
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

FIRST = "I'd like to check my last invoice."
LATER = "Actually, it's about a refund."
TYPED = "My order number is 1234."


class Desk(JournalingAgent):
    def __init__(self, journal: DeskJournal, lookup: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.lookup = lookup

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if new_message.text_content == FIRST:
            await self.lookup.wait()


async def test_a_turn_ending_while_the_one_before_is_looked_up_supersedes_it(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    lookup = Gate("the desk's lookup of the first turn")
    desk = Desk(journal, lookup)
    session, caller, _ = await spoken_session(make_session, desk, journal)

    await caller.say(FIRST)
    async with lookup.held():
        await caller.say(LATER)
    await settled_on(session, desk)

    assert user_messages(session, FIRST) == 1
    assert user_messages(session, LATER) == 1
    # the reply to the first turn is created and interrupted unplayed, as upstream does
    assert [c.last_user_text for c, _ in journal.requests][-1:] == [LATER]
    assert spoken(session) == [f"{DESK} answers: {LATER}"]


async def test_input_typed_while_a_turn_is_looked_up_is_answered_first(make_session: MakeSession) -> None:
    journal = DeskJournal()
    lookup = Gate("the desk's lookup of the first turn")
    desk = Desk(journal, lookup)
    session, caller, _ = await spoken_session(make_session, desk, journal)

    await caller.say(FIRST)
    async with lookup.held():
        typed = session.generate_reply(user_input=TYPED)
        await bounded(typed, what="the answer to the typed input")
    await settled_on(session, desk)

    assert user_messages(session, FIRST) == 1
    assert user_messages(session, TYPED) == 1
    assert spoken(session) == [f"{DESK} answers: {TYPED}", f"{DESK} answers: {FIRST}"]
