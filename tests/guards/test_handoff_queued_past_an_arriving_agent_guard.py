"""Guard (passes on stock 1.8.9 and on the fork): a handoff queued past an agent still on its
way in.

A tool of the front desk hands the caller to billing, built with the desk's context (it carries
the conversation on), and the app re-routes to claims as the desk leaves, before billing
started. Billing runs for a moment and leaves right after. The model answers tool results
itself (``auto_tool_reply_generation``). Stock says nothing in billing's voice: billing's
context never holds the batch that handed off. The fork gives an agent that carries the
conversation on that batch, so billing's realtime session starts with the call's output, and
the model's automatic reply to it must not play either: billing is passed over, and claims is
where the handoffs end (seed 1050 of the audio stress: billing and claims both answered the
caller's last turn).
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    JournalingAgent,
    MakeSession,
    RTGeneration,
    bounded,
    spoken,
    unanswered_calls,
)
from tests.fakes.desks import desk_realtime_model
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
CLAIMS = "You are the claims desk."
TO_BILLING = "Put me through to billing."


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.claims: JournalingAgent | None = None
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        user_text = users[-1].text_content if users else None
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


class Desk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="desk", instructions=DESK)

    @function_tool
    async def to_billing(self, ctx: RunContext) -> Agent:
        """Put the caller through to the billing desk."""
        return JournalingAgent(self.journal, name="billing", instructions=BILLING, chat_ctx=self.chat_ctx)

    async def on_exit(self) -> None:
        # the app re-routes the caller as the desk leaves: billing's handoff is under way,
        # its activity not started yet
        claims = self.journal.claims = JournalingAgent(
            self.journal, name="claims", instructions=CLAIMS, chat_ctx=self.chat_ctx
        )
        self.session.update_agent(claims)
        await super().on_exit()


@pytest.mark.parametrize("reuse", [False, True], ids=["replaced", "reused"])
async def test_an_agent_a_handoff_passes_over_does_not_answer_the_batch_it_carried(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    model = desk_realtime_model(journal.answer, reuse=reuse, auto_tool_reply_generation=True)
    session = await make_session(Desk(journal), llm=model)

    model.sessions[-1].simulate_user_turn(TO_BILLING)
    await bounded(journal.entered["claims"].wait(), what="claims' on_enter")
    claims = journal.claims
    assert claims is not None
    await settled_on(session, claims)

    assert journal.events[:4] == ["enter desk", "exit desk", "enter billing", "exit billing"], journal.events
    assert unanswered_calls(session) == []
    # the fork's defect: billing, passed over, answers the turn in its reply to the batch it
    # carried, after the handoff past it was queued
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [], journal.answers
