"""The client over an injected httpx transport: request shape, headers captured on
the stream (request id, rate limits), and typed errors with the request id."""

from __future__ import annotations

import json

import httpx
import pytest

from polystream.client import Client
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
