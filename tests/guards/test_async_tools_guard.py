"""Guards: upstream's first-class async tools (livekit/agents#5841) under our patches.

A tool that calls ``ctx.update()`` releases the turn with that update as its output; its
later updates (``<call_id>_update_N``) and its final return (``<call_id>_final``) are
recorded and voiced by deferred replies of their own. Covered, through the public surface
only (LLM requests, chat history, ``tool_execution_updated`` events, what the TTS said):

* progress updates, then a deferred final reply;
* ``@function_tool(on_duplicate=...)``: allow / reject / confirm / replace;
* ``ToolFlag.CANCELLABLE`` and the companion ``lk_agents_get_running_tasks`` /
  ``lk_agents_cancel_task`` tools;
* the prompt templates (``tool_handling={"async_options": {...}}``), strings or callables,
  resolved AsyncToolset > Agent > AgentSession;
* ``ToolError`` / ``StopResponse`` raised inline or after an update;
* a session-scoped ``AsyncToolset`` surviving a handoff, an agent-scoped one cancelled by it;
* an async tool outliving an inline ``AgentTask`` awaited by another tool of its agent.

Every tool is held on a :class:`Gate` the test opens; every wait is bounded. The ``gates``
fixture opens any gate left closed before the session closes, so a failing test does not
also hang its teardown on a non-cancellable tool.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from livekit.agents import (
    Agent,
    AgentSession,
    AgentTask,
    RunContext,
    RunResult,
    StopResponse,
    ToolCallEnded,
    ToolError,
    function_tool,
)
from livekit.agents.llm import FunctionCallOutput, ToolFlag
from livekit.agents.llm.async_toolset import AsyncToolset
from livekit.agents.llm.tool_context import DuplicateMode

from tests.fakes import (
    FakeAudioOutput,
    FakeTTS,
    Gate,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
    wait_for_event,
)

GET_RUNNING = "lk_agents_get_running_tasks"
CANCEL = "lk_agents_cancel_task"
CONFIRM_PARAM = "lk_agents_confirm_duplicate"


# -- fixtures & observation helpers ---------------------------------------------------------


class Gates:
    """``gates(name)``: the named :class:`Gate`, created on first use."""

    def __init__(self) -> None:
        self.by_name: dict[str, Gate] = {}

    def __call__(self, name: str) -> Gate:
        return self.by_name.setdefault(name, Gate(name))

    def __contains__(self, name: str) -> bool:
        return name in self.by_name


@pytest.fixture
def gates(make_session: MakeSession) -> Iterator[Gates]:
    # depends on make_session so it is torn down first: tools blocked on a gate the test
    # never opened (it failed) finish before the session closes and awaits them
    registry = Gates()
    yield registry
    for gate in registry.by_name.values():
        gate.open()


class ToolEvents:
    """Every ``tool_execution_updated`` update of a session, in emission order."""

    def __init__(self, session: AgentSession[Any]) -> None:
        self.updates: list[Any] = []
        session.on("tool_execution_updated", lambda ev: self.updates.append(ev.update))

    def of(self, call_id: str) -> list[tuple[Any, ...]]:
        """The call's own lifecycle: ``(type,)`` started, ``(type, id, message)`` updated,
        ``(type, id, status, message)`` ended."""
        out: list[tuple[Any, ...]] = []
        for u in self.updates:
            if u.type == "tool_call_started" and u.function_call.call_id == call_id:
                out.append((u.type,))
            elif u.type == "tool_call_updated" and u.call_id == call_id:
                out.append((u.type, u.id, u.message))
            elif u.type == "tool_call_ended" and u.call_id == call_id:
                out.append((u.type, u.id, u.status, u.message))
        return out

    def replies(self, update_id: str) -> list[str]:
        """Statuses of the deferred replies covering ``update_id``."""
        return [
            u.status for u in self.updates if u.type == "tool_reply_updated" and update_id in u.update_ids
        ]


def tool_ended(session: AgentSession[Any], call_id: str) -> asyncio.Future[ToolCallEnded]:
    """Register now; resolves with the call's ``tool_call_ended`` update."""

    async def _wait() -> ToolCallEnded:
        ev = await wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: ev.update.type == "tool_call_ended" and ev.update.call_id == call_id,
        )
        return ev.update  # type: ignore[no-any-return]

    return asyncio.ensure_future(_wait())


