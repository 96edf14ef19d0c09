"""Bounded waiting primitives for tests.

Every wait in a test must be bounded: use :func:`bounded` around any awaitable,
:func:`wait_for_event` for ``rtc.EventEmitter`` events, and :class:`Gate` to hold a
coroutine (a tool, a scripted model reply) until the test releases it.
None of these sleep: they only wake up on the event they wait for, or time out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "RecordedSends",
    "DEFAULT_TIMEOUT",
    "BoundedWaitTimeout",
    "Gate",
    "bounded",
    "wait_for_event",
]

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
"""Default bound (seconds) for every wait in the harness."""


class BoundedWaitTimeout(AssertionError):
    """A bounded wait ran out of time. Subclasses AssertionError so pytest shows it as a failure."""


async def bounded(aw: Awaitable[T], timeout: float = DEFAULT_TIMEOUT, *, what: str | None = None) -> T:
    """Await ``aw`` for at most ``timeout`` seconds.

    On timeout the awaitable is cancelled and :class:`BoundedWaitTimeout` is raised with a
    message naming ``what`` (or the awaitable's repr).
    """
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        label = what if what is not None else repr(aw)
        raise BoundedWaitTimeout(f"timed out after {timeout:g}s waiting for {label}") from None


class _Emitter(Protocol):
    def on(self, event: Any, callback: Callable[..., Any] | None = None) -> Any: ...

    def off(self, event: Any, callback: Callable[..., Any]) -> None: ...


async def wait_for_event(
    emitter: _Emitter,
    event: str,
    predicate: Callable[[Any], bool] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    """Wait until ``emitter`` emits ``event`` (and ``predicate(arg)`` holds); return its argument.

    Register before triggering the action whose event you wait for, e.g.::

        waiter = asyncio.ensure_future(wait_for_event(session, "agent_state_changed", ...))
        ...trigger...
        ev = await waiter

    or trigger from inside an awaited coroutine started after this call.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def _on_event(*args: Any) -> None:
        arg = args[0] if len(args) == 1 else args
        if fut.done():
            return
        try:
            ok = predicate is None or predicate(arg)
        except Exception as e:  # a broken predicate must fail the wait, not the emitter
            fut.set_exception(e)
            return
        if ok:
            fut.set_result(arg)

    emitter.on(event, _on_event)
    try:
        return await bounded(fut, timeout, what=f"event {event!r} from {type(emitter).__name__}")
    finally:
        emitter.off(event, _on_event)


class Gate:
    """A named, one-shot barrier a coroutine can be held on until the test opens it.

    ``await gate.wait()`` inside the held coroutine records that it was reached
    (``await gate.reached()`` in the test) and blocks until ``gate.open()``.
    ``gate.wait()`` is itself not bounded (the test bounds its own waits), so a gate that
    is never opened shows up as a timeout of whatever the test awaits next, or as a
    leaked task at teardown.
    """

    def __init__(self, name: str = "gate") -> None:
        self.name = name
        self._opened = asyncio.Event()
        self._reached = asyncio.Event()
        self.waiters = 0
        """How many times ``wait()`` was entered."""

    def __repr__(self) -> str:
        state = "open" if self._opened.is_set() else "closed"
        return f"Gate({self.name!r}, {state}, waiters={self.waiters})"

    @property
    def is_open(self) -> bool:
        return self._opened.is_set()

    @property
    def was_reached(self) -> bool:
        return self._reached.is_set()

    def open(self) -> None:
        """Release every current and future waiter."""
        self._opened.set()

    async def wait(self) -> None:
        """Block the caller until :meth:`open` (returns at once if already open)."""
        self.waiters += 1
        self._reached.set()
        await self._opened.wait()

    async def reached(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Bounded wait until some coroutine entered :meth:`wait`."""
        await bounded(self._reached.wait(), timeout, what=f"{self!r} to be reached")

    async def opened(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Bounded wait until the gate is opened."""
        await bounded(self._opened.wait(), timeout, what=f"{self!r} to be opened")

    @contextlib.asynccontextmanager
    async def held(self, timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[None]:
        """``async with gate.held(): ...``: the body runs once the gate is reached (bounded),
        while what reached it is held there; the gate opens as the body ends, however it ends."""
        await self.reached(timeout)
        try:
            yield
        finally:
            self.open()


M = TypeVar("M")


class RecordedSends(Generic[M]):
    """Mixin for a fake connection that records what the plugin sent: ``sent`` in order,
    ``closed``, ``index``, and ``_changed``, an Event set (and replaced) on every change.
    A test waits on them, bounded."""

    index: int
    sent: list[M]
    _changed: asyncio.Event

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    async def wait_sent(
        self,
        predicate: Callable[[M], bool],
        *,
        start: int = 0,
        timeout: float = DEFAULT_TIMEOUT,
        what: str = "a matching message",
    ) -> M:
        """Bounded wait until a message at index >= ``start`` of ``sent`` matches; return it."""

        async def _wait() -> M:
            while True:
                for message in self.sent[start:]:
                    if predicate(message):
                        return message
                await self._changed.wait()

        return await bounded(_wait(), timeout, what=f"{what} on connection {self.index}")

    async def wait_closed(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        async def _wait() -> None:
            while not self.closed:
                await self._changed.wait()

        await bounded(_wait(), timeout, what=f"connection {self.index} to close")
