"""Nova Sonic (review of the recycle PRs): what comes in while a recycle ends the old stream.

``_retire_stream()`` gives the session fresh channels, stops the audio input task (which closes
the old ones), ends the old stream (contentEnd, promptEnd, sessionEnd, bounded waits) and only
then opens the new one. These tests hold the old stream's ``sessionEnd`` (or the new stream's
initial response) and feed audio, tool results, error results, async updates and closes into
that window. Each checks that nothing is lost, nothing is sent twice, and the Bedrock protocol
holds on both streams. On stock 1.8.9 the timed recycle never brings the new stream up, and a
tool-change recycle or a restart does not end the old stream.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import livekit.agents
import pytest
from livekit import rtc
from livekit.agents import Agent, RunContext, ToolError, function_tool

from tests.fakes import BoundedWaitTimeout, Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    SentEvent,
    event_kind,
    is_event,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import (
    NOVA_SONIC_MARKS,
    nova_session,
    nova_sonic_2,
    tool_output_taken,
)

ON_FORK = "+fork" in livekit.agents.__version__

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug(
        "not-yet: a Nova Sonic recycle loses what comes in while it ends the old stream"
    ),
]

QUESTION = "book table 12"
RESULT = "table 12 booked"
ANSWER = "Your table is booked."
MARK = "This is a tool result, not the user speaking."
BOUND = 8.0


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Booker(Agent):
    def __init__(self, gate: Gate, *, mode: str = "plain") -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = gate
        self.final_gate = Gate("final")
        self.mode = mode
        self.runs = 0

    @function_tool
    async def book(self, ctx: RunContext, table: int) -> str:
        """Book a table."""
        self.runs += 1
        if self.mode == "adds_tool":
            await self.update_tools([*self.tools, cancel_booking])
        if self.mode == "async":
            await self.gate.wait()
            await ctx.update("checking availability")
            await self.final_gate.wait()
            return f"table {table} booked"
        await self.gate.wait()
        if self.mode == "error":
            raise ToolError("table 12 is not bookable")
        return f"table {table} booked"


async def _up(bedrock: FakeBedrock, index: int) -> BedrockConnection:
    """Stream ``index`` once the plugin streams audio on it: the recycle brought it up."""
    try:
        conn = await bedrock.connection(index, timeout=BOUND)
        await conn.wait_ready(BOUND)
    except BoundedWaitTimeout:
        raise AssertionError(f"the recycle never brought stream {index} up: the call goes silent") from None
    return conn


async def _ended(old: BedrockConnection) -> None:
    """The recycle ends the old stream (promptEnd) before it opens the new one."""
    try:
        await old.wait_sent(is_event("promptEnd"), timeout=BOUND, what="the old stream's promptEnd")
    except BoundedWaitTimeout:
        raise AssertionError("the recycle never ended the old stream: no promptEnd") from None


async def _answered(answered: asyncio.Future[Any]) -> None:
    await asyncio.wait({answered}, timeout=BOUND + 1)
    assert answered.done() and not answered.cancelled() and answered.exception() is None, (
        "the model never answered the tool's result"
    )


def _script_booking(bedrock: FakeBedrock) -> None:
    """The model greets, then calls ``book`` (``tool-1``) for the question."""
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))


def _on_prompt_end(bedrock: FakeBedrock, index: int, action: Any) -> None:
    def _react(conn: BedrockConnection, sent: SentEvent) -> list[Any]:
        if conn.index == index:
            action()
        return []

    bedrock.reply_when(lambda e: event_kind(e) == "promptEnd", _react, once=False)


def _check_result_once(new: BedrockConnection, needle: str = RESULT, *, interactive: bool = True) -> None:
    results = [(role, inter, t) for role, inter, t in sent_texts(new.sent) if needle in t]
    assert len(results) == 1, f"the tool's result reached the new stream {len(results)} times: {results}"
    role, inter, text = results[0]
    assert MARK in text and role == "USER", text
    assert inter is interactive, f"carried result interactive={inter}, expected {interactive}"
    assert tool_result_contents(new.sent) == [], "a toolResult for a call the new stream never issued"


# -- 1. audio pushed while the old stream ends ---------------------------------------------------


def _frame(i: int) -> rtc.AudioFrame:
    data = (i + 1).to_bytes(2, "little", signed=True) * 512
    return rtc.AudioFrame(data=data, sample_rate=16000, num_channels=1, samples_per_channel=512)


def _audio_chunks(conn: BedrockConnection) -> list[int]:
    out = []
    for e in conn.sent:
        if event_kind(e) == "audioInput":
            raw = base64.b64decode(e["event"]["audioInput"]["content"])
            out.append(int.from_bytes(raw[:2], "little", signed=True) - 1)
    return out


def _audio_protocol(conn: BedrockConnection) -> list[str]:
    """audioInput only inside the AUDIO content, never inside a TEXT/TOOL block."""
    problems = []
    audio_open = False
    open_block: str | None = None
    for n, e in enumerate(conn.sent):
        kind = event_kind(e)
        body = e["event"][kind]
        if kind == "contentStart":
            if body.get("type") == "AUDIO":
                audio_open = True
            else:
                open_block = body["contentName"]
        elif kind == "contentEnd":
            if open_block == body["contentName"]:
                open_block = None
            elif body["contentName"] and audio_open and open_block is None:
                audio_open = False
        elif kind == "audioInput":
            if not audio_open:
                problems.append(f"#{n}: audioInput outside the audio content")
            if open_block is not None:
                problems.append(f"#{n}: audioInput inside text/tool block {open_block}")
    return problems


async def test_audio_pushed_while_the_old_stream_ends(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    session, old = await nova_session(bedrock, make_session, Booker(Gate("unused")))
    await bounded(session.run(user_input="hi"))
    rt = bedrock.sessions[0]
    for i in range(3):
        rt.push_audio(_frame(i))
    await old.wait_sent(
        lambda e: event_kind(e) == "audioInput" and len(_audio_chunks(old)) >= 3, what="audio"
    )

    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    pushed = Gate("pushed in window")

    def _push() -> None:
        for i in range(3, 13):
            rt.push_audio(_frame(i))
        pushed.open()

    _on_prompt_end(bedrock, 0, _push)
    bedrock.fire_recycle_timer(rt)
    await pushed.opened(BOUND)
    session_end.open()
    new = await _up(bedrock, 1)
    for i in range(13, 16):
        rt.push_audio(_frame(i))
    await new.wait_sent(lambda e: len(_audio_chunks(new)) >= 13, timeout=BOUND, what="the audio")

    assert _audio_chunks(old) == [0, 1, 2]
    assert _audio_chunks(new) == list(range(3, 16)), "audio from the recycle window lost or reordered"
    assert _audio_protocol(new) == [] and _audio_protocol(old) == []
    assert bedrock.violations == []


# -- 2. result kinds arriving in the window ------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "error", "adds_tool"])
async def test_result_in_the_window(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """plain/error: timed recycle; adds_tool: the tool-change recycle the tool itself starts."""
    _script_booking(bedrock)
    needle = "not bookable" if mode == "error" else RESULT
    bedrock.reply_when(is_interactive_text(containing=needle), model_turn(ANSWER))
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    agent = Booker(gate, mode=mode)
    session, old = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)

    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    _on_prompt_end(bedrock, 0, gate.open)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    if mode != "adds_tool":
        bedrock.fire_recycle_timer(bedrock.sessions[0])
    await _ended(old)
    await bounded(taken, BOUND, what="the plugin to take the tool's output")
    session_end.open()
    new = await _up(bedrock, 1)
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == []
    await bounded(run, BOUND, what="session.run()")
    await _answered(answered)
    _check_result_once(new, needle)
    assert agent.runs == 1
    asked = [t for _, inter, t in sent_texts(new.sent) if inter and t == QUESTION]
    assert asked == [], "the question was asked again"
    assert bedrock.violations == []


async def test_async_tool_update_in_the_window(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async tool's first update (the toolUse's answer) comes in while the old stream ends;
    its final result (``tool-1_final``) comes after, on the new stream."""
    _script_booking(bedrock)
    bedrock.reply_when(is_interactive_text(), model_turn("Noted."), once=False)
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("update")
    agent = Booker(gate, mode="async")
    session, old = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))

    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    _on_prompt_end(bedrock, 0, gate.open)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    await _ended(old)
    await bounded(taken, BOUND, what="the plugin to take the tool's first update")
    session_end.open()
    new = await _up(bedrock, 1)
    agent.final_gate.open()
    await new.wait_sent(
        lambda e: RESULT in e["event"].get("textInput", {}).get("content", ""), timeout=BOUND, what="final"
    )
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == []
    texts = sent_texts(new.sent)
    updates = [t for _, _, t in texts if "checking availability" in t]
    assert len(updates) == 1 and MARK in updates[0], f"first update on the new stream: {updates}"
    finals = [t for _, _, t in texts if RESULT in t]
    assert len(finals) == 1
    assert tool_result_contents(new.sent) == []
    assert tool_result_contents(old.sent) == [], "the update went out on the stream being ended"
    assert bedrock.violations == []
    if not run.done():
        run.cancel()


