"""Gemini Live: a tool result is answered with a ``tool_response`` only on the connection that
issued its call.

The Live API matches a ``tool_response`` to a function call of its own connection by id. A
``RealtimeSession`` opens a new connection after a ``go_away`` (or an error), and the framework
starts a new session when an agent resumes (an ``AgentTask`` awaited inside a tool pauses the
agent, which closes its session). A result that arrives after that must still reach the model,
but not as a ``tool_response`` naming a call the new connection never issued: it goes out as
``function_call`` / ``function_response`` parts in client content, the way chat history is
encoded for Gemini. Calls a session receives already answered, in its chat ctx, are history and
are not answered again.

Upstream has no fake of the Live API, so this module carries a small one: ``AsyncLive.connect``
is patched to yield the SDK's own ``AsyncSession`` over a fake websocket, which records the JSON
the session puts on the wire and delivers the server messages a test scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from google.genai import live as genai_live, types
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

from livekit.agents import llm
from livekit.plugins.google.realtime.realtime_api import RealtimeModel, RealtimeSession

pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the SDK's AsyncLive.connect for the whole process
]

TIMEOUT = 5.0

LOOKUP = ("fc-1", "lookup", {"q": "opening hours"})
RESULTS = {"fc-1": "open 9 to 5", "fc-2": "sunny"}

Message = dict[str, Any]


# -- a scripted Live API connection ------------------------------------------------------------


class _FakeWebSocket:
    """What ``AsyncSession`` uses of its websocket: send, recv and close."""

    def __init__(self, conn: FakeConnection) -> None:
        self._conn = conn
        self.inbox: asyncio.Queue[Message | None] = asyncio.Queue()

    async def send(self, data: str) -> None:
        self._conn.record(json.loads(data))

    async def recv(self, decode: bool | None = None) -> str:
        message = await self.inbox.get()
        if message is None:
            self.inbox.put_nowait(None)
            raise ConnectionClosedOK(Close(1000, "closed"), None)
        return json.dumps(message)

    async def close(self) -> None:
        if not self._conn.closed:
            self._conn.closed = True
            self.inbox.put_nowait(None)
            self._conn.live.changed()


class FakeConnection:
    """One connection the session opened: the messages it sent, the calls it issued."""

    def __init__(self, live: FakeLive) -> None:
        self.live = live
        self.sent: list[Message] = []
        self.issued: set[str] = set()
        self.opened = False
        self.closed = False
        self.ws = _FakeWebSocket(self)

    def record(self, message: Message) -> None:
        self.sent.append(message)
        self.live.changed()

    def push(self, message: Message) -> None:
        """A server message, as JSON on the wire."""
        for call in (message.get("toolCall") or {}).get("functionCalls") or []:
            self.issued.add(call["id"])
        self.ws.inbox.put_nowait(message)

    async def sent_one(self, matches: Callable[[Message], bool]) -> bool:
        """Whether the session sends a message that ``matches`` (waits a bounded time)."""
        try:
            await self.live.wait_for(lambda: any(matches(m) for m in self.sent))
        except asyncio.TimeoutError:
            return False
        return True


class FakeLive:
    """Every connection a session opens, in order. A connection in ``held`` opens only once
    its event is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.connections: list[FakeConnection] = []
        self.held: dict[int, asyncio.Event] = {}
        self._changed = asyncio.Event()
        live = self

        @contextlib.asynccontextmanager
        async def connect(
            self: genai_live.AsyncLive, *, model: str, config: Any = None
        ) -> AsyncIterator[genai_live.AsyncSession]:
            conn = FakeConnection(live)
            live.connections.append(conn)
            live.changed()
            if (gate := live.held.get(len(live.connections) - 1)) is not None:
                await gate.wait()
            conn.opened = True
            live.changed()
            try:
                yield genai_live.AsyncSession(api_client=self._api_client, websocket=conn.ws)  # type: ignore[arg-type]
            finally:
                await conn.ws.close()

        monkeypatch.setenv("GOOGLE_API_KEY", "fake-key")
        for var in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setattr(genai_live.AsyncLive, "connect", connect)

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        async def _wait() -> None:
            while not condition():
                await self._changed.wait()

        await asyncio.wait_for(_wait(), TIMEOUT)

    async def connection(self, index: int) -> FakeConnection:
        """Connection ``index`` once it is open."""
        await self.wait_for(
            lambda: len(self.connections) > index and self.connections[index].opened
        )
        return self.connections[index]


