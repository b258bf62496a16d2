"""The HTTP server's own refusals in the client's dialect: the early 413 (a declared
``Content-Length`` over the body limit, refused before any of the body is read) of the
gateway under both server options and of the emulator, each official SDK's typed
error for it, and ``polystream serve``'s bounds."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import msgspec
import openai
import pytest
import uvicorn
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from polystream.gateway_core import GatewayConfig, Limits, Upstream
from polystream.scenario import MAX_BODY_SIZE
from polystream.server._app import create_app, emulator_refusal
from polystream.server._refusals import gateway_refusal
from polystream.server._run import uvicorn_limit_concurrency
from polystream.server.gateway import create_gateway
from tests.server.support import OwnServer, UvicornServer, talk, track

LIMIT = 1024
DATE = re.compile(rb"date: [^\r]*\r\n")


def _gateway() -> Any:
    # An upstream nobody listens on: a refused request never reaches it.
    upstream = Upstream(
        name="openai", dialect="openai_chat", base_url="http://127.0.0.1:9/v1", api_key="x"
    )
    config = GatewayConfig(upstreams={"openai": upstream}, limits=Limits(max_body_bytes=LIMIT))
    return create_gateway(config)


@pytest.fixture(scope="module", params=["polystream", "uvicorn"])
def gateway(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The gateway (body limit 1024 bytes, no client key) under each server option, as
    ``polystream gateway`` runs it."""
    running: Any
    if request.param == "polystream":
        running = OwnServer(_gateway(), gateway_refusal, max_body_bytes=LIMIT, shutdown_timeout=1.0)
    else:
        running = UvicornServer(_gateway())
    try:
        yield running
    finally:
        running.stop()


def _talk(port: int, data: bytes, *, wait: float = 1.0) -> tuple[bytes, bool]:
    return talk(port, data, wait=wait)


def _split(response: bytes) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """(status line, headers, body) of a whole response."""
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in lines)
    return status, headers, body


# path: the error body (the message: the server's own, or the gateway's under uvicorn).
# The OpenAI shape's 413 carries OpenAI's code `request_too_large`: the gateway and the
# emulator answer from the registry's one error table (the gateway's own had no code).
def _openai_413(message: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
    }


SHAPES: dict[str, Any] = {
    "/openai/v1/chat/completions": _openai_413,
    "/xai/v1/responses": _openai_413,
    "/anthropic/v1/messages": lambda message: {
        "type": "error",
        "error": {"type": "request_too_large", "message": message},
    },
    "/xai/v1/messages": lambda message: {
        "type": "error",
        "error": {"type": "request_too_large", "message": message},
    },
    "/gemini/v1beta/models/gemini-3.5-flash:streamGenerateContent": lambda message: {
        "error": {"code": 413, "message": message, "status": "INVALID_ARGUMENT"}
    },
}


@pytest.mark.parametrize("path", list(SHAPES))
def test_a_declared_body_over_the_limit_is_refused_in_the_dialect_before_it_is_read(
    gateway: Any, path: str
) -> None:
    # Only the head is sent: the answer comes without a byte of the body.
    head = (
        b"POST %b HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 5000\r\n\r\n" % path.encode()
    )
    out, closed = _talk(gateway.port, head)
    assert closed
    status, headers, body = _split(out)
    if gateway.kind == "polystream":
        message = f"request body of 5000 bytes, over {LIMIT}"
        assert DATE.sub(b"", out).partition(b"\r\n\r\n")[0] == (
            b"HTTP/1.1 413 Content Too Large\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close" % len(body)
        )
    else:
        message = f"request body larger than {LIMIT} bytes"
        assert status == b"HTTP/1.1 413 Request Entity Too Large"
        assert headers[b"content-type"] == b"application/json"
        assert headers[b"connection"] == b"close"
        assert int(headers[b"content-length"]) == len(body)
    assert msgspec.json.decode(body) == SHAPES[path](message)


