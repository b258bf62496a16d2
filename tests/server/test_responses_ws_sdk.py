"""The official openai SDK's Responses WebSocket client (``client.responses.connect``)
against the emulator over loopback: a reply is the SSE stream's events, one per message;
warm-up, chaining, lanes, and the wrapped errors. polystream's own Responses WebSocket
session reads the same messages."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from polystream.decoding import StreamDecoder
from polystream.events import ErrorEvent, Finish, RetryAdvice, StreamStart, TextDelta
from polystream.realtime import open_session
from polystream.scenario import Emulator
from polystream.server import ServerThread
from polystream.wire.sse import ServerSentEvent, SSEDecoder
from tests.server.support import track

MODEL = "gpt-5.4-mini"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def oai(server: ServerThread) -> openai.OpenAI:
    return track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1", max_retries=0))


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerThread]:
    with ServerThread(Emulator()) as server:
        yield server


def until_end(conn: Any, count: int = 1) -> list[dict[str, Any]]:
    """Read messages until ``count`` replies ended (a terminal event or an error)."""
    out: list[dict[str, Any]] = []
    while count:
        message = json.loads(conn.recv_bytes())
        out.append(message)
        if message["type"] in TERMINAL:
            count -= 1
    return out


def session_text(messages: list[dict[str, Any]]) -> tuple[str, list[Any]]:
    session = open_session("openai_responses_ws", strict=True)
    events = []
    for message in messages:
        events += [routed.event for routed in session.feed(json.dumps(message))]
    events += [routed.event for routed in session.close()]
    return "".join(e.delta for e in events if isinstance(e, TextDelta)), events


def test_a_reply_is_the_sse_streams_events_one_per_message(plain: ServerThread) -> None:
    client = oai(plain)
    with client.responses.connect() as conn:
        conn.response.create(model=MODEL, input="Hello there")
        messages = until_end(conn)
    # The same request over HTTP gives the same events as SSE (ids aside).
    with client.responses.with_streaming_response.create(
        model=MODEL, input="Hello there", stream=True
    ) as response:
        body = response.read()
    decoder = SSEDecoder()
    sse = [
        json.loads(frame.data)
        for frame in decoder.feed(body) + decoder.close()
        if isinstance(frame, ServerSentEvent)
    ]
    assert [m["type"] for m in messages] == [m["type"] for m in sse]
    assert [m["type"] for m in messages][:3] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert [m["sequence_number"] for m in messages] == list(range(len(messages)))
    deltas = [m["delta"] for m in messages if m["type"] == "response.output_text.delta"]
    assert deltas == [m["delta"] for m in sse if m["type"] == "response.output_text.delta"]
    final = messages[-1]["response"]
    assert (final["status"], final["model"], final["previous_response_id"]) == (
        "completed",
        MODEL,
        None,
    )
    expected = f"Emulated reply from {MODEL}. You said: Hello there"
    assert final["output"][0]["content"][0]["text"] == expected
    text, events = session_text(messages)
    assert text == expected
    # ... and the SSE decoder reads the same events from the socket's messages.
    payload = b"".join(f"data: {json.dumps(m)}\n\n".encode() for m in messages)
    decoded = StreamDecoder("openai_responses")
    sse_events = decoded.feed(payload) + decoded.close()
    assert "".join(e.delta for e in sse_events if isinstance(e, TextDelta)) == expected
    finish = events[-1]
    assert isinstance(finish, Finish) and (finish.status, finish.reason.unified) == (
        "completed",
        "stop",
    )


def test_warm_up_then_continue_from_it(plain: ServerThread) -> None:
    with oai(plain).responses.connect() as conn:
        conn.response.create(model=MODEL, instructions="Be brief.", generate=False)
        warm = until_end(conn)
        warm_id = warm[0]["response"]["id"]
        conn.response.create(model=MODEL, input="Hi", previous_response_id=warm_id)
        turn = until_end(conn)
    assert [m["type"] for m in warm] == [
        "response.created",
        "response.in_progress",
        "response.completed",
    ]
    done = warm[-1]["response"]
    assert (done["output"], done["usage"]["output_tokens"]) == ([], 0)
    assert turn[0]["response"]["previous_response_id"] == warm_id
    assert turn[-1]["response"]["previous_response_id"] == warm_id
    assert turn[-1]["response"]["status"] == "completed"


def test_chained_turns_and_a_response_not_kept(plain: ServerThread) -> None:
    with oai(plain).responses.connect() as conn:
        conn.response.create(model=MODEL, input="one", store=False)
        first = until_end(conn)[-1]["response"]["id"]
        conn.response.create(model=MODEL, input="two", store=False, previous_response_id=first)
        second = until_end(conn)[-1]["response"]
        # Without storage the connection keeps only its most recent response.
        conn.response.create(model=MODEL, input="three", previous_response_id=first)
        refused = until_end(conn)
        conn.response.create(model=MODEL, input="gone", previous_response_id="resp_gone")
        unknown = until_end(conn)
    assert (second["previous_response_id"], second["store"]) == (first, False)
    assert refused == [
        {
            "type": "error",
            "status": 400,
            "error": {
                "type": "invalid_request_error",
                "code": "previous_response_not_found",
                "message": f"Previous response with id '{first}' not found.",
                "param": "previous_response_id",
            },
        }
    ]
    assert unknown[0]["error"]["message"] == "Previous response with id 'resp_gone' not found."
    _, events = session_text(unknown)
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert (error.error.kind, error.error.code, error.error.http_status) == (
        "not_found",
        "previous_response_not_found",
        400,
    )
    assert any(isinstance(e, RetryAdvice) and e.replay == "full_history" for e in events)


def test_lanes_echo_their_stream_id(plain: ServerThread) -> None:
    with oai(plain).responses.connect() as conn:
        conn.send_raw(
            json.dumps({"type": "response.create", "model": MODEL, "input": "a", "stream_id": "a"})
        )
        conn.send_raw(
            json.dumps({"type": "response.create", "model": MODEL, "input": "b", "stream_id": "b"})
        )
        messages = until_end(conn, 2)
    by_lane = {lane: [m for m in messages if m.get("stream_id") == lane] for lane in "ab"}
    assert len(by_lane["a"]) + len(by_lane["b"]) == len(messages)
    for lane in "ab":
        texts = [m["delta"] for m in by_lane[lane] if m["type"] == "response.output_text.delta"]
        assert "".join(texts) == f"Emulated reply from {MODEL}. You said: {lane}"
    session = open_session("openai_responses_ws", strict=True)
    starts = []
    for message in messages:
        for routed in session.feed(json.dumps(message)):
            if isinstance(routed.event, StreamStart):
                starts.append(routed.lane)
    assert starts == ["a", "b"]


def test_unknown_model_and_http_error_are_wrapped_errors(
    serve: Callable[..., ServerThread],
) -> None:
    server = serve([{"match": {"contains": "busy"}, "faults": {"http_error": {"status": 429}}}])
    with oai(server).responses.connect() as conn:
        conn.response.create(model="not-a-model", input="hi")
        unknown = until_end(conn)
        conn.response.create(model=MODEL, input="busy")
        limited = until_end(conn)
    assert unknown == [
        {
            "type": "error",
            "status": 404,
            "error": {
                "type": "invalid_request_error",
                "code": "model_not_found",
                "message": (
                    "The model `not-a-model` does not exist or you do not have access to it."
                ),
                "param": "model",
            },
        }
    ]
    assert limited[0]["status"] == 429
    assert limited[0]["error"]["type"] == "requests"
    assert limited[0]["error"]["code"] == "rate_limit_exceeded"


def test_in_band_error_then_response_failed(serve: Callable[..., ServerThread]) -> None:
    # As over SSE: the error follows the unified event during which the third message
    # went (the text block's start: its item and its part), the open blocks are ended.
    server = serve([{"faults": {"error": {"after": 3, "kind": "overloaded", "message": "Busy"}}}])
    with oai(server).responses.connect() as conn:
        conn.response.create(model=MODEL, input="hi")
        messages = until_end(conn, 2)
    kinds = [m["type"] for m in messages]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "error",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    assert messages[4] == {
        "type": "error",
        "status": 503,
        "sequence_number": 4,
        "error": {
            "type": "server_error",
            "code": "service_unavailable",
            "message": "Busy",
            "param": None,
        },
    }
    _, events = session_text(messages)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