# -- reading what the session sent ---------------------------------------------------------------


def _is_content(message: Message) -> bool:
    return "client_content" in message


def _parts(message: Message, key: str) -> list[dict[str, Any]]:
    content = message.get("client_content") or {}
    return [
        part[key]
        for turn in content.get("turns") or []
        for part in turn.get("parts") or []
        if key in part
    ]


def _tool_responses(message: Message) -> list[dict[str, Any]]:
    return list((message.get("tool_response") or {}).get("functionResponses") or [])


def _carries_results(message: Message) -> bool:
    return bool(_tool_responses(message) or _parts(message, "functionResponse"))


def _assert_answers_only_issued_calls(live: FakeLive) -> None:
    """A tool_response names only calls its own connection issued; a function_response part in
    client content names none."""
    for i, conn in enumerate(live.connections):
        answered = {r.get("id") for m in conn.sent for r in _tool_responses(m)}
        assert answered <= conn.issued, (
            f"connection {i} answered calls it never issued: {sorted(answered - conn.issued)} "
            f"(it issued {sorted(conn.issued)})"
        )
        assert not [p for m in conn.sent for p in _parts(m, "functionResponse") if p.get("id")]


def _user_texts(live: FakeLive) -> list[str]:
    return [
        part["text"]
        for conn in live.connections
        for m in conn.sent
        for turn in (m.get("client_content") or {}).get("turns") or []
        if turn.get("role") == "user"
        for part in turn.get("parts") or []
        if "text" in part
    ]


# -- driving a session as the framework does -----------------------------------------------------


@contextlib.asynccontextmanager
async def _sessions() -> AsyncIterator[Callable[[], RealtimeSession]]:
    """``new_session()`` opens a session on one model; all are closed on exit."""
    model = RealtimeModel(modalities=[types.Modality.TEXT])
    sessions: list[RealtimeSession] = []

    def new_session() -> RealtimeSession:
        sessions.append(model.session())
        return sessions[-1]

    try:
        yield new_session
    finally:
        for session in sessions:
            await session.aclose()


def _history() -> llm.ChatContext:
    history = llm.ChatContext.empty()
    history.add_message(role="user", content="when do you open?")
    return history


