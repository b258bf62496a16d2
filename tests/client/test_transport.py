"""The client over an injected httpx transport: request shape, headers captured on
the stream (request id, rate limits), and typed errors with the request id."""

from __future__ import annotations

import asyncio
import json

import httpx
import msgspec
import pytest

from polystream import StreamDecoder
from polystream.client import AsyncClient, Client
from polystream.errors import APIStatusError
from polystream.retry import RetryPolicy
from tests.helpers import FIXTURES

ANTHROPIC = sorted((FIXTURES / "anthropic_messages").glob("*.sse"))
SKELETON = next(p for p in ANTHROPIC if p.name.startswith("skeleton"))


def test_request_shape_and_captured_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            headers={
                "content-type": "text/event-stream",
                "request-id": "req_0123",
                "anthropic-ratelimit-requests-remaining": "49",
                "anthropic-ratelimit-tokens-reset": "2026-11-30T00:00:00Z",
            },
            content=SKELETON.read_bytes(),
        )

    with Client(api_key="sk-test", transport=httpx.MockTransport(handler)) as client:
        stream = client.stream(
            "anthropic_messages",
            model="claude-haiku-4-5",
            prompt="Reply with OK.",
            max_tokens=32,
            system="Be brief.",
        )
        result = stream.result()
    assert result.status == "completed"
    request = seen[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(request.content) == {
        "model": "claude-haiku-4-5",
        "max_tokens": 32,
        "stream": True,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Reply with OK."}]}],
    }
    assert stream.call.request_id == "req_0123"
    assert stream.call.rate_limits == {
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-tokens-reset": "2026-11-30T00:00:00Z",
    }


def test_error_carries_request_id_and_retry_after() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429,
            headers={"x-request-id": "req_9", "retry-after": "30"},
            json={
                "error": {
                    "message": "Rate limit reached",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                }
            },
        )

    with (
        Client(
            api_key="k", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
        ) as client,
        pytest.raises(APIStatusError) as info,
    ):
        list(client.stream("openai_chat", model="gpt-5.4-nano", prompt="x"))
    error = info.value
    assert (error.status_code, error.kind, error.request_id, error.retry_after) == (
        429,
        "rate_limit",
        "req_9",
        30.0,
    )
    assert error.body == {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }


def test_gemini_request_uses_alt_sse_and_the_key_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            400, json={"error": {"code": 400, "message": "stop", "status": "INVALID_ARGUMENT"}}
        )

    with (
        Client(api_key="g-key", transport=httpx.MockTransport(handler)) as client,
        pytest.raises(APIStatusError) as info,
    ):
        list(client.stream("gemini_generate", model="gemini-3.5-flash-lite", prompt="x"))
    assert info.value.kind == "invalid_request"
    url = seen[0].url
    assert url.path == "/v1beta/models/gemini-3.5-flash-lite:streamGenerateContent"
    assert url.params["alt"] == "sse"
    assert seen[0].headers["x-goog-api-key"] == "g-key"


def _events_of(body: bytes, batched: bool) -> list[list[bytes]]:
    """A streaming call over a mock transport that sends ``body`` in one piece: the
    events by batch (``batches()``), or each in its own list (``async for``)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def main() -> list[list[bytes]]:
        async with AsyncClient(api_key="k", transport=httpx.MockTransport(handler)) as client:
            stream = client.stream("anthropic_messages", model="m", prompt="hi", max_tokens=9)
            if batched:
                out = [[msgspec.json.encode(e) for e in b] async for b in stream.batches()]
                with pytest.raises(RuntimeError, match="by batches"):
                    stream.__aiter__()
                return out
            out = [[msgspec.json.encode(e)] async for e in stream]
            with pytest.raises(RuntimeError, match="event by event"):
                stream.batches()
            return out

    return asyncio.run(main())


def test_batches_are_the_same_events_in_bounded_groups() -> None:
    """A body read in one piece is decoded in batches of at most 32 KiB of it, and the
    batches hold exactly the events of ``async for``."""

    # Anthropic Messages wire events, written from the spec's event shapes.
    def frame(name: str, data: str) -> bytes:
        return f"event: {name}\ndata: {data}\n\n".encode()

    body = b"".join(
        [
            frame(
                "message_start",
                '{"type":"message_start","message":{"id":"msg_1","type":"message",'
                '"role":"assistant","model":"m","content":[],"stop_reason":null,'
                '"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}',
            ),
            frame(
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
            ),
            *[
                frame(
                    "content_block_delta",
                    '{"type":"content_block_delta","index":0,'
                    f'"delta":{{"type":"text_delta","text":"word{i} "}}}}',
                )
                for i in range(6000)
            ],
            frame("content_block_stop", '{"type":"content_block_stop","index":0}'),
            frame(
                "message_delta",
                '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
                '"usage":{"output_tokens":6000}}',
            ),
            frame("message_stop", '{"type":"message_stop"}'),
        ]
    )
    assert len(body) > 8 * 32 * 1024
    batches = _events_of(body, batched=True)
    singles = _events_of(body, batched=False)
    assert [e for batch in batches for e in batch] == [e for (e,) in singles]
    assert all(batches)
    # Each batch holds the events of at most 32 KiB of the body (each delta's frame
    # is about 100 bytes here): several batches, none near the whole body.
    assert len(batches) >= len(body) // (32 * 1024)
    assert max(len(batch) for batch in batches) < 32 * 1024 // 90
    # The first batch holds the events of the body's first KiB, and each batch the
    # events of twice the bytes of the one before, up to 32 KiB: the reply's first
    # events are handed over before the rest of the read is decoded.
    decoder = StreamDecoder("anthropic_messages")
    expected = []
    start, step = 0, 1024
    while start < len(body):
        expected.append(len(decoder.feed(body[start : start + step])))
        start += step
        step = min(step * 2, 32 * 1024)
    assert [len(batch) for batch in batches] == expected
    assert expected[0] < 12 and expected[5] > 32 * 1024 // 130
