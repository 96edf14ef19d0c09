"""livekit/agents#5936: an async tool that reports progress, then returns an Agent.

The front desk's ``get_weather`` tool says ``await ctx.update("Please hold on")``, waits on a
Gate the test opens, then returns the weather desk agent (or ``(agent, "Transferring you now")``).
The first update already answered the generation that called the tool, so the return arrives
later, as a deferred ``{call_id}_final`` result. Stock 1.8.9 drops the returned agent: it logs
"agent handoff after a progress update is not supported" at ERROR, turns the output into an
error, reports ``tool_call_ended`` as ``error`` and never hands off. The fork hands off when
the deferred result is delivered, at the next turn boundary, through the same steps as a tool
that returns an agent inline (``function_tools_executed`` with the handoff flagged, which a
listener may veto; the leaving agent voices an output with ``tool_choice="none"``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from livekit.agents import Agent, AgentSession, RunContext, RunResult, function_tool, llm
from livekit.agents.llm import ToolFlag
from livekit.agents.llm.async_toolset import AsyncToolset
from livekit.agents.voice.events import FunctionToolsExecutedEvent, ToolCallEnded
from livekit.agents.voice.run_result import AgentHandoffEvent, ChatMessageEvent

from tests import fakes
from tests.fakes import (
    ErrorLogCapture,
    FakeAudioOutput,
    FakeTTS,
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
    spoken,
    tool_call,
    wait_for_event,
)

BUG = pytest.mark.upstream_bug("livekit/agents#5936")

FRONT = "You are the front desk agent."
WEATHER = "You are the weather desk agent."
BILLING = "You are the billing desk agent."

CALL_ID = "call_weather"
FINAL_ID = f"{CALL_ID}_final"
HOLD_ON = "Please hold on"
HOLD_ON_REPLY = "One moment while I check the weather."
TRANSFER_TEXT = "Transferring you now"
TRANSFER_REPLY = "I'm transferring you to the weather desk."
DROPPED_WARNING = "dropping the agent handoff returned by a tool"

Scope = Literal["method", "agent", "agent_toolset", "session_toolset"]


class Journal(fakes.Journal):
    """What the agents of one test did, and the gates the test holds them on."""

    def __init__(self, *, say: str | None = None) -> None:
        super().__init__()
        self.say = say
        self.tool_gate = Gate("get_weather")
        self.weather: WeatherDesk | None = None

    async def get_weather(self, ctx: RunContext) -> Agent | tuple[Agent, str]:
        await ctx.update(HOLD_ON)
        await self.tool_gate.wait()
        self.weather = WeatherDesk(self)
        return (self.weather, self.say) if self.say is not None else self.weather


class WeatherDesk(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="weather", instructions=WEATHER)


class BillingDesk(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="billing", instructions=BILLING)


class Reception(JournalingAgent):
    """The front desk, with its weather tool wherever the test puts it."""

    journal: Journal

    def __init__(self, journal: Journal, tools: list[Any] | None = None) -> None:
        super().__init__(journal, name="front", instructions=FRONT, tools=tools or [])

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to billing."""
        return BillingDesk(self.journal)


class FrontDesk(Reception):
    """The shape of the issue: the async tool is a method of the agent."""

    @function_tool
    async def get_weather(self, ctx: RunContext) -> Agent | tuple[Agent, str]:
        """Look up the weather."""
        return await self.journal.get_weather(ctx)


def weather_tool(journal: Journal, flags: ToolFlag = ToolFlag.NONE) -> llm.FunctionTool:
    @function_tool(name="get_weather", flags=flags)
    async def get_weather(ctx: RunContext) -> Agent | tuple[Agent, str]:
        """Look up the weather."""
        return await journal.get_weather(ctx)

    return get_weather


def build(
    journal: Journal, scope: Scope, flags: ToolFlag = ToolFlag.NONE
) -> tuple[Reception, dict[str, Any]]:
    """The front desk and extra session kwargs, with ``get_weather`` placed per ``scope``."""
    if scope == "method":
        assert flags == ToolFlag.NONE
        return FrontDesk(journal), {}
    tool = weather_tool(journal, flags)
    if scope == "agent":
        return Reception(journal, [tool]), {}
    toolset = AsyncToolset(id="weather", tools=[tool])
    if scope == "agent_toolset":
        return Reception(journal, [toolset]), {}
    return Reception(journal), {"tools": [toolset]}


