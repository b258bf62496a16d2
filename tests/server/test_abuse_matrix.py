"""Hostile and malformed requests against every HTTP server the gateway can run on
(polystream's own, and uvicorn as ``--server uvicorn`` runs it), over raw sockets:
request smuggling shapes, bad framing, oversize heads and bodies, a slow head, and
the connection cap. Each answer is asserted exactly: the status, or a connection
closed (or left open) where that is the answer.

Where uvicorn answers otherwise, the difference is uvicorn's own (it runs llhttp
through httptools too, but leaves Host checks, head and body sizes and slow heads to
the application), and the test says so.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from polystream.gateway_core import Limits
from polystream.server._h1server import H1Server, ServerLimits
from tests.server.support import OwnServer, UvicornServer, talk

DATE = re.compile(rb"date: [^\r]*\r\n")


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the body; answers ``ok:<path>:<body>`` with a Content-Length."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    out = b"ok:" + scope["path"].encode() + b":" + body
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(out))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


MAX_BODY = 1000


@pytest.fixture(scope="module", params=["polystream", "uvicorn"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    running: Any
    if request.param == "polystream":
        running = OwnServer(_app, head_timeout=0.3, max_body_bytes=MAX_BODY)
    else:
        running = UvicornServer(_app)
    try:
        yield running
    finally:
        running.stop()


def _talk(port: int, data: bytes, *, wait: float = 0.3) -> tuple[bytes, bool]:
    return talk(port, data, wait=wait)


def _refusal(status: int, reason: str, message: str) -> bytes:
    """polystream's answer to a refused request (its date left out)."""
    body = message.encode()
    return (
        b"HTTP/1.1 %d %b\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%b" % (status, reason.encode(), len(body), body)
    )


UVICORN_400 = (
    b"HTTP/1.1 400 Bad Request\r\nserver: uvicorn\r\ncontent-type: text/plain; charset=utf-8"
    b"\r\ncontent-length: 30\r\nconnection: close\r\n\r\nInvalid HTTP request received."
)


def _ok(path: str, body: bytes, *, close: bool = False) -> bytes:
    out = b"ok:" + path.encode() + b":" + body
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n%b\r\n%b" % (
        len(out),
        b"connection: close\r\n" if close else b"",
        out,
    )


def _uvicorn_ok(path: str, body: bytes, *, close: bool = False) -> bytes:
    out = b"ok:" + path.encode() + b":" + body
    return (
        b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: text/plain\r\n"
        b"content-length: %d\r\n%b\r\n%b"
        % (len(out), b"connection: close\r\n" if close else b"", out)
    )


BAD = "Bad Request"
CHUNKED = b"Transfer-Encoding: chunked\r\n"

