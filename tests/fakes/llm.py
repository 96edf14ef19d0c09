"""ScriptedLLM: a deterministic ``livekit.agents.llm.LLM`` driven by a script of replies.

Example::

    fake = ScriptedLLM([
        Reply(tool_calls=[tool_call("lookup", {"q": "x"}), tool_call("transfer")]),
        "done",                       # plain text reply
        lambda call: f"you said {call.last_user_text}",
    ], fallback="")                   # answer "" to any unscripted request

Exhaustion policy: without ``fallback`` an unscripted request fails its stream with
:class:`~tests.fakes.script.ScriptExhaustedError` naming the call. An awaited
``session.run()`` re-raises it, and the framework logs it at ERROR ("Error in
_llm_inference_task"), which the hygiene fixture turns into a failure anyway. With
``fallback`` the fallback item answers every unscripted request and the call is recorded
with ``scripted=False`` (see ``unscripted_calls``).

Each stream runs with ``max_retry=0``: a scripted ``Reply(error=...)`` surfaces exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit.agents import llm
from livekit.agents.llm import ChatChunk, ChatContext, ChoiceDelta
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

from .script import (
    Delay,
    Reply,
    Script,
    ScriptItem,
    apply_delay,
    resolve_item,
)
from .sync import DEFAULT_TIMEOUT, bounded

__all__ = ["LLMCall", "ScriptedLLM", "current_agent", "snapshot_chat_ctx", "tool_names"]

CallOutcome = Literal["pending", "completed", "cancelled", "error"]


_DEEP_COPIED_TYPES = frozenset({"message", "function_call", "function_call_output"})


def snapshot_chat_ctx(chat_ctx: ChatContext) -> ChatContext:
    """A copy immune to later mutation by the framework.

    Messages and function calls/outputs are deep-copied; other items (config updates, handoffs)
    reference live tools/agents and are copied shallowly.
    """
    return ChatContext([item.model_copy(deep=item.type in _DEEP_COPIED_TYPES) for item in chat_ctx.items])


def tool_names(tools: Iterable[Any]) -> list[str]:
    """Names of the tools offered to a model (function tools by name, others by id)."""
    names: list[str] = []
    for tool in tools:
        info = getattr(tool, "info", None)
        name = getattr(info, "name", None)
        names.append(name if isinstance(name, str) else str(getattr(tool, "id", tool)))
    return names


def current_agent() -> Any | None:
    """Best effort: the Agent whose activity runs the current task, else None.

    Reads the framework's private activity context variable (set on every speech task),
    so it degrades to None if a fork renames it.
    """
    try:
        from livekit.agents.voice import agent_activity
    except ImportError:  # pragma: no cover
        return None
    var = getattr(agent_activity, "_AgentActivityContextVar", None)
    if var is None:
        return None
    activity = var.get(None)
    return getattr(activity, "agent", None) if activity is not None else None


@dataclass
class LLMCall:
    """One recorded ``chat()`` request."""

    index: int
    """0-based position among this LLM's calls."""
    chat_ctx: ChatContext
    """Deep snapshot of the context passed to ``chat()``."""
    instructions: str | None
    """Text of the first system/developer message (the agent's instructions), if any."""
    tools: list[str]
    """Names of the tools offered."""
    tool_choice: llm.ToolChoice | None
    """``tool_choice`` as passed, ``None`` when not given."""
    parallel_tool_calls: bool | None
    agent: Any | None
    """Agent whose activity made the call (best effort, see :func:`current_agent`)."""
    scripted: bool
    """False when the reply came from the fallback (or the script was exhausted)."""
    reply: Reply | None = None
    """The resolved reply, once the stream resolved it."""
    outcome: CallOutcome = "pending"
    done: asyncio.Future[CallOutcome] = field(default_factory=asyncio.Future, repr=False)
    """Resolves with the outcome when the stream ends (never raises)."""

    @property
    def system_texts(self) -> list[str]:
        """Texts of every system/developer message, in order."""
        return [
            item.text_content or ""
            for item in self.chat_ctx.items
            if item.type == "message" and item.role in ("system", "developer")
        ]

    @property
    def last_user_text(self) -> str | None:
        for item in reversed(self.chat_ctx.items):
            if item.type == "message" and item.role == "user":
                return item.text_content
        return None

    def item_types(self) -> list[str]:
        return [item.type for item in self.chat_ctx.items]

    def _finish(self, outcome: CallOutcome) -> None:
        self.outcome = outcome
        if not self.done.done():
            self.done.set_result(outcome)


