"""User input that arrives while a handoff, or an inline AgentTask's start or return, is
under way (closest upstream issue: livekit/agents#6313, whose fix, PR #6315, only makes
``run()`` wait for a handoff it did not watch).

The user speaks (text input: ``session.generate_reply(user_input=...)``, or a barge-in:
``session.interrupt()`` first) while the session moves from one agent to the next. On stock
1.8.9, depending on where the handoff is:

* the leaving agent is in its ``on_exit``: the input goes to the leaving agent, which
  answers it after its ``on_exit`` (its activity still accepts speech, though
  ``update_agent()`` blocked its new turns);
* the leaving agent's activity drains (it voices the handoff message of a tool that
  returned ``(agent, "Transferring you")``, or the task that completed winds down):
  ``generate_reply()`` raises "cannot schedule new speech, the speech scheduling is
  draining/pausing", and the reply it had already started on the arriving agent logs
  ``Error in _llm_inference_task: RuntimeError('no activity context found, the agent is
  not running')``;
* the arriving agent starts (its toolsets set up, e.g. an MCP server connecting):
  ``generate_reply()`` raises "AgentSession is closing, cannot use generate_reply()".

The fork hands the input to the agent taking over; it is queued until that agent's activity
runs, then answered by it, once. Nothing raises, nothing is logged at ERROR, the input is not
lost and ``run()`` returns.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from livekit.agents import Agent, AgentSession, RunContext, RunResult, function_tool, llm
from livekit.agents.voice import SpeechHandle

from tests import fakes
from tests.fakes import (
    ErrorLogCapture,
    Gate,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    late_calls,
    spoken,
    tool_call,
)
from tests.fakes.desks import SlowSetup

# where stock refuses the input outright, the exception raised at the user is the bug
BUG = pytest.mark.upstream_bug(
    "livekit/agents#6313",
    raises=RuntimeError,
    match=r"cannot schedule new speech, the speech scheduling is draining|AgentSession is closing, cannot use generate_reply",
)

DESK = "You are the front desk."
BILLING = "You are the billing desk."
FORM = "You collect the form."
TRANSFERRING = "Transferring you to billing"
VOICED = "One moment, I'm transferring you to billing."
USER_TURN = "Put me through to billing."
BARGE_IN = "Actually, it's about a refund."
FILE_IT = "Please file it."
FILED = "Your form is filed."

Hold = Literal["on_exit", "voicing", "starting"]

Request = LLMCall | RTGeneration


class Journal(fakes.Journal):
    """What the agents of one test did, and the gates a test holds the handoff on."""

    def __init__(self) -> None:
        super().__init__()
        self.setup_gates: dict[str, Gate] = {}
        self.billing: Billing | None = None

    def toolsets(self, name: str) -> list[llm.Tool | llm.Toolset]:
        gate = self.setup_gates.get(name)
        return [SlowSetup(gate, id=f"slow_setup_{gate.name.replace(' ', '_')}")] if gate is not None else []


class Billing(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="billing", instructions=BILLING, tools=journal.toolsets("billing"))


class Desk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, *, say: str | None = None) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.say = say

    @function_tool
    async def to_billing(self) -> Agent | tuple[Agent, str]:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = Billing(self.journal)
        return (billing, self.say) if self.say is not None else billing

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        result = await FormTask(self.journal)
        self.journal.results.append(result)
        return result


class FormTask(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM, tools=journal.toolsets("form"))

    @function_tool
    async def file_form(self, ctx: RunContext[Any]) -> str:
        """File the completed form."""
        self.complete("form filed")
        return "Filed"


def last_user_text(request: Request) -> str | None:
    for item in reversed(request.chat_ctx.items):
        if item.type == "message" and item.role == "user":
            return item.text_content
    return None


def answers_to(requests: list[Any], text: str) -> list[Any]:
    """The model requests that answer the user's ``text`` (it is their last user message)."""
    return [r for r in requests if last_user_text(r) == text and r.tool_choice != "none"]


def handoffs(session: AgentSession[Any]) -> list[str | None]:
    return [i.new_agent_id for i in session.history.items if i.type == "agent_handoff"]


def barge_in(session: AgentSession[Any], gate: Gate, *, interrupt: bool) -> SpeechHandle:
    """The user speaks while the handoff is held at ``gate``; then the handoff goes on."""
    try:
        if interrupt:
            session.interrupt()
        return session.generate_reply(user_input=BARGE_IN)
    finally:
        gate.open()  # a failed barge-in must not leave the handoff held


# -- a handoff, pipeline LLM --


@BUG
@pytest.mark.parametrize(
    ("say", "hold"),
    [
        (None, "on_exit"),
        (None, "starting"),
        (TRANSFERRING, "on_exit"),
        (TRANSFERRING, "voicing"),
        (TRANSFERRING, "starting"),
    ],
    ids=["bare-on_exit", "bare-starting", "message-on_exit", "message-voicing", "message-starting"],
)
async def test_barge_in_during_a_handoff_is_answered_by_the_arriving_agent(
    make_session: MakeSession, error_logs: ErrorLogCapture, say: str | None, hold: Hold
) -> None:
    journal = Journal()
    gate = Gate(hold)
    if hold == "on_exit":
        journal.exit_gates["desk"] = gate
    elif hold == "starting":
        journal.setup_gates["billing"] = gate

    def answer(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.tool_choice == "none":
            # the leaving agent voices the handoff message
            return Reply(VOICED, first_token_delay=gate.wait if hold == "voicing" else None)
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    fake = ScriptedLLM([Reply(tool_calls=[tool_call("to_billing")])], fallback=answer)
    desk = Desk(journal, say=say)
    session = await make_session(desk, llm=fake)

    run: RunResult[Any] = session.run(user_input=USER_TURN)
    await gate.reached()
    handle = barge_in(session, gate, interrupt=True)
    await bounded(run, what="session.run() across the handoff")
    await bounded(handle, what="the reply to the barge-in")

    billing = journal.billing
    assert billing is not None
    assert session.current_agent is billing
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    assert handoffs(session) == [desk.id, billing.id]
    assert handle.exception() is None and not handle.interrupted
    # answered once, by the agent taking over
    answers = answers_to(fake.calls, BARGE_IN)
    assert [(c.instructions, c.agent) for c in answers] == [(BILLING, billing)]
    assert spoken(session)[-1] == f"{BILLING} answers: {BARGE_IN}"
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]

    await bounded(session.run(user_input="Thanks."), what="the next turn")
    assert fake.calls[-1].instructions == BILLING