# -- 3. restart after a stream error with the result in the window ------------------------------


async def test_restart_with_the_result_in_the_window(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_sdk_bedrock_runtime.models import ModelStreamErrorException

    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    agent = Booker(gate)
    session, old = await nova_session(bedrock, make_session, agent)
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    _on_prompt_end(bedrock, 0, gate.open)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    old.fail(ModelStreamErrorException(message="stream error"))
    await _ended(old)
    await bounded(taken, BOUND, what="the plugin to take the tool's output")
    session_end.open()
    new = await _up(bedrock, 1)
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == []
    await bounded(run, BOUND, what="session.run()")
    await _answered(answered)
    _check_result_once(new)
    assert agent.runs == 1
    assert bedrock.violations == []


# -- 4. aclose() in the window -------------------------------------------------------------------


@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("result_first", [False, True])
async def test_close_in_the_window(
    bedrock: FakeBedrock,
    make_session: MakeSession,
    monkeypatch: pytest.MonkeyPatch,
    result_first: bool,
    restart: bool,
) -> None:
    _script_booking(bedrock)
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))
    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    in_window = Gate("window")
    _on_prompt_end(bedrock, 0, in_window.open)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    if restart:
        from aws_sdk_bedrock_runtime.models import ModelStreamErrorException

        old.fail(ModelStreamErrorException(message="stream error"))
    else:
        bedrock.fire_recycle_timer(bedrock.sessions[0])
    await _ended(old)
    await in_window.opened(BOUND)
    if result_first:
        gate.open()
        await bounded(taken, BOUND, what="the plugin to take the tool's output")
    rt = bedrock.sessions[0]
    rt.push_audio(_frame(1))
    # the plugin's own close, in the window (AgentSession.aclose() waits for the tool); the held
    # sessionEnd stays on the wire until the close is done, or for BOUND at most
    closing = asyncio.ensure_future(rt.aclose())
    await asyncio.wait({closing}, timeout=BOUND)
    closed_in_window = closing.done()
    session_end.open()
    gate.open()
    if not closed_in_window:
        closing.cancel()
        await asyncio.wait({closing}, timeout=BOUND)
    assert closed_in_window, "RealtimeSession.aclose() waited for the recycle to end the old stream"
    closing.result()
    assert errors == []
    assert len(bedrock.connections) == 1 or bedrock.connections[-1].closed, "a new stream stayed open"
    assert old.closed
    assert not rt._is_sess_active.is_set()
    recycle = getattr(rt, "_recycle_task", None)
    assert recycle is None or recycle.done()
    await asyncio.wait({run}, timeout=BOUND)
    if not run.done():
        run.cancel()
    await bounded(session.aclose(), BOUND, what="AgentSession.aclose")
    assert len(bedrock.connections) == 1 or bedrock.connections[-1].closed, "a new stream stayed open"
    assert bedrock.violations == []


