"""Self-checks of the fakes and hygiene helpers (they drive a real AgentSession)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunResult, function_tool, llm

from tests.fakes import (
    BoundedWaitTimeout,
    FakeAudioOutput,
    FakeTTS,
    Gate,
    Journal,
    JournalingAgent,
    LLMCall,
    RecordingTextOutput,
    Reply,
    ScriptedLLM,
    ScriptedRealtimeModel,
    ScriptExhaustedError,
    SessionTracker,
    bounded,
    default_realtime_capabilities,
    offline_session_kwargs,
    running_session,
    tool_call,
    wait_for_event,
)
from tests.fakes.hygiene import ErrorLogCapture, settle_tasks


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="billing")


class Triage(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="triage")

    @function_tool
    async def lookup(self) -> str:
        """Look something up."""
        return "42"

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer to billing."""
        return Billing()


# -- ScriptedLLM --


async def test_llm_records_calls_and_answers_in_order() -> None:
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("lookup")]), lambda c: f"seen {c.item_types()[-1]}"])
    async with running_session(Triage(), llm=fake) as session:
        result: RunResult[Any] = await bounded(session.run(user_input="hi"))

    result.expect.contains_function_call(name="lookup")
    result.expect.contains_message(role="assistant")
    assert [c.index for c in fake.calls] == [0, 1]
    first, second = fake.calls
    assert first.instructions == "triage"
    assert first.tools == ["lookup", "transfer"]
    assert first.last_user_text == "hi"
    assert isinstance(first.agent, Triage)
    assert second.item_types()[-2:] == ["function_call", "function_call_output"]
    assert second.reply is not None and second.reply.full_text == "seen function_call_output"
    assert all(c.scripted and c.outcome == "completed" for c in fake.calls)


async def test_llm_hold_and_first_token_gate() -> None:
    hold = asyncio.Event()
    first_token = Gate("first token")
    fake = ScriptedLLM(
        [Reply(text=["a", "b"], hold=hold), Reply(text="c", first_token_delay=first_token.wait)]
    )
    async with running_session(Agent(instructions="x"), llm=fake) as session:
        run: RunResult[Any] = session.run(user_input="1")
        (call,) = await fake.wait_for_calls(1)
        assert call.outcome == "pending"
        hold.set()
        result: RunResult[Any] = await bounded(run)
        assert result.events[-1].item.text_content == "ab"  # type: ignore[union-attr]

        run = session.run(user_input="2")
        await first_token.reached()
        first_token.open()
        result = await bounded(run)
        assert result.events[-1].item.text_content == "c"  # type: ignore[union-attr]


@pytest.mark.allow_error_logs(r"script exhausted", expected=True)
async def test_llm_exhausted_script_fails_loudly() -> None:
    fake = ScriptedLLM()
    async with running_session(Agent(instructions="x"), llm=fake) as session:
        with pytest.raises(ScriptExhaustedError, match="call #0"):
            await bounded(session.run(user_input="hi"))
    assert fake.unscripted_calls == fake.calls and fake.calls[0].outcome == "error"


async def test_llm_fallback_marks_calls_unscripted() -> None:
    fake = ScriptedLLM(["one"], fallback=lambda c: f"fallback {c.index}")
    async with running_session(Agent(instructions="x"), llm=fake) as session:
        await bounded(session.run(user_input="a"))
        result: RunResult[Any] = await bounded(session.run(user_input="b"))
    assert result.events[-1].item.text_content == "fallback 1"  # type: ignore[union-attr]
    assert [c.scripted for c in fake.calls] == [True, False]


# -- ScriptedRealtimeModel --