def reply_done(session: AgentSession[Any], update_id: str) -> asyncio.Future[str]:
    """Register now; resolves with the final status of the deferred reply covering
    ``update_id`` (``completed`` / ``interrupted`` / ``skipped``)."""

    async def _wait() -> str:
        ev = await wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: (
                ev.update.type == "tool_reply_updated"
                and update_id in ev.update.update_ids
                and ev.update.status != "scheduled"
            ),
        )
        return ev.update.status  # type: ignore[no-any-return]

    return asyncio.ensure_future(_wait())


def outputs(call: LLMCall) -> dict[str, FunctionCallOutput]:
    """The tool outputs a model request carried, by call id, in context order."""
    return {item.call_id: item for item in call.chat_ctx.items if item.type == "function_call_output"}


def system_texts(call: LLMCall) -> list[str]:
    return [
        item.text_content or ""
        for item in call.chat_ctx.items
        if item.type == "message" and item.role in ("system", "developer")
    ]


def transcript(session: AgentSession[Any]) -> list[tuple[str, str]]:
    """The conversation as recorded: messages by role, tool calls/outputs by call id."""
    out: list[tuple[str, str]] = []
    for item in session.history.items:
        if item.type == "message":
            out.append((item.role, item.text_content or ""))
        elif item.type == "function_call":
            out.append(("call", item.call_id))
        elif item.type == "function_call_output":
            out.append(("output", item.call_id))
    return out


def said(session: AgentSession[Any]) -> list[str]:
    return [text for role, text in transcript(session) if role == "assistant"]


def recorded_outputs(session: AgentSession[Any]) -> dict[str, FunctionCallOutput]:
    return {item.call_id: item for item in session.history.items if item.type == "function_call_output"}


def current_agent(session: AgentSession[Any]) -> Agent:
    return session.current_agent


def summary(fake: ScriptedLLM) -> list[tuple[str | None, Any, list[str]]]:
    """Compact view of the model requests, for assertion messages."""
    return [(c.instructions, c.tool_choice, list(outputs(c))) for c in fake.calls]


# -- progress updates, then a deferred final reply ---------------------------------------------


async def test_updates_then_deferred_final_reply(make_session: MakeSession, gates: Gates) -> None:
    @function_tool
    async def book_flight(ctx: RunContext[Any], city: str) -> str:
        """Book a flight."""
        await ctx.update(f"searching flights to {city}")
        await gates("searched").wait()
        await ctx.update("found 3 flights, picking the cheapest")
        await gates("priced").wait()
        return "booked flight LK42"

    call = tool_call("book_flight", {"city": "Paris"})
    cid = call.call_id
    fake = ScriptedLLM(
        [
            Reply(tool_calls=[call]),
            "Searching flights now.",
            "Found three, picking the cheapest.",
            "Your flight LK42 is booked.",
        ]
    )
    tts = FakeTTS()
    session = await make_session(
        Agent(instructions="You book flights.", tools=[book_flight]),
        llm=fake,
        tts=tts,
        audio_output=FakeAudioOutput(),
    )
    events = ToolEvents(session)

    result: RunResult[Any] = await bounded(
        session.run(user_input="book me a flight to Paris"), what="first run"
    )

    # the first update released the turn: it is the call's output, answered without tools
    result.expect.contains_function_call(name="book_flight")
    result.expect.contains_function_call_output(is_error=False)
    result.expect.contains_message(role="assistant")
    assert len(fake.calls) == 2, summary(fake)
    update_reply = fake.calls[1]
    assert update_reply.tool_choice == "none"
    assert list(outputs(update_reply)) == [cid]
    assert "searching flights to Paris" in str(outputs(update_reply)[cid].output)
    assert not outputs(update_reply)[cid].is_error
    assert tts.texts == ["Searching flights now."]
    assert events.of(cid) == [
        ("tool_call_started",),
        ("tool_call_updated", cid, "searching flights to Paris"),
    ]

    # a later update gets a deferred reply of its own, still without tools
    second = reply_done(session, f"{cid}_update_1")
    gates("searched").open()
    assert await bounded(second, what="reply to the second update") == "completed"
    assert len(fake.calls) == 3, summary(fake)
    update_1 = fake.calls[2]
    assert update_1.tool_choice == "none"
    assert list(outputs(update_1)) == [cid, f"{cid}_update_1"]
    assert "found 3 flights" in str(outputs(update_1)[f"{cid}_update_1"].output)
    assert f"{cid}_update_1" in system_texts(update_1)[-1]
    assert events.of(cid)[-1][0] == "tool_call_updated"  # still running

    # the final return: recorded under <call_id>_final, answered by its own generation
    final = reply_done(session, f"{cid}_final")
    ended = tool_ended(session, cid)
    gates("priced").open()
    assert await bounded(final, what="reply to the final return") == "completed"
    await bounded(ended, what="tool_call_ended")

    assert len(fake.calls) == 4, summary(fake)
    final_reply = fake.calls[3]
    assert final_reply.instructions == "You book flights."
    assert final_reply.tool_choice is None  # a result to act on, not a report
    assert "book_flight" in final_reply.tools
    assert list(outputs(final_reply)) == [cid, f"{cid}_update_1", f"{cid}_final"]
    assert outputs(final_reply)[f"{cid}_final"].output == "booked flight LK42"
    assert f"{cid}_final" in system_texts(final_reply)[-1]

    assert events.of(cid) == [
        ("tool_call_started",),
        ("tool_call_updated", cid, "searching flights to Paris"),
        ("tool_call_updated", f"{cid}_update_1", "found 3 flights, picking the cheapest"),
        ("tool_call_ended", f"{cid}_final", "done", "booked flight LK42"),
    ]
    assert events.replies(f"{cid}_update_1") == ["scheduled", "completed"]
    assert events.replies(f"{cid}_final") == ["scheduled", "completed"]
    assert events.replies(cid) == []  # the inline first update never gets a deferred reply

    assert transcript(session) == [
        ("user", "book me a flight to Paris"),
        ("call", cid),
        ("output", cid),
        ("assistant", "Searching flights now."),
        ("call", f"{cid}_update_1"),
        ("output", f"{cid}_update_1"),
        ("assistant", "Found three, picking the cheapest."),
        ("call", f"{cid}_final"),
        ("output", f"{cid}_final"),
        ("assistant", "Your flight LK42 is booked."),
    ]
    assert tts.texts == [
        "Searching flights now.",
        "Found three, picking the cheapest.",
        "Your flight LK42 is booked.",
    ]


