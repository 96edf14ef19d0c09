"""The caller talks over a handoff, and the agents' speech plays out on a pausable audio output
(``FakeAudioOutput(mode="realtime")``): what the caller says interrupts, or only pauses, what
an agent was saying. On stock and on the fork alike (a real turn interrupting the leaving agent's
handoff message is stock's bug, ``tests/regression/test_3129_turn_over_the_handoff_message.py``):

* **A real turn interrupting the arriving agent's greeting**, a turn the caller started while
  the leaving agent was still saying its handoff message: recorded once, answered once, by
  the arriving agent.
* **A false interruption of the handoff message.** The caller makes a short noise (speech for
  the VAD, no transcript) while the leaving agent voices its handoff message, after its
  ``on_exit`` began: the message pauses, and resumes when the false-interruption timeout runs
  out. That resume is the leaving agent *finishing what it was saying* (the same speech,
  created before its ``on_exit``), which the rule allows. What it must not do: the handoff
  cannot end under a paused message (the drain waits for the speech, so the timer fires on
  the leaving activity, before the arriving agent runs, and never after: the leaving
  activity's close cancels it); nothing of the leaving agent resumes, restarts or fires
  ``agent_false_interruption`` once the arriving agent entered; and the arriving agent's
  greeting plays whole, neither paused nor interrupted.

Why an earlier attempt at the last case never saw ``agent_false_interruption``: the session
pauses the agent's speech on the VAD's *inference* events (``on_vad_inference_done`` ->
``_interrupt_by_audio_activity()``, once the speech lasts ``interruption["min_duration"]``),
not on its start of speech while the agent is speaking; the scripted VAD sent none, so the
speech never paused and no timer ran. ``ScriptedVAD.inference_done()`` sends one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import AgentSession

from tests.fakes import (
    Caller,
    FakeAudioOutput,
    FakeTTS,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
    wait_for_event,
)
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk, DeskJournal, speaking
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

INTERIM = "Actually"
GREET = "Greet the caller."
# long enough to be still playing whatever the test does meanwhile: 20 s at 2 ms a character
VOICED = "One moment, I'm transferring you to billing. " + "Please hold. " * 770
GREETING = "Billing here, how can I help?"
SHORT = "One moment."
SECONDS_PER_CHAR = 0.002
FALSE_INTERRUPTION_TIMEOUT = 0.05  # seconds the caller stays silent before the agent resumes
NOISE = 0.6  # seconds of speech the VAD hears: past interruption["min_duration"] (0.5)


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.billing_cls = Billing
        self.greets = False
        self.asked: list[tuple[str | None, str | None, tuple[str, ...]]] = []


class Billing(JournalingAgent):
    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        if self.journal.greets:
            self.session.generate_reply(instructions=GREET)


def answering(
    journal: Journal, *, voiced: Gate | None = None, message: str = VOICED, greeting: str = GREETING
) -> Any:
    def answer(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        if last.type == "message" and last.role == "system" and last.text_content == GREET:
            return Reply(greeting)
        journal.asked.append((call.instructions, call.last_user_text, tuple(journal.events)))
        if call.instructions == DESK and call.tool_choice == "none":
            return Reply(message, first_token_delay=voiced.wait if voiced is not None else None)
        if call.instructions == DESK and call.last_user_text == TO_BILLING:
            return Reply(tool_calls=[tool_call("to_billing")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    return answer


def answers(journal: Journal, text: str) -> list[str | None]:
    """Who answered the user's ``text`` (the handoff message, ``tool_choice="none"``, is not)."""
    return [i for i, said, _ in journal.asked if said == text and not (i == DESK and said == TO_BILLING)]


async def spoken_session(
    make_session: MakeSession, journal: Journal, answer: Any, **turn_handling: Any
) -> tuple[AgentSession[Any], Caller, FakeAudioOutput]:
    caller = Caller()
    audio_out = FakeAudioOutput(mode="realtime")
    session = await make_session(
        Desk(journal),
        llm=ScriptedLLM([], fallback=answer),
        tts=FakeTTS(seconds_per_char=SECONDS_PER_CHAR),
        audio_output=audio_out,
        **caller.session_kwargs(turn_handling=turn_handling),
    )
    caller.attach(session)
    return session, caller, audio_out


