"""The caller's wait across a handoff (issue 17): from the end of a spoken turn to the first
audio frame of its answer.

The caller's audio goes through the session's audio input, VAD and STT (``tests.fakes.speech``);
the answer goes through ``FakeTTS`` to a ``FakeAudioOutput`` that timestamps the frames it
captures. Per round, one session:

* five turns with no handoff (the desk answers): ``no_handoff_turn_s``, their median;
* a turn that hands off to billing, and while the desk is in its ``on_exit`` the caller says
  another turn: ``during_handoff_turn_s``, from that turn's final transcript to the first frame
  of billing's answer (released as soon as the turn ended). Stock drops the turn: ``inf``;
* five turns right after it (billing answers): ``after_handoff_turn_s``;
  ``after/no_handoff`` is their ratio, the goal <= 1.05.

Goal: fork answers the turn spoken during the handoff; the turns after it wait no longer than
turns with no handoff. Run: `uv run python -m benchmarks.caller_wait`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import Caller, FakeAudioOutput, FakeTTS, LLMCall, Reply, ScriptedLLM, tool_call

ROUNDS = 5
TURNS = 5
ANSWER_BOUND = 0.5
"""Seconds to wait for an answer's first frame before calling it never (stock)."""

GOALS = {  # the same as in benchmarks/__main__.py
    "during_handoff_turn_s": "fork finite, stock inf (the turn is dropped)",
    "after/no_handoff": "fork <= 1.05",
}


class StampedAudioOutput(FakeAudioOutput):
    """Instant playout; every captured frame wakes whoever waits for the next one."""

    def __init__(self) -> None:
        super().__init__(mode="instant")
        self.frame_at: asyncio.Future[float] | None = None

    def arm(self) -> asyncio.Future[float]:
        self.frame_at = asyncio.get_running_loop().create_future()
        return self.frame_at

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        if self.frame_at is not None and not self.frame_at.done():
            self.frame_at.set_result(time.perf_counter())
        await super().capture_frame(frame)


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="billing")


class Desk(Agent):
    def __init__(self, exiting: asyncio.Event, release: asyncio.Event) -> None:
        super().__init__(instructions="desk")
        self.exiting, self.release = exiting, release

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to billing."""
        return Billing()

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.release.wait()


def answer(call: LLMCall) -> Reply:
    if call.last_user_text == "billing please" and call.instructions == "desk" and call.tool_choice != "none":
        return Reply(tool_calls=[tool_call("to_billing")])
    return Reply(f"{call.instructions} answers {call.last_user_text}")


async def timed_turn(
    session: AgentSession[Any], caller: Caller, out: StampedAudioOutput, text: str, *, during: Any = None
) -> float:
    """Seconds from ``text``'s final transcript to the first frame after it (inf: none within
    ANSWER_BOUND). ``during`` is called as the turn ends (the desk's on_exit is released)."""
    ended = asyncio.get_running_loop().create_future()

    def on_final(ev: Any) -> None:
        if ev.is_final and ev.transcript == text and not ended.done():
            ended.set_result(time.perf_counter())
            if during is not None:
                during()

    frame = out.arm()
    session.on("user_input_transcribed", on_final)
    try:
        await caller.say(text)
        t0 = await ended
        try:
            t1 = await asyncio.wait_for(asyncio.shield(frame), ANSWER_BOUND)
        except asyncio.TimeoutError:
            return float("inf")
        return t1 - t0
    finally:
        session.off("user_input_transcribed", on_final)


async def settled(session: AgentSession[Any]) -> None:
    while True:
        try:
            await session.wait_for_idle()
            return
        except Exception:  # a handoff is closing the activity
            await asyncio.sleep(0)


async def one_round() -> dict[str, float]:
    exiting, release = asyncio.Event(), asyncio.Event()
    caller = Caller()
    out = StampedAudioOutput()
    kwargs = caller.session_kwargs(llm=ScriptedLLM([], fallback=answer), tts=FakeTTS(seconds_per_char=0.001))
    kwargs.pop("audio_input")
    session: AgentSession[Any] = AgentSession(**kwargs)
    session.input.audio = caller.audio
    session.output.audio = out
    caller.attach(session)
    await session.start(Desk(exiting, release), record=False)
    try:
        before = []
        for i in range(TURNS):
            before.append(await timed_turn(session, caller, out, f"question {i}"))
            await settled(session)
        await caller.say("billing please")
        await asyncio.wait_for(exiting.wait(), 5)
        during = await timed_turn(session, caller, out, "it is about a refund", during=release.set)
        release.set()
        await settled(session)
        after = []
        for i in range(TURNS):
            after.append(await timed_turn(session, caller, out, f"follow-up {i}"))
            await settled(session)
        return {
            "no_handoff_turn_s": statistics.median(before),
            "during_handoff_turn_s": during,
            "after_handoff_turn_s": statistics.median(after),
        }
    finally:
        release.set()
        await session.aclose()
        caller.audio.close()


async def measure() -> dict[str, float]:
    rounds = [await one_round() for _ in range(ROUNDS)]
    result = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    result["after/no_handoff"] = result["after_handoff_turn_s"] / result["no_handoff_turn_s"]
    return result


if __name__ == "__main__":
    if "--measure" in sys.argv:
        from benchmarks._compare import main_measure

        main_measure(measure)
    else:
        from benchmarks._compare import compare

        compare("benchmarks.caller_wait", GOALS)
