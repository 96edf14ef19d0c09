"""livekit/agents#4746: realtime handoffs that stall ``session.run()``, and handing back from
an inline AgentTask.

1. A realtime model that answers tool results on its own (``auto_tool_reply_generation``,
   like Gemini) calls ``save_data`` and ``switch_to_secondary`` in one generation, or a
   handoff tool returns ``(agent, "Transferring you now")`` (also Gemini handing back to a
   pipeline agent, the setup of livekit/agents#4691). Stock 1.8.9 makes the run wait for the
   model's automatic reply, which the leaving activity discards while it drains ("skipping
   new realtime generation"), so ``run()`` sits out the whole 5 s timeout ("timed out
   waiting for realtime auto tool reply"). The fork waits for nothing while a handoff is
   pending: ``run()`` returns once the arriving agent's ``on_enter`` ends.

2. Agent A's tool awaits an inline ``AgentTask`` (A's activity is paused), and from inside the
   task the conversation goes back to A: a task tool returns A or calls ``update_agent(A)``,
   or the application does. Stock logs "cannot start agent: an activity is already
   running", ``current_agent`` says A while the task keeps answering, A's tool never returns
   and ``aclose()`` hangs. Handing off to a new instance of A leaves the original A paused
   forever on its unanswered call; a task that completes and hands off in the same tool
   hangs ``run()``. The fork hands back: the task ends, A's tool gets a ToolError saying so,
   A's paused activity resumes (no second ``on_enter``) and answers. A handoff anywhere
   else closes the suspended agents, whose pending calls get error outputs, without a word
   from them. ``update_agent()`` refuses an agent that already runs elsewhere before
   changing anything. Driven with the pipeline LLM and the realtime model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, AgentTask, ToolError, function_tool, llm

from tests import fakes
from tests.fakes import (
    GEMINI_CAPABILITIES,
    MODEL_KINDS,
    BoundedWaitTimeout,
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
    scripted_model,
    spoken,
    tool_call,
    unanswered_calls,
    wait_for_event,
)

BUG = pytest.mark.upstream_bug("livekit/agents#4746")

TRIAGE = "You are the triage agent."
SECONDARY = "You are the secondary agent."
TRANSFERRING = "Transferring you now"
TIMED_OUT = "timed out waiting for realtime auto tool reply"
# well under the 5 s the stock activity waits for the discarded auto reply
RUN_BOUND = 2.5
# the bound on the wait itself lets stock's run() come back after its 5 s, so the test can
# show what the user saw (how long it took, the warning) instead of timing out
RUN_WAIT = 8.0


def records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def returns_promptly(run: Any, caplog: pytest.LogCaptureFixture, what: str) -> None:
    """Await a run, then assert it did not sit out stock's wait for a discarded auto reply."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    await bounded(run, RUN_WAIT, what=what)
    took = loop.time() - started
    timed_out = [r.getMessage() for r in records(caplog, TIMED_OUT)]
    assert took < RUN_BOUND and not timed_out, f"{what} took {took:.1f}s: {timed_out}"


def outputs(session: AgentSession[Any]) -> dict[str, llm.FunctionCallOutput]:
    return {i.name: i for i in session.history.items if i.type == "function_call_output"}


# -- 1. no wait for an automatic tool reply the draining activity discards --


class Secondary(Agent):
    def __init__(self, journal: fakes.Journal, enter_gate: Gate) -> None:
        super().__init__(instructions=SECONDARY)
        self.journal = journal
        self.enter_gate = enter_gate

    async def on_enter(self) -> None:
        await self.enter_gate.wait()
        self.journal.on_enter("secondary")


class Triage(JournalingAgent):
    def __init__(self, journal: fakes.Journal, *, say: str | None) -> None:
        super().__init__(journal, name="triage", instructions=TRIAGE)
        self.say = say
        self.enter_gate = Gate("secondary on_enter")
        self.secondary: Secondary | None = None

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent | tuple[Agent, str]:
        """Hand the conversation to the secondary agent."""
        self.secondary = Secondary(self.journal, self.enter_gate)
        return (self.secondary, self.say) if self.say is not None else self.secondary


def auto_reply(gen: RTGeneration) -> str:
    return f"auto reply on session #{gen.session.index}"


# reused: mutable session state, the realtime session survives the handoff; replaced: it
# cannot be updated, so the arriving agent gets a new one
REUSE = pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])


