"""openai_responses: exact events, rebuild, sequence checks, errors, bad input, encoder."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder, decode, decode_events, get_dialect
from polystream.accumulate import accumulate
from polystream.dialects._responses.errors import error_info
from polystream.dialects._responses.finish_reason import FINISH_REASONS, map_finish_reason
from polystream.dialects._responses.quirks import OPENAI
from polystream.dialects._responses.usage import to_usage as _to_usage
from polystream.dialects.openai_responses import Decoder, Encoder, rebuild
from polystream.errors import EventOrderError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    Warning,
)
from tests.helpers import FIXTURES, native_frames, stream_fixtures


def to_usage(raw: Any) -> Usage | None:
    """The dialect's usage conversion (the shared Responses one with its quirks)."""
    return _to_usage(raw, reasoning_maybe_excluded=OPENAI.reasoning_maybe_excluded)


D = "openai_responses"
FIX = FIXTURES / D
FILES = stream_fixtures(D) + stream_fixtures("xai_responses")
IDS = [f"{p.parent.name}/{p.name}" for p in FILES]
CATALOG = Path("/work/shared/reference/event-catalog.json")


def sse(*events: dict[str, Any], names: bool = True) -> bytes:
    out = b""
    for event in events:
        if names:
            out += b"event: " + event["type"].encode() + b"\n"
        out += b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
    return out


def events_of(data: bytes, **options: Any) -> list[Any]:
    decoder = Decoder(**options)
    return decoder.feed(data) + decoder.close()


RESP = {"id": "resp_1", "object": "response", "created_at": 7, "model": "gpt-x", "output": []}


def small_stream() -> bytes:
    return sse(
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": RESP | {"status": "in_progress"},
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {
                "id": "msg_1",
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            },
        },
        {
            "type": "response.content_part.added",
            "sequence_number": 2,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 3,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hi",
            "logprobs": [],
            "obfuscation": "abc",
        },
        {
            "type": "response.content_part.done",
            "sequence_number": 4,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "text": "Hi"},
        },
        {
            "type": "response.completed",
            "sequence_number": 5,
            "response": RESP
            | {
                "status": "completed",
                "usage": {
                    "input_tokens": 3,
                    "input_tokens_details": {"cached_tokens": 1},
                    "output_tokens": 2,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 5,
                },
            },
        },
    )


# -- exact events ---------------------------------------------------------------------


def test_exact_events_of_a_small_stream() -> None:
    events = events_of(small_stream())
    created = RESP | {"status": "in_progress"}
    assert events[:5] == [
        StreamStart(
            dialect=D,
            id="resp_1",
            model="gpt-x",
            created=7,
            cursor=0,
            extra={"type": "response.created", "response": created},
        ),
        StatusUpdate(
            status="in_progress",
            cursor=1,
            extra={
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "msg_1",
                    "type": "message",
                    "status": "in_progress",
                    "content": [],
                    "role": "assistant",
                },
            },
        ),
        BlockStart(
            index=0,
            kind="text",
            id="msg_1",
            cursor=2,
            extra={
                "type": "response.content_part.added",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""},
            },
        ),
        # obfuscation padding is not part of the model, only of extra
        TextDelta(
            index=0,
            delta="Hi",
            part=0,
            cursor=3,
            extra={
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "logprobs": [],
                "obfuscation": "abc",
            },
        ),
        BlockEnd(
            index=0,
            value="Hi",
            cursor=4,
            extra={
                "type": "response.content_part.done",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": "Hi"},
            },
        ),
    ]
    finish = events[5]
    assert isinstance(finish, Finish)
    assert finish.status == "completed"
    assert finish.reason == FinishReason(unified="stop", raw="completed")
    assert finish.cursor == 5
    assert finish.usage == Usage(
        input_tokens=3,
        output_tokens=2,
        reasoning_tokens=0,
        cache_read_tokens=1,
        total_tokens=5,
        raw=finish.extra["response"]["usage"],  # type: ignore[index]
    )
    assert len(events) == 6


