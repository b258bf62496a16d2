"""The gateway's upstream transport (AsyncH1Transport): reads are acknowledged at once,
a finished reply's tail is read so that its connection stays pooled, and an upstream
that closes its idle connections costs nothing but a new connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import socketserver
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import polystream
from polystream.client import _h1
from polystream.client._h1 import AsyncH1Transport, DirectClient
from polystream.gateway_core import load_config
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread
from polystream.server import gateway as gateway_module
from tests.helpers import FIXTURES

from .conftest import GATEWAY_KEY, AppThread

HEADERS = {"x-api-key": GATEWAY_KEY}
SKELETON = next((FIXTURES / "anthropic_messages").glob("skeleton*.sse")).read_bytes()


def _messages_body(model: str = "claude-x") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }


def _post(gateway: AppThread) -> httpx.Response:
    return httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers=HEADERS,
        json=_messages_body(),
        timeout=30,
    )


def test_the_gateway_calls_upstreams_over_the_h1_transport(stack: Callable[..., Any]) -> None:
    _, gateway = stack("anthropic_messages", [{"reply": {"text": ["ok"]}}])
    transport = gateway.app.http._transport
    assert isinstance(transport, AsyncH1Transport)
    assert transport._quickack and transport._drain is gateway_module._call_finished
    # Upstream calls skip httpx's client layer; proxied URLs fall back to the client.
    upstream = gateway.app.upstream
    assert isinstance(upstream, DirectClient)
    assert upstream._transport is transport and upstream._fallback is gateway.app.http
    assert upstream.timeout == gateway.app.http.timeout
    response = _post(gateway)
    assert response.status_code == 200
    assert upstream._targets  # the upstream URL went through the direct client


def test_an_injected_transport_is_used_through_httpx() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500)

    config = load_config(
        b'{"upstreams": {"u": {"dialect": "openai_chat", "base_url": "http://u.test/v1"}},'
        b' "routes": [{"model": "m", "upstream": "u"}]}'
    )
    app = gateway_module.create_gateway(config, transport=httpx.MockTransport(handler))
    assert app.upstream is app.http  # type: ignore[attr-defined]


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux only")
def test_reads_are_acknowledged_at_once_on_a_pooled_connection(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = _h1._Connection._ack

    def counting(self: Any) -> None:
        calls.append(self.sock.fileno())
        real(self)

    monkeypatch.setattr(_h1._Connection, "_ack", counting)
    deltas = [f"q{i} " for i in range(50)]
    _, gateway = stack("anthropic_messages", [{"reply": {"text": deltas}}])
    for _ in range(2):  # the second reply comes on the pooled connection
        response = _post(gateway)
        assert polystream.decode(response.content, "anthropic_messages").text == "".join(deltas)
    assert len(calls) >= 4
    assert len(set(calls)) == 1  # one connection, reused
    assert gateway.app.http._transport._open == 1


# -- the tail of a finished reply -----------------------------------------------------------


def _close_after_first(parts: list[bytes], finished: bool | None, pause: float = 0.02) -> Any:
    """Read a reply's first chunk, then close it; (transport counts, seconds to close)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                for part in parts:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(pause)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def scenario() -> tuple[int, int, float]:
        if finished is not None:
            # All the gateway's drain hook reads of the call is whether it finished.
            call = types.SimpleNamespace(finished=finished)
            gateway_module._UPSTREAM_CALL.set(call)  # type: ignore[arg-type]
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = AsyncH1Transport(drain=gateway_module._call_finished)
        async with httpx.AsyncClient(transport=transport, timeout=5) as client:
            async with client.stream("GET", f"http://127.0.0.1:{port}/") as response:
                async for _ in response.aiter_raw():
                    break
                started = time.monotonic()
                await response.aclose()
                took = time.monotonic() - started
            counts = (transport._open, transport._idle_count, took)
        server.close()
        return counts

    return asyncio.run(scenario())


HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_a_finished_reply_is_read_to_its_end_before_closing() -> None:
    parts = [HEAD + b"c\r\ndata: last\n\n\r\n", b"e\r\ndata: [DONE]\n\n\r\n", b"0\r\n\r\n"]
    opened, idle, _ = _close_after_first(parts, finished=True)
    assert (opened, idle) == (1, 1)  # kept for the next request


@pytest.mark.parametrize("finished", [False, None])
def test_an_unfinished_reply_is_closed_at_once(finished: bool | None) -> None:
    parts = [HEAD + b"9\r\ndata: 1\n\n\r\n", b"9\r\ndata: 2\n\n\r\n", b"0\r\n\r\n"]
    opened, idle, took = _close_after_first(parts, finished=finished, pause=0.2)
    assert (opened, idle) == (0, 0)
    assert took < 0.1


