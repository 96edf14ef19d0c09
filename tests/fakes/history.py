"""What a session said and did, read from its ``session.history``."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import AgentSession, llm

from .sync import DEFAULT_TIMEOUT, wait_for_event

__all__ = ["message_added", "spoken", "unanswered_calls"]


def spoken(session: AgentSession[Any]) -> list[str]:
    """The text of every assistant message in the history, in order."""
    return [
        i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "assistant"
    ]


def unanswered_calls(session: AgentSession[Any]) -> list[str]:
    """Names of the function calls in the history that no function output answers."""
    items = session.history.items
    answered = {i.call_id for i in items if i.type == "function_call_output"}
    return [i.name for i in items if i.type == "function_call" and i.call_id not in answered]


def user_messages(session: AgentSession[Any], text: str) -> int:
    """How many user messages of ``session.history`` say ``text`` (a turn recorded once: 1)."""
    return sum(
        1
        for i in session.history.items
        if i.type == "message" and i.role == "user" and i.text_content == text
    )


def message_added(
    session: AgentSession[Any], role: str, text: str, *, timeout: float = DEFAULT_TIMEOUT
) -> asyncio.Future[Any]:
    """A future (bounded by ``timeout``) that resolves once the session adds a ``role`` message
    saying ``text`` to its history; create it before what adds the message."""
    return asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: (
                isinstance(ev.item, llm.ChatMessage) and ev.item.role == role and ev.item.text_content == text
            ),
            timeout=timeout,
        )
    )
