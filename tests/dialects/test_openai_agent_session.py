"""The OpenAI Agents API session stream (``openai_agent_session``): exact events of the
fixtures and of small hand-made streams, the terminal rules, errors, the encoder on other
dialects' events, and the session-create request codec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polystream import StreamDecoder, get_dialect
from polystream.accumulate import accumulate
from polystream.dialects.openai_agent_session import Decoder, Encoder, rebuild
from polystream.dialects.openai_agent_session.binding import request
from polystream.errors import RemoteProtocolError, RequestError
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    Metadata,
    StatusUpdate,
    StreamStart,
    ToolInputDelta,
    Unknown,
    Usage,
)
from polystream.request_model import Message, Request, TextPart
from tests.helpers import FIXTURES, native_frames

DIALECT = "openai_agent_session"
HERE = FIXTURES / DIALECT
SID = "sess_1"
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 15,
}


def _decode(data: bytes, **options: Any) -> list[Event]:
    decoder = Decoder(**options)
    return decoder.feed(data) + decoder.close()


def _bare(events: list[Event]) -> list[Event]:
    """The events without their native payloads (``extra``)."""
    import msgspec

    return [msgspec.structs.replace(e, extra=None) for e in events]


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _session(kind: str, status: str, n: int, **more: Any) -> bytes:
    session = {"id": SID, "object": "agent.session", "status": status, **more}
    return _frame({"type": f"agent.session.{kind}", "event_id": f"e{n}", "session": session})


def _turn(kind: str, status: str, n: int, *, sub: str | None = None, **more: Any) -> bytes:
    turn = {"id": "turn_1", "object": "agent.session.turn", "status": status, "subagent_id": sub}
    payload = {
        "type": f"agent.session.turn.{kind}",
        "event_id": f"e{n}",
        "session_id": SID,
        "turn": turn,
        "turn_id": "turn_1",
        **more,
    }
    return _frame(payload)


# -- the fixtures --------------------------------------------------------------------------


def test_session_fixture_tool_call_result_handoff_and_finish() -> None:
    events = _decode((HERE / "session.sse").read_bytes())
    bare = _bare(events)
    assert bare[1] == StreamStart(
        dialect=DIALECT,
        id="sess_68e1c0a4d2f48190a7b3",
        model="gpt-5.4-mini",
        created=1764874800,
    )
    assert (
        BlockStart(
            index=1,
            kind="tool_call",
            id="fc_68e1c0a5301c8190f1",
            call_id="call_Qw3rTy81",
            name="get_weather",
        )
        in bare
    )
    assert ToolInputDelta(index=1, delta='{"city":"Paris","unit":"celsius"}') in bare
    assert StatusUpdate(status="requires_action") in bare
    assert (
        BlockStart(
            index=2,
            kind="tool_result",
            id="fco_68e1c0a6011c8190o1",
            call_id="call_Qw3rTy81",
            name="function_call_output",
            value="18°C, light rain",
        )
        in bare
    )
    handoff = [e for e in bare if isinstance(e, Metadata)]
    assert [m.name for m in handoff] == [
        "agent.session.subagent.created",
        "agent.session.subagent.closed",
    ]
    usage = Usage(
        input_tokens=2184,
        output_tokens=412,
        total_tokens=2596,
        cache_read_tokens=1536,
        reasoning_tokens=128,
        raw=json.loads((HERE / "session.sse").read_bytes().split(b"\n\n")[-3][6:])["usage"],
    )
    assert bare[-1] == Finish(
        status="completed", reason=FinishReason(unified="stop", raw="completed"), usage=usage
    )
    result = accumulate(events)
    assert result.text == "It's 18°C in Paris with light rain."
    assert result.reasoning == "Need the weather tool for Paris."
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"})
    ]


def test_error_fixture_ends_failed_with_the_error() -> None:
    events = _decode((HERE / "error.sse").read_bytes())
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    info = errors[0].error
    assert (info.kind, info.code, info.message, info.retryable) == (
        "server",
        "server_error",
        "The model failed to produce a response.",
        True,
    )
    assert (info.dialect, info.event_index) == (DIALECT, 7)
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason) == ("failed", FinishReason(unified="error", raw="failed"))
    assert finish.error == info


def test_truncated_fixture_ends_truncated() -> None:
    finish = _decode((HERE / "truncated.sse").read_bytes())[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated"
    assert finish.error is not None and finish.error.kind == "truncated"


def test_unknown_event_passes_through_and_back() -> None:
    data = (HERE / "unknown.sse").read_bytes()
    events = _decode(data)
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert [u.name for u in unknown] == ["agent.session.turn.progress_note"]
    assert json.loads(unknown[0].data)["note"] == "warming up"
    assert Encoder().encode_all(events) == data


@pytest.mark.parametrize("path", sorted(HERE.glob("*.sse")), ids=lambda p: p.name)
def test_round_trip_byte_exact(path: Any) -> None:
    data = path.read_bytes()
    events = _decode(data)
    encoder = Encoder()
    out = encoder.encode_all(events)
    if path.name == "truncated.sse":
        # (the cut line is not an event: what the decoder gave is written back whole)
        assert native_frames(out) == native_frames(data)
    else:
        assert out == data
    assert encoder.losses == []


def test_rebuild_is_the_last_session_snapshot() -> None:
    data = (HERE / "session.sse").read_bytes()
    last = json.loads(data.split(b"\n\n")[-2][6:])
    assert last["type"] == "agent.session.idle"
    assert rebuild(_decode(data)) == last["session"]
    assert get_dialect(DIALECT).rebuild(_decode(data))["status"] == "idle"


# -- the terminal rules --------------------------------------------------------------------


def test_idle_before_any_turn_is_a_status_and_the_stream_truncated() -> None:
    events = _decode(_session("created", "idle", 1) + _session("idle", "idle", 2))
    assert _bare(events)[1] == StatusUpdate(status="idle")
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"


def test_subagent_turn_end_is_not_the_end() -> None:
    data = (
        _turn("created", "queued", 1)
        + _turn("completed", "completed", 2, sub="subagent_9")
        + _session("idle", "idle", 3)
    )
    events = _decode(data)
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"


def test_cancelled_turn_ends_incomplete_cancelled_with_usage() -> None:
    data = (
        _turn("created", "queued", 1)
        + _turn("cancelled", "cancelled", 2, usage=USAGE)
        + _session("idle", "idle", 3)
    )
    finish = _decode(data)[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason) == (
        "incomplete",
        FinishReason(unified="cancelled", raw="cancelled"),
    )
    assert finish.usage == Usage(
        input_tokens=10,
        output_tokens=5,
        total_tokens=15,
        cache_read_tokens=4,
        reasoning_tokens=2,
        raw=USAGE,
    )


def test_budget_reached_without_a_turn_ends_incomplete_pause() -> None:
    finish = _decode(_session("budget_reached", "budget_reached", 1))[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason) == (
        "incomplete",
        FinishReason(unified="pause", raw="budget_reached"),
    )


def test_session_failed_without_an_error_event_names_the_session_error() -> None:
    finish = _decode(_session("failed", "failed", 1, error="sandbox lost"))[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error == ErrorInfo(
        kind="server", message="sandbox lost", dialect=DIALECT, event_index=0, byte_offset=0
    )


def test_event_after_the_terminal_is_a_warning() -> None:
    data = _session("failed", "failed", 1) + _session("idle", "idle", 2)
    events = _decode(data)
    assert isinstance(events[0], Finish)
    assert [type(e).__name__ for e in events[1:]] == ["StreamWarning"]


# -- malformed streams -----------------------------------------------------------------------


def test_strict_unknown_event_is_a_located_error() -> None:
    data = _session("created", "idle", 1) + _frame({"type": "agent.session.new", "event_id": "x"})
    with pytest.raises(RemoteProtocolError) as caught:
        _decode(data, strict=True)
    assert caught.value.dialect == DIALECT
    assert caught.value.event_index == 1
    assert caught.value.byte_offset == len(_session("created", "idle", 1))
    assert "unknown event type 'agent.session.new'" in caught.value.message


def test_done_of_an_item_never_added_is_a_protocol_error_event() -> None:
    item = {"id": "fc_9", "type": "function_call", "arguments": {}, "status": "completed"}
    data = _frame(
        {"type": "agent.session.turn.item.done", "event_id": "e1", "item": item, "output_index": 0}
    )
    events = _decode(data)
    assert isinstance(events[0], ErrorEvent)
    assert events[0].error.kind == "protocol"
    assert "turn.item.done for item 'fc_9', never added" in events[0].error.message
    with pytest.raises(RemoteProtocolError):
        _decode(data, strict=True)


def test_malformed_json_is_located() -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        _decode(b'data: {"type":\n\n', strict=True)
    assert (caught.value.dialect, caught.value.event_index) == (DIALECT, 0)


# -- other dialects' events ------------------------------------------------------------------


def test_a_responses_stream_written_as_a_session_stream() -> None:
    path = FIXTURES / "openai_responses" / "parallel_tool_calls.sse"
    decoder = StreamDecoder("openai_responses")
    events = decoder.feed(path.read_bytes()) + decoder.close()
    want = accumulate(events)
    encoder = Encoder()
    data = encoder.encode_all(events)
    back = _decode(data, strict=True)
    assert sum(isinstance(e, Finish) for e in back) == 1
    assert {loss.event_type for loss in encoder.losses} <= {
        "status",
        "metadata",
        "keep-alive",
        "citation",
        "block-start",
        "signature-delta",
    }
    got = accumulate(back)
    assert got.text == want.text
    assert got.tool_calls and [(c.name, c.arguments) for c in got.tool_calls] == [
        (c.name, c.arguments) for c in want.tool_calls
    ]
    assert (got.status, got.finish_reason) == (want.status, want.finish_reason) or (
        want.finish_reason is not None and want.finish_reason.unified == "tool_calls"
    )


def test_a_foreign_truncated_stream_gets_no_terminal_event() -> None:
    events: list[Event] = [
        StreamStart(dialect="openai_chat", id="c1", model="gpt-x"),
        BlockStart(index=0, kind="text"),
        Finish(status="truncated", reason=FinishReason(unified="error")),
    ]
    back = _decode(Encoder().encode_all(events))
    assert isinstance(back[-1], Finish) and back[-1].status == "truncated"


def test_foreign_block_kinds_the_stream_cannot_carry_are_losses() -> None:
    encoder = Encoder()
    encoder.encode_all(
        [
            StreamStart(dialect="gemini_generate", id="g", model="gemini-x"),
            BlockStart(index=0, kind="image"),
            BlockEnd(index=0),
            Finish(status="completed", reason=FinishReason(unified="stop")),
        ]
    )
    assert [(loss.what, loss.event_type) for loss in encoder.losses] == [
        ("image block", "block-start")
    ]


# -- the request codec ----------------------------------------------------------------------


def test_request_string_input_round_trip() -> None:
    body = {
        "environment": {"type": "none"},
        "agent": {"model": "gpt-5.4-mini", "instructions": "Be brief."},
        "input": "Hello",
        "metadata": {"app": "demo"},
        "stream": True,
    }
    parsed = request.parse(body)
    assert parsed.model == "gpt-5.4-mini"
    assert parsed.last_user_text() == "Hello"
    assert parsed.extra == {
        "environment": {"type": "none"},
        "agent": {"model": "gpt-5.4-mini", "instructions": "Be brief."},
        "metadata": {"app": "demo"},
    }
    built = request.build(parsed)
    assert built.path == "/agents/sessions"
    assert built.body == body


def test_request_message_list_round_trip_with_and_without_type() -> None:
    body = {
        "environment": {"type": "none"},
        "agent_id": "agent_1",
        "input": [
            {"content": [{"type": "input_text", "text": "a"}], "role": "user", "type": "message"},
            {"content": [{"type": "input_image", "image_url": "https://x/y.png"}], "role": "user"},
        ],
        "stream": False,
    }
    parsed = request.parse(body, model="gpt-5.4")
    assert parsed.model == "gpt-5.4"
    assert len(parsed.messages) == 2
    assert request.build(parsed).body == body


def test_request_from_another_family() -> None:
    built = request.build(
        Request(
            model="gpt-5.4-mini",
            system="Be brief.",
            messages=[Message(role="user", content=[TextPart(text="Hi")])],
        )
    )
    assert built.body == {
        "environment": {"type": "none"},
        "agent": {"model": "gpt-5.4-mini", "instructions": "Be brief."},
        "input": [
            {"content": [{"type": "input_text", "text": "Hi"}], "role": "user", "type": "message"}
        ],
        "stream": True,
    }


def test_request_errors_name_the_parameter() -> None:
    with pytest.raises(RequestError) as caught:
        request.parse({"input": [{"role": "assistant", "content": []}]})
    assert caught.value.param == "input[0]"
    with pytest.raises(RequestError) as caught:
        request.build(
            Request(model="m", messages=[Message(role="assistant", content=[TextPart(text="x")])])
        )
    assert caught.value.param == "messages[0].role"