def test_every_catalog_event_decodes_to_meaningful_events() -> None:
    names = {
        e["name"]
        for e in json.loads(CATALOG.read_text())["events"]
        if e["surface"] == "openai.responses.sse"
    }
    assert len(names) == 58
    seen: set[str] = set()
    for path in stream_fixtures(D):
        for frame in native_frames(path.read_bytes()):
            if isinstance(frame, tuple) and frame[0] != "comment":
                seen.add(frame[0])
        events = decode_events(path.read_bytes(), D)
        assert not [e for e in events if isinstance(e, Unknown)], path.name
    assert names - seen == set()
    extra = {"response.apply_patch_call_operation_diff.delta", "keepalive"}
    assert extra <= seen


def test_reasoning_signature_and_summary_parts() -> None:
    events = decode_events((FIX / "reasoning_encrypted.sse").read_bytes(), D)
    deltas = [e for e in events if isinstance(e, ReasoningDelta)]
    assert [(d.part, d.summary, d.delta) for d in deltas] == [
        (0, True, "**Planning**\n\n"),
        (0, True, "The user wants a number."),
        (1, True, "**Answer**\n\n"),
        (1, True, "Say 4."),
    ]
    sig = [e for e in events if isinstance(e, SignatureDelta)]
    assert sig == [
        SignatureDelta(index=0, delta="gAAAAABoPq1x-enc+/content==", extra={"implicit": True})
    ]
    result = accumulate(events)
    assert result.blocks[0].signature == "gAAAAABoPq1x-enc+/content=="
    assert result.usage.reasoning_tokens == 180 and result.usage.cache_read_tokens == 16


def test_annotations_become_citations() -> None:
    events = decode_events((FIX / "web_search_annotations.sse").read_bytes(), D)
    cites = [e for e in events if isinstance(e, Citation)]
    assert [(c.index, c.part, c.citation) for c in cites] == [
        (
            1,
            0,
            {
                "type": "url_citation",
                "start_index": 0,
                "end_index": 24,
                "title": "News",
                "url": "https://example.com/news",
            },
        )
    ]
    result = accumulate(events)
    web = result.blocks[0]
    assert (web.kind, web.name, web.arguments["query"]) == (
        "server_tool_call",
        "web_search",
        "polystream release",
    )
    statuses = [
        e.status
        for e in events
        if isinstance(e, StatusUpdate) and e.extra and "web_search" in e.extra["type"]
    ]
    assert statuses == ["in_progress", "searching", "completed"]


def test_code_interpreter_and_partial_images() -> None:
    result = decode((FIX / "code_interpreter.sse").read_bytes(), D)
    assert (result.blocks[0].kind, result.blocks[0].text) == (
        "code",
        "import math\nprint(math.factorial(5))",
    )
    events = decode_events((FIX / "image_generation.sse").read_bytes(), D)
    data = [e for e in events if isinstance(e, DataDelta)]
    assert [(base64.b64decode(d.delta)[-5:], d.replace, d.partial, d.mime_type) for d in data] == [
        (b"part0", True, 0, "image/png"),
        (b"part1", True, 1, "image/png"),
        (b"final", True, None, "image/png"),
    ]
    result = accumulate(events)
    assert result.blocks[0].data == "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABZmluYWw="
    assert [(i.index, i.partial_images, i.final, i.data[-5:]) for i in result.images] == [
        (0, 2, True, b"final")
    ]


def test_parallel_tool_calls_are_distinct_blocks() -> None:
    events = decode_events((FIX / "parallel_tool_calls.sse").read_bytes(), D)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.index, s.kind, s.call_id, s.name) for s in starts] == [
        (0, "tool_call", "call_Paris01", "get_weather"),
        (1, "tool_call", "call_Tokyo02", "get_weather"),
    ]
    assert [e.index for e in events if isinstance(e, ToolInputDelta)] == [0, 0, 0, 0, 1, 1]
    result = accumulate(events)
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_Paris01", {"city": "Paris"}),
        ("call_Tokyo02", {"city": "Tokyo"}),
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="completed")


