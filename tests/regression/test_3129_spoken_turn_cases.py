"""livekit/agents#3129: spoken-turn cases around a handoff that had no test yet, and that stock
gets wrong.

* **The caller's audio while the arriving agent's activity starts.** Its toolsets (an MCP
  server connecting) are set up before its activity runs, but the session already forwards
  the caller's audio to it: on stock ``AgentActivity.push_audio()`` drops every frame until
  ``start()`` set ``_started``, so the STT reused across the handoff, or the realtime session,
  never hears what the caller said then.
* **A preemptive generation started by the leaving agent.** The caller's final transcript
  starts one on the agent that is current (its LLM is asked at once); the handoff begins
  while that agent's ``on_user_turn_completed`` runs. The preemptive reply must never be
  spoken; the turn is the arriving agent's to answer. Stock drops the turn ("skipping reply
  to user input, speech scheduling is paused"): not answered, not even recorded.

The caller's audio goes through the session's own audio input, VAD and STT
(``tests.fakes.speech``), or the scripted realtime model's session.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import (
    Caller,
    FakeAudioInput,
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import (
    MARK,
    SPOKEN,
    TO_BILLING,
    Desk,
    DeskJournal,
    Pondering,
    SlowSetup,
    answer,
    billing_runs,
    stt_heard_a_mark,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
WHILE_SETTING_UP = 25  # frames of 20 ms: half a second of the caller talking


# -- the caller's audio while the arriving agent's toolsets set up --


@BUG
async def test_the_callers_audio_while_the_arriving_agent_starts_reaches_the_stt(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    setup = Gate("billing's toolset setup")
    caller = Caller()
    fake = ScriptedLLM([], fallback=answer)
    session = await make_session(
        Desk(journal, billing_tools=[SlowSetup(setup)]), llm=fake, **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(TO_BILLING)
    async with setup.held():
        # billing's activity is the session's now, and starting: the caller talks on
        caller.audio.push(WHILE_SETTING_UP)
        await caller.audio.forwarded()
    await billing_runs(session, journal)
    stream = await stt_heard_a_mark(caller)  # the one STT stream, reused across the handoff

    # the bug: the frames of the setup never reach the STT; what came after does
    assert caller.stt.streams == [stream]
    assert stream.frames == caller.audio.frames_pushed, (
        f"the STT heard {stream.frames} of the {caller.audio.frames_pushed} frames the caller said"
    )
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_the_callers_audio_while_the_arriving_agent_starts_reaches_the_realtime_model(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = DeskJournal()
    setup = Gate("billing's toolset setup")

    def reply(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers"

    model = ScriptedRealtimeModel(fallback=reply, reuse=reuse)
    audio = FakeAudioInput()
    session = await make_session(
        Desk(journal, billing_tools=[SlowSetup(setup)]), llm=model, audio_input=audio
    )

    audio.push(3)
    await audio.forwarded()
    model.push(Reply(tool_calls=[tool_call("to_billing")]))
    handoff = asyncio.ensure_future(session.run(user_input=TO_BILLING))
    try:
        await setup.reached()
        audio.push(WHILE_SETTING_UP)
        await audio.forwarded()
    finally:
        setup.open()
    await bounded(handoff, what="session.run() handing off")
    await billing_runs(session, journal)

    audio.push(seconds=MARK)
    await audio.forwarded()  # push_audio() hands each frame to the realtime session at once

    heard = [e.args["duration"] for e in model.calls("push_audio")]
    assert heard[-1:] == [MARK]
    # the bug: the frames of the setup never reach the realtime session
    assert len(heard) == audio.frames_pushed, (
        f"the model heard {len(heard)} of the {audio.frames_pushed} frames the caller said"
    )
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


# -- a preemptive generation started by the leaving agent --


@BUG
async def test_a_preemptive_generation_of_the_leaving_agent_is_never_spoken(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    hook = Gate("a's on_user_turn_completed")
    a = Pondering(journal, hook, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    caller = Caller()
    fake = ScriptedLLM([], fallback=answer)
    session = await make_session(
        a, llm=fake, **caller.session_kwargs(turn_handling={"preemptive_generation": {"enabled": True}})
    )
    caller.attach(session)

    await caller.say(SPOKEN)
    async with hook.held():
        # the final transcript started a's preemptive reply: its LLM was asked already
        assert [(c.instructions, c.last_user_text) for c in fake.calls] == [(AGENT_A, SPOKEN)]
        session.update_agent(b)
    await bounded(journal.entered["b"].wait(), what="b's on_enter")
    await settled_on(session, b)

    # the bug: the turn is dropped, not even recorded
    assert user_messages(session, SPOKEN) == 1
    assert f"{AGENT_A} answers: {SPOKEN}" not in spoken(session)
    assert spoken(session) == [f"{AGENT_B} answers: {SPOKEN}"]
    assert [c.instructions for c in fake.calls if c.last_user_text == SPOKEN] == [AGENT_A, AGENT_B]
    assert journal.events == ["enter a", "exit a", "enter b"]
