"""A spoken turn that ends during a handoff is recorded and answered by the agent taking over
(livekit/agents#3129, "Forward user input to next activity").

Callers talk: their turn ends when the VAD, the STT or the turn detector says so, not when
the application calls ``generate_reply()``. On stock 1.8.9 a turn that ends while the
activity is being handed over (its scheduling draining or paused, or its new turns blocked by
``update_agent()``) goes to ``AgentActivity.on_end_of_turn()``'s "skipping user input, speech
scheduling is paused" branch: nobody answers it, and since the session is not closing, the
user's message is not even added to the history. Here the caller's audio goes through the
session's real audio input, VAD and STT (``tests.fakes.speech``), and the turn ends:

* while the leaving agent voices its handoff message (a tool returned
  ``(Billing(), "Transferring you")``);
* while an inline ``AgentTask`` starts (the agent awaiting it still says what comes, and its
  activity pauses for the task once it said it);
* while an inline ``AgentTask`` returns (it answers its own tool's output as it drains);
* as the application calls ``update_agent()`` (from the final transcript's event).

The fork records the turn once and has the agent the handoff ends with answer it, once, after
its ``on_enter`` started; the leaving agent answers nothing after its ``on_exit`` began. (The
caller's final transcript interrupts what the leaving agent was saying, as any barge-in does.)
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import RunContext, function_tool, llm

from tests.fakes import (
    Gate,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    bounded,
    spoken,
    tool_call,
    unanswered_calls,
)
from tests.fakes.desks import (
    BILLING,
    DESK,
    SPOKEN,
    TO_BILLING,
    DeskJournal,
    SlowSetup,
    spoken_session,
)
from tests.fakes.desks import Desk as FrontDesk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

FORM = "You collect the form."
AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
VOICED = "One moment, I'm transferring you to billing."
OPEN_FORM = "I want to fill in the form."
FILE_IT = "Please file it."
FILED = "Your form is filed."
OPENING = "Tell the caller you open the form."
OPENED = "Let me open the form for you."


class Journal(DeskJournal):
    """What the agents did, every model request with the lifecycle events before it, and the
    gates a test holds the handoff on."""

    def __init__(self) -> None:
        super().__init__()
        self.setup_gates: dict[str, Gate] = {}
        self.billing_cls = Billing

    def toolsets(self, name: str) -> list[llm.Tool | llm.Toolset]:
        gate = self.setup_gates.get(name)
        return [SlowSetup(gate, id=f"slow_setup_{gate.name.replace(' ', '_')}")] if gate is not None else []

    def answers(self, text: str) -> list[tuple[str | None, tuple[str, ...]]]:
        """(instructions, events before it) of each request that answers the user's ``text``:
        its last user message, and not a handoff message (``tool_choice="none"``)."""
        return [
            (call.instructions, events)
            for call, events in self.requests
            if call.last_user_text == text and call.tool_choice != "none"
        ]


def is_said(item: llm.ChatItem) -> bool:
    """A user or assistant message, or a tool's output (the instructions are not)."""
    return item.type == "function_call_output" or (
        item.type == "message" and item.role in ("user", "assistant")
    )


def last_said(call: LLMCall) -> llm.ChatItem | None:
    said = [i for i in call.chat_ctx.items if is_said(i)]
    return said[-1] if said else None


class Billing(JournalingAgent):
    pass


class Desk(FrontDesk):
    journal: Journal

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        # the desk tells the caller what comes: its activity pauses for the task once it said it
        self.session.generate_reply(instructions=OPENING)
        result = await FormTask(self.journal)
        self.journal.results.append(result)
        return result


class FormTask(JournalingTask[str]):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM, tools=journal.toolsets("form"))

    @function_tool
    async def file_form(self, ctx: RunContext[Any]) -> str:
        """File the completed form."""
        self.complete("form filed")
        return "Filed"