def test_no_argument_tool_is_empty_object() -> None:
    result = decode((FIX / "no_argument_tool.sse").read_bytes(), D)
    assert [(c.name, c.arguments, c.error) for c in result.tool_calls] == [("get_time", {}, None)]


# -- lifecycle, keepalive, unknown ----------------------------------------------------


def test_keepalive_passes_through_in_strict_mode_too() -> None:
    for strict in (False, True):
        events = decode_events((FIX / "keepalive.sse").read_bytes(), D, strict=strict)
        keep = [e for e in events if isinstance(e, KeepAlive)]
        assert keep == [KeepAlive(name="keepalive", cursor=4, extra={"type": "keepalive"})]
        assert isinstance(events[-1], Finish) and events[-1].status == "completed"


def test_undocumented_event_is_unknown_and_never_aborts() -> None:
    data = small_stream().replace(
        b"event: response.content_part.done",
        b"event: response.brand_new\n"
        b'data: {"type":"response.brand_new","x":1}\n\n'
        b"event: response.content_part.done",
    )
    events = events_of(data)
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert unknown == [
        Unknown(name="response.brand_new", data='{"type":"response.brand_new","x":1}')
    ]
    assert isinstance(events[-1], Finish) and events[-1].status == "completed"
    with pytest.raises(RemoteProtocolError, match=r"unknown event 'response\.brand_new'"):
        events_of(data, strict=True)
    # and it re-encodes to itself
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_resumed_background_stream_decodes_and_rebuilds() -> None:
    full = decode_events((FIX / "background.sse").read_bytes(), D)
    resumed = decode_events((FIX / "resumed_background.sse").read_bytes(), D)
    assert resumed[0] == StreamStart(
        dialect=D,
        id=full[0].id,
        model=full[0].model,
        created=full[0].created,
        extra={"resumed": True},
    )
    assert [
        e.status
        for e in resumed
        if isinstance(e, StatusUpdate)
        and e.extra
        and e.extra["type"] in ("response.queued", "response.in_progress")
    ] == ["queued", "in_progress"]
    assert rebuild(resumed) == rebuild(full)
    assert accumulate(resumed).text == "Background work done."
    # cut off before the terminal event: rebuilt from the events
    cut = decode_events((FIX / "resumed_truncated.sse").read_bytes(), D)
    native = rebuild(cut)
    assert native["id"] is None  # the resumed suffix never names the response
    assert native["status"] == "in_progress"
    assert native["output"][0]["content"][0]["text"] == "Background work done."
    assert native["output"][0]["status"] == "in_progress"


def test_truncated_stream_is_truncated_and_rebuilt() -> None:
    events = decode_events((FIX / "truncated.sse").read_bytes(), D)
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated" and finish.error is not None
    assert finish.error.kind == "truncated"
    native = rebuild(events)
    assert native["status"] == "in_progress"
    assert native["output"][0]["content"][0]["text"] == "This answer is cut"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_rebuild_agrees_with_the_terminal_response(path: Path) -> None:
    dialect = path.parent.name
    events = decode_events(path.read_bytes(), dialect)
    finish = next(e for e in events if isinstance(e, Finish))
    carried = finish.extra.get("response") if finish.extra else None
    native = get_dialect(dialect).rebuild(events)
    built = get_dialect(dialect).module().rebuild(events, prefer_terminal=False)
    if carried is None:
        assert native == built
        return
    assert native == carried
    for key in ("id", "model", "output", "status", "usage", "incomplete_details", "error"):
        assert built.get(key) == carried.get(key), key


# -- sequence numbers -----------------------------------------------------------------


def _with_sequence(numbers: list[int]) -> bytes:
    frames = [
        json.loads(part.split(b"data: ", 1)[1]) for part in small_stream().split(b"\n\n") if part
    ]
    for frame, n in zip(frames, numbers, strict=True):
        frame["sequence_number"] = n
    return sse(*frames)


