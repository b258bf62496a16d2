"""The gateway with the official SDKs as clients and the emulator as an upstream that
speaks a *different* dialect: streaming and not, tool calls, reasoning, errors, keys."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as gtypes

from .conftest import CANARY, GATEWAY_KEY, AppThread

REPLY: dict[str, Any] = {
    "reasoning": {"text": "Let me think.", "signature": "c2lnLWdhdGV3YXk="},
    "text": ["It ", "is ", "sunny."],
    "usage": {"input_tokens": 20, "output_tokens": 9, "reasoning_tokens": 3},
}
TOOL_REPLY: dict[str, Any] = {
    "text": "Checking.",
    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_w1"}],
    "finish": {"reason": "tool_calls"},
}
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients(stack: Any) -> Any:
    # Depends on `stack`, so the clients close before the servers stop.
    yield
    while _OPEN:
        _OPEN.pop().close()


def anthropic_client(gateway: AppThread, key: str = GATEWAY_KEY) -> anthropic.Anthropic:
    client = anthropic.Anthropic(
        api_key=key, base_url=gateway.base_url + "/anthropic", max_retries=0
    )
    _OPEN.append(client)
    return client


def openai_client(gateway: AppThread, key: str = GATEWAY_KEY) -> openai.OpenAI:
    client = openai.OpenAI(api_key=key, base_url=gateway.base_url + "/openai/v1", max_retries=0)
    _OPEN.append(client)
    return client


def genai_client(gateway: AppThread, key: str = GATEWAY_KEY) -> genai.Client:
    client = genai.Client(
        api_key=key, http_options=gtypes.HttpOptions(base_url=gateway.base_url + "/gemini")
    )
    _OPEN.append(client)
    return client


@pytest.mark.parametrize(
    "upstream",
    ["openai_responses", "openai_chat", "gemini_generate", "gemini_interactions", "xai_responses"],
)
def test_anthropic_sdk_through_gateway(stack: Callable[..., Any], upstream: str) -> None:
    _, gateway = stack(upstream, [{"reply": REPLY}])
    client = anthropic_client(gateway)
    with client.messages.stream(
        model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "weather?"}]
    ) as stream:
        message = stream.get_final_message()
    texts = [b.text for b in message.content if b.type == "text"]
    assert "".join(texts) == "It is sunny."
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 9


def test_anthropic_sdk_tool_call_from_openai_upstream(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_responses", [{"match": {"tools": True}, "reply": TOOL_REPLY}])
    client = anthropic_client(gateway)
    with client.messages.stream(
        model="claude-x",
        max_tokens=100,
        tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "weather?"}],
    ) as stream:
        message = stream.get_final_message()
    calls = [b for b in message.content if b.type == "tool_use"]
    assert len(calls) == 1
    assert calls[0].name == "get_weather" and calls[0].input == {"city": "Paris"}
    assert message.stop_reason == "tool_use"


def test_anthropic_sdk_non_streaming(stack: Callable[..., Any]) -> None:
    _, gateway = stack("gemini_generate", [{"reply": REPLY}])
    message = anthropic_client(gateway).messages.create(
        model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert "".join(b.text for b in message.content if b.type == "text") == "It is sunny."


@pytest.mark.parametrize("upstream", ["gemini_generate", "anthropic_messages", "openai_chat"])
def test_openai_responses_sdk_through_gateway(stack: Callable[..., Any], upstream: str) -> None:
    _, gateway = stack(upstream, [{"reply": REPLY}])
    client = openai_client(gateway)
    with client.responses.stream(model="gpt-x", input="weather?") as stream:
        response = stream.get_final_response()
    assert response.output_text == "It is sunny."
    assert response.status == "completed"


def test_openai_chat_sdk_tool_call_from_gemini(stack: Callable[..., Any]) -> None:
    _, gateway = stack("gemini_generate", [{"match": {"tools": True}, "reply": TOOL_REPLY}])
    client = openai_client(gateway)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": WEATHER_TOOL["input_schema"]},
        }
    ]
    with client.chat.completions.stream(
        model="gpt-x",
        tools=tools,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "weather?"}],
    ) as s:
        completion = s.get_final_completion()
    call = completion.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"
    assert call.function.arguments and '"Paris"' in call.function.arguments
    assert completion.choices[0].finish_reason == "tool_calls"


def test_openai_chat_non_streaming(stack: Callable[..., Any]) -> None:
    _, gateway = stack("anthropic_messages", [{"reply": REPLY}])
    completion = openai_client(gateway).chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "It is sunny."


@pytest.mark.parametrize("upstream", ["anthropic_messages", "openai_responses"])
def test_genai_sdk_through_gateway(stack: Callable[..., Any], upstream: str) -> None:
    _, gateway = stack(upstream, [{"reply": REPLY}])
    client = genai_client(gateway)
    chunks = list(client.models.generate_content_stream(model="gemini-x", contents="weather?"))
    text = "".join(c.text or "" for c in chunks)
    assert text == "It is sunny."
    assert chunks[-1].candidates[0].finish_reason == gtypes.FinishReason.STOP  # type: ignore[index]


def test_reasoning_signature_reaches_the_upstream(stack: Callable[..., Any]) -> None:
    """Turn 2 of a thinking + tool conversation: the Anthropic signature the client sends
    back arrives at an Anthropic upstream byte for byte (via the gateway's request
    translation), so multi-turn tool use keeps working."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        seen.append(json.loads(request.content))
        body = (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
            b'"type":"message","role":"assistant","model":"claude-x","content":[],'
            b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,'
            b'"output_tokens":1}}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    from polystream.gateway_core import GatewayConfig, Upstream
    from polystream.server.gateway import create_gateway

    app = create_gateway(
        GatewayConfig(
            upstreams={
                "anthropic": Upstream(
                    name="anthropic",
                    dialect="anthropic_messages",
                    base_url="http://upstream",
                    api_key=CANARY,
                )
            }
        ),
        transport=httpx.MockTransport(handler),
    )
    gateway = AppThread(app).start()
    try:
        client = anthropic_client(gateway, key="anything")
        client.messages.create(
            model="claude-x",
            max_tokens=50,
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "EqQBCkYIARgCKkD+/="},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
                    ],
                },
            ],
        )
    finally:
        gateway.stop()
    assistant = seen[0]["messages"][1]["content"]
    assert assistant[0] == {
        "type": "thinking",
        "thinking": "hmm",
        "signature": "EqQBCkYIARgCKkD+/=",
    }
    assert assistant[1]["input"] == {"city": "Paris"}