@pytest.mark.parametrize(
    ("caps", "reused"),
    [
        ({}, True),
        ({"mutable_instructions": False}, False),
        ({"mutable_tools": False}, False),
    ],
    ids=["mutable", "immutable-instructions", "immutable-tools"],
)
async def test_realtime_session_reuse_on_handoff(caps: dict[str, bool], reused: bool) -> None:
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("transfer")])],
        fallback="hello",
        capabilities=default_realtime_capabilities(**caps),
    )
    async with running_session(Triage(), llm=model) as session:
        await bounded(session.run(user_input="billing"))
        assert isinstance(session.current_agent, Billing)
        result: RunResult[Any] = await bounded(session.run(user_input="hi"))
        result.expect.contains_message(role="assistant")

    assert len(model.sessions) == (1 if reused else 2)
    assert all(s.closed for s in model.sessions)
    assert not [e for e in model.journal if e.after_close]
    last = model.generations[-1]
    assert last.instructions == "billing" and isinstance(last.agent, Billing)
    assert last.session is model.sessions[-1]


@pytest.mark.parametrize("reuse", [True, False])
def test_realtime_reuse_sets_the_three_mutable_capabilities(reuse: bool) -> None:
    caps = ScriptedRealtimeModel(reuse=reuse).capabilities
    assert (caps.mutable_chat_context, caps.mutable_instructions, caps.mutable_tools) == (reuse,) * 3
    assert caps == default_realtime_capabilities(
        mutable_chat_context=reuse, mutable_instructions=reuse, mutable_tools=reuse
    )
    with pytest.raises(TypeError, match="mutable_tools"):
        ScriptedRealtimeModel(reuse=reuse, mutable_tools=not reuse)


async def test_realtime_model_initiated_generations() -> None:
    model = ScriptedRealtimeModel(["first", "on its own", "voice answer"])
    async with running_session(Agent(instructions="x"), llm=model) as session:
        await bounded(session.run(user_input="hi"))
        rt = model.sessions[0]

        def assistant_said(text: str) -> asyncio.Future[object]:
            return asyncio.ensure_future(
                wait_for_event(
                    session,
                    "conversation_item_added",
                    lambda ev: ev.item.type == "message" and ev.item.text_content == text,
                )
            )

        # gen.done only means the framework consumed the streams; sync on the chat item
        said = assistant_said("on its own")
        gen = rt.emit_generation()
        await said
        assert await bounded(gen.done) == "completed"

        said = assistant_said("voice answer")
        voice_gen = rt.simulate_user_turn("spoken words")
        await said
        assert voice_gen is not None and await bounded(voice_gen.done) == "completed"
        texts = [(m.role, m.text_content) for m in session.history.messages()]

    assert texts[-3:] == [
        ("assistant", "on its own"),
        ("user", "spoken words"),
        ("assistant", "voice answer"),
    ]
    assert [g.source for g in model.generations] == [
        "generate_reply",
        "emit_generation",
        "emit_generation",
    ]


async def test_realtime_session_keeps_what_it_said() -> None:
    # the framework reads a reply's text after the message stream ended: like a server, the
    # session still keeps the text in its own context, and a generation created while another
    # is under way knows it was (its snapshot of the context cannot hold that one yet)
    said = Gate("the second reply")
    model = ScriptedRealtimeModel(["first", Reply("second", hold=said), "third"])
    async with running_session(Agent(instructions="x"), llm=model) as session:
        await bounded(session.run(user_input="hi"))
        rt = model.sessions[0]
        assert [(m.role, m.text_content) for m in rt._chat_ctx.messages()][-1] == ("assistant", "first")

        second = rt.emit_generation()
        await said.reached()
        third = rt.emit_generation()
        said.open()
        assert await bounded(second.done) == "completed"
        assert await bounded(third.done) == "completed"
        await bounded(session.wait_for_idle())

    assert [m.text_content for m in rt._chat_ctx.messages() if m.role == "assistant"] == [
        "first",
        "second",
        "third",
    ]
    assert (second.under_way, third.under_way) == ((), (second.index,))
    assert not second.interrupt_requested


