"""The audio mode's realtime caller (``audio.speak_realtime``) when the session hearing a turn
closes under it (a handoff replaced it), and what the checks then count.

A session that closes while the caller still speaks heard only the start of the turn: the rest
of the caller's audio goes to the session that hears them now, whose server hears a turn there
(the framework forwards the audio to the arriving agent). A session that closes once the caller
stopped took the whole turn with it: the turn is abandoned, not spoken again, so a turn the
framework lost that way stays lost, and the earlier turn the caller barged in on with it is
still flagged as never answered.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm

from tests.fakes import ScriptedRealtimeModel, ScriptedRealtimeSession
from tests.stress.audio import SpokenTurn, _Abandoned, speak_realtime
from tests.stress.driver import ticks
from tests.stress.invariants import Probe, SpokenJournal, TurnRequest, check_spoken_turns

SERVER_EVENTS = (
    "input_speech_started",
    "input_speech_stopped",
    "input_audio_transcription_completed",
    "generation_created",
)


def _heard(rt: ScriptedRealtimeSession) -> list[str]:
    events: list[str] = []
    for name in SERVER_EVENTS:
        rt.on(name, lambda _ev, name=name: events.append(name))
    return events


def _turn(gaps: tuple[int, int, int]) -> SpokenTurn:
    return SpokenTurn(
        wait=False,
        ticks=0,
        interims=0,
        gaps=gaps,
        transcript_first=True,
        answer="text",
        answer_ticks=0,
    )


def _model() -> ScriptedRealtimeModel:
    return ScriptedRealtimeModel(fallback="ok", reuse=False, turn_detection=True, user_transcription=True)


async def test_a_turn_whose_session_closes_while_the_caller_speaks_goes_on_on_the_next_one() -> None:
    model = _model()
    first = model.session()
    heard_first = _heard(first)
    speaking = asyncio.ensure_future(speak_realtime(model, _turn((5, 0, 0)), "turn 1"))  # type: ignore[arg-type]
    await ticks(1)
    assert heard_first == ["input_speech_started"]

    await first.aclose()  # mid-speech
    second = model.session()
    heard_second = _heard(second)
    await asyncio.wait_for(speaking, 1.0)

    assert heard_first == ["input_speech_started"]
    assert heard_second == list(SERVER_EVENTS)


async def test_a_turn_whose_session_closes_after_the_caller_stopped_is_abandoned() -> None:
    model = _model()
    first = model.session()
    heard_first = _heard(first)
    speaking = asyncio.ensure_future(speak_realtime(model, _turn((0, 5, 0)), "turn 1"))  # type: ignore[arg-type]
    await ticks(2)
    assert heard_first == ["input_speech_started", "input_speech_stopped"]

    await first.aclose()  # the whole turn heard, its transcript still to come
    second = model.session()
    heard_second = _heard(second)
    with pytest.raises(_Abandoned):
        await asyncio.wait_for(speaking, 1.0)

    assert heard_second == []


def test_the_turn_a_session_took_with_it_leaves_the_one_it_cut_flagged() -> None:
    journal = SpokenJournal(Probe())
    probe = journal.probe
    journal.speech_started[0] = probe._next()
    journal.finals[0] = probe._next()
    journal.requests.append(TurnRequest(probe._next(), "r0", "agent_0", (0,), "speech_0"))
    # turn 1 cuts turn 0's reply before it played, and its session closes before its transcript
    journal.speech_started[1] = probe._next()
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="turn 0")

    assert [v.detail for v in check_spoken_turns(journal, ctx.items)] == ["turn 0: recorded, never answered"]
