"""User input during a handoff is answered by the agent the handoff ends with
(livekit/agents#3129, "Forward user input to next activity").

The user speaks (``session.generate_reply(user_input=...)``, or ``session.run(user_input=...)``)
while the session is on its way to an agent whose activity does not exist yet:

* a pass-over: the desk's tool awaits an inline form task, and a tool of the form hands off
  to another desk. On the way the first desk resumes, only so its tool gets an error, and
  leaves. Input during the form's ``on_exit`` is answered on stock by the form after its
  ``on_exit``, which leaves the desk suspended. Our 0009 queued it on the activity resumed on
  the way, so the desk that was leaving answered it;
* the application calls ``session.update_agent(b)`` and gives input in the same tick, before
  the handoff started: on stock, and on the fork before this fix, the leaving agent answers
  it after its ``on_exit``;
* back-to-back ``update_agent(b)``, input, ``update_agent(c)`` in one tick: stock has the
  first agent answer it, after its ``on_exit``.

The fork answers the input on the agent the handoff ends with, once it exists and after its
``on_enter`` started: the reply's handle is returned at once (``speech_created`` too), the
user message is in the history once, answered once, and ``run()`` returns after the answer.
``current_agent`` names that agent throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest
from livekit.agents import Agent, AgentSession, RunContext, ToolError, function_tool
from livekit.agents.voice import SpeechHandle
from livekit.agents.voice.events import SpeechCreatedEvent

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
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
    scripted_model,
    spoken,
    tool_call,
    unanswered_calls,
)
from tests.fakes.history import user_messages

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

DESK = "You are the front desk."
FORM = "You collect the form."
OTHER = "You are the other desk."
AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
AGENT_C = "You are agent C."
OPEN_FORM = "I need to fill in a form."
TO_OTHER = "Put me through to the other desk."
USER_INPUT = "Actually, it's about a refund."

Request = LLMCall | RTGeneration
Via = Literal["generate_reply", "run"]


def last_user_text(request: Request) -> str | None:
    for item in reversed(request.chat_ctx.items):
        if item.type == "message" and item.role == "user":
            return item.text_content
    return None


@dataclass
class Seen:
    """A model request, and what the agents had done when it was made."""

    instructions: str | None
    user_text: str | None
    """The last user message it was given."""
    fresh_turn: bool
    """It comes last: the request answers it, not a tool's output that came after it."""
    events: tuple[str, ...]


class Journal(fakes.Journal):
    """Lifecycle events, and every request the model got with the events up to it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Seen] = []
        self.other: Other | None = None

    def answer(self, request: Request) -> Reply:
        user_text = last_user_text(request)
        said = [
            i
            for i in request.chat_ctx.items
            if i.type == "function_call_output" or (i.type == "message" and i.role in ("user", "assistant"))
        ]
        fresh_turn = bool(said) and said[-1].type == "message" and said[-1].role == "user"
        self.seen.append(Seen(request.instructions, user_text, fresh_turn, tuple(self.events)))
        if fresh_turn and request.instructions == DESK and user_text == OPEN_FORM:
            return Reply(tool_calls=[tool_call("open_form")])
        if fresh_turn and request.instructions == FORM and user_text == TO_OTHER:
            return Reply(tool_calls=[tool_call("to_other")])
        return Reply(f"{request.instructions} answers: {user_text}")

    def answers(self, text: str) -> list[Seen]:
        """The requests that answer the user's ``text``."""
        return [s for s in self.seen if s.user_text == text and s.fresh_turn]


def requests(model: ScriptedLLM | ScriptedRealtimeModel) -> list[Request]:
    return list(model.calls) if isinstance(model, ScriptedLLM) else list(model.generations)


def created_speeches(session: AgentSession[Any]) -> list[SpeechHandle]:
    handles: list[SpeechHandle] = []

    def on_created(ev: SpeechCreatedEvent) -> None:
        handles.append(ev.speech_handle)

    session.on("speech_created", on_created)
    return handles


# -- a pass-over: from inside an inline task to an agent other than the one it suspended --


class Other(JournalingAgent):
    pass


async def await_task(journal: Journal, awaiting: str, task: JournalingTask[str]) -> str:
    """Await an inline task from a tool, recording the error the tool got."""
    try:
        return await task
    except ToolError as e:
        journal.results.append((awaiting, e))
        raise


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        return await await_task(self.journal, "desk", FormTask(self.journal))


class FormTask(JournalingTask[str]):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM)

    @function_tool
    async def to_other(self, ctx: RunContext[Any]) -> Agent:
        """Put the caller through to the other desk."""
        self.journal.other = Other(self.journal, name="other", instructions=OTHER)
        return self.journal.other