async def _issue_calls(
    conn: FakeConnection, rt: RealtimeSession, *calls: tuple[str, str, dict[str, Any]]
) -> list[llm.FunctionCall]:
    """The server calls ``calls`` on ``conn``; returns them as the framework receives them."""
    created: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
    rt.once("generation_created", lambda ev: created.done() or created.set_result(ev))
    conn.push(
        {"toolCall": {"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}}
    )
    gen = await asyncio.wait_for(created, TIMEOUT)

    async def _drain() -> list[llm.FunctionCall]:
        return [call async for call in gen.function_stream]

    return await asyncio.wait_for(_drain(), TIMEOUT)


async def _send_results(rt: RealtimeSession, calls: list[llm.FunctionCall]) -> None:
    """What the framework does with the outputs of the tools: a chat ctx update."""
    ctx = rt.chat_ctx.copy()
    ctx.items.extend(
        llm.FunctionCallOutput(
            call_id=c.call_id, name=c.name, output=RESULTS[c.call_id], is_error=False
        )
        for c in calls
    )
    await rt.update_chat_ctx(ctx)


# -- tests ---------------------------------------------------------------------------------------


async def test_result_on_the_issuing_connection_is_a_tool_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = FakeLive(monkeypatch)
    async with _sessions() as new_session:
        rt = new_session()
        conn = await live.connection(0)
        calls = await _issue_calls(conn, rt, LOOKUP)
        await _send_results(rt, calls)

        assert await conn.sent_one(_carries_results), f"the result never went out: {conn.sent}"
        assert conn.sent == [
            {
                "tool_response": {
                    "functionResponses": [
                        {"id": "fc-1", "name": "lookup", "response": {"output": "open 9 to 5"}}
                    ]
                }
            }
        ]
        _assert_answers_only_issued_calls(live)


async def test_result_after_a_go_away_goes_to_the_new_connection_as_content(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = FakeLive(monkeypatch)
    async with _sessions() as new_session:
        rt = new_session()
        await rt.update_chat_ctx(_history())
        first = await live.connection(0)
        calls = await _issue_calls(first, rt, LOOKUP)
        # the tool still runs when the server goes away: the session reconnects
        first.push({"goAway": {"timeLeft": "1s"}})
        second = await live.connection(1)
        assert await second.sent_one(_is_content), "the new connection never got the history"

        await _send_results(rt, calls)
        assert await second.sent_one(_carries_results), f"the result never went out: {second.sent}"

        _assert_answers_only_issued_calls(live)
        result = next(m for m in second.sent if _carries_results(m))
        assert _parts(result, "functionCall") == [{"name": "lookup"}]
        assert _parts(result, "functionResponse") == [
            {"name": "lookup", "response": {"output": "open 9 to 5"}}
        ]
        assert result["client_content"]["turnComplete"] is True  # the model answers it
        assert "open 9 to 5" not in " ".join(_user_texts(live))


@pytest.mark.parametrize("result_first", [False, True], ids=["connected-first", "result-first"])
async def test_result_in_a_resumed_session_goes_to_its_connection_as_content(
    monkeypatch: pytest.MonkeyPatch, result_first: bool
) -> None:
    """The shape of an ``AgentTask`` awaited inside a Gemini tool: the agent's session closes
    while the tool runs, and the resumed agent's new session gets the result, before or after
    its connection is up."""
    live = FakeLive(monkeypatch)
    async with _sessions() as new_session:
        history = _history()
        rt = new_session()
        await rt.update_chat_ctx(history)
        first = await live.connection(0)
        calls = await _issue_calls(first, rt, LOOKUP)
        await rt.aclose()

        history.items.extend(calls)
        live.held[1] = opens = asyncio.Event()
        resumed = new_session()
        await resumed.update_chat_ctx(history)
        if result_first:
            await live.wait_for(lambda: len(live.connections) > 1)
            await _send_results(resumed, calls)
            opens.set()
            second = await live.connection(1)
        else:
            opens.set()
            second = await live.connection(1)
            assert await second.sent_one(_is_content), "the new connection never got the history"
            await _send_results(resumed, calls)
        assert await second.sent_one(_carries_results), f"the result never went out: {second.sent}"

        _assert_answers_only_issued_calls(live)
        result = next(m for m in second.sent if _carries_results(m))
        assert [_carries_results(m) for m in second.sent] == [False, True]  # history first
        # the new session's chat ctx holds the call: it is named with its arguments
        assert _parts(result, "functionCall") == [
            {"name": "lookup", "args": {"q": "opening hours"}}
        ]
        assert _parts(result, "functionResponse") == [
            {"name": "lookup", "response": {"output": "open 9 to 5"}}
        ]
        assert result["client_content"]["turnComplete"] is True


async def test_calls_answered_in_a_given_chat_ctx_are_not_answered_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session handed a chat ctx with calls it never saw, already answered (e.g. a session
    reused for the next agent): they are history, not results to send."""
    live = FakeLive(monkeypatch)
    async with _sessions() as new_session:
        rt = new_session()
        await rt.update_chat_ctx(_history())
        conn = await live.connection(0)
        assert await conn.sent_one(_is_content), "the connection never got the history"

        ctx = rt.chat_ctx.copy()
        ctx.items.append(llm.FunctionCall(call_id="fc-2", name="weather", arguments="{}"))
        ctx.items.append(
            llm.FunctionCallOutput(call_id="fc-2", name="weather", output="sunny", is_error=False)
        )
        ctx.add_message(role="user", content="thanks")
        await rt.update_chat_ctx(ctx)
        assert await conn.sent_one(lambda m: "thanks" in json.dumps(m)), (
            "the message never went out"
        )

        _assert_answers_only_issued_calls(live)
        assert not [m for m in conn.sent if _carries_results(m)], conn.sent


def test_gemini_resumes_function_calls_from_chat_ctx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key")
    assert RealtimeModel().capabilities.manual_function_calls is True
