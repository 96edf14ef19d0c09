"""A recording fake of the Bedrock bidirectional stream (Nova Sonic), offline.

The Nova Sonic realtime plugin builds its Bedrock runtime client in
``RealtimeSession._initialize_client()`` and opens one bidirectional stream per connection with
``client.invoke_model_with_bidirectional_stream(...)``. :meth:`FakeBedrock.install` replaces
``_initialize_client`` so the session gets a fake client, and the plugin's shared AWS credentials
resolver with one that needs no credentials. Every other line of the plugin runs as shipped: it
serializes its own events (``SonicEventBuilder``) and parses the server events the test pushes.

A *connection* is one stream. It journals every event the plugin sends, parsed from JSON
(``BedrockConnection.sent``), and records what breaks the protocol (``violations``):

* a send after the client closed its input stream (or after ``sessionEnd``);
* a ``toolResult`` content block for a ``toolUseId`` this connection never issued (ids are
  issued by the ``toolUse`` events the test pushes on that connection);
* a second ``toolResult`` for the same ``toolUseId``.

Server events are pushed by the test in Nova Sonic's wire format (``{"event": {...}}``), built
with the helpers below (:func:`completion_start`, :func:`text_block`, :func:`audio_block`,
:func:`tool_use`, :func:`completion_end`, :func:`usage`, :func:`model_turn`). They can be pushed
at any time (``conn.push(...)``) or scripted as a reaction to what the plugin sends
(``bedrock.reply_when(predicate, events)``). Nothing here sleeps; every wait is bounded::

    bedrock = offline_bedrock(monkeypatch)
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    ...
    conn = await bedrock.connection(0)
    await conn.wait_sent(is_tool_result("tool-1"), what="the tool result")
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .sync import DEFAULT_TIMEOUT, Gate, RecordedSends, bounded

__all__ = [
    "BedrockConnection",
    "FakeBedrock",
    "ServerEvent",
    "SentEvent",
    "audio_block",
    "completion_end",
    "completion_start",
    "content_names",
    "event_kind",
    "is_event",
    "is_interactive_text",
    "is_tool_result",
    "model_turn",
    "next_recycle",
    "offline_bedrock",
    "sent_texts",
    "text_block",
    "tool_result_contents",
    "tool_use",
    "usage",
]

ServerEvent = dict[str, Any]
"""One server event as Bedrock sends it: ``{"event": {"<kind>": {...}}}``."""
SentEvent = dict[str, Any]
"""One event the plugin sent, parsed from its JSON payload: ``{"event": {"<kind>": {...}}}``."""

_CLOSED = object()


def event_kind(event: SentEvent | ServerEvent) -> str:
    """The single key under ``event`` (``"contentStart"``, ``"toolResult"``, ...)."""
    return next(iter(event["event"]))


class _OutputChunk:
    """What the SDK's ``receive()`` yields: ``.value.bytes_`` holds one JSON server event."""

    class _Payload:
        def __init__(self, data: bytes) -> None:
            self.bytes_ = data

    def __init__(self, event: ServerEvent) -> None:
        self.value = _OutputChunk._Payload(json.dumps(event).encode("utf-8"))


class _InputStream:
    """The ``input_stream`` (``EventPublisher``) of the duplex stream."""

    def __init__(self, conn: BedrockConnection) -> None:
        self._conn = conn

    @property
    def closed(self) -> bool:
        return self._conn.input_closed

    async def send(self, chunk: Any) -> None:
        if (gate := self._conn.hold_sends) is not None:
            await gate.wait()
        event = json.loads(chunk.value.bytes_.decode("utf-8"))
        if (held := self._conn.hold_matching) is not None and held[0](event):
            await held[1].wait()
        self._conn._record(event)

    async def close(self) -> None:
        if not self._conn.input_closed:
            self._conn.input_closed = True
            if self._conn.ended_at is None:
                self._conn.ended_at = time.time()
            # the service ends its output once the client's input is done
            self._conn._end_output()
            self._conn._notify()


