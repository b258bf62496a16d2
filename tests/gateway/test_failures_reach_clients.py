"""The gateway's upstream failures reach its clients as failures: an upstream that
refuses before any output is answered with its status; a reply cut short, or failed
in-band, ends with the client dialect's in-band error (Gemini generate: an aborted
transfer), never a clean end; a non-streaming reply that failed is an error status;
keep-alive comments go only to clients whose readers skip them; an upstream redirect
is a 502; a non-streaming reply is bounded by ``max_reply_bytes``."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import httpx2
import msgspec
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gtypes

from polystream.gateway_core import Limits
from polystream.wire import ServerSentEvent, SSEDecoder

from .conftest import CANARY, GATEWAY_KEY, AppThread

REPLY: dict[str, Any] = {"text": ["one ", "two ", "three ", "four."]}

_OPENAI = {"authorization": f"Bearer {GATEWAY_KEY}"}
_ANTHROPIC = {"x-api-key": GATEWAY_KEY}
_GEMINI = {"x-goog-api-key": GATEWAY_KEY}
_USER = [{"role": "user", "content": "x"}]
_CONTENTS = [{"role": "user", "parts": [{"text": "x"}]}]

# Each client dialect: (streaming path, non-streaming path, headers, streaming body,
# non-streaming body).
CLIENTS: dict[str, tuple[str, str, dict[str, str], dict[str, Any], dict[str, Any]]] = {
    "chat": (
        "/openai/v1/chat/completions",
        "/openai/v1/chat/completions",
        _OPENAI,
        {"model": "m", "stream": True, "messages": _USER},
        {"model": "m", "messages": _USER},
    ),
    "responses": (
        "/openai/v1/responses",
        "/openai/v1/responses",
        _OPENAI,
        {"model": "m", "input": "x", "stream": True},
        {"model": "m", "input": "x"},
    ),
    "messages": (
        "/anthropic/v1/messages",
        "/anthropic/v1/messages",
        _ANTHROPIC,
        {"model": "m", "max_tokens": 50, "stream": True, "messages": _USER},
        {"model": "m", "max_tokens": 50, "messages": _USER},
    ),
    "gemini_sse": (
        "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
        "/gemini/v1beta/models/m:generateContent",
        _GEMINI,
        {"contents": _CONTENTS},
        {"contents": _CONTENTS},
    ),
    "gemini_array": (
        "/gemini/v1beta/models/m:streamGenerateContent",
        "/gemini/v1beta/models/m:generateContent",
        _GEMINI,
        {"contents": _CONTENTS},
        {"contents": _CONTENTS},
    ),
    "interactions": (
        "/gemini/v1beta/interactions",
        "/gemini/v1beta/interactions",
        _GEMINI,
        {"model": "m", "input": "x", "stream": True},
        {"model": "m", "input": "x"},
    ),
}
_NON_STREAMING = ["chat", "responses", "messages", "gemini_sse", "interactions"]


def _post(gateway: AppThread, client: str, *, streaming: bool = True) -> httpx.Response:
    path, unary_path, headers, body, unary_body = CLIENTS[client]
    return httpx.post(
        gateway.base_url + (path if streaming else unary_path),
        headers=headers,
        json=body if streaming else unary_body,
        timeout=10,
    )


def _assert_error_shape(client: str, response: httpx.Response, status: int) -> dict[str, Any]:
    """The client dialect's own error body, for ``status``; its error object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    if client == "messages":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return body["error"]  # type: ignore[no-any-return]
    error: dict[str, Any] = body["error"]
    if client.startswith("gemini") or client == "interactions":
        assert error["code"] == status and set(error) == {"code", "message", "status"}
    else:
        assert set(error) == {"message", "type", "param", "code"}
    return error


def _events(data: bytes) -> list[ServerSentEvent]:
    return [f for f in SSEDecoder().feed(data) if isinstance(f, ServerSentEvent)]


def _closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients(stack: Any) -> Iterator[None]:
    # Depends on `stack`, so the clients close before the servers stop.
    yield
    while _OPEN:
        _OPEN.pop().close()


