"""livekit/agents#3129: the caller's audio while an inline ``AgentTask`` hands back.

An agent awaits an inline task (in a tool, or in its ``on_enter``); once the task completes,
the session closes the task's activity and resumes the agent's. The task's activity drains
(its ``on_exit``), hands its STT stream, or its realtime session, on to the agent it returns
to (``AgentActivity._detach_reusable_resources()``) and closes (``aclose()``: its own
toolsets, an MCP server disconnecting, which can take a while); then the agent's activity
resumes (``AgentActivity.resume()``: its realtime session updated, or a new one started).
The caller talks on all along. On stock, what they say while the task's activity closes
reaches only its VAD, or a realtime session it closes: the agent it returns to never hears
it. While the agent's activity resumes, its VAD and STT are the ones it closed when it paused
(a pipeline's resume awaits nothing, so only a realtime session's update leaves such a
window; the frames then reach the realtime session before it got the agent's instructions).

The caller's audio goes through the session's own audio input (``tests.fakes.speech``); each
stretch of it is told by its frames' length, so the test checks that the STT stream the
session reuses throughout, or the realtime session the agent resumes on, heard every frame,
once, in the order it was said.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool

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
    ScriptedRealtimeSession,
    bounded,
    tool_call,
)
from tests.fakes.desks import SlowClose
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

DESK = "You are the front desk."
FORM = "You collect the form."
OPEN_FORM = "I want to fill in the form."
FILLED = "form filled"
SAMPLE_RATE = 16000
DURING_TASK = 0.02  # seconds a frame: what the caller says to the task (a default frame)
WHILE_CLOSING = 0.03  # ... while the task's activity closes
WHILE_RESUMING = 0.04  # ... while the desk's activity resumes (its realtime session updated)
MARK = 0.01  # ... the last frame, once the desk runs again
FRAMES = 10  # of each stretch


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.closing = Gate("the form's toolset closing")
        self.handed_back = asyncio.Event()

    def got(self, result: Any) -> None:
        # the task's await returns once the desk's activity resumed
        self.results.append(result)
        self.handed_back.set()


class FormTask(fakes.JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM, tools=[SlowClose(journal.closing)])


class Desk(JournalingAgent):
    """Awaits the form in a tool."""

    journal: Journal

    @function_tool
    async def fill_form(self) -> str:
        """Collect the caller's form."""
        result = await FormTask(self.journal)
        self.journal.got(result)
        return result


class EnteringDesk(JournalingAgent):
    """Awaits the form as it enters."""

    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        self.journal.got(await FormTask(self.journal))


ENTRIES = ["tool", "on_enter"]


def the_desk(journal: Journal, entry: str) -> JournalingAgent:
    desk_cls = Desk if entry == "tool" else EnteringDesk
    return desk_cls(journal, name="desk", instructions=DESK)


def seconds(samples: list[int]) -> list[float]:
    return [n / SAMPLE_RATE for n in samples]


# -- pipeline: the STT stream reused across the task and back --


def answer(call: LLMCall) -> Reply:
    if call.instructions == DESK and call.last_user_text == OPEN_FORM and call.tool_choice != "none":
        return Reply(tool_calls=[tool_call("fill_form")])
    return Reply(f"{call.instructions} answers")