def test_a_path_outside_every_prefix_is_refused_in_openai_s_shape(gateway: Any) -> None:
    head = b"POST /elsewhere HTTP/1.1\r\nHost: x\r\ncontent-length: 5000\r\n\r\n"
    out, closed = _talk(gateway.port, head)
    status, _, body = _split(out)
    if gateway.kind == "polystream":
        assert closed
        assert status == b"HTTP/1.1 413 Content Too Large"
        assert msgspec.json.decode(body)["error"]["type"] == "invalid_request_error"
    else:
        # (under uvicorn the gateway routes the request first: no such endpoint.)
        assert status == b"HTTP/1.1 404 Not Found"


def test_absolute_form_and_pipelined_refusals_are_shaped_by_their_path() -> None:
    own = OwnServer(_gateway(), gateway_refusal, max_body_bytes=LIMIT, shutdown_timeout=1.0)
    try:
        absolute, closed = _talk(
            own.port,
            b"POST http://x/gemini/v1beta/interactions HTTP/1.1\r\nHost: x\r\n"
            b"content-length: 5000\r\n\r\n",
        )
        assert closed
        # The 413 of a request pipelined after another comes after that one's answer.
        pipelined, closed = _talk(
            own.port,
            b"GET /openai/v1/nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\ncontent-length: 5000\r\n\r\n",
        )
        assert closed
    finally:
        own.stop()
    status, _, body = _split(absolute)
    assert status == b"HTTP/1.1 413 Content Too Large"
    assert msgspec.json.decode(body) == {
        "error": {
            "code": 413,
            "message": f"request body of 5000 bytes, over {LIMIT}",
            "status": "INVALID_ARGUMENT",
        }
    }
    first, headers, rest = _split(pipelined)
    assert first == b"HTTP/1.1 404 Not Found"
    length = int(headers[b"content-length"])
    status, _, body = _split(rest[length:])
    assert status == b"HTTP/1.1 413 Content Too Large"
    assert msgspec.json.decode(body) == {
        "type": "error",
        "error": {
            "type": "request_too_large",
            "message": f"request body of 5000 bytes, over {LIMIT}",
        },
    }


def test_a_chunked_body_growing_past_the_limit_is_refused_in_the_dialect() -> None:
    own = OwnServer(_gateway(), gateway_refusal, max_body_bytes=LIMIT, shutdown_timeout=1.0)
    try:
        chunk = b"x" * 600
        request = (
            b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            b"%x\r\n%b\r\n%x\r\n%b\r\n" % (len(chunk), chunk, len(chunk), chunk)
        )
        out, closed = _talk(own.port, request)
    finally:
        own.stop()
    assert closed
    status, headers, body = _split(out)
    assert status == b"HTTP/1.1 413 Content Too Large"
    assert headers[b"content-type"] == b"application/json"
    assert msgspec.json.decode(body) == {
        "type": "error",
        "error": {"type": "request_too_large", "message": f"request body over {LIMIT} bytes"},
    }


# -- the official SDKs ------------------------------------------------------------------

BIG = "x" * (2 * LIMIT)


def test_openai_sdk_raises_its_status_error(gateway: Any) -> None:
    client = track(
        openai.OpenAI(
            base_url=f"http://127.0.0.1:{gateway.port}/openai/v1", api_key="k", max_retries=0
        )
    )
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(
            model="gpt-5.4-nano", messages=[{"role": "user", "content": BIG}], stream=True
        )
    assert type(caught.value) is openai.APIStatusError
    assert caught.value.status_code == 413
    assert caught.value.type == "invalid_request_error"