async def start(
    make_session: MakeSession, journal: Journal, scope: Scope, model: Any, flags: ToolFlag = ToolFlag.NONE
) -> tuple[Reception, AgentSession[Any]]:
    """:func:`build` the front desk for ``scope`` and start a session with it on ``model``."""
    front, kwargs = build(journal, scope, flags)
    return front, await make_session(front, llm=model, **kwargs)


def ask_weather() -> Reply:
    return Reply(tool_calls=[tool_call("get_weather", call_id=CALL_ID)])


def by_agent(call: LLMCall) -> str:
    """Fallback: any further request is answered in the voice of the agent asking."""
    return {WEATHER: "Weather desk here.", BILLING: "Billing desk here."}.get(call.instructions or "", "")


class Observed:
    """``function_tools_executed`` and ``tool_execution_updated`` events of a session."""

    def __init__(self, session: AgentSession[Any]) -> None:
        self.executed: list[tuple[FunctionToolsExecutedEvent, bool]] = []
        self.updates: list[Any] = []
        # handoff flag as seen at emission, before any later listener vetoes it
        session.on("function_tools_executed", lambda ev: self.executed.append((ev, ev.has_agent_handoff)))
        session.on("tool_execution_updated", lambda ev: self.updates.append(ev.update))

    def deferred(self) -> list[tuple[FunctionToolsExecutedEvent, bool]]:
        return [
            (ev, flag) for ev, flag in self.executed if any(c.call_id == FINAL_ID for c in ev.function_calls)
        ]

    def ended(self) -> list[ToolCallEnded]:
        return [u for u in self.updates if u.type == "tool_call_ended" and u.call_id == CALL_ID]

    def replies_completed(self) -> list[Any]:
        return [
            u
            for u in self.updates
            if u.type == "tool_reply_updated" and u.status == "completed" and FINAL_ID in u.update_ids
        ]


@pytest.fixture
def dropped() -> Iterator[asyncio.Event]:
    """Set when the fork's "dropping the agent handoff" warning is logged."""
    seen = asyncio.Event()

    class _Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if DROPPED_WARNING in record.getMessage():
                seen.set()

    watch = _Watch(logging.WARNING)
    logger = logging.getLogger("livekit.agents")
    logger.addHandler(watch)
    yield seen
    logger.removeHandler(watch)


def is_tool_ended(ev: Any) -> bool:
    return ev.update.type == "tool_call_ended" and ev.update.call_id == CALL_ID


async def release_tool(session: AgentSession[Any], journal: Journal) -> ToolCallEnded:
    """Open the tool's gate and return its terminal ``tool_call_ended`` update."""
    await journal.tool_gate.reached()
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_tool_ended))
    journal.tool_gate.open()
    ev = await ended
    return ev.update


def assert_returned(ended: ToolCallEnded) -> None:
    assert (ended.id, ended.status) == (FINAL_ID, "done"), (
        f"the tool returned an agent but its call ended as {ended.status!r}: {ended.message!r}"
    )


async def ask_and_hold(session: AgentSession[Any], journal: Journal) -> RunResult[Any]:
    """First turn: the tool is called, reports progress, the agent answers it; the tool waits."""
    result = await bounded(session.run(user_input="What's the weather in Paris?"), what="weather turn")
    await journal.tool_gate.reached()
    return result


def handoffs(session: AgentSession[Any]) -> list[tuple[str | None, str]]:
    return [(i.old_agent_id, i.new_agent_id) for i in session.history.items if i.type == "agent_handoff"]


def item_index(session: AgentSession[Any], pred: Any) -> int:
    return next(i for i, item in enumerate(session.history.items) if pred(item))