@pytest.mark.parametrize(
    ("numbers", "codes"),
    [
        ([0, 1, 2, 5, 6, 7], ["sequence_gap"]),
        ([0, 1, 2, 2, 3, 4], ["sequence_duplicate"]),
        # 3 after 1 is a gap when it arrives; 2 after 3 is then out of order
        ([0, 1, 3, 2, 4, 5], ["sequence_gap", "sequence_reorder"]),
    ],
)
def test_sequence_anomalies(numbers: list[int], codes: list[str]) -> None:
    data = _with_sequence(numbers)
    events = events_of(data)
    warnings = [e for e in events if isinstance(e, Warning)]
    assert [w.code for w in warnings] == codes
    assert warnings[-1].event_index == 3
    assert warnings[-1].byte_offset == data.index(b"event: response.output_text.delta")
    assert isinstance(events[-1], Finish) and events[-1].status == "completed"
    # the cursors keep the provider's numbers, so re-encoding reproduces them
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    with pytest.raises(RemoteProtocolError) as info:
        events_of(data, strict=True)
    assert info.value.dialect == D and info.value.event_index == warnings[0].event_index


def test_stream_without_sequence_numbers() -> None:
    events = decode_events((FIX / "no_sequence_numbers.sse").read_bytes(), D, strict=True)
    assert all(e.cursor is None for e in events)
    assert accumulate(events).text == "Hello, world! été 😀"


# -- errors ---------------------------------------------------------------------------


def test_error_shapes() -> None:
    nested = {
        "type": "error",
        "error": {"type": "server_error", "code": "server_error", "message": "boom", "param": None},
    }
    flat = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}
    assert error_info(nested, output_started=False) == ErrorInfo(
        kind="server", message="boom", retryable=True, code="server_error", raw=nested["error"]
    )
    assert error_info(flat, output_started=False) == ErrorInfo(
        kind="rate_limit", message="slow down", retryable=True, code="rate_limit_exceeded", raw=flat
    )
    assert not error_info(flat, output_started=True).retryable
    odd = error_info(
        {"type": "error", "error": {"type": "whatever", "message": "?"}}, output_started=False
    )
    assert (odd.kind, odd.code, odd.retryable) == ("unknown", "whatever", False)


def test_error_event_mid_stream_fails_the_stream() -> None:
    events = decode_events((FIX / "error_nested_midstream.sse").read_bytes(), D)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    assert (errors[0].error.kind, errors[0].error.code, errors[0].error.retryable) == (
        "server",
        "server_error",
        False,
    )
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.unified, finish.error) == (
        "failed",
        "error",
        errors[0].error,
    )
    result = accumulate(events)
    assert result.text == "Partial answer"  # everything received before is kept


def test_flat_error_then_failed() -> None:
    events = decode_events((FIX / "error_flat_then_failed.sse").read_bytes(), D)
    assert [type(e).__name__ for e in events[-2:]] == ["ErrorEvent", "Finish"]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None and finish.error.kind == "rate_limit"


# -- bad input ------------------------------------------------------------------------