# -- an inline AgentTask starting, and returning --


def form_answer(call: LLMCall) -> Reply:
    last = call.chat_ctx.items[-1]
    if call.instructions == FORM and last.type == "message" and last.text_content == FILE_IT:
        return Reply(tool_calls=[tool_call("file_form")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


@BUG
async def test_input_while_an_inline_task_starts_is_answered_by_the_task(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    journal = Journal()
    gate = journal.setup_gates["form"] = Gate("form starting")
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("open_form")])], fallback=form_answer)
    desk = Desk(journal)
    session = await make_session(desk, llm=fake)

    run: RunResult[Any] = session.run(user_input="I want to fill in the form.")
    await gate.reached()
    # the speech awaiting the task holds its interruptions: text input, no barge-in
    handle = barge_in(session, gate, interrupt=False)
    await bounded(run, what="session.run() into the task")
    await bounded(handle, what="the reply to the input")

    task = session.current_agent
    assert isinstance(task, FormTask)
    assert handle.exception() is None and not handle.interrupted
    answers = answers_to(fake.calls, BARGE_IN)
    assert [(c.instructions, c.agent) for c in answers] == [(FORM, task)]

    await bounded(session.run(user_input=FILE_IT), what="session.run() out of the task")
    assert session.current_agent is desk
    assert journal.events == ["enter desk", "enter form", "exit form"]
    assert journal.results == ["form filed"]
    assert fake.calls[-1].instructions == DESK
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]


@BUG
@pytest.mark.parametrize("hold", ["on_exit", "draining"])
async def test_input_while_an_inline_task_returns_is_answered_by_its_caller(
    make_session: MakeSession, error_logs: ErrorLogCapture, hold: Literal["on_exit", "draining"]
) -> None:
    journal = Journal()
    gate = Gate(hold)

    def answer(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        if call.instructions == FORM and last.type == "function_call_output":
            # the task answers its own tool's output while its activity drains
            return Reply(FILED, first_token_delay=gate.wait if hold == "draining" else None)
        return form_answer(call)

    fake = ScriptedLLM([Reply(tool_calls=[tool_call("open_form")])], fallback=answer)
    desk = Desk(journal)
    session = await make_session(desk, llm=fake)

    await bounded(session.run(user_input="I want to fill in the form."), what="session.run() into the task")
    assert isinstance(task := session.current_agent, FormTask), task

    if hold == "on_exit":
        journal.exit_gates["form"] = gate
    run: RunResult[Any] = session.run(user_input=FILE_IT)
    await gate.reached()
    if hold == "draining":
        assert journal.events[-1] == "exit form"
    handle = barge_in(session, gate, interrupt=False)
    await bounded(run, what="session.run() out of the task")
    await bounded(handle, what="the reply to the input")

    assert session.current_agent is desk
    assert journal.events == ["enter desk", "enter form", "exit form"]
    assert journal.results == ["form filed"]
    assert handle.exception() is None and not handle.interrupted
    # the agent the task returns to answers it, once
    answers = answers_to(fake.calls, BARGE_IN)
    assert [(c.instructions, c.agent) for c in answers] == [(DESK, desk)]
    assert FILED in spoken(session)
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]


# -- a handoff, realtime model --


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
@pytest.mark.parametrize("hold", ["on_exit", "starting"])
@pytest.mark.parametrize("say", [None, TRANSFERRING], ids=["bare", "message"])
async def test_realtime_input_during_a_handoff_is_answered_by_the_arriving_agent(
    make_session: MakeSession, error_logs: ErrorLogCapture, say: str | None, hold: Hold, reuse: bool
) -> None:
    journal = Journal()
    gate = Gate(hold)
    if hold == "on_exit":
        journal.exit_gates["desk"] = gate
    else:
        journal.setup_gates["billing"] = gate

    def answer(gen: RTGeneration) -> str:
        if gen.agent is not None and gen.agent.instructions == DESK and say is not None:
            return VOICED
        return f"{gen.instructions} answers: {last_user_text(gen)}"

    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("to_billing")])],
        fallback=answer,
        reuse=reuse,
    )
    desk = Desk(journal, say=say)
    session = await make_session(desk, llm=model)

    run: RunResult[Any] = session.run(user_input=USER_TURN)
    await gate.reached()
    handle = barge_in(session, gate, interrupt=True)
    await bounded(run, what="session.run() across the handoff")
    await bounded(handle, what="the reply to the barge-in")

    billing = journal.billing
    assert billing is not None
    assert session.current_agent is billing
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    assert handle.exception() is None and not handle.interrupted
    answers = [g for g in model.generations if last_user_text(g) == BARGE_IN and g.source == "generate_reply"]
    assert [(g.instructions, g.agent) for g in answers] == [(BILLING, billing)]
    assert not late_calls(model)
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]
