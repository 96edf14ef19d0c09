"""A caller who barges in on a realtime reply that has not played yet loses the answer to what
they say next.

The realtime model's server detects the caller's turns. It creates its reply to a turn as soon as
the turn ends; the caller speaks again at once, and that speech interrupts the reply before any of
it played. The server answers the new turn just as quickly, with a new response. The interrupted
reply's speech task only then gets to run: ``AgentActivity._realtime_generation_task_impl()``
sees its speech interrupted while its streams are still open and calls
``RealtimeSession.interrupt()`` to cancel "its" response. That cancel is session-wide: it cancels
whatever response is active, the answer to the new turn. The caller's second turn is in the
history and never answered.
"""

from __future__ import annotations

import pytest

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
)
from tests.fakes.agents import Journal, JournalingAgent

FIRST = "I need help with my invoice."
SECOND = "No wait, it's about my refund."


@pytest.mark.upstream_bug("not-yet: interrupting an unplayed realtime reply cancels the model's next one")
@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
async def test_a_barge_in_on_an_unplayed_reply_keeps_the_answer_to_the_next_turn(
    make_session: MakeSession, transcript_first: bool
) -> None:
    streaming = Gate("the first answer's first words")

    def answer(gen: RTGeneration) -> Reply:
        users = [m.text_content for m in gen.chat_ctx.messages() if m.role == "user"]
        return Reply(f"answering: {users[-1]}", hold=streaming if users[-1] == FIRST else None)

    model = ScriptedRealtimeModel(fallback=answer, turn_detection=True, user_transcription=True)
    session = await make_session(JournalingAgent(Journal(), name="desk", instructions="desk"), llm=model)
    rt = model.sessions[-1]

    first = rt.simulate_user_turn(FIRST, transcript_first=transcript_first)
    # the first answer is on its way out, not a word of it played yet: the caller speaks again,
    # and the server answers that at once
    await streaming.reached()
    second = rt.simulate_user_turn(SECOND, transcript_first=transcript_first)
    streaming.open()
    await bounded(session.wait_for_idle(), what="the session settling")
    await bounded(second.done, what="the second answer's streams")

    users = [m.text_content for m in session.history.messages() if m.role == "user"]
    assert users.count(SECOND) == 1
    assert first.interrupt_requested, "the barge-in interrupted the first answer"
    # the bug: the first answer's interruption cancels the second one on the server
    assert not second.interrupt_requested, "the first reply's interruption cancelled the next answer"
    assert spoken(session) == [f"answering: {SECOND}"]
