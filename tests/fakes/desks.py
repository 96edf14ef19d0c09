"""The front desk that puts the caller through to billing, and the slow toolsets that hold a
handoff: what the handoff tests of spoken turns share (livekit/agents#3129 and neighbours).

A :class:`Desk` has one tool, ``to_billing``: it builds the billing agent (a
``journal.billing_cls``, kept on ``journal.billing`` for the test to wait on) and hands the
caller over, with the handoff message :data:`TRANSFERRING` unless ``message=None``.
:func:`answer` is the scripted LLM's fallback that routes the caller's :data:`TO_BILLING` to
that tool and answers anything else as ``"<instructions> answers: <user text>"``::

    journal = DeskJournal()
    session = await make_session(Desk(journal), llm=ScriptedLLM([], fallback=answer))
    await bounded(session.run(user_input=TO_BILLING))
    assert journal.events == ["enter desk", "exit desk", "enter billing"]

:class:`SlowSetup` and :class:`SlowClose` are toolsets whose setup / close wait on a
:class:`Gate`, like an MCP server connecting or disconnecting: they hold an activity's
``start()`` / ``aclose()`` where a test wants the handoff to stand still.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from livekit.agents import Agent, AgentSession, function_tool, llm

from .agents import Journal, JournalingAgent
from .llm import LLMCall, ScriptedLLM
from .realtime import ScriptedRealtimeModel
from .script import Reply, tool_call
from .session import MakeSession, settled_on
from .speech import Caller, ScriptedRecognizeStream
from .sync import Gate, bounded, wait_for_event

__all__ = [
    "BILLING",
    "DESK",
    "MARK",
    "MARK_SAMPLES",
    "Pondering",
    "SPOKEN",
    "TO_BILLING",
    "TRANSFERRING",
    "Desk",
    "DeskJournal",
    "SlowClose",
    "SlowSetup",
    "answer",
    "billing_runs",
    "speaking",
    "spoken_session",
    "stt_heard_a_mark",
]

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
TRANSFERRING = "Transferring you"
SPOKEN = "Actually, it's about a refund."


class DeskJournal(Journal):
    """A :class:`Journal` that also keeps the billing agent the desk built (``billing``),
    which class the desk builds it as (``billing_cls``, set before the handoff), and the LLM
    requests an :meth:`answering` fallback saw (``requests``)."""

    def __init__(self) -> None:
        super().__init__()
        self.billing: Agent | None = None
        self.billing_cls: type[Agent] = JournalingAgent
        self.requests: list[tuple[LLMCall, tuple[str, ...]]] = []

    def answering(self, reply: Callable[[LLMCall], Any] | None = None) -> Callable[[LLMCall], Any]:
        """A ``ScriptedLLM`` fallback that records each request in ``requests``, with the
        journal's events before it, then asks ``reply`` (:func:`answer` by default)."""

        def fallback(call: LLMCall) -> Any:
            self.requests.append((call, tuple(self.events)))
            return (reply or answer)(call)

        return fallback

    def requests_for(self, text: str) -> list[LLMCall]:
        """The recorded requests that answer the user's ``text``: it is their last user message,
        and they are no handoff message's (``tool_choice="none"``)."""
        return [c for c, _ in self.requests if c.last_user_text == text and c.tool_choice != "none"]


class Desk(JournalingAgent):
    """The front desk (``name="desk"``, ``instructions=DESK`` unless given): ``to_billing``
    hands the caller to ``journal.billing_cls(journal, name="billing", instructions=BILLING,
    tools=billing_tools)``, with ``message`` as the handoff message (none when ``None``)."""

    journal: DeskJournal

    def __init__(
        self,
        journal: DeskJournal,
        *,
        message: str | None = TRANSFERRING,
        billing_tools: list[Any] | None = None,
        name: str = "desk",
        instructions: str = DESK,
        **kwargs: Any,
    ) -> None:
        super().__init__(journal, name=name, instructions=instructions, **kwargs)
        self.message = message
        self.billing_tools = billing_tools or []

    @function_tool
    async def to_billing(self) -> Agent | tuple[Agent, str]:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = self.journal.billing_cls(
            self.journal, name="billing", instructions=BILLING, tools=self.billing_tools
        )
        return (billing, self.message) if self.message is not None else billing


