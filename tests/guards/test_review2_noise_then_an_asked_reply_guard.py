"""Guards: after a noise, what the agent asks for goes on at once (pass on stock 1.8.9 and on the
fork).

The model's server detects the caller's turns and reports its speech starts and ends; it
announces every response it creates, the ones the agent asks for too (``generation_created``
with ``user_initiated=True``, as the OpenAI and Gemini plugins do), and may answer tool outputs
on its own (automatic tool replies). The server hears a noise (a start of speech and its end,
no transcript, no reply). The caller then types a request: the agent asks the model for a
reply, which calls a tool. Nothing the caller said after the request exists, and the noise is
long over (the model replied since): nothing is left to wait for.

* A lookup: the model answers the tool's output on its own; that answer plays as soon as it
  comes, as on stock.
* The handoff tool (the realtime session is replaced): billing comes in as soon as the desk is
  done, as on stock; the desk's closing session has no transcript of the noise to wait for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool, llm

from tests import fakes
from tests.fakes import (
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
from tests.fakes.desks import TO_BILLING, Desk, DeskJournal
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BALANCE = "What's my balance?"
ANSWER = "Your balance is 42 EUR."
# far below the time a reply held up for the server to tell a turn from a noise waits (2 s);
# the path under test takes milliseconds
PROMPT = 1.0


def _answer(gen: RTGeneration) -> str:
    return ANSWER


class AnnouncingModel(ScriptedRealtimeModel):
    """Announces the responses the agent asks for (``generate_reply``) with
    ``generation_created`` (``user_initiated=True``), as the realtime plugins do."""

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        generate_reply = sess.generate_reply

        def announcing(**kwargs: Any) -> Any:
            fut = generate_reply(**kwargs)
            if fut.done() and fut.exception() is None:
                sess.emit("generation_created", fut.result())
            return fut

        sess.generate_reply = announcing  # type: ignore[method-assign]
        return sess


class BalanceDesk(JournalingAgent):
    @function_tool
    async def look_up_balance(self) -> str:
        """Look the caller's balance up."""
        return "42 EUR"


def _noise(rt: ScriptedRealtimeSession) -> None:
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))


@pytest.mark.parametrize("announced", [True, False], ids=["announced", "unannounced"])
async def test_the_models_own_tool_reply_after_a_noise_and_typed_input_plays_at_once(
    make_session: MakeSession, announced: bool
) -> None:
    model_cls = AnnouncingModel if announced else ScriptedRealtimeModel
    model = model_cls(
        [Reply(tool_calls=[tool_call("look_up_balance")])],
        fallback=_answer,
        turn_detection=True,
        user_transcription=True,
        auto_tool_reply_generation=True,
    )
    desk = BalanceDesk(fakes.Journal(), name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]
    _noise(rt)

    loop = asyncio.get_running_loop()
    started = loop.time()
    result = session.run(user_input=BALANCE)
    await bounded(result, what="the run answering the typed question")
    elapsed = loop.time() - started
    await settled_on(session, desk)

    assert [g.source for g in model.generations] == ["generate_reply", "auto_tool_reply"]
    assert spoken(session) == [ANSWER]
    # the bug: the tool reply waits for the server to tell a noise long answered from a turn
    assert elapsed < PROMPT, f"the tool reply came up {elapsed:.2f}s after the question"


async def test_a_handoff_asked_for_by_typed_input_after_a_noise_is_not_held_up(
    make_session: MakeSession,
) -> None:
    """The caller types that they want billing after the noise; the model's reply the agent
    asks for calls the handoff tool (the realtime session is replaced). The noise is long over
    (the model replied since): billing comes in as soon as the desk is done, as on stock."""
    journal = DeskJournal()
    model = AnnouncingModel(
        [Reply(tool_calls=[tool_call("to_billing")])],
        fallback=_answer,
        reuse=False,
        turn_detection=True,
        user_transcription=True,
    )
    session = await make_session(Desk(journal, message=None), llm=model)
    _noise(model.sessions[-1])

    loop = asyncio.get_running_loop()
    started = loop.time()
    session.run(user_input=TO_BILLING)
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    elapsed = loop.time() - started
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    # the bug: the desk's closing session waits for a transcript of the noise
    assert elapsed < PROMPT, f"billing came in {elapsed:.2f}s after the caller's request"