@BUG
@pytest.mark.parametrize("entry", ENTRIES)
async def test_the_callers_audio_while_an_inline_task_returns_reaches_the_stt(
    make_session: MakeSession, entry: str
) -> None:
    journal = Journal()
    caller = Caller()
    session = await make_session(
        the_desk(journal, entry), llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs()
    )
    caller.attach(session)

    if entry == "tool":
        await caller.say(OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)
    said = caller.audio.frames_pushed  # the turn that opened the form, if any
    caller.audio.push(FRAMES, seconds=DURING_TASK)
    await caller.audio.forwarded()

    task.complete(FILLED)
    async with journal.closing.held():
        # the form drained (on_exit ran, its STT stream was handed on) and closes: the caller
        # talks on
        assert journal.events == ["enter desk", "enter form", "exit form"]
        caller.audio.push(FRAMES, seconds=WHILE_CLOSING)
        await caller.audio.forwarded()
    await bounded(journal.handed_back.wait(), what="the desk resuming with the form's result")

    caller.audio.push(seconds=MARK)
    await caller.audio.forwarded()
    stream = caller.stt.current  # the one STT stream, reused across the task and back
    await stream.last_frame_was(int(MARK * SAMPLE_RATE))

    assert caller.stt.streams == [stream]
    heard = seconds(stream.sizes[said:])
    # the bug: the frames said while the form closes never reach the STT
    assert heard == [DURING_TASK] * FRAMES + [WHILE_CLOSING] * FRAMES + [MARK], (
        f"the STT heard {heard.count(WHILE_CLOSING)} of the {FRAMES} frames said while the form closed"
    )
    # and the desk's VAD, which it runs anew as it resumes, hears them too
    assert caller.vad.current.frames == FRAMES + 1
    assert journal.results == [FILLED]
    assert journal.events == ["enter desk", "enter form", "exit form"]


# -- realtime: the session reused throughout, or replaced at each step --


class HeldResumeSession(ScriptedRealtimeSession):
    _model: HeldResumeModel

    async def update_instructions(self, instructions: str) -> None:
        # the desk's activity resuming: its session (the one handed back, or a new one) gets
        # the desk's instructions again
        if (gate := self._model.resuming) is not None and instructions == DESK:
            await gate.wait()
        await super().update_instructions(instructions)


class HeldResumeModel(ScriptedRealtimeModel):
    """Holds the realtime session's instructions update of the desk's resume, once armed."""

    resuming: Gate | None = None

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = HeldResumeSession(
            self, index=len(self.sessions), turn_detection_disabled=turn_detection_disabled
        )
        self.sessions.append(sess)
        return sess


@BUG
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_the_callers_audio_while_an_inline_task_returns_reaches_the_realtime_model(
    make_session: MakeSession, reuse: bool, entry: str
) -> None:
    journal = Journal()

    def reply(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers"

    model = HeldResumeModel(fallback=reply, reuse=reuse)
    audio = FakeAudioInput()
    session = await make_session(the_desk(journal, entry), llm=model, audio_input=audio)

    if entry == "tool":
        model.push(Reply(tool_calls=[tool_call("fill_form")]))
        session.generate_reply(user_input=OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)
    audio.push(FRAMES, seconds=DURING_TASK)
    await audio.forwarded()

    resuming = model.resuming = Gate("the desk's realtime session update")
    task.complete(FILLED)
    async with journal.closing.held():
        assert journal.events == ["enter desk", "enter form", "exit form"]
        audio.push(FRAMES, seconds=WHILE_CLOSING)
        await audio.forwarded()
    await resuming.reached()
    try:
        audio.push(FRAMES, seconds=WHILE_RESUMING)
        await audio.forwarded()
    finally:
        resuming.open()
    await bounded(journal.handed_back.wait(), what="the desk resuming with the form's result")

    audio.push(seconds=MARK)
    await audio.forwarded()  # push_audio() hands each frame to the realtime session at once

    desks = model.live_sessions[-1]  # the session the desk resumed on
    heard = [e.args["duration"] for e in desks.calls if e.method == "push_audio" and not e.after_close]
    assert heard[-1:] == [MARK]
    said_to_task = [DURING_TASK] * FRAMES if reuse else []  # on the session reused throughout
    # the bug: the frames said while the form closes reach no session, or one it closes
    assert heard == said_to_task + [WHILE_CLOSING] * FRAMES + [WHILE_RESUMING] * FRAMES + [MARK], (
        f"the desk's realtime session heard {heard.count(WHILE_CLOSING)} of the {FRAMES} frames "
        f"said while the form closed, {heard.count(WHILE_RESUMING)} of the {FRAMES} said while "
        "the desk resumed"
    )
    assert journal.results == [FILLED]
    assert journal.events == ["enter desk", "enter form", "exit form"]