@BUG
@REUSE
@pytest.mark.parametrize(
    ("calls", "say"),
    [
        (("save_data", "switch_to_secondary"), None),
        (("switch_to_secondary", "save_data"), None),
        (("switch_to_secondary",), TRANSFERRING),
        (("save_data", "switch_to_secondary"), TRANSFERRING),
    ],
    ids=["parallel", "parallel-reversed", "with-message", "parallel-with-message"],
)
async def test_run_returns_once_the_arriving_agent_entered(
    make_session: MakeSession,
    caplog: pytest.LogCaptureFixture,
    calls: tuple[str, ...],
    say: str | None,
    reuse: bool,
) -> None:
    caplog.set_level(logging.WARNING, logger="livekit")
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call(n, {"value": "x"} if n == "save_data" else {}) for n in calls])],
        fallback=auto_reply,
        auto_tool_reply_generation=True,
        reuse=reuse,
    )
    journal = fakes.Journal()
    triage = Triage(journal, say=say)
    session = await make_session(triage, llm=model)

    run = session.run(user_input="save x and move me on")
    await triage.enter_gate.reached()
    # the run is held by the arriving agent's on_enter, and by nothing else once it ends
    assert not run.done()
    triage.enter_gate.open()
    await returns_promptly(run, caplog, "session.run() after the handoff")

    assert session.current_agent is triage.secondary
    assert journal.events == ["enter triage", "exit triage", "enter secondary"]
    assert set(outputs(session)) == set(calls)
    assert not records(caplog, TIMED_OUT)
    assert not late_calls(model)


FRONT = "You are the front desk, on a pipeline LLM."
GEMINI = "You are the Gemini desk."
BACK = "Back to the front desk"


class GeminiDesk(JournalingAgent):
    def __init__(self, front: FrontDesk, model: ScriptedRealtimeModel) -> None:
        super().__init__(front.journal, name="gemini", instructions=GEMINI, llm=model)
        self.front = front

    @function_tool
    async def back_to_front(self) -> tuple[Agent, str]:
        """Hand the conversation back to the front desk."""
        return self.front, BACK


class FrontDesk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, model: ScriptedRealtimeModel) -> None:
        super().__init__(journal, name="front", instructions=FRONT)
        self.model = model
        self.gemini: GeminiDesk | None = None

    @function_tool
    async def to_gemini(self) -> Agent:
        """Hand the conversation to the Gemini desk."""
        self.gemini = GeminiDesk(self, self.model)
        return self.gemini


@BUG
async def test_gemini_like_agent_hands_back_to_a_pipeline_agent_with_a_message(
    make_session: MakeSession, caplog: pytest.LogCaptureFixture
) -> None:
    """The hand back of livekit/agents#4691's setup, with a message: it completes on stock
    too, but 5 s late."""
    caplog.set_level(logging.WARNING, logger="livekit")
    gemini_model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("back_to_front")])], fallback=auto_reply, **GEMINI_CAPABILITIES
    )
    front_llm = ScriptedLLM([Reply(tool_calls=[tool_call("to_gemini")])], fallback=lambda c: "front speaking")
    journal = fakes.Journal()
    front = FrontDesk(journal, gemini_model)
    session = await make_session(front, llm=front_llm)
    await bounded(
        session.run(user_input="put me through to Gemini"), RUN_BOUND, what="session.run() to Gemini"
    )
    assert session.current_agent is front.gemini

    await returns_promptly(session.run(user_input="back to the front desk"), caplog, "session.run() back")

    assert session.current_agent is front
    assert journal.events == ["enter front", "exit front", "enter gemini", "exit gemini", "enter front"]
    assert outputs(session)["back_to_front"].output == BACK
    assert not records(caplog, TIMED_OUT)
    await bounded(session.run(user_input="thanks"), RUN_BOUND, what="session.run() after the hand back")
    assert front_llm.calls[-1].instructions == FRONT


# -- 2. handing back from an inline AgentTask to the agent it suspended --

DESK = "You are the front desk."
NEW_DESK = "You are the new front desk."
FORM = "You collect the form."
VERIFY = "You verify the caller."

Request = LLMCall | RTGeneration


