"""A fake realtime model that answers each reply request at once, from a script of function
calls, and records what each request saw."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from livekit import rtc
from livekit.agents import utils
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
    GenerationCreatedEvent,
    MessageGeneration,
)

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities


class AnsweringSession(FakeRealtimeSession):
    """Answers each reply request at once: with the next scripted function calls, if any."""

    def __init__(self, model: AnsweringModel) -> None:
        super().__init__(model)
        self._answering_model = model

    async def aclose(self) -> None:
        if (hook := self._answering_model.on_first_close) is not None:
            self._answering_model.on_first_close = None
            hook()
        await super().aclose()

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        model = self._answering_model
        model.requests.append((self, self.chat_ctx.copy(), self.closed))
        if (on_request := model.on_request) is not None:
            on_request(self)
        calls = model.script.pop(0) if model.script else []
        fut.set_result(generation(calls, response_id=f"response-{len(model.requests)}"))
        return fut


class AnsweringModel(FakeRealtimeModel):
    def __init__(self, script: list[list[FunctionCall]], **capabilities: bool) -> None:
        super().__init__(capabilities=fake_capabilities(**capabilities))
        self.script = script
        self.requests: list[tuple[FakeRealtimeSession, ChatContext, bool]] = []
        self.on_first_close: Callable[[], None] | None = None
        self.on_request: Callable[[FakeRealtimeSession], None] | None = None

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = AnsweringSession(self)
        self.created_sessions.append(sess)
        return sess


def generation(
    calls: list[FunctionCall],
    *,
    response_id: str | None = None,
    user_initiated: bool = True,
    saying: utils.aio.Chan[str] | None = None,
) -> GenerationCreatedEvent:
    """A generation with the given calls; with ``saying``, it also says what that channel
    carries, and lasts until it is closed."""
    message_ch = utils.aio.Chan[MessageGeneration]()
    if saying is not None:
        audio_ch = utils.aio.Chan[rtc.AudioFrame]()
        audio_ch.close()
        modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        modalities.set_result(["text"])
        message_ch.send_nowait(
            MessageGeneration(
                message_id=utils.shortuuid("msg_"),
                text_stream=saying,
                audio_stream=audio_ch,
                modalities=modalities,
            )
        )
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=user_initiated,
        response_id=response_id or utils.shortuuid("resp_"),
    )


def release_tool_waiting_for_itself(name: str) -> None:
    """Where an inline AgentTask returns to an agent the session left and the framework has
    the tool that awaited it close its own activity, the tool awaits a gather of its own task,
    which nothing ends (cancelling it recurses): end that gather, so the session can close and
    the failure a test reports is its assertion, not the leftover tasks."""
    for task in asyncio.all_tasks():
        waiter = getattr(task, "_fut_waiter", None)
        if task.get_name() == f"tool_exec_{name}" and waiter is not None and not waiter.done():
            waiter.set_result([])