# -- on_duplicate ----------------------------------------------------------------------------

DUPLICATE_CASES: dict[str, tuple[DuplicateMode, ToolFlag]] = {
    "allow": ("allow", ToolFlag.NONE),
    "reject": ("reject", ToolFlag.NONE),
    "confirm": ("confirm", ToolFlag.NONE),
    "replace": ("replace", ToolFlag.CANCELLABLE),
    "replace-not-cancellable": ("replace", ToolFlag.NONE),
}


@pytest.mark.parametrize("case", DUPLICATE_CASES)
async def test_on_duplicate(make_session: MakeSession, gates: Gates, case: str) -> None:
    """A second call of ``check_order`` while the first is still running (after its update)."""
    mode, flags = DUPLICATE_CASES[case]
    ran: list[str] = []
    cancelled: list[str] = []

    @function_tool(on_duplicate=mode, flags=flags)
    async def check_order(ctx: RunContext[Any], order_id: str) -> str:
        """Check an order's status."""
        call_id = ctx.function_call.call_id
        ran.append(call_id)
        await ctx.update(f"checking order {order_id}")
        try:
            await gates(call_id).wait()
        except asyncio.CancelledError:
            cancelled.append(call_id)
            raise
        return f"order {order_id} shipped"

    first = tool_call("check_order", {"order_id": "7"})
    second = tool_call("check_order", {"order_id": "7"})
    confirmed = tool_call("check_order", {"order_id": "7", CONFIRM_PARAM: True})
    script: list[Any] = [Reply(tool_calls=[first]), "Checking order 7.", Reply(tool_calls=[second])]
    if mode == "confirm":
        script.append(Reply(tool_calls=[confirmed]))  # the model confirms the duplicate
    script.append("About order 7 again.")
    fake = ScriptedLLM(script, fallback="Order 7 has shipped.")
    session = await make_session(Agent(instructions="You track orders.", tools=[check_order]), llm=fake)
    events = ToolEvents(session)

    await bounded(session.run(user_input="where is order 7?"), what="first run")
    assert ran == [first.call_id]
    replaced = tool_ended(session, first.call_id) if mode == "replace" else None
    await bounded(session.run(user_input="check order 7 again"), what="second run")

    second_out = recorded_outputs(session)[second.call_id]
    if case == "allow":
        # both run side by side
        assert ran == [first.call_id, second.call_id]
        assert "checking order 7" in str(second_out.output) and not second_out.is_error
        survivors = [first.call_id, second.call_id]
    elif case == "reject":
        # the second never runs; the model is told which call is in flight and how to cancel it
        assert ran == [first.call_id]
        assert not second_out.is_error
        assert str(second_out.output).startswith("Same tool `check_order` is already running")
        assert first.call_id in str(second_out.output) and CANCEL in str(second_out.output)
        assert events.of(second.call_id) == []
        survivors = [first.call_id]
    elif case == "confirm":
        # unconfirmed: not run, the model is asked to confirm; confirmed: runs beside the first
        assert str(second_out.output).startswith("Same tool `check_order` is already running")
        assert "confirm duplicate" in str(second_out.output) and not second_out.is_error
        assert events.of(second.call_id) == []
        assert ran == [first.call_id, confirmed.call_id]
        confirmed_out = recorded_outputs(session)[confirmed.call_id]
        assert "checking order 7" in str(confirmed_out.output)
        survivors = [first.call_id, confirmed.call_id]
    elif case == "replace":
        # the running call is cancelled, the new one takes over
        assert replaced is not None
        ended = await bounded(replaced, what="replaced call to end")
        assert (ended.status, ended.message) == ("cancelled", None)
        assert cancelled == [first.call_id]
        assert ran == [first.call_id, second.call_id]
        assert "checking order 7" in str(second_out.output) and not second_out.is_error
        survivors = [second.call_id]
    else:
        # replace cannot cancel a non-cancellable call: the new call fails, the old one goes on
        assert ran == [first.call_id]
        assert second_out.is_error
        assert "not cancellable" in str(second_out.output)
        assert cancelled == []
        survivors = [first.call_id]

    assert said(session) == ["Checking order 7.", "About order 7 again."]

    # every surviving call delivers its own final result, one deferred reply each
    for call_id in survivors:
        done = reply_done(session, f"{call_id}_final")
        gates(call_id).open()
        assert await bounded(done, what=f"final reply of {call_id}") == "completed"
        assert events.of(call_id)[-1] == ("tool_call_ended", f"{call_id}_final", "done", "order 7 shipped")
    assert said(session)[2:] == ["Order 7 has shipped."] * len(survivors)
    finals = [cid for cid in recorded_outputs(session) if cid.endswith("_final")]
    assert finals == [f"{call_id}_final" for call_id in survivors]


