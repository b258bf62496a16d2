"""The unified event model: the documented tags, JSON round trips of every event type,
frozen keyword-only values, and the Usage rules (is_empty, merged)."""

from __future__ import annotations

import gc
import typing
import weakref

import msgspec
import pytest

from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    EventBase,
    Finish,
    FinishReason,
    KeepAlive,
    MediaInfo,
    Metadata,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
    dump_event,
    event_to_builtins,
    load_event,
)

# The tags documented in the event table of docs/architecture.md, by class.
DOCUMENTED_TAGS = {
    StreamStart: "stream-start",
    StatusUpdate: "status",
    BlockStart: "block-start",
    BlockEnd: "block-end",
    TextDelta: "text-delta",
    ReasoningDelta: "reasoning-delta",
    ToolInputDelta: "tool-input-delta",
    DataDelta: "data-delta",
    SignatureDelta: "signature-delta",
    Citation: "citation",
    Metadata: "metadata",
    UsageUpdate: "usage",
    ErrorEvent: "error",
    Finish: "finish",
    KeepAlive: "keep-alive",
    Warning: "warning",
    TranscriptSegment: "transcript-segment",
    Unknown: "unknown",
    Raw: "raw",
}

FULL_USAGE = Usage(
    input_tokens=100,
    output_tokens=50,
    reasoning_tokens=20,
    cache_read_tokens=30,
    cache_write_tokens=10,
    tool_prompt_tokens=5,
    audio_input_tokens=1,
    audio_output_tokens=2,
    total_tokens=150,
    raw={"prompt_tokens": 100, "nested": [1, {"a": None}]},
)
FULL_ERROR = ErrorInfo(
    kind="rate_limit",
    message="slow down",
    retryable=True,
    code="rate_limit_exceeded",
    http_status=429,
    dialect="openai_responses",
    event_index=3,
    byte_offset=512,
    raw={"type": "error"},
)
COMMON = {"extra": {"obfuscation": "xyz", "logprobs": [1.5]}, "cursor": 7, "raw": {"type": "x"}}

# One example of every event type, every field set to a non-default value.
EXAMPLES: list[Event] = [
    StreamStart(dialect="openai_responses", id="resp_1", model="gpt", created=1700000000, **COMMON),
    StatusUpdate(status="in_progress", **COMMON),
    BlockStart(
        index=2,
        kind="tool_call",
        id="fc_1",
        call_id="call_1",
        name="get_weather",
        candidate=1,
        value={"city": "Paris"},
        **COMMON,
    ),
    TextDelta(index=0, delta="Hé 😀\n", part=1, **COMMON),
    ReasoningDelta(index=1, delta="think", part=0, summary=True, **COMMON),
    ToolInputDelta(index=2, delta='{"ci', **COMMON),
    DataDelta(index=3, delta="iVBORw0KGgo=", mime_type="image/png", replace=True, **COMMON),
    SignatureDelta(index=1, delta="EqQBCkgIARAB==", **COMMON),
    Citation(citation={"url": "https://example.com", "start": 0}, index=0, part=2, **COMMON),
    Metadata(name="grounding", value={"groundingChunks": []}, candidate=1, merge=True, **COMMON),
    BlockEnd(index=2, status="completed", value={"city": "Paris"}, **COMMON),
    UsageUpdate(usage=FULL_USAGE, **COMMON),
    ErrorEvent(error=FULL_ERROR, **COMMON),
    Finish(
        status="failed",
        reason=FinishReason(unified="error", raw="failed"),
        usage=FULL_USAGE,
        error=FULL_ERROR,
        **COMMON,
    ),
    KeepAlive(comment="ping", name="ping", **COMMON),
    Warning(code="sequence_gap", message="gap", event_index=4, byte_offset=99, **COMMON),
    TranscriptSegment(
        index=0, text="Hello there.", start=0.0, end=1.25, speaker="A", id="seg_0", **COMMON
    ),
    BlockStart(
        index=3,
        kind="audio",
        media=MediaInfo(mime_type="audio/pcm", format="pcm", sample_rate=24000, channels=1),
        **COMMON,
    ),
    DataDelta(index=4, delta="iVBORw0KGgo=", mime_type="image/png", replace=True, partial=1),
    Unknown(data='{"type":"response.new"}', name="response.new", **COMMON),
    Raw(dialect="openai_chat", data={"choices": []}, name="chunk", **COMMON),
]