BAD = {
    "malformed_json.sse": (RemoteProtocolError, "malformed JSON payload"),
    "non_object.sse": (RemoteProtocolError, "not an object"),
    "type_mismatch.sse": (RemoteProtocolError, "disagrees with data.type"),
    "delta_never_added.sse": (EventOrderError, "never added"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input(name: str) -> None:
    data = (FIX / "bad" / name).read_bytes()
    offset = data.index(b"event: response.", data.index(b"response.content_part.added"))
    kind, message = BAD[name]
    with pytest.raises(kind, match=message) as info:
        decode_events(data, D, strict=True)
    assert (info.value.dialect, info.value.event_index, info.value.byte_offset) == (D, 4, offset)
    # everything before the fault was returned by feed() before the raise
    decoder = Decoder(strict=True)
    before = decoder.feed(data[:offset])
    assert [type(e).__name__ for e in before] == [
        "StreamStart",
        "StatusUpdate",
        "StatusUpdate",
        "BlockStart",
    ]
    # tolerant: a typed ErrorEvent, and decoding continues to the end
    events = decode_events(data, D)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    error = errors[0].error
    assert (error.kind, error.dialect, error.event_index, error.byte_offset) == (
        "protocol",
        D,
        4,
        offset,
    )
    assert message in error.message
    assert isinstance(events[-1], Finish) and events[-1].status == "completed"
    assert accumulate(events).text == "OK"  # the content_part.done restates it


# -- tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "tools", "refusal", "unified"),
    [
        ("completed", False, False, "stop"),
        ("completed", True, False, "tool_calls"),
        ("completed", False, True, "refusal"),
        ("max_output_tokens", False, False, "length"),
        ("content_filter", False, False, "content_filter"),
        ("max_prompt_tokens", False, False, "context_window"),
        ("max_time_limit", False, False, "other"),
        ("failed", False, False, "error"),
        ("cancelled", False, False, "cancelled"),
        ("incomplete", False, False, "other"),
        ("something_new", False, False, "other"),
        (None, False, False, "other"),
    ],
)
def test_finish_reason_table(raw: str | None, tools: bool, refusal: bool, unified: str) -> None:
    assert map_finish_reason(raw, tool_calls=tools, refusal=refusal) == FinishReason(
        unified=unified, raw=raw
    )  # type: ignore[arg-type]
    if raw is not None and raw in FINISH_REASONS and not tools and not refusal:
        assert FINISH_REASONS[raw] == unified


def test_usage_arithmetic() -> None:
    raw = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 150,
    }
    assert to_usage(raw) == Usage(
        input_tokens=100,
        output_tokens=50,
        reasoning_tokens=30,
        cache_read_tokens=60,
        cache_write_tokens=10,
        total_tokens=150,
        raw=raw,
    )
    assert to_usage(None) is None
    assert to_usage({"input_tokens": 1, "output_tokens": 2}) == Usage(
        input_tokens=1, output_tokens=2, total_tokens=3, raw={"input_tokens": 1, "output_tokens": 2}
    )


# -- encoder --------------------------------------------------------------------------


def test_round_trip_exact_bytes_of_skeleton() -> None:
    data = (FIX / "skeleton.sse").read_bytes()
    events = decode_events(data, D)
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_encoding_a_foreign_text_stream_exact_bytes() -> None:
    events = [
        StreamStart(dialect="anthropic_messages", id="msg_9", model="claude", created=5),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi"),
        BlockEnd(index=0),
        Finish(
            status="incomplete",
            reason=FinishReason(unified="length", raw="max_tokens"),
            usage=Usage(input_tokens=2, output_tokens=1),
        ),
    ]
    encoder = Encoder()
    data = encoder.encode_all(events)
    frames = native_frames(data)
    assert [f[0] for f in frames] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert all(f[0] == f[1]["type"] for f in frames)
    assert [f[1]["sequence_number"] for f in frames] == list(range(9))
    item_id = frames[2][1]["item"]["id"]
    assert item_id.startswith("msg_") and len(item_id) == 52
    assert frames[4] == (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "sequence_number": 4,
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
            "delta": "Hi",
            "logprobs": [],
        },
    )
    last = frames[-1][1]["response"]
    assert last["id"] == "msg_9" and last["model"] == "claude" and last["status"] == "incomplete"
    assert last["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["usage"] == {
        "input_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3,
    }
    assert last["output"] == [
        {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Hi"}],
            "role": "assistant",
        }
    ]
    assert data.startswith(
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
    )
    assert encoder.losses == []
    # deterministic
    assert Encoder().encode_all(events) == data
    back = decode(data, D, strict=True)
    assert (back.text, back.status, back.finish_reason) == (
        "Hi",
        "incomplete",
        FinishReason(unified="length", raw="max_output_tokens"),
    )