# (request, polystream's answer, uvicorn's answer or None: the same 400 as uvicorn gives
# every request llhttp refuses); every refusal closes the connection.
MATRIX: dict[str, tuple[bytes, bytes, bytes | None]] = {
    "cl-then-te": (
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n" + CHUNKED + b"\r\n0\r\n\r\n",
        _refusal(
            400, BAD, "malformed request: Transfer-Encoding can't be present with Content-Length"
        ),
        None,
    ),
    "te-then-cl": (
        b"POST / HTTP/1.1\r\nHost: h\r\n" + CHUNKED + b"Content-Length: 5\r\n\r\n0\r\n\r\n",
        _refusal(
            400, BAD, "malformed request: Content-Length can't be present with Transfer-Encoding"
        ),
        None,
    ),
    "duplicate-cl-same": (
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
        _refusal(400, BAD, "malformed request: Duplicate Content-Length"),
        None,
    ),
    "duplicate-cl-different": (
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        _refusal(400, BAD, "malformed request: Duplicate Content-Length"),
        None,
    ),
    "te-chunked-identity": (
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        _refusal(400, BAD, "malformed request: Invalid `Transfer-Encoding` header value"),
        None,
    ),
    "te-xchunked": (
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        _refusal(400, BAD, "chunked is not the last transfer coding"),
        None,
    ),
    "te-gzip-chunked": (
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        _refusal(501, "Not Implemented", "unsupported transfer codings b'gzip, chunked'"),
        # uvicorn hands the app the chunked body and never undoes the gzip coding.
        _uvicorn_ok("/", b""),
    ),
    "te-name-after-space": (
        # A header line starting with a space: obsolete line folding, refused.
        b"POST / HTTP/1.1\r\nHost: h\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        _refusal(400, BAD, "malformed request: Unexpected whitespace after header value"),
        None,
    ),
    "te-value-after-spaces": (
        # Optional whitespace before a value is allowed (RFC 9110, 5.5): chunked.
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:   chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        _ok("/", b"ab"),
        _uvicorn_ok("/", b"ab"),
    ),
    "te-capitalized": (
        # Transfer codings are case-insensitive (RFC 9112, 7).
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        _ok("/", b"ab"),
        _uvicorn_ok("/", b"ab"),
    ),
    "te-in-http-1.0": (
        b"POST / HTTP/1.0\r\nHost: h\r\n" + CHUNKED + b"\r\n2\r\nab\r\n0\r\n\r\n",
        _refusal(400, BAD, "Transfer-Encoding in an HTTP/1.0 request"),
        # uvicorn decodes the chunked body, then closes the connection (RFC 9112, 6.1).
        _uvicorn_ok("/", b"ab", close=True),
    ),
    "http-1.0-te-keep-alive-smuggling": (
        b"POST / HTTP/1.0\r\nHost: h\r\n" + CHUNKED + b"Connection: keep-alive\r\n\r\n"
        b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
        _refusal(400, BAD, "Transfer-Encoding in an HTTP/1.0 request"),
        # uvicorn answers the first request and closes: /smuggled is not answered.
        _uvicorn_ok("/", b"", close=True),
    ),
    "obs-fold": (
        b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n folded\r\n\r\n",
        _refusal(400, BAD, "malformed request: Unexpected whitespace after header value"),
        None,
    ),
    "duplicate-host": (
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        _refusal(400, BAD, "more than one Host header"),
        # uvicorn leaves Host to the application.
        _uvicorn_ok("/", b""),
    ),
    "no-host-in-http-1.1": (
        b"GET / HTTP/1.1\r\n\r\n",
        _refusal(400, BAD, "no Host header"),
        # uvicorn leaves Host to the application.
        _uvicorn_ok("/", b""),
    ),
    "bare-lf": (
        b"GET / HTTP/1.1\nHost: h\n\n",
        _refusal(400, BAD, "malformed request: Expected CRLF after version"),
        None,
    ),
    "bare-cr": (
        b"GET / HTTP/1.1\rHost: h\r\r",
        _refusal(400, BAD, "malformed request: Expected CRLF after version"),
        None,
    ),
    "bare-cr-in-a-value": (
        b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n",
        _refusal(400, BAD, "malformed request: Missing expected LF after header value"),
        None,
    ),
    "oversize-head": (
        b"GET / HTTP/1.1\r\nHost: h\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
        _refusal(431, "Request Header Fields Too Large", "request head too large"),
        # uvicorn's httptools protocol sets no bound on a head.
        _uvicorn_ok("/", b""),
    ),
    "invalid-chunk-size": (
        b"POST / HTTP/1.1\r\nHost: h\r\n" + CHUNKED + b"\r\nzz\r\n",
        _refusal(400, BAD, "malformed request: Invalid character in chunk size"),
        None,
    ),
    "chunk-size-bare-lf": (
        b"POST / HTTP/1.1\r\nHost: h\r\n" + CHUNKED + b"\r\n2\nab\n0\n\n",
        _refusal(400, BAD, "malformed request: Missing expected CR after chunk size"),
        None,
    ),
    "chunked-body-over-the-limit": (
        b"POST / HTTP/1.1\r\nHost: h\r\n"
        + CHUNKED
        + b"\r\n%x\r\n" % (MAX_BODY + 1)
        + b"a" * (MAX_BODY + 1)
        + b"\r\n0\r\n\r\n",
        _refusal(413, "Content Too Large", "request body over 1000 bytes"),
        # uvicorn sets no bound on a body: the application's to set.
        _uvicorn_ok("/", b"a" * (MAX_BODY + 1)),
    ),
}


@pytest.mark.parametrize("case", list(MATRIX))
def test_hostile_requests(server: Any, case: str) -> None:
    request, own, other = MATRIX[case]
    expected = own if server.kind == "polystream" else (other or UVICORN_400)
    out, closed = _talk(server.port, request)
    assert DATE.sub(b"", out) == expected
    # A refusal, or an HTTP/1.0 request, ends the connection; an answered HTTP/1.1
    # request keeps it.
    assert closed is (b"connection: close\r\n" in expected)
    assert b"smuggled" not in out


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(server: Any) -> None:
    head = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)
    out, closed = _talk(server.port, head, wait=0.5)  # no byte of the body is sent
    if server.kind == "polystream":
        assert DATE.sub(b"", out) == _refusal(
            413, "Content Too Large", "request body of 1001 bytes, over 1000"
        )
        assert closed
    else:
        # uvicorn sets no bound on a body: it waits for the body, for the application.
        assert (out, closed) == (b"", False)


