"""Agents that journal their lifecycle, so a test asserts on the order the session ran them in.

The agents of one test share a :class:`Journal`. A :class:`JournalingAgent` or
:class:`JournalingTask` records ``"enter <name>"`` when its ``on_enter`` runs and ``"exit <name>"``
when its ``on_exit`` does::

    class Desk(JournalingAgent):
        @function_tool
        async def to_billing(self) -> Agent:
            return Billing(self.journal, name="billing", instructions=BILLING)

    journal = Journal()
    session = await make_session(Desk(journal, name="desk", instructions=DESK), llm=fake)
    ...
    assert journal.events == ["enter desk", "exit desk", "enter billing"]

A subclass whose ``on_enter`` / ``on_exit`` does more (asks for a reply, completes its task)
calls ``super()`` for the journal entry. A test file keeps its own state (gates, the agents a
tool built) on a subclass of :class:`Journal`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, TypeVar

from livekit.agents import Agent, AgentTask

from .sync import Gate

__all__ = ["Journal", "Journaling", "JournalingAgent", "JournalingTask"]

T = TypeVar("T")


class Journal:
    """What the agents of one test did.

    ``events``: ``"enter <name>"`` / ``"exit <name>"`` and whatever else the test records, in
    order. ``results``: what the tools that awaited an inline task got, as they record it.
    ``entered`` / ``exiting`` / ``exited``: per agent name, set once its ``on_enter`` ran, its
    ``on_exit`` started, its ``on_exit`` ended, for a test to wait on. ``exit_gates``: a test
    holds an agent's ``on_exit`` on the :class:`Gate` it puts there under the agent's name.
    """

    def __init__(self) -> None:
        self.events: list[str] = []
        self.results: list[Any] = []
        self.entered: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.exiting: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.exited: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.exit_gates: dict[str, Gate] = {}

    def on_enter(self, name: str) -> None:
        self.events.append(f"enter {name}")
        self.entered[name].set()

    async def on_exit(self, name: str) -> None:
        self.events.append(f"exit {name}")
        self.exiting[name].set()
        if (gate := self.exit_gates.get(name)) is not None:
            await gate.wait()
        self.exited[name].set()


class Journaling:
    """Mixin for an ``Agent`` or ``AgentTask`` (listed before it): ``on_enter`` and ``on_exit``
    tell ``journal`` under ``name``. The other keyword arguments go to the agent."""

    def __init__(self, journal: Journal, *, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.journal = journal
        self.name = name

    async def on_enter(self) -> None:
        self.journal.on_enter(self.name)

    async def on_exit(self) -> None:
        await self.journal.on_exit(self.name)


class JournalingAgent(Journaling, Agent):
    """An ``Agent`` that journals its ``on_enter`` / ``on_exit`` (see :class:`Journaling`)."""


class JournalingTask(Journaling, AgentTask[T]):
    """An ``AgentTask`` that journals its ``on_enter`` / ``on_exit`` (see :class:`Journaling`)."""