async def test_realtime_session_keeps_a_reply_it_completed_unread() -> None:
    # a server generates a response whether the client reads it or not: one the framework
    # dropped before it played (it read the message stream, never the text) is in the context
    # in full once it completed; of one interrupted, what was read; truncate() cuts what the
    # caller did not hear, as a server removes it
    model = ScriptedRealtimeModel(["never played", "cut short", Reply(["heard ", "in part"])])
    rt = model.session()
    created: list[Any] = []
    rt.on("generation_created", created.append)

    async def read(ev: Any, *, text: bool) -> str:
        said = ""
        async for msg in ev.message_stream:
            if text:
                said += "".join([chunk async for chunk in msg.text_stream])
        async for _ in ev.function_stream:
            pass
        return said

    dropped = rt.emit_generation()
    assert await bounded(read(created[-1], text=False)) == ""
    assert await bounded(dropped.done) == "completed"

    cut = rt.emit_generation()
    rt.interrupt()
    assert await bounded(read(created[-1], text=True)) == ""
    assert await bounded(cut.done) == "interrupted"

    heard = rt.emit_generation()
    assert await bounded(read(created[-1], text=True)) == "heard in part"
    assert heard.message_id is not None
    rt.truncate(message_id=heard.message_id, modalities=["text"], audio_end_ms=0, audio_transcript="heard ")
    await rt.aclose()

    assert [m.text_content for m in rt._chat_ctx.messages()] == ["never played", "heard "]
    assert (dropped.under_way, cut.under_way, heard.under_way) == ((), (), ())


async def test_realtime_auto_tool_reply() -> None:
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("lookup")]), "it is 42"], auto_tool_reply_generation=True
    )
    async with running_session(Triage(), llm=model) as session:
        result: RunResult[Any] = await bounded(session.run(user_input="lookup"))
    result.expect.contains_function_call_output(output="42")
    result.expect.contains_message(role="assistant")
    assert [g.source for g in model.generations] == ["generate_reply", "auto_tool_reply"]
    assert len(model.calls("generate_reply")) == 1


async def test_realtime_auto_tool_reply_not_to_the_history_a_session_starts_from() -> None:
    # a new session awaits no call: the outputs of the context it starts from (an agent that
    # takes over with the calls of the one before) are history, answered by no generation of
    # its own (Gemini Live and Nova Sonic send that history as turns); an output pushed later
    # is one it answers
    model = ScriptedRealtimeModel(["it is 42"], auto_tool_reply_generation=True)
    rt = model.session()
    history = llm.ChatContext.empty()
    history.add_message(role="user", content="lookup")
    history.insert(llm.FunctionCall(call_id="c1", name="lookup", arguments="{}"))
    history.insert(llm.FunctionCallOutput(call_id="c1", name="lookup", output="41", is_error=False))
    await rt.update_chat_ctx(history)
    await asyncio.sleep(0)  # the auto reply is scheduled with call_soon
    assert model.generations == []

    later = history.copy()
    later.insert(llm.FunctionCall(call_id="c2", name="lookup", arguments="{}"))
    later.insert(llm.FunctionCallOutput(call_id="c2", name="lookup", output="42", is_error=False))
    await rt.update_chat_ctx(later)
    await asyncio.sleep(0)
    assert [g.source for g in model.generations] == ["auto_tool_reply"]
    await rt.aclose()


# -- audio --


@pytest.mark.parametrize("streaming", [False, True], ids=["chunked-tts", "streaming-tts"])
@pytest.mark.parametrize("mode", ["instant", "realtime"])
async def test_audio_playout_completes(mode: str, streaming: bool) -> None:
    fake = ScriptedLLM(["Hello there. How are you today?"])
    tts = FakeTTS(streaming=streaming)
    out = FakeAudioOutput(mode=mode, speed=20.0)  # type: ignore[arg-type]
    text_out = RecordingTextOutput()
    async with running_session(
        Agent(instructions="x"), llm=fake, tts=tts, audio_output=out, text_output=text_out
    ) as session:
        result: RunResult[Any] = await bounded(session.run(user_input="hi"))
    result.expect.contains_message(role="assistant")
    assert out.segments and not any(s.interrupted for s in out.segments)
    assert sum(s.duration for s in out.segments) > 0
    assert "".join(tts.texts).replace(" ", "") == "Hellothere.Howareyoutoday?"
    assert text_out.segments == ["Hello there. How are you today?"]