def test_a_head_dribbled_slower_than_the_head_timeout(server: Any) -> None:
    # A byte every 0.05 s: polystream's head timeout (0.3 s here) closes the
    # connection, answering nothing. uvicorn has no head timeout (its keep-alive
    # timeout stops at a request's first byte): the head is read whenever it ends.
    head = b"GET /slow HTTP/1.1\r\nHost: h\r\n"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        started = time.monotonic()
        closed = False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
                if select.select([sock], [], [], 0.05)[0] and sock.recv(100) == b"":
                    closed = True
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            if closed:
                break
        elapsed = time.monotonic() - started
        if server.kind == "polystream":
            assert closed and 0.3 <= elapsed < 1.0
        else:
            assert not closed and elapsed > 1.4
            sock.sendall(b"\r\n")
            sock.settimeout(1.0)
            out = b""
            while not out.endswith(b"ok:/slow:"):
                out += sock.recv(1000)
            assert DATE.sub(b"", out) == _uvicorn_ok("/slow", b"")


# -- the connection cap ------------------------------------------------------------------------


def _held(port: int, count: int) -> list[socket.socket]:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for sock in socks:
        sock.settimeout(2.0)
    return socks


GET = b"GET /real HTTP/1.1\r\nHost: h\r\n\r\n"


@pytest.mark.parametrize("kind", ["polystream", "uvicorn"])
def test_connections_past_the_cap_are_refused(kind: str) -> None:
    # max_connections=5 (uvicorn: the limit_concurrency the gateway passes for it): 5
    # idle connections held; a 6th is refused; once one of the 5 closes, a request is
    # answered. polystream refuses the 6th connection at once (503, Retry-After, closed);
    # uvicorn accepts it and answers its first request 503 (its check is per request).
    running: Any = (
        OwnServer(_app, max_connections=5, keepalive_timeout=5.0)
        if kind == "polystream"
        else UvicornServer(_app, max_connections=5)
    )
    try:
        held = _held(running.port, 5)
        time.sleep(0.1)  # the server has them all
        if kind == "polystream":
            out, closed = _talk(running.port, b"", wait=1.0)
            assert DATE.sub(b"", out) == (
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8"
                b"\r\ncontent-length: 20\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
                b"too many connections"
            )
            assert closed
            assert running.server.refused == 1
        else:
            out, closed = _talk(running.port, GET, wait=1.0)
            assert DATE.sub(b"", out) == (
                b"HTTP/1.1 503 Service Unavailable\r\nserver: uvicorn\r\ncontent-type: text/plain; "
                b"charset=utf-8\r\ncontent-length: 19\r\nconnection: close\r\n\r\n"
                b"Service Unavailable"
            )
            assert closed
        held.pop().close()
        time.sleep(0.1)  # the server has seen it go
        out, closed = _talk(running.port, GET, wait=0.5)
        expected = _ok("/real", b"") if kind == "polystream" else _uvicorn_ok("/real", b"")
        assert (DATE.sub(b"", out), closed) == (expected, False)
        for sock in held:
            sock.close()
    finally:
        running.stop()


