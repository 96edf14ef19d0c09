"""Scripted replies shared by :mod:`tests.fakes.llm` and :mod:`tests.fakes.realtime`.

A *script* is a FIFO of items, one consumed per model request. An item is either

* a :class:`Reply` (text and/or parallel tool calls, optionally held or delayed),
* a plain ``str`` (shorthand for ``Reply(text=...)``), or
* a callable ``(call) -> Reply | str`` (sync or async) receiving the recorded request,
  so a test can answer based on the context the model was given.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from livekit.agents import llm

__all__ = [
    "Delay",
    "Reply",
    "Script",
    "ScriptExhaustedError",
    "ScriptItem",
    "Waitable",
    "fakes_logger",
    "tool_call",
]

fakes_logger = logging.getLogger("livekit.testfakes")
"""Logger for misuse detected inside a fake where raising is impossible.

It lives under ``livekit`` on purpose: the hygiene fixture fails the test on its ERROR records.
"""


class Waitable(Protocol):
    """Anything with an awaitable ``wait()``: ``asyncio.Event``, :class:`~tests.fakes.sync.Gate`."""

    def wait(self) -> Awaitable[Any]: ...


Delay = float | Waitable | Callable[[], Awaitable[Any]] | asyncio.Future[Any] | None
"""First-token delay, one of: seconds (``asyncio.sleep``; for benchmarks only, never to
synchronise a test); an ``asyncio.Event`` / ``Gate`` (waits for it); a zero-argument callable
returning an awaitable (called per use); an ``asyncio.Future`` (awaited); or ``None``."""

_call_ids = itertools.count(1)


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, call_id: str | None = None
) -> llm.FunctionToolCall:
    """Build a ``FunctionToolCall``; ``arguments`` may be a dict (JSON-encoded) or raw JSON."""
    if arguments is None:
        arguments = {}
    args_json = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return llm.FunctionToolCall(
        name=name,
        arguments=args_json,
        call_id=call_id if call_id is not None else f"call_{name}_{next(_call_ids)}",
    )


@dataclass
class Reply:
    """One scripted model response."""

    text: str | Sequence[str] = ""
    """Assistant text; a sequence is streamed as separate chunks."""
    tool_calls: Sequence[llm.FunctionToolCall] = ()
    """Function calls emitted in the same generation (parallel tool calls)."""
    hold: Waitable | None = None
    """If set (an ``asyncio.Event`` or a ``Gate``), nothing is emitted until it is set/opened;
    with a ``Gate`` the test can ``await gate.reached()`` to know the request got there."""
    first_token_delay: Delay = None
    """Extra delay before the first chunk (after ``hold``); overrides the model default."""
    error: BaseException | None = None
    """If set, raised by the stream (after hold/delay) instead of producing output."""

    @property
    def chunks(self) -> list[str]:
        if isinstance(self.text, str):
            return [self.text] if self.text else []
        return [c for c in self.text if c]

    @property
    def full_text(self) -> str:
        return "".join(self.chunks)


CallT = TypeVar("CallT")

ScriptItem = Reply | str | Callable[[CallT], Reply | str | Awaitable[Reply | str]]


class ScriptExhaustedError(AssertionError):
    """A model was asked for more responses than the test scripted (and no fallback was set)."""


def as_reply(value: Reply | str) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    raise TypeError(f"a scripted item must produce a Reply or str, got {value!r}")


async def resolve_item(item: ScriptItem[CallT], call: CallT) -> Reply:
    """Turn a script item into a :class:`Reply`, calling it with ``call`` if it is callable."""
    if isinstance(item, (Reply, str)):
        return as_reply(item)
    result = item(call)
    if inspect.isawaitable(result):
        result = await result
    return as_reply(result)


async def apply_delay(delay: Delay) -> None:
    """Wait as described by :data:`Delay`."""
    if delay is None:
        return
    if isinstance(delay, (int, float)):
        await asyncio.sleep(delay)
    elif isinstance(delay, asyncio.Future):
        await delay
    elif callable(delay):
        await delay()
    else:
        await delay.wait()


class Script(Generic[CallT]):
    """FIFO of script items with an optional fallback used once it runs dry."""

    def __init__(
        self,
        items: Iterable[ScriptItem[CallT]] = (),
        *,
        fallback: ScriptItem[CallT] | None = None,
        owner: str = "model",
    ) -> None:
        self._items: deque[ScriptItem[CallT]] = deque(items)
        self.fallback = fallback
        self._owner = owner

    def push(self, *items: ScriptItem[CallT]) -> None:
        self._items.extend(items)

    def __len__(self) -> int:
        return len(self._items)

    def next(self) -> tuple[ScriptItem[CallT] | None, bool]:
        """Return ``(item, scripted)``; item is None when exhausted without fallback."""
        if self._items:
            return self._items.popleft(), True
        return self.fallback, False

    def exhausted_error(self, detail: str) -> ScriptExhaustedError:
        return ScriptExhaustedError(
            f"{self._owner}: script exhausted ({detail}); push more replies or set fallback="
        )