def test_union_members_and_tags_are_the_documented_ones() -> None:
    members = typing.get_args(Event)
    assert set(members) == set(DOCUMENTED_TAGS)
    assert len(members) == len(DOCUMENTED_TAGS)
    for cls, tag in DOCUMENTED_TAGS.items():
        assert cls.__struct_config__.tag == tag
        assert cls.__struct_config__.tag_field == "type"
        assert issubclass(cls, EventBase)
    assert len(set(DOCUMENTED_TAGS.values())) == len(DOCUMENTED_TAGS)


def test_every_type_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == set(DOCUMENTED_TAGS)


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_dump_load_round_trip(event: Event) -> None:
    data = dump_event(event)
    assert msgspec.json.decode(data)["type"] == DOCUMENTED_TAGS[type(event)]
    back = load_event(data)
    assert type(back) is type(event)
    assert back == event
    assert event_to_builtins(event) == msgspec.json.decode(data)
    assert load_event(data.decode()) == event  # str input too


@pytest.mark.parametrize("cls", list(DOCUMENTED_TAGS), ids=lambda c: c.__name__)
def test_minimal_round_trip(cls: type) -> None:
    # Only the required fields: defaults are omitted on the wire and restored on load.
    required = {
        StreamStart: {"dialect": "d"},
        StatusUpdate: {"status": "queued"},
        BlockStart: {"index": 0, "kind": "text"},
        BlockEnd: {"index": 0},
        TextDelta: {"index": 0, "delta": ""},
        ReasoningDelta: {"index": 0, "delta": ""},
        ToolInputDelta: {"index": 0, "delta": ""},
        DataDelta: {"index": 0, "delta": ""},
        SignatureDelta: {"index": 0, "delta": ""},
        Citation: {"citation": None},
        Metadata: {"name": "n", "value": None},
        UsageUpdate: {"usage": Usage()},
        ErrorEvent: {"error": ErrorInfo(kind="unknown", message="")},
        Finish: {"status": "completed", "reason": FinishReason(unified="stop")},
        KeepAlive: {},
        Warning: {"code": "c", "message": "m"},
        TranscriptSegment: {"index": 0, "text": ""},
        Unknown: {"data": ""},
        Raw: {"dialect": "d", "data": None},
    }[cls]
    event = cls(**required)
    assert load_event(dump_event(event)) == event


def test_exact_json() -> None:
    assert (
        dump_event(TextDelta(index=0, delta="hi"))
        == b'{"type":"text-delta","index":0,"delta":"hi"}'
    )
    assert (
        dump_event(Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn")))
        == b'{"type":"finish","status":"completed","reason":{"unified":"stop","raw":"end_turn"}}'
    )
    assert dump_event(UsageUpdate(usage=Usage(input_tokens=0))) == (
        b'{"type":"usage","usage":{"input_tokens":0}}'
    )


def test_load_rejects_unknown_tags_and_bad_values() -> None:
    with pytest.raises(msgspec.ValidationError):
        load_event(b'{"type":"no-such-event"}')
    with pytest.raises(msgspec.ValidationError):
        load_event(b'{"type":"block-start","index":0,"kind":"nonsense"}')
    with pytest.raises(msgspec.ValidationError):
        load_event(b'{"type":"finish","status":"done","reason":{"unified":"stop"}}')


def test_events_are_frozen_values() -> None:
    event = TextDelta(index=0, delta="a")
    with pytest.raises(AttributeError):
        event.delta = "b"  # type: ignore[misc]
    assert hash(event) == hash(TextDelta(index=0, delta="a"))
    assert event == TextDelta(index=0, delta="a")
    assert event != ReasoningDelta(index=0, delta="a")


class _Node:
    me: object


def test_events_and_their_values_are_not_tracked_by_the_garbage_collector() -> None:
    # Every example holds mappings and lists (extra, raw, usage.raw), which the
    # collector tracks; the events, usages, finish reasons and errors are not tracked,
    # so a feed's events do not trigger collections (see the module docstring).
    values: list[object] = [*EXAMPLES, FULL_USAGE, FULL_ERROR, FinishReason(unified="stop")]
    assert gc.is_tracked(COMMON["extra"])
    for value in values:
        assert not gc.is_tracked(value), type(value).__name__
    # What an event holds may form a cycle of its own: it lives while the event
    # does, and is collected after.
    node = _Node()
    node.me = node
    ref = weakref.ref(node)
    event = TextDelta(index=0, delta="a", extra={"node": node})
    del node
    gc.collect()
    assert event.extra is not None
    assert ref() is event.extra["node"]
    del event
    gc.collect()
    assert ref() is None


def test_events_are_keyword_only() -> None:
    # STYLE rule 3: events are keyword-only values; positional construction is refused.
    with pytest.raises(TypeError):
        TextDelta(0, "x")  # type: ignore[misc]
    event = TextDelta(index=0, delta="x", part=1, extra={"a": 1}, cursor=3, raw={"r": 1})
    # JSON order: the tag, the common fields, then the event's own fields.
    assert list(event_to_builtins(event)) == [
        "type",
        "extra",
        "cursor",
        "raw",
        "index",
        "delta",
        "part",
    ]


def test_retryable_kinds() -> None:
    assert frozenset({"overloaded", "rate_limit", "server", "timeout"}) == RETRYABLE_KINDS
    assert set(RETRYABLE_KINDS) <= set(typing.get_args(typing.get_type_hints(ErrorInfo)["kind"]))


# -- Usage ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "empty"),
    [
        (Usage(), True),
        (Usage(input_tokens=0, output_tokens=0, total_tokens=0), True),
        (Usage(raw={"prompt_tokens": 0}), True),
        (Usage(output_tokens=1), False),
        (Usage(audio_output_tokens=1), False),
        (Usage(cache_write_tokens=3), False),
        (Usage(total_tokens=9), False),
    ],
)
def test_usage_is_empty(usage: Usage, empty: bool) -> None:
    assert usage.is_empty() is empty