def test_the_connection_cap_default_and_its_gateway_setting() -> None:
    assert ServerLimits().max_connections == 1024
    assert Limits().max_connections == 1024
    assert Limits(max_connections=5).max_connections == 5
    with pytest.raises(ValueError, match="max_connections must be at least 1"):
        ServerLimits(max_connections=0)


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENETDOWN])
def test_accept_errors_are_logged_at_a_bounded_rate(
    code: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Every accept fails (out of file descriptors, retried at once; or an error
    # asyncio does not retry on its own, raised again on every turn of the loop) for
    # 0.5 s: one line, not one per attempt.
    monkeypatch.setattr(asyncio.constants, "ACCEPT_RETRY_DELAY", 0.001)
    attempts = 0
    real_accept = socket.socket.accept

    def failing_accept(self: socket.socket) -> Any:
        nonlocal attempts
        if self.getsockname()[1] == port:
            attempts += 1
            raise OSError(code, "simulated")
        return real_accept(self)

    async def main() -> None:
        nonlocal port
        server = H1Server(_app)
        await server.start("127.0.0.1", 0)
        port = server.port
        monkeypatch.setattr(socket.socket, "accept", failing_accept)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(0.5)
            writer.close()
        finally:
            monkeypatch.setattr(socket.socket, "accept", real_accept)
            await server.shutdown()

    port = -1
    caplog.set_level(logging.DEBUG)
    began = time.monotonic()
    asyncio.run(main())
    seconds = time.monotonic() - began
    assert attempts > 20
    # One line per kind: the failed accept; for EMFILE also asyncio's retries that
    # fire after the shutdown closed the socket.
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert {r.name for r in lines} == {"polystream.server"}
    failed = (
        "socket.accept() out of system resource: OSError(24, 'simulated')"
        if code == errno.EMFILE
        else "Exception in callback BaseSelectorEventLoop._accept_connection("
    )
    assert lines[0].getMessage().startswith(failed)
    assert "simulated" in lines[0].getMessage()
    # At most one line of the failed accept per second (a loaded machine may stretch
    # the half second past one); each later one counts the lines it stands for.
    again = [r.getMessage() for r in lines[1:] if r.getMessage().startswith(failed)]
    assert len(again) <= int(seconds)
    assert all("more like it in the last 1 s not logged)" in line for line in again)
    rest = [r.getMessage()[:58] for r in lines[1:] if not r.getMessage().startswith(failed)]
    assert rest == (
        ["Exception in callback BaseSelectorEventLoop._start_serving"]
        if code == errno.EMFILE
        else []
    )


@pytest.mark.parametrize("option", ["polystream", "uvicorn"])
def test_the_gateway_passes_its_limits_to_the_server(
    option: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The config's limits.max_connections (and max_body_bytes, for polystream's own
    # server) reach the server the gateway runs on.
    from polystream.cli import _heap, main
    from polystream.server import _h1server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(_heap, "settle_heap", lambda: None)
    monkeypatch.setattr(_h1server, "run", lambda app, sock, **kw: seen.update(kw))

    def serve(self: uvicorn.Server, sockets: list[Any]) -> None:
        seen.update(limit_concurrency=self.config.limit_concurrency)

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    config = tmp_path / "gateway.json"
    config.write_text(
        '{"upstreams": {"u": {"dialect": "openai_chat", "base_url": "http://127.0.0.1:9"}},'
        ' "limits": {"max_connections": 7, "max_body_bytes": 4096}}'
    )
    argv = ["gateway", "--config", str(config), "--listen", "127.0.0.1:0", "--server", option]
    assert main(argv) == 0
    if option == "polystream":
        from polystream.server._refusals import gateway_refusal

        assert seen == {
            "refusal": gateway_refusal,
            "max_connections": 7,
            "max_body_bytes": 4096,
            "ssl": None,  # (no --tls)
        }
    else:
        assert seen == {"limit_concurrency": 8}


# -- the upstream client: malformed replies -----------------------------------------------------

REPLY_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
CUT_SHORT = "peer closed connection without sending complete message body"

# reply: the exact httpx.RemoteProtocolError message
REPLIES: dict[str, tuple[bytes, str]] = {
    "bad-chunk-size": (
        REPLY_CHUNKED + b"zz\r\nab\r\n0\r\n\r\n",
        "malformed response: Invalid character in chunk size",
    ),
    "bare-lf-chunk-lines": (
        REPLY_CHUNKED + b"2\nab\n0\n\n",
        "malformed response: Missing expected CR after chunk size",
    ),
    "bare-lf-head": (
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
        "malformed response: Missing expected CR after response line",
    ),
    "cl-and-te": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "malformed response: Transfer-Encoding can't be present with Content-Length",
    ),
    "duplicate-cl": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
        "malformed response: Duplicate Content-Length",
    ),
    "oversize-head": (
        b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
        "response head too long",
    ),
    "truncated-length-body": (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", CUT_SHORT),
    "truncated-chunked-body": (REPLY_CHUNKED + b"5\r\nhel", CUT_SHORT),
}


@pytest.mark.parametrize("client_kind", ["transport", "direct"])
@pytest.mark.parametrize("case", list(REPLIES))
def test_malformed_replies_are_typed_errors(client_kind: str, case: str) -> None:
    from polystream.client._h1 import AsyncH1Transport, DirectClient

    reply, message = REPLIES[case]

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def main() -> int:
        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        transport = AsyncH1Transport()
        timeout = httpx.Timeout(2.0)
        try:
            async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
                with pytest.raises(httpx.RemoteProtocolError) as raised:
                    if client_kind == "transport":
                        await (await client.get(url)).aread()
                    else:
                        direct = DirectClient(
                            transport, timeout=timeout, fallback=client, user_agent="t"
                        )
                        async with direct.stream("GET", url, headers={}) as response:
                            await response.aread()
                assert str(raised.value) == message
                return transport._open  # the connection is not kept
        finally:
            server.close()

    assert asyncio.run(main()) == 0
