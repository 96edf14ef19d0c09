"""livekit/agents#5841 as the session closes: a reply to an async result, queued but not started
as its agent starts leaving, is not said by that agent once its ``on_exit()`` ran, even when
the session closes with ``shutdown(drain=True)`` during the handoff.

The scenario is ``tests.fakes.queued_reply``'s; the session is shut down while the front desk
is in ``on_exit()``.
The billing desk never starts (a closing session starts no agent), so nobody is left to answer
the result: it stays in the history, as a user turn the session closes on does, and the queued
reply ends ``interrupted``. On stock 1.8.9 the drain plays the front desk's reply to the result
after its ``on_exit()``. With ``aclose()`` both builds interrupt it (see the guard of the same
name).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import MakeSession, bounded, wait_for_event
from tests.fakes.orders import SHIPPED
from tests.fakes.queued_reply import start_queued_reply_handoff

BUG = pytest.mark.upstream_bug("livekit/agents#5841")


@BUG
@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
async def test_shutdown_while_a_queued_reply_is_handed_over(
    make_session: MakeSession, kind: str, scope: str
) -> None:
    h = await start_queued_reply_handoff(make_session, kind, scope)

    closed = asyncio.ensure_future(wait_for_event(h.session, "close", lambda ev: True))
    h.session.shutdown(drain=True)
    h.journal.exit_gates["front"].open()
    await bounded(closed, what="the session closed")
    await asyncio.gather(h.run, return_exceptions=True)

    # the front desk finished its reply to its own batch (the one that hands off), and nobody
    # answered the result once its on_exit began: the result is in the history
    assert h.said() == ["Front desk here."], h.said()
    assert "enter billing" not in h.journal.events, h.journal.events
    outputs = h.outputs()
    assert len(outputs) == 1 and outputs[0].output == SHIPPED
    # the reply queued for it ended, and says so
    assert list(h.statuses.values()) == [["scheduled", "interrupted"]], h.statuses