def _instructions_of(chat_ctx: ChatContext) -> str | None:
    for item in chat_ctx.items:
        if item.type == "message" and item.role in ("system", "developer"):
            return item.text_content
    return None


class ScriptedLLM(llm.LLM[Any]):
    """An ``llm.LLM`` answering each ``chat()`` with the next script item. See module docs."""

    def __init__(
        self,
        script: Iterable[ScriptItem[LLMCall]] = (),
        *,
        fallback: ScriptItem[LLMCall] | None = None,
        first_token_delay: Delay = None,
        model: str = "scripted-llm",
        provider: str = "fake",
    ) -> None:
        super().__init__()
        self.script: Script[LLMCall] = Script(script, fallback=fallback, owner="ScriptedLLM")
        self.first_token_delay: Delay = first_token_delay
        """Default first-token delay for replies that do not set their own."""
        self.calls: list[LLMCall] = []
        self._model = model
        self._provider = provider
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return self._provider

    def push(self, *items: ScriptItem[LLMCall]) -> None:
        """Append replies to the script."""
        self.script.push(*items)

    @property
    def unscripted_calls(self) -> list[LLMCall]:
        return [c for c in self.calls if not c.scripted]

    async def wait_for_calls(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[LLMCall]:
        """Bounded wait until at least ``n`` calls were made; returns ``calls``."""
        if len(self.calls) < n:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((n, fut))
            try:
                await bounded(fut, timeout, what=f"ScriptedLLM to receive {n} calls")
            finally:
                self._waiters = [(k, f) for k, f in self._waiters if f is not fut]
        return self.calls

    def chat(
        self,
        *,
        chat_ctx: ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        tools = list(tools or [])
        item, scripted = self.script.next()
        call = LLMCall(
            index=len(self.calls),
            chat_ctx=snapshot_chat_ctx(chat_ctx),
            instructions=_instructions_of(chat_ctx),
            tools=tool_names(tools),
            tool_choice=tool_choice if isinstance(tool_choice, (str, dict)) else None,
            parallel_tool_calls=(parallel_tool_calls if isinstance(parallel_tool_calls, bool) else None),
            agent=current_agent(),
            scripted=scripted,
        )
        self.calls.append(call)
        for n, fut in self._waiters:
            if len(self.calls) >= n and not fut.done():
                fut.set_result(None)
        return _ScriptedLLMStream(
            self, call=call, item=item, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options
        )


class _ScriptedLLMStream(llm.LLMStream):
    def __init__(
        self,
        fake: ScriptedLLM,
        *,
        call: LLMCall,
        item: ScriptItem[LLMCall] | None,
        chat_ctx: ChatContext,
        tools: list[llm.Tool],
        conn_options: APIConnectOptions,
    ) -> None:
        # no retries: a scripted failure must surface exactly once
        conn_options = dataclasses.replace(conn_options, max_retry=0)
        self._fake = fake
        self._call = call
        self._item = item
        super().__init__(fake, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)

    async def _run(self) -> None:
        call = self._call
        try:
            if self._item is None:
                raise self._fake.script.exhausted_error(
                    f"call #{call.index}, instructions={call.instructions!r}, "
                    f"tool_choice={call.tool_choice!r}"
                )
            reply = await resolve_item(self._item, call)
            call.reply = reply
            if reply.hold is not None:
                await reply.hold.wait()
            await apply_delay(
                reply.first_token_delay
                if reply.first_token_delay is not None
                else self._fake.first_token_delay
            )
            if reply.error is not None:
                raise reply.error

            request_id = f"scripted-{call.index}"
            for chunk in reply.chunks:
                self._event_ch.send_nowait(
                    ChatChunk(id=request_id, delta=ChoiceDelta(role="assistant", content=chunk))
                )
            if reply.tool_calls:
                self._event_ch.send_nowait(
                    ChatChunk(
                        id=request_id,
                        delta=ChoiceDelta(
                            role="assistant",
                            tool_calls=[tc.model_copy() for tc in reply.tool_calls],
                        ),
                    )
                )
        except asyncio.CancelledError:
            call._finish("cancelled")
            raise
        except BaseException:
            call._finish("error")
            raise
        else:
            call._finish("completed")
