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
from typing import Any

import pytest
from livekit.agents import Agent, function_tool, llm

from tests import fakes
from tests.fakes import (
    Caller,
    FakeAudioInput,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

DESK = "You are the front desk."
BILLING = "You are the billing desk."
AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
TRANSFERRING = "Transferring you"
TO_BILLING = "Put me through to billing."
SPOKEN = "Actually, it's about a refund."
WHILE_SETTING_UP = 25  # frames of 20 ms: half a second of the caller talking
MARK = 0.01  # seconds: a shorter frame, the last the caller says, once billing runs
MARK_SAMPLES = 160


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.setup_gate: Gate | None = None
        self.billing: Agent | None = None


class SlowSetup(llm.Toolset):
    """A toolset whose setup holds the arriving activity's start, like an MCP server connecting."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(id="slow_setup")
        self.gate = gate

    async def setup(self) -> SlowSetup:
        await self.gate.wait()
        return self


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def to_billing(self) -> tuple[Agent, str]:
        """Put the caller through to the billing desk."""
        gate = self.journal.setup_gate
        self.journal.billing = JournalingAgent(
            self.journal,
            name="billing",
            instructions=BILLING,
            tools=[SlowSetup(gate)] if gate is not None else [],
        )
        return self.journal.billing, TRANSFERRING


def answer(call: LLMCall) -> Reply:
    if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
        return Reply(tool_calls=[tool_call("to_billing")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


# -- the caller's audio while the arriving agent's toolsets set up --


@BUG
async def test_the_callers_audio_while_the_arriving_agent_starts_reaches_the_stt(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    setup = journal.setup_gate = Gate("billing's toolset setup")
    caller = Caller()
    fake = ScriptedLLM([], fallback=answer)
    session = await make_session(
        Desk(journal, name="desk", instructions=DESK), llm=fake, **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(TO_BILLING)
    await setup.reached()
    try:
        # billing's activity is the session's now, and starting: the caller talks on
        caller.audio.push(WHILE_SETTING_UP)
        await caller.audio.forwarded()
    finally:
        setup.open()
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    caller.audio.push(seconds=MARK)
    await caller.audio.forwarded()
    stream = caller.stt.current  # the one STT stream, reused across the handoff
    await stream.last_frame_was(MARK_SAMPLES)

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
    journal = Journal()
    setup = journal.setup_gate = Gate("billing's toolset setup")

    def reply(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers"

    model = ScriptedRealtimeModel(fallback=reply, reuse=reuse)
    audio = FakeAudioInput()
    session = await make_session(Desk(journal, name="desk", instructions=DESK), llm=model, audio_input=audio)

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
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

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


class Pondering(JournalingAgent):
    """Looks the caller's turn up (RAG) in its on_user_turn_completed; the test holds it."""

    def __init__(self, journal: Journal, hook: Gate, **kwargs: Any) -> None:
        super().__init__(journal, **kwargs)
        self.hook = hook

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        await self.hook.wait()


@BUG
async def test_a_preemptive_generation_of_the_leaving_agent_is_never_spoken(
    make_session: MakeSession,
) -> None:
    journal = Journal()
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
    await hook.reached()
    try:
        # the final transcript started a's preemptive reply: its LLM was asked already
        assert [(c.instructions, c.last_user_text) for c in fake.calls] == [(AGENT_A, SPOKEN)]
        session.update_agent(b)
    finally:
        hook.open()
    await bounded(journal.entered["b"].wait(), what="b's on_enter")
    await settled_on(session, b)

    # the bug: the turn is dropped, not even recorded
    assert user_messages(session, SPOKEN) == 1
    assert f"{AGENT_A} answers: {SPOKEN}" not in spoken(session)
    assert spoken(session) == [f"{AGENT_B} answers: {SPOKEN}"]
    assert [c.instructions for c in fake.calls if c.last_user_text == SPOKEN] == [AGENT_A, AGENT_B]
    assert journal.events == ["enter a", "exit a", "enter b"]