# -- ToolFlag.CANCELLABLE and the companion tools ----------------------------------------------


async def test_model_lists_and_cancels_running_tools(make_session: MakeSession, gates: Gates) -> None:
    interrupted: list[str] = []

    @function_tool(flags=ToolFlag.CANCELLABLE)
    async def watch_prices(ctx: RunContext[Any], symbol: str) -> str:
        """Watch a stock price."""
        await ctx.update(f"watching {symbol}")
        try:
            await gates("watch").wait()
        except asyncio.CancelledError:
            interrupted.append(ctx.function_call.call_id)
            raise
        return f"{symbol} hit the target"

    @function_tool
    async def export_report(ctx: RunContext[Any]) -> str:
        """Export the monthly report."""
        await ctx.update("export started")
        await gates("export").wait()
        return "report exported"

    watch = tool_call("watch_prices", {"symbol": "LK"})
    export = tool_call("export_report")
    listed: list[str] = []

    def cancel_what_was_listed(call: LLMCall) -> Reply:
        # what a model does: read the call ids in the listing, cancel the running tools
        listing = next(o for o in outputs(call).values() if o.name == GET_RUNNING)
        listed.extend(re.findall(r"call_id['\"]?\s*:\s*['\"]([^'\"]+)", str(listing.output)))
        return Reply(
            tool_calls=[
                *(tool_call(CANCEL, {"call_id": cid}) for cid in listed),
                tool_call(CANCEL, {"call_id": export.call_id}),
            ]
        )

    fake = ScriptedLLM(
        [
            Reply(tool_calls=[watch, export]),
            "Watching LK and exporting.",
            Reply(tool_calls=[tool_call(GET_RUNNING)]),
            cancel_what_was_listed,
            "I stopped watching LK; the export cannot be stopped.",
        ],
        fallback="Your report is exported.",
    )
    session = await make_session(
        Agent(instructions="You are a trading assistant."),
        llm=fake,
        tools=[AsyncToolset(id="markets", tools=[watch_prices, export_report])],
    )
    events = ToolEvents(session)

    await bounded(session.run(user_input="watch LK and export my report"), what="first run")
    # the companion tools are offered because a cancellable tool exists
    assert {"watch_prices", "export_report", GET_RUNNING, CANCEL} <= set(fake.calls[0].tools)

    watch_ended = tool_ended(session, watch.call_id)
    await bounded(session.run(user_input="what is running? stop it all"), what="second run")

    # only the cancellable call is listed
    assert listed == [watch.call_id]
    cancel_outputs = {o.call_id: o for o in recorded_outputs(session).values() if o.name == CANCEL}
    by_target = {
        target: out
        for target in (watch.call_id, export.call_id)
        for out in cancel_outputs.values()
        if target in str(out.output)
    }
    assert by_target[watch.call_id].output == f"Task {watch.call_id} cancelled successfully."
    assert not by_target[watch.call_id].is_error
    assert by_target[export.call_id].is_error
    assert "not cancellable" in str(by_target[export.call_id].output)

    ended = await bounded(watch_ended, what="cancelled tool to end")
    assert (ended.status, ended.message) == ("cancelled", None)
    assert interrupted == [watch.call_id]
    assert said(session) == [
        "Watching LK and exporting.",
        "I stopped watching LK; the export cannot be stopped.",
    ]

    # the non-cancellable one still delivers; the cancelled one never does
    done = reply_done(session, f"{export.call_id}_final")
    gates("export").open()
    assert await bounded(done, what="export's final reply") == "completed"
    assert said(session)[-1] == "Your report is exported."
    assert f"{watch.call_id}_final" not in recorded_outputs(session)
    assert events.replies(f"{watch.call_id}_final") == []
    assert events.of(watch.call_id)[-1][2] == "cancelled"