def test_encoding_losses_are_recorded() -> None:
    from polystream.events import Metadata

    events = [
        StreamStart(dialect="gemini_generate", model="gemini"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="See"),
        Citation(index=0, citation={"uri": "https://a.example", "title": "A"}),
        BlockEnd(index=0),
        BlockStart(index=1, kind="server_tool_result", value={"x": 1}),
        BlockEnd(index=1),
        Metadata(name="grounding", value={"groundingChunks": []}),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="STOP")),
    ]
    encoder = Encoder()
    data = encoder.encode_all(events)
    assert [(loss.what, loss.event_type, loss.carried) for loss in encoder.losses] == [
        ("id", "stream-start", False),  # defaulted, as the next two
        ("created_at", "stream-start", False),
        ("citation.fields", "citation", False),
        ("block:server_tool_result", "block-start", False),
        ("metadata:grounding", "metadata", False),
    ]
    result = decode(data, D, strict=True)
    assert result.citations == [
        {
            "type": "url_citation",
            "start_index": 3,
            "end_index": 3,
            "title": "A",
            "url": "https://a.example",
        }
    ]
    assert (
        rebuild(decode_events(data, D))["output"][0]["content"][0]["annotations"]
        == result.citations
    )


def test_rebuild_of_a_foreign_stream() -> None:
    events = [
        StreamStart(dialect="anthropic_messages", id="msg_1", model="claude"),
        BlockStart(index=0, kind="tool_call", id="toolu_1", name="f", value={"a": 1}),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="tool_use")),
    ]
    native = rebuild(events)
    assert native["status"] == "completed"
    [item] = native["output"]
    assert (item["type"], item["call_id"], item["name"], item["arguments"], item["status"]) == (
        "function_call",
        "toolu_1",
        "f",
        '{"a":1}',
        "completed",
    )


def test_stream_decoder_detects_openai() -> None:
    decoder = StreamDecoder(keep_events=True)
    decoder.feed((FIX / "skeleton.sse").read_bytes())
    decoder.close()
    assert decoder.dialect == D
    assert decoder.native()["output"][0]["content"][0]["text"] == "OK"


def test_keep_raw_does_not_change_round_trip() -> None:
    data = (FIX / "skeleton.sse").read_bytes()
    events = decode_events(data, D, keep_raw=True)
    raws = [e for e in events if type(e).__name__ == "Raw"]
    assert len(raws) == 9 and raws[0].data["sequence_number"] == 0
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)
    assert msgspec.json.decode(msgspec.json.encode(raws[4].data))["delta"] == "OK"


def test_other_candidates_are_a_loss() -> None:
    events = [
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="A"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text", candidate=1),
        TextDelta(index=1, delta="B"),
        BlockEnd(index=1),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="stop")),
    ]
    encoder = Encoder()
    data = encoder.encode_all(events)
    # (No StreamStart: the Response's id, creation time and model are defaults.)
    assert [(loss.what, loss.event_index, loss.kind) for loss in encoder.losses] == [
        ("id", 0, "defaulted"),
        ("created_at", 0, "defaulted"),
        ("model", 0, "defaulted"),
        ("block:text", 3, "lost"),
    ]
    assert "candidate 1" in encoder.losses[3].reason
    result = decode(data, D, strict=True)
    assert (result.text, result.id is not None, result.status) == ("A", True, "completed")


