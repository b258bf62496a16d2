"""No secret leaves the gateway: an upstream's error that quotes its key (whole, a
fragment, elided) reaches clients, the journal and the log without any 8-character
piece of it, before HTTP 200 and in-band after it; URL credentials of an unreachable
upstream are not echoed; the model's own text passes untouched."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from polystream import decode
from polystream.gateway_core import GatewayConfig, Upstream
from polystream.journal import MemoryJournal
from polystream.server.gateway import create_gateway
from polystream.wire.sse import ServerSentEvent, SSEDecoder

from .conftest import CANARY, GATEWAY_KEY, AppThread

ECHO = (
    f"Incorrect API key provided: {CANARY}; again {CANARY[10:20]}; "
    f"elided {CANARY[:13]}...{CANARY[-4:]}"
)
"""An upstream's message quoting the key whole, a 10-character middle fragment, and
elided as providers print it."""
SCRUBBED = "Incorrect API key provided: [redacted]; again [redacted]; elided [redacted]...1d0c"
REPLY: dict[str, Any] = {"text": ["see https://example.com/p?q=1 ", "and more."]}
AUTH = {
    "authorization": f"Bearer {GATEWAY_KEY}",
    "x-api-key": GATEWAY_KEY,
    "x-goog-api-key": GATEWAY_KEY,
}
CHAT = {"model": "gpt-x", "messages": [{"role": "user", "content": "x"}]}
RESPONSES = {"model": "gpt-x", "input": "x"}
MESSAGES = {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
GENERATE = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
INTERACTIONS = {"model": "gemini-x", "input": "x"}
INBOUND: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_chat": ("/openai/v1/chat/completions", CHAT),
    "xai_chat": ("/xai/v1/chat/completions", CHAT),
    "openai_responses": ("/openai/v1/responses", RESPONSES),
    "xai_responses": ("/xai/v1/responses", RESPONSES),
    "anthropic_messages": ("/anthropic/v1/messages", MESSAGES),
    "xai_messages": ("/xai/v1/messages", MESSAGES),
    "gemini_generate": ("/gemini/v1beta/models/gemini-x:{verb}", GENERATE),
    "gemini_interactions": ("/gemini/v1beta/interactions", INTERACTIONS),
}


def _windows(secret: str) -> set[bytes]:
    return {secret[i : i + 8].encode() for i in range(len(secret) - 7)}


def _leaks(data: bytes | str, secret: str = CANARY) -> list[bytes]:
    """The 8-character pieces of ``secret`` found in ``data``."""
    raw = data.encode() if isinstance(data, str) else data
    return sorted(w for w in _windows(secret) if w in raw)


def _post(gateway: AppThread, dialect: str, *, stream: bool, **headers: str) -> httpx.Response:
    path, body = INBOUND[dialect]
    if dialect == "gemini_generate":
        path = path.format(verb="streamGenerateContent?alt=sse" if stream else "generateContent")
    elif stream:
        body = {**body, "stream": True}
    return httpx.post(gateway.base_url + path, headers={**AUTH, **headers}, json=body, timeout=10)


def _message(dialect: str, response: httpx.Response) -> str:
    """The message of an error body, in any dialect's shape."""
    error = response.json()["error"]
    assert isinstance(error["message"], str)
    return str(error["message"])


@pytest.mark.parametrize(
    ("stream", "status"), [(True, 401), (False, 401), (False, 500)], ids=["stream", "unary", "5xx"]
)
@pytest.mark.parametrize("dialect", ["openai_responses", "anthropic_messages", "gemini_generate"])
def test_an_upstream_error_before_the_stream_is_scrubbed(
    stack: Callable[..., Any], dialect: str, stream: bool, status: int
) -> None:
    _, gateway = stack(
        "openai_chat",
        [{"reply": REPLY, "faults": {"http_error": {"status": status, "message": ECHO}}}],
    )
    response = _post(gateway, dialect, stream=stream)
    assert response.status_code == status
    kind = "authentication" if status == 401 else "server"
    assert _message(dialect, response) == f"upstream: HTTP {status} {kind}: {SCRUBBED}"
    assert _leaks(response.content) == []
    assert _leaks(json.dumps(dict(response.headers))) == []


def _in_band(stack: Callable[..., Any], **kwargs: Any) -> AppThread:
    """A gateway whose Messages upstream fails in-band, after two deltas, quoting the
    key."""
    fault = {"error": {"after": 4, "kind": "server", "message": ECHO}}
    _, gateway = stack("anthropic_messages", [{"reply": REPLY, "faults": fault}], **kwargs)
    return gateway


def _streamed(gateway: AppThread, dialect: str) -> bytes:
    """A streaming reply's bytes as they came, up to the end of the transfer (a Gemini
    stream that failed is aborted: the bytes before the abort)."""
    path, body = INBOUND[dialect]
    if dialect == "gemini_generate":
        path = path.format(verb="streamGenerateContent?alt=sse")
    else:
        body = {**body, "stream": True}
    received: list[bytes] = []
    with httpx.stream(
        "POST", gateway.base_url + path, headers=AUTH, json=body, timeout=10
    ) as response:
        assert response.status_code == 200
        try:
            for chunk in response.iter_bytes():
                received.append(chunk)
        except httpx.RemoteProtocolError:
            assert dialect == "gemini_generate"  # (its failure is an aborted transfer)
        else:
            assert dialect != "gemini_generate"
    return b"".join(received)


