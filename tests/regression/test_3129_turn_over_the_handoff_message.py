"""livekit/agents#3129: the caller's turn interrupts the leaving agent's handoff message.

The leaving agent voices its handoff message (a tool returned ``(Billing(), "...")``), played
out on a pausable audio output (``FakeAudioOutput(mode="realtime")``), and its ``on_exit``
runs; the caller talks over it: their final transcript interrupts the message, and their
turn ends while the leaving activity drains. The turn must be recorded once and answered
once, by the arriving agent; the leaving agent answers nothing after its ``on_exit`` began.
On stock the turn ends in ``on_end_of_turn()``'s "skipping user input, speech scheduling is
paused": not answered, not even recorded.

The neighbouring cases stock gets right (a turn started over the handoff interrupting the
arriving agent's greeting, a false interruption of the handoff message) are parity guards:
``tests/guards/test_spoken_turn_across_a_handoff_guard.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakes import (
    Caller,
    FakeAudioOutput,
    FakeTTS,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    tool_call,
    unanswered_calls,
)
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk, DeskJournal, speaking
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

# long enough to be still playing when the caller's turn ends: 20 s at 2 ms a character
VOICED = "One moment, I'm transferring you to billing. " + "Please hold. " * 770
SECONDS_PER_CHAR = 0.002


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str | None, str | None]] = []


def answering(journal: Journal) -> Any:
    def answer(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.tool_choice == "none":
            return Reply(VOICED)
        journal.asked.append((call.instructions, call.last_user_text))
        if call.instructions == DESK and call.last_user_text == TO_BILLING:
            return Reply(tool_calls=[tool_call("to_billing")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    return answer


@BUG
async def test_a_turn_interrupting_the_handoff_message_is_answered_once_by_the_arriving_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    caller = Caller()
    audio_out = FakeAudioOutput(mode="realtime")
    session = await make_session(
        Desk(journal),
        llm=ScriptedLLM([], fallback=answering(journal)),
        tts=FakeTTS(seconds_per_char=SECONDS_PER_CHAR),
        audio_output=audio_out,
        **caller.session_kwargs(),
    )
    caller.attach(session)

    voicing = asyncio.ensure_future(speaking(session))
    await caller.say(TO_BILLING)
    await bounded(voicing, what="the desk voicing its handoff message")
    assert journal.billing is not None

    # the caller's turn, over the handoff message: its final transcript interrupts it
    await caller.say(SPOKEN)
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await settled_on(session, journal.billing)

    # the bug: the turn is skipped, not even recorded
    assert user_messages(session, SPOKEN) == 1
    assert [i for i, said in journal.asked if said == SPOKEN] == [BILLING]
    assert spoken(session) == [VOICED, f"{BILLING} answers: {SPOKEN}"]
    assert [s.interrupted for s in audio_out.segments] == [True, False]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    assert unanswered_calls(session) == []
