"""Guards: what a session already gets right about input and speech around a handoff (pass
on stock 1.8.9 and on the fork).

Routing user input to the agent a handoff ends with (livekit/agents#3129, see
tests/regression/test_3129_input_to_the_final_agent.py) must leave these as they are:

* ``generate_reply(user_input=...)`` with no handoff is answered by the current agent, once;
* a tool of the leaving agent that hands off and then calls ``session.say()``: the leaving
  agent says it, once;
* a goodbye the leaving agent asks for itself in ``on_exit`` (``generate_reply`` with
  instructions, no user input) is its own;
* back-to-back ``update_agent(b)`` and ``update_agent(c)``, and the user speaks as c
  enters: c answers, once, and neither a nor b says anything;
* input given with a handoff the session closes before the target runs: its reply is
  interrupted, nobody says an answer, nothing is logged at ERROR;
* input given while the leaving agent runs ``on_exit``, whose reply the application
  interrupts before it starts: nobody answers it, and it stays in the history, once.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import function_tool

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    scripted_model,
    spoken,
    tool_call,
)
from tests.fakes.history import user_messages

AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
AGENT_C = "You are agent C."
GOODBYE = "Say goodbye to the caller."
TRANSFERRING = "One moment, I'm transferring you."
USER_INPUT = "Actually, it's about a refund."

Request = LLMCall | RTGeneration
MODELS = pytest.mark.parametrize("kind", MODEL_KINDS)


def last_user_text(request: Request) -> str | None:
    for item in reversed(request.chat_ctx.items):
        if item.type == "message" and item.role == "user":
            return item.text_content
    return None


def answer(request: Request) -> str:
    extra = request.extra_instructions if isinstance(request, RTGeneration) else None
    if extra == GOODBYE or (isinstance(request, LLMCall) and GOODBYE in request.system_texts):
        return f"{request.instructions} says goodbye"
    return f"{request.instructions} answers: {last_user_text(request)}"


def requests(model: ScriptedLLM | ScriptedRealtimeModel) -> list[Request]:
    return list(model.calls) if isinstance(model, ScriptedLLM) else list(model.generations)


def answers_to(model: ScriptedLLM | ScriptedRealtimeModel, text: str) -> list[str | None]:
    """Instructions of the agents whose requests answer the user's ``text``."""
    return [
        r.instructions
        for r in requests(model)
        if last_user_text(r) == text
        and (r.source == "generate_reply" if isinstance(r, RTGeneration) else True)
    ]


@MODELS
async def test_input_with_no_handoff_is_answered_by_the_current_agent(
    make_session: MakeSession, kind: str
) -> None:
    model = scripted_model(kind, fallback=answer)
    journal = fakes.Journal()
    session = await make_session(JournalingAgent(journal, name="a", instructions=AGENT_A), llm=model)

    handle = session.generate_reply(user_input=USER_INPUT)
    await bounded(handle, what="the answer to the input")

    assert not handle.interrupted and handle.exception() is None
    assert answers_to(model, USER_INPUT) == [AGENT_A]
    assert spoken(session) == [f"{AGENT_A} answers: {USER_INPUT}"]
    assert user_messages(session, USER_INPUT) == 1
    assert journal.events == ["enter a"]


class Transferring(JournalingAgent):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="a", instructions=AGENT_A)
        self.b = JournalingAgent(journal, name="b", instructions=AGENT_B)

    @function_tool
    async def transfer(self) -> str:
        """Transfer the caller to agent B."""
        self.session.update_agent(self.b)
        self.session.say(TRANSFERRING)
        return "Transferred"