def test_wrong_or_missing_key_is_401_in_each_shape(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", [{"reply": REPLY}])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic_client(gateway, key="wrong").messages.create(
            model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(openai.AuthenticationError):
        openai_client(gateway, key="wrong").chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "x"}]
        )
    response = httpx.post(
        gateway.base_url + "/gemini/v1beta/models/g:generateContent", json={"contents": []}
    )
    assert response.status_code == 401
    assert response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_malformed_and_untranslatable_requests_are_400(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_responses", [{"reply": REPLY}])
    headers = {"x-api-key": GATEWAY_KEY}
    bad_json = httpx.post(
        gateway.base_url + "/anthropic/v1/messages", headers=headers, content=b"{nope"
    )
    assert bad_json.status_code == 400
    assert bad_json.json()["error"]["type"] == "invalid_request_error"
    # Stop sequences cannot be sent to a Responses upstream: a clear 400, not a silent drop.
    stop = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers=headers,
        json={
            "model": "claude-x",
            "max_tokens": 10,
            "stop_sequences": ["END"],
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert stop.status_code == 400
    assert "stop" in stop.json()["error"]["message"]
    missing = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers=headers,
        json={"model": "claude-x", "messages": []},
    )
    assert missing.status_code == 400 and "max_tokens" in missing.json()["error"]["message"]
    # A value of the wrong type deep in the body: a 400 naming it, not a server error.
    wrong_type = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers=headers,
        json={
            "model": "claude-x",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
            "thinking": {"type": "enabled", "budget_tokens": {"n": 1}},
        },
    )
    assert wrong_type.status_code == 400
    assert "reasoning.budget_tokens" in wrong_type.json()["error"]["message"]
    unknown = httpx.post(gateway.base_url + "/anthropic/v1/nothing", headers=headers, json={})
    assert unknown.status_code == 404