def assert_final_pair(session: AgentSession[Any], output: str) -> None:
    calls = [i for i in session.history.items if i.type == "function_call" and i.call_id == FINAL_ID]
    outs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID]
    assert len(calls) == 1 and calls[0].name == "get_weather", calls
    assert len(outs) == 1, outs
    assert not outs[0].is_error and outs[0].output == output, outs[0]


def assert_flagged_event(observed: Observed) -> None:
    deferred = observed.deferred()
    assert len(deferred) == 1, [([c.call_id for c in ev.function_calls], f) for ev, f in observed.executed]
    ev, flagged = deferred[0]
    assert flagged, "function_tools_executed for the deferred call does not flag the handoff"
    assert [c.call_id for c in ev.function_calls] == [FINAL_ID]
    assert [o.call_id for o in ev.function_call_outputs] == [FINAL_ID]


def live_tool_tasks() -> list[str]:
    return [
        t.get_name()
        for t in asyncio.all_tasks()
        if not t.done() and t.get_name().startswith(("tool_exec_", "tool_executor_deliver_reply"))
    ]


@BUG
@pytest.mark.parametrize("scope", ["method", "agent", "agent_toolset", "session_toolset"])
async def test_returned_agent_takes_over_after_progress_update(
    make_session: MakeSession, error_logs: ErrorLogCapture, scope: Scope
) -> None:
    journal = Journal()
    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY], fallback=by_agent)
    front, session = await start(make_session, journal, scope, fake)
    observed = Observed(session)

    await ask_and_hold(session, journal)
    assert spoken(session) == [HOLD_ON_REPLY]
    assert fake.calls[1].tool_choice == "none"  # the reply to the progress update

    assert_returned(await release_tool(session, journal))
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter weather"]
    assert handoffs(session) == [(None, front.id), (front.id, weather.id)]
    assert_final_pair(session, "")
    assert_flagged_event(observed)
    assert [(u.id, u.status) for u in observed.ended()] == [(FINAL_ID, "done")]
    # a bare agent has nothing to voice: the front desk made no further request
    assert [c.instructions for c in fake.calls] == [FRONT, FRONT]
    assert not error_logs.records

    # the next turn is the weather desk's
    await bounded(session.run(user_input="Is it sunny?"), what="next turn")
    assert [c.instructions for c in fake.calls] == [FRONT, FRONT, WEATHER]
    assert journal.events == ["enter front", "exit front", "enter weather"]


