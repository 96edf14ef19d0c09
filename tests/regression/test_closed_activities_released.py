"""A long session keeps every agent activity it ever closed alive.

No upstream issue reports this yet. A support line that hands a caller between two agents
(A -> B -> A ...) closes one ``AgentActivity`` per handoff, and on stock 1.8.9 none of them is
ever freed: with its tasks, tool executor and model streams, each handoff costs memory for as
long as the session lasts. Every chain runs through a task's ``contextvars`` context, which
names the activity it was created in (``_AgentActivityContextVar``):

* every activity's scheduling task, and with a VAD its VAD task and the VAD stream's tasks
  (``AgentActivity.start()`` -> ``AudioRecognition._vad_task``, ``VADStream._metrics_task``),
  are created in the context of the tool that handed off to it, which names the previous
  activity, whose own tasks name the one before it, and so on back to the first;
* the session records every speech it creates (``SpeechCreatedEvent``), and a speech keeps its
  finished tasks, and the run watching it keeps its finished tasks, each with its context and
  the activity in it;
* what is handed over at a handoff (the STT pipeline, a reused realtime session, a streaming
  turn detector's stream) lives as long as the session, with the tasks it started in the
  activity that created it; the default ``stt_node`` also keeps that activity in a local while
  its stream runs.

The fork lets the finished tasks go, starts each activity in its own context and creates what
is handed over in no activity's context, so only the activity before the current one can stay
(the current one's tasks were started from its tool). ``benchmarks/long_run.py`` measures the
same over 1,000 handoffs.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import (
    Caller,
    FakeAudioInput,
    MakeSession,
    Reply,
    ScriptedLLM,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    ScriptedSTT,
    ScriptedVAD,
    bounded,
    speech_session_kwargs,
    tool_call,
)

BUG = pytest.mark.upstream_bug("not-yet: closed activities stay reachable for the whole session")

HANDOFFS = 12
USER = "next desk, please"


class Desk(Agent):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=f"You are desk {name}.")
        self.name = name
        loop = asyncio.get_running_loop()
        self.entered: asyncio.Future[None] = loop.create_future()
        self.handed_to: asyncio.Future[Desk] = loop.create_future()

    async def on_enter(self) -> None:
        if not self.entered.done():
            self.entered.set_result(None)

    @function_tool
    async def switch(self) -> Agent:
        """Send the caller to the other desk."""
        desk = Desk("B" if self.name == "A" else "A")
        if not self.handed_to.done():
            self.handed_to.set_result(desk)
        return desk


def _activity(session: AgentSession) -> weakref.ref[object]:
    activity = session._activity
    assert activity is not None
    return weakref.ref(activity)


def _vad() -> ScriptedVAD:
    # forgets its closed streams, as a real VAD does: what stays alive is the session's doing
    return ScriptedVAD(keep_closed_streams=False)


def _handoffs(session: AgentSession) -> int:
    return len([item for item in session.history.items if item.type == "agent_handoff"])


def _alive_closed(activities: list[weakref.ref[object]]) -> list[int]:
    gc.collect()
    return [i for i, ref in enumerate(activities[:-2]) if ref() is not None]


class _RunningRealtimeSession(ScriptedRealtimeSession):
    """Runs a task of its own for as long as it is open, as the realtime plugins' sessions do
    (their connection's main task, started as the session is created)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._main_atask = asyncio.create_task(asyncio.Event().wait(), name="fake-realtime-main")

    async def aclose(self) -> None:
        await super().aclose()
        self._main_atask.cancel()
        await asyncio.gather(self._main_atask, return_exceptions=True)


class _RunningRealtimeModel(ScriptedRealtimeModel):
    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = _RunningRealtimeSession(
            self, index=len(self.sessions), turn_detection_disabled=turn_detection_disabled
        )
        self.sessions.append(sess)
        return sess


SETUPS = {
    # text only, no VAD: the scheduling tasks and the finished tasks of recorded speeches
    "no-vad": lambda llm: {"llm": llm},
    # the session's VAD: each activity's VAD task and VAD stream
    "vad": lambda llm: {"llm": llm, "vad": _vad()},
    # and an STT: its pipeline is handed over at every handoff, with or without audio input
    "vad-stt": lambda llm: {"llm": llm, "vad": _vad(), "stt": ScriptedSTT()},
    "vad-stt-audio-input": lambda llm: speech_session_kwargs(
        vad=_vad(), stt=ScriptedSTT(), audio_input=FakeAudioInput(), llm=llm
    ),
}


@BUG
@pytest.mark.parametrize("setup", list(SETUPS))
async def test_activities_closed_by_handoffs_are_freed(make_session: MakeSession, setup: str) -> None:
    fake = ScriptedLLM(fallback=lambda call: Reply(tool_calls=[tool_call("switch")]))
    session = await make_session(Desk("A"), **SETUPS[setup](fake))
    activities = [_activity(session)]

    for _ in range(HANDOFFS):
        await bounded(session.run(user_input=USER))
        activities.append(_activity(session))

    # every run handed off, to a new activity each time
    assert _handoffs(session) == HANDOFFS + 1  # the first one is the session's start
    assert [c.agent.name for c in fake.calls[:4]] == ["A", "B", "A", "B"]

    alive = _alive_closed(activities)
    assert alive == [], f"{len(alive)} of {HANDOFFS - 1} closed activities are still reachable"


@BUG
async def test_activities_closed_by_spoken_handoffs_are_freed(make_session: MakeSession) -> None:
    """The caller speaks each turn (audio input, VAD, STT); the desk answering it hands off."""
    caller = Caller()
    caller.vad = _vad()
    fake = ScriptedLLM(fallback=lambda call: Reply(tool_calls=[tool_call("switch")]))
    first = Desk("A")
    session = await make_session(first, llm=fake, **caller.session_kwargs())
    caller.attach(session)
    await bounded(first.entered, what="desk A's on_enter")
    activities = [_activity(session)]

    desk = first
    for _ in range(HANDOFFS):
        await caller.say(USER)
        desk = await bounded(desk.handed_to, what=f"desk {desk.name}'s handoff")
        # its on_enter runs once the previous activity is closed
        await bounded(desk.entered, what=f"desk {desk.name}'s on_enter")
        activities.append(_activity(session))

    assert _handoffs(session) == HANDOFFS + 1
    assert caller.vad.frames > 0 and caller.stt.frames > 0  # the audio went the whole way

    alive = _alive_closed(activities)
    assert alive == [], f"{len(alive)} of {HANDOFFS - 1} closed activities are still reachable"


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_activities_closed_by_realtime_handoffs_are_freed(
    make_session: MakeSession, reuse: bool
) -> None:
    """A realtime session that runs a task of its own, reused across handoffs or not, with a VAD."""
    model = _RunningRealtimeModel(fallback=Reply(tool_calls=[tool_call("switch")]), reuse=reuse)
    session = await make_session(Desk("A"), llm=model, vad=_vad())
    activities = [_activity(session)]

    for _ in range(HANDOFFS):
        await bounded(session.run(user_input=USER))
        activities.append(_activity(session))

    assert _handoffs(session) == HANDOFFS + 1
    # reused: one session for the whole run; replaced: one per activity
    assert len(model.sessions) == (1 if reuse else HANDOFFS + 1)

    alive = _alive_closed(activities)
    assert alive == [], f"{len(alive)} of {HANDOFFS - 1} closed activities are still reachable"