def test_strict_mode_rejects_unknown_enum_values() -> None:
    data = small_stream()
    odd_item = data.replace(b'"type":"message"', b'"type":"hologram"')
    events = events_of(odd_item)  # tolerant: an ``other`` block... of a message that is not one
    assert any(isinstance(e, ErrorEvent) for e in events)  # its content part has no item block
    with pytest.raises(RemoteProtocolError, match="unknown output item type 'hologram'"):
        events_of(odd_item, strict=True)
    odd_reason = data.replace(b'"status":"completed"', b'"status":"exploded"')
    finish = events_of(odd_reason)[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == FinishReason(unified="other", raw="exploded")
    with pytest.raises(RemoteProtocolError, match="unknown status or incomplete reason"):
        events_of(odd_reason, strict=True)


_piece = st.text(max_size=8)
_block = st.one_of(
    st.tuples(st.just("text"), st.lists(_piece, max_size=4)),
    st.tuples(st.just("refusal"), st.lists(_piece, min_size=1, max_size=3)),
    st.tuples(st.just("reasoning"), st.lists(_piece, max_size=4)),
    st.tuples(
        st.just("tool_call"),
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
    ),
)


@settings(max_examples=40)
@given(blocks=st.lists(_block, max_size=5), cuts=st.lists(st.integers(0, 40), max_size=3))
def test_foreign_streams_survive_encoding(blocks: list[Any], cuts: list[int]) -> None:
    events: list[Any] = [StreamStart(dialect="anthropic_messages", id="msg_p", model="m")]
    for index, (kind, body) in enumerate(blocks):
        if kind == "tool_call":
            events.append(BlockStart(index=index, kind="tool_call", id=f"t{index}", name="f"))
            text = json.dumps(body)
            points = sorted({c % (len(text) + 1) for c in cuts})
            last = 0
            for p in [*points, len(text)]:
                if p > last:
                    events.append(ToolInputDelta(index=index, delta=text[last:p]))
                    last = p
        else:
            events.append(BlockStart(index=index, kind=kind))
            for piece in body:
                if kind == "reasoning":
                    events.append(ReasoningDelta(index=index, delta=piece, summary=True))
                else:
                    events.append(TextDelta(index=index, delta=piece))
        events.append(BlockEnd(index=index))
    events.append(
        Finish(
            status="completed",
            reason=FinishReason(unified="stop", raw="end_turn"),
            usage=Usage(input_tokens=3, output_tokens=4),
        )
    )
    source = accumulate(events)
    for encoder in (Encoder(), get_dialect("xai_responses").encoder()):
        data = encoder.encode_all(events)
        again = accumulate(decode_events(data, encoder.dialect, strict=True))
        assert again.text == source.text
        assert again.refusal == source.refusal
        assert again.reasoning == source.reasoning
        assert [(c.id, c.arguments) for c in again.tool_calls] == [
            (c.id, c.arguments) for c in source.tool_calls
        ]
        assert (again.usage.input_tokens, again.usage.output_tokens) == (3, 4)
        native = get_dialect(encoder.dialect).rebuild(decode_events(data, encoder.dialect))
        assert native["status"] == "completed"
        assert len(native["output"]) == len(blocks)


def test_foreign_web_search_becomes_a_web_search_call() -> None:
    events = [
        StreamStart(dialect="anthropic_messages", id="msg_w", model="claude"),
        BlockStart(index=0, kind="server_tool_call", id="srvtoolu_1", name="web_search"),
        ToolInputDelta(index=0, delta='{"query": '),
        ToolInputDelta(index=0, delta='"polystream"}'),
        BlockEnd(index=0),
        BlockStart(index=1, kind="server_tool_result", id="srvtoolu_1", value=[{"url": "u"}]),
        BlockEnd(index=1),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta="Found it."),
        BlockEnd(index=2),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn")),
    ]
    encoder = Encoder()
    data = encoder.encode_all(events)
    names = [f[0] for f in native_frames(data)]
    assert names[2:8] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert [loss.what for loss in encoder.losses] == ["created_at", "block:server_tool_result"]
    native = rebuild(decode_events(data, D, strict=True))
    web = native["output"][0]
    assert (web["type"], web["status"], web["action"]) == (
        "web_search_call",
        "completed",
        {"type": "search", "query": "polystream"},
    )
    assert web["id"].startswith("ws_")
    result = decode(data, D)
    assert result.text == "Found it." and result.tool_calls == []
    assert result.blocks[0].arguments == {"type": "search", "query": "polystream"}