def answer(call: LLMCall) -> Reply:
    last = call.chat_ctx.items[-1]
    if last.type == "message" and last.role == "system" and last.text_content == OPENING:
        return Reply(OPENED)
    last = last_said(call)
    if last is not None and last.type == "message" and last.role == "user":
        if call.instructions == DESK and last.text_content == TO_BILLING:
            return Reply(tool_calls=[tool_call("to_billing")])
        if call.instructions == DESK and last.text_content == OPEN_FORM:
            return Reply(tool_calls=[tool_call("open_form")])
        if call.instructions == FORM and last.text_content == FILE_IT:
            return Reply(tool_calls=[tool_call("file_form")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


# -- the leaving agent voices its handoff message --


@BUG
async def test_a_turn_ending_while_the_leaving_agent_voices_the_handoff_is_answered_by_the_arriving_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = Gate("voicing")

    def reply(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.tool_choice == "none":
            return Reply(VOICED, first_token_delay=gate.wait)
        return answer(call)

    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal, reply)

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    # the bug: the turn is skipped, not even recorded
    assert user_messages(session, SPOKEN) == 1
    answers = journal.answers(SPOKEN)
    assert [i for i, _ in answers] == [BILLING]
    assert "enter billing" in answers[0][1]
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
    assert unanswered_calls(session) == []


# -- an inline AgentTask starts --


@BUG
async def test_a_turn_ending_while_an_inline_task_starts_is_answered_by_the_task(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = Gate("desk pausing")

    def reply(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        if last.type == "message" and last.role == "system" and last.text_content == OPENING:
            # the desk's activity pauses for the task only once this is said
            return Reply(OPENED, first_token_delay=gate.wait)
        return answer(call)

    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal, reply)

    await caller.say(OPEN_FORM)
    async with gate.held():
        await caller.say(SPOKEN)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)

    assert user_messages(session, SPOKEN) == 1
    answers = journal.answers(SPOKEN)
    assert [i for i, _ in answers] == [FORM]
    assert spoken(session).count(f"{FORM} answers: {SPOKEN}") == 1
    assert journal.events == ["enter desk", "enter form"]

    await caller.say(FILE_IT)
    await settled_on(session, desk)
    assert journal.results == ["form filed"]
    assert journal.events == ["enter desk", "enter form", "exit form"]


# -- an inline AgentTask returns: it answers its own tool's output as it drains --


@BUG
async def test_a_turn_ending_while_an_inline_task_returns_is_answered_by_its_caller(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = Gate("draining")

    def reply(call: LLMCall) -> Reply:
        if call.instructions == FORM and (said := last_said(call)) and said.type == "function_call_output":
            return Reply(FILED, first_token_delay=gate.wait)
        return answer(call)

    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal, reply)

    await caller.say(OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)

    await caller.say(FILE_IT)
    async with gate.held():
        await caller.say(SPOKEN)
    await bounded(journal.exited["form"].wait(), what="the form's on_exit")
    await settled_on(session, desk)

    assert user_messages(session, SPOKEN) == 1
    answers = journal.answers(SPOKEN)
    assert [i for i, _ in answers] == [DESK]
    assert "exit form" in answers[0][1]
    assert spoken(session).count(f"{DESK} answers: {SPOKEN}") == 1
    assert journal.results == ["form filed"]
    assert journal.events == ["enter desk", "enter form", "exit form"]


# -- update_agent() as the turn ends --


@BUG
async def test_a_turn_ending_as_update_agent_is_called_is_answered_by_the_new_agent(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    session, caller, _ = await spoken_session(make_session, a, journal, answer)

    def on_transcribed(ev: Any) -> None:
        # the final transcript is in: its end of turn runs in the next loop steps
        if ev.is_final and ev.transcript == SPOKEN:
            session.update_agent(b)

    session.on("user_input_transcribed", on_transcribed)
    await caller.say(SPOKEN)
    await settled_on(session, b)

    assert user_messages(session, SPOKEN) == 1
    answers = journal.answers(SPOKEN)
    assert [i for i, _ in answers] == [AGENT_B]
    assert "enter b" in answers[0][1]
    assert spoken(session) == [f"{AGENT_B} answers: {SPOKEN}"]
    assert journal.events == ["enter a", "exit a", "enter b"]
