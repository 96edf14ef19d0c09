"""Guards: what the caller starting to speak does to a realtime model's replies (pass on stock
1.8.9 and on the fork).

The model's server detects the caller's turns. Its speech start interrupts the replies queued or
playing then (``AgentActivity._on_input_speech_started()``): the caller went on, the model
answers the next turn with the earlier one in its context. A reply asked for while the caller
speaks is no such reply: it waits for the caller's silence and plays. The fork treats the reply
to a turn handed over across a handoff as the first kind when the caller already speaks again
as it is asked for (tests/regression/test_3129_realtime_turn_superseded_across_a_handoff.py);
these guard the two behaviours it copies and must leave alone, with no handoff.
"""

from __future__ import annotations

from typing import Any

from livekit.agents import llm, utils

from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    spoken,
)
from tests.fakes.agents import Journal
from tests.fakes.history import user_messages

DESK = "You are the front desk."
FIRST = "I was charged twice."
SECOND = "Actually, it's about a refund."
HOLD_ON = "Tell the caller you are looking it up."


class Answers:
    def __init__(self) -> None:
        self.contexts: list[list[str]] = []
        self.first: Gate | None = None

    def __call__(self, gen: RTGeneration) -> Reply:
        if gen.extra_instructions is not None:
            return Reply(f"instructed: {gen.extra_instructions}")
        users = [i.text_content or "" for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        self.contexts.append(users)
        return Reply(f"answers: {users[-1]}", hold=self.first if users[-1] == FIRST else None)


def _model(answers: Answers) -> ScriptedRealtimeModel:
    return ScriptedRealtimeModel(fallback=answers, turn_detection=True, user_transcription=True)


def _rest_of_the_turn(rt: ScriptedRealtimeSession, text: str) -> RTGeneration:
    """The caller, already speaking, finishes ``text``: end of speech, transcript, the model's reply."""
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=text, id=item_id)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=text, is_final=True),
    )
    return rt.emit_generation()


async def test_the_caller_starting_again_interrupts_the_unplayed_reply_and_the_next_turn_is_answered(
    make_session: MakeSession,
) -> None:
    answers = Answers()
    answers.first = Gate("the model's answer to the first turn")
    model = _model(answers)
    session = await make_session(JournalingAgent(Journal(), name="desk", instructions=DESK), llm=model)
    rt = model.sessions[-1]
    replies: list[Any] = []
    session.on("speech_created", lambda ev: replies.append(ev.speech_handle))

    first = rt.simulate_user_turn(FIRST)
    assert first is not None
    try:
        # the model still works on the answer when the caller starts speaking again
        await answers.first.reached()
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        assert len(replies) == 1 and replies[0].interrupted
        await bounded(replies[0].wait_for_playout(), what="the interrupted reply")
    finally:
        answers.first.open()
    await bounded(first.done, what="the first answer's streams")
    second = _rest_of_the_turn(rt, SECOND)
    await bounded(session.wait_for_idle(), what="the session settling")
    await bounded(second.done, what="the second answer's streams")

    assert user_messages(session, FIRST) == 1
    assert user_messages(session, SECOND) == 1
    assert spoken(session) == [f"answers: {SECOND}"]
    assert answers.contexts[-1] == [FIRST, SECOND]


async def test_a_reply_asked_for_while_the_caller_speaks_waits_and_plays(make_session: MakeSession) -> None:
    answers = Answers()
    model = _model(answers)
    session = await make_session(JournalingAgent(Journal(), name="desk", instructions=DESK), llm=model)
    rt = model.sessions[-1]

    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    handle = session.generate_reply(instructions=HOLD_ON)
    assert not handle.interrupted
    turn = _rest_of_the_turn(rt, FIRST)
    await bounded(handle.wait_for_playout(), what="the reply asked for while the caller spoke")
    await bounded(session.wait_for_idle(), what="the session settling")
    await bounded(turn.done, what="the answer's streams")

    assert not handle.interrupted
    assert user_messages(session, FIRST) == 1
    assert sorted(spoken(session)) == sorted([f"instructed: {HOLD_ON}", f"answers: {FIRST}"])
