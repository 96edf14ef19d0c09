"""livekit/agents#3129: spoken turns that end around ``update_agent()`` are handed over in the
order the caller said them.

The desk still works on the caller's first turn when the application hands the caller to
billing: its ``on_user_turn_completed`` looks the turn up (RAG). The caller goes on, and the next
turn ends on the desk being handed over. The first turn is handed over once the desk's hook
returned; the later one must not overtake it. The agent taking over takes the turn handed over
last for the caller's latest: overtaken, it answers the first turn and records the later one as
superseded, and when it hands the caller on in turn (billing's own hook puts the first turn
through to refunds), only the first turn goes with it. Refunds answers the first turn; the turn
the caller said last never reaches it (CONTRIBUTING.md, "Spoken turns": a later turn supersedes
an earlier one, never the reverse). Stock drops the turns that end during the handoff: neither is
in the history. The caller speaks through the session's audio input, VAD and STT
(``tests.fakes.speech``).
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, llm

from tests.fakes import Gate, JournalingAgent, MakeSession, bounded, spoken
from tests.fakes.desks import BILLING, DESK, DeskJournal, spoken_session
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

REFUNDS = "You are the refunds desk."
FIRST = "I'd like to check my last invoice."
LATER = ["Actually, it's about a refund.", "For the order of last week."]


class Desk(JournalingAgent):
    """Looks the caller's :data:`FIRST` turn up in its ``on_user_turn_completed`` until
    ``lookup`` opens."""

    def __init__(self, journal: DeskJournal, lookup: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.lookup = lookup

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if new_message.text_content == FIRST:
            await self.lookup.wait()


class Billing(JournalingAgent):
    """Puts a caller whose turn is :data:`FIRST` through to ``refunds`` from its
    ``on_user_turn_completed``."""

    def __init__(self, journal: DeskJournal, refunds: Agent) -> None:
        super().__init__(journal, name="billing", instructions=BILLING)
        self.refunds = refunds

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if new_message.text_content == FIRST:
            self.session.update_agent(self.refunds)


def user_texts(session: AgentSession[Any]) -> list[str]:
    return [i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "user"]


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("later", [1, 2], ids=["one_later_turn", "two_later_turns"])
async def test_a_turn_ending_while_the_one_before_is_looked_up_is_handed_over_after_it(
    make_session: MakeSession, later: int
) -> None:
    journal = DeskJournal()
    lookup = Gate("the desk's lookup of the first turn")
    session, caller, _ = await spoken_session(make_session, Desk(journal, lookup), journal)
    refunds = JournalingAgent(journal, name="refunds", instructions=REFUNDS)

    await caller.say(FIRST)
    async with lookup.held():
        session.update_agent(Billing(journal, refunds))
        # the caller goes on while the desk still looks the first turn up
        for text in LATER[:later]:
            await caller.say(text)
    await bounded(session.wait_for_idle(), what="the session idle")
    assert session.current_agent is not None
    await settled_on(session, session.current_agent)

    said = [FIRST, *LATER[:later]]
    assert user_texts(session) == said
    for text in said:
        assert user_messages(session, text) == 1, (text, user_texts(session))
    # the bug: refunds gets only the first turn and answers it; the later ones, overtaken,
    # stay behind with billing, recorded as superseded by the first
    answered = [(c.instructions, c.last_user_text) for c, _ in journal.requests]
    assert answered == [(REFUNDS, said[-1])], answered
    assert spoken(session) == [f"{REFUNDS} answers: {said[-1]}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing", "exit billing", "enter refunds"]
