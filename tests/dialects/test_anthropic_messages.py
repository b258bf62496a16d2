"""anthropic_messages: exact events for key cases, the tables, usage arithmetic, bad input,
the encoder (same dialect and from other dialects) and the loss report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder, decode_events
from polystream.accumulate import accumulate
from polystream.dialects import get_dialect
from polystream.dialects.anthropic_messages import Decoder, Encoder, rebuild
from polystream.errors import EventOrderError, LocalProtocolError, RemoteProtocolError
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
    Metadata,
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from tests.helpers import FIXTURES, native_frames

HERE = FIXTURES / "anthropic_messages"
DIALECT = "anthropic_messages"


def fixture(name: str) -> bytes:
    return (HERE / f"{name}.sse").read_bytes()


def sse(*payloads: dict[str, Any] | str) -> bytes:
    """A stream from payloads (compact JSON, ``event:`` = the payload type)."""
    out = []
    for payload in payloads:
        if isinstance(payload, str):
            out.append(payload)
            continue
        data = json.dumps(payload, separators=(",", ":"))
        out.append(f"event: {payload['type']}\ndata: {data}\n\n")
    return "".join(out).encode()


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}
TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
STOP0 = {"type": "content_block_stop", "index": 0}
END = {"type": "message_stop"}


def text_delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def message_delta(reason: str | None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": usage or {"output_tokens": 5},
    }


def decode(data: bytes, **options: Any) -> list[Event]:
    return decode_events(data, DIALECT, **options)


# -- exact events ----------------------------------------------------------------------------


def test_skeleton_exact_events() -> None:
    events = decode(fixture("skeleton"))
    start_usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    delta_usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
    }
    final_raw = {**start_usage, "output_tokens": 5}

    def usage(output: int, raw: dict[str, Any]) -> Usage:
        return Usage(
            input_tokens=12,
            output_tokens=output,
            cache_read_tokens=0,
            cache_write_tokens=0,
            total_tokens=12 + output,
            raw=raw,
        )

    assert events == [
        StreamStart(
            dialect=DIALECT, id="msg_01XFDUDYJgAACzvnptvVoYEL", model="claude-haiku-4-5-20251001"
        ),
        UsageUpdate(usage=usage(1, start_usage)),
        BlockStart(index=0, kind="text"),
        KeepAlive(name="ping"),
        TextDelta(index=0, delta="OK"),
        TextDelta(index=0, delta="."),
        BlockEnd(index=0),
        UsageUpdate(
            usage=usage(5, delta_usage),
            extra={"delta": {"stop_reason": "end_turn", "stop_sequence": None}},
        ),
        Finish(
            status="completed",
            reason=FinishReason(unified="stop", raw="end_turn"),
            usage=usage(5, final_raw),
        ),
    ]


def test_thinking_signature_kept_whole_on_the_block() -> None:
    events = decode(fixture("thinking"))
    signatures = [e for e in events if isinstance(e, SignatureDelta)]
    assert len(signatures) == 1
    assert signatures[0].index == 0
    assert signatures[0].delta.startswith("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk")
    assert signatures[0].delta.endswith("QLgFE=")
    result = accumulate(events)
    assert result.blocks[0].kind == "reasoning"
    assert result.blocks[0].signature == signatures[0].delta
    assert result.reasoning.startswith("I need to find the GCD")
    assert result.text == "The greatest common divisor of 1071 and 462 is **21**."
    assert result.usage.reasoning_tokens == 141


def test_display_omitted_gives_one_empty_thinking_delta_and_the_signature() -> None:
    events = decode(fixture("thinking_omitted"))
    block0 = [e for e in events if getattr(e, "index", None) == 0]
    assert [type(e) for e in block0] == [BlockStart, ReasoningDelta, SignatureDelta, BlockEnd]
    assert block0[1] == ReasoningDelta(index=0, delta="")
    result = accumulate(events)
    assert result.blocks[0].text == ""
    assert result.blocks[0].signature is not None


def test_redacted_thinking_data_is_opaque_state_not_text() -> None:
    events = decode(fixture("redacted_thinking"))
    assert events[2] == BlockStart(index=0, kind="reasoning", name="redacted_thinking")
    assert isinstance(events[3], SignatureDelta) and events[3].extra == {"start": True}
    assert events[3].delta.startswith("EmwKAhgBEgy3va3pzix")
    result = accumulate(events)
    assert result.blocks[0].text is None
    assert result.blocks[0].signature == events[3].delta
    assert result.reasoning == "The user sent the magic string; part of my reasoning was redacted."
    native = rebuild(events)
    assert native["content"][0] == {"type": "redacted_thinking", "data": events[3].delta}


def test_parallel_tool_calls_are_distinct_blocks_by_id() -> None:
    result = accumulate(decode(fixture("parallel_tools")))
    assert [(c.id, c.index, c.arguments) for c in result.tool_calls] == [
        (
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            1,
            {"location": "San Francisco, CA", "unit": "fahrenheit"},
        ),
        ("toolu_01Wj5fq2zQYWPSFqcQ6mPaBd", 2, {"location": "New York, NY", "unit": "fahrenheit"}),
    ]
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="tool_use")


def test_first_empty_fragment_is_kept_and_no_argument_tool_gives_empty_object() -> None:
    events = decode(fixture("no_arg_tool"))
    assert ToolInputDelta(index=0, delta="") in events
    call = accumulate(events).tool_calls[0]
    assert (call.name, call.arguments, call.error) == ("get_current_time", {}, None)
    assert rebuild(events)["content"][0]["input"] == {}


def test_tool_input_cut_by_max_tokens_is_incomplete_not_empty() -> None:
    result = accumulate(decode(fixture("tool_max_tokens")))
    call = result.tool_calls[0]
    assert call.arguments is None
    assert call.error is not None and call.error.startswith("incomplete JSON")
    assert (
        call.arguments_json == '{"path": "notes.md", "content": "# Meeting notes\\n\\n- Budget app'
    )
    assert result.status == "incomplete"
    assert result.finish_reason == FinishReason(unified="length", raw="max_tokens")


def test_citations_attach_to_their_text_block() -> None:
    events = decode(fixture("text_citations"))
    citations = [e for e in events if isinstance(e, Citation)]
    assert [c.index for c in citations] == [1, 3]
    assert citations[0].citation["cited_text"] == "The grass is green. "
    start = next(e for e in events if isinstance(e, BlockStart) and e.index == 1)
    # The start said "citations": [] — kept so the block re-encodes exactly.
    assert start.extra == {"block": {"set": {"citations": []}}}
    native = rebuild(events)
    assert native["content"][1] == {
        "type": "text",
        "text": "the grass is green",
        "citations": [citations[0].citation],
    }


def test_server_tool_blocks() -> None:
    events = decode(fixture("web_search"))
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.kind, s.name, s.id) for s in starts] == [
        ("text", None, None),
        ("server_tool_call", "web_search", "srvtoolu_014hJH82Qum7Td6UV8gDXThB"),
        ("server_tool_result", "web_search_tool_result", "srvtoolu_014hJH82Qum7Td6UV8gDXThB"),
        ("text", None, None),
        ("text", None, None),
        ("text", None, None),
    ]
    assert starts[2].value["content"][0]["url"] == "https://example.com/quantum-2025"
    result = accumulate(events)
    assert result.tool_calls == []  # provider-executed: not a client tool call
    assert result.blocks[1].arguments == {"query": "latest quantum computing breakthroughs 2025"}


def test_mcp_tool_use_keeps_its_type_and_server_name() -> None:
    events = decode(fixture("mcp"))
    start = events[2]
    assert start == BlockStart(
        index=0,
        kind="server_tool_call",
        id="mcptoolu_014Q35RayjACSWkSj4X2yov1",
        name="echo",
        extra={"block": {"set": {"type": "mcp_tool_use", "server_name": "example-mcp"}}},
    )
    assert rebuild(events)["content"][0] == {
        "type": "mcp_tool_use",
        "id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
        "name": "echo",
        "input": {"message": "hello"},
        "server_name": "example-mcp",
    }


def test_compaction_block() -> None:
    events = decode(fixture("compaction"))
    result = accumulate(events)
    assert result.blocks[0].kind == "compaction"
    assert result.blocks[0].text is not None and result.blocks[0].text.startswith("Summary:")


def test_compaction_delta_with_encrypted_content_round_trips() -> None:
    data = sse(
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": "S", "encrypted_content": "Eo8="},
        },
        STOP0,
        message_delta("end_turn"),
        END,
    )
    events = decode(data)
    assert events[3:5] == [
        TextDelta(index=0, delta="S"),
        SignatureDelta(index=0, delta="Eo8=", extra={"joined": True}),
    ]
    assert Encoder().encode_all(events) == data


def test_unknown_block_type_passes_through_as_other() -> None:
    events = decode(fixture("unknown_block"))
    block = next(e for e in events if isinstance(e, BlockStart) and e.index == 1)
    assert block.kind == "other"
    assert block.name == "chart_preview"
    assert block.value == {
        "type": "chart_preview",
        "id": "chart_01Lq2mX9",
        "spec": {"kind": "bar", "series": [3, 1, 4]},
    }
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert unknown == [
        Unknown(
            name="content_block_delta",
            data='{"type":"content_block_delta","index":1,"delta":{"type":"chart_delta","series":[1,5]}}',
        )
    ]
    with pytest.raises(RemoteProtocolError, match="unknown content block type 'chart_preview'"):
        decode(fixture("unknown_block"), strict=True)


def test_continuation_form_decodes_and_rebuilds() -> None:
    events = decode(fixture("continuation"))
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "StreamStart",
        "UsageUpdate",
        "BlockStart",
        "BlockEnd",
        "BlockStart",
        "BlockEnd",
        "Finish",
    ]
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "completed"
    assert finish.reason == FinishReason(unified="tool_calls", raw="tool_use")
    result = accumulate(events)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Rome"})]
    native = rebuild(events)
    original = json.loads(fixture("continuation").split(b"data: ", 1)[1].split(b"\n", 1)[0])
    assert native == original["message"]
    assert Encoder().encode_all(events) == fixture("continuation")


def test_padded_json_and_ping_spellings_decode_like_compact_json() -> None:
    padded = decode(fixture("padded_pings"))
    compact = (
        fixture("padded_pings").replace(b"       ", b"").replace(b"   ", b"").replace(b"    ", b"")
    )
    assert [e for e in padded if isinstance(e, KeepAlive)] == [KeepAlive(name="ping")] * 3
    assert accumulate(padded).text == "Hello!"
    assert decode(compact) == padded


# -- tables -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "unified", "status"),
    [
        ("end_turn", "stop", "completed"),
        ("stop_sequence", "stop", "completed"),
        ("tool_use", "tool_calls", "completed"),
        ("max_tokens", "length", "incomplete"),
        ("pause_turn", "pause", "incomplete"),
        ("refusal", "refusal", "completed"),
        ("model_context_window_exceeded", "context_window", "incomplete"),
        ("compaction", "pause", "incomplete"),
        ("a_new_reason", "other", "completed"),
    ],
)
def test_stop_reason_table(raw: str, unified: str, status: str) -> None:
    data = sse(START, TEXT_START, text_delta("x"), STOP0, message_delta(raw), END)
    finish = decode(data)[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == FinishReason(unified=unified, raw=raw)  # type: ignore[arg-type]
    assert finish.status == status
    if raw == "a_new_reason":
        with pytest.raises(RemoteProtocolError, match="unknown stop_reason"):
            decode(data, strict=True)


def test_stop_reason_fixtures() -> None:
    expect = {
        "pause_turn": ("incomplete", "pause"),
        "refusal": ("completed", "refusal"),
        "context_window": ("incomplete", "context_window"),
        "stop_sequence": ("completed", "stop"),
        "unknown_stop_reason": ("completed", "other"),
    }
    for name, (status, unified) in expect.items():
        result = accumulate(decode(fixture(name)))
        assert (result.status, result.finish_reason and result.finish_reason.unified) == (
            status,
            unified,
        ), name


@pytest.mark.parametrize(
    ("etype", "kind", "retryable", "status"),
    [
        ("overloaded_error", "overloaded", True, 529),
        ("rate_limit_error", "rate_limit", True, 429),
        ("api_error", "server", True, 500),
        ("invalid_request_error", "invalid_request", False, 400),
        ("authentication_error", "authentication", False, 401),
        ("permission_error", "permission", False, 403),
        ("not_found_error", "not_found", False, 404),
        ("request_too_large", "request_too_large", False, 413),
        ("billing_error", "quota", False, 402),
        ("timeout_error", "timeout", True, 504),
        ("brand_new_error", "unknown", False, None),
    ],
)
def test_error_event_is_typed(etype: str, kind: str, retryable: bool, status: int | None) -> None:
    error = {"type": etype, "message": "boom"}
    data = sse(START, TEXT_START, text_delta("Hi"), {"type": "error", "error": error})
    events = decode(data)
    info = ErrorInfo(
        kind=kind,  # type: ignore[arg-type]
        message="boom",
        retryable=retryable,
        code=etype,
        http_status=status,
        raw=error,
    )
    assert events[-2] == ErrorEvent(error=info)
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.error, finish.reason.unified) == ("failed", info, "error")
    # The failed stream re-encodes to the same error event and no message_stop.
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)


def test_overloaded_fixture_ends_failed_and_keeps_the_text() -> None:
    result = accumulate(decode(fixture("overloaded")))
    assert result.status == "failed"
    assert result.text == "Once upon a time"
    assert result.error is not None
    assert (result.error.kind, result.error.retryable, result.error.code) == (
        "overloaded",
        True,
        "overloaded_error",
    )


def test_truncated_stream() -> None:
    events = decode(fixture("truncated"))
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated"
    assert finish.error is not None and finish.error.kind == "truncated"
    result = accumulate(events)
    assert result.text == "The three primary colours are red, "
    assert result.blocks[0].complete is False
    # A truncated tool call is reported incomplete, never {}.
    data = sse(
        START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 1'},
        },
    )
    call = accumulate(decode(data)).tool_calls[0]
    assert call.arguments is None and call.error is not None


def test_message_delta_without_message_stop_is_truncated() -> None:
    data = sse(START, TEXT_START, text_delta("Hi"), STOP0, message_delta("end_turn"))
    finish = decode(data)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


# -- usage ------------------------------------------------------------------------------------


def test_usage_arithmetic_input_excludes_cache_counts() -> None:
    start = json.loads(json.dumps(START))
    start["message"]["usage"] = {
        "input_tokens": 20,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 3000,
        "output_tokens": 1,
    }
    data = sse(
        start,
        TEXT_START,
        text_delta("x"),
        STOP0,
        message_delta("end_turn", {"output_tokens": 50}),
        END,
    )
    events = decode(data)
    first = events[1]
    assert isinstance(first, UsageUpdate)
    assert first.usage.input_tokens == 4020  # 20 + 1000 cache write + 3000 cache read
    assert first.usage.cache_write_tokens == 1000
    assert first.usage.cache_read_tokens == 3000
    result = accumulate(events)
    assert result.usage.input_tokens == 4020
    assert result.usage.output_tokens == 50
    assert result.usage.total_tokens == 4070
    # message_delta usage is cumulative and may restate input and cache counts.
    data = sse(
        start,
        TEXT_START,
        text_delta("x"),
        STOP0,
        message_delta(
            "end_turn",
            {"input_tokens": 25, "cache_read_input_tokens": 3500, "output_tokens": 60},
        ),
        END,
    )
    usage = accumulate(decode(data)).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        4525,
        3500,
        1000,
    )
    assert (usage.output_tokens, usage.total_tokens) == (60, 4585)


# -- bad input ------------------------------------------------------------------------------


BAD_CASES = {
    "malformed_json": (
        sse(START, TEXT_START, 'event: content_block_delta\ndata: {"type":"content_\n\n'),
        RemoteProtocolError,
        "malformed JSON",
        2,
    ),
    "non_object": (
        sse(START, "event: ping\ndata: [1, 2]\n\n"),
        RemoteProtocolError,
        "not a JSON object",
        1,
    ),
    "delta_for_unstarted_block": (
        sse(START, text_delta("x", index=3)),
        EventOrderError,
        "index 3, which was never started",
        1,
    ),
    "stop_for_unknown_index": (
        sse(START, {"type": "content_block_stop", "index": 7}),
        EventOrderError,
        "content_block_stop for index 7",
        1,
    ),
    "message_delta_before_message_start": (
        sse(message_delta("end_turn")),
        EventOrderError,
        "message_delta before message_start",
        0,
    ),
    "second_message_start": (sse(START, START), EventOrderError, "a second message_start", 1),
    "start_of_an_open_index": (
        sse(START, TEXT_START, TEXT_START),
        EventOrderError,
        "content_block_start for index 0, which is open",
        2,
    ),
    "message_start_without_message": (
        sse({"type": "message_start", "message": "msg_1"}),
        RemoteProtocolError,
        "without a message object",
        0,
    ),
    "delta_without_index": (
        sse(START, TEXT_START, {"type": "content_block_delta", "index": "0", "delta": {}}),
        RemoteProtocolError,
        "without an integer index",
        2,
    ),
    "delta_type_for_wrong_block": (
        sse(
            START,
            TEXT_START,
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            },
        ),
        EventOrderError,
        "input_json_delta for a text block",
        2,
    ),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_strict_is_a_located_protocol_error(case: str) -> None:
    data, error, message, event_index = BAD_CASES[case]
    with pytest.raises(error, match=message) as info:
        decode(data, strict=True)
    assert info.value.dialect == DIALECT
    assert info.value.event_index == event_index
    offset = info.value.byte_offset
    assert offset is not None
    assert data[offset:].startswith(b"event: ")
    # The offset is the start of the event at fault.
    assert data.count(b"\n\n", 0, offset) == event_index


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_tolerant_reports_and_continues(case: str) -> None:
    data, _, message, event_index = BAD_CASES[case]
    events = decode(data)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    info = errors[0].error
    assert (info.kind, info.dialect, info.event_index) == ("protocol", DIALECT, event_index)
    assert message in info.message
    # Nothing received is lost: the offending payload is kept on the error.
    assert isinstance(info.raw, str) and info.raw in data.decode()
    assert isinstance(events[-1], Finish)


def test_bad_fixture_tolerant_keeps_earlier_and_later_events() -> None:
    data = (HERE / "bad" / "malformed_json.sse").read_bytes()
    events = decode(data)
    texts = [e.delta for e in events if isinstance(e, TextDelta)]
    assert texts == ["Hi", " there"]
    assert sum(isinstance(e, ErrorEvent) for e in events) == 1
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "completed"
    with pytest.raises(RemoteProtocolError) as info:
        decode(data, strict=True)
    assert (info.value.dialect, info.value.event_index) == (DIALECT, 3)
    bad = b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ther'
    assert info.value.byte_offset == data.index(bad) - len(b"event: content_block_delta\n")


def test_unknown_event_passes_through_and_strict_rejects_it() -> None:
    data = sse(START, 'event: new_thing\ndata: {"type":"new_thing","x":1}\n\n', TEXT_START)
    events = decode(data)
    assert Unknown(name="new_thing", data='{"type":"new_thing","x":1}') in events
    with pytest.raises(RemoteProtocolError, match="unknown event type 'new_thing'"):
        decode(data, strict=True)


def test_empty_data_and_done_pass_through() -> None:
    data = sse(START, "event: ping\ndata:\n\n", TEXT_START, text_delta("x"), STOP0)
    data += sse(message_delta("end_turn"), END, "data: [DONE]\n\n")
    events = decode(data)
    assert Unknown(name="ping", data="") in events
    assert isinstance(events[-2], Finish)
    assert isinstance(events[-1], Warning) and events[-1].code == "after_terminal"
    # The [DONE] after the terminal event is only a warning: not re-emitted.
    assert native_frames(Encoder().encode_all(events)) == native_frames(data)[:-1]
    with pytest.raises(RemoteProtocolError, match="unexpected payload 'empty'"):
        decode(data, strict=True)


def test_reused_index_is_a_warning_for_anthropic() -> None:
    data = sse(START, TEXT_START, text_delta("a"), STOP0, TEXT_START, text_delta("b"), STOP0)
    events = decode(data)
    warnings = [e for e in events if isinstance(e, Warning)]
    assert [w.code for w in warnings] == ["index_reused"]
    assert [e.index for e in events if isinstance(e, BlockStart)] == [0, 1]
    with pytest.raises(RemoteProtocolError, match="reused"):
        decode(data, strict=True)


def test_unmodelled_fields_and_renamed_events_round_trip() -> None:
    data = sse(
        START,
        TEXT_START,
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Hi","lang":"en"},"seq":7}\n\n',
        'event: delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"!"}}\n\n',
        'data: {"type":"content_block_stop","index":0}\n\n',
        message_delta("end_turn"),
        END,
    )
    events = decode(data)
    assert events[3] == TextDelta(
        index=0, delta="Hi", extra={"delta": {"lang": "en"}, "fields": {"seq": 7}}
    )
    assert events[4] == TextDelta(index=0, delta="!", extra={"event": "delta"})
    assert events[5] == BlockEnd(index=0, extra={"event": None})
    assert Encoder().encode_all(events) == data


def test_compaction_delta_with_only_encrypted_content() -> None:
    data = sse(
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": None, "encrypted_content": "Eo8="},
        },
        STOP0,
        message_delta("end_turn"),
        END,
    )
    events = decode(data)
    assert events[3] == SignatureDelta(index=0, delta="Eo8=", extra={"delta": {"content": None}})
    assert Encoder().encode_all(events) == data
    assert rebuild(events)["content"] == [
        {"type": "compaction", "content": None, "encrypted_content": "Eo8="}
    ]


def test_keep_raw_emits_the_native_event_first() -> None:
    events = decode(sse(START, TEXT_START), keep_raw=True)
    assert isinstance(events[0], Raw) and events[0].name == "message_start"
    assert events[0].data == START
    assert isinstance(events[3], Raw) and events[3].data == TEXT_START


def test_block_index_extra_only_when_it_breaks_the_rule() -> None:
    tool = {
        "type": "content_block_start",
        "index": 5,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}},
    }
    events = decode(sse(START, tool, {"type": "content_block_stop", "index": 5}, END))
    assert events[2] == BlockStart(
        index=0, kind="tool_call", id="toolu_9", name="f", extra={"index": 5}
    )
    assert Encoder().encode_all(events) == sse(
        START, tool, {"type": "content_block_stop", "index": 5}, END
    )


# -- encoder: same dialect ------------------------------------------------------------------


def test_same_dialect_encoding_is_byte_exact_for_compact_streams() -> None:
    data = fixture("parallel_tools").replace(b'{"type": "ping"}', b'{"type":"ping"}')
    assert Encoder().encode_all(decode(data)) == data


def test_encoder_reproduces_every_fixture_without_raw() -> None:
    for path in sorted(HERE.glob("*.sse")):
        data = path.read_bytes()
        events = decode(data)
        assert native_frames(Encoder().encode_all(events)) == native_frames(data), path.name


def test_same_dialect_encoding_has_no_losses() -> None:
    for path in sorted(HERE.glob("*.sse")):
        encoder = Encoder()
        encoder.encode_all(decode(path.read_bytes()))
        assert encoder.losses == [], path.name


# -- encoder: from another dialect ------------------------------------------------------------


def ids(prefix: str) -> str:
    return f"{prefix}_test"


FOREIGN: list[Event] = [
    StreamStart(dialect="openai_responses", id="resp_123", model="gpt-5.4-nano"),
    BlockStart(index=0, kind="reasoning", id="rs_1"),
    ReasoningDelta(index=0, delta="Think.", summary=True),
    SignatureDelta(index=0, delta="gAAAAABencrypted=="),
    BlockEnd(index=0),
    BlockStart(index=1, kind="text", id="msg_item"),
    TextDelta(index=1, delta="Checking "),
    TextDelta(index=1, delta="both."),
    BlockEnd(index=1),
    BlockStart(index=2, kind="tool_call", id="fc_1", call_id="call_A", name="get_weather"),
    ToolInputDelta(index=2, delta='{"city":'),
    ToolInputDelta(index=2, delta='"Paris"}'),
    BlockEnd(index=2),
    BlockStart(index=3, kind="tool_call", name="get_time", value={"tz": "UTC"}),
    BlockEnd(index=3),
    UsageUpdate(
        usage=Usage(
            input_tokens=120,
            output_tokens=40,
            reasoning_tokens=12,
            cache_read_tokens=100,
            total_tokens=160,
        )
    ),
    Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="completed")),
]


def test_foreign_events_encode_to_a_valid_messages_stream() -> None:
    encoder = Encoder(id_factory=ids)
    data = encoder.encode_all(FOREIGN)
    carried = "polystream:v1:openai_responses:gAAAAABencrypted=="
    usage = {
        "input_tokens": 20,
        "cache_read_input_tokens": 100,
        "output_tokens": 40,
        "output_tokens_details": {"thinking_tokens": 12},
    }
    assert native_frames(data) == [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": "gpt-5.4-nano",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Think."},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": carried},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "Checking "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "both."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {
                    "type": "tool_use",
                    "id": "call_A",
                    "name": "get_weather",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"city":'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_test",
                    "name": "get_time",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": '{"tz":"UTC"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 3}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": usage,
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    assert [(loss.what, loss.event_index, loss.carried) for loss in encoder.losses] == [
        ("signature", 3, True)
    ]


def test_carried_signature_comes_back_on_decode_and_round_trips() -> None:
    data = Encoder(id_factory=ids).encode_all(FOREIGN)
    events = decode(data)
    signature = next(e for e in events if isinstance(e, SignatureDelta))
    # The original bytes come back, tagged with the dialect they belong to.
    assert signature == SignatureDelta(
        index=0, delta="gAAAAABencrypted==", extra={"carrier": "openai_responses"}
    )
    assert Encoder().encode_all(events) == data
    result = accumulate(events)
    assert result.text == "Checking both."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_A", "get_weather", {"city": "Paris"}),
        ("toolu_test", "get_time", {"tz": "UTC"}),
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 40)
    assert result.usage.cache_read_tokens == 100
    assert result.finish_reason == FinishReason(unified="tool_calls", raw="tool_use")


def test_carrier_can_be_turned_off() -> None:
    encoder = Encoder(id_factory=ids, carry_signatures=False)
    data = encoder.encode_all(FOREIGN)
    assert b"signature_delta" not in data
    assert [(loss.what, loss.carried) for loss in encoder.losses] == [("signature", False)]


def test_what_messages_cannot_carry_is_reported() -> None:
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", model="gemini-3.8-flash"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi"),
        SignatureDelta(index=0, delta="thoughtsig=="),
        BlockEnd(index=0),
        BlockStart(index=1, kind="audio"),
        DataDelta(index=1, delta="AAAA", mime_type="audio/pcm"),
        BlockEnd(index=1),
        Metadata(name="grounding", value={"groundingChunks": []}),
        Citation(index=None, citation={"uri": "https://example.com"}),
        BlockStart(index=2, kind="text", candidate=1),
        TextDelta(index=2, delta="other candidate"),
        BlockEnd(index=2),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="STOP")),
    ]
    encoder = Encoder(id_factory=ids)
    data = encoder.encode_all(events)
    assert [(loss.what, loss.event_index, loss.carried) for loss in encoder.losses] == [
        ("id", 1, False),  # defaulted: Gemini's stream named none (a generated one)
        ("signature", 3, True),
        ("block:audio", 5, False),
        ("metadata:grounding", 8, False),
        ("citation", 9, False),
        ("candidate", 10, False),
        ("usage", 13, False),  # defaulted: none in the source, 0 input and output tokens
    ]
    result = accumulate(decode(data))
    assert result.text == "Hi"
    assert [b.kind for b in result.blocks] == ["text"]
    # The text part's Gemini signature rides in the carrier on the text block.
    assert b'"signature":"polystream:v1:gemini_generate:thoughtsig=="' in data
    assert [b.signature for b in result.blocks] == ["thoughtsig=="]
    assert result.finish_reason == FinishReason(unified="stop", raw="end_turn")


def test_foreign_failed_and_truncated_sources() -> None:
    head: list[Event] = [
        StreamStart(dialect="openai_chat", model="gpt-5"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hel"),
    ]
    error = ErrorInfo(kind="rate_limit", message="slow down", retryable=True)
    failed = Encoder(id_factory=ids).encode_all(
        [*head, Finish(status="failed", reason=FinishReason(unified="error"), error=error)]
    )
    frames = native_frames(failed)
    assert frames[-1] == (
        "error",
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    )
    finish = decode(failed)[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None and finish.error.kind == "rate_limit"
    truncated = Encoder(id_factory=ids).encode_all(
        [*head, Finish(status="truncated", reason=FinishReason(unified="error"))]
    )
    assert b"message_stop" not in truncated and b"message_delta" not in truncated
    finish = decode(truncated)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


def test_foreign_text_tool_input_is_wrapped_in_an_object() -> None:
    events: list[Event] = [
        StreamStart(dialect="openai_responses", model="gpt-5"),
        BlockStart(index=0, kind="tool_call", call_id="call_1", name="code_exec"),
        ToolInputDelta(index=0, delta=""),
        ToolInputDelta(index=0, delta='print("'),
        ToolInputDelta(index=0, delta='hi")'),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="tool_calls")),
    ]
    encoder = Encoder(id_factory=ids)
    call = accumulate(decode(encoder.encode_all(events))).tool_calls[0]
    assert call.arguments == {"input": 'print("hi")'}
    assert [(loss.what, loss.kind) for loss in encoder.losses] == [
        ("id", "defaulted"),
        ("tool_input:text", "lost"),
        ("usage", "defaulted"),  # none in the source: 0 input and output tokens
    ]


@pytest.mark.parametrize(
    ("first", "arguments", "partial"),
    [
        ('{"a": 1}', {"a": 1}, ' \n  \t{"a": 1}'),
        ("print(1)", {"input": " \n  \tprint(1)"}, '{"input": " \\n  \\tprint(1)'),
    ],
)
def test_foreign_tool_input_after_blank_fragments(
    first: str, arguments: dict[str, Any], partial: str
) -> None:
    # Blank fragments are held until the input's first other character says whether
    # it is a JSON object; then they go with it, in one delta. (Held in pieces, joined
    # once: joined at each one, 80,000 blank fragments took 1.2 s to encode.)
    events: list[Event] = [
        StreamStart(dialect="openai_responses", model="gpt-5"),
        BlockStart(index=0, kind="tool_call", call_id="call_1", name="f"),
        *(ToolInputDelta(index=0, delta=blank) for blank in (" ", "\n", "  ", "\t")),
        ToolInputDelta(index=0, delta=first),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="tool_calls")),
    ]
    data = Encoder(id_factory=ids).encode_all(events)
    deltas = [p["delta"] for n, p in native_frames(data) if n == "content_block_delta"]
    assert deltas[0]["partial_json"] == partial
    assert accumulate(decode(data)).tool_calls[0].arguments == arguments


@pytest.mark.parametrize("unified", ["refusal", "stop"])
def test_foreign_refusal_becomes_the_refusal_stop_reason(unified: str) -> None:
    events: list[Event] = [
        StreamStart(dialect="openai_chat", model="gpt-5"),
        BlockStart(index=0, kind="refusal"),
        TextDelta(index=0, delta="I can't "),
        TextDelta(index=0, delta="help with that."),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified=unified)),  # type: ignore[arg-type]
    ]
    encoder = Encoder(id_factory=ids)
    data = encoder.encode_all(events)
    frames = native_frames(data)
    assert [name for name, _ in frames] == ["message_start", "message_delta", "message_stop"]
    assert frames[1][1]["delta"] == {
        "stop_reason": "refusal",
        "stop_sequence": None,
        "stop_details": {
            "type": "refusal",
            "category": None,
            "explanation": "I can't help with that.",
        },
    }
    expected = [("id", "defaulted"), ("block:refusal", "lost"), ("usage", "defaulted")]
    if unified != "refusal":
        expected.append(("finish_reason", "lost"))
    assert [(loss.what, loss.kind) for loss in encoder.losses] == expected
    result = accumulate(decode(data))
    assert (result.status, result.text) == ("completed", "")
    assert result.finish_reason == FinishReason(unified="refusal", raw="refusal")


def test_ping_after_first_block_is_optional() -> None:
    events = FOREIGN[:1] + FOREIGN[5:9] + FOREIGN[-1:]
    plain = native_frames(Encoder(id_factory=ids).encode_all(events))
    assert all(name != "ping" for name, _ in plain)
    pinged = native_frames(Encoder(id_factory=ids, ping_after_first_block=True).encode_all(events))
    assert [name for name, _ in pinged][:3] == ["message_start", "content_block_start", "ping"]
    assert sum(name == "ping" for name, _ in pinged) == 1


def test_hand_built_same_dialect_events_get_a_stop_reason_and_usage() -> None:
    events: list[Event] = [
        StreamStart(dialect=DIALECT, id="msg_x", model="claude-haiku-4-5"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi"),
        BlockEnd(index=0),
        Finish(
            status="incomplete",
            reason=FinishReason(unified="length", raw="max_tokens"),
            usage=Usage(input_tokens=5, output_tokens=2),
        ),
    ]
    frames = native_frames(Encoder().encode_all(events))
    assert frames[0][1]["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert frames[-2] == (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
            "usage": {"input_tokens": 5, "output_tokens": 2},
        },
    )
    assert frames[-1] == ("message_stop", {"type": "message_stop"})


def test_encoder_rejects_impossible_event_order() -> None:
    encoder = Encoder()
    encoder.encode(FOREIGN[0])
    with pytest.raises(LocalProtocolError, match="never started"):
        encoder.encode(TextDelta(index=4, delta="x"))


def test_rebuild_from_registry_and_stream_decoder_agree() -> None:
    data = fixture("web_search")
    decoder = StreamDecoder(DIALECT, keep_events=True)
    decoder.feed(data)
    decoder.close()
    assert decoder.native() == get_dialect(DIALECT).rebuild(decoder.events)
    native = decoder.native()
    assert native["stop_reason"] == "end_turn"
    assert native["usage"]["server_tool_use"] == {"web_search_requests": 1, "web_fetch_requests": 0}
    assert [b["type"] for b in native["content"]] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
        "text",
    ]


def test_decoder_class_is_registered() -> None:
    assert isinstance(get_dialect(DIALECT).decoder(), Decoder)
    assert isinstance(get_dialect(DIALECT).encoder(), Encoder)


def test_fixture_sources_are_documented() -> None:
    sources = (HERE / "SOURCES.md").read_text()
    for path in sorted(Path(HERE).glob("*.sse")):
        assert f"`{path.name}`" in sources, path.name


# -- property: other dialects' streams survive the trip through Messages ------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def foreign_streams(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = [StreamStart(dialect="openai_responses", id="resp_1", model="gpt-5")]
    for index in range(draw(st.integers(min_value=0, max_value=4))):
        kind = draw(st.sampled_from(["text", "reasoning", "tool_call", "tool_value"]))
        if kind == "tool_value":
            value = draw(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
            events.append(BlockStart(index=index, kind="tool_call", name="f", value=value))
            events.append(BlockEnd(index=index))
            continue
        events.append(BlockStart(index=index, kind=kind, name="g" if kind == "tool_call" else None))
        if kind == "tool_call":
            args = json.dumps(draw(st.dictionaries(_TEXT, _TEXT, max_size=3)))
            cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=4)))
            pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
            events.extend(ToolInputDelta(index=index, delta=p) for p in pieces)
        else:
            for piece in draw(st.lists(_TEXT, max_size=4)):
                cls = TextDelta if kind == "text" else ReasoningDelta
                events.append(cls(index=index, delta=piece))
            if kind == "reasoning" and draw(st.booleans()):
                events.append(SignatureDelta(index=index, delta=draw(_TEXT)))
        events.append(BlockEnd(index=index))
    read = draw(st.integers(0, 50))
    events.append(
        UsageUpdate(
            usage=Usage(
                input_tokens=read + draw(st.integers(0, 500)),
                output_tokens=draw(st.integers(0, 500)),
                cache_read_tokens=read,
            )
        )
    )
    reason = draw(st.sampled_from(["stop", "tool_calls", "length"]))
    status = "incomplete" if reason == "length" else "completed"
    events.append(Finish(status=status, reason=FinishReason(unified=reason)))  # type: ignore[arg-type]
    return events


@settings(max_examples=40)
@given(events=foreign_streams())
def test_other_dialect_streams_survive_messages(events: list[Event]) -> None:
    data = Encoder(id_factory=ids).encode_all(events)
    before = accumulate(events)
    after = accumulate(decode(data))
    assert after.status == before.status
    assert after.text == before.text
    assert after.reasoning == before.reasoning
    assert [(c.name, c.arguments) for c in after.tool_calls] == [
        (c.name, c.arguments) for c in before.tool_calls
    ]
    assert [b.signature for b in after.blocks] == [b.signature for b in before.blocks]
    assert (after.usage.input_tokens, after.usage.output_tokens) == (
        before.usage.input_tokens,
        before.usage.output_tokens,
    )
    assert after.usage.cache_read_tokens == before.usage.cache_read_tokens
    assert after.finish_reason is not None and before.finish_reason is not None
    assert after.finish_reason.unified == before.finish_reason.unified
