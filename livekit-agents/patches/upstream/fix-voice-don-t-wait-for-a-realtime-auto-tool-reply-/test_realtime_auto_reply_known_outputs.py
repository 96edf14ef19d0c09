"""No wait for an automatic realtime tool reply to outputs the model has already answered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, RunContext, function_tool, utils
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
    GenerationCreatedEvent,
    MessageGeneration,
)

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

# well under the 5 s the activity waits for an automatic reply
RUN_BOUND = 2.5


class AutoReplySession(FakeRealtimeSession):
    """Answers reply requests with the model's scripted calls, and answers each batch of new
    tool outputs on its own (``auto_tool_reply_generation``)."""

    def __init__(self, model: AutoReplyModel) -> None:
        super().__init__(model)
        self._auto_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        calls = self._auto_model.script.pop(0) if self._auto_model.script else []
        fut.set_result(_generation(calls=calls, user_initiated=True))
        return fut

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        known = {item.id for item in self.chat_ctx.items}
        new_outputs = [
            item.output
            for item in chat_ctx.items
            if item.type == "function_call_output" and item.id not in known
        ]
        await super().update_chat_ctx(chat_ctx.copy())
        if new_outputs and not self.closed:
            self._auto_model.on_outputs(self, new_outputs)

    def auto_reply(self, text: str, *, hold: asyncio.Event | None = None) -> None:
        if self.closed:
            return
        self._auto_model.auto_replies.append(text)
        self.emit(
            "generation_created",
            _generation(text=text, hold=hold, user_initiated=False),
        )


class AutoReplyModel(FakeRealtimeModel):
    def __init__(self, script: list[list[FunctionCall]], *, silent: bool = False) -> None:
        super().__init__(capabilities=fake_capabilities(auto_tool_reply_generation=True))
        self.script = script
        self.silent = silent
        self.auto_replies: list[str] = []
        self.b_synced = asyncio.Event()
        self.outputs_received = asyncio.Event()

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = AutoReplySession(self)
        self.created_sessions.append(sess)
        return sess

    def on_outputs(self, sess: AutoReplySession, outputs: list[str]) -> None:
        self.outputs_received.set()
        if self.silent:
            return  # a slow server: no automatic reply yet
        if "B is 2" in outputs:
            self.b_synced.set()
        # the answer to A's result is still being spoken when B's result reaches the model
        hold = self.b_synced if outputs == ["A is 1"] else None
        asyncio.get_running_loop().call_soon(
            lambda: sess.auto_reply(f"noted: {', '.join(outputs)}", hold=hold)
        )


def _generation(
    *,
    calls: list[FunctionCall] | None = None,
    text: str | None = None,
    hold: asyncio.Event | None = None,
    user_initiated: bool,
) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    if text is not None:
        text_ch = utils.aio.Chan[str]()
        audio_ch = utils.aio.Chan[rtc.AudioFrame]()
        audio_ch.close()
        modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        modalities.set_result(["text"])
        message_ch.send_nowait(
            MessageGeneration(
                message_id=utils.shortuuid("msg_"),
                text_stream=text_ch,
                audio_stream=audio_ch,
                modalities=modalities,
            )
        )
        text_ch.send_nowait(text)
        if hold is None:
            text_ch.close()
        else:
            hold_task = asyncio.ensure_future(hold.wait())
            hold_task.add_done_callback(lambda _: text_ch.close())
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls or []:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=user_initiated,
        response_id=utils.shortuuid("resp_"),
    )


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.b_returns = asyncio.Event()

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


async def test_run_returns_when_the_model_already_answered_the_outputs() -> None:
    model = AutoReplyModel(
        [
            [
                FunctionCall(call_id="call_a", name="lookup_a", arguments="{}"),
                FunctionCall(call_id="call_b", name="lookup_b", arguments="{}"),
            ]
        ]
    )
    desk = Desk()
    async with AgentSession(llm=model) as session:
        # B returns once the generation recorded its own outputs (the progress updates)
        session.on("function_tools_executed", lambda _: desk.b_returns.set())
        await session.start(desk)

        async def run() -> Any:
            return await session.run(user_input="Look up A and B.")

        run_task = asyncio.ensure_future(run())
        await asyncio.wait({run_task}, timeout=RUN_BOUND)
        returned_in_time = run_task.done()
        await asyncio.wait_for(run_task, timeout=10)

        assert model.b_synced.is_set()
        assert returned_in_time, "session.run() waited for an automatic reply that never came"
        # every result was answered by the model on its own
        assert any("A is 1" in reply for reply in model.auto_replies)
        assert any("B is 2" in reply for reply in model.auto_replies)


class Plain(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")

    @function_tool
    async def lookup_a(self) -> str:
        """Look up A."""
        return "A is 1"


async def test_close_releases_the_wait_for_an_automatic_reply() -> None:
    model = AutoReplyModel(
        [[FunctionCall(call_id="call_a", name="lookup_a", arguments="{}")]], silent=True
    )
    before = asyncio.all_tasks()
    session = AgentSession(llm=model)
    await session.start(Plain())
    run = session.run(user_input="Look up A.")
    await asyncio.wait_for(model.outputs_received.wait(), timeout=5)
    assert not run.done()  # waiting for the model's reply to the tool output

    await asyncio.wait_for(session.aclose(), timeout=5)
    await asyncio.wait_for(asyncio.gather(run, return_exceptions=True), timeout=5)

    # the session's tasks end with it
    running = [t for t in asyncio.all_tasks() - before if not t.done()]
    if running:
        await asyncio.wait(running, timeout=1)
    left = [t.get_coro().__qualname__ for t in running if not t.done()]
    if left:
        # let them end before failing, so that nothing leaks into the next test
        await asyncio.wait(running, timeout=10)
    assert left == [], "still running 1 s after the session closed"
