"""A recording fake of the google-genai Live connection, offline.

The Gemini realtime plugin opens every connection with ``client.aio.live.connect(model=...,
config=...)`` (an async context manager yielding a ``google.genai.live.AsyncSession``).
:meth:`FakeLiveServer.install` replaces ``AsyncLive.connect`` so that each connection yields a
*real* ``AsyncSession`` whose websocket is a fake: the SDK still serializes every
``send_client_content`` / ``send_tool_response`` / ``send_realtime_input`` call itself, and the
fake records the JSON it would have put on the socket (``LiveConnection.sent``, Gemini API
dialect). Server messages are pushed by the test in the same wire format (camelCase JSON, e.g.
``{"toolCall": {...}}``) and parsed by the SDK's own ``receive()``.

Nothing here sleeps; every wait is bounded (:mod:`tests.fakes.sync`)::

    server = FakeLiveServer()
    server.install(monkeypatch)
    ...
    conn = await server.connection(0)
    await conn.wait_sent(is_turn_complete, what="the reply request")
    conn.push(tool_call_message(("fc-1", "lookup", {"q": "x"})))

Each connection can be held before it opens (``server.hold(index)`` returns a ``Gate``), and
its sends can be held (``conn.hold_sends = Gate(...)``), to order the connection against what
the plugin and the framework do meanwhile. ``assert_only_issued_call_ids(server)`` checks the
Live API's rule that a client message names only calls its own connection issued.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.genai import live as genai_live
from google.genai import types
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

from .sync import DEFAULT_TIMEOUT, Gate, RecordedSends, bounded

__all__ = [
    "FakeLiveServer",
    "LiveConnection",
    "client_content",
    "function_responses",
    "assert_only_issued_call_ids",
    "go_away_message",
    "model_text_message",
    "offline_live_server",
    "sent_call_ids",
    "tool_call_message",
    "turn_texts",
]

WireMessage = dict[str, Any]
"""One JSON message as it crosses the socket (top-level key names the message kind)."""

_CLOSED = object()


class _FakeWebSocket:
    """The subset of ``websockets`` ``ClientConnection`` that ``AsyncSession`` uses."""

    def __init__(self, conn: LiveConnection) -> None:
        self._conn = conn
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()

    async def send(self, data: str) -> None:
        if (gate := self._conn.hold_sends) is not None:
            await gate.wait()
        self._conn._record(json.loads(data))

    async def recv(self, decode: bool | None = None) -> str:
        item = await self._inbox.get()
        if item is _CLOSED:
            self._inbox.put_nowait(_CLOSED)  # every later recv fails the same way
            raise ConnectionClosedOK(Close(1000, "closed"), None)
        return json.dumps(item)

    async def close(self) -> None:
        if not self._conn.closed:
            self._conn.closed = True
            self._inbox.put_nowait(_CLOSED)
            self._conn._notify()


@dataclass(eq=False)
class LiveConnection(RecordedSends[WireMessage]):
    """One connection the plugin opened: what it was opened with and what it sent."""

    index: int
    model: str
    config: types.LiveConnectConfig | None
    sent: list[WireMessage] = field(default_factory=list)
    """Every message sent on this connection, in order, as wire JSON."""
    sent_after_close: list[WireMessage] = field(default_factory=list)
    issued_call_ids: set[str] = field(default_factory=set)
    """Ids of every function call this connection's server side issued (``toolCall`` pushed)."""
    hold_sends: Gate | None = None
    """If set, every send blocks on it before it is recorded (a send cancelled meanwhile is lost)."""
    closed: bool = False
    opened: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _ws: _FakeWebSocket = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ws = _FakeWebSocket(self)

    def _record(self, message: WireMessage) -> None:
        (self.sent_after_close if self.closed else self.sent).append(message)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def push(self, message: WireMessage) -> None:
        """Deliver a server message (wire JSON) to the plugin's ``receive()``."""
        assert not self.closed, f"connection {self.index} is closed"
        for call in (message.get("toolCall") or {}).get("functionCalls") or []:
            if call.get("id"):
                self.issued_call_ids.add(call["id"])
        self._ws._inbox.put_nowait(message)