def test_usage_merged_per_field() -> None:
    older = Usage(input_tokens=10, output_tokens=1, cache_read_tokens=4, raw={"old": 1})
    newer = Usage(output_tokens=8, reasoning_tokens=3, total_tokens=18)
    assert older.merged(newer) == Usage(
        input_tokens=10,
        output_tokens=8,
        reasoning_tokens=3,
        cache_read_tokens=4,
        total_tokens=18,
        raw={"old": 1},  # newer has no raw: the old one stays
    )
    assert older.merged(Usage(output_tokens=2, raw={"new": 2})).raw == {"new": 2}


def test_usage_merged_ignores_an_empty_newer() -> None:
    older = Usage(input_tokens=10, output_tokens=5, total_tokens=15)
    assert older.merged(Usage()) is older
    assert older.merged(Usage(input_tokens=0, output_tokens=0, raw={"zeros": 1})) is older


def test_usage_merged_keeps_an_explicit_zero_from_a_non_empty_newer() -> None:
    older = Usage(input_tokens=10, cache_write_tokens=2)
    assert older.merged(Usage(output_tokens=4, cache_write_tokens=0)) == Usage(
        input_tokens=10, output_tokens=4, cache_write_tokens=0
    )


def test_usage_merged_covers_every_count() -> None:
    counts = [f for f in Usage.__struct_fields__ if f != "raw"]
    for name in counts:
        merged = Usage().merged(Usage(**{name: 1}))
        assert getattr(merged, name) == 1, name
        kept = Usage(**{name: 2}).merged(Usage(**{n: 1 for n in counts if n != name}))
        assert getattr(kept, name) == 2, name


def test_usage_merged_with_a_covering_newer_is_the_newer() -> None:
    # The usual cumulative update reports every count the earlier one did.
    older = Usage(input_tokens=10, output_tokens=1, total_tokens=11, raw={"old": 1})
    newer = Usage(input_tokens=10, output_tokens=5, total_tokens=15, raw={"new": 1})
    assert older.merged(newer) is newer
    # Not covering: a count, or the raw object, missing from the newer one is kept.
    for partial, kept in (
        (Usage(input_tokens=10, output_tokens=5, raw={"new": 1}), ("total_tokens", 11)),
        (Usage(input_tokens=10, output_tokens=5, total_tokens=15), ("raw", {"old": 1})),
    ):
        merged = older.merged(partial)
        assert merged is not partial
        assert getattr(merged, kept[0]) == kept[1]
        assert merged.output_tokens == 5
    counts = [f for f in Usage.__struct_fields__ if f != "raw"]
    for name in counts:
        older_one = Usage(**{name: 2})
        assert older_one.merged(Usage(**{name: 3})) == Usage(**{name: 3})
        assert older_one.merged(Usage(**{n: 1 for n in counts if n != name})) == Usage(
            **{n: (2 if n == name else 1) for n in counts}
        )