def test_reading_the_tail_is_bounded_in_bytes_and_time() -> None:
    kib = b"400\r\n" + b"x" * 1024 + b"\r\n"
    opened, idle, took = _close_after_first([HEAD + kib] + [kib * 8] * 100, True, pause=0)
    assert (opened, idle) == (0, 0)  # given up: closed
    hanging = [HEAD + b"1\r\na\r\n", b"1\r\nb\r\n"]
    opened, idle, took = _close_after_first(hanging, True, pause=5)
    assert (opened, idle) == (0, 0)
    assert took < _h1._DRAIN_SECONDS + 1.0


# -- upstreams that close connections --------------------------------------------------------


class _Upstream:
    """A threaded HTTP/1.1 upstream answering every request with one canned stream;
    ``policy(connection, request_on_connection)`` says ``reply``, ``reply-close`` (close
    after replying, without saying so), ``close`` (close without replying) or
    ``late-terminator`` (the whole stream, then the chunked terminator 0.5 s later)."""

    def __init__(self, policy: Callable[[int, int], str]) -> None:
        self.connections = 0
        self.requests = 0
        lock = threading.Lock()
        upstream = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with lock:
                    upstream.connections += 1
                    n = upstream.connections
                sock = self.request
                reader = sock.makefile("rb")
                for index in range(1000):
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = reader.readline()
                        if not line:
                            return
                        head += line
                    length = 0
                    for line in head.lower().split(b"\r\n"):
                        if line.startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    reader.read(length)
                    with lock:
                        upstream.requests += 1
                    action = policy(n, index)
                    if action == "close":
                        return
                    if action == "late-terminator":
                        sock.sendall(
                            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                            b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n"
                            % (len(SKELETON), SKELETON)
                        )
                        time.sleep(0.5)
                        sock.sendall(b"0\r\n\r\n")
                        continue
                    sock.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(SKELETON), SKELETON)
                    )
                    if action == "reply-close":
                        time.sleep(0.02)
                        return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def upstream() -> Iterator[Callable[[Callable[[int, int], str]], _Upstream]]:
    running: list[_Upstream] = []

    def start(policy: Callable[[int, int], str]) -> _Upstream:
        server = _Upstream(policy).__enter__()
        running.append(server)
        return server

    yield start
    for server in running:
        server.__exit__()


def test_an_upstream_closing_idle_connections(
    stack: Callable[..., Any], upstream: Callable[..., _Upstream]
) -> None:
    server = upstream(lambda n, index: "reply-close")
    _, gateway = stack("anthropic_messages", emulator=server)
    for _ in range(3):
        response = _post(gateway)
        assert response.status_code == 200
        assert polystream.decode(response.content, "anthropic_messages").status == "completed"
        time.sleep(0.1)
    assert (server.connections, server.requests) == (3, 3)
    assert gateway.app.http._transport._idle_count == 0


def test_an_upstream_closing_a_pooled_connection_at_the_next_request(
    stack: Callable[..., Any], upstream: Callable[..., _Upstream], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polystream.gateway")
    # The first connection serves one request and drops the second without a word: the
    # request is sent again on a new connection, and the client never knows.
    server = upstream(lambda n, index: "close" if (n, index) == (1, 1) else "reply")
    _, gateway = stack("anthropic_messages", emulator=server)
    for _ in range(3):
        response = _post(gateway)
        assert response.status_code == 200
        assert polystream.decode(response.content, "anthropic_messages").status == "completed"
    assert (server.connections, server.requests) == (2, 4)
    # Sent again by the transport, not retried by the call.
    assert not [r for r in caplog.records if "upstream retry" in r.getMessage()]


def test_the_response_ends_with_the_terminal_event_not_the_upstream_terminator(
    stack: Callable[..., Any], upstream: Callable[..., _Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tail of a finished reply may take this long: the connection is kept.
    monkeypatch.setattr(_h1, "_DRAIN_SECONDS", 2.0)
    server = upstream(lambda n, index: "late-terminator")
    _, gateway = stack("anthropic_messages", emulator=server)
    started = time.monotonic()
    response = _post(gateway)
    took = time.monotonic() - started
    assert polystream.decode(response.content, "anthropic_messages").status == "completed"
    assert took < 0.4  # not held until the upstream's terminator, 0.5 s later
    deadline = time.monotonic() + 3
    transport = gateway.app.http._transport
    while transport._idle_count != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (transport._open, transport._idle_count) == (1, 1)  # then read, and pooled


def test_every_dialect_through_the_gateway_reuses_one_connection(
    stack: Callable[..., Any],
) -> None:
    deltas = [f"d{i} " for i in range(30)]
    with ServerThread(Emulator(parse_scenarios([{"reply": {"text": deltas}}]))) as emulator:
        for dialect in (
            "openai_responses",
            "openai_chat",
            "anthropic_messages",
            "gemini_generate",
            "gemini_interactions",
        ):
            _, gateway = stack(dialect, emulator=emulator)
            for _ in range(3):
                response = _post(gateway)
                result = polystream.decode(response.content, "anthropic_messages")
                assert result.text == "".join(deltas), dialect
            assert gateway.app.http._transport._open == 1, dialect
