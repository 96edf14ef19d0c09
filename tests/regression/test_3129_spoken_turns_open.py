"""livekit/agents#3129: spoken turns that end during a handoff, beyond the plain case.

Stock 1.8.9 drops every one of these turns. The turn handed over must behave as one of the
arriving agent's own: its ``on_user_turn_completed()`` runs, the message is recorded even
when its answer never starts, a later turn supersedes it, and a task that is over before it
could answer leaves it to the agent it returns to.

Each test drives a real AgentSession through the caller fakes (``tests.fakes.speech``) and
checks what the rule of CONTRIBUTING.md ("Spoken turns") says a user sees: every final turn
recorded once, answered once by the agent the handoff ends with, a later turn superseding
an earlier one, nothing the user said lost.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, llm

from tests import fakes
from tests.fakes import (
    Caller,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    bounded,
    spoken,
)
from tests.fakes.desks import BILLING, DESK, TO_BILLING, Desk, DeskJournal, answer, spoken_session
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

VOICED = "One moment, I'm transferring you to billing."
FIRST = "Actually, it's about a refund."
SECOND = "No wait, it's about my invoice."
POLICY = "Refund policy: 30 days."


class Billing(JournalingAgent):
    pass


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.billing_cls = Billing


class HookedBilling(JournalingAgent):
    """Billing that looks the caller's turn up (RAG) in its on_user_turn_completed."""

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        self.journal.events.append(f"billing heard: {new_message.text_content}")
        turn_ctx.add_message(role="assistant", content=POLICY)


async def voicing_session(
    make_session: MakeSession, journal: Journal
) -> tuple[AgentSession[Any], Caller, Gate]:
    """The desk hands off to billing and its voiced handoff message waits on the gate."""
    gate = Gate("voicing")

    def reply(call: LLMCall) -> Reply:
        if call.instructions == DESK and call.tool_choice == "none":
            return Reply(VOICED, first_token_delay=gate.wait)
        return answer(call)

    session, caller, _ = await spoken_session(make_session, Desk(journal), journal, reply)
    return session, caller, gate


# -- the arriving agent's on_user_turn_completed sees the turn --


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_handed_over_goes_through_the_arriving_agents_on_user_turn_completed(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    journal.billing_cls = HookedBilling
    session, caller, gate = await voicing_session(make_session, journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(FIRST)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, FIRST) == 1
    requests = journal.requests_for(FIRST)
    assert [c.instructions for c in requests] == [BILLING]
    # a spoken turn billing answers is a turn of billing's: its hook (RAG, StopResponse) sees it
    assert f"billing heard: {FIRST}" in journal.events
    assert any(i.type == "message" and i.text_content == POLICY for i in requests[0].chat_ctx.items), (
        "billing answered without what its on_user_turn_completed looked up"
    )


# -- two turns: the first ends during the handoff, the second before billing answered it --


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_handed_over_turn_stays_recorded_when_the_caller_barges_in_on_its_answer(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    session, caller, gate = await voicing_session(make_session, journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        # ends while the desk voices its handoff message (the turn interrupts it, and the
        # handoff goes on): billing is to answer it
        await caller.say(FIRST)
        # the caller goes on before billing's answer started: a barge-in, as on any agent
        await caller.say(SECOND)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    # the bug: FIRST is gone from the history, although the caller said it
    assert user_messages(session, FIRST) == 1
    assert user_messages(session, SECOND) == 1
    requests = journal.requests_for(SECOND)
    assert [c.instructions for c in requests] == [BILLING]
    assert any(i.type == "message" and i.text_content == FIRST for i in requests[0].chat_ctx.items)


# -- two turns end during one handoff (the desk's on_exit): the later one supersedes --


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_two_turns_ending_during_one_handoff_the_later_supersedes(make_session: MakeSession) -> None:
    journal = Journal()
    exit_gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller, _ = await spoken_session(make_session, Desk(journal), journal)

    await caller.say(TO_BILLING)
    async with exit_gate.held():
        await caller.say(FIRST)
        await caller.say(SECOND)
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, FIRST) == 1
    assert user_messages(session, SECOND) == 1
    # the caller said two things before anyone could answer: billing answers once, the later
    # turn with the earlier one in its context, as on its own watch; not FIRST, then SECOND
    answered = [c.last_user_text for c, _ in journal.requests if c.instructions == BILLING]
    assert answered == [SECOND], answered
    assert f"{BILLING} answers: {FIRST}" not in spoken(session)


# -- a turn ends during the handoff, then the session closes before billing runs --


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_ending_during_a_handoff_the_session_then_closes_is_recorded(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    exit_gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    session, caller, _ = await spoken_session(make_session, Desk(journal), journal)

    await caller.say(TO_BILLING)
    await exit_gate.reached()
    closing: asyncio.Future[None] | None = None
    try:
        # the desk is in its on_exit: the turn ends there
        await caller.say(FIRST)
        closing = asyncio.ensure_future(session.aclose())
    finally:
        exit_gate.open()
    assert closing is not None
    await bounded(closing, what="aclose()")

    # nothing the user said may be lost: the session closed, nobody answers, but it is recorded
    assert user_messages(session, FIRST) == 1


# -- an inline task that completes in its own on_enter (a check): the turn ends as it starts --

CHECK = "You check the account."
OPENING = "Tell the caller you check the account."
CHECKING = "Let me check your account first."
MAIN = "You are the main desk."


class CheckTask(fakes.JournalingTask[str]):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete("account ok")


class Main(JournalingAgent):
    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        # it says what comes: its activity pauses for the check once it said it
        self.session.generate_reply(instructions=OPENING)
        self.journal.results.append(await CheckTask(self.journal, name="check", instructions=CHECK))


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_ending_as_a_task_that_completes_at_once_starts_is_answered_by_its_caller(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = Gate("main pausing")

    def reply(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        if last.type == "message" and last.role == "system" and last.text_content == OPENING:
            return Reply(CHECKING, first_token_delay=gate.wait)
        return answer(call)

    main = Main(journal, name="main", instructions=MAIN)
    session, caller, _ = await spoken_session(make_session, main, journal, reply)

    async with gate.held():
        await caller.say(FIRST)
    await bounded(journal.exited["check"].wait(), what="the check's on_exit")
    await settled_on(session, main)

    assert journal.results == ["account ok"]
    assert user_messages(session, FIRST) == 1
    # the check is over before anyone could answer: main answers, once, the check says nothing
    answers = [(c.instructions, events) for c, events in journal.requests if c.last_user_text == FIRST]
    assert [i for i, _ in answers] == [MAIN], (answers, spoken(session), journal.events)
    assert spoken(session).count(f"{MAIN} answers: {FIRST}") == 1
