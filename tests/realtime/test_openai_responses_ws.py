"""The Responses WebSocket: each reply decoded as the same events over SSE would be,
lanes FIFO and side by side, the wrapped errors and the two safe-retry codes, steering
and injection, commands' exact messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from polystream import get_dialect
from polystream.dialects.openai_responses_ws.binding import Session
from polystream.errors import BufferLimitExceeded, LocalProtocolError, RemoteProtocolError
from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Lifetime,
    RetryAdvice,
    Steering,
    StreamStart,
    TextDelta,
    Unknown,
)

from .helpers import messages, payloads, run, where

IMPLICIT = {"implicit": True}


def as_sse(lines: list[str]) -> bytes:
    """The same events as the Responses API streams them over SSE."""
    return b"".join(
        b"event: " + json.loads(line)["type"].encode() + b"\ndata: " + line.encode() + b"\n\n"
        for line in lines
    )


def sse_events(lines: list[str]) -> list[Event]:
    decoder = get_dialect("openai_responses").decoder()
    return decoder.feed(as_sse(lines)) + decoder.close()


def test_each_lane_is_decoded_as_its_sse_stream() -> None:
    lines = messages("openai_responses_ws", "lanes")
    session = Session()
    session.send_text("first", lane="a")
    session.send_text("other", lane="b")
    routed = run(session, lines, close=True)
    streams: dict[int, list[Any]] = {}
    for r in routed:
        streams.setdefault(r.stream, []).append(r)
    assert sorted(streams) == [1, 2, 3]
    for number, lane, rid in ((1, "a", "resp_a1"), (2, "b", "resp_b1"), (3, "a", "resp_a2")):
        assert {(r.lane, r.response_id) for r in streams[number]} == {(lane, rid)}
    # Reply by reply, the events are exactly those of the SSE decoder on its messages.
    p = payloads(lines)
    by_reply = {1: [p[0], p[2], p[4], p[6], p[7], p[9], p[11], p[13], p[15], p[16]]}
    by_reply[2] = [p[1], p[3], p[5], p[8], p[10], p[12], p[14]]
    by_reply[3] = p[17:22]
    for number, natives in by_reply.items():
        texts = [json.dumps(n, separators=(",", ":")) for n in natives]
        assert [r.event for r in streams[number]] == sse_events(texts)
    assert session.last_response_id("a") == "resp_a2"
    assert session.last_response_id("b") == "resp_b1"
    assert session.pending("a") == session.pending("b") == 0
    assert session.lanes == ["a", "b"]


def test_lanes_are_fifo_and_requests_map_to_replies_in_order() -> None:
    session = Session()
    session.create_response(input="one", lane="L")
    session.create_response(input="two", lane="L")
    assert session.pending("L") == 2

    def reply(rid: str) -> list[str]:
        resp = {"id": rid, "status": "in_progress", "output": []}
        done = {"id": rid, "status": "completed", "output": []}
        return [
            json.dumps(
                {
                    "type": "response.created",
                    "sequence_number": 0,
                    "response": resp,
                    "stream_id": "L",
                }
            ),
            json.dumps(
                {
                    "type": "response.completed",
                    "sequence_number": 1,
                    "response": done,
                    "stream_id": "L",
                }
            ),
        ]

    first = run(session, reply("resp_1"))
    assert session.pending("L") == 1 and session.active_response_id("L") is None
    second = run(session, reply("resp_2")[:1])
    assert session.pending("L") == 0 and session.active_response_id("L") == "resp_2"
    assert [(r.stream, r.response_id) for r in first + second] == [
        (1, "resp_1"),
        (1, "resp_1"),
        (2, "resp_2"),
    ]


def test_an_error_before_any_reply_fails_the_oldest_request_and_advises_a_retry() -> None:
    lines = messages("openai_responses_ws", "errors")
    p = payloads(lines)
    session = Session()
    session.create_response(input="continue", previous_response_id="resp_gone")
    session.create_response(input="again", lane="x")
    got = where(run(session, lines, close=True))
    gone = ErrorInfo(
        kind="not_found",
        message="Previous response with id 'resp_gone' not found.",
        code="previous_response_not_found",
        http_status=400,
        raw=p[0]["error"],
    )
    # Retryable: the reply had begun but delivered no output yet.
    server = ErrorInfo(
        kind="server",
        message="The server had an error while processing your request.",
        retryable=True,
        code="server_error",
        http_status=500,
        raw=p[2]["error"],
    )
    failed = ErrorInfo(
        kind="server",
        message="The server had an error while processing your request.",
        retryable=True,
        code="server_error",
        raw=p[3]["response"]["error"],
    )
    limit = ErrorInfo(
        kind="timeout",
        message=p[4]["error"]["message"],
        retryable=True,
        code="websocket_connection_limit_reached",
        http_status=400,
        raw=p[4]["error"],
    )
    advice = RetryAdvice(
        code="previous_response_not_found", replay="full_history", new_connection=True, safe=True
    )
    no_seq2 = {k: v for k, v in p[2].items() if k != "sequence_number"}
    no_seq3 = {k: v for k, v in p[3].items() if k != "sequence_number"}
    assert [g[:3] for g in got] == [
        (1, None, None),
        (1, None, None),
        (1, None, None),
        (2, "x", "resp_e2"),
        (2, "x", "resp_e2"),
        (2, "x", "resp_e2"),
        (0, None, None),
        (0, None, None),
        (0, None, None),
    ]
    events = [g[3] for g in got]
    assert events[0] == ErrorEvent(error=gone, extra=p[0])
    assert events[1] == advice
    assert events[2] == Finish(
        status="failed",
        reason=FinishReason(unified="error", raw="error"),
        error=gone,
        extra=IMPLICIT,
    )
    assert isinstance(events[3], StreamStart) and events[3].id == "resp_e2"
    assert events[4] == ErrorEvent(error=server, cursor=1, extra=no_seq2)
    assert events[5] == Finish(
        status="failed",
        reason=FinishReason(unified="error", raw="failed"),
        error=failed,
        cursor=2,
        extra=no_seq3,
    )
    assert events[6] == Lifetime(
        state="limit_reached",
        reason="websocket_connection_limit_reached",
        max_duration=3600.0,
        message=limit.message,
        error=limit,
        extra=IMPLICIT,
    )
    assert events[7] == ErrorEvent(error=limit, extra=p[4])
    assert events[8] == RetryAdvice(
        code="websocket_connection_limit_reached",
        replay="full_history",
        new_connection=True,
        safe=True,
    )


def test_a_reply_that_errored_ends_when_the_lane_s_next_reply_starts() -> None:
    session = Session()
    created = {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "r1", "status": "in_progress", "output": []},
    }
    error = {
        "type": "error",
        "status": 503,
        "sequence_number": 1,
        "error": {"type": "server_error", "code": None, "message": "overloaded"},
    }
    nxt = {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "r2", "status": "in_progress", "output": []},
    }
    got = where(run(session, [json.dumps(m) for m in (created, error, nxt)]))
    # The error's type says what it is (the status would say only for an unknown type).
    info = ErrorInfo(
        kind="server",
        message="overloaded",
        retryable=True,
        code="server_error",
        http_status=503,
        raw=error["error"],
    )
    assert [g[:3] for g in got] == [
        (1, None, "r1"),
        (1, None, "r1"),
        (1, None, "r1"),
        (2, None, "r2"),
    ]
    assert got[1][3] == ErrorEvent(
        error=info, cursor=1, extra={k: v for k, v in error.items() if k != "sequence_number"}
    )
    assert got[2][3] == Finish(
        status="failed",
        reason=FinishReason(unified="error", raw="error"),
        error=info,
        extra=IMPLICIT,
    )


def test_steering_and_injection_are_typed() -> None:
    lines = messages("openai_responses_ws", "steering")
    p = payloads(lines)
    got = where(run(Session(), lines))
    steering = [g for g in got if isinstance(g[3], Steering)]
    assert steering == [
        (
            0,
            None,
            "resp_s1",
            Steering(
                action="steer",
                state="accepted",
                id="steer_1",
                response_id="resp_s1",
                cursor=2,
                extra=p[2],
            ),
        ),
        (
            0,
            None,
            "resp_s2",
            Steering(
                action="steer",
                state="pending",
                id="steer_2",
                response_id="resp_s2",
                required_input=p[6]["required_input"],
                reason="waiting_for_required_input",
                cursor=2,
                extra=p[6],
            ),
        ),
        (
            0,
            None,
            "resp_s2",
            Steering(
                action="steer",
                state="failed",
                response_id="resp_s2",
                input="and in French?",
                error=ErrorInfo(
                    kind="invalid_request",
                    message="Response resp_s2 is already completed.",
                    code="response_already_completed",
                    raw=p[7]["error"],
                ),
                cursor=3,
                extra=p[7],
            ),
        ),
        (
            0,
            None,
            "resp_s2",
            Steering(action="inject", state="created", response_id="resp_s2", cursor=4, extra=p[8]),
        ),
        (
            0,
            None,
            "resp_zz",
            Steering(
                action="inject",
                state="failed",
                response_id="resp_zz",
                input=p[9]["input"],
                error=ErrorInfo(
                    kind="invalid_request",
                    message="No response resp_zz on this connection.",
                    code="response_not_found",
                    raw=p[9]["error"],
                ),
                cursor=5,
                extra=p[9],
            ),
        ),
    ]
    # The steered reply ended incomplete; its automatic successor is a reply of its own.
    finishes = [(g[0], g[2], g[3].reason) for g in got if isinstance(g[3], Finish)]
    assert finishes == [
        (1, "resp_s1", FinishReason(unified="other", raw="steered")),
        (2, "resp_s2", FinishReason(unified="stop", raw="completed")),
    ]


def test_unknown_and_keepalive_messages_outside_a_reply_are_the_session_s() -> None:
    session = Session()
    text = '{"type":"response.brand_new","stream_id":"q","v":1}'
    [unknown] = session.feed(text)
    assert (unknown.stream, unknown.lane, unknown.event) == (
        0,
        "q",
        Unknown(name="response.brand_new", data=text),
    )
    [ping] = session.feed('{"type":"keepalive"}')
    assert ping.event == KeepAlive(name="keepalive", extra={"type": "keepalive"})
    assert session.pending("q") == 0  # no reply was opened for them
    with pytest.raises(RemoteProtocolError, match="unknown message type") as caught:
        Session(strict=True).feed(text)
    assert caught.value.event_index == 0


def test_protocol_errors_and_bounds_name_the_message_index() -> None:
    session = Session(max_lanes=1)
    [first] = session.feed('{"type":"response.created","stream_id":7}')
    assert isinstance(first.event, ErrorEvent)
    assert (first.event.error.message, first.event.error.event_index) == (
        "stream_id is not a string",
        0,
    )
    created = (
        '{"type":"response.created","sequence_number":0,"response":{"id":"r"},"stream_id":"%s"}'
    )
    session.feed(created % "a")
    [over] = session.feed(created % "b")
    assert isinstance(over.event, ErrorEvent)
    assert over.event.error.message == "more than max_lanes=1 lanes (lane 'b')"
    assert over.event.error.event_index == 2
    with pytest.raises(BufferLimitExceeded) as limit:
        Session(max_lanes=0, strict=True).feed(created % "a")
    assert limit.value.event_index == 0
    # A malformed event inside a reply is located by the shared decoder, at the message.
    strict = Session(strict=True)
    strict.feed(created % "a")
    with pytest.raises(RemoteProtocolError) as caught:
        strict.feed(
            '{"type":"response.output_text.delta","sequence_number":1,"item_id":"nope","output_index":0,"content_index":0,"delta":"x","stream_id":"a"}'
        )
    assert caught.value.event_index == 1


def test_close_ends_running_replies_and_requests_never_answered() -> None:
    session = Session()
    session.send_text("a", lane="one")
    session.send_text("b", lane="two")
    session.feed(
        '{"type":"response.created","sequence_number":0,"response":{"id":"r1"},"stream_id":"one"}'
    )
    got = where(session.close())
    truncated = ErrorInfo(
        kind="truncated",
        message="stream ended without the openai_responses terminal event",
        retryable=True,
        dialect="openai_responses",
        event_index=0,
    )
    never = ErrorInfo(
        kind="truncated",
        message="the connection closed before the response began",
        retryable=True,
        dialect="openai_responses_ws",
    )
    assert got == [
        (
            1,
            "one",
            "r1",
            Finish(status="truncated", reason=FinishReason(unified="error"), error=truncated),
        ),
        (
            2,
            "two",
            None,
            Finish(
                status="truncated",
                reason=FinishReason(unified="error"),
                error=never,
                extra=IMPLICIT,
            ),
        ),
    ]


# -- commands -------------------------------------------------------------------------------


def test_commands_exact_messages() -> None:
    s = Session()
    assert s.configure(model="gpt-5.4-mini", store=False, tools=[]) == []
    assert s.create_response(input="Hi") == [
        '{"type":"response.create","model":"gpt-5.4-mini","store":false,"tools":[],"input":"Hi"}'
    ]
    assert s.create_response(
        {"input": "x", "store": True}, lane="a", previous_response_id="resp_0", max_output_tokens=5
    ) == [
        '{"type":"response.create","model":"gpt-5.4-mini","store":true,"tools":[],"input":"x","max_output_tokens":5,"previous_response_id":"resp_0","stream_id":"a"}'
    ]
    assert s.warm_up(lane="w", instructions="Be brief.") == [
        '{"type":"response.create","model":"gpt-5.4-mini","store":false,"tools":[],'
        '"instructions":"Be brief.","generate":false,"stream_id":"w"}'
    ]
    assert s.pending() == 1 and s.pending("a") == 1 and s.pending("w") == 1
    assert s.steer("and in French?", previous_response_id="resp_1") == [
        '{"type":"response.steer","previous_response_id":"resp_1","input":"and in French?"}'
    ]
    item = {"type": "function_call_output", "call_id": "c", "output": "1"}
    assert s.inject([item], response_id="resp_1") == [
        '{"type":"response.inject","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":"1"}]}'
    ]
    assert s.append_item(item, response_id="resp_1") == s.inject([item], response_id="resp_1")
    for bad, message in (
        ({"stream": True}, "implicit"),
        ({"background": True}, "not supported"),
        ({"stream_id": "z"}, "lane="),
        ({"type": "x"}, "set by the session"),
    ):
        with pytest.raises(LocalProtocolError, match=message):
            s.create_response(bad)
    for unsupported in (
        lambda: s.send_audio(b"\x00"),
        s.cancel,
        lambda: s.truncate("i", 1),
    ):
        with pytest.raises(LocalProtocolError, match="openai_responses_ws has no"):
            unsupported()


def test_send_text_and_tool_results_continue_the_lane_s_last_response() -> None:
    s = Session()
    s.feed('{"type":"response.created","sequence_number":0,"response":{"id":"resp_7"}}')
    s.feed(
        '{"type":"response.completed","sequence_number":1,"response":{"id":"resp_7","status":"completed"}}'
    )
    assert s.send_text("next") == [
        '{"type":"response.create","input":"next","previous_response_id":"resp_7"}'
    ]
    assert s.tool_result("call_1", "42", chain=False) == [
        '{"type":"response.create","input":[{"type":"function_call_output","call_id":"call_1","output":"42"}]}'
    ]
    assert s.tool_result("call_1", "42", lane="other") == [
        '{"type":"response.create","input":[{"type":"function_call_output","call_id":"call_1","output":"42"}],"stream_id":"other"}'
    ]


def test_sent_queues_a_relayed_request_on_its_lane() -> None:
    s = Session(max_pending=1)
    s.sent('{"type":"response.create","stream_id":"r","input":"x"}')
    s.sent({"type": "response.steer", "previous_response_id": "p", "input": "y"})
    assert s.pending("r") == 1 and s.pending() == 0
    with pytest.raises(LocalProtocolError, match="max_pending=1"):
        s.sent('{"type":"response.create","stream_id":"r"}')
    with pytest.raises(LocalProtocolError, match="JSON object with a type"):
        s.sent("[1]")


def test_text_delta_of_a_lane_carries_its_stream_id_in_extra() -> None:
    lines = messages("openai_responses_ws", "lanes")
    deltas = [r.event for r in run(Session(), lines) if isinstance(r.event, TextDelta)]
    assert [d.extra["stream_id"] for d in deltas if d.extra] == ["a", "a", "a"]