# -- 5. result after the carried outputs were collected, before the new stream is ready --------


async def test_result_before_the_new_stream_is_ready(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script_booking(bedrock)
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    held = bedrock.hold(1)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_sent(is_event("promptStart"), timeout=BOUND, what="new promptStart")
    gate.open()
    await bounded(taken, BOUND, what="the plugin to take the tool's output")
    held.open()
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == []
    await bounded(run, BOUND, what="session.run()")
    await _answered(answered)
    _check_result_once(new)
    assert bedrock.violations == []


# -- 6. two recycles back to back, the result in the second window -------------------------------


async def test_two_recycles_result_in_the_second_window(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script_booking(bedrock)
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    taken, errors = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    rt = bedrock.sessions[0]
    second_end = Gate("second stream's sessionEnd")

    def _arm(conn: BedrockConnection, sent: SentEvent) -> list[Any]:
        if conn.index == 1:
            conn.hold_matching = (is_event("sessionEnd"), second_end)
        return []

    bedrock.reply_when(is_event("promptStart"), _arm, once=False)
    _on_prompt_end(bedrock, 1, gate.open)
    bedrock.fire_recycle_timer(rt)
    mid = await _up(bedrock, 1)
    bedrock.fire_recycle_timer(rt)
    await bounded(taken, BOUND, what="the plugin to take the tool's output")
    second_end.open()
    new = await _up(bedrock, 2)
    await asyncio.wait({run}, timeout=BOUND)
    assert errors == []
    await bounded(run, BOUND, what="session.run()")
    await _answered(answered)
    in_mid = [t for _, _, t in sent_texts(mid.sent) if RESULT in t]
    in_new = [t for _, inter, t in sent_texts(new.sent) if RESULT in t and inter]
    assert len(in_mid) + len(in_new) == 1 and len(in_new) == 1, (in_mid, in_new)
    assert tool_result_contents(new.sent) == [] and tool_result_contents(mid.sent) == []
    assert bedrock.violations == []


# -- 7. a result sent as toolResult just before the recycle, its answer not started yet ----------


@pytest.mark.xfail(
    ON_FORK,
    strict=True,
    reason=(
        "carry-a-running-tool's-result PR: _retire_stream() carries the results not sent yet and the "
        "calls still running, not a result already sent as toolResult whose answer had not started "
        "(no completionStart yet). Known, not fixed yet"
    ),
)
@pytest.mark.parametrize("how", ["timed", "stream_error"])
async def test_result_sent_just_before_the_recycle(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The toolResult went out on the old stream; the recycle timer fires before the model began
    its answer (no completionStart yet). The answer must not be lost."""
    _script_booking(bedrock)
    # the model answers the result only on the new stream (prompted); on the old stream it is
    # still "thinking" when the recycle ends it
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    gate = Gate("booking")
    gate.open()
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)

    def _recycle(conn: BedrockConnection, sent: SentEvent) -> list[Any]:
        from aws_sdk_bedrock_runtime.models import ModelErrorException

        if how == "timed":
            bedrock.fire_recycle_timer(bedrock.sessions[0])
        else:
            # the model fails on the result (a retryable error): the session restarts
            conn.fail(ModelErrorException(message="model error"))
        return []

    bedrock.reply_when(is_tool_result("tool-1"), _recycle)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    new = await _up(bedrock, 1)
    await asyncio.wait({answered}, timeout=BOUND + 1)
    await asyncio.wait({run}, timeout=BOUND)
    if not run.done():
        run.cancel()
    got = [m.text_content for m in session.history.messages() if m.role == "assistant"]
    assert answered.done() and not answered.cancelled() and answered.exception() is None, (
        f"the model never answered the tool result cut off by the recycle; assistant said {got}; "
        f"new stream texts: {[(r, i, t[:60]) for r, i, t in sent_texts(new.sent)]}"
    )


# -- 8. the result (or a frame) lands as the audio input task closes its channels -----------------


def _signal_on_close(chan: Any) -> asyncio.Future[None]:
    """Resolves (callbacks run on the next loop iteration) when ``chan`` is closed."""
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    close = chan.close

    def _close() -> None:
        close()
        if not closed.done():
            closed.set_result(None)

    chan.close = _close
    return closed


@pytest.mark.parametrize("what", ["tool_result", "audio"])
async def test_input_as_the_audio_input_task_closes_its_channels(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """_retire_stream() cancels the audio input task, whose CancelledError handler closes both
    channels; _retire_stream() resumes (and installs the fresh channels) two loop iterations
    later (task done -> cancel_and_wait's waiter -> _retire_stream's wakeup). Input that is
    ready to run in the first of those iterations meets a closed channel."""
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    _script_booking(bedrock)
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    gate = Gate("booking")
    agent = Booker(gate)
    session, old = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))
    rt = bedrock.sessions[0]
    closed = _signal_on_close(rt._tool_results_ch)
    loop = asyncio.get_running_loop()
    errors: list[BaseException] = []

    if what == "audio":
        for i in range(2):
            rt.push_audio(_frame(i))
        await old.wait_sent(lambda e: len(_audio_chunks(old)) >= 2, what="audio")

        def _push_later(_: Any) -> None:
            # the frame the framework forwards in the iteration after the task closed its channels
            rt.push_audio(_frame(2))

        closed.add_done_callback(_push_later)
        bedrock.fire_recycle_timer(rt)
        new = await _up(bedrock, 1)
        rt.push_audio(_frame(3))
        await new.wait_sent(lambda e: 3 in _audio_chunks(new), timeout=BOUND, what="the later frame")
        assert _audio_chunks(new) == [2, 3], (
            f"frame pushed as the channels closed: new stream got {_audio_chunks(new)}"
        )
        return

    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    entered: asyncio.Future[None] = loop.create_future()
    update = RealtimeSession.update_chat_ctx

    async def _held(self: Any, chat_ctx: Any) -> None:
        if any(i.type == "function_call_output" and i.call_id == "tool-1" for i in chat_ctx.items):
            if not entered.done():
                entered.set_result(None)
                # the framework's call becomes ready to run when the channels close
                await bounded(asyncio.shield(closed), BOUND, what="the channels to close")
            try:
                await update(self, chat_ctx)
            except Exception as e:
                errors.append(e)
                raise
            return
        await update(self, chat_ctx)

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _held)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    gate.open()
    await bounded(entered, BOUND, what="the framework to hand over the tool's output")
    bedrock.fire_recycle_timer(rt)
    new = await _up(bedrock, 1)
    await asyncio.wait({answered}, timeout=BOUND + 1)
    await asyncio.wait({run}, timeout=BOUND)
    if not run.done():
        run.cancel()
    assert errors == [], f"update_chat_ctx() raised as the channels closed: {errors!r}"
    _check_result_once(new)
    assert bedrock.violations == []


async def test_tool_that_changes_the_tools_and_returns_at_once(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """The tool adds a tool and returns at once. The model answers the result only where it is
    prompted on the new stream (on the old one its answer would come after some latency, and the
    tool-change recycle ends that stream)."""
    _script_booking(bedrock)
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    gate = Gate("booking")
    gate.open()
    agent = Booker(gate, mode="adds_tool")
    session, old = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    new = await _up(bedrock, 1)
    await asyncio.wait({answered}, timeout=BOUND + 1)
    await asyncio.wait({run}, timeout=BOUND)
    if not run.done():
        run.cancel()
    where = (
        f"old toolResults {tool_result_contents(old.sent)}, new texts "
        f"{[(i, t[-40:]) for _, i, t in sent_texts(new.sent) if RESULT in t]}"
    )
    assert answered.done() and answered.exception() is None, f"never answered: {where}"
    assert bedrock.violations == []


# -- 9. a second stream replacement while the recycled call still runs ---------------------------


@pytest.mark.xfail(
    ON_FORK,
    strict=True,
    reason=(
        "carry-a-running-tool's-result PR: _retire_stream() counts only the calls pending on the "
        "stream it ends, not one an earlier recycle carried over and still runs: the question is "
        "asked again. Counting every such call left a later question unanswered. Known, not fixed yet"
    ),
)
@pytest.mark.parametrize("second", ["timed", "stream_error"])
async def test_second_replacement_while_the_recycled_call_runs(
    bedrock: FakeBedrock, make_session: MakeSession, second: str
) -> None:
    """The timed recycle carries the running call (the question is not asked again on the new
    stream). A second replacement (the next recycle, or a restart after a stream error) comes
    before the tool returns: the question must not be asked again there either."""
    from aws_sdk_bedrock_runtime.models import ModelStreamErrorException

    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    bedrock.reply_when(
        is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})), once=False
    )
    bedrock.reply_when(is_interactive_text(containing=RESULT), model_turn(ANSWER))
    gate = Gate("booking")
    agent = Booker(gate)
    session, old = await nova_session(bedrock, make_session, agent)
    await bounded(session.run(user_input="hi"))
    answered = message_added(session, "assistant", ANSWER, timeout=BOUND)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    rt = bedrock.sessions[0]
    bedrock.fire_recycle_timer(rt)
    mid = await _up(bedrock, 1)
    if second == "timed":
        bedrock.fire_recycle_timer(rt)
    else:
        mid.fail(ModelStreamErrorException(message="stream error"))
    new = await _up(bedrock, 2)
    gate.open()
    await asyncio.wait({answered}, timeout=BOUND + 1)
    await asyncio.wait({run}, timeout=BOUND)
    if not run.done():
        run.cancel()
    asked_mid = [t for _, inter, t in sent_texts(mid.sent) if inter and t == QUESTION]
    asked_new = [t for _, inter, t in sent_texts(new.sent) if inter and t == QUESTION]
    assert asked_mid == [], "the first recycle asked the question again"
    assert asked_new == [], (
        f"the {second} replacement asked the question again while its tool still ran "
        f"(the tool ran {agent.runs} times)"
    )
    assert agent.runs == 1
    assert bedrock.violations == []


# -- 10. (0008 judged alone) the window's result never goes out as a toolResult on the new stream --


async def test_window_result_is_no_toolresult_on_the_new_stream(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script_booking(bedrock)
    taken, _ = tool_output_taken(monkeypatch)
    gate = Gate("booking")
    session, old = await nova_session(bedrock, make_session, Booker(gate))
    await bounded(session.run(user_input="hi"))
    session_end = Gate("old sessionEnd")
    old.hold_matching = (is_event("sessionEnd"), session_end)
    _on_prompt_end(bedrock, 0, gate.open)
    run = asyncio.ensure_future(session.run(user_input=QUESTION))
    await gate.reached()
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    await _ended(old)
    await bounded(taken, BOUND, what="the plugin to take the tool's output")
    session_end.open()
    new = await _up(bedrock, 1)
    # the new stream's audio input task has read its channels by the time it sent one more event
    bedrock.sessions[0].push_audio(_frame(0))
    await new.wait_sent(is_event("audioInput"), timeout=BOUND, what="audio on the new stream")
    run.cancel()
    await asyncio.wait({run}, timeout=BOUND)
    assert tool_result_contents(new.sent) == [], f"violations: {bedrock.violations}"
    assert bedrock.violations == []