def _openai(gateway: AppThread) -> openai.OpenAI:
    client = openai.OpenAI(
        api_key=GATEWAY_KEY, base_url=gateway.base_url + "/openai/v1", max_retries=0
    )
    _OPEN.append(client)
    return client


def _anthropic(gateway: AppThread) -> anthropic.Anthropic:
    client = anthropic.Anthropic(
        api_key=GATEWAY_KEY, base_url=gateway.base_url + "/anthropic", max_retries=0
    )
    _OPEN.append(client)
    return client


def _genai(gateway: AppThread) -> genai.Client:
    client = genai.Client(
        api_key=GATEWAY_KEY,
        http_options=gtypes.HttpOptions(
            base_url=gateway.base_url + "/gemini",
            retry_options=gtypes.HttpRetryOptions(attempts=1),
        ),
    )
    _OPEN.append(client)
    return client


# -- 1. an upstream that refuses before any output: its status -----------------------------

_REFUSALS = {
    # name: (upstream dialect, fault, status the client gets, its Retry-After)
    "429": ("openai_chat", {"status": 429, "retry_after": 0.01, "times": 1000}, 429, "1"),
    "529": ("anthropic_messages", {"status": 529}, 529, None),
    "503": ("gemini_generate", {"status": 503}, 503, None),
}