# -- prompt templates --------------------------------------------------------------------------

TEMPLATE_LEVELS = {
    # case: (levels configured, where the tool lives, level expected to win)
    "session": (("session",), "agent", "session"),
    "agent-over-session": (("session", "agent"), "agent", "agent"),
    "toolset-over-agent": (("session", "agent", "toolset"), "agent-toolset", "toolset"),
    "session-toolset-ignores-agent": (("session", "agent"), "session-toolset", "session"),
    "session-toolset-own": (("session", "agent", "toolset"), "session-toolset", "toolset"),
}


def async_options(level: str, kind: str) -> dict[str, Any]:
    """Templates tagged ``<level>``, as ``str.format`` strings or as callables; both render
    the same text."""
    if kind == "str":
        return {
            "update_template": f"<{level}> {{function_name}} says: {{message}}",
            "reply_at_tail_template": f"<{level}> at tail: {{call_ids}}",
            "reply_maybe_covered_template": f"<{level}> maybe covered: {{call_ids}}",
        }
    return {
        "update_template": lambda a: f"<{level}> {a['function_name']} says: {a['message']}",
        "reply_at_tail_template": lambda a: f"<{level}> at tail: {a['call_ids']}",
        "reply_maybe_covered_template": lambda a: f"<{level}> maybe covered: {a['call_ids']}",
    }