def test_delta_after_its_part_is_done_is_a_located_error() -> None:
    frames = [
        json.loads(part.split(b"data: ", 1)[1]) for part in small_stream().split(b"\n\n") if part
    ]
    late = dict(frames[3], sequence_number=5, delta="late")
    done_again = dict(frames[4], sequence_number=6)
    frames[5]["sequence_number"] = 7
    data = sse(*frames[:5], late, done_again, frames[5])
    decoder = StreamDecoder(D)  # the accumulator behind it must not see the bad events
    events = decoder.feed(data) + decoder.close()
    errors = [e.error for e in events if isinstance(e, ErrorEvent)]
    assert [(e.kind, e.event_index) for e in errors] == [("protocol", 5), ("protocol", 6)]
    assert "after content part 0 was done" in errors[0].message
    assert "content_part.done twice" in errors[1].message
    assert decoder.result().text == "Hi" and decoder.result().status == "completed"
    with pytest.raises(EventOrderError):
        events_of(data, strict=True)


_FUZZ_SOURCES = [
    FIX / "reasoning_encrypted.sse",
    FIX / "parallel_tool_calls.sse",
    FIX / "web_search_annotations.sse",
    FIX / "reasoning_text_shell_patch_compaction.sse",
    FIX / "audio.sse",
]


@settings(max_examples=60)
@given(
    source=st.sampled_from(_FUZZ_SOURCES),
    edits=st.lists(
        st.tuples(st.sampled_from(["drop", "dup", "swap"]), st.integers(0, 200)), max_size=4
    ),
)
def test_mangled_streams_never_crash_the_pipeline(source: Path, edits: list[Any]) -> None:
    """Dropped, repeated and swapped events: tolerant decoding (and the Accumulator
    behind it) never raises, and the stream still ends in exactly one Finish."""
    frames = [f + b"\n\n" for f in source.read_bytes().split(b"\n\n") if f]
    for op, at in edits:
        i = at % len(frames)
        if op == "drop" and len(frames) > 1:
            del frames[i]
        elif op == "dup":
            frames.insert(i, frames[i])
        elif op == "swap" and i + 1 < len(frames):
            frames[i], frames[i + 1] = frames[i + 1], frames[i]
    decoder = StreamDecoder(D)
    events = decoder.feed(b"".join(frames)) + decoder.close()
    finishes = [i for i, e in enumerate(events) if isinstance(e, Finish)]
    assert len(finishes) == 1
    assert all(isinstance(e, KeepAlive | Warning) for e in events[finishes[0] + 1 :])
    decoder.result()
    decoder_native = get_dialect(D).rebuild(events)
    assert isinstance(decoder_native, dict)
    Encoder().encode_all(events)
    try:  # strict: a typed protocol error or nothing, never another exception
        decode_events(b"".join(frames), D, strict=True)
    except RemoteProtocolError as exc:
        assert exc.dialect == D and exc.event_index is not None


def test_an_image_sent_in_many_pieces_is_rebuilt_whole() -> None:
    # A foreign image block (Gemini's inline data, say) whose base64 arrives in pieces,
    # appended, then replaced by a whole partial image, then appended again: the item's
    # result is what the last replacement and the pieces after it make. (The pieces are
    # kept in a list and joined when the item is built: joined at each delta, 40,000
    # deltas took time quadratic in their number.)
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r", model="m"),
        BlockStart(index=0, kind="image"),
        *(DataDelta(index=0, delta=piece, mime_type="image/png") for piece in ("QU", "JD")),
        DataDelta(index=0, delta="RUZH", mime_type="image/png", replace=True),
        *(DataDelta(index=0, delta="SElK", mime_type="image/png") for _ in range(1000)),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    items = rebuild(events)["output"]
    assert [item["type"] for item in items] == ["image_generation_call"]
    assert items[0]["result"] == "RUZH" + "SElK" * 1000