@pytest.mark.parametrize("refusal", list(_REFUSALS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_streaming_request_the_upstream_refuses_gets_the_status(
    stack: Callable[..., Any], client: str, refusal: str
) -> None:
    upstream, fault, status, retry_after = _REFUSALS[refusal]
    emulator, gateway = stack(upstream, [{"reply": REPLY, "faults": {"http_error": fault}}])
    response = _post(gateway, client)
    assert emulator.stats.requests == 3  # (the first attempt and its two retries)
    _assert_error_shape(client, response, status)
    assert response.headers.get("retry-after") == retry_after
    assert "x-polystream-stream-id" not in response.headers
    assert f"HTTP {status}" in response.text


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_streaming_request_to_an_unreachable_upstream_gets_502(
    stack: Callable[..., Any], client: str
) -> None:
    nowhere = SimpleNamespace(base_url=f"http://127.0.0.1:{_closed_port()}")
    _, gateway = stack("openai_chat", emulator=nowhere)
    response = _post(gateway, client)
    error = _assert_error_shape(client, response, 502)
    assert "cannot reach" in error["message"]


def _refusing(stack: Callable[..., Any], upstream: str, fault: dict[str, Any]) -> AppThread:
    _, gateway = stack(upstream, [{"reply": REPLY, "faults": {"http_error": fault}}])
    return gateway  # type: ignore[no-any-return]


def test_the_openai_sdk_raises_rate_limit_error_for_a_refused_stream(
    stack: Callable[..., Any],
) -> None:
    gateway = _refusing(stack, "anthropic_messages", {"status": 429, "retry_after": 0.01})
    client = _openai(gateway)
    with pytest.raises(openai.RateLimitError) as chat:
        list(client.chat.completions.create(model="m", stream=True, messages=_USER))  # type: ignore[arg-type]
    assert chat.value.status_code == 429
    with pytest.raises(openai.RateLimitError):
        list(client.responses.create(model="m", input="x", stream=True))


def test_the_anthropic_sdk_raises_its_status_errors_for_a_refused_stream(
    stack: Callable[..., Any],
) -> None:
    limited = _anthropic(_refusing(stack, "openai_chat", {"status": 429, "retry_after": 0.01}))
    with (
        pytest.raises(anthropic.RateLimitError),
        limited.messages.stream(model="m", max_tokens=20, messages=_USER) as stream,  # type: ignore[arg-type]
    ):
        stream.get_final_message()
    overloaded = _anthropic(_refusing(stack, "anthropic_messages", {"status": 529}))
    with (
        pytest.raises(anthropic.OverloadedError),
        overloaded.messages.stream(model="m", max_tokens=20, messages=_USER) as stream,  # type: ignore[arg-type]
    ):
        stream.get_final_message()


def test_google_genai_raises_client_and_server_errors_for_a_refused_stream(
    stack: Callable[..., Any],
) -> None:
    limited = _genai(_refusing(stack, "openai_chat", {"status": 429, "retry_after": 0.01}))
    with pytest.raises(genai_errors.ClientError) as client_error:
        list(limited.models.generate_content_stream(model="m", contents="x"))
    assert client_error.value.code == 429
    unavailable = _genai(_refusing(stack, "anthropic_messages", {"status": 503}))
    with pytest.raises(genai_errors.ServerError) as server_error:
        list(unavailable.models.generate_content_stream(model="m", contents="x"))
    assert server_error.value.code == 503


# -- 2. a reply cut short or failed after output: never a clean end -------------------------

_DROP = [{"reply": REPLY, "faults": {"drop_at_event": 3}}]
"""A Chat upstream (no resume) that drops after its role chunk and two text deltas."""


def test_a_dropped_upstream_makes_the_openai_chat_sdk_raise(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", _DROP)
    texts: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in _openai(gateway).chat.completions.create(
            model="m",
            stream=True,
            messages=_USER,  # type: ignore[arg-type]
        ):
            texts += [c.delta.content or "" for c in chunk.choices]
    assert type(raised.value) is openai.APIError
    assert "the upstream reply was cut short" in raised.value.message
    assert "".join(texts) == "one two "


def test_a_dropped_upstream_fails_the_openai_responses_stream(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", _DROP)
    client = _openai(gateway)
    events = list(client.responses.create(model="m", input="x", stream=True))
    kinds = [e.type for e in events]
    assert "response.completed" not in kinds
    assert kinds[-1] == "response.failed"
    errors = [e for e in events if e.type == "error"]
    assert len(errors) == 1 and errors[0].code == "server"
    assert errors[0].message.startswith("the upstream reply was cut short: ")
    with (
        pytest.raises(RuntimeError, match=r"Didn.t receive a `response\.completed` event"),
        client.responses.stream(model="m", input="x") as stream,
    ):
        stream.get_final_response()


def test_a_dropped_upstream_makes_the_anthropic_sdk_raise(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", _DROP)
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        _anthropic(gateway).messages.stream(
            model="m",
            max_tokens=20,
            messages=_USER,  # type: ignore[arg-type]
        ) as stream,
    ):
        stream.get_final_message()
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "api_error", "message": raised.value.body["error"]["message"]},  # type: ignore[index]
    }
    assert "the upstream reply was cut short" in raised.value.message


def test_a_dropped_upstream_aborts_the_gemini_sse_transfer(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", _DROP)
    texts: list[str] = []
    with pytest.raises(httpx2.RemoteProtocolError):
        for chunk in _genai(gateway).models.generate_content_stream(model="m", contents="x"):
            texts.append(chunk.text or "")
    assert "".join(texts) == "one two "


def test_a_dropped_upstream_aborts_the_gemini_json_array_transfer(
    stack: Callable[..., Any],
) -> None:
    _, gateway = stack("openai_chat", _DROP)
    path, _, headers, body, _ = CLIENTS["gemini_array"]
    got = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", gateway.base_url + path, headers=headers, json=body) as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            got += chunk
    # The error element is the last one, and the array is never closed.
    assert got.rstrip().endswith(b"}")
    last = json.loads(got[got.rindex(b"\r\n,\r\n") + 5 :])
    assert last["error"]["code"] == 502 and last["error"]["status"] == "INTERNAL"
    assert last["error"]["message"].startswith("the upstream reply was cut short: ")


def test_a_dropped_upstream_ends_the_interactions_stream_with_its_error(
    stack: Callable[..., Any],
) -> None:
    _, gateway = stack("openai_chat", _DROP)
    response = _post(gateway, "interactions")
    assert response.status_code == 200
    events = _events(response.content)
    names = [e.event for e in events]
    assert names[-3:] == ["error", "interaction.completed", "done"]
    error = msgspec.json.decode(events[-3].data)
    assert error["error"]["code"] == "server"
    assert error["error"]["message"].startswith("the upstream reply was cut short: ")
    final = msgspec.json.decode(events[-2].data)
    assert final["interaction"]["status"] == "failed"
    # The SDK yields the error event, and no completed interaction.
    sdk_events = list(_genai(gateway).interactions.create(model="m", input="x", stream=True))
    kinds = [getattr(e, "event_type", None) for e in sdk_events]
    assert kinds[-2:] == ["error", "interaction.completed"]
    assert sdk_events[-1].interaction.status == "failed"


@pytest.mark.parametrize("client", _NON_STREAMING)
def test_a_dropped_upstream_gives_a_non_streaming_client_502(
    stack: Callable[..., Any], client: str
) -> None:
    _, gateway = stack("openai_chat", _DROP)
    error = _assert_error_shape(client, _post(gateway, client, streaming=False), 502)
    assert error["message"].startswith("upstream: the reply was cut short: ")


def test_a_chat_upstream_without_done_fails_stream_and_reply(stack: Callable[..., Any]) -> None:
    # A Chat stream that ends cleanly but without [DONE] is truncated (per its decoder).
    _, gateway = stack("openai_chat", [{"reply": REPLY, "faults": {"no_terminal": True}}])
    with pytest.raises(openai.APIError) as raised:
        list(_openai(gateway).chat.completions.create(model="m", stream=True, messages=_USER))  # type: ignore[arg-type]
    assert type(raised.value) is openai.APIError
    _assert_error_shape("messages", _post(gateway, "messages", streaming=False), 502)


@pytest.mark.parametrize(
    ("kind", "status", "anthropic_status"),
    [("server", 502, 502), ("overloaded", 503, 529), ("rate_limit", 429, 429)],
)
def test_an_in_band_upstream_error_after_output_fails_a_non_streaming_reply(
    stack: Callable[..., Any], kind: str, status: int, anthropic_status: int
) -> None:
    fault = {"error": {"after": 3, "kind": kind, "message": "it broke"}}
    _, gateway = stack("anthropic_messages", [{"reply": REPLY, "faults": fault}])
    chat = _assert_error_shape("chat", _post(gateway, "chat", streaming=False), status)
    assert chat["message"] == "upstream: it broke"
    _assert_error_shape("messages", _post(gateway, "messages", streaming=False), anthropic_status)


def test_an_in_band_upstream_error_after_output_aborts_a_gemini_stream(
    stack: Callable[..., Any],
) -> None:
    fault = {"error": {"after": 3, "kind": "server", "message": "it broke"}}
    _, gateway = stack("anthropic_messages", [{"reply": REPLY, "faults": fault}])
    texts: list[str] = []
    with pytest.raises(httpx2.RemoteProtocolError):
        for chunk in _genai(gateway).models.generate_content_stream(model="m", contents="x"):
            texts.append(chunk.text or "")
    path, _, headers, body, _ = CLIENTS["gemini_array"]
    got = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", gateway.base_url + path, headers=headers, json=body) as response,
    ):
        for data in response.iter_bytes():
            got += data
    last = json.loads(got[got.rindex(b"\r\n,\r\n") + 5 :])
    assert last["error"]["message"] == "it broke"


def test_a_failed_stream_is_resumed_from_the_journal_with_its_error(
    stack: Callable[..., Any],
) -> None:
    _, gateway = stack("openai_chat", _DROP)
    first = _post(gateway, "messages")
    events = _events(first.content)
    assert events[-1].event == "error"
    # Resume after the second event: the rest, the error among it, as first sent.
    response = httpx.post(
        gateway.base_url + CLIENTS["messages"][0],
        headers={**_ANTHROPIC, "last-event-id": events[1].id or ""},
        json=CLIENTS["messages"][3],
    )
    assert response.status_code == 200
    assert response.headers["x-polystream-resumed"] == "suffix"
    assert response.content == first.content[first.content.index(b"id: " + events[2].id.encode()) :]  # type: ignore[union-attr]


_CUT_RESPONSES = b"".join(
    b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"
    for name, data in [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {
                    "id": "resp_1",
                    "object": "response",
                    "created_at": 0,
                    "status": "in_progress",
                    "model": "m",
                    "output": [],
                },
            },
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                },
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "one ",
            },
        ),
    ]
)
"""A background Responses stream cut off after its first text (no terminal event)."""