@pytest.mark.parametrize("position", ["at-tail", "maybe-covered"])
@pytest.mark.parametrize("kind", ["str", "callable"])
@pytest.mark.parametrize("case", list(TEMPLATE_LEVELS))
async def test_prompt_templates(
    make_session: MakeSession, gates: Gates, case: str, kind: str, position: str
) -> None:
    levels, placement, winner = TEMPLATE_LEVELS[case]

    def handling(level: str) -> Any:
        """``tool_handling`` for one level, ``None`` when the case leaves that level unset."""
        return {"async_options": async_options(level, kind)} if level in levels else None

    @function_tool
    async def lookup(ctx: RunContext[Any]) -> str:
        """Look the customer up."""
        await ctx.update("searching the CRM")
        await gates("lookup").wait()
        return "customer is Ada"

    agent_tools: list[Any] = []
    session_tools: list[Any] = []
    if placement == "agent":
        agent_tools.append(lookup)
    else:
        toolset = AsyncToolset(id="crm", tools=[lookup], tool_handling=handling("toolset"))
        (agent_tools if placement == "agent-toolset" else session_tools).append(toolset)

    # an unset level is left out, not passed as None
    agent_kwargs: dict[str, Any] = {}
    session_kwargs: dict[str, Any] = {}
    for level, kwargs in (("agent", agent_kwargs), ("session", session_kwargs)):
        if (level_handling := handling(level)) is not None:
            kwargs["tool_handling"] = level_handling

    call = tool_call("lookup")
    cid = call.call_id
    # maybe-covered: the tool returns while its update's reply is still being generated, so
    # that reply lands after the final result in the context
    hold = asyncio.Event()
    fake = ScriptedLLM(
        [
            Reply(tool_calls=[call]),
            Reply(text="Searching.", hold=hold if position == "maybe-covered" else None),
        ],
        fallback="The customer is Ada.",
    )
    session = await make_session(
        Agent(instructions="You are support.", tools=agent_tools, **agent_kwargs),
        llm=fake,
        tools=session_tools,
        **session_kwargs,
    )

    run: RunResult[Any] = session.run(user_input="who am I?")
    final = reply_done(session, f"{cid}_final")
    if position == "maybe-covered":
        await bounded(fake.wait_for_calls(2), what="the update's reply to start")
        ended = tool_ended(session, cid)
        gates("lookup").open()
        await bounded(ended, what="lookup to return")
        hold.set()
        await bounded(run, what="first run")
    else:
        await bounded(run, what="first run")
        gates("lookup").open()
    assert await bounded(final, what="final reply") == "completed"
    assert said(session) == ["Searching.", "The customer is Ada."]

    assert len(fake.calls) == 3, summary(fake)
    update_out = outputs(fake.calls[1])[cid]
    assert update_out.output == f"<{winner}> lookup says: searching the CRM"
    final_call = fake.calls[2]
    expected_reply = {"at-tail": "at tail", "maybe-covered": "maybe covered"}[position]
    assert system_texts(final_call)[-1] == f"<{winner}> {expected_reply}: {[f'{cid}_final']}"

    # no other level's template reached the model
    for call_ in fake.calls:
        texts = system_texts(call_) + [str(o.output) for o in outputs(call_).values()]
        for level in {"session", "agent", "toolset"} - {winner}:
            assert not any(f"<{level}>" in t for t in texts), (level, texts)


# -- ToolError / StopResponse -------------------------------------------------------------------


@pytest.mark.parametrize("raised", ["ToolError", "StopResponse"])
@pytest.mark.parametrize("when", ["inline", "after-update"])
async def test_tool_error_and_stop_response(
    make_session: MakeSession, gates: Gates, caplog: pytest.LogCaptureFixture, raised: str, when: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="livekit")

    @function_tool
    async def charge_card(ctx: RunContext[Any]) -> str:
        """Charge the customer's card."""
        if when == "after-update":
            await ctx.update("charging the card")
            await gates("charge").wait()
        if raised == "ToolError":
            raise ToolError("card declined")
        raise StopResponse()

    call = tool_call("charge_card")
    cid = call.call_id
    final_id = cid if when == "inline" else f"{cid}_final"
    script: list[Any] = [Reply(tool_calls=[call])]
    if when == "after-update":
        script.append("Charging your card.")
    if raised == "ToolError":
        script.append("Sorry, your card was declined.")
    script.append("Anything else?")  # answers the next user turn
    fake = ScriptedLLM(script)
    session = await make_session(Agent(instructions="You take payments.", tools=[charge_card]), llm=fake)
    events = ToolEvents(session)

    ended = tool_ended(session, cid)
    await bounded(session.run(user_input="charge my card"), what="first run")
    if when == "after-update":
        final = reply_done(session, final_id) if raised == "ToolError" else None
        gates("charge").open()
        await bounded(ended, what="tool to end")
        if final is not None:
            assert await bounded(final, what="deferred reply") == "completed"
    end = await bounded(ended, what="tool to end")

    out = recorded_outputs(session)[final_id]
    calls_before_next_turn = len(fake.calls)
    if raised == "ToolError":
        # the message reaches the model as an error output, which it answers
        assert (out.output, out.is_error) == ("card declined", True)
        assert (end.id, end.status, end.message) == (final_id, "error", "card declined")
        answer = fake.calls[-1]
        assert outputs(answer)[final_id].output == "card declined"
        assert said(session)[-1] == "Sorry, your card was declined."
    else:
        # silence: the output is recorded, nothing asks the model to speak about it
        assert (out.output, out.is_error, out.reply_required) == ("", False, False)
        assert (end.id, end.status, end.message) == (final_id, "done", None)
        assert events.replies(final_id) == []
        assert said(session) == ([] if when == "inline" else ["Charging your card."])
    assert calls_before_next_turn == len(script) - 1, summary(fake)

    # nothing else is pending: the next user turn is answered by exactly one request
    await bounded(session.run(user_input="thanks"), what="next run")
    assert len(fake.calls) == calls_before_next_turn + 1, summary(fake)
    assert fake.calls[-1].last_user_text == "thanks"
    assert said(session)[-1] == "Anything else?"

    # logged without a traceback: ToolError as one warning, StopResponse not at all
    lk_records = [r for r in caplog.records if r.name.startswith("livekit")]
    assert all(r.exc_info is None or r.exc_info[1] is None for r in lk_records), [
        (r.levelname, r.getMessage()) for r in lk_records if r.exc_info
    ]
    assert not [r for r in lk_records if r.levelno >= logging.ERROR]
    warnings = [r for r in lk_records if r.levelno >= logging.WARNING]
    if raised == "ToolError":
        assert [r.getMessage() for r in warnings] == ["ToolError while executing tool"]
        assert getattr(warnings[0], "lk.pii.error", None) == "card declined"
    else:
        assert warnings == [], [r.getMessage() for r in warnings]


