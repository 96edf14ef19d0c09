"""livekit/agents#3129: a spoken turn handed over after the turn before it keeps its place
before input the caller typed after it.

The desk still looks the caller's first turn up (its ``on_user_turn_completed``) when the
application hands the caller to billing. While the desk is handed over, the caller types (or
the application sends typed input), or first says a second turn, then types. The caller spoke
before typing: billing answers the spoken turn (the last one) first, then the typed input, each
once. The typed input is queued for billing at once; the spoken turns only once the desk's hook
returned: they must not come after it. Stock drops the spoken turns (not in the history).
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import AgentSession, llm

from tests.fakes import Gate, JournalingAgent, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, DESK, DeskJournal, spoken_session
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

FIRST = "I'd like to check my last invoice."
LATER = "Actually, it's about a refund."
TYPED = "My order number is 1234."


class Desk(JournalingAgent):
    """Looks the caller's :data:`FIRST` turn up in its ``on_user_turn_completed`` until
    ``lookup`` opens."""

    def __init__(self, journal: DeskJournal, lookup: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.lookup = lookup

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if new_message.text_content == FIRST:
            await self.lookup.wait()


def user_texts(session: AgentSession[Any]) -> list[str]:
    return [i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "user"]


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("later", [0, 1], ids=["typed_after_the_looked_up_turn", "typed_after_a_later_turn"])
async def test_typed_input_after_a_turn_waiting_behind_the_one_before_comes_after_it(
    make_session: MakeSession, later: int
) -> None:
    journal = DeskJournal()
    lookup = Gate("the desk's lookup of the first turn")
    session, caller, _ = await spoken_session(make_session, Desk(journal, lookup), journal)
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)

    await caller.say(FIRST)
    async with lookup.held():
        session.update_agent(billing)
        # the caller goes on while the desk still looks the first turn up, then types
        if later:
            await caller.say(LATER)
        try:
            typed = session.generate_reply(user_input=TYPED)
        except RuntimeError:
            typed = None  # stock refuses input once the desk drains (livekit/agents#6313)
    if typed is not None:
        await bounded(typed, what="the answer to the typed input")
    await settled_on(session, billing)

    said = [FIRST, LATER][: 1 + later]
    # stock: the spoken turns are dropped, not even recorded
    assert [t for t in user_texts(session) if t != TYPED] == said
    assert typed is not None, "the typed input was refused"
    assert user_texts(session) == [*said, TYPED]
    for text in (*said, TYPED):
        assert user_messages(session, text) == 1, (text, user_texts(session))
    answered = [(c.instructions, c.last_user_text) for c, _ in journal.requests]
    # the bug: billing answers the typed input first, then "answers" the spoken turn from a
    # context that ends with the typed input: the typed input twice, the turn never
    assert answered == [(BILLING, said[-1]), (BILLING, TYPED)], answered
    assert spoken(session) == [f"{BILLING} answers: {said[-1]}", f"{BILLING} answers: {TYPED}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