def said(session: AgentSession[Any]) -> list[tuple[str, bool]]:
    """(text, interrupted) of each assistant message in the history."""
    return [
        (i.text_content or "", i.interrupted)
        for i in session.history.items
        if i.type == "message" and i.role == "assistant"
    ]


async def test_a_turn_interrupting_the_arriving_agents_greeting_is_answered_once_by_it(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    journal.greets = True
    leaving = journal.exit_gates["desk"] = Gate("the desk's on_exit")
    # a short handoff message, and a greeting long enough to be still playing when the
    # caller's turn ends
    session, caller, audio_out = await spoken_session(
        make_session, journal, answering(journal, message=SHORT, greeting=VOICED)
    )

    await caller.say(TO_BILLING)
    async with leaving.held():
        # the desk said its handoff message (an agent waits for the caller's silence to start
        # speaking, so the caller talking before would hold it, and the handoff with it)
        await bounded(audio_out.wait_for_segments(1), what="the handoff message played")
        # the caller starts talking to the desk, which is leaving (its STT hears them)
        await caller.start_speaking()
        await caller.interim(INTERIM)
    assert journal.billing is not None
    greeting = asyncio.ensure_future(
        wait_for_event(
            session,
            "agent_state_changed",
            lambda ev: ev.new_state == "speaking" and session.current_agent is journal.billing,
        )
    )
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await bounded(greeting, what="billing greeting the caller")

    # the turn ends on billing, over its greeting: the final transcript interrupts it
    await caller.start_speaking()  # billing's VAD hears the caller still talking
    await caller.stop_speaking()
    await caller.final(SPOKEN)
    caller.stt.end_of_speech()
    await caller.turn_ended()
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    assert answers(journal, SPOKEN) == [BILLING]
    assert said(session) == [(SHORT, False), (VOICED, True), (f"{BILLING} answers: {SPOKEN}", False)]
    assert caller.stt.streams == [caller.stt.current]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


async def test_a_false_interruption_of_the_handoff_message_resumes_it_before_the_arriving_agent_runs(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    journal.greets = True
    leaving = journal.exit_gates["desk"] = Gate("the desk's on_exit")
    session, caller, audio_out = await spoken_session(
        make_session,
        journal,
        answering(journal),
        interruption={
            "false_interruption_timeout": FALSE_INTERRUPTION_TIMEOUT,
            "resume_false_interruption": True,
        },
    )
    false_interruptions: list[tuple[bool, tuple[str, ...]]] = []
    session.on(
        "agent_false_interruption",
        lambda ev: false_interruptions.append((ev.resumed, tuple(journal.events))),
    )
    states: list[tuple[str, tuple[str, ...]]] = []
    session.on("agent_state_changed", lambda ev: states.append((ev.new_state, tuple(journal.events))))

    voicing = asyncio.ensure_future(speaking(session))
    await caller.say(TO_BILLING)
    await bounded(voicing, what="the desk voicing its handoff message")
    await leaving.reached()  # the desk's on_exit began, its handoff message still plays
    try:
        # a short noise: speech for the VAD, long enough to pause the desk, no transcript
        paused = asyncio.ensure_future(
            wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "listening")
        )
        await caller.start_speaking()
        caller.vad.inference_done(NOISE)
        await bounded(paused, what="the handoff message paused")
        assert audio_out.paused and audio_out.playing
        assert journal.events == ["enter desk", "exit desk"]
    finally:
        leaving.open()
    # the rest of the message plays at once once it resumes
    audio_out.speed = 1000.0
    resumed = asyncio.ensure_future(wait_for_event(session, "agent_false_interruption"))
    await caller.stop_speaking()  # the caller is silent again: the timeout runs
    await bounded(resumed, what="the false interruption's resume")
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    # the desk finished what it was saying, after its on_exit began, before billing ran
    assert false_interruptions == [(True, ("enter desk", "exit desk"))]
    assert said(session) == [(VOICED, False), (GREETING, False)]
    # nothing of the desk after billing entered: its greeting plays whole, never paused
    assert [s.interrupted for s in audio_out.segments] == [False, False]
    assert [s.position == s.duration for s in audio_out.segments] == [True, True]
    assert not audio_out.paused
    assert [s for s, events in states if "enter billing" in events] == ["thinking", "speaking", "listening"]
    assert user_messages(session, TO_BILLING) == 1
    assert len([i for i in session.history.items if i.type == "message" and i.role == "user"]) == 1
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