@BUG
@pytest.mark.parametrize("via", ["generate_reply", "run"])
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_input_during_a_pass_over_is_answered_by_the_agent_taking_over(
    make_session: MakeSession, kind: str, via: Via
) -> None:
    journal = Journal()
    model = scripted_model(kind, fallback=journal.answer)
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input=OPEN_FORM), what="session.run() into the form")
    assert isinstance(session.current_agent, FormTask)

    gate = journal.exit_gates["form"] = Gate("form on_exit")
    created = created_speeches(session)
    handing_off: Any
    if via == "run":
        # the pass-over outside any run, so the user's input can start one
        handing_off = session.generate_reply(user_input=TO_OTHER)
    else:
        handing_off = session.run(user_input=TO_OTHER)
    await gate.reached()
    current_during_on_exit = session.current_agent
    try:
        if via == "run":
            answered: Any = session.run(user_input=USER_INPUT)
        else:
            answered = session.generate_reply(user_input=USER_INPUT)
            # returned at once, and announced, though the agent has no activity yet
            assert created[-1] is answered
    finally:
        gate.open()
    await bounded(handing_off, what="the pass-over")
    await bounded(answered, what="the answer to the input")

    # answered once, by the agent taking over, after its on_enter started
    answers = journal.answers(USER_INPUT)
    assert [a.instructions for a in answers] == [OTHER]
    assert "enter other" in answers[0].events
    assert spoken(session)[-1] == f"{OTHER} answers: {USER_INPUT}"
    assert user_messages(session, USER_INPUT) == 1

    other = journal.other
    assert other is not None
    assert session.current_agent is other
    assert current_during_on_exit is other
    assert journal.events == ["enter desk", "enter form", "exit form", "exit desk", "enter other"]
    # the desk's tool got its error, and nobody left a call unanswered
    [(awaiting, error)] = journal.results
    assert awaiting == "desk" and isinstance(error, ToolError) and "handed off" in error.message
    assert unanswered_calls(session) == []
    assert not late_calls(model)

    await bounded(session.run(user_input="Thanks."), what="the next turn")
    assert requests(model)[-1].instructions == OTHER


# -- update_agent() and the input in the same tick, before the handoff started --


@BUG
@pytest.mark.parametrize("via", ["generate_reply", "run"])
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_input_in_the_same_tick_as_update_agent_is_answered_by_the_new_agent(
    make_session: MakeSession, kind: str, via: Via
) -> None:
    journal = Journal()
    model = scripted_model(kind, fallback=journal.answer)
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    session = await make_session(a, llm=model)
    created = created_speeches(session)

    session.update_agent(b)
    answered: Any = (
        session.run(user_input=USER_INPUT) if via == "run" else session.generate_reply(user_input=USER_INPUT)
    )
    assert session.current_agent is b
    if via == "generate_reply":
        assert created == [answered]
    await bounded(answered, what="the answer to the input")

    answers = journal.answers(USER_INPUT)
    assert [a.instructions for a in answers] == [AGENT_B]
    assert "enter b" in answers[0].events
    # the leaving agent asks for nothing once its on_exit began
    assert [s for s in journal.seen if "exit a" in s.events and s.instructions == AGENT_A] == []
    assert spoken(session) == [f"{AGENT_B} answers: {USER_INPUT}"]
    assert user_messages(session, USER_INPUT) == 1
    assert journal.events == ["enter a", "exit a", "enter b"]
    assert not late_calls(model)


# -- back to back: update_agent(b), the input, update_agent(c) --


@BUG
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_input_between_back_to_back_handoffs_is_answered_by_the_last_agent(
    make_session: MakeSession, kind: str
) -> None:
    journal = Journal()
    model = scripted_model(kind, fallback=journal.answer)
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    c = JournalingAgent(journal, name="c", instructions=AGENT_C)
    session = await make_session(a, llm=model)

    session.update_agent(b)
    handle = session.generate_reply(user_input=USER_INPUT)
    session.update_agent(c)
    await bounded(handle, what="the answer to the input")

    answers = journal.answers(USER_INPUT)
    assert [a.instructions for a in answers] == [AGENT_C]
    assert "enter c" in answers[0].events
    assert spoken(session) == [f"{AGENT_C} answers: {USER_INPUT}"]
    assert user_messages(session, USER_INPUT) == 1
    assert not handle.interrupted and handle.exception() is None
    assert session.current_agent is c
    assert journal.events == ["enter a", "exit a", "enter b", "exit b", "enter c"]
