"""livekit/agents#3129: the session closing while a turn handed over waits behind the turn before
it loses neither turn.

The desk still looks the caller's first turn up (its ``on_user_turn_completed``) when the
application hands the caller to billing; the caller says a second turn, which waits for the first
to be handed over. The caller hangs up then (the session closes) before the desk's lookup
returned. Nobody answers either turn, but both are in the history, once each and in the order
said, and nobody speaks after the desk's on_exit began. Stock drops the second turn (not
recorded).
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm

from tests.fakes import Gate, JournalingAgent, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, DESK, DeskJournal, spoken_session
from tests.fakes.history import user_messages

FIRST = "I'd like to check my last invoice."
LATER = "Actually, it's about a refund."


class Desk(JournalingAgent):
    def __init__(self, journal: DeskJournal, lookup: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.lookup = lookup

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if new_message.text_content == FIRST:
            await self.lookup.wait()


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_closing_while_a_turn_waits_behind_the_one_before_records_both(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    lookup = Gate("the desk's lookup of the first turn")
    session, caller, _ = await spoken_session(make_session, Desk(journal, lookup), journal)

    await caller.say(FIRST)
    async with lookup.held():
        session.update_agent(JournalingAgent(journal, name="billing", instructions=BILLING))
        await caller.say(LATER)
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)
    await bounded(closing, what="AgentSession.aclose")

    users = [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"]
    # stock: the second turn is not even recorded
    assert users == [FIRST, LATER], users
    assert user_messages(session, LATER) == 1
    assert spoken(session) == [], spoken(session)
    assert not journal.requests, [c.last_user_text for c, _ in journal.requests]