class Journal(fakes.Journal):
    """What the agents of one test did: lifecycle events and, in ``results``, what each
    awaiting tool got (``(awaiting agent, result or ToolError)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.new_desk: Desk | None = None

    def make_new_desk(self) -> Desk:
        self.new_desk = Desk(self, name="new desk", instructions=NEW_DESK)
        return self.new_desk


async def await_task(journal: Journal, awaiting: str, task: AgentTask[str]) -> str:
    """Await an inline task from a tool, recording what the tool got."""
    try:
        answer = await task
    except ToolError as e:
        journal.results.append((awaiting, e))
        raise
    journal.results.append((awaiting, answer))
    return answer


class Desk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, *, name: str = "desk", instructions: str = DESK) -> None:
        super().__init__(journal, name=name, instructions=instructions)

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        return await await_task(self.journal, self.name, FormTask(self.journal, desk=self))


class FormTask(JournalingTask[str]):
    journal: Journal

    def __init__(self, journal: Journal, *, desk: Desk) -> None:
        super().__init__(journal, name="form", instructions=FORM)
        self.desk = desk

    @function_tool
    async def back_to_desk(self) -> Agent:
        """Go back to the front desk."""
        return self.desk

    @function_tool
    async def back_by_update_agent(self) -> str:
        """Go back to the front desk."""
        self.session.update_agent(self.desk)
        return "Going back to the desk"

    @function_tool
    async def to_new_desk(self) -> Agent:
        """Go to a new front desk."""
        return self.journal.make_new_desk()

    @function_tool
    async def finish_and_transfer(self) -> str:
        """File the form and go to a new front desk."""
        self.complete("form filed")
        self.session.update_agent(self.journal.make_new_desk())
        return "Transferring you"

    @function_tool
    async def verify(self) -> str:
        """Verify the caller."""
        return await await_task(self.journal, "form", VerifyTask(self.journal, desk=self.desk, form=self))


class VerifyTask(JournalingTask[str]):
    journal: Journal

    def __init__(self, journal: Journal, *, desk: Desk, form: FormTask) -> None:
        super().__init__(journal, name="verify", instructions=VERIFY)
        self.desk = desk
        self.form = form

    @function_tool
    async def back_to_desk(self) -> Agent:
        """Go back to the front desk."""
        return self.desk

    @function_tool
    async def back_to_form(self) -> Agent:
        """Go back to the form."""
        return self.form

    @function_tool
    async def to_new_desk(self) -> Agent:
        """Go to a new front desk."""
        return self.journal.make_new_desk()


def answer(request: Request) -> str:
    return f"answer of {request.instructions}"


def requests(model: ScriptedLLM | ScriptedRealtimeModel) -> list[Request]:
    return list(model.calls) if isinstance(model, ScriptedLLM) else list(model.generations)


def pushed_outputs(rt_session: ScriptedRealtimeSession) -> list[str]:
    """Names of the function outputs pushed to a scripted realtime session."""
    return [
        n for e in rt_session.calls if e.method == "update_chat_ctx" for n in e.args["new_function_outputs"]
    ]


def answered_output(request: Request, name: str) -> llm.FunctionCallOutput | None:
    for item in request.chat_ctx.items:
        if item.type == "function_call_output" and item.name == name:
            return item
    return None


MODELS = pytest.mark.parametrize("kind", MODEL_KINDS)


async def enter_form(session: AgentSession[Any]) -> None:
    await bounded(session.run(user_input="I need to fill in a form"), what="session.run() entering the form")
    assert isinstance(session.current_agent, FormTask)


async def in_the_form(
    make_session: MakeSession, kind: str, *then: str
) -> tuple[Any, Journal, Desk, AgentSession[Any]]:
    """A session of the desk on a ``kind`` model whose script calls ``open_form``, then the tools
    ``then`` names, one a request; returns once the form runs (:func:`enter_form`)."""
    script = [Reply(tool_calls=[tool_call(name)]) for name in ("open_form", *then)]
    model = scripted_model(kind, script, fallback=answer)
    journal = Journal()
    desk = Desk(journal)
    session = await make_session(desk, llm=model)
    await enter_form(session)
    return model, journal, desk, session


# handed back from outside any run, stock starts nothing at all: the desk's answer never comes
@pytest.mark.upstream_bug(
    "livekit/agents#4746", raises=BoundedWaitTimeout, match="the desk's answer after update_agent"
)
@MODELS
@pytest.mark.parametrize("how", ["back_to_desk", "back_by_update_agent", "update_agent_from_outside"])
async def test_handing_back_resumes_the_suspended_agent(
    make_session: MakeSession, kind: str, how: str
) -> None:
    then = [how] if how != "update_agent_from_outside" else []
    model, journal, desk, session = await in_the_form(make_session, kind, *then)
    before = len(requests(model))

    if how == "update_agent_from_outside":
        # the application hands back while the task waits for the user, outside any run
        answered = asyncio.ensure_future(
            wait_for_event(
                session,
                "conversation_item_added",
                lambda ev: ev.item.type == "message" and ev.item.role == "assistant",
            )
        )
        session.update_agent(desk)
        try:
            await answered
        except BoundedWaitTimeout as e:
            raise BoundedWaitTimeout(f"{e} (the desk's answer after update_agent(desk))") from None
    else:
        await bounded(session.run(user_input="take me back to the desk"), what="session.run() handing back")

    # resumed, not restarted: no second on_enter, and it never exited
    assert session.current_agent is desk
    assert journal.events == ["enter desk", "enter form", "exit form"]
    [(awaiting, error)] = journal.results
    assert awaiting == "desk" and isinstance(error, ToolError) and "handed back" in error.message
    assert outputs(session)["open_form"].is_error
    # the desk answers its tool call's error: the last request of the turn is the desk's
    after = requests(model)[before:]
    assert [r.instructions for r in after][-1] == DESK
    desk_output = answered_output(after[-1], "open_form")
    assert desk_output is not None and "handed back" in desk_output.output
    assert spoken(session)[-1] == f"answer of {DESK}"

    # and the desk, not the task, answers the next user turn
    await bounded(session.run(user_input="thanks"), what="session.run() after handing back")
    assert requests(model)[-1].instructions == DESK
    assert journal.events == ["enter desk", "enter form", "exit form"]

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert not late_calls(model)


@BUG
@MODELS
async def test_handing_off_to_a_new_agent_closes_the_suspended_one(
    make_session: MakeSession, kind: str
) -> None:
    model, journal, desk, session = await in_the_form(make_session, kind, "to_new_desk")
    before = len(requests(model))

    await bounded(session.run(user_input="I want another desk"), what="session.run() handing off")

    assert session.current_agent is journal.new_desk
    assert journal.events == ["enter desk", "enter form", "exit form", "exit desk", "enter new desk"]
    # the suspended desk's call gets an error output, and nobody answers it
    [(awaiting, error)] = journal.results
    assert awaiting == "desk" and isinstance(error, ToolError) and "handed off" in error.message
    assert outputs(session)["open_form"].is_error
    assert unanswered_calls(session) == []
    assert len(requests(model)) == before + 1  # only the form's, which called to_new_desk
    if kind == "realtime-reused":
        # the desk's session went to the form and back: the call it issued is answered there
        assert "open_form" in pushed_outputs(model.sessions[0])

    await bounded(session.run(user_input="hello"), what="session.run() after the handoff")
    assert requests(model)[-1].instructions == NEW_DESK

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert not late_calls(model)


# the bug is the hang itself: the desk's tool waits for itself and nothing else happens
@pytest.mark.upstream_bug(
    "livekit/agents#4746", raises=BoundedWaitTimeout, match=r"session\.run\(\) completing and handing off"
)
@MODELS
async def test_task_that_completes_and_hands_off_in_one_tool(make_session: MakeSession, kind: str) -> None:
    """Stock resumes nothing and closes the desk's activity from inside the desk's own tool,
    which waits for itself: ``run()`` never returns."""
    model, journal, desk, session = await in_the_form(make_session, kind, "finish_and_transfer")
    before = len(requests(model))

    await bounded(session.run(user_input="that's all"), what="session.run() completing and handing off")

    assert session.current_agent is journal.new_desk
    assert journal.events == ["enter desk", "enter form", "exit form", "exit desk", "enter new desk"]
    # the desk's tool got the task's result, recorded as its output, and the desk leaves
    # without answering it: the form's reply to its own tool is the only request
    assert journal.results == [("desk", "form filed")]
    assert outputs(session)["open_form"].output == "form filed"
    assert unanswered_calls(session) == []
    assert [r.instructions for r in requests(model)[before:]] == [FORM, FORM]

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert not late_calls(model)


@BUG
@pytest.mark.parametrize("target", ["back_to_desk", "back_to_form", "to_new_desk"])
async def test_handing_off_from_a_nested_task(make_session: MakeSession, target: str) -> None:
    model, journal, desk, session = await in_the_form(make_session, "pipeline", "verify", target)
    await bounded(session.run(user_input="verify me"), what="session.run() entering the verification")
    verify = session.current_agent
    assert isinstance(verify, VerifyTask)
    form = verify.form
    before = len(requests(model))

    await bounded(session.run(user_input="done here"), what="session.run() leaving the verification")

    got = {awaiting: result for awaiting, result in journal.results}
    entered = ["enter desk", "enter form", "enter verify", "exit verify"]
    if target == "back_to_form":
        # the form resumes and answers; the desk stays suspended under it
        assert session.current_agent is form
        assert journal.events == entered
        assert list(got) == ["form"] and "handed back" in str(got["form"])
        assert [r.instructions for r in requests(model)[before:]][-1] == FORM
    else:
        arriving = desk if target == "back_to_desk" else journal.new_desk
        assert session.current_agent is arriving
        # both suspended tools, the form's and the desk's, are told why they end
        assert set(got) == {"form", "desk"}, f"tools that got a result: {journal.results}"
        # the form is left without a word, the desk resumes (or leaves for the new one)
        assert isinstance(got["form"], ToolError) and "handed off" in str(got["form"])
        assert isinstance(got["desk"], ToolError)
        assert outputs(session)["verify"].is_error and outputs(session)["open_form"].is_error
        assert unanswered_calls(session) == []
        assert FORM not in [r.instructions for r in requests(model)[before:]]
        if target == "back_to_desk":
            assert journal.events == [*entered, "exit form"]
            assert "handed back" in str(got["desk"])
            assert [r.instructions for r in requests(model)[before:]][-1] == DESK
        else:
            assert journal.events == [*entered, "exit form", "exit desk", "enter new desk"]
            assert "handed off" in str(got["desk"])
            assert len(requests(model)) == before + 1

    await bounded(session.aclose(), what="AgentSession.aclose")


@BUG
@MODELS
async def test_input_while_handing_back_past_a_task_is_for_the_agent_handed_back_to(
    make_session: MakeSession, kind: str
) -> None:
    """The verification nested in the form hands back to the desk, and the user speaks during
    its on_exit: the form resumes on the way only to leave, and the desk answers the input."""
    model, journal, desk, session = await in_the_form(make_session, kind, "verify", "back_to_desk")
    await bounded(session.run(user_input="verify me"), what="session.run() entering the verification")
    assert isinstance(session.current_agent, VerifyTask)
    before = len(requests(model))

    gate = journal.exit_gates["verify"] = Gate("verify on_exit")
    exiting = asyncio.ensure_future(journal.exiting["verify"].wait())
    handing_back = asyncio.ensure_future(session.run(user_input="done here"))
    try:
        await bounded(asyncio.wait([exiting, handing_back], return_when=asyncio.FIRST_COMPLETED))
    finally:
        exiting.cancel()
    assert journal.exiting["verify"].is_set(), "handing back to the desk did not close the verification"
    current_during_on_exit = session.current_agent
    try:
        handle = session.generate_reply(user_input="one more thing")
    finally:
        gate.open()
    await bounded(handle, what="the answer to the input")
    await bounded(handing_back, what="session.run() leaving the verification")

    # the desk answers it, once (it answers its tool's error too); the form says nothing
    replies = [i.text_content for i in handle.chat_items if i.type == "message" and i.role == "assistant"]
    assert replies == [f"answer of {DESK}"]
    assert FORM not in [r.instructions for r in requests(model)[before:]]
    assert session.current_agent is desk and current_during_on_exit is desk
    assert journal.events == ["enter desk", "enter form", "enter verify", "exit verify", "exit form"]
    assert unanswered_calls(session) == []

    await bounded(session.aclose(), what="AgentSession.aclose")
    assert not late_calls(model)


@BUG
async def test_update_agent_refuses_an_agent_that_already_runs(make_session: MakeSession) -> None:
    elsewhere = Desk(Journal(), name="elsewhere")
    other = await make_session(elsewhere, llm=ScriptedLLM(fallback=answer))
    journal = Journal()
    desk = Desk(journal)
    session = await make_session(desk, llm=ScriptedLLM(fallback=answer))

    refused: RuntimeError | None = None
    try:
        session.update_agent(elsewhere)
    except RuntimeError as e:
        refused = e

    # nothing changed: the session still runs, and says, the desk
    assert session.current_agent is desk, f"the session now says {session.current_agent!r}"
    assert other.current_agent is elsewhere
    # and the caller is told at once
    assert refused is not None and "already running" in str(refused)
    await bounded(session.run(user_input="hello"), what="session.run() after the refused handoff")
    assert journal.events == ["enter desk"]