@BUG
async def test_session_toolset_hands_off_from_the_current_agent(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    journal = Journal()
    fake = ScriptedLLM(
        [ask_weather(), HOLD_ON_REPLY, Reply(tool_calls=[tool_call("to_billing")])], fallback=by_agent
    )
    front, session = await start(make_session, journal, "session_toolset", fake)
    observed = Observed(session)

    await ask_and_hold(session, journal)
    # an ordinary inline handoff while the session-scoped tool still runs
    moved: RunResult[Any] = await bounded(
        session.run(user_input="Put me through to billing."), what="billing turn"
    )
    moved.expect.contains_agent_handoff(new_agent_type=BillingDesk)
    billing = session.current_agent
    assert isinstance(billing, BillingDesk)

    assert_returned(await release_tool(session, journal))
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter billing", "exit billing", "enter weather"]
    assert handoffs(session) == [(None, front.id), (front.id, billing.id), (billing.id, weather.id)]
    assert_final_pair(session, "")
    assert_flagged_event(observed)
    assert not error_logs.records


@BUG
@pytest.mark.parametrize("say", [None, TRANSFER_TEXT], ids=["bare", "with_output"])
async def test_handoff_after_the_user_moved_on(
    make_session: MakeSession, error_logs: ErrorLogCapture, say: str | None
) -> None:
    journal = Journal(say=say)
    script: list[Any] = [ask_weather(), HOLD_ON_REPLY, "It is noon."]
    if say is not None:
        script.append(TRANSFER_REPLY)
    fake = ScriptedLLM(script, fallback=by_agent)
    front, session = await start(make_session, journal, "method", fake)

    await ask_and_hold(session, journal)
    await bounded(session.run(user_input="Meanwhile, what time is it?"), what="unrelated turn")
    assert spoken(session) == [HOLD_ON_REPLY, "It is noon."]
    assert session.current_agent is front

    # the session is idle, and the conversation went on, when the tool returns
    assert_returned(await release_tool(session, journal))
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter weather"]
    assert handoffs(session) == [(None, front.id), (front.id, weather.id)]
    if say is None:
        assert len(fake.calls) == 3
    else:
        assert len(fake.calls) == 4
        assert fake.calls[3].instructions == FRONT and fake.calls[3].tool_choice == "none"
        assert spoken(session) == [HOLD_ON_REPLY, "It is noon.", TRANSFER_REPLY]
    assert fake.unscripted_calls == []
    assert not error_logs.records


@BUG
@pytest.mark.parametrize("busy", ["generating", "speaking"])
async def test_handoff_waits_for_the_reply_in_progress(
    make_session: MakeSession, error_logs: ErrorLogCapture, busy: str
) -> None:
    journal = Journal()
    front, kwargs = build(journal, "method")
    llm_gate = Gate("hold-on reply")
    hold_on = Reply(HOLD_ON_REPLY, first_token_delay=llm_gate.wait if busy == "generating" else None)
    fake = ScriptedLLM([ask_weather(), hold_on], fallback=by_agent)

    audio: FakeAudioOutput | None = None
    playing = asyncio.Event()
    if busy == "speaking":
        audio = FakeAudioOutput(mode="realtime", speed=10.0)

        def hold_playout(_: Any) -> None:
            # hold the first segment mid-playout, from the sink's own start signal
            if not playing.is_set():
                assert audio is not None
                audio.pause()
                playing.set()

        audio.on("playback_started", hold_playout)
        kwargs.update(tts=FakeTTS(), audio_output=audio)
    session = await make_session(front, llm=fake, **kwargs)

    speaking = asyncio.ensure_future(
        wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "speaking")
    )
    result: RunResult[Any] = session.run(user_input="What's the weather in Paris?")
    await journal.tool_gate.reached()
    if busy == "generating":
        await llm_gate.reached()
        speaking.cancel()
    else:
        await bounded(playing.wait(), what="hold-on reply playout")
        await speaking

    assert_returned(await release_tool(session, journal))
    # returned mid-reply: nothing changes until the reply is over
    assert session.current_agent is front
    assert journal.events == ["enter front"]
    assert handoffs(session) == [(None, front.id)]
    assert not result.done()

    if audio is not None:
        audio.resume()
    else:
        llm_gate.open()
    await bounded(result, what="weather turn")
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter weather"]
    # the run that was active when the tool returned records the handoff, after the reply
    kinds = [ev.type for ev in result.events]
    assert "agent_handoff" in kinds, kinds
    handoff_ev = next(ev for ev in result.events if isinstance(ev, AgentHandoffEvent))
    assert handoff_ev.old_agent is front and handoff_ev.new_agent is weather
    reply_pos = next(
        i
        for i, ev in enumerate(result.events)
        if isinstance(ev, ChatMessageEvent) and ev.item.text_content == HOLD_ON_REPLY
    )
    assert reply_pos < kinds.index("agent_handoff"), kinds
    messages = [i for i in session.history.items if i.type == "message" and i.role == "assistant"]
    assert [(m.text_content, m.interrupted) for m in messages] == [(HOLD_ON_REPLY, False)]
    if audio is not None:
        assert len(audio.segments) == 1 and not audio.segments[0].interrupted, audio.segments
    assert [c.outcome for c in fake.calls] == ["completed", "completed"]
    assert not error_logs.records


