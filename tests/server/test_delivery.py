"""Delivery over real loopback HTTP (not httpx's ASGITransport, which buffers): events
leave as they are produced, keep-alives fill silences, odd chunk boundaries and
truncations reach the client as planned."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import httpx
import openai
import pytest

from polystream.decoding import StreamDecoder
from polystream.events import KeepAlive
from polystream.server import ServerThread
from polystream.wire.sse import ServerSentEvent, SSEDecoder
from tests.server.support import require, track

CHAT = {"model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def arrivals(response: httpx.Response) -> list[tuple[float, ServerSentEvent]]:
    """Each SSE event with the time it arrived at the client."""
    decoder = SSEDecoder()
    out = []
    for chunk in response.iter_raw():
        now = time.perf_counter()
        out.extend((now, e) for e in decoder.feed(chunk) if isinstance(e, ServerSentEvent))
    return out


def test_each_event_leaves_when_produced(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve([{"reply": {"text": "one two three four"}, "timing": {"delay": 0.2}}])
    started = time.perf_counter()
    with httpx.stream("POST", server.base_url + "/openai/v1/chat/completions", json=CHAT) as r:
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["content-type"] == "text/event-stream"
        seen = arrivals(r)
    assert len(seen) >= 6
    first, last = seen[0][0] - started, seen[-1][0] - started
    assert first < last - 0.2 * (len(seen) - 1) * 0.8  # the first did not wait for the rest
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(seen))
    assert gaps[len(gaps) // 2] > 0.15  # one by one, not in bursts
    assert seen[-1][1].data == "[DONE]"


def test_time_to_first_event_and_speed(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve([{"timing": {"first_event": 1.0, "delay": 0.1, "speed": 2.0}}])
    started = time.perf_counter()
    with httpx.stream("POST", server.base_url + "/openai/v1/chat/completions", json=CHAT) as r:
        seen = arrivals(r)
    assert 0.45 <= seen[0][0] - started < 0.95  # 1 s at double speed


def test_keepalive_comments_fill_the_silence(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve([{"timing": {"first_event": 0.45}, "faults": {"keepalive": 0.1}}])
    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 9,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = httpx.post(server.base_url + "/anthropic/v1/messages", json=body)
    assert response.content.startswith(b": keep-alive\n\n" * 4 + b"event: message_start")
    events = StreamDecoder("anthropic_messages").feed(response.content)
    assert sum(isinstance(e, KeepAlive) for e in events) == 4


def test_odd_chunk_boundaries_still_decode(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    faults = {"split_utf8": True, "line_endings": "crlf", "cr_at_chunk_end": True, "chunk_size": 7}
    server = serve([{"reply": {"text": "héllo wörld — ünïcode ✓"}, "faults": faults}])
    sdk = track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1"))
    chunks = list(
        sdk.chat.completions.create(
            model="gpt-5.4-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "héllo wörld — ünïcode ✓"
    )
    raw = httpx.post(server.base_url + "/openai/v1/chat/completions", json=CHAT).content
    assert b"\r\n\r\n" in raw and b"\n\n" not in raw.replace(b"\r\n", b"")
    decoder = StreamDecoder("openai_chat")
    decoder.feed(raw)
    decoder.close()
    assert decoder.result().text == "héllo wörld — ünïcode ✓"


def test_drop_at_byte_and_missing_terminal(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve(
        [
            {"match": {"contains": "drop"}, "faults": {"drop_at_byte": 123}},
            {"match": {"contains": "cut"}, "faults": {"no_terminal": True}},
        ]
    )
    url = server.base_url + "/openai/v1/chat/completions"
    received = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", url, json={**CHAT, "messages": [{"role": "user", "content": "drop"}]}
        ) as response,
    ):
        for chunk in response.iter_raw():
            received += chunk
    assert len(received) == 123
    cut = httpx.post(url, json={**CHAT, "messages": [{"role": "user", "content": "cut"}]})
    assert cut.status_code == 200
    assert b"[DONE]" not in cut.content
    decoder = StreamDecoder("openai_chat")
    decoder.feed(cut.content)
    decoder.close()
    assert decoder.result().status == "truncated"
    assert server.stats.dropped == 1


def test_replay_capture_in_another_dialect(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages", "openai_responses")
    from polystream.scenario import Emulator, parse_scenarios

    # A capture recorded in one dialect (here: rendered by the Anthropic encoder)...
    source = ServerThread(
        Emulator(
            parse_scenarios(
                [
                    {
                        "reply": {
                            "reasoning": "Thinking it over.",
                            "text": "Replayed answer.",
                            "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}],
                        }
                    }
                ]
            )
        )
    )
    with source:
        capture = httpx.post(
            source.base_url + "/anthropic/v1/messages",
            json={
                "model": "claude-sonnet-5-5",
                "max_tokens": 9,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        ).content
    # ...replays in the dialect the client asks for.
    server = serve(replays=[capture])
    sdk = track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1"))
    with sdk.responses.stream(model="gpt-5.4-mini", input="anything") as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output_text == "Replayed answer."


def test_citations_and_the_loss_header(serve: Callable[..., ServerThread]) -> None:
    require("openai_responses", "anthropic_messages")
    citation = {
        "type": "url_citation",
        "url": "https://example.com/a",
        "title": "A",
        "start_index": 0,
        "end_index": 3,
    }
    server = serve([{"reply": {"text": "See the docs.", "citations": [citation]}}])
    sdk = track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1"))
    with sdk.responses.stream(model="gpt-5.4-mini", input="q") as stream:
        final = stream.get_final_response()
    (message,) = final.output
    assert message.type == "message"
    annotations = message.content[0].annotations  # type: ignore[union-attr]
    assert [a.model_dump() for a in annotations] == [citation]
    # What a target cannot carry is reported in a header, streamed or not.
    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "q"}],
    }
    url = server.base_url + "/anthropic/v1/messages"
    streamed = httpx.post(url, json={**body, "stream": True})
    unary = httpx.post(url, json=body)
    assert "citation" in streamed.headers["x-polystream-losses"].split(", ")
    assert "citation" in unary.headers["x-polystream-losses"].split(", ")
    assert unary.json()["content"][0]["text"] == "See the docs."
    responses = httpx.post(
        server.base_url + "/openai/v1/responses", json={"model": "gpt-5", "input": "q"}
    )
    assert "x-polystream-losses" not in responses.headers  # Responses carries it all
