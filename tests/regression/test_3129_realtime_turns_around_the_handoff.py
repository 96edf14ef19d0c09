"""livekit/agents#3129: server-detected turns whose reply comes up once a handoff began.

The caller speaks to a realtime model whose server detects the turns. The rule (CONTRIBUTING.md,
"Spoken turns"): every turn is recorded once and answered once, by the agent the handoff in
progress leaves current. These are the windows where the model's reply and the handoff cross:
the reply is queued behind the tool that hands off, the realtime session that would reply closes,
the session is handed on before the model replied, several turns are handed over at once, and
an inline task completes before the reply it got came up.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, RunContext, function_tool, llm, utils

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import desk_realtime_model
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
FORM = "You collect the form."
TO_BILLING = "Put me through to billing."
SPOKEN = "Actually, it's about a refund."
SPOKEN_2 = "A refund for last month."
SPOKEN_3 = "The one from the 12th."


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.billing: JournalingAgent | None = None
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        user_text = users[-1].text_content if users else None
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


class Desk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, *, as_it_returns: str | None = None) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.as_it_returns = as_it_returns

    @function_tool
    async def to_billing(self, ctx: RunContext) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = JournalingAgent(self.journal, name="billing", instructions=BILLING)
        if self.as_it_returns is not None:
            # what the desk said before the call played out: the caller's turn does not cut it.
            # It ends as the tool returns billing, before the handoff begins
            await ctx.wait_for_playout()
            assert self._activity is not None
            rt = self._activity.realtime_llm_session
            assert isinstance(rt, fakes.ScriptedRealtimeSession)
            rt.simulate_user_turn(self.as_it_returns)
        return billing


def _model(journal: Journal, *, reuse: bool, **kwargs: Any) -> ScriptedRealtimeModel:
    return desk_realtime_model(journal.answer, reuse=reuse, **kwargs)


def _answers_to(session: Any, text: str) -> list[str]:
    """The replies to ``text`` that played (the assistant messages of the history)."""
    return [t for t in spoken(session) if t.endswith(f"answers: {text}")]


def _said_once(session: Any, text: str) -> None:
    said = [i for i in session.history.items if i.type == "message" and i.text_content == text]
    assert len(said) == 1, f"{text!r} is in {len(said)} user messages of the history"


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_reply_queued_behind_the_tool_that_hands_off_is_the_arriving_agents(
    make_session: MakeSession,
) -> None:
    """The caller's turn ends as the desk's tool returns billing: the server's reply to it
    comes up once the handoff began, before the desk's on_exit. It is not the desk's to
    start: billing answers the turn."""
    journal = Journal()
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal, as_it_returns=SPOKEN), llm=model)

    model.sessions[-1].simulate_user_turn(TO_BILLING)
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    _said_once(session, SPOKEN)
    # the bug: the desk's reply plays after its tool handed the caller over
    assert _answers_to(session, SPOKEN) == [f"{BILLING} answers: {SPOKEN}"], journal.answers


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_transcribed_turn_whose_realtime_session_closes_is_answered(
    make_session: MakeSession,
) -> None:
    """Session replaced: the caller's turn is transcribed while the desk leaves, and the
    desk's realtime session closes before its model replied. Billing answers it."""
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = _model(journal, reuse=False)
    session = await make_session(Desk(journal), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    try:
        rt.simulate_user_turn(SPOKEN, respond=False)
    finally:
        gate.open()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert model.sessions[-1] is not rt and rt.closed, "billing has a realtime session of its own"

    _said_once(session, SPOKEN)
    assert _answers_to(session, SPOKEN) == [f"{BILLING} answers: {SPOKEN}"], journal.answers


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_the_model_replies_to_after_the_session_was_handed_on(
    make_session: MakeSession,
) -> None:
    """Session reused: the turn is transcribed while the desk leaves; the model replies once
    billing took the session over. Billing's context, which the session gets as billing
    starts, keeps the turn, and that reply answers it."""
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    try:
        rt.simulate_user_turn(SPOKEN, respond=False)
    finally:
        gate.open()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert model.sessions[-1] is rt, "the realtime session is handed on"

    rt.emit_generation()  # the model's reply to the turn, late
    await settled_on(session, billing)

    _said_once(session, SPOKEN)
    assert _answers_to(session, SPOKEN) == [f"{BILLING} answers: {SPOKEN}"], journal.answers


class SlowToolset(llm.Toolset):
    """Billing's tools, whose setup takes a while: the realtime session, handed on by the
    desk, waits for billing's activity meanwhile."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(id="billing_tools")
        self.gate = gate

    async def setup(self) -> SlowToolset:
        await self.gate.wait()
        return self


class SlowDesk(Desk):
    def __init__(self, journal: Journal, *, setup_gate: Gate) -> None:
        super().__init__(journal)
        self.setup_gate = setup_gate

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = JournalingAgent(
            self.journal, name="billing", instructions=BILLING, tools=[SlowToolset(self.setup_gate)]
        )
        return billing


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_while_the_realtime_session_is_handed_on_is_answered(
    make_session: MakeSession,
) -> None:
    """Session reused: the caller's turn comes in after the desk handed the realtime session on
    and before billing took it (billing's tools still set up). Nobody listened to the session:
    the turn, transcript and reply, was lost. Billing hears it as it takes the session over."""
    journal = Journal()
    setup_gate = Gate("billing's tools setup")
    model = _model(journal, reuse=True)
    session = await make_session(SlowDesk(journal, setup_gate=setup_gate), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await setup_gate.reached()
    assert journal.events[-1] == "exit desk", journal.events
    try:
        rt.simulate_user_turn(SPOKEN)
    finally:
        setup_gate.open()
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert model.sessions[-1] is rt, "the realtime session is handed on"

    _said_once(session, SPOKEN)
    assert _answers_to(session, SPOKEN) == [f"{BILLING} answers: {SPOKEN}"], journal.answers


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_server_turns_handed_over_together_are_answered_once(
    make_session: MakeSession,
) -> None:
    """Three turns the server detects while the desk leaves: all recorded, and billing answers
    once, with all three in its context (the earlier ones are superseded)."""
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = _model(journal, reuse=False)
    session = await make_session(Desk(journal), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    try:
        for text in (SPOKEN, SPOKEN_2, SPOKEN_3):
            rt.simulate_user_turn(text)
    finally:
        gate.open()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    for text in (SPOKEN, SPOKEN_2, SPOKEN_3):
        _said_once(session, text)
    # the bug: billing answers each of them, the last one three times
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SPOKEN_3}"], (
        journal.answers
    )


CLERK = "You are the refunds clerk."
GREET = "Greet the caller."


class GreetingBilling(JournalingAgent):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.session.generate_reply(instructions=GREET)


class GreetingDesk(Desk):
    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = GreetingBilling(self.journal, name="billing", instructions=BILLING)
        return billing


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_handed_over_turn_whose_reply_comes_up_after_the_next_handoff_began(
    make_session: MakeSession,
) -> None:
    """A turn the server detected while the desk left is billing's; billing's reply to it
    waits behind its greeting, and the application hands the caller on to the refunds clerk
    meanwhile. Billing is leaving before its reply comes up: the clerk answers the turn."""
    journal = Journal()
    exit_gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    greeting = Gate("billing's greeting")

    def reply(gen: RTGeneration) -> Any:
        if gen.extra_instructions == GREET:
            return Reply("Billing here.", first_token_delay=greeting.wait)
        return journal.answer(gen)

    model = desk_realtime_model(reply, reuse=False)
    session = await make_session(GreetingDesk(journal), llm=model)

    model.sessions[-1].simulate_user_turn(TO_BILLING)
    await exit_gate.reached()
    try:
        model.sessions[-1].simulate_user_turn(SPOKEN)
    finally:
        exit_gate.open()
    await greeting.reached()
    clerk = JournalingAgent(journal, name="clerk", instructions=CLERK)
    try:
        session.update_agent(clerk)
    finally:
        greeting.open()
    await bounded(journal.entered["clerk"].wait(), what="the clerk's on_enter")
    await settled_on(session, clerk)

    _said_once(session, SPOKEN)
    # the bug: billing asks its model for the reply after its on_exit began
    assert _answers_to(session, SPOKEN) == [f"{CLERK} answers: {SPOKEN}"], journal.answers


# -- an inline task that completes before the reply it got comes up --

OPEN_FORM = "I want to fill in the form."


class FormTask(fakes.JournalingTask[str]):
    pass


class FormDesk(JournalingAgent):
    journal: Journal

    @function_tool
    async def open_form(self) -> None:
        """Collect the caller's form."""
        # no reply to the tool's output: the desk's answer to the turn is its only reply
        self.journal.results.append(await FormTask(self.journal, name="form", instructions=FORM))


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_reply_that_comes_up_after_its_inline_task_completed_is_the_agents(
    make_session: MakeSession,
) -> None:
    """Session reused: the server creates its reply to a turn while the form task runs, and
    the caller is still speaking, so it waits; the task completes before it comes up, and the
    transcript comes after. The task is done: the desk it returns to answers the turn."""
    journal = Journal()
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("open_form")])],
        fallback=journal.answer,
        reuse=True,
        turn_detection=True,
        user_transcription=True,
    )
    desk = FormDesk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(OPEN_FORM)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)

    item_id = utils.shortuuid("fake_user_")
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
    rt.emit_generation()
    task.complete("form filled")
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    await bounded(journal.exited["form"].wait(), what="the form's on_exit")
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    await settled_on(session, desk)

    _said_once(session, SPOKEN)
    # the bug: the task answers it after it completed
    assert _answers_to(session, SPOKEN) == [f"{DESK} answers: {SPOKEN}"], journal.answers