@pytest.mark.parametrize("dialect", list(INBOUND))
def test_an_in_band_error_after_200_is_scrubbed_on_every_streaming_dialect(
    stack: Callable[..., Any], dialect: str
) -> None:
    content = _streamed(_in_band(stack), dialect)
    assert _leaks(content) == []
    result = decode(content, dialect)
    assert result.text == "see https://example.com/p?q=1 and more."
    assert result.error is not None
    assert result.error.message == SCRUBBED


@pytest.mark.parametrize("dialect", list(INBOUND))
def test_an_in_band_error_is_scrubbed_for_a_non_streaming_client(
    stack: Callable[..., Any], dialect: str
) -> None:
    response = _post(_in_band(stack), dialect, stream=False)
    # A reply that failed in-band is answered with the failure's status.
    assert response.status_code == 502
    assert _leaks(response.content) == []
    assert _message(dialect, response) == f"upstream: {SCRUBBED}"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_upstream_does_not_echo_its_url_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    base = f"http://bob:hunter2-pass@127.0.0.1:{_closed_port()}/v1?token=tok-0123456789"
    upstream = Upstream(name="openai", dialect="openai_chat", base_url=base, api_key=CANARY)
    gateway = AppThread(create_gateway(GatewayConfig(upstreams={"openai": upstream}))).start()
    try:
        response = _post(gateway, "openai_chat", stream=False)
    finally:
        gateway.stop()
    assert response.status_code == 502
    message = _message("openai_chat", response)
    assert message.startswith("cannot reach http://[redacted]@127.0.0.1:")
    assert "/v1?[redacted]: " in message
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in ("bob", "hunter2", "tok-0123456789", "token="):
        assert secret not in response.text
        assert secret not in logged


def _sse(data: bytes) -> list[ServerSentEvent]:
    return [f for f in SSEDecoder().feed(data) if isinstance(f, ServerSentEvent)]


def test_the_journal_and_a_resumed_streams_replay_are_scrubbed(
    stack: Callable[..., Any],
) -> None:
    journal = MemoryJournal()
    gateway = _in_band(stack, journal=journal, resume_grace_seconds=5)
    first = _post(gateway, "anthropic_messages", stream=True)
    assert first.status_code == 200 and _leaks(first.content) == []
    stream_id = first.headers["x-polystream-stream-id"]
    # (the journal is written just after the client's write: it may lag a moment)
    deadline = time.monotonic() + 5
    entries, finished = journal.read_after(stream_id, None)
    while not finished and time.monotonic() < deadline:
        time.sleep(0.01)
        entries, finished = journal.read_after(stream_id, None)
    assert finished
    assert b"".join(e.data for e in entries) == first.content
    # Resumed after its first event: the rest, error included, from the journal.
    opening = _sse(first.content)[0].id
    assert opening is not None
    tail = _post(gateway, "anthropic_messages", stream=True, **{"last-event-id": opening})
    assert tail.status_code == 200
    assert tail.headers["x-polystream-resumed"] == "suffix"
    assert _leaks(tail.content) == []
    assert SCRUBBED.encode() in tail.content
    assert tail.content == first.content[first.content.index(b"\n\n") + 2 :]


@pytest.mark.parametrize(
    ("stream", "status", "line"),
    [(True, 502, "upstream failure: "), (False, 500, "gateway error on ")],
    ids=["stream", "unary"],
)
def test_log_lines_are_scrubbed(
    caplog: pytest.LogCaptureFixture, stream: bool, status: int, line: str
) -> None:
    """An upstream call that fails unexpectedly, its exception quoting the key: the
    failure is logged, scrubbed, and the client is told no more than that it failed."""
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        raise RuntimeError(ECHO)

    upstream = Upstream(
        name="openai", dialect="openai_chat", base_url="http://up/v1", api_key=CANARY
    )
    app = create_gateway(
        GatewayConfig(upstreams={"openai": upstream}), transport=httpx.MockTransport(handler)
    )
    gateway = AppThread(app).start()
    try:
        response = _post(gateway, "anthropic_messages", stream=stream)
    finally:
        gateway.stop()
    assert response.status_code == status
    assert _leaks(response.content) == []
    lines = [record.getMessage() for record in caplog.records]
    failures = [text for text in lines if text.startswith(line)]
    assert len(failures) == 1, lines
    assert failures[0].endswith(f"RuntimeError: {SCRUBBED}")
    assert _leaks("\n".join(lines)) == []


@pytest.mark.parametrize("dialect", ["openai_chat", "anthropic_messages", "gemini_generate"])
def test_a_text_delta_passes_byte_identical(stack: Callable[..., Any], dialect: str) -> None:
    """The model's output is not scrubbed: a URL with a query, which an error's text
    would lose, arrives as it was sent."""
    _, gateway = stack("openai_responses", [{"reply": REPLY}])
    response = _post(gateway, dialect, stream=True)
    assert response.status_code == 200
    assert b'"see https://example.com/p?q=1 "' in response.content
    assert b"[redacted]" not in response.content