# -- handoff: session-scoped vs agent-scoped AsyncToolset ---------------------------------------

TRIAGE = "You are the triage agent."
BILLING = "You are the billing agent."


async def test_session_toolset_survives_handoff_agent_toolset_is_cancelled(
    make_session: MakeSession, gates: Gates
) -> None:
    watch_interrupted = asyncio.Event()

    @function_tool
    async def track_order(ctx: RunContext[Any]) -> str:
        """Track the customer's order."""
        await ctx.update("tracking the order")
        await gates("track").wait()
        return "order delivered"

    @function_tool(flags=ToolFlag.CANCELLABLE)
    async def watch_refund(ctx: RunContext[Any]) -> str:
        """Watch for the refund."""
        await ctx.update("watching the refund")
        try:
            await gates("watch").wait()
        except asyncio.CancelledError:
            watch_interrupted.set()
            raise
        return "refund arrived"

    class Billing(Agent):
        def __init__(self) -> None:
            super().__init__(instructions=BILLING)

    class Triage(Agent):
        def __init__(self) -> None:
            super().__init__(
                instructions=TRIAGE, tools=[AsyncToolset(id="triage_tools", tools=[watch_refund])]
            )
            self.billing: Billing | None = None

        @function_tool
        async def transfer_to_billing(self) -> Agent:
            """Transfer the customer to billing."""
            self.billing = Billing()
            return self.billing

    track, watch = tool_call("track_order"), tool_call("watch_refund")
    fake = ScriptedLLM(
        [
            Reply(tool_calls=[track, watch]),
            "Tracking your order and watching the refund.",
            Reply(tool_calls=[tool_call("transfer_to_billing")]),
        ],
        fallback=lambda call: (
            "Billing here: your order was delivered." if call.instructions == BILLING else "triage speaking"
        ),
    )
    triage = Triage()
    session = await make_session(
        triage, llm=fake, tools=[AsyncToolset(id="session_tools", tools=[track_order])]
    )
    events = ToolEvents(session)

    await bounded(session.run(user_input="track my order and my refund"), what="first run")
    assert [e[0] for e in events.of(track.call_id)] == ["tool_call_started", "tool_call_updated"]
    assert [e[0] for e in events.of(watch.call_id)] == ["tool_call_started", "tool_call_updated"]

    watch_ended = tool_ended(session, watch.call_id)
    result: RunResult[Any] = await bounded(session.run(user_input="I need billing"), what="handoff run")
    result.expect.contains_agent_handoff(new_agent_type=Billing)
    assert current_agent(session) is triage.billing
    calls_at_handoff = len(fake.calls)

    # the agent-scoped tool was cancelled with its agent; it never reports
    ended = await bounded(watch_ended, what="agent-scoped tool to end")
    assert ended.status == "cancelled"
    assert watch_interrupted.is_set()
    # the session-scoped one is still running
    assert events.of(track.call_id)[-1][0] == "tool_call_updated"

    done = reply_done(session, f"{track.call_id}_final")
    gates("track").open()
    assert await bounded(done, what="session tool's final reply") == "completed"

    # its result is delivered to, and voiced by, the agent current now
    assert len(fake.calls) == calls_at_handoff + 1, summary(fake)
    delivery = fake.calls[-1]
    assert delivery.instructions == BILLING
    assert outputs(delivery)[f"{track.call_id}_final"].output == "order delivered"
    assert "track_order" in delivery.tools and "watch_refund" not in delivery.tools
    assert said(session)[-1] == "Billing here: your order was delivered."
    assert "triage speaking" not in said(session)
    assert events.of(track.call_id)[-1] == (
        "tool_call_ended",
        f"{track.call_id}_final",
        "done",
        "order delivered",
    )
    assert f"{watch.call_id}_final" not in recorded_outputs(session)
    assert events.replies(f"{watch.call_id}_final") == []
    assert current_agent(session) is triage.billing