@pytest.mark.parametrize("prefix", ["/anthropic", "/xai"])
def test_anthropic_sdk_raises_request_too_large(gateway: Any, prefix: str) -> None:
    client = track(
        anthropic.Anthropic(
            base_url=f"http://127.0.0.1:{gateway.port}{prefix}", api_key="k", max_retries=0
        )
    )
    with pytest.raises(anthropic.RequestTooLargeError) as caught:
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=16,
            messages=[{"role": "user", "content": BIG}],
            stream=True,
        )
    assert caught.value.status_code == 413
    if gateway.kind == "polystream":
        message = f"request body of {len(caught.value.request.content)} bytes, over {LIMIT}"
    else:
        message = f"request body larger than {LIMIT} bytes"
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "request_too_large", "message": message},
    }


def test_google_genai_raises_client_error(gateway: Any) -> None:
    client = genai.Client(
        api_key="k",
        http_options=genai_types.HttpOptions(
            base_url=f"http://127.0.0.1:{gateway.port}/gemini",
            retry_options=genai_types.HttpRetryOptions(attempts=1),
        ),
    )
    with pytest.raises(genai_errors.ClientError) as caught:
        for _ in client.models.generate_content_stream(model="gemini-3.5-flash", contents=BIG):
            pass
    assert type(caught.value) is genai_errors.ClientError
    assert caught.value.code == 413
    assert caught.value.status == "INVALID_ARGUMENT"


# -- the hook's edges -------------------------------------------------------------------


async def _never(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("a refused request reached the app")


def test_a_failing_hook_leaves_the_refusal_plain() -> None:
    def broken(status: int, path: str, message: str) -> Any:
        raise RuntimeError("no shape")

    def bad_header(status: int, path: str, message: str) -> Any:
        return [(b"content-length", b"1")], b"{}"

    for hook in (broken, bad_header):
        own = OwnServer(_never, hook, max_body_bytes=10)
        try:
            out, closed = _talk(
                own.port, b"POST /a HTTP/1.1\r\nHost: x\r\ncontent-length: 11\r\n\r\n"
            )
        finally:
            own.stop()
        assert closed
        assert DATE.sub(b"", out) == (
            b"HTTP/1.1 413 Content Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: 33\r\nconnection: close\r\n\r\nrequest body of 11 bytes, over 10"
        )


def test_the_connection_cap_503_stays_plain() -> None:
    # Refused as it is accepted, before any of its request is read: no path to shape by.
    own = OwnServer(_never, gateway_refusal, max_connections=1, keepalive_timeout=5.0)
    try:
        with socket.create_connection(("127.0.0.1", own.port)):
            deadline = time.monotonic() + 5
            while not own.server.connections and time.monotonic() < deadline:
                time.sleep(0.01)
            out, closed = _talk(
                own.port, b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\n\r\n"
            )
    finally:
        own.stop()
    assert closed
    assert DATE.sub(b"", out) == (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: 20\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
        b"too many connections"
    )


def test_the_hook_shapes_a_503_with_its_retry_after() -> None:
    headers, body = gateway_refusal(503, "/gemini/v1beta/interactions", "busy")
    assert headers == [(b"content-type", b"application/json")]
    assert msgspec.json.decode(body) == {
        "error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}
    }


# -- the emulator -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/openai/v1/responses", "openai"),
        ("/xai/v1/messages", "anthropic"),
        ("/anthropic/v1/messages", "anthropic"),
        ("/gemini/v1beta/models/m:generateContent", "gemini"),
    ],
)
def test_the_emulator_on_the_own_server_refuses_early_in_the_provider_s_shape(
    path: str, shape: str
) -> None:
    own = OwnServer(
        create_app(), emulator_refusal, max_body_bytes=MAX_BODY_SIZE, shutdown_timeout=1.0
    )
    try:
        head = b"POST %b HTTP/1.1\r\nHost: x\r\ncontent-length: %d\r\n\r\n" % (
            path.encode(),
            MAX_BODY_SIZE + 1,
        )
        out, closed = _talk(own.port, head)
    finally:
        own.stop()
    assert closed
    status, headers, body = _split(out)
    assert status == b"HTTP/1.1 413 Content Too Large"
    assert headers[b"content-type"] == b"application/json"
    message = f"Request too large: the body exceeds the limit of {MAX_BODY_SIZE} bytes."
    expected = {
        "openai": {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "request_too_large",
            }
        },
        "anthropic": {
            "type": "error",
            "error": {"type": "request_too_large", "message": message},
            "request_id": "req_emulator",
        },
        "gemini": {"error": {"code": 413, "message": message, "status": "INVALID_ARGUMENT"}},
    }[shape]
    assert msgspec.json.decode(body) == expected