async def test_audio_realtime_playout_can_be_interrupted() -> None:
    fake = ScriptedLLM(["This answer takes a few seconds to play out completely."])
    out = FakeAudioOutput(mode="realtime", speed=0.1)  # ~5.5 s of playout
    async with running_session(Agent(instructions="x"), llm=fake, tts=FakeTTS(), audio_output=out) as session:
        speaking = asyncio.ensure_future(
            wait_for_event(session, "agent_state_changed", lambda e: e.new_state == "speaking")
        )
        handle = session.generate_reply(user_input="hi")
        await speaking
        await bounded(session.interrupt())
        await bounded(handle.wait_for_playout())
    assert handle.interrupted
    (segment,) = out.segments
    assert segment.interrupted and segment.position < segment.duration


# -- journaling agents --


class JournaledTriage(JournalingAgent):
    @function_tool
    async def transfer(self) -> Agent:
        """Transfer to billing."""
        return JournalingAgent(self.journal, name="billing", instructions="billing")


async def test_journaling_agents_record_enter_and_exit_in_order() -> None:
    journal = Journal()
    journal.exit_gates["triage"] = gate = Gate("triage on_exit")
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("transfer")])], fallback=lambda c: "billing here")
    async with running_session(
        JournaledTriage(journal, name="triage", instructions="triage"), llm=fake
    ) as session:
        run: RunResult[Any] = session.run(user_input="billing please")
        await bounded(journal.exiting["triage"].wait())
        # the handoff waits for the triage agent's on_exit, held on its exit gate
        await gate.reached()
        assert journal.events == ["enter triage", "exit triage"] and not journal.exited["triage"].is_set()
        gate.open()
        await bounded(run)
        assert journal.exited["triage"].is_set() and journal.entered["billing"].is_set()
        assert journal.events == ["enter triage", "exit triage", "enter billing"]
    assert journal.events[-1] == "exit billing"


# -- sync helpers & hygiene building blocks --


async def test_bounded_and_gate() -> None:
    gate = Gate("g")
    with pytest.raises(BoundedWaitTimeout, match="g"):
        await gate.reached(timeout=0.01)
    waiter = asyncio.ensure_future(gate.wait())
    await gate.reached()
    assert not waiter.done()
    gate.open()
    await bounded(waiter)


async def test_gate_held_opens_as_the_body_ends_however_it_ends() -> None:
    gate = Gate("held")
    waiter = asyncio.ensure_future(gate.wait())
    async with gate.held():
        await asyncio.sleep(0)
        assert not waiter.done()  # held while the body runs
    await bounded(waiter)

    failing = Gate("held, failing body")
    waiter = asyncio.ensure_future(failing.wait())
    with pytest.raises(KeyError):
        async with failing.held():
            raise KeyError("body")
    assert failing.is_open
    await bounded(waiter)


async def test_settle_tasks_reports_and_cancels_leftovers() -> None:
    baseline = set(asyncio.all_tasks())
    stuck = asyncio.create_task(asyncio.Event().wait(), name="stuck-task")
    quick = asyncio.create_task(asyncio.sleep(0), name="quick-task")
    failures = await settle_tasks(baseline, grace=0.05)
    assert len(failures) == 1 and "stuck-task" in failures[0] and "quick-task" not in failures[0]
    assert stuck.cancelled() and quick.done()
    assert await settle_tasks(baseline, grace=0.05) == []


async def test_session_tracker_closes_leaked_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    tracker = SessionTracker()
    tracker.install(monkeypatch)
    closed = AgentSession(**offline_session_kwargs(llm=ScriptedLLM()))
    await closed.start(Agent(instructions="x"), record=False)
    await closed.aclose()
    leaked = AgentSession(**offline_session_kwargs(llm=ScriptedLLM()))
    await leaked.start(Billing(), record=False)
    AgentSession(**offline_session_kwargs())  # never started: not a leak

    failures = await tracker.close_unclosed()
    assert len(failures) == 1 and "running Billing" in failures[0]
    assert tracker.unclosed() == []
    assert await tracker.close_unclosed() == []