@BUG
@pytest.mark.parametrize("scope", ["method", "agent_toolset"])
@pytest.mark.parametrize("returns", ["during_on_exit", "after_on_exit"])
async def test_agent_scoped_handoff_of_a_replaced_agent_is_dropped(
    make_session: MakeSession,
    error_logs: ErrorLogCapture,
    caplog: pytest.LogCaptureFixture,
    dropped: asyncio.Event,
    scope: Scope,
    returns: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="livekit.agents")
    journal = Journal()
    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY], fallback=by_agent)
    front, session = await start(make_session, journal, scope, fake)

    await ask_and_hold(session, journal)
    if returns == "during_on_exit":
        journal.exit_gates["front"] = Gate("front on_exit")
    billing = BillingDesk(journal)
    session.update_agent(billing)

    # the (non-cancellable) tool returns while its agent is leaving
    if returns == "during_on_exit":
        await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
        await release_tool(session, journal)
        journal.exit_gates["front"].open()
    else:
        await bounded(journal.exited["front"].wait(), what="front desk on_exit")
        await release_tool(session, journal)
    await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")
    # the return was refused as an error (stock: "agent handoff after a progress update is
    # not supported"), although its agent had been replaced and nothing was to happen
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]
    # the return is dropped once the handoff that replaced its agent is done
    await bounded(dropped.wait(), what="the dropped-handoff warning")

    assert session.current_agent is billing
    assert journal.events == ["enter front", "exit front", "enter billing"]
    assert handoffs(session) == [(None, front.id), (front.id, billing.id)]
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and DROPPED_WARNING in r.getMessage()
    ]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    # the leaving agent says nothing about it
    assert len(fake.calls) == 2


@pytest.mark.parametrize(
    "cancellable",
    [pytest.param(False, marks=BUG, id="awaited"), pytest.param(True, id="cancellable")],
)
@pytest.mark.parametrize("scope", ["agent", "session_toolset"])
async def test_no_handoff_when_the_session_closes_first(
    make_session: MakeSession, error_logs: ErrorLogCapture, scope: Scope, cancellable: bool
) -> None:
    journal = Journal()
    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY], fallback=by_agent)
    front, session = await start(
        make_session, journal, scope, fake, ToolFlag.CANCELLABLE if cancellable else ToolFlag.NONE
    )
    observed = Observed(session)

    await ask_and_hold(session, journal)
    closing = asyncio.ensure_future(session.aclose())
    if not cancellable:
        # close waits for a non-cancellable tool: it returns its agent while the session closes
        await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
        journal.tool_gate.open()
    await bounded(closing, what="AgentSession.aclose")

    assert session.current_agent is front
    assert journal.events == ["enter front", "exit front"]
    assert handoffs(session) == [(None, front.id)]
    if cancellable:
        assert journal.weather is None, "the tool was cancelled before it could return"
    ended = observed.ended()
    assert [(u.id, u.status) for u in ended] == [(FINAL_ID, "cancelled" if cancellable else "done")]
    assert not observed.deferred()
    assert not live_tool_tasks()
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]


@pytest.mark.parametrize("scope", ["agent", "session_toolset"])
async def test_cancelled_tool_does_not_hand_off(
    make_session: MakeSession, error_logs: ErrorLogCapture, scope: Scope
) -> None:
    journal = Journal()
    cancel = Reply(tool_calls=[tool_call("lk_agents_cancel_task", {"call_id": CALL_ID})])
    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY, cancel, "I've cancelled it."], fallback=by_agent)
    front, session = await start(make_session, journal, scope, fake, ToolFlag.CANCELLABLE)
    observed = Observed(session)

    await ask_and_hold(session, journal)
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_tool_ended))
    await bounded(session.run(user_input="Never mind the weather."), what="cancel turn")
    assert (await ended).update.status == "cancelled"
    journal.tool_gate.open()  # too late: the tool is gone

    await bounded(session.run(user_input="Thanks."), what="next turn")
    assert session.current_agent is front
    assert journal.weather is None
    assert journal.events == ["enter front"]
    assert handoffs(session) == [(None, front.id)]
    assert [(u.id, u.status) for u in observed.ended()] == [(FINAL_ID, "cancelled")]
    assert not observed.deferred()
    assert [c.instructions for c in fake.calls] == [FRONT] * 5
    assert not error_logs.records


