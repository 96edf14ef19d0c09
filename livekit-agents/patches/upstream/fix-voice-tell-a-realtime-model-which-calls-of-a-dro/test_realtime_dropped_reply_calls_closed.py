"""A realtime model whose context cannot be edited is told which calls of a dropped reply never ran.

A reply the model starts on its own (Nova Sonic: a completion holding a ``toolUse``) waits in the
speech queue while another one plays. The user interrupts, and the reply is dropped before it
was authorized: its function call is neither run nor answered. A model that keeps every call it
made open until it has a result, and whose history cannot be edited
(``RealtimeCapabilities.mutable_chat_context`` False), must hear that the call was not run: the
session gets the call, marked ``extra["__livekit_agents_tool_dropped"]``, and an error output for
it that asks for no reply, through ``update_chat_ctx()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
    FunctionCallOutput,
    GenerationCreatedEvent,
    MessageGeneration,
)
from livekit.agents.voice import SpeechHandle

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

CALL_ID = "call_book_12"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.booked: list[int] = []

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.booked.append(table)
        return f"table {table} booked"


class ImmutableContextSession(FakeRealtimeSession):
    """A session of a model whose context is not mutable (Nova Sonic): it records every
    context the framework sends it, the way a plugin forwards new items to the server."""

    def __init__(self, model: ImmutableContextModel) -> None:
        super().__init__(model)
        self.sent: list[ChatContext] = []

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        await super().update_chat_ctx(chat_ctx)
        self.sent.append(chat_ctx.copy())

    def dropped_call_items(self) -> list[FunctionCall | FunctionCallOutput]:
        """The last context sent that answers the dropped call: its call and output."""
        for chat_ctx in reversed(self.sent):
            items = [
                item
                for item in chat_ctx.items
                if item.type in ("function_call", "function_call_output")
                and item.call_id == CALL_ID
            ]
            if any(item.type == "function_call_output" for item in items):
                return items  # type: ignore[return-value]
        return []


class ImmutableContextModel(FakeRealtimeModel):
    def __init__(self) -> None:
        super().__init__(capabilities=fake_capabilities(mutable_chat_context=False))

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = ImmutableContextSession(self)
        self.created_sessions.append(sess)
        return sess


async def _no_audio() -> AsyncIterator[rtc.AudioFrame]:
    return
    yield


async def _no_calls() -> AsyncIterator[FunctionCall]:
    return
    yield


def _text_only() -> asyncio.Future[list[str]]:
    modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
    modalities.set_result(["text"])
    return modalities


async def test_dropped_reply_calls_are_closed_on_an_immutable_context_model() -> None:
    model = ImmutableContextModel()
    agent = Booker()
    speeches: list[SpeechHandle] = []
    playing = asyncio.Event()
    hold = asyncio.Event()
    calls_sent = asyncio.Event()

    async def held_text() -> AsyncIterator[str]:
        playing.set()
        yield "One moment."
        await hold.wait()

    async def one_message() -> AsyncIterator[MessageGeneration]:
        yield MessageGeneration(
            message_id=utils.shortuuid("msg_"),
            text_stream=held_text(),
            audio_stream=_no_audio(),
            modalities=_text_only(),  # type: ignore[arg-type]
        )

    async def no_message() -> AsyncIterator[MessageGeneration]:
        return
        yield

    async def book_call() -> AsyncIterator[FunctionCall]:
        yield FunctionCall(call_id=CALL_ID, name="book", arguments='{"table": 12}')
        calls_sent.set()

    async with AgentSession(llm=model) as session:
        session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
        await session.start(agent)
        rt = model.active_session
        assert isinstance(rt, ImmutableContextSession)

        # the model speaks on its own, then sends a response holding a tool call while the
        # first one plays: that one waits in the speech queue
        rt.emit(
            "generation_created",
            GenerationCreatedEvent(
                message_stream=one_message(),  # type: ignore[arg-type]
                function_stream=_no_calls(),  # type: ignore[arg-type]
                user_initiated=False,
                response_id="resp_1",
            ),
        )
        await asyncio.wait_for(playing.wait(), timeout=5)
        rt.emit(
            "generation_created",
            GenerationCreatedEvent(
                message_stream=no_message(),  # type: ignore[arg-type]
                function_stream=book_call(),  # type: ignore[arg-type]
                user_initiated=False,
                response_id="resp_2",
            ),
        )
        await asyncio.wait_for(calls_sent.wait(), timeout=5)
        assert len(speeches) == 2 and not speeches[1].done()

        # the user interrupts: the queued reply is dropped before it was authorized
        session.interrupt()
        hold.set()
        for speech in speeches:
            await asyncio.wait_for(speech.wait_for_playout(), timeout=5)
        # let the activity finish with the dropped response (a bounded number of loop turns)
        for _ in range(50):
            if rt.dropped_call_items():
                break
            await asyncio.sleep(0)

        assert speeches[1].interrupted
        assert agent.booked == [], "the dropped reply's call ran"
        items = rt.dropped_call_items()
        assert [item.type for item in items] == ["function_call", "function_call_output"], (
            "the model was never told that the dropped reply's call was not run"
        )
        call, output = items
        assert isinstance(call, FunctionCall) and isinstance(output, FunctionCallOutput)
        # marked, so a plugin tells it from a tool that failed (an error the model must hear)
        assert call.extra.get("__livekit_agents_tool_dropped"), "the dropped call is not marked"
        assert output.is_error and "not run" in output.output
        assert not output.reply_required, "a reply is asked for a call nobody ran"
        # the call never ran: the agent's history does not hold it
        assert not any(
            item.type in ("function_call", "function_call_output") and item.call_id == CALL_ID
            for item in session.history.items
        )