class FakeLiveServer:
    """Stands in for the Live API endpoint; records every connection the plugin opens."""

    def __init__(self) -> None:
        self.connections: list[LiveConnection] = []
        self._holds: dict[int, Gate] = {}
        self._changed = asyncio.Event()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        server = self

        @contextlib.asynccontextmanager
        async def connect(
            live: genai_live.AsyncLive,
            *,
            model: str,
            config: types.LiveConnectConfigOrDict | None = None,
        ) -> AsyncIterator[genai_live.AsyncSession]:
            if isinstance(config, dict):
                config = types.LiveConnectConfig(**config)
            conn = LiveConnection(index=len(server.connections), model=model, config=config)
            server.connections.append(conn)
            server._notify()
            if (gate := server._holds.get(conn.index)) is not None:
                await gate.wait()
            conn.opened = True
            server._notify()
            try:
                yield genai_live.AsyncSession(api_client=live._api_client, websocket=conn._ws)  # type: ignore[arg-type]
            finally:
                # like the SDK's `async with ws_connect(...)`: leaving the block closes the socket
                await conn._ws.close()

        monkeypatch.setattr(genai_live.AsyncLive, "connect", connect)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def hold(self, index: int) -> Gate:
        """Hold connection ``index`` (0-based, in opening order) until the gate opens."""
        gate = self._holds.setdefault(index, Gate(f"connection {index}"))
        return gate

    async def connection(self, index: int, *, timeout: float = DEFAULT_TIMEOUT) -> LiveConnection:
        """Bounded wait until connection ``index`` has opened (past any hold)."""

        async def _wait() -> LiveConnection:
            while len(self.connections) <= index or not self.connections[index].opened:
                await self._changed.wait()
            return self.connections[index]

        return await bounded(_wait(), timeout, what=f"Live connection {index} to open")

    @property
    def all_sent(self) -> list[tuple[int, WireMessage]]:
        """``(connection index, message)`` for every message sent, connection by connection."""
        return [(c.index, m) for c in self.connections for m in [*c.sent, *c.sent_after_close]]


def offline_live_server(monkeypatch: pytest.MonkeyPatch) -> FakeLiveServer:
    """A :class:`FakeLiveServer`, installed, and the Gemini API (not Vertex AI) selected with a
    placeholder key: the plugin needs an API key to construct."""
    monkeypatch.setenv("GOOGLE_API_KEY", "offline-test-key")
    for var in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(var, raising=False)
    server = FakeLiveServer()
    server.install(monkeypatch)
    return server


# -- server messages (wire JSON) ----------------------------------------------------------------


def tool_call_message(*calls: tuple[str, str, dict[str, Any]]) -> WireMessage:
    """``{"toolCall": ...}`` with one function call per ``(id, name, args)``."""
    return {"toolCall": {"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}}


def model_text_message(text: str, *, turn_complete: bool = True) -> WireMessage:
    """A model turn with one text part, optionally closing the turn."""
    content: dict[str, Any] = {"modelTurn": {"role": "model", "parts": [{"text": text}]}}
    if turn_complete:
        content["generationComplete"] = True
        content["turnComplete"] = True
    return {"serverContent": content}


def go_away_message(time_left: str = "1s") -> WireMessage:
    return {"goAway": {"timeLeft": time_left}}


# -- reading what the client sent ---------------------------------------------------------------


def client_content(message: WireMessage) -> dict[str, Any] | None:
    return message.get("client_content")


def function_responses(message: WireMessage) -> list[dict[str, Any]]:
    """The function responses of a ``tool_response`` message (empty for other kinds)."""
    return list((message.get("tool_response") or {}).get("functionResponses") or [])


def turn_texts(message: WireMessage) -> list[tuple[str | None, str]]:
    """``(role, text)`` of every text part of a ``client_content`` message."""
    content = client_content(message) or {}
    return [
        (turn.get("role"), part["text"])
        for turn in content.get("turns") or []
        for part in turn.get("parts") or []
        if "text" in part
    ]


def sent_call_ids(message: WireMessage) -> set[str]:
    """Every function call id a client message carries, in any field.

    Covers tool responses and any ``functionCall`` / ``functionResponse`` part in client content.
    """
    ids = {r["id"] for r in function_responses(message) if r.get("id")}
    content = client_content(message) or {}
    for turn in content.get("turns") or []:
        for part in turn.get("parts") or []:
            for key in ("functionCall", "functionResponse", "function_call", "function_response"):
                if (value := part.get(key)) and value.get("id"):
                    ids.add(value["id"])
    return ids


def assert_only_issued_call_ids(server: FakeLiveServer) -> None:
    """No connection sent a call id that its server side did not issue (nor sent after close)."""
    for conn in server.connections:
        assert conn.sent_after_close == [], (conn.index, conn.sent_after_close)
        foreign = {i for m in conn.sent for i in sent_call_ids(m)} - conn.issued_call_ids
        assert not foreign, (
            f"connection {conn.index} sent call ids it never issued: {sorted(foreign)}; "
            f"it issued {sorted(conn.issued_call_ids)}"
        )
