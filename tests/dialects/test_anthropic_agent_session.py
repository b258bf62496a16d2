"""The Managed Agents session stream (``anthropic_agent_session``): exact events for each
native event, the Finish of each terminal, the usage arithmetic, the previews, errors,
unknown events, what the encoder writes for another dialect's events, ``rebuild`` and the
request codec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polystream import decode_events
from polystream.dialects import get_dialect
from polystream.dialects.anthropic_agent_session import Decoder, Encoder, rebuild
from polystream.errors import RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.request import build_request, parse_request

DIALECT = "anthropic_agent_session"
AT = "2026-11-20T10:15:00Z"


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events
    )


def decoded(*events: dict[str, Any]) -> list[Event]:
    return decode_events(sse(*events), DIALECT)


RUNNING = {"type": "session.status_running", "id": "sevt_1", "processed_at": AT}


def idle(reason: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "session.status_idle",
        "id": "sevt_9",
        "processed_at": AT,
        "stop_details": None,
        "stop_reason": reason,
    }


def test_a_whole_message_is_a_text_block_per_content_entry() -> None:
    message = {
        "type": "agent.message",
        "id": "sevt_2",
        "processed_at": AT,
        "content": [{"type": "text", "text": "Hi"}, {"type": "redacted"}],
    }
    events = decoded(RUNNING, message, idle({"type": "end_turn"}))
    native = {"type": "agent.message", "id": "sevt_2", "processed_at": AT, "content": None}
    assert events[:7] == [
        StreamStart(dialect=DIALECT),
        StatusUpdate(status="running", extra={"session_event": RUNNING}),
        BlockStart(
            index=0, kind="text", id="sevt_2", extra={"session_event": native, "session_parts": 2}
        ),
        TextDelta(index=0, delta="Hi"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="other", id="sevt_2", name="redacted", value={"type": "redacted"}),
        BlockEnd(index=1),
    ]
    assert events[-1] == Finish(
        status="completed", reason=FinishReason(unified="stop", raw="end_turn")
    )
    assert Encoder().encode_all(events) == sse(RUNNING, message, idle({"type": "end_turn"}))


def test_a_preview_opens_the_block_and_its_buffered_event_closes_it() -> None:
    start = {"type": "event_start", "event": {"type": "agent.message", "id": "sevt_5"}}
    delta = {
        "type": "event_delta",
        "event_id": "sevt_5",
        "delta": {"type": "content_delta", "content": {"type": "text", "text": "Hel"}, "index": 0},
    }
    done = {
        "type": "agent.message",
        "id": "sevt_5",
        "processed_at": AT,
        "content": [{"type": "text", "text": "Hello"}],
    }
    events = decoded(RUNNING, start, delta, done, idle({"type": "end_turn"}))
    assert events[2:5] == [
        BlockStart(index=0, kind="text", id="sevt_5", extra={"session_event": start}),
        TextDelta(
            index=0,
            delta="Hel",
            part=0,
            extra={
                "session_event": {
                    "type": "event_delta",
                    "event_id": "sevt_5",
                    "delta": {
                        "type": "content_delta",
                        "content": {"type": "text", "text": None},
                        "index": 0,
                    },
                }
            },
        ),
        BlockEnd(index=0, value="Hello", extra={"session_event": done}),
    ]
    # The history holds the buffered event, never the preview.
    assert rebuild(events) == {
        "data": [RUNNING, done, idle({"type": "end_turn"})],
        "next_page": None,
    }


def test_a_preview_its_model_request_abandons_is_closed_incomplete() -> None:
    start = {"type": "event_start", "event": {"type": "agent.thinking", "id": "sevt_6"}}
    end = {
        "type": "span.model_request_end",
        "id": "sevt_7",
        "is_error": True,
        "model_request_start_id": "sevt_3",
        "model_usage": {},
        "processed_at": AT,
    }
    events = decoded(RUNNING, start, end)
    assert events[2:5] == [
        BlockStart(index=0, kind="reasoning", id="sevt_6", extra={"session_event": start}),
        BlockEnd(index=0, status="incomplete", extra={"session_preview_closed": True}),
        Metadata(name="span.model_request_end", value=end),
    ]
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"


@pytest.mark.parametrize(
    ("reason", "status", "unified"),
    [
        ({"type": "end_turn"}, "completed", "stop"),
        ({"type": "requires_action", "event_ids": ["sevt_4"]}, "completed", "tool_calls"),
        ({"type": "refusal"}, "completed", "refusal"),
        ({"type": "budget_reached"}, "incomplete", "other"),
        ({"type": "retries_exhausted"}, "failed", "error"),
    ],
)
def test_the_idle_stop_reasons(reason: dict[str, Any], status: str, unified: str) -> None:
    finish = decoded(RUNNING, idle(reason))[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason) == (
        status,
        FinishReason(unified=unified, raw=reason["type"]),
    )  # type: ignore[arg-type]
    if status == "failed":
        assert finish.error == ErrorInfo(
            kind="server",
            message="the session ended retries_exhausted",
            code="retries_exhausted",
            dialect=DIALECT,
        )


def test_terminated_and_deleted() -> None:
    terminated = {"type": "session.status_terminated", "id": "sevt_8", "processed_at": AT}
    deleted = {"type": "session.deleted", "id": "sevt_8", "processed_at": AT}
    assert decoded(RUNNING, terminated)[-1] == Finish(
        status="completed", reason=FinishReason(unified="stop", raw="terminated")
    )
    assert decoded(RUNNING, deleted)[-1] == Finish(
        status="incomplete", reason=FinishReason(unified="cancelled", raw="deleted")
    )


def test_a_retried_error_does_not_fail_the_turn_a_terminal_one_does() -> None:
    def error(retry: str) -> dict[str, Any]:
        return {
            "type": "session.error",
            "id": "sevt_3",
            "processed_at": AT,
            "error": {
                "type": "model_overloaded_error",
                "message": "busy",
                "retry_status": {"type": retry},
            },
        }

    retried = decoded(RUNNING, error("retrying"), idle({"type": "end_turn"}))
    info = ErrorInfo(
        kind="overloaded",
        message="busy",
        retryable=True,
        code="model_overloaded_error",
        dialect=DIALECT,
        raw=error("retrying")["error"],
    )
    assert retried[2] == ErrorEvent(error=info, extra={"session_event": error("retrying")})
    assert isinstance(retried[-1], Finish) and retried[-1].status == "completed"
    terminated = {"type": "session.status_terminated", "id": "sevt_8", "processed_at": AT}
    failed = decoded(RUNNING, error("terminal"), terminated)[-1]
    assert isinstance(failed, Finish)
    assert (failed.status, failed.reason.raw) == ("failed", "terminated")
    assert failed.error is not None and failed.error.code == "model_overloaded_error"
    assert failed.error.retryable is False


def test_usage_adds_the_cache_to_the_input() -> None:
    snapshot = {
        "input_tokens": 100,
        "output_tokens": 40,
        "cache_read_input_tokens": 2000,
        "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 5},
    }
    usage = {"type": "session.usage", "id": "sevt_4", "processed_at": AT, "usage": snapshot}
    events = decoded(RUNNING, usage, idle({"type": "end_turn"}))
    expected = Usage(
        input_tokens=2405,
        output_tokens=40,
        cache_read_tokens=2000,
        cache_write_tokens=305,
        total_tokens=2445,
        raw=snapshot,
    )
    assert events[2] == UsageUpdate(
        usage=expected, extra={"session_event": {**usage, "usage": None}}
    )
    assert isinstance(events[-1], Finish) and events[-1].usage == expected


def test_tool_uses_and_results() -> None:
    use = {
        "type": "agent.tool_use",
        "id": "sevt_a",
        "name": "bash",
        "input": {"command": "ls"},
        "processed_at": AT,
    }
    result = {
        "type": "agent.tool_result",
        "id": "sevt_b",
        "tool_use_id": "sevt_a",
        "content": [{"type": "text", "text": "a.py"}],
        "is_error": True,
        "processed_at": AT,
    }
    custom = {
        "type": "agent.custom_tool_use",
        "id": "sevt_c",
        "name": "lookup",
        "input": {"q": 1},
        "processed_at": AT,
    }
    echoed = {
        "type": "user.custom_tool_result",
        "id": "sevt_d",
        "custom_tool_use_id": "sevt_c",
        "content": [{"type": "text", "text": "42"}],
    }
    events = decoded(RUNNING, use, result, custom, echoed, idle({"type": "end_turn"}))
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.kind, s.id, s.call_id, s.name, s.value) for s in starts] == [
        ("server_tool_call", "sevt_a", None, "bash", {"command": "ls"}),
        ("server_tool_result", "sevt_b", "sevt_a", None, [{"type": "text", "text": "a.py"}]),
        ("tool_call", "sevt_c", None, "lookup", {"q": 1}),
        ("tool_result", "sevt_d", "sevt_c", None, [{"type": "text", "text": "42"}]),
    ]
    assert BlockEnd(index=1, status="error") in events


def test_unknown_events_pass_through_and_strict_rejects_them() -> None:
    odd = {"type": "agent.future", "id": "sevt_f"}
    events = decoded(RUNNING, odd, idle({"type": "end_turn"}))
    assert events[2] == Unknown(name="agent.future", data='{"type":"agent.future","id":"sevt_f"}')
    assert Encoder().encode_all(events) == sse(RUNNING, odd, idle({"type": "end_turn"}))
    decoder = Decoder(strict=True)
    decoder.feed(sse(RUNNING))
    with pytest.raises(RemoteProtocolError) as caught:
        decoder.feed(sse(odd))
    assert (caught.value.dialect, caught.value.event_index) == (DIALECT, 1)
    assert caught.value.byte_offset == len(sse(RUNNING))


def test_a_delta_without_its_start_is_a_located_protocol_error() -> None:
    delta = {
        "type": "event_delta",
        "event_id": "sevt_x",
        "delta": {"type": "content_delta", "content": {"type": "text", "text": "x"}},
    }
    events = decoded(RUNNING, delta)
    error = events[2]
    assert isinstance(error, ErrorEvent)
    assert error.error.kind == "protocol"
    assert error.error.message == "event_delta for event 'sevt_x', which no event_start opened"
    assert (error.error.event_index, error.error.byte_offset) == (1, len(sse(RUNNING)))


def test_events_after_the_terminal_are_warned() -> None:
    events = decoded(RUNNING, idle({"type": "end_turn"}), RUNNING)
    assert isinstance(events[-1], Warning) and events[-1].code == "after_terminal"


def test_another_dialects_events_as_session_events() -> None:
    events: list[Event] = [
        StreamStart(dialect="anthropic_messages", id="msg_1", model="claude-x"),
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="hmm"),
        SignatureDelta(index=0, delta="sig"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="Hi"),
        BlockEnd(index=1),
        BlockStart(index=2, kind="tool_call", id="toolu_1", name="lookup"),
        ToolInputDelta(index=2, delta='{"q":'),
        ToolInputDelta(index=2, delta="1}"),
        BlockEnd(index=2),
        UsageUpdate(usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4)),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="tool_use")),
    ]
    encoder = Encoder()
    assert encoder.encode_all(events) == sse(
        {
            "type": "agent.thinking",
            "id": "sevt_000000000000000000000001",
            "processed_at": "1970-01-01T00:00:00Z",
        },
        {
            "type": "agent.message",
            "id": "sevt_000000000000000000000002",
            "content": [{"type": "text", "text": "Hi"}],
            "processed_at": "1970-01-01T00:00:00Z",
        },
        {
            "type": "agent.custom_tool_use",
            "id": "toolu_1",
            "name": "lookup",
            "input": {"q": 1},
            "processed_at": "1970-01-01T00:00:00Z",
        },
        {
            "type": "session.usage",
            "id": "sevt_000000000000000000000003",
            "usage": {"input_tokens": 6, "output_tokens": 5, "cache_read_input_tokens": 4},
            "processed_at": "1970-01-01T00:00:00Z",
        },
        {
            "type": "session.status_idle",
            "id": "sevt_000000000000000000000004",
            "stop_details": None,
            "stop_reason": {"type": "requires_action", "event_ids": ["toolu_1"]},
            "processed_at": "1970-01-01T00:00:00Z",
        },
    )
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("reasoning_text", 2),
        ("event:signature-delta", 3),
    ]


def test_a_failed_foreign_stream_terminates_the_session() -> None:
    error = ErrorInfo(
        kind="overloaded", message="Overloaded", code="overloaded_error", retryable=True
    )
    encoder = Encoder()
    data = encoder.encode_all(
        [
            StreamStart(dialect="anthropic_messages"),
            ErrorEvent(error=error),
            Finish(status="failed", reason=FinishReason(unified="error"), error=error),
        ]
    )
    events = decode_events(data, DIALECT)
    assert [type(e).__name__ for e in events] == [
        "StreamStart",
        "ErrorEvent",
        "StatusUpdate",
        "Finish",
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None and finish.error.code == "overloaded_error"


def test_a_truncated_foreign_stream_stays_truncated() -> None:
    data = Encoder().encode_all(
        [
            StreamStart(dialect="openai_chat"),
            BlockStart(index=0, kind="text"),
            TextDelta(index=0, delta="Hi"),
            BlockEnd(index=0),
            Finish(status="truncated", reason=FinishReason(unified="error")),
        ]
    )
    finish = decode_events(data, DIALECT)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


SEND = {
    "events": [
        {"type": "system.message", "content": [{"type": "text", "text": "Be brief."}]},
        {"type": "user.message", "content": [{"type": "text", "text": "Hello"}]},
        {"type": "user.tool_confirmation", "tool_use_id": "sevt_a", "result": "allow"},
        {
            "type": "user.message",
            "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
        },
        {"type": "user.message", "content": [{"type": "text", "text": "And this?"}]},
    ]
}


def test_the_request_codec_reads_the_text_and_builds_the_body_back() -> None:
    request = parse_request(DIALECT, SEND, model="claude-sonnet-5-5")
    assert request.system == "Be brief."
    assert [m.content[0].text for m in request.messages] == ["Hello", "And this?"]  # type: ignore[union-attr]
    assert request.model == "claude-sonnet-5-5"
    native = build_request(DIALECT, request)
    assert native.body == SEND
    assert native.path == "/v1/sessions/{session_id}/events"
    request.messages[1].content[0].text = "Changed"  # type: ignore[union-attr]
    changed = build_request(DIALECT, request).body["events"]
    assert changed[4] == {"type": "user.message", "content": [{"type": "text", "text": "Changed"}]}
    assert changed[:4] == SEND["events"][:4]


def test_the_request_codec_on_a_session_create_body() -> None:
    body = {
        "agent": {"type": "agent", "id": "agent_1", "version": 3},
        "environment_id": "env_1",
        "initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "Go"}]}],
        "title": "A run",
    }
    request = parse_request(DIALECT, body)
    assert request.extra == {"agent": body["agent"], "environment_id": "env_1", "title": "A run"}
    assert request.last_user_text() == "Go"
    native = build_request(DIALECT, request)
    assert native.path == "/v1/sessions"
    assert native.body == body


def test_the_spec() -> None:
    spec = get_dialect(DIALECT)
    assert (spec.provider, spec.family, spec.framings) == ("anthropic", "agent_session", ("sse",))
    assert spec.errors.overloaded_status == 529 and spec.errors.request_id_field
    assert spec.auth.headers("k")["x-api-key"] == "k"
    assert spec.request_codec().family == "agent_session"