def test_a_resume_that_cannot_connect_after_output_ends_with_an_in_band_error(
    stack: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    # The upstream call fails (its resume cannot connect) after the stream began: the
    # client's stream ends with its dialect's error, not with a clean end.
    from polystream.gateway_core import GatewayConfig, Upstream
    from polystream.retry import RetryPolicy
    from polystream.server.gateway import create_gateway

    asked: list[str] = []

    def handler(upstream_request: httpx.Request) -> httpx.Response:
        asked.append(upstream_request.method)
        if upstream_request.method == "GET":
            raise httpx.ConnectError("connection refused")
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_CUT_RESPONSES
        )

    upstream = Upstream(
        name="openai",
        dialect="openai_responses",
        base_url="http://up/v1",
        api_key=CANARY,
        background=True,
    )
    app = create_gateway(
        GatewayConfig(upstreams={"openai": upstream}, api_key=GATEWAY_KEY),
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=0),
    )
    gateway = AppThread(app, server=request.node.callspec.params["stack"]).start()
    try:
        response = _post(gateway, "messages")
    finally:
        gateway.stop()
    assert asked == ["POST", "GET"]
    assert response.status_code == 200
    events = _events(response.content)
    assert [e.event for e in events][-2:] == ["content_block_delta", "error"]
    error = msgspec.json.decode(events[-1].data)
    assert error == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "upstream: cannot reach http://up/v1: connection refused",
        },
    }


