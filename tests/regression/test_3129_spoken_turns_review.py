"""livekit/agents#3129: spoken turns around a handoff, the cases a review of the hand-over found open.

Stock 1.8.9 drops every turn that ends while the activity that heard it is handed over. The
rule (CONTRIBUTING.md, "Spoken turns"): every final user turn is recorded once and answered
once, by the agent the handoff in progress leaves current, unless a later turn supersedes it;
nothing the user said is lost. Each case here drives a real AgentSession through the caller
fakes (``tests.fakes.speech``):

* **The arriving agent greets without interruptions.** The turn ended before the greeting
  began, so the greeting cannot be what it interrupts; it must still be recorded and answered
  once the greeting is over, not dropped as a barge-in on a speech that allows none.
* **Text input after a spoken turn, both during one handoff.** The caller's turn ended first,
  then the application sent typed input: both are the arriving agent's, in that order. The
  earlier spoken turn must not cut the answer to the later text short.
* **A realtime model whose turns the session's VAD and STT end** (no server-side turn
  detection). The turn's audio went to the leaving activity's realtime session, and the
  handoff cleared it (or replaced the session): the model that answers must get the turn,
  as the STT's transcript, not answer a commit of nothing.
* **Input between back-to-back handoffs.** ``update_agent(b)``, the turn ends (or text comes)
  while the first agent is in its ``on_exit()``, then ``update_agent(c)``, all before b runs:
  the input is the last agent's; b, which leaves at once, asks for nothing after its
  ``on_exit()`` began.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm

from tests.fakes import (
    Caller,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import (
    BILLING,
    DESK,
    SPOKEN,
    TO_BILLING,
    Desk,
    DeskJournal,
    Pondering,
    answer,
    spoken_session,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
AGENT_C = "You are agent C."
TYPED = "My invoice number is 1234."
GREET = "Greet the caller."
GREETING = "Welcome to billing."


class Journal(DeskJournal):
    def answers(self, text: str) -> list[str | None]:
        """The instructions of each request that answers the user's ``text``."""
        return [call.instructions for call in self.requests_for(text)]


class Greeting(JournalingAgent):
    """Greets the caller as it enters, in a speech the caller cannot interrupt."""

    async def on_enter(self) -> None:
        await super().on_enter()
        self.session.generate_reply(instructions=GREET, allow_interruptions=False)


async def speaking(session: AgentSession[Any], agent: Agent) -> None:
    """Bounded: ``agent``'s activity runs a speech (the scheduling task authorized one)."""

    async def _wait() -> None:
        while (activity := agent._activity) is None or activity._current_speech is None:  # noqa: ASYNC110
            await asyncio.sleep(0)  # one loop step for the scheduling task; no timer

    await bounded(_wait(), what=f"{agent.label} speaking")


# -- the arriving agent's greeting allows no interruption --


