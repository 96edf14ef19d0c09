"""livekit/agents#3129: a reply the inline ``AgentTask`` is still saying as it completes.

An agent awaits an inline task. The caller speaks to the task, the task answers, and the task
completes while that answer is still under way (its LLM streams, or its audio plays).
``AgentTask.__await_impl()`` merges the task's context into the agent's and only then resumes
the agent (``AgentSession._update_activity(..., "resume")``), which drains the task's activity
first: the answer lands in the task's context after the merge, never in the agent's. The
agent's next reply (to the tool's output, or to the caller's next turn) then sees the caller's
question with nothing answering it, and a model answers it again: the caller hears the same
question answered twice, by the task and by the agent, whose ``on_user_turn_completed`` never
saw it.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent, function_tool

from tests import fakes
from tests.fakes import (
    Caller,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    tool_call,
)
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

DESK = "You are the front desk."
FORM = "You collect the form."
QUESTION = "Which form is it?"
ANSWER = "It is the blue form."
NEXT = "Thanks, what now?"
FILLED = "form filled"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.handed_back = asyncio.Event()


class FormTask(fakes.JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM)


class Desk(JournalingAgent):
    """Awaits the form as it enters."""

    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        self.journal.results.append(await FormTask(self.journal))
        self.journal.handed_back.set()


@BUG
async def test_a_reply_the_task_says_as_it_completes_reaches_the_agent_it_returns_to(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    answering = Gate("the form's answer streaming")
    desk_calls: list[LLMCall] = []

    def answer(call: LLMCall) -> Reply:
        if call.instructions == FORM and call.last_user_text == QUESTION:
            return Reply(ANSWER, hold=answering)
        if call.instructions == DESK:
            desk_calls.append(call)
        return Reply(f"{call.instructions} answers {call.last_user_text}")

    caller = Caller()
    session = await make_session(
        Desk(journal, name="desk", instructions=DESK),
        llm=ScriptedLLM([], fallback=answer),
        **caller.session_kwargs(),
    )
    caller.attach(session)

    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)

    await caller.say(QUESTION)
    await answering.reached()
    # the form completes while its answer to the caller is still to come
    task.complete(FILLED)
    answering.open()
    await bounded(journal.handed_back.wait(), what="the desk resuming with the form's result")
    assert journal.results == [FILLED]
    await bounded(session.wait_for_idle(), what="the session settling on the desk")
    assert ANSWER in [m.text_content for m in session.history.messages()], "the form never answered"

    await caller.say(NEXT)
    await bounded(session.wait_for_idle(), what="the desk's reply")
    assert desk_calls, "the desk never answered the caller's next turn"
    seen = [i.text_content for i in desk_calls[-1].chat_ctx.items if i.type == "message"]
    assert QUESTION in seen
    # the bug: the desk's context has the caller's question, not the form's answer to it
    assert ANSWER in seen, f"the desk replied without the form's answer to the caller: {seen}"


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["session-reused", "session-replaced"])
async def test_a_reply_the_task_says_as_it_completes_reaches_the_realtime_model_it_returns_to(
    make_session: MakeSession, reuse: bool
) -> None:
    # the same with a realtime model whose server detects the caller's turns: the agent's
    # realtime session is given the agent's context as it resumes, before the late merge
    journal = Journal()
    answering = Gate("the form's answer streaming")
    desk_generations: list[RTGeneration] = []

    def answer(gen: RTGeneration) -> Reply:
        users = [m.text_content for m in gen.chat_ctx.messages() if m.role == "user"]
        if gen.instructions == FORM and users[-1:] == [QUESTION]:
            return Reply(ANSWER, hold=answering)
        if gen.instructions == DESK:
            desk_generations.append(gen)
        return Reply(f"{gen.instructions} answers {users[-1:]}")

    model = ScriptedRealtimeModel(fallback=answer, reuse=reuse, turn_detection=True, user_transcription=True)
    session = await make_session(Desk(journal, name="desk", instructions=DESK), llm=model)

    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)

    model.live_sessions[-1].simulate_user_turn(QUESTION)
    await answering.reached()
    # the form completes while its answer to the caller is still to come
    task.complete(FILLED)
    answering.open()
    await bounded(journal.handed_back.wait(), what="the desk resuming with the form's result")
    assert journal.results == [FILLED]
    await bounded(session.wait_for_idle(), what="the session settling on the desk")
    assert ANSWER in [m.text_content for m in session.history.messages()], "the form never answered"

    model.live_sessions[-1].simulate_user_turn(NEXT)
    await bounded(session.wait_for_idle(), what="the desk's reply")
    assert desk_generations, "the desk never answered the caller's next turn"
    seen = [m.text_content for m in desk_generations[-1].chat_ctx.messages()]
    assert QUESTION in seen
    # the bug: the desk's model has the caller's question, not the form's answer to it
    assert ANSWER in seen, f"the desk's model replied without the form's answer to the caller: {seen}"


# -- the task's tool hands off as the task's activity drains --

BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
OPEN_FORM = "I want to fill in the form."


class TransferringForm(fakes.JournalingTask[str]):
    def __init__(self, journal: Journal, transferring: Gate) -> None:
        super().__init__(journal, name="form", instructions=FORM)
        self.transferring = transferring

    @function_tool
    async def transfer(self) -> Agent:
        """Put the caller through to billing."""
        await self.transferring.wait()
        return JournalingAgent(self.journal, name="billing", instructions=BILLING)


class FormDesk(JournalingAgent):
    """Awaits the form in a tool."""

    journal: Journal

    def __init__(self, journal: Journal, transferring: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.transferring = transferring

    @function_tool
    async def fill_form(self) -> str:
        """Collect the caller's form."""
        result = await TransferringForm(self.journal, self.transferring)
        self.journal.results.append(result)
        self.journal.handed_back.set()
        return result


@BUG
async def test_an_agent_a_task_hands_past_as_it_drains_does_not_reply_to_its_result(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    transferring = Gate("the form's transfer tool")
    desk_replies: list[LLMCall] = []

    def answer(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.last_user_text == OPEN_FORM and call.tool_choice != "none":
            return Reply(tool_calls=[tool_call("fill_form")])
        if call.instructions == FORM and call.last_user_text == TO_BILLING and call.tool_choice != "none":
            return Reply(tool_calls=[tool_call("transfer")])
        if call.instructions == DESK:
            desk_replies.append(call)
        return Reply(f"{call.instructions} answers {call.last_user_text}")

    caller = Caller()
    session = await make_session(
        FormDesk(journal, transferring), llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, TransferringForm)
    await settled_on(session, task)

    await caller.say(TO_BILLING)
    await transferring.reached()
    # the form completes while its tool puts the caller through: its activity drains, and the
    # tool returns billing on the way
    task.complete(FILLED)
    transferring.open()
    await bounded(journal.handed_back.wait(), what="the desk getting the form's result")
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await settled_on(session, session.current_agent)
    assert journal.results == [FILLED]
    assert session.current_agent.instructions == BILLING

    # the bug: the desk, which the caller was put past, answers the form's result (its reply
    # reads the caller's request as still open: the form's call is not in its context)
    assert [c.reply.full_text for c in desk_replies if c.reply] == [], (
        "the desk replied after the caller was put through"
    )