@BUG
@pytest.mark.parametrize("say", [TRANSFER_TEXT, None], ids=["with_output", "bare"])
async def test_listener_can_veto_the_deferred_handoff(
    make_session: MakeSession, error_logs: ErrorLogCapture, say: str | None
) -> None:
    journal = Journal(say=say)
    script: list[Any] = [ask_weather(), HOLD_ON_REPLY]
    if say is not None:
        script.append("Sorry, the weather desk is closed, I can help you myself.")
    script.append("You're welcome.")
    fake = ScriptedLLM(script)
    front, session = await start(make_session, journal, "method", fake)
    observed = Observed(session)
    vetoed: list[bool] = []

    def veto(ev: FunctionToolsExecutedEvent) -> None:
        if any(c.call_id == FINAL_ID for c in ev.function_calls):
            vetoed.append(ev.has_agent_handoff)
            ev.cancel_agent_handoff()

    session.on("function_tools_executed", veto)
    await ask_and_hold(session, journal)

    delivered = asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: (
                ev.update.type == "tool_reply_updated"
                and ev.update.status == "completed"
                and FINAL_ID in ev.update.update_ids
            ),
        )
        if say is not None
        else wait_for_event(
            session,
            "function_tools_executed",
            lambda ev: any(c.call_id == FINAL_ID for c in ev.function_calls),
        )
    )
    assert_returned(await release_tool(session, journal))
    await delivered
    assert vetoed == [True]

    await bounded(session.run(user_input="Thanks."), what="next turn")
    assert session.current_agent is front
    assert journal.events == ["enter front"]
    assert handoffs(session) == [(None, front.id)]
    assert_final_pair(session, say or "")
    assert [c.instructions for c in fake.calls] == [FRONT] * len(fake.calls)
    if say is not None:
        # answered as any other result: by the agent that stays, free to call its tools
        assert len(fake.calls) == 4
        answer = fake.calls[2]
        assert answer.tool_choice is None and "to_billing" in answer.tools
        outputs = [i for i in answer.chat_ctx.items if i.type == "function_call_output"]
        assert outputs[-1].call_id == FINAL_ID and outputs[-1].output == TRANSFER_TEXT
        assert len(observed.replies_completed()) == 1
    else:
        assert len(fake.calls) == 3  # a bare agent asks for no reply
    assert not error_logs.records


@BUG
async def test_returned_output_is_voiced_once_by_the_leaving_agent(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    journal = Journal(say=TRANSFER_TEXT)

    def leaving_reply(call: LLMCall) -> str:
        return TRANSFER_REPLY if call.instructions == FRONT else by_agent(call)

    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY], fallback=leaving_reply)
    front, session = await start(make_session, journal, "method", fake)
    observed = Observed(session)

    await ask_and_hold(session, journal)
    assert_returned(await release_tool(session, journal))
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter weather"]
    assert handoffs(session) == [(None, front.id), (front.id, weather.id)]
    assert_final_pair(session, TRANSFER_TEXT)
    assert_flagged_event(observed)

    # one request for the output, by the leaving agent, with tools off
    assert len(fake.calls) == 3, [(c.instructions, c.tool_choice) for c in fake.calls]
    voiced = fake.calls[2]
    assert voiced.instructions == FRONT and voiced.tool_choice == "none"
    assert voiced.agent is front
    outputs = [i for i in voiced.chat_ctx.items if i.type == "function_call_output"]
    assert outputs[-1].call_id == FINAL_ID and outputs[-1].output == TRANSFER_TEXT
    assert spoken(session) == [HOLD_ON_REPLY, TRANSFER_REPLY]
    said = item_index(session, lambda i: i.type == "message" and i.text_content == TRANSFER_REPLY)
    handed = item_index(session, lambda i: i.type == "agent_handoff" and i.new_agent_id == weather.id)
    assert said < handed
    assert len(observed.replies_completed()) == 1
    assert not error_logs.records

    await bounded(session.run(user_input="Is it sunny?"), what="next turn")
    assert [c.instructions for c in fake.calls] == [FRONT, FRONT, FRONT, WEATHER]


# -- realtime models, returns that come in together, an owner paused under an inline task --


def rt_answer(journal: Journal) -> Any:
    """Realtime fallback: record which agent asked (by its instructions), answer in its voice."""

    def answer(gen: RTGeneration) -> str:
        journal.events.append(f"reply {gen.instructions}")
        return {FRONT: HOLD_ON_REPLY, WEATHER: "Weather desk here."}.get(gen.instructions or "", "")

    return answer


