"""Helpers shared by the parity tests in this folder.

A parity test pins what stock livekit-agents 1.8.9 gets right next to the lines our patches
change: it has no ``upstream_bug`` marker and must pass on stock and on the fork. Where the
fork regressed and the patch is being fixed, :func:`fork_regression` marks it
``xfail(strict=True)`` on the fork only (on stock it must still pass).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest
from livekit.agents import AgentSession
from livekit.agents.llm import ChatContext


def _is_fork() -> bool:
    try:
        return "+" in version("livekit-agents")
    except PackageNotFoundError:  # pragma: no cover
        return False


FORK = _is_fork()
"""The installed livekit-agents is our patched build (its version carries ``+fork``)."""


def fork_regression(reason: str) -> pytest.MarkDecorator:
    """Strict xfail on the fork only: stock is right here, today's fork is not."""
    return pytest.mark.xfail(FORK, strict=True, reason=f"fork regression: {reason}")


def call_ids(session: AgentSession[Any]) -> list[str]:
    return [i.call_id for i in session.history.items if i.type == "function_call"]


def output_ids(session: AgentSession[Any]) -> list[str]:
    return [i.call_id for i in session.history.items if i.type == "function_call_output"]


def outputs_in(chat_ctx: ChatContext) -> dict[str, Any]:
    """The function outputs of a context, by call id."""
    return {i.call_id: i.output for i in chat_ctx.items if i.type == "function_call_output"}


def assert_every_call_answered(session: AgentSession[Any]) -> None:
    """Every function call in the history has an output there."""
    calls, outs = call_ids(session), set(output_ids(session))
    missing = [c for c in calls if c not in outs]
    assert not missing, f"calls without an output in the history: {missing}; history={transcript(session)}"


def transcript(session: AgentSession[Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in session.history.items:
        if item.type == "message":
            out.append((item.role, item.text_content or ""))
        elif item.type == "function_call":
            out.append(("call", item.call_id))
        elif item.type == "function_call_output":
            out.append(("output", item.call_id))
        elif item.type == "agent_handoff":
            out.append(("handoff", str(getattr(item, "new_agent_id", ""))))
    return out