@BUG
async def test_a_turn_handed_over_during_an_uninterruptible_greeting_is_recorded_and_answered(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    greeting = Gate("billing's greeting")

    def reply(call: LLMCall) -> Reply:
        last = call.chat_ctx.items[-1]
        if call.instructions == BILLING and last.type == "message" and last.text_content == GREET:
            return Reply(GREETING, first_token_delay=greeting.wait)
        return answer(call)

    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal, reply)
    journal.billing_cls = Greeting

    await caller.say(TO_BILLING)
    async with gate.held():
        # the desk leaves: the caller's turn ends before billing runs and greets
        await caller.say(SPOKEN)
    await greeting.reached()
    billing = journal.billing
    assert billing is not None
    await speaking(session, billing)
    greeting.open()
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert spoken(session) == [GREETING, f"{BILLING} answers: {SPOKEN}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


# -- text input after a spoken turn, both during one handoff --


@BUG
async def test_text_input_after_a_spoken_turn_during_a_handoff_are_both_answered(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        # the desk leaves: the caller's turn ends, then the application sends typed input
        await caller.say(SPOKEN)
        handle = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the answer to the typed input")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    assert user_messages(session, SPOKEN) == 1
    assert user_messages(session, TYPED) == 1
    assert journal.answers(SPOKEN) == [BILLING]
    assert journal.answers(TYPED) == [BILLING]
    assert not handle.interrupted, "the earlier spoken turn cut the answer to the later text short"
    assert spoken(session) == [f"{BILLING} answers: {SPOKEN}", f"{BILLING} answers: {TYPED}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


# -- update_agent(b), the turn, update_agent(c) --


@BUG
@pytest.mark.parametrize("input_kind", ["spoken", "typed"])
async def test_a_turn_between_back_to_back_handoffs_is_answered_by_the_last_agent(
    make_session: MakeSession, input_kind: str
) -> None:
    journal = Journal()
    gate = journal.exit_gates["a"] = Gate("a on_exit")
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    c = JournalingAgent(journal, name="c", instructions=AGENT_C)
    session, caller, _ = await spoken_session(make_session, a, journal)

    session.update_agent(b)
    async with gate.held():
        if input_kind == "spoken":
            await caller.say(SPOKEN)
        else:
            session.generate_reply(user_input=SPOKEN)
        session.update_agent(c)
    await settled_on(session, c)

    assert user_messages(session, SPOKEN) == 1
    # b asks for nothing once its on_exit began
    assert [c.instructions for c, events in journal.requests if "exit b" in events] == [AGENT_C]
    assert journal.answers(SPOKEN) == [AGENT_C]
    assert spoken(session) == [f"{AGENT_C} answers: {SPOKEN}"]
    assert journal.events == ["enter a", "exit a", "enter b", "exit b", "enter c"]


# -- a realtime model whose turns the session's VAD and STT detect --


class RealtimeDesk(JournalingAgent):
    journal: Journal

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = JournalingAgent(self.journal, name="billing", instructions=BILLING)
        return billing


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["realtime-reused", "realtime-replaced"])
async def test_a_turn_handed_over_to_a_realtime_agent_is_heard_by_the_model_that_answers_it(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")

    def reply(gen: RTGeneration) -> str:
        return f"{gen.instructions} answers"

    model = ScriptedRealtimeModel([Reply(tool_calls=[tool_call("to_billing")])], fallback=reply, reuse=reuse)
    caller = Caller()
    session = await make_session(
        RealtimeDesk(journal, name="desk", instructions=DESK), llm=model, **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(TO_BILLING)
    async with gate.held():
        # the session's VAD and STT end the caller's turn while the desk leaves
        await caller.say(SPOKEN)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    answers = [e for e in model.journal if e.method == "generate_reply" and e.args["instructions"] is None]
    # the bug: nobody answers the turn
    assert len(answers) == 2, answers
    rt = answers[-1].session
    # what that session heard of the turn: its audio since the last commit (or clear), or its text
    heard = 0
    for e in rt.journal:
        if e.seq > answers[-1].seq:
            break
        if e.method == "push_audio":
            heard += 1
        elif e.method in ("commit_audio", "clear_audio") and e.seq < answers[-1].seq - 1:
            heard = 0
    said = [i.text_content for i in rt.chat_ctx.items if i.type == "message" and i.role == "user"]
    assert heard > 0 or SPOKEN in said, (
        f"the model answering the turn never heard it: {[(e.method, e.args) for e in rt.journal]}"
    )
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


# -- where a handed-over turn lands in the history --


@BUG
async def test_a_turn_handed_over_keeps_its_place_in_the_history(make_session: MakeSession) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    desk = Desk(journal)
    session, caller, _ = await spoken_session(make_session, desk, journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        # the caller's turn ends as the desk leaves; then the application sends typed input
        await caller.say(SPOKEN)
        handle = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the answer to the typed input")
    assert journal.billing is not None
    await settled_on(session, journal.billing)

    def order(items: list[llm.ChatItem]) -> list[str]:
        return [
            "handoff" if i.type == "agent_handoff" else i.text_content or ""
            for i in items
            if i.type == "agent_handoff" or (i.type == "message" and i.role == "user")
        ]

    # both said before the handoff was over, the spoken turn first
    assert order(session.history.items) == ["handoff", TO_BILLING, SPOKEN, TYPED, "handoff"]
    assert order(journal.billing.chat_ctx.items)[-2:] == [SPOKEN, TYPED]
    assert user_messages(session, SPOKEN) == 1


# -- the user_turn span of a handed-over turn --


@pytest.fixture
def spans() -> Any:
    from livekit.agents import telemetry
    from livekit.agents.telemetry.traces import tracer
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracer._tracer_provider
    telemetry.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        tracer.set_provider(previous if previous is not None else trace.get_tracer_provider())
        provider.shutdown()


@BUG
@pytest.mark.parametrize("heard_in", ["on_exit", "on_user_turn_completed"])
async def test_a_turn_handed_over_ends_its_user_turn_span_after_the_arriving_agents_hook(
    make_session: MakeSession, spans: Any, heard_in: str
) -> None:
    """The ``user_turn`` span covers the turn up to the ``on_user_turn_completed`` of the
    agent that answers it, as for a turn with no handoff."""
    journal = Journal()
    hook = Gate("desk's on_user_turn_completed")
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    a = Pondering(journal, hook, name="desk", instructions=DESK)
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)
    session, caller, _ = await spoken_session(make_session, a, journal)

    if heard_in == "on_exit":
        hook.open()
        session.update_agent(billing)
        async with gate.held():
            await caller.say(SPOKEN)
    else:
        gate.open()
        await caller.say(SPOKEN)
        await hook.reached()
        # the desk's hook is still at it when the application hands over
        session.update_agent(billing)
        hook.open()
    await settled_on(session, billing)

    assert journal.answers(SPOKEN) == [BILLING]
    finished = spans.get_finished_spans()
    hooks = [
        s
        for s in finished
        if s.name == "on_user_turn_completed" and (s.attributes or {}).get("lk.agent_label") == billing.label
    ]
    assert len(hooks) == 1, [(s.name, dict(s.attributes or {})) for s in finished]
    (billing_hook,) = hooks
    assert billing_hook.parent is not None, "the arriving agent's hook runs outside the turn's user_turn span"
    (turn_span,) = [s for s in finished if s.context.span_id == billing_hook.parent.span_id]
    assert turn_span.name == "user_turn"
    assert turn_span.end_time is not None and billing_hook.end_time is not None
    assert turn_span.end_time >= billing_hook.end_time, "the user_turn span ended before the turn's hook ran"


# -- a turn the session's STT ended, handed to a realtime agent whose server detects turns --


class ToRealtimeDesk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, model: ScriptedRealtimeModel, **kwargs: Any) -> None:
        super().__init__(journal, **kwargs)
        self.model = model

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = JournalingAgent(
            self.journal, name="billing", instructions=BILLING, llm=self.model
        )
        return billing


@BUG
async def test_a_turn_handed_over_to_a_realtime_agent_with_server_turn_detection_is_answered(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")

    def reply(gen: RTGeneration) -> str:
        users = [i.text_content for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        return f"{gen.instructions} answers: {users[-1] if users else None}"

    model = ScriptedRealtimeModel(
        [], fallback=reply, turn_detection=True, can_disable_turn_detection=False, user_transcription=True
    )
    desk = ToRealtimeDesk(journal, model, name="desk", instructions=DESK)
    session, caller, _ = await spoken_session(make_session, desk, journal)

    await caller.say(TO_BILLING)
    async with gate.held():
        # the pipeline desk's STT ends the caller's turn while it leaves
        await caller.say(SPOKEN)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1, spoken(session)
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