@BUG
@pytest.mark.parametrize("auto_reply", [False, True], ids=["requested_reply", "auto_reply"])
@pytest.mark.parametrize("say", [None, TRANSFER_TEXT], ids=["bare", "with_output"])
async def test_realtime_handoff_after_the_reply_to_the_update(
    make_session: MakeSession, error_logs: ErrorLogCapture, auto_reply: bool, say: str | None
) -> None:
    # the tool returns at once after its update: the handoff must still wait for the leaving
    # agent's answer to that update, which a realtime activity schedules only after it sent
    # the update's output to the model
    journal = Journal(say=say)
    journal.tool_gate.open()
    model = ScriptedRealtimeModel(
        [ask_weather()], fallback=rt_answer(journal), auto_tool_reply_generation=auto_reply
    )
    front, session = await start(make_session, journal, "method", model)

    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_tool_ended))
    await bounded(session.run(user_input="What's the weather in Paris?"), what="weather turn")
    assert_returned((await ended).update)
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert handoffs(session) == [(None, front.id), (front.id, weather.id)]
    # the answer to the update comes before the front desk leaves. With an output to voice, the
    # leaving agent says it once more while it drains, as for an inline (Agent, str); an auto
    # replying model may also answer the pushed return itself, before the handoff
    events = journal.events
    assert events[0] == "enter front" and events[-1] == "enter weather", events
    exit_at = events.index("exit front")
    assert f"reply {FRONT}" in events[:exit_at], events
    assert events[exit_at:].count(f"reply {FRONT}") == (0 if say is None else 1), events
    assert_final_pair(session, say or "")
    assert not error_logs.records


class OrderDesk(Reception):
    """Two async tools in one turn: a handoff and an order lookup, held by the test."""

    def __init__(self, journal: Journal, order_gate: Gate, *, second_handoff: bool) -> None:
        super().__init__(journal)
        self.order_gate = order_gate
        self.second_handoff = second_handoff

    @function_tool
    async def get_weather(self, ctx: RunContext) -> Agent:
        """Look up the weather."""
        await ctx.update(HOLD_ON)
        await self.journal.tool_gate.wait()
        # built from the front desk's context, so it carries the conversation on
        self.journal.weather = WeatherDesk(self.journal)
        await self.journal.weather.update_chat_ctx(self.chat_ctx)
        return self.journal.weather

    @function_tool
    async def check_order(self, ctx: RunContext) -> Agent | str:
        """Check the order, or go to billing about it."""
        await ctx.update("Checking your order")
        await self.order_gate.wait()
        return BillingDesk(self.journal) if self.second_handoff else "Order 42 shipped"


@BUG
@pytest.mark.parametrize("second", ["handoff", "text"])
async def test_returns_that_come_in_together_hand_off_once(
    make_session: MakeSession,
    error_logs: ErrorLogCapture,
    caplog: pytest.LogCaptureFixture,
    second: str,
) -> None:
    # both tools return while the front desk still answers their updates: their results are
    # delivered together. The first return hands off, as it would have on its own; a second
    # agent is dropped with a warning, a text result goes to the arriving agent unvoiced (#5150)
    caplog.set_level(logging.WARNING, logger="livekit.agents")
    journal = Journal()
    order_gate = Gate("check_order")
    front = OrderDesk(journal, order_gate, second_handoff=second == "handoff")
    llm_gate = Gate("reply to the updates")
    both = Reply(
        tool_calls=[tool_call("get_weather", call_id=CALL_ID), tool_call("check_order", call_id="call_order")]
    )
    fake = ScriptedLLM([both, Reply(HOLD_ON_REPLY, first_token_delay=llm_gate.wait)], fallback=by_agent)
    session = await make_session(front, llm=fake)
    observed = Observed(session)

    run: RunResult[Any] = session.run(user_input="Weather, and where is my order?")
    await llm_gate.reached()
    assert_returned(await release_tool(session, journal))
    order_ended = asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == "call_order",
        )
    )
    order_gate.open()
    assert (await bounded(order_ended, what="check_order ended")).update.status == "done"
    assert session.current_agent is front

    llm_gate.open()
    await bounded(run, what="weather and order turn")
    await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")

    weather = journal.weather
    assert weather is not None
    assert session.current_agent is weather
    assert journal.events == ["enter front", "exit front", "enter weather"]
    assert handoffs(session) == [(None, front.id), (front.id, weather.id)]
    assert_flagged_event(observed)
    # the front desk answered the updates, and said nothing more
    assert [c.instructions for c in fake.calls] == [FRONT, FRONT]
    order_out = [
        i
        for i in session.history.items
        if i.type == "function_call_output" and i.call_id == "call_order_final"
    ]
    assert len(order_out) == 1
    warned = [r.getMessage() for r in caplog.records if "only the first one hands off" in r.getMessage()]
    if second == "handoff":
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    else:
        assert not warned
        assert order_out[0].output == "Order 42 shipped"
        # the arriving agent, built from the front desk's context, knows the order result
        assert any(i.id == order_out[0].id for i in weather.chat_ctx.items)
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]