async def test_say_from_the_leaving_agents_tool_is_its_own(make_session: MakeSession) -> None:
    model = ScriptedLLM([Reply(tool_calls=[tool_call("transfer")])], fallback=answer)
    journal = fakes.Journal()
    a = Transferring(journal)
    session = await make_session(a, llm=model)

    await bounded(session.run(user_input="Transfer me."), what="session.run() across the handoff")

    assert session.current_agent is a.b
    assert journal.events == ["enter a", "exit a", "enter b"]
    assert spoken(session).count(TRANSFERRING) == 1
    said = [i.text_content for i in a.chat_ctx.items if i.type == "message" and i.role == "assistant"]
    assert TRANSFERRING in said


class SaysGoodbye(JournalingAgent):
    async def on_exit(self) -> None:
        await super().on_exit()
        await self.session.generate_reply(instructions=GOODBYE)


@MODELS
async def test_a_goodbye_asked_for_in_on_exit_is_the_leaving_agents_own(
    make_session: MakeSession, kind: str
) -> None:
    model = scripted_model(kind, fallback=answer)
    journal = fakes.Journal()
    a = SaysGoodbye(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    session = await make_session(a, llm=model)

    session.update_agent(b)
    await bounded(journal.entered["b"].wait(), what="b's on_enter")

    assert session.current_agent is b
    assert journal.events == ["enter a", "exit a", "enter b"]
    assert spoken(session) == [f"{AGENT_A} says goodbye"]
    assert [r.instructions for r in requests(model)] == [AGENT_A]


class Entering(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate, **kwargs: Any) -> None:
        super().__init__(journal, **kwargs)
        self.gate = gate

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.gate.wait()


@MODELS
async def test_input_as_the_last_of_back_to_back_handoffs_enters(
    make_session: MakeSession, kind: str
) -> None:
    model = scripted_model(kind, fallback=answer)
    journal = fakes.Journal()
    gate = Gate("c on_enter")
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    c = Entering(journal, gate, name="c", instructions=AGENT_C)
    session = await make_session(a, llm=model)

    session.update_agent(b)
    session.update_agent(c)
    await gate.reached()
    try:
        handle = session.generate_reply(user_input=USER_INPUT)
    finally:
        gate.open()
    await bounded(handle, what="the answer to the input")

    assert not handle.interrupted and handle.exception() is None
    assert answers_to(model, USER_INPUT) == [AGENT_C]
    assert spoken(session) == [f"{AGENT_C} answers: {USER_INPUT}"]
    assert user_messages(session, USER_INPUT) == 1
    assert session.current_agent is c
    assert journal.events == ["enter a", "exit a", "enter b", "exit b", "enter c"]


@MODELS
async def test_input_with_a_handoff_the_session_closes_before(make_session: MakeSession, kind: str) -> None:
    model = scripted_model(kind, fallback=answer)
    journal = fakes.Journal()
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    session = await make_session(a, llm=model)

    session.update_agent(b)
    handle = session.generate_reply(user_input=USER_INPUT)
    await bounded(session.aclose(), what="AgentSession.aclose")
    await bounded(handle, what="the reply to the input")

    # a pipeline reply may have started generating, but nobody says it
    assert handle.interrupted
    assert spoken(session) == []


async def test_input_during_a_handoff_interrupted_before_its_answer_stays_recorded(
    make_session: MakeSession,
) -> None:
    model = ScriptedLLM([], fallback=answer)
    journal = fakes.Journal()
    exit_gate = journal.exit_gates["a"] = Gate("a on_exit")
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    session = await make_session(a, llm=model)

    session.update_agent(b)
    await exit_gate.reached()
    try:
        handle = session.generate_reply(user_input=USER_INPUT)
        # the application takes it back before anyone could answer (a barge-in, a new input)
        handle.interrupt()
    finally:
        exit_gate.open()
    await bounded(handle, what="the interrupted reply")
    await bounded(journal.entered["b"].wait(), what="b's on_enter")
    await bounded(session.wait_for_idle(), what="b idle")

    assert handle.interrupted
    assert spoken(session) == []
    # the user said it: it is in the history, although nobody answered it
    assert user_messages(session, USER_INPUT) == 1