class _OutputStream:
    """The ``output_stream`` (``EventReceiver``) of the duplex stream."""

    def __init__(self, conn: BedrockConnection) -> None:
        self._conn = conn
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False

    async def receive(self) -> _OutputChunk | None:
        item = await self._inbox.get()
        if item is _CLOSED:
            self._inbox.put_nowait(_CLOSED)  # every later receive ends the same way
            return None
        if isinstance(item, BaseException):
            raise item
        return _OutputChunk(item)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._inbox.put_nowait(_CLOSED)
            self._conn._notify()


class _DuplexStream:
    """``invoke_model_with_bidirectional_stream``'s result. Like the SDK's, ``output_stream``
    is ``None`` until ``await_output()`` returns (the service's initial response)."""

    def __init__(self, conn: BedrockConnection) -> None:
        self._conn = conn
        self.input_stream = _InputStream(conn)
        self.output_stream: _OutputStream | None = None

    async def await_output(self) -> tuple[None, _OutputStream]:
        if (gate := self._conn.hold_output) is not None:
            await gate.wait()
        self.output_stream = self._conn._output
        self._conn.output_awaited = True
        self._conn._notify()
        return None, self._conn._output


@dataclass(eq=False)
class BedrockConnection(RecordedSends[SentEvent]):
    """One bidirectional stream the plugin opened, what it sent on it and what went wrong."""

    index: int
    model_id: str
    server: FakeBedrock
    sent: list[SentEvent] = field(default_factory=list)
    """Every event sent while the stream was open, in order (audio chunks included)."""
    sent_after_close: list[SentEvent] = field(default_factory=list)
    pushed: list[ServerEvent] = field(default_factory=list)
    """Every server event pushed to the plugin, in order."""
    issued_tool_ids: set[str] = field(default_factory=set)
    """``toolUseId`` of every ``toolUse`` this connection's server side issued."""
    answered_tool_ids: list[str] = field(default_factory=list)
    """``toolUseId`` of every ``toolResult`` content block the plugin opened, in order."""
    violations: list[str] = field(default_factory=list)
    hold_sends: Gate | None = None
    """If set, every send blocks on it before it is recorded."""
    hold_matching: tuple[Callable[[SentEvent], bool], Gate] | None = None
    """If set, ``(predicate, gate)``: every send the predicate matches blocks on the gate before
    it is recorded; the others go through (``hold_sends`` holds them all)."""
    hold_output: Gate | None = None
    """If set, ``await_output()`` (the service's initial response) blocks on it."""
    input_closed: bool = False
    session_ended: bool = False
    opened_at: float = field(default_factory=time.time)
    """``time.time()`` when the plugin opened the stream."""
    ended_at: float | None = None
    """``time.time()`` when the stream stopped carrying anything: its input closed or the
    session ended, whichever came first."""
    output_awaited: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _output: _OutputStream = field(init=False, repr=False)
    _stream: _DuplexStream = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._output = _OutputStream(self)
        self._stream = _DuplexStream(self)

    # -- what the plugin sends --

    def _record(self, event: SentEvent) -> None:
        kind = event_kind(event)
        if self.input_closed or self.session_ended:
            self.violations.append(f"connection {self.index}: {kind} sent on a closed stream")
            self.sent_after_close.append(event)
            self._notify()
            return
        self.sent.append(event)
        if kind == "contentStart" and (
            cfg := event["event"]["contentStart"].get("toolResultInputConfiguration")
        ):
            tool_id = cfg.get("toolUseId")
            if tool_id not in self.issued_tool_ids:
                self.violations.append(
                    f"connection {self.index}: toolResult for {tool_id!r}, which it never issued "
                    f"(issued: {sorted(self.issued_tool_ids)})"
                )
            elif tool_id in self.answered_tool_ids:
                self.violations.append(f"connection {self.index}: second toolResult for {tool_id!r}")
            self.answered_tool_ids.append(tool_id)
        elif kind == "sessionEnd":
            self.session_ended = True
            if self.ended_at is None:
                self.ended_at = time.time()
        self._notify()
        self.server._react(self, event)

    # -- what the server sends --

    def push(self, *events: ServerEvent | Iterable[ServerEvent]) -> None:
        """Deliver server events (or lists of them) to the plugin's ``receive()``, in order."""
        assert not self._output.closed, f"connection {self.index}: output stream is closed"
        for item in events:
            batch = [item] if isinstance(item, dict) else list(item)
            for event in batch:
                if (use := event["event"].get("toolUse")) is not None:
                    self.issued_tool_ids.add(use["toolUseId"])
                self.pushed.append(event)
                self._output._inbox.put_nowait(event)
        self._notify()

    def fail(self, error: BaseException) -> None:
        """The service reports ``error`` on the stream: the plugin's next ``receive()`` raises it
        (e.g. a ``ValidationException``), and the stream goes on."""
        assert not self._output.closed, f"connection {self.index}: output stream is closed"
        self._output._inbox.put_nowait(error)
        self._notify()

    def _end_output(self) -> None:
        if not self._output.closed:
            self._output.closed = True
            self._output._inbox.put_nowait(_CLOSED)

    def close_from_server(self) -> None:
        """The service ends the stream (``receive()`` returns ``None`` from now on)."""
        self._end_output()
        self._notify()

    @property
    def closed(self) -> bool:
        """The client closed its input stream or ended the session."""
        return self.input_closed or self.session_ended

    # -- waiting --

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        self.server._notify()

    async def wait_ready(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Bounded wait until the plugin streams audio input: the connection is fully up."""
        await self.wait_sent(
            lambda e: event_kind(e) == "contentStart" and e["event"]["contentStart"].get("type") == "AUDIO",
            timeout=timeout,
            what="the audio input content start",
        )


@dataclass
class _Reaction:
    predicate: Callable[[SentEvent], bool]
    events: list[ServerEvent] | Callable[[BedrockConnection, SentEvent], Iterable[ServerEvent]]
    once: bool
    used: bool = False


class FakeBedrock:
    """Stands in for Bedrock's bidirectional streaming endpoint; records every connection."""

    def __init__(self) -> None:
        self.connections: list[BedrockConnection] = []
        self.sessions: list[Any] = []
        """Every Nova Sonic ``RealtimeSession`` that opened a connection, in order."""
        self._reactions: list[_Reaction] = []
        self._holds: dict[int, Gate] = {}
        self._changed = asyncio.Event()

    def install(self, monkeypatch: pytest.MonkeyPatch, *, session_duration: float | None = None) -> None:
        """Make every Nova Sonic ``RealtimeSession`` talk to this fake.

        ``session_duration`` (seconds) overrides the plugin's session recycle period.
        """
        from livekit.plugins.aws.experimental.realtime import realtime_model

        server = self

        class _Client:
            async def invoke_model_with_bidirectional_stream(self, operation_input: Any) -> _DuplexStream:
                conn = BedrockConnection(
                    index=len(server.connections), model_id=operation_input.model_id, server=server
                )
                if (gate := server._holds.get(conn.index)) is not None:
                    conn.hold_output = gate
                server.connections.append(conn)
                server._notify()
                return conn._stream

        async def _initialize_client(session: Any) -> None:
            if session not in server.sessions:
                server.sessions.append(session)
            session._bedrock_client = _Client()

        class _Credentials:
            """No AWS credentials offline: static ones, so the plugin computes no expiry."""

            def get_credential_expiry_time(self) -> float | None:
                return None

            async def get_identity(self, **kwargs: Any) -> Any:
                raise AssertionError("the fake Bedrock client signs nothing")

        monkeypatch.setattr(realtime_model.RealtimeSession, "_initialize_client", _initialize_client)
        monkeypatch.setattr(realtime_model, "_get_credentials_resolver", lambda: _Credentials())
        if session_duration is not None:
            monkeypatch.setattr(realtime_model, "MAX_SESSION_DURATION_SECONDS", session_duration)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    @staticmethod
    def fire_recycle_timer(session: Any) -> None:
        """Make ``session``'s recycle timer fire now, as it does at the end of its period (the
        8-minute Bedrock limit or credential expiry); the timers it starts later keep the
        plugin's period. Restarts the timer through the plugin's own
        ``_start_session_recycle_timer()`` with a zero period."""
        from livekit.plugins.aws.experimental.realtime import realtime_model

        period = realtime_model.MAX_SESSION_DURATION_SECONDS
        realtime_model.MAX_SESSION_DURATION_SECONDS = 0
        try:
            session._start_session_recycle_timer()
        finally:
            realtime_model.MAX_SESSION_DURATION_SECONDS = period

    def hold(self, index: int) -> Gate:
        """Hold connection ``index``'s initial response (``await_output``) until the gate opens."""
        return self._holds.setdefault(index, Gate(f"bedrock connection {index} output"))

    def reply_when(
        self,
        predicate: Callable[[SentEvent], bool],
        events: Iterable[ServerEvent] | Callable[[BedrockConnection, SentEvent], Iterable[ServerEvent]],
        *,
        once: bool = True,
    ) -> None:
        """When the plugin sends an event matching ``predicate`` (on any connection), push
        ``events`` on that connection (or what ``events(conn, sent)`` returns). Reactions are
        tried in the order they were added; a ``once`` reaction is used up by its first match."""
        self._reactions.append(_Reaction(predicate, events if callable(events) else list(events), once))

    def _react(self, conn: BedrockConnection, event: SentEvent) -> None:
        for reaction in self._reactions:
            if reaction.used or not reaction.predicate(event):
                continue
            reaction.used = reaction.once
            events = reaction.events(conn, event) if callable(reaction.events) else reaction.events
            conn.push(*events)
            return

    async def connection(self, index: int, *, timeout: float = DEFAULT_TIMEOUT) -> BedrockConnection:
        """Bounded wait until connection ``index`` (0-based, in opening order) was opened."""

        async def _wait() -> BedrockConnection:
            while len(self.connections) <= index:
                await self._changed.wait()
            return self.connections[index]

        return await bounded(_wait(), timeout, what=f"Bedrock connection {index} to open")

    @property
    def violations(self) -> list[str]:
        return [v for c in self.connections for v in c.violations]


def offline_bedrock(monkeypatch: pytest.MonkeyPatch, *, session_duration: float | None = None) -> FakeBedrock:
    """A :class:`FakeBedrock`, installed."""
    server = FakeBedrock()
    server.install(monkeypatch, session_duration=session_duration)
    return server


def next_recycle(monkeypatch: pytest.MonkeyPatch) -> asyncio.Future[str]:
    """Resolves with how the next Nova Sonic session recycle (``_graceful_session_recycle``, the
    timed or the tool-change one) ended: ``"done"``, ``"cancelled"`` or the error's repr."""
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    outcome: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    recycle = RealtimeSession._graceful_session_recycle

    async def _watched(self: Any) -> None:
        try:
            await recycle(self)
        except asyncio.CancelledError:
            if not outcome.done():
                outcome.set_result("cancelled")
            raise
        except Exception as e:
            if not outcome.done():
                outcome.set_result(repr(e))
            raise
        if not outcome.done():
            outcome.set_result("done")

    monkeypatch.setattr(RealtimeSession, "_graceful_session_recycle", _watched)
    return outcome


# -- server events (wire JSON) -------------------------------------------------------------------

_SESSION_ID = "fake-session"
_PROMPT = "fake-prompt"


def _ids(completion_id: str | None) -> dict[str, str]:
    return {"sessionId": _SESSION_ID, "promptName": _PROMPT, "completionId": completion_id or "completion"}


def completion_start(completion_id: str = "completion") -> ServerEvent:
    return {"event": {"completionStart": _ids(completion_id)}}


def completion_end(completion_id: str = "completion", stop_reason: str = "END_TURN") -> ServerEvent:
    return {"event": {"completionEnd": {**_ids(completion_id), "stopReason": stop_reason}}}


def text_block(
    role: str,
    text: str,
    *,
    stage: str | None = None,
    stop_reason: str = "PARTIAL_TURN",
    completion_id: str = "completion",
) -> list[ServerEvent]:
    """contentStart / textOutput / contentEnd of one TEXT block. ``stage`` (``"SPECULATIVE"``
    or ``"FINAL"``) marks an ASSISTANT block the way Nova does, in ``additionalModelFields``."""
    content_id = str(uuid.uuid4())
    start: dict[str, Any] = {
        **_ids(completion_id),
        "contentId": content_id,
        "type": "TEXT",
        "role": role,
        "textOutputConfiguration": {"mediaType": "text/plain"},
    }
    if stage is not None:
        start["additionalModelFields"] = json.dumps({"generationStage": stage})
    return [
        {"event": {"contentStart": start}},
        {
            "event": {
                "textOutput": {**_ids(completion_id), "contentId": content_id, "role": role, "content": text}
            }
        },
        {
            "event": {
                "contentEnd": {
                    **_ids(completion_id),
                    "contentId": content_id,
                    "type": "TEXT",
                    "role": role,
                    "stopReason": stop_reason,
                }
            }
        },
    ]


def audio_block(
    samples: int = 240, *, stop_reason: str = "END_TURN", completion_id: str = "completion"
) -> list[ServerEvent]:
    """One ASSISTANT AUDIO block of ``samples`` silent 16-bit samples (24 kHz)."""
    content_id = str(uuid.uuid4())
    start = {
        **_ids(completion_id),
        "contentId": content_id,
        "type": "AUDIO",
        "role": "ASSISTANT",
        "audioOutputConfiguration": {"mediaType": "audio/lpcm", "sampleRateHertz": 24000},
    }
    pcm = base64.b64encode(b"\x00\x00" * samples).decode("ascii")
    return [
        {"event": {"contentStart": start}},
        {"event": {"audioOutput": {**_ids(completion_id), "contentId": content_id, "content": pcm}}},
        {
            "event": {
                "contentEnd": {
                    **_ids(completion_id),
                    "contentId": content_id,
                    "type": "AUDIO",
                    "role": "ASSISTANT",
                    "stopReason": stop_reason,
                }
            }
        },
    ]


def tool_use(
    tool_use_id: str, name: str, args: dict[str, Any] | None = None, *, completion_id: str = "completion"
) -> list[ServerEvent]:
    """contentStart(TOOL) / toolUse / contentEnd(TOOL_USE): the model calls a tool."""
    content_id = str(uuid.uuid4())
    return [
        {
            "event": {
                "contentStart": {
                    **_ids(completion_id),
                    "contentId": content_id,
                    "type": "TOOL",
                    "role": "TOOL",
                    "toolUseOutputConfiguration": {"mediaType": "application/json"},
                }
            }
        },
        {
            "event": {
                "toolUse": {
                    **_ids(completion_id),
                    "contentId": content_id,
                    "toolUseId": tool_use_id,
                    "toolName": name,
                    "content": json.dumps(args or {}),
                }
            }
        },
        {
            "event": {
                "contentEnd": {
                    **_ids(completion_id),
                    "contentId": content_id,
                    "type": "TOOL",
                    "stopReason": "TOOL_USE",
                }
            }
        },
    ]


def usage(
    completion_id: str = "completion", *, input_tokens: int = 10, output_tokens: int = 10
) -> ServerEvent:
    tokens = {
        "input": {"speechTokens": 0, "textTokens": input_tokens},
        "output": {"speechTokens": 0, "textTokens": output_tokens},
    }
    return {
        "event": {
            "usageEvent": {
                **_ids(completion_id),
                "details": {"delta": tokens, "total": tokens},
                "totalInputTokens": input_tokens,
                "totalOutputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
            }
        }
    }


def model_turn(
    text: str | None = None,
    *,
    user: str | None = None,
    tool: tuple[str, str, dict[str, Any]] | None = None,
    audio: bool = True,
    completion_id: str | None = None,
) -> list[ServerEvent]:
    """One completion the way Nova Sonic streams it: completionStart, the user's transcript
    (``user``, as ASR text), then either a tool call (``tool=(id, name, args)``) or the
    assistant's answer (SPECULATIVE text, audio ending the turn, FINAL text), usage, and
    completionEnd."""
    cid = completion_id or str(uuid.uuid4())
    events: list[ServerEvent] = [completion_start(cid)]
    if user is not None:
        events += text_block("USER", user, completion_id=cid)
    if tool is not None:
        events += tool_use(*tool, completion_id=cid)
    if text is not None:
        events += text_block("ASSISTANT", text, stage="SPECULATIVE", completion_id=cid)
        if audio:
            events += audio_block(completion_id=cid)
        events += text_block("ASSISTANT", text, stage="FINAL", stop_reason="END_TURN", completion_id=cid)
    events += [usage(cid), completion_end(cid)]
    return events


# -- reading what the plugin sent ----------------------------------------------------------------


def content_names(events: Iterable[SentEvent], kind: str) -> dict[str, SentEvent]:
    """contentName -> the ``contentStart`` of every content block of ``kind`` (TEXT/AUDIO/TOOL)."""
    return {
        e["event"]["contentStart"]["contentName"]: e
        for e in events
        if event_kind(e) == "contentStart" and e["event"]["contentStart"].get("type") == kind
    }


def sent_texts(events: Iterable[SentEvent]) -> list[tuple[str, bool, str]]:
    """``(role, interactive, text)`` of every TEXT content block sent, in order (system prompt
    and history included)."""
    events = list(events)
    starts = content_names(events, "TEXT")
    out: list[tuple[str, bool, str]] = []
    for e in events:
        if event_kind(e) == "textInput":
            start = starts[e["event"]["textInput"]["contentName"]]["event"]["contentStart"]
            out.append((start["role"], bool(start.get("interactive")), e["event"]["textInput"]["content"]))
    return out


def tool_result_contents(events: Iterable[SentEvent]) -> list[tuple[str, str]]:
    """``(toolUseId, content)`` of every ``toolResult`` sent, in order."""
    events = list(events)
    starts = content_names(events, "TOOL")
    out: list[tuple[str, str]] = []
    for e in events:
        if event_kind(e) == "toolResult":
            start = starts[e["event"]["toolResult"]["contentName"]]["event"]["contentStart"]
            out.append(
                (start["toolResultInputConfiguration"]["toolUseId"], e["event"]["toolResult"]["content"])
            )
    return out


class _Blocks:
    """Follows the content blocks of ``sent`` (start, content, end) for stateful predicates."""

    def __init__(self) -> None:
        self.starts: dict[str, dict[str, Any]] = {}
        self.texts: dict[str, str] = {}

    def feed(self, e: SentEvent) -> dict[str, Any] | None:
        """Record ``e``; return the block's contentStart when ``e`` ends a block."""
        kind = event_kind(e)
        body = e["event"][kind]
        if kind == "contentStart":
            self.starts[body["contentName"]] = body
        elif kind in ("textInput", "toolResult"):
            self.texts[body["contentName"]] = body["content"]
        elif kind == "contentEnd":
            return self.starts.get(body["contentName"])
        return None


def is_event(kind: str) -> Callable[[SentEvent], bool]:
    """Predicate on ``sent``: an event of ``kind`` (``"promptEnd"``, ``"sessionEnd"``, ...)."""
    return lambda e: event_kind(e) == kind


def is_interactive_text(
    text: str | None = None, *, containing: str | None = None
) -> Callable[[SentEvent], bool]:
    """Predicate on ``sent``: the contentEnd of an interactive TEXT block (holding ``text``, or
    a text ``containing`` that): the point where Nova Sonic starts to answer."""
    blocks = _Blocks()
    seen: set[int] = set()

    def _match(e: SentEvent) -> bool:
        if id(e) in seen:  # wait_sent rescans; feed each event once
            start = blocks.starts.get(e["event"].get("contentEnd", {}).get("contentName", ""))
        else:
            seen.add(id(e))
            start = blocks.feed(e)
        if start is None or start.get("type") != "TEXT" or not start.get("interactive"):
            return False
        sent = blocks.texts.get(start["contentName"])
        if containing is not None and (sent is None or containing not in sent):
            return False
        return text is None or sent == text

    return _match


def is_tool_result(tool_use_id: str | None = None) -> Callable[[SentEvent], bool]:
    """Predicate on ``sent``: the contentEnd of a toolResult block (for ``tool_use_id``)."""
    blocks = _Blocks()
    seen: set[int] = set()

    def _match(e: SentEvent) -> bool:
        if id(e) in seen:
            start = blocks.starts.get(e["event"].get("contentEnd", {}).get("contentName", ""))
        else:
            seen.add(id(e))
            start = blocks.feed(e)
        if start is None or event_kind(e) != "contentEnd":
            return False
        cfg = start.get("toolResultInputConfiguration")
        return cfg is not None and (tool_use_id is None or cfg.get("toolUseId") == tool_use_id)

    return _match