def answer(call: LLMCall) -> Reply:
    """A ``ScriptedLLM`` fallback: the desk calls ``to_billing`` for the caller's
    :data:`TO_BILLING` (not in a handoff message's request, ``tool_choice="none"``); every other
    request answers ``"<instructions> answers: <the last user text>"``."""
    if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
        return Reply(tool_calls=[tool_call("to_billing")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


async def speaking(session: AgentSession[Any]) -> None:
    """Bounded: the session's agent is speaking (at once if it already is)."""
    if session.agent_state != "speaking":
        await wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "speaking")


class SlowSetup(llm.Toolset):
    """A toolset whose setup holds its activity's start until ``gate`` opens, like an MCP
    server connecting."""

    def __init__(self, gate: Gate, *, id: str = "slow_setup") -> None:
        super().__init__(id=id)
        self.gate = gate

    async def setup(self) -> SlowSetup:
        await self.gate.wait()
        return self


class SlowClose(llm.Toolset):
    """A toolset whose close holds its activity's ``aclose()`` until ``gate`` opens, like an
    MCP server disconnecting."""

    def __init__(self, gate: Gate, *, id: str = "slow_close") -> None:
        super().__init__(id=id)
        self.gate = gate

    async def aclose(self) -> None:
        await self.gate.wait()
        await super().aclose()


MARK = 0.01  # seconds: a frame shorter than the caller's others, the last it says
MARK_SAMPLES = 160


async def billing_runs(session: AgentSession[Any], journal: DeskJournal) -> Agent:
    """Bounded: billing's ``on_enter`` ran and its activity is the session's, started, idle
    (:func:`tests.fakes.session.settled_on`); returns billing."""
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    assert journal.billing is not None, "billing entered, but the desk never built it"
    await settled_on(session, journal.billing)
    return journal.billing


async def stt_heard_a_mark(caller: Caller) -> ScriptedRecognizeStream:
    """The caller says one :data:`MARK` frame; bounded: the session read it and the STT stream
    it runs received it last, so every frame said before it that ever reaches that stream has.
    Returns the stream."""
    caller.audio.push(seconds=MARK)
    await caller.audio.forwarded()
    stream = caller.stt.current
    await stream.last_frame_was(MARK_SAMPLES)
    return stream


class Pondering(JournalingAgent):
    """Looks the caller's turn up (RAG) in its ``on_user_turn_completed``, which waits on
    ``hook``: the test holds the turn there."""

    def __init__(self, journal: Journal, hook: Gate, **kwargs: Any) -> None:
        super().__init__(journal, **kwargs)
        self.hook = hook

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        await self.hook.wait()


async def spoken_session(
    make_session: MakeSession,
    agent: Agent,
    journal: DeskJournal,
    reply: Callable[[LLMCall], Any] | None = None,
    **overrides: Any,
) -> tuple[AgentSession[Any], Caller, ScriptedLLM]:
    """A session of ``agent`` a :class:`Caller` speaks to (``overrides`` go to its
    ``session_kwargs``), on a ``ScriptedLLM`` answering with ``journal.answering(reply)``."""
    caller = Caller()
    fake = ScriptedLLM([], fallback=journal.answering(reply))
    session = await make_session(agent, llm=fake, **caller.session_kwargs(**overrides))
    caller.attach(session)
    return session, caller, fake


def desk_realtime_model(fallback: Callable[..., Any], **kwargs: Any) -> ScriptedRealtimeModel:
    """A scripted realtime model whose server detects and transcribes the caller's turns, as the
    realtime desk tests run it: its first reply calls ``to_billing`` (the desk puts the caller
    through), every later one is ``fallback``'s. ``kwargs`` go to the model (``reuse=...``)."""
    return ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("to_billing")])],
        fallback=fallback,
        turn_detection=True,
        user_transcription=True,
        **kwargs,
    )
