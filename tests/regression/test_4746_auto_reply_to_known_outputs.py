"""livekit/agents#4746 (no handoff): a realtime model that answers tool results on its own
(``auto_tool_reply_generation``, like Gemini) calls two tools in one generation, and each
reports progress with ``ctx.update()`` before returning its result.

The generation's own tool outputs are the two progress updates. Its speech first waits for
the speech in progress to finish: the model's automatic answer to the first final result,
which the tool executor synced to the realtime session. While it waits the second tool
returns, and the tool executor syncs the agent's whole context, progress updates included;
the model answers them then. Stock 1.8.9 then pushes the same outputs again and makes the
run wait for the model's automatic reply to them, which never comes (they are not new to
the model): ``run()`` sits out the whole 5 s timeout ("timed out waiting for realtime auto
tool reply"), and a session closed meanwhile leaves that wait running. The fork waits only
for outputs the model has not seen yet, and a closing activity releases the wait.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, function_tool, llm

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    tool_call,
)

BUG = pytest.mark.upstream_bug("livekit/agents#4746")

TIMED_OUT = "timed out waiting for realtime auto tool reply"
# well under the 5 s the stock activity waits for the reply that never comes
RUN_BOUND = 2.5
# the bound on the wait itself lets stock's run() come back after its 5 s, so the test can
# show what the user saw (how long it took, the warning) instead of timing out
RUN_WAIT = 8.0


class Desk(Agent):
    def __init__(self, b_returns: Gate) -> None:
        super().__init__(instructions="You are the front desk.")
        self.b_returns = b_returns

    @function_tool
    async def lookup_a(self, ctx: RunContext) -> str:
        """Look up A."""
        await ctx.update("looking up A")
        return "A is 1"

    @function_tool
    async def lookup_b(self, ctx: RunContext) -> str:
        """Look up B."""
        await ctx.update("looking up B")
        await self.b_returns.wait()
        return "B is 2"


class Plain(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")

    @function_tool
    async def lookup_a(self) -> str:
        """Look up A."""
        return "A is 1"


class Model(ScriptedRealtimeModel):
    """Sets ``b_synced`` once the final result of ``lookup_b`` reached a realtime session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.b_synced = asyncio.Event()

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        update_chat_ctx = sess.update_chat_ctx

        async def watched(chat_ctx: llm.ChatContext) -> None:
            await update_chat_ctx(chat_ctx)
            if any(i.type == "function_call_output" and i.output == "B is 2" for i in chat_ctx.items):
                self.b_synced.set()

        sess.update_chat_ctx = watched  # type: ignore[method-assign]
        return sess


def answer(b_synced: asyncio.Event) -> Any:
    def _answer(gen: RTGeneration) -> Reply:
        last = gen.chat_ctx.items[-1]
        text = f"noted: {last.output}" if last.type == "function_call_output" else "ok"
        if last.type == "function_call_output" and last.output == "A is 1":
            # the answer to A's result is the speech the generation's own outputs wait
            # for, until B's result reached the model
            return Reply(text=text, hold=b_synced)
        return Reply(text=text)

    return _answer


def unanswered_calls(session: AgentSession[Any]) -> list[str]:
    items = session.history.items
    answered = {i.call_id for i in items if i.type == "function_call_output"}
    return [i.call_id for i in items if i.type == "function_call" and i.call_id not in answered]


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_run_returns_when_the_model_already_answered_the_outputs(
    make_session: MakeSession, caplog: pytest.LogCaptureFixture, reuse: bool
) -> None:
    caplog.set_level(logging.WARNING, logger="livekit")
    b_returns = Gate("lookup_b returns")
    model = Model(
        [Reply(tool_calls=[tool_call("lookup_a"), tool_call("lookup_b")])],
        auto_tool_reply_generation=True,
        reuse=reuse,
    )
    model.script.fallback = answer(model.b_synced)
    session = await make_session(Desk(b_returns), llm=model)
    # B returns once the generation recorded its own outputs (the two progress updates)
    session.on("function_tools_executed", lambda _: b_returns.open())

    loop = asyncio.get_running_loop()
    started = loop.time()
    await bounded(session.run(user_input="look up A and B"), RUN_WAIT, what="session.run()")
    took = loop.time() - started

    timed_out = [r.getMessage() for r in caplog.records if TIMED_OUT in r.getMessage()]
    assert took < RUN_BOUND and not timed_out, f"session.run() took {took:.1f}s: {timed_out}"
    assert b_returns.is_open and model.b_synced.is_set()
    assert unanswered_calls(session) == []
    # both results were answered by the model on its own
    auto = [g.reply.text for g in model.generations if g.source == "auto_tool_reply" and g.reply]
    assert "noted: A is 1" in auto and "noted: B is 2" in auto


class SlowModel(ScriptedRealtimeModel):
    """Emits its automatic tool replies only once ``emit`` is opened, like a slow server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.emit = Gate("automatic reply emitted")
        self.held: list[asyncio.Task[None]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        auto_tool_reply = sess._auto_tool_reply

        async def held() -> None:
            await self.emit.wait()
            auto_tool_reply()  # a closed session emits nothing

        sess._auto_tool_reply = lambda: self.held.append(asyncio.ensure_future(held()))  # type: ignore[method-assign]
        return sess


@BUG
async def test_close_releases_the_wait_for_an_automatic_reply(make_session: MakeSession) -> None:
    """A session closed while the run waits for an automatic tool reply leaves no task behind."""
    model = SlowModel([Reply(tool_calls=[tool_call("lookup_a")])], auto_tool_reply_generation=True)
    before = asyncio.all_tasks()
    session = await make_session(Plain(), llm=model)
    run = session.run(user_input="look up A")
    await model.emit.reached()
    assert not run.done()  # waiting for the model's reply to the tool output

    await bounded(session.aclose(), what="AgentSession.aclose")
    await bounded(asyncio.gather(run, return_exceptions=True), what="session.run() after aclose")
    # the session's tasks end with it (the same 1 s grace the hygiene check gives)
    mine = {asyncio.current_task(), *model.held}
    running = [t for t in asyncio.all_tasks() - before - mine if not t.done()]
    if running:
        await asyncio.wait(running, timeout=1.0)
    left = [t.get_coro() for t in running if not t.done()]
    assert not left, f"still running 1 s after the session closed: {left}"
    model.emit.open()
    await bounded(asyncio.gather(*model.held), what="the held reply")
