"""livekit/agents#3129: spoken turns around a handoff, the cases a second review attacked.

Stock 1.8.9 drops every turn that ends while the activity that heard it is handed over. The
rule (CONTRIBUTING.md, "Spoken turns"): every final user turn is recorded once and answered
once, by the agent the handoff in progress leaves current, whoever detects its end (VAD, STT,
a turn detector) and whatever the leaving agent is doing; nothing the user said is lost.

* the events of a handed-over turn (``conversation_item_added``, the final
  ``user_input_transcribed``) come once each, and the history keeps the caller's order;
* the STT ends the turn (``turn_detection="stt"``);
* the leaving agent voices its handoff message in a speech the caller cannot interrupt;
* preemptive generation is on;
* three ``update_agent()`` calls in a row, a spoken turn and typed input between them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, RunResult, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import (
    Caller,
    ErrorLogCapture,
    Gate,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import (
    BILLING,
    DESK,
    SPOKEN,
    TO_BILLING,
    TRANSFERRING,
    Desk,
    DeskJournal,
    SlowSetup,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
AGENT_C = "You are agent C."
AGENT_D = "You are agent D."
TYPED = "My invoice number is 1234."


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        # (instructions, the last user text, the journal's events then) of each LLM request
        self.seen: list[tuple[str | None, str | None, tuple[str, ...]]] = []

    def answers(self, text: str) -> list[str | None]:
        return [instructions for instructions, last, _ in self.seen if last == text]

    def asked_after(self, event: str) -> list[str | None]:
        return [instructions for instructions, _, events in self.seen if event in events]


def answering(journal: Journal, voicing: Gate | None = None) -> Any:
    def answer(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.tool_choice == "none":
            return Reply(TRANSFERRING, first_token_delay=voicing.wait if voicing is not None else None)
        if call.tool_choice != "none":
            journal.seen.append((call.instructions, call.last_user_text, tuple(journal.events)))
        if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
            return Reply(tool_calls=[tool_call("to_billing")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    return answer


async def spoken_session(
    make_session: MakeSession, agent: Agent, journal: Journal, voicing: Gate | None = None, **overrides: Any
) -> tuple[AgentSession[Any], Caller]:
    caller = Caller()
    fake = ScriptedLLM([], fallback=answering(journal, voicing))
    session = await make_session(agent, llm=fake, **caller.session_kwargs(**overrides))
    caller.attach(session)
    return session, caller


def history(session: AgentSession[Any]) -> list[str]:
    out: list[str] = []
    for item in session.history.items:
        if item.type == "message":
            out.append(f"{item.role}: {item.text_content}")
        elif item.type == "agent_handoff":
            out.append("handoff")
    return out


# -- events and history of a handed-over turn --


@BUG
async def test_a_handed_over_turn_emits_its_events_once_in_the_caller_s_order(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(make_session, Desk(journal, message=None), journal)
    added: list[str] = []
    finals: list[str] = []
    session.on(
        "conversation_item_added",
        lambda ev: (
            added.append(ev.item.text_content or "")
            if ev.item.type == "message" and ev.item.role == "user"
            else None
        ),
    )
    session.on("user_input_transcribed", lambda ev: finals.append(ev.transcript) if ev.is_final else None)
    eou: list[Any] = []
    session.on(
        "metrics_collected", lambda ev: eou.append(ev.metrics) if ev.metrics.type == "eou_metrics" else None
    )

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
        handle = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the answer to the typed input")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert added == [TO_BILLING, SPOKEN, TYPED]
    assert finals == [TO_BILLING, SPOKEN]
    assert len(eou) == 2, eou  # one end-of-utterance report per spoken turn
    users = [line for line in history(session) if line.startswith("user: ")]
    assert users == [f"user: {TO_BILLING}", f"user: {SPOKEN}", f"user: {TYPED}"]
    assert journal.answers(SPOKEN) == [BILLING]
    assert journal.answers(TYPED) == [BILLING]


# -- the STT ends the turn --


@BUG
async def test_a_turn_the_stt_ends_during_a_handoff_is_answered_by_the_arriving_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(
        make_session, Desk(journal, message=None), journal, turn_handling={"turn_detection": "stt"}
    )

    async def say_stt(text: str) -> None:
        await caller.start_speaking()
        await caller.interim(text.split(" ")[0])
        await caller.stop_speaking()
        await caller.final(text)
        caller.stt.end_of_speech()
        await caller.turn_ended()

    await say_stt(TO_BILLING)
    async with gate.held():
        await say_stt(SPOKEN)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert journal.asked_after("exit desk") == [BILLING]
    assert spoken(session)[-1] == f"{BILLING} answers: {SPOKEN}"


# -- the leaving agent voices its handoff message without interruptions --


@BUG
async def test_a_turn_during_an_uninterruptible_handoff_message_is_answered_by_the_arriving_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    voicing = Gate("desk voicing the handoff message")
    desk = Desk(journal, allow_interruptions=False)
    session, caller = await spoken_session(make_session, desk, journal, voicing)

    await caller.say(TO_BILLING)
    async with voicing.held():
        await caller.say(SPOKEN)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert spoken(session) == [TRANSFERRING, f"{BILLING} answers: {SPOKEN}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


# -- preemptive generation on --


@BUG
async def test_a_turn_during_a_handoff_with_preemptive_generation_is_answered_once(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(
        make_session,
        Desk(journal, message=None),
        journal,
        turn_handling={"preemptive_generation": {"enabled": True}},
    )

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    # the desk asks nothing once its on_exit began, not even preemptively
    assert journal.asked_after("exit desk") == [BILLING]
    assert journal.answers(SPOKEN) == [BILLING]
    assert spoken(session)[-1] == f"{BILLING} answers: {SPOKEN}"


# -- update_agent() three times in a row --


@BUG
async def test_input_between_three_quick_handoffs_is_answered_by_the_last_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["a"] = Gate("a on_exit")
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    c = JournalingAgent(journal, name="c", instructions=AGENT_C)
    d = JournalingAgent(journal, name="d", instructions=AGENT_D)
    session, caller = await spoken_session(make_session, a, journal)

    session.update_agent(b)
    async with gate.held():
        await caller.say(SPOKEN)
        session.update_agent(c)
        handle = session.generate_reply(user_input=TYPED)
        session.update_agent(d)
    await bounded(handle, what="the answer to the typed input")
    await settled_on(session, d)

    assert user_messages(session, SPOKEN) == 1
    assert user_messages(session, TYPED) == 1
    assert journal.answers(SPOKEN) == [AGENT_D]
    assert journal.answers(TYPED) == [AGENT_D]
    assert journal.asked_after("exit a") == [AGENT_D, AGENT_D]
    assert journal.events == ["enter a", "exit a", "enter b", "exit b", "enter c", "exit c", "enter d"]


# -- session.wait_for_idle() while a spoken turn is handed over --


@BUG
async def test_wait_for_idle_waits_for_the_answer_to_a_turn_handed_over(make_session: MakeSession) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(make_session, Desk(journal, message=None), journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
        idle = asyncio.ensure_future(session.wait_for_idle())
        await asyncio.sleep(0)  # the waiter looks at the session before the handoff goes on
    await bounded(idle, what="session.wait_for_idle()")

    # idle: the caller's turn was answered
    assert journal.answers(SPOKEN) == [BILLING]
    assert spoken(session)[-1:] == [f"{BILLING} answers: {SPOKEN}"]


# -- the session closes while a handed-over turn waits for the arriving agent's start --


def slow_desk(journal: Journal) -> Desk:
    """A desk whose billing agent sets up an MCP-like toolset held on ``"billing setup"``."""
    return Desk(journal, message=None, billing_tools=[SlowSetup(journal.exit_gates["billing setup"])])


@BUG
async def test_a_turn_handed_over_to_an_agent_the_session_closes_before_is_recorded_once(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    setup = journal.exit_gates["billing setup"] = Gate("billing setup")
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(make_session, slow_desk(journal), journal)

    await caller.say(TO_BILLING)
    await gate.reached()
    closing: asyncio.Future[None] | None = None
    try:
        # the turn ends as the desk leaves; the session closes while billing still sets up
        await caller.say(SPOKEN)
        gate.open()
        await setup.reached()
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)
    finally:
        gate.open()
        setup.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")

    assert user_messages(session, SPOKEN) == 1
    # the session closed on the turn: nobody answers it
    assert journal.answers(SPOKEN) == []
    assert spoken(session) == []
    assert session._handoff_input == []


# -- an async tool's result comes back while a handed-over turn waits --

ORDER = "Where is my order?"
SHIPPED = "Order 42 shipped"
FRONT = "You are the front desk."


def lookup_toolset(journal: Journal, lookup: Gate) -> AsyncToolset:
    @function_tool
    async def lookup_order(ctx: RunContext[Any]) -> str:
        """Look the order up."""
        await ctx.update("Looking it up")
        await lookup.wait()
        return SHIPPED

    return AsyncToolset(id="orders", tools=[lookup_order])


@BUG
async def test_an_async_result_during_a_handed_over_turn_reaches_the_arriving_agent_once(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    lookup = Gate("lookup")
    gate = journal.exit_gates["front"] = Gate("front on_exit")
    asked: list[tuple[str | None, str, tuple[str, ...]]] = []
    # billing's requests that hold the lookup's result
    billing_saw_result: list[bool] = []
    lookup_done = asyncio.Event()

    def answer(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        what = last.text_content if last.type == "message" else last.type
        if last.type == "message" and last.role == "user":
            asked.append((call.instructions, what or "", tuple(journal.events)))
        elif last.type == "agent_config_update" and call.last_user_text == SPOKEN:
            # the handed-over turn keeps its place, before the handoff
            asked.append((call.instructions, SPOKEN, tuple(journal.events)))
        if call.instructions == BILLING:
            billing_saw_result.append(
                any(i.type == "function_call_output" and SHIPPED in i.output for i in call.chat_ctx.items)
            )
        if call.instructions == FRONT and what == ORDER:
            return Reply(tool_calls=[tool_call("lookup_order", call_id="call_lookup")])
        return Reply(f"{call.instructions} answers: {what}")

    caller = Caller()
    front = JournalingAgent(journal, name="front", instructions=FRONT)
    session = await make_session(
        front,
        llm=ScriptedLLM([], fallback=answer),
        tools=[lookup_toolset(journal, lookup)],
        **caller.session_kwargs(),
    )
    caller.attach(session)
    session.on(
        "function_tools_executed",
        lambda ev: lookup_done.set() if any(c.call_id == "call_lookup" for c in ev.function_calls) else None,
    )

    await caller.say(ORDER)
    await lookup.reached()
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)
    session.update_agent(billing)
    await gate.reached()
    try:
        await caller.say(SPOKEN)  # handed over, waits for billing
        lookup.open()  # the result comes back meanwhile
        await bounded(lookup_done.wait(), what="the lookup's result")
    finally:
        lookup.open()
        gate.open()
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1
    # the front desk answers no user turn once its on_exit began (its tool's reply is its own)
    assert [i for i, _, events in asked if "exit front" in events and i == FRONT] == [], asked
    assert [i for i, what, _ in asked if what == SPOKEN] == [BILLING]
    outputs = [i for i in session.history.items if i.type == "function_call_output" and SHIPPED in i.output]
    assert len(outputs) == 1
    # billing hears of the result
    assert any(billing_saw_result), asked


# -- nested inline tasks: the inner one returns to the outer one --

FORM = "You collect the form."
VERIFY = "You verify the caller."
OPEN_FORM = "I want to file a form."
VERIFY_ME = "Verify me please."
VERIFIED = "I am verified."


class VerifyTask(JournalingTask[str]):
    @function_tool
    async def verified(self) -> str:
        """The caller is verified."""
        self.complete("ok")
        return "verified"


class FormTask(JournalingTask[str]):
    @function_tool
    async def verify(self) -> str:
        """Verify the caller."""
        return await VerifyTask(self.journal, name="verify", instructions=VERIFY)


class FormDesk(JournalingAgent):
    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        return await FormTask(self.journal, name="form", instructions=FORM)


@BUG
async def test_a_turn_as_a_nested_task_returns_is_answered_by_the_task_it_returns_to(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["verify"] = Gate("verify on_exit")
    calls = {(DESK, OPEN_FORM): "open_form", (FORM, VERIFY_ME): "verify", (VERIFY, VERIFIED): "verified"}

    everything: list[tuple[str | None, str | None, tuple[str, ...]]] = []

    def answer(call: LLMCall) -> Reply:
        everything.append((call.instructions, call.last_user_text, tuple(journal.events)))
        last = call.chat_ctx.items[-1]
        if last.type == "message" and last.role == "user":
            journal.seen.append((call.instructions, call.last_user_text, tuple(journal.events)))
            if (name := calls.get((call.instructions or "", call.last_user_text or ""))) is not None:
                return Reply(tool_calls=[tool_call(name)])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    caller = Caller()
    desk = FormDesk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs())
    caller.attach(session)

    await caller.say(OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form task")
    await caller.say(VERIFY_ME)
    await bounded(journal.entered["verify"].wait(), what="the verify task")
    await caller.say(VERIFIED)
    async with gate.held():
        # the inner task completed and leaves: the turn is the form task's
        await caller.say(SPOKEN)
    form = session.current_agent
    await settled_on(session, form)

    assert isinstance(form, FormTask)
    assert user_messages(session, SPOKEN) == 1
    # the inner task only finishes its own tool's reply; the form task answers the turn once,
    # in the reply to the inner task's result, with the turn in its context
    assert [(i, last) for i, last, events in everything if "exit verify" in events] == [
        (VERIFY, VERIFIED),
        (FORM, SPOKEN),
    ]
    assert spoken(session)[-1] == f"{FORM} answers: {SPOKEN}"
    assert journal.events == ["enter desk", "enter form", "enter verify", "exit verify"]


# -- the answer to a handed-over turn fails --

THANKS = "Thanks, that's all."


@BUG
async def test_a_handed_over_turn_whose_answer_fails_leaves_the_arriving_agent_answering(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    from livekit.agents import APIConnectionError

    error_logs.allow("failed to generate LLM completion|Error in _llm_inference_task|APIConnectionError")
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    base = answering(journal)

    def answer(call: LLMCall) -> Reply:
        reply: Reply = base(call)
        if call.instructions == BILLING and call.last_user_text == SPOKEN:
            return Reply(error=APIConnectionError("the LLM is down", retryable=False))
        return reply

    caller = Caller()
    session = await make_session(
        Desk(journal, message=None), llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
    assert journal.billing is not None
    await settled_on(session, journal.billing)
    await caller.say(THANKS)
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    assert user_messages(session, THANKS) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert journal.answers(THANKS) == [BILLING]
    assert spoken(session)[-1] == f"{BILLING} answers: {THANKS}"
    assert session.current_agent is journal.billing


# -- typed input while the arriving agent starts, and the session closes --


@pytest.mark.upstream_bug("livekit/agents#6313")
async def test_typed_input_while_the_arriving_agent_starts_and_the_session_closes_is_not_answered(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    setup = journal.exit_gates["billing setup"] = Gate("billing setup")
    session = await make_session(slow_desk(journal), llm=ScriptedLLM([], fallback=answering(journal)))

    run: RunResult[Any] = session.run(user_input=TO_BILLING)
    await setup.reached()
    closing: asyncio.Future[None] | None = None
    try:
        try:
            handle = session.generate_reply(user_input=TYPED)
        except RuntimeError as e:
            raise AssertionError(f"the user's input was refused: {e}") from e
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)
    finally:
        setup.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")
    await bounded(asyncio.gather(run, return_exceptions=True), what="session.run()")
    await bounded(handle.wait_for_playout(), what="the handle of the input the session closed on")

    assert user_messages(session, TYPED) == 1
    # the session closed on it: nobody answers it, least of all after on_exit began
    assert journal.answers(TYPED) == []
    assert spoken(session) == []


# -- a turn detector decides the end of turn while the handoff goes on --


class HeldTurnDetector:
    """An end-of-utterance model whose prediction the test holds on a gate (a slow inference)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.predictions = 0

    @property
    def model(self) -> str:
        return "held-eou"

    @property
    def provider(self) -> str:
        return "fake"

    async def unlikely_threshold(self, language: Any) -> float | None:
        return 0.5

    async def supports_language(self, language: Any) -> bool:
        return True

    async def predict_end_of_turn(self, chat_ctx: llm.ChatContext, *, timeout: float | None = None) -> float:
        self.predictions += 1
        await self.gate.wait()
        return 1.0


