"""Guards: a noise the realtime model's server hears (pass on stock 1.8.9 and on the fork).

The model's server detects the caller's turns. A noise (a cough, a door) is a start of speech
and its end, with no transcript and no reply: servers do not answer every start of speech.
Its speech start interrupts what is queued or playing then, as any
(``AgentActivity._on_input_speech_started()``). Nothing else: it is no turn of the caller's,
so a reply asked for after it, such as the reply to a tool's output once an inline AgentTask
hands back, is not superseded by it and plays. The fork takes a later turn of the caller's for
a reason to drop a reply asked for after it (a turn handed over across a handoff, or a tool
reply); these pin what a noise does to either with no handoff.
"""

from __future__ import annotations

from typing import Any

from livekit.agents import llm

from tests import fakes
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
    tool_call,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.guards.test_realtime_tool_reply_after_a_turn_during_an_inline_task_guard import (
    DESK,
    FORM_PLEASE,
    Desk,
)

FIRST = "I was charged twice."


def _answer(gen: RTGeneration) -> str:
    users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
    return f"answers: {users[-1].text_content if users else None}"


def _noise(rt: ScriptedRealtimeSession) -> None:
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))


async def test_a_noise_interrupts_the_reply_queued_as_it_starts(make_session: MakeSession) -> None:
    first_answer = Gate("the model's answer to the first turn")
    model = ScriptedRealtimeModel(
        [Reply(f"answers: {FIRST}", hold=first_answer)],
        fallback=_answer,
        turn_detection=True,
        user_transcription=True,
    )
    desk = JournalingAgent(fakes.Journal(), name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]
    replies: list[Any] = []
    session.on("speech_created", lambda ev: replies.append(ev.speech_handle))

    first = rt.simulate_user_turn(FIRST)
    assert first is not None
    try:
        # the model still works on its answer when the server hears the noise
        await first_answer.reached()
        _noise(rt)
        assert len(replies) == 1 and replies[0].interrupted
    finally:
        first_answer.open()
    await bounded(first.done, what="the first answer's streams")
    await settled_on(session, desk)

    assert user_messages(session, FIRST) == 1
    # the caller said nothing after: nothing answers the turn (the server replies to no noise)
    assert spoken(session) == []


async def test_a_noise_as_an_inline_task_hands_back_does_not_drop_the_tool_reply(
    make_session: MakeSession,
) -> None:
    """The desk's tool awaits the form task (realtime session reused, no automatic tool
    replies); the form completes and the server hears a noise before the desk asked its model
    for the reply to the tool's output. The speech that called the tool held its interruptions
    while the task ran: the noise cuts nothing, and the reply to the output is asked for and
    plays."""
    journal = fakes.Journal()
    gate = Gate("the form completing")
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("fill_form")])],
        fallback=_answer,
        reuse=True,
        turn_detection=True,
        user_transcription=True,
    )
    desk = Desk(journal, gate)
    session = await make_session(desk, llm=model)

    model.sessions[-1].simulate_user_turn(FORM_PLEASE)
    await gate.reached()
    gate.open()
    await bounded(journal.exited["form"].wait(), what="the form's on_exit")
    _noise(model.sessions[-1])
    await bounded(desk.tool_speech.wait_for_playout(), what="the desk's reply to the form's result")
    await settled_on(session, desk)

    assert user_messages(session, FORM_PLEASE) == 1
    # the tool reply, asked for with the form's result (the fork dropped it for the noise)
    assert spoken(session) == [f"answers: {FORM_PLEASE}"]