# -- an async tool outliving an inline AgentTask -------------------------------------------------

ASSISTANT = "You are the research assistant."
EMAIL_TASK = "Collect the user's email address."


async def test_async_tool_outlives_inline_agent_task(make_session: MakeSession, gates: Gates) -> None:
    class EmailTask(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__(instructions=EMAIL_TASK)

        @function_tool
        async def record_email(self, email: str) -> None:
            """Record the user's email address."""
            self.complete(email)

    class Assistant(Agent):
        def __init__(self) -> None:
            super().__init__(instructions=ASSISTANT)
            self.task: EmailTask | None = None

        @function_tool
        async def research(self, ctx: RunContext[Any]) -> str:
            """Research papers on the topic."""
            await ctx.update("researching")
            await gates("research").wait()
            return "found 3 papers"

        @function_tool
        async def collect_email(self) -> str:
            """Collect the user's email address."""
            self.task = EmailTask()
            email = await self.task
            return f"email is {email}"

    research = tool_call("research")
    fid = f"{research.call_id}_final"

    def by_agent(call: LLMCall) -> str:
        if call.instructions == EMAIL_TASK:
            return "email task speaking"
        if fid in "".join(system_texts(call)):
            return "I found 3 papers."
        return "Thanks, I have your email."

    fake = ScriptedLLM(
        [
            Reply(tool_calls=[research]),
            "Researching.",
            Reply(tool_calls=[tool_call("collect_email")]),
            Reply(tool_calls=[tool_call("record_email", {"email": "ada@example.com"})]),
        ],
        fallback=by_agent,
    )
    assistant = Assistant()
    session = await make_session(assistant, llm=fake)
    events = ToolEvents(session)

    await bounded(session.run(user_input="research LLM agents"), what="first run")
    await bounded(session.run(user_input="take my email"), what="task run")
    assert assistant.task is not None and current_agent(session) is assistant.task
    calls_in_task = len(fake.calls)

    # the research tool keeps running, and returns, while the assistant is paused
    ended = tool_ended(session, research.call_id)
    gates("research").open()
    end = await bounded(ended, what="research to return")
    assert (end.id, end.status, end.message) == (fid, "done", "found 3 papers")
    assert current_agent(session) is assistant.task
    assert len(fake.calls) == calls_in_task, summary(fake)  # nothing is voiced during the task

    delivered = reply_done(session, fid)
    await bounded(session.run(user_input="ada@example.com"), what="email run")
    assert await bounded(delivered, what="research reply") == "completed"
    assert current_agent(session) is assistant
    assert assistant.task.done()

    # the task's own request saw no research reply; the reply came after the assistant resumed
    task_calls = [c for c in fake.calls if c.instructions == EMAIL_TASK]
    assert len(task_calls) == 1, summary(fake)
    assert not any(fid in t for t in system_texts(task_calls[0]))
    deliveries = [c for c in fake.calls if any(fid in t for t in system_texts(c))]
    assert len(deliveries) == 1, summary(fake)
    delivery = deliveries[0]
    assert delivery.index > task_calls[0].index
    assert delivery.instructions == ASSISTANT
    assert outputs(delivery)[fid].output == "found 3 papers"
    assert events.replies(fid) == ["scheduled", "completed"]

    assert said(session)[0] == "Researching."
    assert sorted(said(session)[1:]) == ["I found 3 papers.", "Thanks, I have your email."]
    assert "email task speaking" not in said(session)
