"""A scripted Bedrock bidirectional stream for the Nova Sonic realtime model (nothing leaves the
process): the plugin's client and credentials are patched to open ``FakeStream``s, which record
every event the plugin sends and push the server events a test scripts.

Import it after skipping below Python 3.12 (the plugin needs it)."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import AgentSession, llm
from livekit.plugins.aws.experimental.realtime import RealtimeModel, realtime_model
from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

TIMEOUT = 10.0


class _Payload:
    def __init__(self, data: bytes) -> None:
        self.bytes_ = data


class _Chunk:
    """What the SDK's ``receive()`` yields: ``.value.bytes_`` holds one JSON server event."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.value = _Payload(json.dumps(event).encode())


class _Output:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False

    async def receive(self) -> _Chunk | None:
        item = await self.queue.get()
        if item is None:
            self.queue.put_nowait(None)
            return None
        if isinstance(item, BaseException):
            raise item
        return _Chunk(item)

    async def close(self) -> None:
        self.end()

    def end(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class _Input:
    def __init__(self, stream: FakeStream) -> None:
        self._stream = stream
        self.closed = False

    async def send(self, chunk: Any) -> None:
        event = json.loads(chunk.value.bytes_)
        if self._stream.hold is not None and self._stream.hold(event):
            self._stream.held.set()  # the event is on the wire until the test releases it
            await self._stream.release.wait()
        self._stream.record(event)

    async def close(self) -> None:
        self.closed = True
        self._stream.output_stream.end()
        self._stream.bedrock.changed()


class FakeStream:
    """One stream the plugin opened: every event it sent, in order, and a way to answer."""

    def __init__(self, bedrock: FakeBedrock) -> None:
        self.bedrock = bedrock
        self.sent: list[dict[str, Any]] = []
        self.after_close: list[dict[str, Any]] = []
        self.input_stream = _Input(self)
        self.output_stream = _Output()
        self._blocks: dict[str, dict[str, Any]] = {}
        self.hold: Callable[[dict[str, Any]], bool] | None = None
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def await_output(self) -> tuple[None, _Output]:
        return None, self.output_stream

    def record(self, event: dict[str, Any]) -> None:
        if self.input_stream.closed:
            self.after_close.append(event)
            return
        self.sent.append(event)
        kind, body = next(iter(event["event"].items()))
        if kind == "contentStart":
            self._blocks[body["contentName"]] = dict(body)
        elif kind in ("textInput", "toolResult"):
            self._blocks[body["contentName"]]["content"] = body["content"]
        self.bedrock.changed()
        if kind == "contentEnd":
            self.bedrock.react(self, self._blocks.get(body["contentName"], {}))

    def push(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.output_stream.queue.put_nowait(event)

    def fail(self, error: BaseException) -> None:
        self.output_stream.queue.put_nowait(error)

    def blocks(self, type: str) -> list[dict[str, Any]]:
        """The content blocks sent, in order: their contentStart and their ``content``."""
        return [b for b in self._blocks.values() if b.get("type") == type]

    def texts(self) -> list[tuple[str, bool, str]]:
        """(role, interactive, text) of every text block sent."""
        return [
            (b["role"], bool(b.get("interactive")), b.get("content", ""))
            for b in self.blocks("TEXT")
        ]

    def tool_results(self) -> list[tuple[str, str]]:
        """(toolUseId, content) of every toolResult sent."""
        return [
            (b["toolResultInputConfiguration"]["toolUseId"], b.get("content", ""))
            for b in self.blocks("TOOL")
        ]

    def kinds(self) -> list[str]:
        return [next(iter(e["event"])) for e in self.sent]


class FakeBedrock:
    """Every Nova Sonic session opens its streams here; the script answers interactive text."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.streams: list[FakeStream] = []
        self.sessions: list[Any] = []
        self.script: list[tuple[str, list[dict[str, Any]]]] = []
        self._changed = asyncio.Event()
        bedrock = self

        class _Client:
            async def invoke_model_with_bidirectional_stream(self, _: Any) -> FakeStream:
                bedrock.streams.append(FakeStream(bedrock))
                bedrock.changed()
                return bedrock.streams[-1]

        async def _initialize_client(session: Any) -> None:
            if session not in bedrock.sessions:
                bedrock.sessions.append(session)
            session._bedrock_client = _Client()

        class _StaticCredentials:
            def get_credential_expiry_time(self) -> float | None:
                return None

        monkeypatch.setattr(RealtimeSession, "_initialize_client", _initialize_client)
        monkeypatch.setattr(realtime_model, "_get_credentials_resolver", _StaticCredentials)

    def answer(self, containing: str, events: list[dict[str, Any]]) -> None:
        """Once interactive text or a tool result containing ``containing`` was sent, push
        ``events`` back on its stream (once)."""
        self.script.append((containing, events))

    def react(self, stream: FakeStream, block: dict[str, Any]) -> None:
        # the model answers interactive text and tool results
        if not (block.get("type") == "TOOL" or block.get("interactive")):
            return
        for i, (containing, events) in enumerate(self.script):
            if containing in block.get("content", ""):
                del self.script[i]
                stream.push(events)
                return

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, condition: Callable[[], Any], what: str) -> None:
        async def _wait() -> None:
            while not condition():
                await self._changed.wait()

        try:
            await asyncio.wait_for(_wait(), TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    async def stream(self, index: int) -> FakeStream:
        """Stream ``index`` once the plugin streams audio input on it (it is fully up)."""
        await self.wait_for(
            lambda: (
                len(self.streams) > index
                and any(b.get("type") == "AUDIO" for b in self.streams[index].blocks("AUDIO"))
            ),
            f"Bedrock stream {index}",
        )
        return self.streams[index]

    async def flush_audio_input(self) -> None:
        """Two audio frames through the last session's audio input, each seen on its stream:
        what that task had queued before them (a tool result) has gone out."""
        session, stream = self.sessions[-1], self.streams[-1]
        frame = rtc.AudioFrame(b"\x00\x00" * 512, 16000, 1, 512)  # one chunk of the plugin
        for _ in range(2):
            seen = stream.kinds().count("audioInput")
            session.push_audio(frame)
            await self.wait_for(
                lambda seen=seen: stream.kinds().count("audioInput") > seen, "an audio frame"
            )


def _ids(completion: str) -> dict[str, str]:
    return {"sessionId": "s", "promptName": "p", "completionId": completion}


def _block(completion: str, type: str, role: str, body: dict[str, Any], **start: Any) -> list:
    content = str(uuid.uuid4())
    ids = {**_ids(completion), "contentId": content}
    kind = {"TEXT": "textOutput", "AUDIO": "audioOutput", "TOOL": "toolUse"}[type]
    stop = start.pop("stopReason", "PARTIAL_TURN")
    return [
        {"event": {"contentStart": {**ids, "type": type, "role": role, **start}}},
        {"event": {kind: {**ids, "role": role, **body}}},
        {"event": {"contentEnd": {**ids, "type": type, "role": role, "stopReason": stop}}},
    ]


def model_turn(
    text: str | None = None,
    *,
    tool: tuple[str, str, dict[str, Any]] | None = None,
    user: str | None = None,
) -> list[dict[str, Any]]:
    """One completion as Nova Sonic streams it: the user's transcript (``user``, what Nova heard
    the user say), then a tool call, or an answer (SPECULATIVE text, its audio, FINAL text)."""
    cid = str(uuid.uuid4())
    events: list[dict[str, Any]] = [{"event": {"completionStart": _ids(cid)}}]
    if user is not None:
        events += _block(cid, "TEXT", "USER", {"content": user})
    if tool is not None:
        tool_id, name, args = tool
        body = {"toolUseId": tool_id, "toolName": name, "content": json.dumps(args)}
        events += _block(cid, "TOOL", "TOOL", body, stopReason="TOOL_USE")
    if text is not None:
        stage = {"additionalModelFields": json.dumps({"generationStage": "SPECULATIVE"})}
        events += _block(cid, "TEXT", "ASSISTANT", {"content": text}, **stage)
        pcm = base64.b64encode(b"\x00\x00" * 240).decode()
        events += _block(cid, "AUDIO", "ASSISTANT", {"content": pcm}, stopReason="END_TURN")
        final = {"additionalModelFields": json.dumps({"generationStage": "FINAL"})}
        events += _block(
            cid, "TEXT", "ASSISTANT", {"content": text}, stopReason="END_TURN", **final
        )
    events.append({"event": {"completionEnd": {**_ids(cid), "stopReason": "END_TURN"}}})
    return events


def offline_session() -> AgentSession:
    return AgentSession(
        llm=RealtimeModel.with_nova_sonic_2(),
        vad=None,
        turn_handling={"turn_detection": None},
        user_away_timeout=None,
        aec_warmup_duration=None,
    )


async def session_with_a_call(bedrock: FakeBedrock, call_id: str) -> tuple[Any, FakeStream]:
    """A Nova Sonic 2 session, set up as the framework does, whose model called
    ``check_table`` (``call_id``)."""
    rt = RealtimeModel.with_nova_sonic_2().session()
    created: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
    rt.on("generation_created", lambda ev: created.done() or created.set_result(ev))
    await rt.update_instructions("You check tables.")
    await rt.update_tools([])
    await rt.update_chat_ctx(llm.ChatContext.empty())
    stream = await bedrock.stream(0)
    stream.push(model_turn(tool=(call_id, "check_table", {})))
    ev = await asyncio.wait_for(created, TIMEOUT)
    calls = [call async for call in ev.function_stream]
    assert [c.call_id for c in calls] == [call_id]
    return rt, stream


def result_ctx(rt: Any, call_id: str) -> llm.ChatContext:
    """The session's context with the call and its output, as the framework gives it."""
    ctx = rt.chat_ctx.copy()
    ctx.items.append(llm.FunctionCall(call_id=call_id, name="check_table", arguments="{}"))
    ctx.items.append(
        llm.FunctionCallOutput(
            call_id=call_id, name="check_table", output="free from 8pm", is_error=False
        )
    )
    return ctx