@BUG
async def test_a_turn_the_turn_detector_ends_during_a_handoff_is_answered_by_the_arriving_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    predicting = Gate("the turn detector's prediction")
    session, caller = await spoken_session(
        make_session,
        Desk(journal, message=None),
        journal,
        turn_handling={"turn_detection": HeldTurnDetector(predicting)},
    )
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)

    try:
        await caller.start_speaking()
        await caller.interim(SPOKEN.split(" ")[0])
        await caller.stop_speaking()
        await caller.final(SPOKEN)
        await predicting.reached()
        # the application hands over while the model decides whether the caller is done
        session.update_agent(billing)
        await gate.reached()
        predicting.open()
        await caller.turn_ended()
    finally:
        predicting.open()
        gate.open()
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert journal.asked_after("exit desk") == [BILLING]
    assert spoken(session)[-1:] == [f"{BILLING} answers: {SPOKEN}"]


# -- the session closes while the leaving agent's on_exit holds a handed-over turn --


@BUG
async def test_a_turn_handed_over_in_on_exit_the_session_closes_on_is_recorded_once(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller = await spoken_session(make_session, Desk(journal, message=None), journal)

    await caller.say(TO_BILLING)
    await gate.reached()
    closing: asyncio.Future[None] | None = None
    try:
        await caller.say(SPOKEN)
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)
    finally:
        gate.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")

    assert user_messages(session, SPOKEN) == 1
    assert journal.answers(SPOKEN) == []
    assert journal.asked_after("exit desk") == []
    assert session._handoff_input == []