NAME_TASK = "You take the caller's name."


class TakeName(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="name", instructions=NAME_TASK)


class NameDesk(FrontDesk):
    """The front desk can also take the caller's name with an inline task."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.name_task: TakeName | None = None

    @function_tool
    async def take_name(self) -> str:
        """Take the caller's name."""
        self.name_task = TakeName(self.journal)
        return f"The caller is {await self.name_task}"


@BUG
@pytest.mark.parametrize("owner", ["resumes", "closes"])
async def test_owner_paused_under_an_inline_task(
    make_session: MakeSession,
    error_logs: ErrorLogCapture,
    caplog: pytest.LogCaptureFixture,
    owner: str,
) -> None:
    # the tool returns while its agent is paused under an inline AgentTask: the handoff waits
    # for that agent to resume, and is dropped if the agent closes instead
    caplog.set_level(logging.WARNING, logger="livekit.agents")
    journal = Journal()
    front = NameDesk(journal)

    def answer(call: LLMCall) -> str:
        return "Thank you, Ada." if call.instructions == FRONT else by_agent(call)

    take_name = Reply(tool_calls=[tool_call("take_name", call_id="call_name")])
    fake = ScriptedLLM([ask_weather(), HOLD_ON_REPLY, take_name], fallback=answer)
    session = await make_session(front, llm=fake)

    await ask_and_hold(session, journal)
    name_run: RunResult[Any] = session.run(user_input="Take my name, please.")
    await bounded(journal.entered["name"].wait(), what="name task on_enter")
    task = front.name_task
    assert task is not None

    assert_returned(await release_tool(session, journal))
    # the owner is paused: nothing changes while the task runs
    assert session.current_agent is task
    assert journal.events == ["enter front", "enter name"]

    if owner == "resumes":
        task.complete("Ada")
        await bounded(name_run, what="name turn")
        await bounded(journal.entered["weather"].wait(), what="weather desk on_enter")
        weather = journal.weather
        assert weather is not None
        assert session.current_agent is weather
        assert journal.events == ["enter front", "enter name", "exit name", "exit front", "enter weather"]
        assert handoffs(session)[-1] == (front.id, weather.id)
        # the resumed front desk answered its own tool before it left
        assert spoken(session)[-1] == "Thank you, Ada."
        assert not [r for r in caplog.records if DROPPED_WARNING in r.getMessage()]
    else:
        billing = BillingDesk(journal)
        session.update_agent(billing)
        await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")
        await bounded(name_run, what="name turn")
        assert session.current_agent is billing
        assert "enter weather" not in journal.events
        assert journal.events[-1] == "enter billing"
        assert journal.events.count("exit front") == 1
        assert [h for h in handoffs(session) if h[1] == billing.id] != []
        warnings = [r for r in caplog.records if DROPPED_WARNING in r.getMessage()]
        assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert not error_logs.records, [r.getMessage() for r in error_logs.records]
