"""xAI Responses over a WebSocket: each reply an ``xai_responses`` stream, event for
event what the same events give over SSE; one lane; no steering; the commands."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polystream import get_dialect
from polystream.dialects.xai_responses_ws.binding import Session
from polystream.errors import LocalProtocolError
from polystream.events import ErrorEvent, ErrorInfo, Event, Finish, FinishReason, StreamStart
from polystream.realtime import SOCKET_SPECS, open_session

from .helpers import FIXTURES, messages, payloads, run

IMPLICIT = {"implicit": True}


def as_sse(lines: list[str]) -> bytes:
    return b"".join(
        b"event: " + json.loads(line)["type"].encode() + b"\ndata: " + line.encode() + b"\n\n"
        for line in lines
    )


def sse_events(data: bytes) -> list[Event]:
    decoder = get_dialect("xai_responses").decoder()
    return decoder.feed(data) + decoder.close()


def test_each_reply_is_decoded_as_its_xai_sse_stream() -> None:
    lines = messages("xai_responses_ws", "turns")
    session = open_session("xai_responses_ws")
    assert isinstance(session, Session)
    session.configure(model="grok-4.3", store=False)
    session.send_text("Say OK")
    routed = run(session, lines, close=True)
    streams: dict[int, list[Any]] = {}
    for r in routed:
        streams.setdefault(r.stream, []).append(r)
    assert sorted(streams) == [1, 2]
    cut = next(i for i, p in enumerate(payloads(lines)) if p["type"] == "response.completed") + 1
    rebuild = get_dialect("xai_responses").rebuild
    for number, part, fixture in (
        (1, lines[:cut], "skeleton"),
        (2, lines[cut:], "function_call_one_delta"),
    ):
        events = [r.event for r in streams[number]]
        assert events == sse_events(as_sse(part))
        assert events[0] == StreamStart(
            dialect="xai_responses",
            id=json.loads(part[0])["response"]["id"],
            model="grok-4.3",
            created=0,
            cursor=0,
            extra=events[0].extra,
        )
        # The reply rebuilds to the same Response as the SSE fixture it came from.
        original = sse_events((FIXTURES / "xai_responses" / f"{fixture}.sse").read_bytes())
        assert rebuild(events) == rebuild(original)
        assert {(r.lane, r.response_id) for r in streams[number]} == {(None, events[0].id)}
    assert session.last_response_id() == json.loads(lines[cut])["response"]["id"]


def test_requests_chain_on_the_one_lane() -> None:
    session = Session()
    session.configure(model="grok-4.3")
    assert session.warm_up(instructions="Be terse.") == [
        '{"type":"response.create","model":"grok-4.3","instructions":"Be terse.","generate":false}'
    ]
    first = "00000001-5b1e-4c2a-9d7f-3e8a1b2c4d01"
    for message in messages("xai_responses_ws", "turns")[:2]:
        session.feed(message)
    assert session.active_response_id() == first
    assert session.tool_result("call_1", "42", previous_response_id=first) == [
        json.dumps(
            {
                "type": "response.create",
                "model": "grok-4.3",
                "input": [{"type": "function_call_output", "call_id": "call_1", "output": "42"}],
                "previous_response_id": first,
            },
            separators=(",", ":"),
        )
    ]
    assert session.pending() == 1


def test_one_lane_and_no_steering() -> None:
    spec = SOCKET_SPECS["xai_responses_ws"]
    assert (spec.provider, spec.url, spec.lanes, spec.max_duration) == (
        "xai",
        "wss://api.x.ai/v1/responses",
        1,
        None,
    )
    session = Session()
    session.send_text("hi")
    with pytest.raises(LocalProtocolError) as caught:
        session.send_text("other", lane="b")
    assert "max_lanes=1" in caught.value.message
    for refused in (
        lambda: session.steer("more", previous_response_id="r"),
        lambda: session.inject([], response_id="r"),
        lambda: session.append_item({"type": "message"}, response_id="r"),
        lambda: session.create_response(stream=True),
    ):
        with pytest.raises(LocalProtocolError) as caught:
            refused()
        assert caught.value.dialect == "xai_responses_ws"


def test_an_error_before_the_reply_fails_the_request() -> None:
    session = Session()
    session.send_text("hi")
    error = {
        "type": "error",
        "status": 400,
        "error": {"type": "invalid_request_error", "code": None, "message": "Model not found"},
    }
    events = [r.event for r in session.feed(json.dumps(error))]
    info = ErrorInfo(
        kind="invalid_request",
        message="Model not found",
        code="invalid_request_error",
        http_status=400,
        raw=error["error"],
    )
    assert events == [
        ErrorEvent(error=info, extra=error),
        Finish(
            status="failed",
            reason=FinishReason(unified="error", raw="error"),
            error=info,
            extra=IMPLICIT,
        ),
    ]
    assert session.pending() == 0
    assert session.close() == []