# -- 3. keep-alive comments only where the client's reader skips them ---------------------

_SLOW = [{"reply": {"text": ["one ", "two."]}, "timing": {"first_event": 0, "delay": 0.3}}]


def test_google_genai_gets_a_slow_reply_whole_without_comments(
    stack: Callable[..., Any],
) -> None:
    _, gateway = stack("openai_chat", _SLOW, keepalive_seconds=0.05)
    chunks = list(_genai(gateway).models.generate_content_stream(model="m", contents="x"))
    assert "".join(c.text or "" for c in chunks) == "one two."
    raw = _post(gateway, "gemini_sse")
    assert raw.status_code == 200 and b"keep-alive" not in raw.content
    assert not any(line.startswith(b":") for line in raw.content.splitlines())


@pytest.mark.parametrize("client", ["chat", "responses", "messages", "interactions"])
def test_sse_readers_that_skip_comments_still_get_keep_alives(
    stack: Callable[..., Any], client: str
) -> None:
    _, gateway = stack("openai_chat", _SLOW, keepalive_seconds=0.05)
    raw = _post(gateway, client)
    # A comment line of its own (no blank line after it: see the OpenAI SDK below).
    assert raw.status_code == 200 and b"\n\n: keep-alive\n" in raw.content
    assert b": keep-alive\n\n" not in raw.content
    if client == "chat":
        chunks = list(
            _openai(gateway).chat.completions.create(model="m", stream=True, messages=_USER)  # type: ignore[arg-type]
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two."
    elif client == "responses":
        with _openai(gateway).responses.stream(model="m", input="x") as stream:
            assert stream.get_final_response().output_text == "one two."
    elif client == "messages":
        with _anthropic(gateway).messages.stream(
            model="m",
            max_tokens=20,
            messages=_USER,  # type: ignore[arg-type]
        ) as stream:
            message = stream.get_final_message()
        assert "".join(b.text for b in message.content if b.type == "text") == "one two."
    else:
        events = list(_genai(gateway).interactions.create(model="m", input="x", stream=True))
        assert getattr(events[-1], "event_type", None) == "interaction.completed"


_PINGING = [
    {
        "reply": {"text": ["one ", "two."]},
        "timing": {"first_event": 0, "delay": 0.2},
        "faults": {"keepalive": 0.05},
    }
]
"""An upstream that sends its own keep-alive comments during its silences."""


def test_an_upstream_s_keep_alives_reach_only_clients_that_skip_them(
    stack: Callable[..., Any],
) -> None:
    # The gateway's own keep-alives are off (a long period): what the client gets of
    # keep-alives is the upstream's, transcoded or not.
    _, gateway = stack("openai_chat", _PINGING, keepalive_seconds=60)
    for client in ("chat", "responses", "gemini_sse"):
        raw = _post(gateway, client)
        assert raw.status_code == 200 and b"keep-alive" not in raw.content, client
    for client in ("messages", "interactions"):
        raw = _post(gateway, client)
        assert raw.status_code == 200 and b"\n\n: keep-alive\n" in raw.content, client
    chunks = list(
        _openai(gateway).chat.completions.create(model="m", stream=True, messages=_USER)  # type: ignore[arg-type]
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two."
    with _openai(gateway).responses.stream(model="m", input="x") as stream:
        assert stream.get_final_response().output_text == "one two."
    texts = [
        c.text or ""
        for c in _genai(gateway).models.generate_content_stream(model="m", contents="x")
    ]
    assert "".join(texts) == "one two."


# -- 4. an upstream redirect is a 502 -------------------------------------------------------

_SECRET_PLACE = "http://elsewhere.internal:8443/secret/path"


async def _redirecting(scope: Any, receive: Any, send: Any) -> None:
    """An upstream that answers every request with a 302 to another place."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body", False):
        pass
    body = b'{"error": {"message": "moved to ' + _SECRET_PLACE.encode() + b'"}}'
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [
                (b"location", _SECRET_PLACE.encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "unary"])
@pytest.mark.parametrize("client", ["chat", "messages", "gemini_sse"])
def test_an_upstream_redirect_is_a_502_naming_the_status(
    stack: Callable[..., Any], client: str, streaming: bool
) -> None:
    upstream = AppThread(_redirecting).start()
    try:
        _, gateway = stack("openai_chat", emulator=upstream)
        response = _post(gateway, client, streaming=streaming)
        error = _assert_error_shape(client, response, 502)
        assert "location" not in response.headers
        assert error["message"] == (
            "the upstream answered HTTP 302 (a redirect), which the gateway does not follow"
        )
        assert "elsewhere" not in response.text and CANARY not in response.text
    finally:
        upstream.stop()


# -- 5. a non-streaming reply is bounded -----------------------------------------------------


@pytest.mark.parametrize("client", _NON_STREAMING)
def test_a_non_streaming_reply_past_max_reply_bytes_is_a_502(
    stack: Callable[..., Any], client: str
) -> None:
    big = {"text": ["word " * 200] * 20}  # some 20 kB of text
    _, gateway = stack("openai_chat", [{"reply": big}], max_reply_bytes=4096)
    error = _assert_error_shape(client, _post(gateway, client, streaming=False), 502)
    assert error["message"] == (
        "the upstream reply exceeded the gateway's limit of 4096 bytes (max_reply_bytes)"
    )
    # The same reply under a larger limit is whole; a stream has no such bound.
    _, roomy = stack("openai_chat", [{"reply": big}], max_reply_bytes=1 << 20)
    assert _post(roomy, client, streaming=False).status_code == 200
    assert _post(gateway, client).status_code == 200


def test_past_max_reply_bytes_the_upstream_is_no_longer_read(
    stack: Callable[..., Any],
) -> None:
    paced = {"reply": {"text": ["word " * 20] * 40}, "timing": {"first_event": 0, "delay": 0.05}}
    emulator, gateway = stack("openai_chat", [paced], max_reply_bytes=1000)
    started = time.monotonic()
    _assert_error_shape("chat", _post(gateway, "chat", streaming=False), 502)
    assert time.monotonic() - started < 1.5  # (the whole reply takes 2 s)
    deadline = time.monotonic() + 2
    while emulator.stats.cancelled == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert emulator.stats.cancelled == 1 and emulator.stats.completed == 0


def test_max_reply_bytes_defaults_to_32_mib_and_is_validated() -> None:
    assert Limits().max_reply_bytes == 32 * 1024 * 1024
    with pytest.raises(ValueError, match="max_reply_bytes must be at least 1"):
        Limits(max_reply_bytes=0)
    limits = msgspec.convert({"max_reply_bytes": 1000}, Limits)
    assert limits.max_reply_bytes == 1000
