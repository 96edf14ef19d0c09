"""Create, start and always close an ``AgentSession`` wired to fakes, offline.

``AgentSession`` needs nothing special to run without a room: ``start(agent)`` with no
``room=`` runs the agent with no audio/text I/O (text mode), and ``session.run(user_input=...)``
returns an awaitable ``RunResult``. What the defaults below avoid:

* ``vad`` left unset loads the bundled silero VAD (``inference.VAD``) -> pass ``vad=None``;
* the default ``turn_detection`` is an eager ``inference.TurnDetector()``, which without a VAD
  logs a WARNING on every activity start -> ``turn_handling={"turn_detection": None}``;
* ``user_away_timeout`` (15 s) arms a loop timer -> ``None``;
* ``aec_warmup_duration`` (3 s) blocks interruptions after the agent starts speaking -> ``None``;
* ``record`` defaults to the job's setting -> ``start(..., record=False)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from livekit.agents import Agent, AgentSession
from livekit.agents.voice import io

from .sync import DEFAULT_TIMEOUT, bounded

__all__ = ["MakeSession", "offline_session_kwargs", "running_session", "start_session"]

MakeSession = Callable[..., Awaitable[AgentSession[Any]]]
"""Type of the ``make_session`` fixture: ``await make_session(agent, **start_session_kwargs)``."""


def offline_session_kwargs(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments for a deterministic offline ``AgentSession``; ``overrides`` win.

    ``turn_handling`` overrides are merged into the default (``turn_detection=None`` stays
    unless overridden).
    """
    kwargs: dict[str, Any] = {
        "vad": None,
        "user_away_timeout": None,
        "aec_warmup_duration": None,
    }
    turn_handling: dict[str, Any] = {"turn_detection": None}
    turn_handling.update(overrides.pop("turn_handling", None) or {})
    kwargs["turn_handling"] = turn_handling
    kwargs.update(overrides)
    return kwargs


async def start_session(
    agent: Agent,
    *,
    audio_input: io.AudioInput | None = None,
    audio_output: io.AudioOutput | None = None,
    text_output: io.TextOutput | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    **session_kwargs: Any,
) -> AgentSession[Any]:
    """Build an offline session (see :func:`offline_session_kwargs`), attach the optional
    audio input and outputs and start it with ``agent``. The caller must ``aclose()`` it; prefer
    :func:`running_session` or the ``start_session`` fixture which do."""
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs(**session_kwargs))
    if audio_input is not None:
        session.input.audio = audio_input
    if audio_output is not None:
        session.output.audio = audio_output
    if text_output is not None:
        session.output.transcription = text_output
    try:
        await bounded(session.start(agent, record=False), timeout, what="AgentSession.start")
    except BaseException:
        await bounded(session.aclose(), timeout, what="AgentSession.aclose after failed start")
        raise
    return session


@asynccontextmanager
async def running_session(
    agent: Agent,
    *,
    audio_input: io.AudioInput | None = None,
    audio_output: io.AudioOutput | None = None,
    text_output: io.TextOutput | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    **session_kwargs: Any,
) -> AsyncIterator[AgentSession[Any]]:
    """``async with running_session(agent, llm=fake) as session:`` -- started, always closed."""
    session = await start_session(
        agent,
        audio_input=audio_input,
        audio_output=audio_output,
        text_output=text_output,
        timeout=timeout,
        **session_kwargs,
    )
    try:
        yield session
    finally:
        await bounded(session.aclose(), timeout, what="AgentSession.aclose")


async def settled_on(session: AgentSession[Any], agent: Agent) -> None:
    """Bounded: ``agent``'s activity is the session's, it runs (its ``start()`` is done, so the
    audio pushed from now on reaches its STT or realtime session at once), its ``on_enter`` is
    over, and it is idle (what was queued for it ran).

    ``session.wait_for_idle()`` alone answers for an activity that is the session's but not
    started yet (its toolsets still setting up): nothing is queued on it, so it is "idle"."""
    from livekit.agents.voice.agent_activity import ActivityClosedError

    async def _settle() -> None:
        while True:
            try:
                activity = await session.wait_for_idle()
            except ActivityClosedError:
                activity = None  # a handoff is closing the activity: look again
            if activity is not None and activity.agent is agent and activity._started:
                on_enter = activity._on_enter_task
                if on_enter is None or on_enter.done():
                    return
                # what on_enter says is queued only as it runs: idle before that is too early
                await asyncio.wait([on_enter])
                continue
            await asyncio.sleep(0)  # one loop step for the handoff to go on; no timer

    await bounded(_settle(), what=f"{type(agent).__name__} idle")
