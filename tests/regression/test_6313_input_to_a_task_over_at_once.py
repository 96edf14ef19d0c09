"""User input while an inline AgentTask starts that completes in its own ``on_enter()`` (it
already knows its answer): the task is over before it could answer, so the agent that
awaited it, which resumes right after, answers (closest upstream issue: livekit/agents#6313).

On stock 1.8.9 the input given while the task's toolsets set up raises "AgentSession is
closing, cannot use generate_reply()"; a spoken turn that ends then is answered by the task
after its ``on_exit`` began (pipeline), or by nobody (realtime). It must be answered once,
by the agent the task returns to, and be in the history once: typed (``generate_reply()``,
``session.run()``) or spoken (a pipeline's VAD/STT, a realtime model's server-detected
turn, its session reused across the task or replaced).
"""

from __future__ import annotations

from typing import Any

import livekit.agents
import pytest
from livekit.agents import function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    late_calls,
    spoken,
    tool_call,
)
from tests.fakes.desks import SlowSetup
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug(
    "livekit/agents#6313",
    raises=RuntimeError,
    match=r"AgentSession is closing, cannot use generate_reply",
)

ON_FORK = "+fork" in livekit.agents.__version__

DESK = "You are the front desk."
CHECK = "You check the account."
CHECK_IT = "Check my account."
TYPED = "My account number is 42."


class CheckTask(JournalingTask[str]):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete("account ok")


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.gate = gate

    @function_tool
    async def check_account(self) -> str:
        """Check the caller's account."""
        result = await CheckTask(
            self.journal,
            name="check",
            instructions=CHECK,
            tools=[SlowSetup(self.gate, id="slow_setup_check")],
        )
        self.journal.results.append(result)
        return result


def answer_with(journal: fakes.Journal, seen: list[Any]) -> Any:
    """The model for the desk and the check: the desk checks the account for CHECK_IT, every
    other call answers the last user message, recorded in ``seen`` with the journal so far."""

    def answer(call: LLMCall | RTGeneration) -> Reply:
        seen.append((call.instructions, call.last_user_text, call.tool_choice, tuple(journal.events)))
        if call.last_user_text == CHECK_IT and call.tool_choice != "none" and call.instructions == DESK:
            if not any(i.type == "function_call_output" for i in call.chat_ctx.items):
                return Reply(tool_calls=[tool_call("check_account")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    return answer


def assert_the_desk_answered(session: Any, journal: fakes.Journal, seen: list[Any], text: str) -> None:
    assert journal.results == ["account ok"]
    assert user_messages(session, text) == 1
    # the check asks for nothing once its on_exit began; the desk, resumed, answers
    assert [i for i, _, _, events in seen if "exit check" in events and i == CHECK] == []
    assert [i for i, said, choice, _ in seen if said == text and choice != "none"] == [DESK]
    assert spoken(session).count(f"{DESK} answers: {text}") == 1
    assert journal.events == ["enter desk", "enter check", "exit check"]


@BUG
@pytest.mark.parametrize("api", ["generate_reply", "run"])
async def test_input_while_a_task_that_completes_at_once_starts_is_answered_by_its_caller(
    make_session: MakeSession, api: str
) -> None:
    journal = fakes.Journal()
    gate = Gate("check starting")
    seen: list[Any] = []
    desk = Desk(journal, gate)
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answer_with(journal, seen)))

    session.generate_reply(user_input=CHECK_IT)
    async with gate.held():
        if api == "run":
            handle: Any = session.run(user_input=TYPED)
        else:
            handle = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the reply to the input")
    await settled_on(session, desk)

    if api == "generate_reply":
        assert not handle.interrupted
    assert_the_desk_answered(session, journal, seen, TYPED)


# a spoken turn during a handoff: nobody answers it on stock
SPOKEN_BUG = pytest.mark.upstream_bug("livekit/agents#3129")


class HeldStartSession(ScriptedRealtimeSession):
    _model: HeldStartModel

    async def update_instructions(self, instructions: str) -> None:
        # the check's activity starting: its realtime session (the desk's, handed on, or a
        # new one) hears the caller already, and gets the check's instructions
        if instructions == CHECK:
            await self._model.starting.wait()
        await super().update_instructions(instructions)


class HeldStartModel(ScriptedRealtimeModel):
    """Holds the realtime session's instructions update as the check's activity starts."""

    starting: Gate

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = HeldStartSession(
            self, index=len(self.sessions), turn_detection_disabled=turn_detection_disabled
        )
        self.sessions.append(sess)
        return sess


@SPOKEN_BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_a_server_detected_turn_while_a_task_that_completes_at_once_starts_is_answered_by_its_caller(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = fakes.Journal()
    setup = Gate("check's toolsets")
    setup.open()
    seen: list[Any] = []
    desk = Desk(journal, setup)
    model = HeldStartModel(
        fallback=answer_with(journal, seen), reuse=reuse, turn_detection=True, user_transcription=True
    )
    model.starting = Gate("the check's realtime session updating")
    session = await make_session(desk, llm=model)

    model.sessions[-1].simulate_user_turn(CHECK_IT)
    async with model.starting.held():
        # the caller goes on while the check's activity starts: its server hears the turn
        model.sessions[-1].simulate_user_turn(TYPED)
    await settled_on(session, desk)

    assert_the_desk_answered(session, journal, seen, TYPED)
    assert not late_calls(model)
