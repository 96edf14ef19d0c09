"""livekit/agents#3129: a server-detected turn whose reply the model completed, unplayed, as the
agent was replaced.

The caller speaks to a realtime model whose server detects the turn and answers it at once; the
application calls ``update_agent()`` right after. The model's reply was generated in full, server
side, but it is the leaving agent's and never played: the caller heard nothing. A server keeps a
response it generated in its context, read or not, so the agent taking over the (reused) session
must give the model a context without it, or the model takes the turn for answered and the caller
never gets an answer. The rule (CONTRIBUTING.md, "Spoken turns"): the turn is recorded once and
answered once, by the agent the handoff leaves current.
"""

from __future__ import annotations

import pytest
from livekit.agents import llm

from tests import fakes
from tests.fakes import JournalingAgent, MakeSession, RTGeneration, ScriptedRealtimeModel, spoken
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
SPOKEN = "It's about a refund."


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[RTGeneration] = []

    def answer(self, gen: RTGeneration) -> str:
        """Like a model: the caller's last turn is answered if the context has a reply after it."""
        self.asked.append(gen)
        said = [i for i in gen.chat_ctx.items if i.type == "message" and i.role in ("user", "assistant")]
        last_user = max((k for k, i in enumerate(said) if i.role == "user"), default=None)
        if last_user is None or any(i.role == "assistant" for i in said[last_user + 1 :]):
            return f"{gen.instructions} follows up"
        return f"{gen.instructions} answers: {said[last_user].text_content}"


def _assistant_texts(chat_ctx: llm.ChatContext) -> list[str]:
    return [i.text_content or "" for i in chat_ctx.items if i.type == "message" and i.role == "assistant"]


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_reply_completed_unplayed_as_the_agent_is_replaced_is_not_the_answer(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    model = ScriptedRealtimeModel(
        [], fallback=journal.answer, reuse=True, turn_detection=True, user_transcription=True
    )
    session = await make_session(JournalingAgent(journal, name="desk", instructions=DESK), llm=model)
    rt = model.sessions[-1]

    desk_reply = rt.simulate_user_turn(SPOKEN)
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)
    session.update_agent(billing)
    await settled_on(session, billing)

    assert model.sessions[-1] is rt, "the realtime session is handed on"
    assert desk_reply is not None and desk_reply.outcome == "completed", desk_reply
    said = [i for i in session.history.items if i.type == "message" and i.text_content == SPOKEN]
    assert len(said) == 1, f"{SPOKEN!r} is in {len(said)} user messages of the history"
    # the desk's reply was generated in full and never played: the caller heard no answer
    assert not any(t.startswith(DESK) for t in spoken(session)), spoken(session)
    # the bug: nobody answers the turn (stock drops it with the handoff; a model whose context
    # still held the desk's unplayed reply would only follow up)
    assert spoken(session) == [f"{BILLING} answers: {SPOKEN}"], [
        (g.instructions, _assistant_texts(g.chat_ctx)) for g in journal.asked
    ]
    # what the model answered from holds what the caller heard, not the desk's reply
    assert _assistant_texts(journal.asked[-1].chat_ctx) == []
