"""A streaming request whose upstream fails before the first output is answered with a
status, exactly as a non-streaming one: nothing of the stream (not even its head) has
left, so an in-band error before any output (once the retries are spent) gets the
status of its kind, and an upstream cut short before any output gets 502, both in the
client dialect's error shape. A reply that completes without any content still streams
with 200. Each case paced and unpaced (on polystream's own server, a paced upstream's
reads are handled where they arrive: the push path), under both servers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import msgspec
import openai
import pytest
from google.genai import errors as genai_errors

from polystream import decode
from polystream.gateway_core import GatewayConfig, Upstream
from polystream.retry import RetryPolicy
from polystream.server.gateway import create_gateway

from .conftest import CANARY, GATEWAY_KEY, AppThread
from .test_failures_reach_clients import (
    CLIENTS,
    _anthropic,
    _assert_error_shape,
    _close_clients,  # noqa: F401 (autouse: the SDK clients close before the servers stop)
    _genai,
    _openai,
    _post,
)

REPLY: dict[str, Any] = {"text": ["one ", "two."]}
_USER = [{"role": "user", "content": "x"}]
_PACED = {"first_event": 0, "delay": 0.03}

_SSE_DIALECT = {
    "chat": "openai_chat",
    "responses": "openai_responses",
    "messages": "anthropic_messages",
    "gemini_sse": "gemini_generate",
    "interactions": "gemini_interactions",
}


def _scenario(faults: dict[str, Any], paced: bool) -> list[dict[str, Any]]:
    return [{"reply": REPLY, "faults": faults, **({"timing": _PACED} if paced else {})}]


# -- 1. an in-band error before any output ----------------------------------------------------

# name: (upstream dialect, fault, attempts made, status for each client dialect, message)
_IN_BAND: dict[str, tuple[str, dict[str, Any], int, dict[str, int], str]] = {
    # Anthropic: message_start, then `error` overloaded_error (retried unseen twice).
    "overloaded": (
        "anthropic_messages",
        {"error": {"after": 0, "kind": "overloaded", "message": "Overloaded"}},
        3,
        {c: (529 if c == "messages" else 503) for c in CLIENTS},
        "upstream: Overloaded",
    ),
    # Anthropic: message_start and an empty text block's start, then `error` api_error.
    "server": (
        "anthropic_messages",
        {"error": {"after": 2, "kind": "server", "message": "it broke"}},
        1,
        dict.fromkeys(CLIENTS, 502),
        "upstream: it broke",
    ),
    # Responses: `response.failed` as its first event.
    "failed": (
        "openai_responses",
        {"error": {"after": 0, "kind": "server", "message": "it broke"}},
        1,
        dict.fromkeys(CLIENTS, 502),
        "upstream: it broke",
    ),
    # Anthropic: message_start, then `error` rate_limit_error (retried unseen twice).
    "rate_limit": (
        "anthropic_messages",
        {"error": {"after": 0, "kind": "rate_limit", "message": "slow down"}},
        3,
        dict.fromkeys(CLIENTS, 429),
        "upstream: slow down",
    ),
    # Chat: the role chunk, then an error chunk (its failed end is decoded at the end of
    # the body, which the call takes for an end before any output: retried twice).
    "chat": (
        "openai_chat",
        {"error": {"after": 1, "kind": "server", "message": "it broke"}},
        3,
        dict.fromkeys(CLIENTS, 502),
        "upstream: it broke",
    ),
}


@pytest.mark.parametrize("paced", [False, True], ids=["unpaced", "paced"])
@pytest.mark.parametrize("case", list(_IN_BAND))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_an_in_band_error_before_any_output_is_the_status_of_its_kind(
    stack: Callable[..., Any], client: str, case: str, paced: bool
) -> None:
    upstream, faults, attempts, statuses, message = _IN_BAND[case]
    emulator, gateway = stack(upstream, _scenario(faults, paced))
    response = _post(gateway, client)
    assert emulator.stats.requests == attempts
    error = _assert_error_shape(client, response, statuses[client])
    assert error["message"] == message
    assert "x-polystream-stream-id" not in response.headers
    assert "retry-after" not in response.headers  # (the error carries none)


# -- 2. an upstream cut short before any output -----------------------------------------------

_DROPS: dict[str, tuple[str, int, int]] = {
    # name: (upstream dialect, its wire events before the drop, attempts made)
    "after message_start": ("anthropic_messages", 1, 3),
    "after message_start and a block start": ("anthropic_messages", 2, 1),
    "after Chat's role chunk": ("openai_chat", 1, 3),
}


@pytest.mark.parametrize("paced", [False, True], ids=["unpaced", "paced"])
@pytest.mark.parametrize("drop", list(_DROPS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_an_upstream_cut_short_before_any_output_is_a_502(
    stack: Callable[..., Any], client: str, drop: str, paced: bool
) -> None:
    upstream, at, attempts = _DROPS[drop]
    emulator, gateway = stack(upstream, _scenario({"drop_at_event": at}, paced))
    response = _post(gateway, client)
    assert emulator.stats.requests == attempts
    error = _assert_error_shape(client, response, 502)
    assert error["message"] == (
        "upstream: the reply was cut short: connection dropped: peer closed connection "
        f"without sending complete message body ({upstream} has no resume)"
    )
    assert "x-polystream-stream-id" not in response.headers


# -- 3. the exact error bodies ----------------------------------------------------------------


def test_the_error_bodies_are_each_client_dialect_s_own(stack: Callable[..., Any]) -> None:
    _, gateway = stack("anthropic_messages", _scenario(_IN_BAND["overloaded"][1], False))
    bodies = {client: _post(gateway, client).json() for client in CLIENTS}
    openai_body = {
        "error": {
            "message": "upstream: Overloaded",
            "type": "server_error",
            "param": None,
            "code": "service_unavailable",
        }
    }
    gemini_body = {
        "error": {"code": 503, "message": "upstream: Overloaded", "status": "UNAVAILABLE"}
    }
    assert bodies == {
        "chat": openai_body,
        "responses": openai_body,
        "messages": {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "upstream: Overloaded"},
        },
        "gemini_sse": gemini_body,
        "gemini_array": gemini_body,
        "interactions": gemini_body,
    }


# -- 4. the SDKs raise their status errors ----------------------------------------------------


def _gateway(stack: Callable[..., Any], upstream: str, faults: dict[str, Any]) -> AppThread:
    _, gateway = stack(upstream, _scenario(faults, True))
    return gateway  # type: ignore[no-any-return]


def test_the_openai_sdk_raises_status_errors(stack: Callable[..., Any]) -> None:
    overloaded = _openai(_gateway(stack, "anthropic_messages", _IN_BAND["overloaded"][1]))
    with pytest.raises(openai.InternalServerError) as chat:
        list(overloaded.chat.completions.create(model="m", stream=True, messages=_USER))  # type: ignore[arg-type]
    assert chat.value.status_code == 503
    assert chat.value.body == {
        "message": "upstream: Overloaded",
        "type": "server_error",
        "param": None,
        "code": "service_unavailable",
    }
    dropped = _openai(_gateway(stack, "openai_chat", {"drop_at_event": 1}))
    with pytest.raises(openai.InternalServerError) as responses:
        list(dropped.responses.create(model="m", input="x", stream=True))
    assert responses.value.status_code == 502
    assert responses.value.body["message"].startswith("upstream: the reply was cut short: ")  # type: ignore[index]
    limited = _openai(_gateway(stack, "anthropic_messages", _IN_BAND["rate_limit"][1]))
    with pytest.raises(openai.RateLimitError) as rate:
        list(limited.chat.completions.create(model="m", stream=True, messages=_USER))  # type: ignore[arg-type]
    assert rate.value.status_code == 429


def test_the_anthropic_sdk_raises_status_errors(stack: Callable[..., Any]) -> None:
    overloaded = _anthropic(_gateway(stack, "anthropic_messages", _IN_BAND["overloaded"][1]))
    with (
        pytest.raises(anthropic.OverloadedError) as raised,
        overloaded.messages.stream(model="m", max_tokens=20, messages=_USER) as stream,  # type: ignore[arg-type]
    ):
        stream.get_final_message()
    assert raised.value.status_code == 529
    dropped = _anthropic(_gateway(stack, "anthropic_messages", {"drop_at_event": 2}))
    with (
        pytest.raises(anthropic.InternalServerError) as cut,
        dropped.messages.stream(model="m", max_tokens=20, messages=_USER) as stream,  # type: ignore[arg-type]
    ):
        stream.get_final_message()
    assert cut.value.status_code == 502


def test_google_genai_raises_server_errors(stack: Callable[..., Any]) -> None:
    overloaded = _genai(_gateway(stack, "anthropic_messages", _IN_BAND["overloaded"][1]))
    with pytest.raises(genai_errors.ServerError) as generate:
        list(overloaded.models.generate_content_stream(model="m", contents="x"))
    assert generate.value.code == 503
    failed = _genai(_gateway(stack, "openai_responses", _IN_BAND["failed"][1]))
    with pytest.raises(genai_errors.ServerError) as responses:
        list(failed.models.generate_content_stream(model="m", contents="x"))
    assert responses.value.code == 502
    assert responses.value.message == "upstream: it broke"
    dropped = _genai(_gateway(stack, "openai_chat", {"drop_at_event": 1}))
    with pytest.raises(genai_errors.ServerError) as cut:
        list(dropped.models.generate_content_stream(model="m", contents="x"))
    assert cut.value.code == 502


# -- 5. Retry-After, when the in-band error carries one -------------------------------------

_GEMINI_RATE_LIMIT = (
    b'data: {"error": {"code": 429, "message": "Resource exhausted", '
    b'"status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
    b'"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "11.5s"}]}}\r\n\r\n'
)


def test_an_in_band_rate_limit_s_retry_delay_is_the_retry_after(
    stack: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    asked: list[str] = []

    def handler(upstream_request: httpx.Request) -> httpx.Response:
        asked.append(upstream_request.method)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_GEMINI_RATE_LIMIT
        )

    upstream = Upstream(
        name="gemini", dialect="gemini_generate", base_url="http://up", api_key=CANARY
    )
    app = create_gateway(
        GatewayConfig(upstreams={"gemini": upstream}, api_key=GATEWAY_KEY),
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=0),
    )
    gateway = AppThread(app, server=request.node.callspec.params["stack"]).start()
    try:
        response = _post(gateway, "messages")
    finally:
        gateway.stop()
    assert asked == ["POST"]
    error = _assert_error_shape("messages", response, 429)
    assert error == {"type": "rate_limit_error", "message": "upstream: Resource exhausted"}
    assert response.headers["retry-after"] == "12"


# -- 6. a reply with no content still streams ------------------------------------------------


@pytest.mark.parametrize("paced", [False, True], ids=["unpaced", "paced"])
@pytest.mark.parametrize("client", list(_SSE_DIALECT))
def test_a_completed_reply_without_content_streams_with_200(
    stack: Callable[..., Any], client: str, paced: bool
) -> None:
    scenario = [{"reply": {"text": []}, **({"timing": _PACED} if paced else {})}]
    _, gateway = stack("anthropic_messages", scenario)
    response = _post(gateway, client)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    result = decode(response.content, _SSE_DIALECT[client])
    assert result.status == "completed"
    assert result.text == ""


# -- 7. the held opening is bounded ------------------------------------------------------------


def _empty_blocks_then_error(blocks: int) -> bytes:
    """An Anthropic stream: message_start, ``blocks`` empty text blocks, then an error."""
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "usage": {"input_tokens": 1, "output_tokens": 0},
                },
            },
        )
    ]
    for i in range(blocks):
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("error", {"type": "error", "error": {"type": "api_error", "message": "no"}}))
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"
        for name, data in events
    )


@pytest.mark.parametrize(("blocks", "status"), [(3, 502), (150, 200)])
def test_an_opening_past_64_kib_is_written_as_the_stream_s_start(
    stack: Callable[..., Any], request: pytest.FixtureRequest, blocks: int, status: int
) -> None:
    body = _empty_blocks_then_error(blocks)

    def handler(upstream_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    upstream = Upstream(
        name="anthropic", dialect="anthropic_messages", base_url="http://up", api_key=CANARY
    )
    app = create_gateway(
        GatewayConfig(upstreams={"anthropic": upstream}, api_key=GATEWAY_KEY),
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=0),
    )
    gateway = AppThread(app, server=request.node.callspec.params["stack"]).start()
    try:
        response = _post(gateway, "responses")
    finally:
        gateway.stop()
    assert response.status_code == status
    if status == 200:
        # Held up to 64 KiB, then written as it came: the failure is the stream's own.
        assert len(response.content) > 64 * 1024
        names = [line for line in response.text.splitlines() if line.startswith("event: ")]
        assert names[-2:] == ["event: error", "event: response.failed"]
    else:
        assert response.json()["error"]["message"] == "upstream: no"