@pytest.mark.parametrize("option", ["polystream", "uvicorn"])
def test_serve_passes_its_bounds_to_the_server(
    option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polystream.cli import _heap, main
    from polystream.server import _h1server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(_heap, "settle_heap", lambda: None)
    monkeypatch.setattr(_h1server, "run", lambda app, sock, **kw: seen.update(kw))

    def serve(self: uvicorn.Server, sockets: list[Any]) -> None:
        seen.update(limit_concurrency=self.config.limit_concurrency)

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    assert main(["serve", "--port", "0", "--server", option, "--max-connections", "7"]) == 0
    if option == "polystream":
        assert seen == {
            "refusal": emulator_refusal,
            "max_connections": 7,
            "max_body_bytes": MAX_BODY_SIZE,
            "ssl": None,  # (no --tls)
        }
    else:
        assert seen == {"limit_concurrency": 8}
    seen.clear()
    assert main(["serve", "--port", "0"]) == 0
    assert seen == {"limit_concurrency": uvicorn_limit_concurrency(1024)}


def test_serve_refuses_a_connection_cap_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    from polystream.cli import main

    assert main(["serve", "--port", "0", "--max-connections", "0"]) == 2
    assert capsys.readouterr().err == "polystream: error: --max-connections must be at least 1\n"


@pytest.mark.parametrize(
    "hosts", [b"Host: a\r\nHost: b\r\n", b"Host: a\r\nhost: a\r\n"], ids=["two", "the-same-twice"]
)
def test_a_request_with_two_hosts_is_refused_under_every_server(gateway: Any, hosts: bytes) -> None:
    # RFC 9112, 3.2: polystream's server refuses it itself; under uvicorn, which leaves
    # Host to the application, the gateway does, in the client's shape.
    head = (
        b"POST /openai/v1/chat/completions HTTP/1.1\r\n%bcontent-type: application/json\r\n"
        b"content-length: 2\r\n\r\n{}" % hosts
    )
    out, closed = _talk(gateway.port, head)
    assert closed
    status, headers, body = _split(out)
    assert status == b"HTTP/1.1 400 Bad Request"
    if gateway.kind == "uvicorn":
        assert msgspec.json.decode(body) == {
            "error": {
                "message": "a request has at most one Host header",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
        assert headers[b"connection"] == b"close"


def test_an_http_1_1_request_without_host(gateway: Any) -> None:
    # polystream's server refuses it (RFC 9112, 3.2); under uvicorn it reaches the
    # gateway, which routes by path and reads the body (an empty object is no Chat
    # request: a 400 that names what is missing).
    head = b"POST /openai/v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}"
    out, _ = _talk(gateway.port, head)
    status, _, body = _split(out)
    assert status == b"HTTP/1.1 400 Bad Request"
    if gateway.kind == "polystream":
        assert b"no Host header" in body
    else:
        assert b"messages" in body


def test_an_http_1_0_request_may_omit_host(gateway: Any) -> None:
    head = b"POST /openai/v1/chat/completions HTTP/1.0\r\ncontent-length: 2\r\n\r\n{}"
    out, _ = _talk(gateway.port, head)
    status, _, _ = _split(out)
    # Past the Host rule: the body is checked (an empty object is no Chat request).
    assert status == b"HTTP/1.0 400 Bad Request" or status == b"HTTP/1.1 400 Bad Request"
    assert b"messages" in out
