"""Nova Sonic: the timed session recycle survives itself and ends the old stream.

A Bedrock bidirectional stream lives at most 8 minutes (and no longer than the credentials that
signed it), so ``RealtimeSession`` recycles it on a timer: it waits for the assistant to finish
speaking, ends the old stream and opens a new one carrying the conversation. In stock 1.8.9 the
recycle runs in the timer's own task, and ``initialize_streams()`` restarts the timer by
cancelling that task: the new stream gets the session start and stops in its history, the
response and audio tasks never start, and the session is dead. Any call that lives about six
minutes ends this way. Now the recycle completes, the old stream gets its audio ``contentEnd``,
``promptEnd`` and ``sessionEnd``, and the conversation goes on on the new stream.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; ``FakeBedrock.fire_recycle_timer()`` makes the timer fire at once.
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    event_kind,
    is_interactive_text,
    model_turn,
    next_recycle,
    sent_texts,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

# stock waits for a second of audio silence, then a second for its response task to exit
BOUND = 8.0


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())


@pytest.mark.upstream_bug("not-yet: Nova Sonic's timed session recycle cancels itself; the session dies")
async def test_timed_recycle_keeps_the_session(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    bedrock.reply_when(is_interactive_text("still there?"), model_turn("Yes, still here."))
    session = await make_session(Host())
    old = await bedrock.connection(0)
    await old.wait_ready()
    answered = message_added(session, "assistant", "Hello there.")
    await bounded(session.run(user_input="hi"))
    await answered

    outcome = next_recycle(monkeypatch)
    bedrock.fire_recycle_timer(bedrock.sessions[0])
    result = await bounded(outcome, BOUND, what="the timed recycle to end")
    assert result == "done", f"the timed recycle did not complete: {result}"

    new = await bedrock.connection(1)
    await new.wait_ready()
    # the old stream was ended the way the protocol asks, then closed
    kinds = [event_kind(e) for e in old.sent]
    assert kinds[-3:] == ["contentEnd", "promptEnd", "sessionEnd"], kinds[-3:]
    assert old.closed
    # the conversation goes on on the new stream
    answered = message_added(session, "assistant", "Yes, still here.")
    await bounded(session.run(user_input="still there?"))
    await answered
    assert ("USER", True, "still there?") in sent_texts(new.sent)
    assert len(bedrock.connections) == 2
    assert bedrock.violations == []
