"""Guard for upstream livekit/agents#6201 (fixed in 1.8.9): Nova Sonic 2 rejects a
sessionStart with the flat ``endpointingSensitivity`` key; it wants it nested under
``turnDetectionConfiguration``. Sonic 1 still takes the flat key. Built offline with the
plugin's own event builder, the way its session builds the event on connect."""

from __future__ import annotations

import json
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+")


def session_start(model_id: str, sensitivity: str) -> dict[str, object]:
    from livekit.agents import llm
    from livekit.plugins.aws.experimental.realtime.events import SonicEventBuilder

    builder = SonicEventBuilder(prompt_name="p", audio_content_name="a", model=model_id)
    init_events, _ = builder.create_prompt_start_block(
        voice_id="tiffany",
        sample_rate=24000,
        system_content="be brief",
        chat_ctx=llm.ChatContext.empty(),
        endpointing_sensitivity=sensitivity,  # type: ignore[arg-type]
    )
    event = json.loads(init_events[0])["event"]
    assert list(event) == ["sessionStart"]
    return event["sessionStart"]  # type: ignore[no-any-return]


def models() -> list[tuple[str, str]]:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return [
        ("sonic-1", RealtimeModel.with_nova_sonic_1().model),
        ("sonic-2", RealtimeModel.with_nova_sonic_2().model),
        ("sonic-2.5", RealtimeModel.with_nova_sonic_2_5().model),
        ("default", RealtimeModel().model),
    ]


@pytest.mark.parametrize("sensitivity", ["HIGH", "LOW"])
def test_session_start_endpointing_shape(sensitivity: str) -> None:
    for name, model_id in models():
        start = session_start(model_id, sensitivity)
        if name == "sonic-1":
            assert start.get("endpointingSensitivity") == sensitivity, model_id
            assert "turnDetectionConfiguration" not in start, model_id
        else:
            assert start.get("turnDetectionConfiguration") == {"endpointingSensitivity": sensitivity}, (
                model_id
            )
            assert "endpointingSensitivity" not in start, model_id
        assert "inferenceConfiguration" in start
