"""The session events added to the unified model: tags, JSON round trips, and the
Responses decoder's entry for one event given without SSE framing."""

from __future__ import annotations

import msgspec
import pytest

from polystream import get_dialect
from polystream.errors import LocalProtocolError
from polystream.events import (
    ErrorInfo,
    Event,
    Lifetime,
    MediaInfo,
    RateLimit,
    RateLimits,
    RealtimeEvent,
    RetryAdvice,
    SessionUpdate,
    Speech,
    Steering,
    StreamWarning,
    TextDelta,
    dump_event,
    dump_realtime_event,
    load_event,
    load_realtime_event,
)

EXAMPLES: list[RealtimeEvent] = [
    SessionUpdate(
        status="updated",
        id="sess_1",
        model="gpt-realtime",
        config={"type": "realtime"},
        input_audio=MediaInfo(mime_type="audio/pcm", sample_rate=24000, channels=1),
        output_audio=MediaInfo(mime_type="audio/pcmu", format="g711_ulaw", sample_rate=8000),
        extra={"type": "session.updated"},
    ),
    Speech(state="timeout", start_ms=10, end_ms=2000, item_id="item_1"),
    RateLimits(limits=[RateLimit(name="tokens", limit=10, remaining=5, reset_seconds=1.5)]),
    Lifetime(
        state="expired",
        reason="session_expired",
        max_duration=3600.0,
        message="m",
        error=ErrorInfo(kind="timeout", message="m", code="session_expired"),
    ),
    Steering(action="steer", state="failed", response_id="r", input="hi", cursor=3),
    RetryAdvice(
        code="previous_response_not_found", replay="full_history", new_connection=True, safe=True
    ),
]
TAGS = ["session", "speech", "rate-limits", "lifetime", "steering", "retry-advice"]


@pytest.mark.parametrize(("event", "tag"), list(zip(EXAMPLES, TAGS, strict=True)), ids=TAGS)
def test_session_events_round_trip_with_their_tags(event: RealtimeEvent, tag: str) -> None:
    data = dump_realtime_event(event)
    assert msgspec.json.decode(data)["type"] == tag
    assert load_realtime_event(data) == event
    # They are not members of the HTTP dialects' union.
    with pytest.raises(msgspec.ValidationError):
        load_event(data)


def test_the_realtime_union_reads_the_unified_events_too() -> None:
    event = TextDelta(index=0, delta="x")
    assert load_realtime_event(dump_event(event)) == event


def test_feed_payload_is_one_event_without_framing() -> None:
    decoder = get_dialect("openai_responses").decoder()
    created = {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}}
    done = {"type": "response.completed", "sequence_number": 1, "response": {"id": "r"}}
    out: list[Event] = []
    for index, payload in enumerate((created, done)):
        out += decoder.feed_payload(payload, msgspec.json.encode(payload).decode(), index=index)
    assert [type(e).__name__ for e in out] == ["StreamStart", "Finish"]
    late = {"type": "response.output_text.delta", "sequence_number": 2}
    assert decoder.feed_payload(late, "{}", index=2) == [
        StreamWarning(
            code="after_terminal",
            message="event after the stream's terminal event",
            event_index=2,
            byte_offset=0,
        )
    ]
    assert decoder.close() == []
    with pytest.raises(LocalProtocolError, match="after close"):
        decoder.feed_payload(created, "{}", index=3)