@pytest.mark.allow_error_logs(r"boom")
def test_error_log_capture_allow_and_expect() -> None:
    capture = ErrorLogCapture()
    capture.install()
    try:
        log = logging.getLogger("livekit.agents")
        log.error("boom 1")
        log.warning("not an error")
        log.error("kaboom 2")
        logging.getLogger("other").error("outside livekit")
    finally:
        capture.uninstall()
    assert len(capture.records) == 2
    capture.allow(r"^boom")
    capture.allow(r"never", expected=True)
    failures = capture.failures()
    assert len(failures) == 2
    assert "kaboom 2" in failures[0] and "boom 1" not in failures[0]
    assert "never" in failures[1]


async def test_llm_call_snapshot_is_isolated() -> None:
    fake = ScriptedLLM(["a", "b"])
    async with running_session(Agent(instructions="x"), llm=fake) as session:
        await bounded(session.run(user_input="one"))
        await bounded(session.run(user_input="two"))
    first: LLMCall = fake.calls[0]
    assert [m.text_content for m in first.chat_ctx.messages()] == ["x", "one"]


# -- the conftest hygiene fixture, end to end (inner pytest run via pytester) --

_INNER_CONFTEST = """
import json

import pytest

from tests.conftest import *  # noqa: F403
from tests.conftest import _hygiene  # noqa: F401
from tests.fakes.hygiene import HYGIENE_KEY


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        path = item.config.rootpath / "hygiene.json"
        seen = json.loads(path.read_text()) if path.exists() else {}
        seen[item.name] = item.stash.get(HYGIENE_KEY, [])
        path.write_text(json.dumps(seen))
"""

_INNER_TESTS = """
import asyncio
import logging

import pytest
from livekit.agents import Agent

from tests.fakes import ScriptedLLM, start_session


async def test_clean(make_session):
    session = await make_session(Agent(instructions="x"), llm=ScriptedLLM(["hi"]))
    await session.run(user_input="hello")


async def test_leaks_task():
    asyncio.create_task(asyncio.Event().wait(), name="leaky-task")


@pytest.mark.allow_leaked_tasks("leaky-task")
async def test_leaks_allowed_task():
    asyncio.create_task(asyncio.Event().wait(), name="leaky-task")


async def test_leaks_session():
    await start_session(Agent(instructions="x"), llm=ScriptedLLM())


async def test_logs_error():
    logging.getLogger("livekit.agents").error("inner boom")


@pytest.mark.allow_error_logs("inner boom")
async def test_logs_allowed_error():
    logging.getLogger("livekit.agents").error("inner boom")


async def test_logs_error_allowed_at_runtime(error_logs):
    error_logs.allow("inner boom")
    logging.getLogger("livekit.agents").error("inner boom")


@pytest.mark.allow_error_logs("never logged", expected=True)
async def test_misses_expected_error():
    pass


async def test_fails_and_leaks():
    asyncio.create_task(asyncio.Event().wait(), name="leaky-task")
    assert False, "own failure"


def test_sync_test_is_fine():
    pass
"""


def test_hygiene_fixture_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, error_logs: ErrorLogCapture
) -> None:
    import json

    import tests.conftest as root_conftest

    monkeypatch.setattr(root_conftest, "TASK_GRACE_SECONDS", 0.05)
    error_logs.allow("inner boom")  # the inner run logs through the same loggers
    pytester.makeconftest(_INNER_CONFTEST)
    pytester.makepyfile(test_inner=_INNER_TESTS)
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(passed=9, failed=1, errors=4)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks_task*",
            "*[[]hygiene[]]*",
            "*1 task(s) still running*",
            "*leaky-task*",
        ]
    )
    seen = json.loads((pytester.path / "hygiene.json").read_text())
    flagged = {name for name, failures in seen.items() if failures}
    assert flagged == {
        "test_leaks_task",
        "test_leaks_session",
        "test_logs_error",
        "test_misses_expected_error",
        "test_fails_and_leaks",  # recorded, but not reported twice
    }
    assert "started but never closed" in seen["test_leaks_session"][0]
    assert "test_inner.py:" in seen["test_leaks_session"][0]
    assert "inner boom" in seen["test_logs_error"][0]
