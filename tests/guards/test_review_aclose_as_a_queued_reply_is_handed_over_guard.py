"""Parity (review of 0014): ``aclose()`` during a handoff while a reply to an async result waits
in the queue, not started, on the agent leaving.

The scenario is ``tests.fakes.queued_reply``'s; ``aclose()`` begins while the front desk is in
``on_exit()``. On both builds the close interrupts the queued reply (it ends ``interrupted``),
the billing desk never starts, nobody answers the result, which stays in the history once,
and ``aclose()`` returns. (With ``shutdown(drain=True)`` 1.8.9 plays the front desk's reply after its
``on_exit()``: see the regression test of the same name.)
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import MakeSession, bounded
from tests.fakes.orders import SHIPPED
from tests.fakes.queued_reply import start_queued_reply_handoff


@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
async def test_aclose_while_a_queued_reply_is_handed_over(
    make_session: MakeSession, kind: str, scope: str
) -> None:
    h = await start_queued_reply_handoff(make_session, kind, scope)

    closing = asyncio.ensure_future(h.session.aclose())
    h.journal.exit_gates["front"].open()
    await bounded(closing, what="AgentSession.aclose")
    await asyncio.gather(h.run, return_exceptions=True)

    # nobody answered the result (the front desk may have finished its reply to its own batch,
    # the one that hands off, as the close interrupted it): the result is in the history
    assert h.said() in ([], ["Front desk here."]), h.said()
    assert "enter billing" not in h.journal.events, h.journal.events
    outputs = h.outputs()
    assert len(outputs) == 1 and outputs[0].output == SHIPPED
    # the reply queued for it ended, and says so
    assert list(h.statuses.values()) == [["scheduled", "interrupted"]], h.statuses
