"""livekit/agents#3129: a handoff queued past an agent that is still on its way in.

``update_agent()`` is called again before the agent of the handoff in progress started: that
agent runs for a moment (its activity starts, its ``on_enter`` runs) and leaves right after. The
rule (CONTRIBUTING.md, "Spoken turns"): a turn that ends during a handoff is answered by the
agent the handoff ends with, once, and an agent that is passed over starts nothing of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import fakes
from tests.fakes import (
    JournalingAgent,
    MakeSession,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
)
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
CLAIMS = "You are the claims desk."
SPOKEN = "Actually, it's about a claim."


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        user_text = users[-1].text_content if users else None
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


class Speaking(JournalingAgent):
    """The caller speaks ``says`` as this agent's on_enter runs: its own realtime session hears
    the turn, and the model answers it at once."""

    def __init__(self, journal: Journal, *, says: str | None = None, **kwargs: Any) -> None:
        super().__init__(journal, **kwargs)
        self.says = says

    async def on_enter(self) -> None:
        await super().on_enter()
        if self.says is not None:
            assert self._activity is not None
            rt = self._activity.realtime_llm_session
            assert isinstance(rt, fakes.ScriptedRealtimeSession)
            rt.simulate_user_turn(self.says)


def _model(journal: Journal, *, reuse: bool, **kwargs: Any) -> ScriptedRealtimeModel:
    return ScriptedRealtimeModel(
        fallback=journal.answer, reuse=reuse, turn_detection=True, user_transcription=True, **kwargs
    )


def _answers_to(session: Any, text: str) -> list[str]:
    return [t for t in spoken(session) if t.endswith(f"answers: {text}")]


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reuse", [False, True], ids=["replaced", "reused"])
async def test_a_turn_heard_by_an_agent_a_handoff_passes_over_is_the_next_ones(
    make_session: MakeSession, reuse: bool
) -> None:
    """The app hands the caller to billing, then at once to claims. Billing starts and leaves
    right after; the caller's turn ends as billing's on_enter runs, on billing's realtime
    session. Claims, where the handoffs end, answers it; billing says nothing."""
    journal = Journal()
    model = _model(journal, reuse=reuse)
    session = await make_session(JournalingAgent(journal, name="desk", instructions=DESK), llm=model)
    billing = Speaking(journal, name="billing", instructions=BILLING, says=SPOKEN)
    claims = JournalingAgent(journal, name="claims", instructions=CLAIMS)

    session.update_agent(billing)
    session.update_agent(claims)
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await settled_on(session, claims)

    said = [i for i in session.history.items if i.type == "message" and i.text_content == SPOKEN]
    assert len(said) == 1, f"the turn is in {len(said)} user messages of the history"
    # the bug: billing, which the second handoff passes over, answers the turn as it leaves
    assert _answers_to(session, SPOKEN) == [f"{CLAIMS} answers: {SPOKEN}"], journal.answers
