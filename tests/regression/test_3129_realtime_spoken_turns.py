"""A turn the realtime model's server detects during a handoff is answered by the agent taking
over (livekit/agents#3129, "Forward user input to next activity").

With server-side turn detection, the caller's turn reaches the framework as the model's
events: speech started, the transcript, and a reply the server generates on its own. While
the leaving agent is in its ``on_exit()`` (``update_agent()`` blocked its new turns) that
reply goes to ``AgentActivity._on_generation_created()``'s "skipping new realtime
generation" branch on stock: the transcript is in the history, but nobody answers it.

The fork has the agent the handoff ends with answer it, once, after its ``on_enter``
started, and keeps the message in the history once; with the realtime session handed on
(reused) and replaced, and with the transcript before the model's reply, or after it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import (
    GEMINI_CAPABILITIES,
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    late_calls,
    spoken,
    tool_call,
)
from tests.fakes.desks import BILLING, SPOKEN, TO_BILLING, Desk, DeskJournal
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None, tuple[str, ...]]] = []

    def answer(self, gen: RTGeneration) -> str:
        user_text = gen.last_user_text
        self.answers.append((gen.instructions, user_text, tuple(self.events)))
        return f"{gen.instructions} answers: {user_text}"


CAPABILITIES: dict[str, dict[str, Any]] = {
    "reused": {"reuse": True, "turn_detection": True, "user_transcription": True},
    "replaced": {"reuse": False, "turn_detection": True, "user_transcription": True},
    # automatic tool replies: the model's own reply to the handoff's tool output is no user turn
    "gemini": GEMINI_CAPABILITIES,
}


@BUG
@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
@pytest.mark.parametrize("caps", list(CAPABILITIES))
async def test_a_server_detected_turn_during_on_exit_is_answered_by_the_arriving_agent(
    make_session: MakeSession, caps: str, transcript_first: bool
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("to_billing")])], fallback=journal.answer, **CAPABILITIES[caps]
    )
    session = await make_session(Desk(journal, message=None), llm=model)

    model.sessions[-1].simulate_user_turn(TO_BILLING)
    async with gate.held():
        # the caller goes on talking while the desk leaves: the server hears a new turn
        model.sessions[-1].simulate_user_turn(SPOKEN, transcript_first=transcript_first)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1
    answers = [(i, events) for i, text, events in journal.answers if text == SPOKEN]
    # the bug: nobody answers it
    assert [i for i, _ in answers] == [BILLING]
    assert "enter billing" in answers[0][1]
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    assert not late_calls(model)