def test_oversized_body_is_413(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", [{"reply": REPLY}], max_body_bytes=1000)
    response = httpx.post(
        gateway.base_url + "/openai/v1/chat/completions",
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        json={"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]},
    )
    assert response.status_code == 413


def test_upstream_error_is_mapped_and_the_key_never_leaks(
    stack: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {CANARY}. You can find your key at ..."
    _, gateway = stack(
        "openai_chat",
        [{"reply": REPLY, "faults": {"http_error": {"status": 401, "message": echo}}}],
    )
    client = anthropic_client(gateway)
    with pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(
            model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    body = str(info.value.response.text)
    assert CANARY not in body and CANARY[:8] not in body and CANARY[-6:] not in body
    assert "Incorrect API key provided" in body
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def test_upstream_rate_limit_keeps_retry_after(stack: Callable[..., Any]) -> None:
    _, gateway = stack(
        "anthropic_messages",
        [{"reply": REPLY, "faults": {"http_error": {"status": 429, "retry_after": 120}}}],
    )
    response = httpx.post(
        gateway.base_url + "/openai/v1/chat/completions",
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        json={"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "120"
    # (OpenAI's own 429: the type names the limit, the code says it is a rate limit)
    assert response.json()["error"]["type"] == "requests"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_an_in_band_overload_before_any_output_is_retried_unseen(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paced (each upstream event a read of its own, handled where it arrives on
    polystream's own server): an overload before the first output starts the call over,
    unseen by the client, up to the retry limit (two); the last attempt's error is the
    response's status (503 for an OpenAI client), in the client's error shape, with
    nothing of any attempt's stream sent. On polystream's own server each attempt's
    opening is encoded when it arrives, ahead of any output: a retry drops what was
    encoded, and the next attempt's opening is encoded afresh."""
    from polystream.dialects import get_dialect
    from tests.gateway.test_streaming_path import _encoded_by_gateway

    encoder_class = type(get_dialect("openai_responses").encoder())
    real_encode = encoder_class.encode
    starts: list[Any] = []  # the encoders (kept: their ids stay theirs)

    def counting_encode(self: Any, event: Any) -> bytes:
        if type(event).__name__ == "StreamStart" and _encoded_by_gateway():
            starts.append(self)
        return real_encode(self, event)  # type: ignore[no-any-return]

    monkeypatch.setattr(encoder_class, "encode", counting_encode)
    emulator, gateway = stack(
        "anthropic_messages",
        [
            {
                "reply": REPLY,
                "timing": {"first_event": 0, "delay": 0.05},
                "faults": {"error": {"after": 0, "kind": "overloaded", "message": "Overloaded"}},
            }
        ],
    )
    response = httpx.post(
        gateway.base_url + "/openai/v1/responses",
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        json={"model": "gpt-x", "input": "x", "stream": True},
    )
    assert response.status_code == 503
    assert emulator.stats.requests == 3
    assert "x-polystream-stream-id" not in response.headers
    assert response.json() == {
        "error": {
            "message": "upstream: Overloaded",
            "type": "server_error",
            "param": None,
            "code": "service_unavailable",
        }
    }
    if gateway.server == "polystream":
        # Each attempt's opening, each by an encoder that had seen nothing before.
        assert len(starts) == 3 and len({id(e) for e in starts}) == 3
    else:
        assert starts == []  # (another server: encoded with the first output, none here)


def test_upstream_in_band_error_after_output_reaches_client_typed(
    stack: Callable[..., Any],
) -> None:
    _, gateway = stack(
        "anthropic_messages",
        [
            {
                "reply": REPLY,
                "faults": {"error": {"after": 6, "kind": "overloaded", "message": "Overloaded"}},
            }
        ],
    )
    from polystream import decode

    response = httpx.post(
        gateway.base_url + "/openai/v1/responses",
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
        json={"model": "gpt-x", "input": "x", "stream": True},
    )
    result = decode(response.content, "openai_responses")
    assert result.status == "failed"
    assert result.error is not None and result.error.kind == "overloaded"


def test_upstream_garbage_is_a_typed_error_and_the_gateway_keeps_serving() -> None:
    from polystream.gateway_core import GatewayConfig, Upstream
    from polystream.server.gateway import create_gateway

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b"data: {this is not json\n\n",
        )

    app = create_gateway(
        GatewayConfig(
            upstreams={
                "openai": Upstream(
                    name="openai", dialect="openai_chat", base_url="http://up", api_key=CANARY
                )
            }
        ),
        transport=httpx.MockTransport(handler),
    )
    gateway = AppThread(app).start()
    try:
        for _ in range(3):
            response = httpx.post(
                gateway.base_url + "/anthropic/v1/messages",
                json={
                    "model": "claude-x",
                    "max_tokens": 10,
                    "stream": True,
                    "messages": [{"role": "user", "content": "x"}],
                },
            )
            # Garbage and no end before any output: a reply cut short, answered 502.
            assert response.status_code == 502
            assert response.json() == {
                "type": "error",
                "error": {
                    "type": "api_error",
                    "message": "upstream: the reply was cut short: "
                    "stream ended without data: [DONE] (truncated)",
                },
            }
            assert CANARY not in response.text
    finally:
        gateway.stop()


def test_no_buffering_headers(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", [{"reply": REPLY}])
    with httpx.stream(
        "POST",
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY},
        json={
            "model": "c",
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
    ) as response:
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        response.read()


def test_losses_are_reported(stack: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    """A Gemini-grounded reply through a Chat client: what Chat cannot carry is reported."""
    caplog.set_level(logging.INFO, logger="polystream.gateway")
    reply = {
        "reasoning": {"text": "hm", "signature": "c2ln"},
        "text": "x",
        "citations": [
            {
                "type": "url_citation",
                "url": "https://example.com",
                "start_index": 0,
                "end_index": 1,
                "title": "e",
            }
        ],
    }
    _, gateway = stack("openai_responses", [{"reply": reply}])
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY},
        json={
            "model": "claude-x",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert response.status_code == 200
    # The signature went in the Messages carrier: carried, not lost.
    assert response.headers.get("x-polystream-losses") == "2; citation, signature (carried)"
    assert "transcoding losses (2): citation, signature (carried)" in [
        r.getMessage() for r in caplog.records
    ]


_CHAT_SSE = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}'
    b"\n\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
_MESSAGES_SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","model":"claude-x","content":[],'
    b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}'
    b"\n\n"
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"ok"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _post_once(app: Any, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST ``body`` to ``path`` of ``app``, served for this one request; the reply,
    checked to be a 200."""
    gateway = AppThread(app).start()
    try:
        reply = httpx.post(gateway.base_url + path, json=body, timeout=10)
    finally:
        gateway.stop()
    assert reply.status_code == 200, reply.text
    return reply


@pytest.mark.parametrize("stream", [True, False])
def test_fields_outside_the_unified_request_pass_through_or_are_named(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A Chat request's fields that the unified request does not name (structured
    output, a seed, a user id) reach a Chat upstream as the client sent them; an
    Anthropic upstream has no place for them: they are not sent, and the response names
    them (a name that a header cannot carry is not echoed)."""
    import json

    from polystream.gateway_core import GatewayConfig, Route, Upstream
    from polystream.server.gateway import create_gateway

    seen: dict[str, dict[str, Any]] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        chat = request.url.path.endswith("/chat/completions")
        seen["chat" if chat else "anthropic"] = body
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=_CHAT_SSE if chat else _MESSAGES_SSE,
        )

    upstreams = {
        "chat": Upstream(name="chat", dialect="openai_chat", base_url="http://up/v1", api_key="k"),
        "claude": Upstream(
            name="claude", dialect="anthropic_messages", base_url="http://up", api_key="k"
        ),
    }
    app = create_gateway(
        GatewayConfig(
            upstreams=upstreams,
            routes=[
                Route(model="gpt-*", upstream="chat"),
                Route(model="claude-*", upstream="claude"),
            ],
        ),
        transport=httpx.MockTransport(handler),
    )
    unnamed = {
        "response_format": {"type": "json_object"},
        "seed": 7,
        "user": "u-1",
        "bad\r\nname": 1,
    }
    gateway = AppThread(app).start()
    try:
        replies = {}
        for model in ("gpt-x", "claude-x"):
            body = {
                "model": model,
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
                **unnamed,
            }
            with caplog.at_level(logging.INFO, logger="polystream.gateway"):
                replies[model] = httpx.post(
                    gateway.base_url + "/openai/v1/chat/completions", json=body, timeout=10
                )
    finally:
        gateway.stop()
    for reply in replies.values():
        assert reply.status_code == 200, reply.text
        assert "ok" in reply.text
    # The same dialect: every field as it came.
    for name, value in unnamed.items():
        assert seen["chat"][name] == value
    assert "x-polystream-dropped-fields" not in replies["gpt-x"].headers
    # Another dialect: none of them sent, each named (but the one a header cannot carry).
    assert not set(unnamed) & set(seen["anthropic"])
    assert replies["claude-x"].headers["x-polystream-dropped-fields"] == (
        "(unnamed), response_format, seed, user"
    )
    assert any(
        "not sent: (unnamed), response_format, seed, user" in r.getMessage() for r in caplog.records
    )


def test_a_pass_through_sends_the_clients_body_as_it_came() -> None:
    """An Anthropic client to an Anthropic upstream: prompt caching marks, a field the
    unified request has no place for, the system as blocks, all reach the upstream as
    the client sent them; only the model (the route's rewrite) and streaming are the
    gateway's."""
    import json

    from polystream.gateway_core import GatewayConfig, Route, Upstream
    from polystream.server.gateway import create_gateway

    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_MESSAGES_SSE
        )

    app = create_gateway(
        GatewayConfig(
            upstreams={
                "claude": Upstream(
                    name="claude", dialect="anthropic_messages", base_url="http://up", api_key="k"
                )
            },
            routes=[Route(model="alias", upstream="claude", rewrite="claude-x")],
        ),
        transport=httpx.MockTransport(handler),
    )
    body = {
        "model": "alias",
        "max_tokens": 100,
        "top_k": 5,
        "system": [
            {"type": "text", "text": "A long prompt.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        "tools": [
            {
                "name": "get_weather",
                "input_schema": {"type": "object", "properties": {}},
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    reply = _post_once(app, "/anthropic/v1/messages", body)
    assert reply.json()["content"] == [{"type": "text", "text": "ok"}]
    assert seen == [{**body, "model": "claude-x", "stream": True}]


def test_a_unary_chat_reply_states_its_usage(stack: Callable[..., Any]) -> None:
    """A Chat client that does not stream never asks for usage (``stream_options`` is a
    streaming option), yet a Chat completion always states it: the gateway asks its
    upstream stream for it."""
    _, gateway = stack("openai_chat", [{"reply": REPLY}])
    completion = openai_client(gateway).chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "weather?"}]
    )
    assert completion.choices[0].message.content == "It is sunny."
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (20, 9)


def test_an_upstream_can_refuse_fields_a_client_would_choose() -> None:
    """An upstream configured with ``drop_fields`` never gets those fields from a
    client's pass-through body (a service tier the key's owner would pay for); the rest
    goes as it came, and the response names what was dropped."""
    import json

    from polystream.gateway_core import GatewayConfig, load_config
    from polystream.server.gateway import create_gateway

    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_CHAT_SSE)

    config = load_config(
        json.dumps(
            {
                "upstreams": {
                    "chat": {
                        "dialect": "openai_chat",
                        "base_url": "http://up/v1",
                        "api_key": "k",
                        "drop_fields": ["service_tier", "store"],
                    }
                }
            }
        ).encode()
    )
    assert isinstance(config, GatewayConfig)
    assert config.upstreams["chat"].drop_fields == ("service_tier", "store")
    app = create_gateway(config, transport=httpx.MockTransport(handler))
    body = {
        "model": "gpt-x",
        "stream": True,
        "messages": [{"role": "user", "name": "ann", "content": "hi"}],
        "service_tier": "priority",
        "seed": 7,
    }
    reply = _post_once(app, "/openai/v1/chat/completions", body)
    assert reply.headers["x-polystream-dropped-fields"] == "service_tier"
    sent = {k: v for k, v in body.items() if k != "service_tier"}
    assert seen == [sent]
