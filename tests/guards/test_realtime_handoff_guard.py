"""Guards: realtime handoffs and handing back (pass on stock 1.8.9 and on the fork).

* A realtime generation calls a handoff tool alone, or with a plain tool in parallel; the
  model answers tool results itself or not (``auto_tool_reply_generation``); the realtime
  session is reused across the handoff or replaced. Every call gets its output, no call
  reaches a session after its ``aclose()``, the arriving agent's ``on_enter`` runs and it
  answers the next turn.
* After an ordinary handoff, the arriving agent hands back to the agent it came from (the
  same instance, which starts again, or a new one), with the pipeline LLM and realtime.
* livekit/agents#4691 ("pipeline agent hands off to a Gemini realtime agent; the handoff
  back never completes"), with the scripted model configured as the google plugin 1.8.9
  configures Gemini Live (automatic tool replies, no manual function calls, mutable context
  and instructions but not tools, server-side turn detection, audio output). The hand back
  completes on stock and on the fork, whether a ``run()`` turn or a server-detected user
  turn triggers it, so this stays a guard. (A hand back that returns ``(agent, message)``
  stalls ``run()`` for 5 s on stock: that is livekit/agents#4746, see
  tests/regression/test_4746_realtime_handoff.py.)

The arriving agents' ``run()`` bound is 10 s: stock waits 5 s for an automatic tool reply
after a parallel handoff (livekit/agents#4746), which the guards tolerate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from livekit.agents import Agent, function_tool

from tests import fakes
from tests.fakes import (
    GEMINI_CAPABILITIES,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    late_calls,
    tool_call,
    unanswered_calls,
)

TRIAGE = "You are the triage agent."
SECONDARY = "You are the secondary agent."
FRONT = "You are the front desk, on a pipeline LLM."
GEMINI = "You are the Gemini desk."
# stock sits out its 5 s auto tool reply wait after a parallel handoff
RUN_BOUND = 10.0


class Journal(fakes.Journal):
    """Lifecycle events of the agents of one test, and each agent's nth ``on_enter`` (an agent
    handed back to enters again) for a test to wait on."""

    def __init__(self) -> None:
        super().__init__()
        self.nth_entered: dict[str, asyncio.Event] = {}

    def on_enter(self, name: str) -> None:
        super().on_enter(name)
        self.nth_entered.setdefault(f"{name} #{self.events.count(f'enter {name}')}", asyncio.Event()).set()

    async def wait_entered(self, name: str, nth: int) -> None:
        event = self.nth_entered.setdefault(f"{name} #{nth}", asyncio.Event())
        await bounded(event.wait(), what=f"on_enter #{nth} of {name}")


class Named(JournalingAgent):
    journal: Journal


class Secondary(Named):
    def __init__(self, journal: Journal, *, back_to: Triage) -> None:
        super().__init__(journal, name="secondary", instructions=SECONDARY)
        self.back_to = back_to

    @function_tool
    async def back_to_triage(self) -> Agent:
        """Hand the conversation back to the triage agent."""
        return self.back_to

    @function_tool
    async def to_new_triage(self) -> Agent:
        """Hand the conversation to a new triage agent."""
        self.back_to.new_triage = Triage(self.journal, name="new triage")
        return self.back_to.new_triage


class Triage(Named):
    def __init__(self, journal: Journal, *, name: str = "triage") -> None:
        super().__init__(journal, name=name, instructions=TRIAGE)
        self.secondary: Secondary | None = None
        self.new_triage: Triage | None = None

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent:
        """Hand the conversation to the secondary agent."""
        self.secondary = Secondary(self.journal, back_to=self)
        return self.secondary


def answer(request: LLMCall | RTGeneration) -> str:
    return f"answer of {request.instructions}"


def by_turn(turns: dict[str, Reply]) -> Callable[[LLMCall | RTGeneration], Reply | str]:
    """Script answering the first request of each user turn in ``turns`` with its reply, and
    anything else (automatic tool replies included) by instructions."""
    pending = dict(turns)

    def _answer(request: LLMCall | RTGeneration) -> Reply | str:
        users = [i for i in request.chat_ctx.items if i.type == "message" and i.role == "user"]
        turn = users[-1].text_content if users else None
        if turn is not None and turn in pending:
            return pending.pop(turn)
        return answer(request)

    return _answer


def replies(model: ScriptedRealtimeModel) -> list[RTGeneration]:
    return [g for g in model.generations if g.source == "generate_reply"]


REUSE = pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])


@REUSE
@pytest.mark.parametrize("auto", [False, True], ids=["manual-reply", "auto-reply"])
@pytest.mark.parametrize("parallel", [False, True], ids=["alone", "parallel"])
async def test_realtime_handoff_answers_every_call(
    make_session: MakeSession, parallel: bool, auto: bool, reuse: bool
) -> None:
    calls = [tool_call("save_data", {"value": "x"})] if parallel else []
    calls.append(tool_call("switch_to_secondary"))
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=calls)],
        fallback=answer,
        auto_tool_reply_generation=auto,
        reuse=reuse,
    )
    journal = Journal()
    triage = Triage(journal)
    session = await make_session(triage, llm=model)
    first = model.sessions[0]

    await bounded(
        session.run(user_input="save x and move me on"), RUN_BOUND, what="session.run() handing off"
    )

    assert session.current_agent is triage.secondary
    assert journal.events == ["enter triage", "exit triage", "enter secondary"]
    assert unanswered_calls(session) == []
    # the session that issued the calls got their outputs, unless it was closed
    pushed = {n for e in first.calls if e.method == "update_chat_ctx" for n in e.args["new_function_outputs"]}
    assert pushed == {c.name for c in calls} or (not reuse and first.closed), first.calls
    assert (model.live_sessions == [first]) == reuse

    await bounded(session.run(user_input="hello"), RUN_BOUND, what="session.run() after the handoff")
    assert replies(model)[-1].instructions == SECONDARY
    assert journal.events == ["enter triage", "exit triage", "enter secondary"]

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert late_calls(model) == []


@pytest.mark.parametrize("tool", ["back_to_triage", "to_new_triage"], ids=["same-instance", "new-instance"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced", "realtime-auto-reply"])
async def test_handing_back_after_a_handoff(make_session: MakeSession, kind: str, tool: str) -> None:
    # automatic tool replies come unannounced, so each turn's request finds its own reply
    script = by_turn(
        {
            "move me on": Reply(tool_calls=[tool_call("switch_to_secondary")]),
            "take me back": Reply(tool_calls=[tool_call(tool)]),
        }
    )
    model: ScriptedLLM | ScriptedRealtimeModel
    if kind == "pipeline":
        model = ScriptedLLM(fallback=script)
    else:
        reuse = kind != "realtime-replaced"
        model = ScriptedRealtimeModel(
            fallback=script,
            auto_tool_reply_generation=kind == "realtime-auto-reply",
            reuse=reuse,
        )
    journal = Journal()
    triage = Triage(journal)
    session = await make_session(triage, llm=model)

    await bounded(session.run(user_input="move me on"), RUN_BOUND, what="session.run() handing off")
    assert session.current_agent is triage.secondary
    await bounded(session.run(user_input="take me back"), RUN_BOUND, what="session.run() handing back")

    arriving = triage if tool == "back_to_triage" else triage.new_triage
    name = "triage" if tool == "back_to_triage" else "new triage"
    assert arriving is not None and session.current_agent is arriving
    assert journal.events == [
        "enter triage",
        "exit triage",
        "enter secondary",
        "exit secondary",
        f"enter {name}",
    ]
    assert unanswered_calls(session) == []

    await bounded(session.run(user_input="hello again"), RUN_BOUND, what="session.run() after handing back")
    last = model.calls[-1] if isinstance(model, ScriptedLLM) else replies(model)[-1]
    assert last.instructions == TRIAGE

    await bounded(session.aclose(), what="AgentSession.aclose")
    if isinstance(model, ScriptedRealtimeModel):
        assert late_calls(model) == []


# -- livekit/agents#4691: pipeline agent -> Gemini-like realtime agent -> back --


class GeminiDesk(Named):
    def __init__(self, journal: Journal, *, front: FrontDesk, model: ScriptedRealtimeModel) -> None:
        super().__init__(journal, name="gemini", instructions=GEMINI, llm=model)
        self.front = front

    @function_tool
    async def back_to_front(self) -> Agent:
        """Hand the conversation back to the front desk."""
        return self.front

    @function_tool
    async def to_new_front(self) -> Agent:
        """Hand the conversation to a new front desk."""
        self.front.new_front = FrontDesk(self.journal, model=self.front.model, name="new front")
        return self.front.new_front


class FrontDesk(Named):
    def __init__(self, journal: Journal, *, model: ScriptedRealtimeModel, name: str = "front") -> None:
        super().__init__(journal, name=name, instructions=FRONT)
        self.model = model
        self.gemini: GeminiDesk | None = None
        self.new_front: FrontDesk | None = None

    @function_tool
    async def to_gemini(self) -> Agent:
        """Hand the conversation to the Gemini desk."""
        self.gemini = GeminiDesk(self.journal, front=self, model=self.model)
        return self.gemini


@pytest.mark.parametrize("tool", ["back_to_front", "to_new_front"], ids=["same-instance", "new-instance"])
@pytest.mark.parametrize("trigger", ["run", "server-turn"])
async def test_pipeline_to_gemini_and_back(make_session: MakeSession, trigger: str, tool: str) -> None:
    back = Reply(tool_calls=[tool_call(tool)])
    gemini_model = ScriptedRealtimeModel(
        [back] if trigger == "run" else [], fallback=answer, **GEMINI_CAPABILITIES
    )
    front_llm = ScriptedLLM([Reply(tool_calls=[tool_call("to_gemini")])], fallback=answer)
    journal = Journal()
    front = FrontDesk(journal, model=gemini_model)
    session = await make_session(front, llm=front_llm)

    await bounded(
        session.run(user_input="put me through to Gemini"), RUN_BOUND, what="session.run() to Gemini"
    )
    assert session.current_agent is front.gemini
    [gemini_session] = gemini_model.live_sessions

    name = "front" if tool == "back_to_front" else "new front"
    if trigger == "run":
        await bounded(session.run(user_input="back to the front desk"), RUN_BOUND, what="session.run() back")
    else:
        # the user speaks to Gemini, whose server-side turn detection answers with the call
        gemini_session.simulate_user_turn("back to the front desk", reply=back)
        await journal.wait_entered(name, 2 if tool == "back_to_front" else 1)

    arriving = front if tool == "back_to_front" else front.new_front
    assert arriving is not None and session.current_agent is arriving
    assert journal.events == ["enter front", "exit front", "enter gemini", "exit gemini", f"enter {name}"]
    assert unanswered_calls(session) == []

    # the pipeline LLM answers the next turn again
    await bounded(session.run(user_input="thanks"), RUN_BOUND, what="session.run() after the hand back")
    assert front_llm.calls[-1].instructions == FRONT

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert late_calls(gemini_model) == []
