"""polystream's HTTP/1.1 server for ASGI apps: exact bytes on the wire for what it
answers, the ASGI messages the app sees, request bodies in any split, keep-alive and
pipelining, what it refuses, app failures, disconnects, timeouts, flow control,
lifespan and shutdown. Requests are written by hand from RFC 9112."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.server import _h1server
from polystream.server._h1server import H1Server, ServerLimits

Scope = dict[str, Any]
App = Callable[[Any, Any, Any], Awaitable[None]]
DATE = re.compile(rb"date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n")


def _no_date(data: bytes) -> bytes:
    return DATE.sub(b"", data)


class Recorder:
    """An app that records what it receives and answers ``text/plain`` ``ok:<body>``."""

    def __init__(self, *, length: bool = False) -> None:
        self.scopes: list[Scope] = []
        self.messages: list[dict[str, Any]] = []
        self.length = length

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.scopes.append(scope)
        body = b""
        while True:
            message = await receive()
            self.messages.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        out = b"ok:" + body
        headers = [(b"content-type", b"text/plain")]
        if self.length:
            headers.append((b"content-length", b"%d" % len(out)))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})


def _run(
    app: App,
    scenario: Callable[[H1Server], Awaitable[Any]],
    *,
    lifespan: bool = False,
    **limits: Any,
) -> Any:
    """Serve ``app``; without ``lifespan``, only its ``http`` scopes reach it (as if it
    answered the lifespan protocol by returning)."""

    async def http_only(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await app(scope, receive, send)

    async def main() -> Any:
        server = H1Server(app if lifespan else http_only, limits=ServerLimits(**limits))
        await server.start("127.0.0.1", 0)
        try:
            return await scenario(server)
        finally:
            await server.shutdown()

    return asyncio.run(main())


async def _talk(
    port: int, parts: list[bytes] | bytes, *, pause: float = 0.0, timeout: float = 2.0
) -> bytes:
    """Write the parts (each its own segment), then read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for part in [parts] if isinstance(parts, bytes) else parts:
        writer.write(part)
        await writer.drain()
        if pause:
            await asyncio.sleep(pause)
    try:
        async with asyncio.timeout(timeout):
            return await reader.read(-1)
    finally:
        writer.close()


GET = b"GET /a%20b/c?x=1&y=%2F HTTP/1.1\r\nHost: h\r\nX-Mixed-Case: V\r\nConnection: close\r\n\r\n"
OK_CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n"
    b"connection: close\r\n\r\n3\r\nok:\r\n0\r\n\r\n"
)


# -- requests and responses ---------------------------------------------------------------


def test_a_request_scope_and_a_chunked_response() -> None:
    app = Recorder()

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET)

    data = _run(app, scenario)
    assert DATE.search(data)
    assert _no_date(data) == OK_CHUNKED
    scope = app.scopes[0]
    omitted = ("client", "server", "extensions")
    assert {k: v for k, v in scope.items() if k not in omitted} == {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": "/a b/c",
        "raw_path": b"/a%20b/c",
        "query_string": b"x=1&y=%2F",
        "headers": [(b"host", b"h"), (b"x-mixed-case", b"V"), (b"connection", b"close")],
    }
    assert scope["client"][0] == "127.0.0.1" and scope["server"][0] == "127.0.0.1"
    assert list(scope["extensions"]) == [_h1server.SEND_NOWAIT]
    assert app.messages == [{"type": "http.request", "body": b"", "more_body": False}]


def test_the_head_leaves_with_the_first_body_bytes_in_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writes: list[bytes] = []
    real = _h1server._Connection.write

    def recording(self: Any, data: bytes) -> None:
        writes.append(data)
        real(self, data)

    monkeypatch.setattr(_h1server._Connection, "write", recording)

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET)

    assert _no_date(_run(Recorder(), scenario)) == OK_CHUNKED
    assert len(writes) == 1


def test_a_head_without_body_bytes_leaves_at_once() -> None:
    """A response whose first body bytes come later still shows its head at once."""
    go = asyncio.Event()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await go.wait()
        await send({"type": "http.response.body", "body": b"late"})

    async def scenario(server: H1Server) -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(GET)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2)
        go.set()
        rest = await asyncio.wait_for(reader.read(-1), 2)
        writer.close()
        return _no_date(head), rest

    head, rest = _run(app, scenario)
    assert head == b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    assert rest == b"4\r\nlate\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("request_line", "status", "headers", "expected"),
    [
        # Content-Length: the body as it is.
        (
            b"GET / HTTP/1.1",
            200,
            [(b"content-length", b"4")],
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbody",
        ),
        # HEAD: the head only.
        (
            b"HEAD / HTTP/1.1",
            200,
            [(b"content-length", b"4")],
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\n",
        ),
        # 204 and 304 have no body.
        (b"GET / HTTP/1.1", 204, [], b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n"),
        (b"GET / HTTP/1.1", 304, [], b"HTTP/1.1 304 Not Modified\r\nconnection: close\r\n\r\n"),
        # HTTP/1.0 without a length: delimited by the close.
        (b"GET / HTTP/1.0", 200, [], b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody"),
        # An unusual status keeps its number; the app's own framing headers give way.
        (
            b"GET / HTTP/1.1",
            599,
            [(b"transfer-encoding", b"gzip"), (b"x-a", b"1")],
            b"HTTP/1.1 599 Unknown\r\nx-a: 1\r\ntransfer-encoding: chunked\r\n"
            b"connection: close\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
        ),
    ],
)
def test_response_framings(
    request_line: bytes, status: int, headers: list[tuple[bytes, bytes]], expected: bytes
) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        body = b"body" if status not in (204, 304) else b""
        await send({"type": "http.response.body", "body": body})

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, request_line + b"\r\nHost: h\r\nConnection: close\r\n\r\n")

    assert _no_date(_run(app, scenario)) == expected


def test_keep_alive_and_pipelined_requests_answered_in_order() -> None:
    app = Recorder(length=True)
    one = b"POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nA"
    two = b"GET /2 HTTP/1.1\r\nHost: h\r\n\r\n"
    three = b"POST /3 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\nBC"

    async def scenario(server: H1Server) -> bytes:
        # The first alone, then the other two in one segment.
        return await _talk(server.port, [one, two + three], pause=0.05)

    data = _no_date(_run(app, scenario))
    assert data == (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nok:A"
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok:"
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n"
        b"connection: close\r\n\r\nok:BC"
    )
    assert [s["path"] for s in app.scopes] == ["/1", "/2", "/3"]


def test_http_1_0_keep_alive_when_asked() -> None:
    app = Recorder(length=True)
    request = b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"

    async def scenario(server: H1Server) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        out = b""
        for _ in range(2):
            writer.write(request)
            out += await asyncio.wait_for(reader.readuntil(b"ok:"), 2)
        writer.close()
        return out

    assert (
        _no_date(_run(app, scenario))
        == (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n"
            b"connection: keep-alive\r\n\r\nok:"
        )
        * 2
    )


def test_leading_blank_lines_are_ignored() -> None:
    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, b"\r\n\r\n" + GET)

    assert _no_date(_run(Recorder(), scenario)) == OK_CHUNKED


def test_an_upgrade_request_is_a_plain_request_and_the_next_one_is_read() -> None:
    # llhttp stops at an upgrade; the server takes none but WebSocket's (see
    # tests/gateway/test_h1_websocket.py), so what follows is HTTP.
    async def scenario(server: H1Server) -> bytes:
        return await _talk(
            server.port,
            b"GET /u HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n"
            b"GET /next HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        )

    app = Recorder(length=True)
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n"
    assert _no_date(_run(app, scenario)) == ok + b"\r\nok:" + ok + b"connection: close\r\n\r\nok:"
    assert [scope["path"] for scope in app.scopes] == ["/u", "/next"]


def test_header_values_lose_their_surrounding_whitespace() -> None:
    async def scenario(server: H1Server) -> bytes:
        return await _talk(
            server.port, b"GET / HTTP/1.1\r\nHost: h\r\nX-A: \t v w \t\r\nConnection: close\r\n\r\n"
        )

    app = Recorder(length=True)
    _run(app, scenario)
    assert app.scopes[0]["headers"] == [
        (b"host", b"h"),
        (b"x-a", b"v w"),
        (b"connection", b"close"),
    ]


# -- reads of any size -----------------------------------------------------------------------


class _Wire(asyncio.Transport):
    """A connection's transport, its bytes kept: the client's bytes reach the
    connection exactly as the reads a test gives, and closing it ends the connection
    as the event loop would."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.protocol = protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closed


def _read_in(app: Callable[[asyncio.Event], App], reads: list[bytes], **limits: Any) -> bytes:
    """What the server answers a client whose bytes arrive as ``reads``, one
    ``data_received`` each with a turn of the loop after it; the app is made with an
    event that is set once every read is in."""

    async def main() -> bytes:
        gate = asyncio.Event()
        server = H1Server(app(gate), limits=ServerLimits(**limits))
        conn = _h1server._Connection(server)
        wire = _Wire(conn)
        conn.connection_made(wire)
        for read in reads:
            if wire.closed:
                break
            conn.data_received(read)
            await asyncio.sleep(0)
        gate.set()
        for _ in range(100):  # the apps' turns
            await asyncio.sleep(0)
        return bytes(wire.out)

    return asyncio.run(main())


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_heads_in_one_byte_reads() -> None:
    # Two pipelined requests, blank lines before each, arrive a byte at a time. (Bare
    # LF line ends are refused: see test_abuse_matrix.py.)
    end = b"\r\n\r\n"
    one = b"\r\n\r\n" + b"GET /a HTTP/1.1\r\nHost: h\r\nX-One: 1" + end
    two = b"\r\n" + b"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close" + end
    recorders: list[Recorder] = []

    def app(gate: asyncio.Event) -> App:
        recorders.append(Recorder(length=True))
        return recorders[-1]

    whole = _no_date(_read_in(app, [one + two]))
    assert _no_date(_read_in(app, _pieces(one + two, 1))) == whole
    assert whole == (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok:"
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n"
        b"connection: close\r\n\r\nok:"
    )
    for recorder in recorders:
        assert [scope["path"] for scope in recorder.scopes] == ["/a", "/b"]
        assert recorder.scopes[0]["headers"] == [(b"host", b"h"), (b"x-one", b"1")]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_the_head_limit_holds_in_reads_of_any_size(size: int) -> None:
    # max_head_bytes=64: a head of 64 bytes before its blank line is read, whatever
    # part of its end a read brings; one of 65 is not, nor 65 bytes with no end of head
    # in them.
    def head(length: int) -> bytes:
        start = b"GET / HTTP/1.1\r\nHost: h\r\nX: "
        return start + b"a" * (length - len(start)) + b"\r\n\r\n"

    def app(gate: asyncio.Event) -> App:
        return Recorder(length=True)

    fits = _no_date(_read_in(app, _pieces(head(64), size), max_head_bytes=64))
    assert fits == b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok:"
    for request in (head(65), head(65)[:65]):
        refused = _read_in(app, _pieces(request, size), max_head_bytes=64)
        assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), refused


TRAILERS = (
    b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nabc\r\n0\r\nX-A: 1\r\nX-B: 2\r\nX-Long: " + b"z" * 40 + b"\r\n\r\n"
    b"GET /next HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
)


@pytest.mark.parametrize("size", [1, 2, 3, 5, len(TRAILERS)])
def test_trailer_lines_in_reads_of_any_size(size: int) -> None:
    # Trailer lines are dropped, not kept, a line cut by a read too. 8 + 8 + 50 = 66
    # trailer bytes (each line with its ": " and CRLF): within a limit of 66; over one
    # of 65, a 431 (the app, if it has the request, sees a disconnect).
    recorders: list[Recorder] = []

    def app(gate: asyncio.Event) -> App:
        recorders.append(Recorder(length=True))
        return recorders[-1]

    ok = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
    read = _no_date(_read_in(app, _pieces(TRAILERS, size), max_head_bytes=66))
    assert read == (ok % 6 + b"\r\nok:abc" + ok % 3 + b"connection: close\r\n\r\nok:")
    assert [scope["path"] for scope in recorders[-1].scopes] == ["/up", "/next"]
    refused = _no_date(_read_in(app, _pieces(TRAILERS, size), max_head_bytes=65))
    assert refused == (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; "
        b"charset=utf-8\r\ncontent-length: 24\r\nconnection: close\r\n\r\n"
        b"chunked trailer too long"
    )
    messages = recorders[-1].messages
    if size == len(TRAILERS):
        assert messages == []  # refused in the read that brought its head
    else:
        assert messages[-1] == {"type": "http.disconnect"}
        assert all(m["more_body"] for m in messages[:-1])  # the body never came whole


PIPELINE = (
    b"\r\nGET /one?x=1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n"
    b"POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
    b"POST /three HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2;x=y\r\nab\r\n3\r\ncde\r\n0\r\nX-T: 1\r\nX: 2\r\n\r\n"
    b"\r\n\r\nGET /four HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(PIPELINE) - 1), max_size=40))
def test_pipelined_requests_cut_anywhere_are_answered_as_if_read_whole(cuts: list[int]) -> None:
    # Four requests in one stream (blank lines before two of them; a query; a length
    # body; a chunked one with extensions and trailers; LF line ends in one), cut into
    # reads anywhere: the answer and what the app sees do not depend on the cuts.
    points = [0, *sorted(set(cuts)), len(PIPELINE)]
    reads = [PIPELINE[a:b] for a, b in itertools.pairwise(points)]
    seen: list[Recorder] = []

    def app(gate: asyncio.Event) -> App:
        seen.append(Recorder(length=True))
        return seen[-1]

    whole = _no_date(_read_in(app, [PIPELINE]))
    assert _no_date(_read_in(app, reads)) == whole
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
    assert whole == (
        ok % 3
        + b"\r\nok:"
        + ok % 8
        + b"\r\nok:hello"
        + ok % 8
        + b"\r\nok:abcde"
        + ok % 3
        + b"connection: close\r\n\r\nok:"
    )
    first, cut = seen
    assert [s["path"] for s in cut.scopes] == ["/one", "/two", "/three", "/four"]
    assert [(s["query_string"], s["headers"]) for s in cut.scopes] == [
        (s["query_string"], s["headers"]) for s in first.scopes
    ]
    bodies = [m for m in cut.messages if m["type"] == "http.request" and m["body"]]
    assert b"".join(m["body"] for m in bodies) == b"helloabcde"


def test_requests_read_ahead_in_one_byte_reads_while_a_response_runs() -> None:
    # The first response waits until every read is in; the two requests after it (one
    # with a 300-byte body) arrive a byte at a time meanwhile, and are answered in order.
    body = bytes(range(256)) + b"x" * 44
    first = b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n"
    ahead = (
        b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 300\r\n\r\n"
        + body
        + b"GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    )
    recorder = Recorder(length=True)

    def app(gate: asyncio.Event) -> App:
        async def gated(scope: Scope, receive: Any, send: Any) -> None:
            if scope["path"] == "/slow":
                await gate.wait()
            await recorder(scope, receive, send)

        return gated

    answer = _no_date(_read_in(app, [first, *_pieces(ahead, 1)]))
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
    assert answer == (
        ok % 3
        + b"\r\nok:"
        + ok % 303
        + b"\r\nok:"
        + body
        + ok % 3
        + b"connection: close\r\n\r\nok:"
    )
    assert [scope["path"] for scope in recorder.scopes] == ["/slow", "/up", "/last"]


def test_a_read_between_a_response_end_and_the_next_request_keeps_the_order() -> None:
    # /one's response ends with /two already read; in the same turn as the next
    # request is due, /three arrives (as a loop callback, like a socket read). /two
    # starts and waits; /three must wait for /two's end, not start beside it.
    one = b"GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
    two = b"GET /two HTTP/1.1\r\nHost: h\r\n\r\n"
    three = b"GET /three HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    started: list[str] = []

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        release = asyncio.Event()
        recorder = Recorder(length=True)

        async def app(scope: Scope, receive: Any, send: Any) -> None:
            started.append(scope["path"])
            if scope["path"] == "/one":
                loop.call_soon(conn.data_received, three)  # due before the next request
            elif scope["path"] == "/two":
                await release.wait()
            await recorder(scope, receive, send)

        server = H1Server(app)
        conn = _h1server._Connection(server)
        wire = _Wire(conn)
        conn.connection_made(wire)
        loop.call_soon(conn.data_received, one + two)
        for _ in range(20):
            await asyncio.sleep(0)
        assert started == ["/one", "/two"]
        release.set()
        for _ in range(20):
            await asyncio.sleep(0)
        return bytes(wire.out)

    answer = _no_date(asyncio.run(main()))
    assert started == ["/one", "/two", "/three"]
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n"
    assert answer == ok + b"\r\nok:" + ok + b"\r\nok:" + ok + b"connection: close\r\n\r\nok:"


# -- the app's first step ------------------------------------------------------------------


def _serve_read(
    app: App, data: bytes, after: Callable[[asyncio.Task[None]], None]
) -> tuple[asyncio.Task[None], bytes]:
    """Serve ``data`` to ``app`` in one read, made as a socket's read is (a callback of
    the loop, no task current), call ``after`` with the request's task right after that
    read, and wait for the task: the task, and the bytes written."""

    async def main() -> tuple[asyncio.Task[None], bytes]:
        server = H1Server(app)
        conn = _h1server._Connection(server)
        wire = _Wire(conn)
        conn.connection_made(wire)
        tasks: list[asyncio.Task[None]] = []

        def read() -> None:
            conn.data_received(data)
            (task,) = server.tasks  # one request, one task
            tasks.append(task)
            after(task)

        asyncio.get_running_loop().call_soon(read)
        await asyncio.sleep(0)
        with contextlib.suppress(asyncio.CancelledError):
            await tasks[0]
        return tasks[0], bytes(wire.out)

    return asyncio.run(main())


def test_the_apps_first_step_runs_in_the_read_that_completed_the_request() -> None:
    # Up to its first wait, the app runs within data_received, as the request's task
    # (current, with its own context: what it sets is not the connection's), and the
    # rest of it runs in that task as usual.
    seen: dict[str, Any] = {}
    request = contextvars.ContextVar("request", default="none")
    log: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        log.append("app")
        seen["task"] = asyncio.current_task()
        request.set(scope["path"])
        await receive()
        await asyncio.sleep(0)
        log.append("after a turn")
        seen["later"] = (asyncio.current_task(), request.get())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def after(task: asyncio.Task[None]) -> None:
        log.append("read done")
        seen["outside"] = request.get()

    data = b"GET /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    task, out = _serve_read(app, data, after)
    assert log == ["app", "read done", "after a turn"]
    assert seen["task"] is task
    assert seen["later"] == (task, "/p")
    assert seen["outside"] == "none"
    assert _no_date(out).endswith(b"\r\n\r\n2\r\nok\r\n0\r\n\r\n")


@pytest.mark.parametrize("how", ["returns", "raises", "cancelled"])
def test_an_app_done_or_cancelled_in_its_first_step_or_before_its_second(how: str) -> None:
    # An app that answers and returns within its first step; one that raises in it
    # (a 500, logged); one whose task is cancelled before its second step (the
    # coroutine gets the cancellation where it waits, and cleans up).
    log: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        log.append("app")
        if how == "raises":
            raise ValueError("boom")
        if how == "returns":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise

    def after(task: asyncio.Task[None]) -> None:
        if how == "cancelled":
            task.cancel()

    task, out = _serve_read(app, b"GET /p HTTP/1.1\r\nHost: h\r\n\r\n", after)
    head = _no_date(out).split(b"\r\n", 1)[0]
    if how == "returns":
        assert log == ["app"] and head == b"HTTP/1.1 204 No Content" and task.exception() is None
    elif how == "raises":
        assert log == ["app"] and head == b"HTTP/1.1 500 Internal Server Error"
    else:
        assert log == ["app", "cancelled"] and task.cancelled()


# -- request bodies ---------------------------------------------------------------------------

CHUNKED_BODY = (
    b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    b"3;ext=1\r\nabc\r\n1\r\nd\r\na\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n"
)
LENGTH_BODY = (
    b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 14\r\nConnection: close\r\n\r\nabcd0123456789"
)


@pytest.mark.parametrize("request_bytes", [CHUNKED_BODY, LENGTH_BODY], ids=["chunked", "length"])
@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_request_bodies_in_any_split(request_bytes: bytes, step: int) -> None:
    app = Recorder()
    parts = _pieces(request_bytes, step)

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, parts, pause=0.001 if step < 1000 else 0.0)

    data = _no_date(_run(app, scenario))
    assert data.endswith(b"\r\n\r\n11\r\nok:abcd0123456789\r\n0\r\n\r\n")
    assert b"".join(m["body"] for m in app.messages) == b"abcd0123456789"
    assert [m["more_body"] for m in app.messages][-1] is False
    assert all(m["type"] == "http.request" for m in app.messages)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(CHUNKED_BODY) - 1), max_size=8))
def test_a_chunked_request_cut_anywhere(cuts: list[int]) -> None:
    app = Recorder()
    points = [0, *sorted(set(cuts)), len(CHUNKED_BODY)]
    parts = [CHUNKED_BODY[a:b] for a, b in itertools.pairwise(points)]

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, parts, pause=0.001)

    assert _run(app, scenario).endswith(b"11\r\nok:abcd0123456789\r\n0\r\n\r\n")
    assert b"".join(m["body"] for m in app.messages) == b"abcd0123456789"


def test_expect_100_continue_is_answered_when_the_app_reads() -> None:
    app = Recorder(length=True)
    head = (
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
        b"Connection: close\r\n\r\n"
    )

    async def scenario(server: H1Server) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(head)
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2)
        writer.write(b"hi")
        rest = await asyncio.wait_for(reader.read(-1), 2)
        writer.close()
        return interim + rest

    assert _no_date(_run(app, scenario)) == (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n"
        b"connection: close\r\n\r\nok:hi"
    )


def test_a_response_before_the_body_is_read_closes_the_connection() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 413, "headers": []})
        await send({"type": "http.response.body", "body": b"no"})

    async def scenario(server: H1Server) -> bytes:
        # The body never comes; the connection still ends after the response.
        return await _talk(server.port, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99\r\n\r\n")

    assert _no_date(_run(app, scenario)) == (
        b"HTTP/1.1 413 Content Too Large\r\ntransfer-encoding: chunked\r\n"
        b"connection: close\r\n\r\n2\r\nno\r\n0\r\n\r\n"
    )


# -- what is refused ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 400),
        (b"G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET relative HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n folded\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nno-colon\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n", 417),
        (b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", 431),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: h\r\n\r\n", 431),
        (b"GET /" + b"a" * 70_000, 431),  # no end of head in sight
    ],
)
def test_bad_requests_get_a_status_and_a_closed_connection(
    request_bytes: bytes, status: int
) -> None:
    app = Recorder()

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, request_bytes)

    data = _run(app, scenario)
    assert data.startswith(b"HTTP/1.1 %d " % status), data[:80]
    assert b"\r\nconnection: close\r\n" in data
    assert app.scopes == []


@pytest.mark.parametrize("later", [False, True], ids=["one-read", "body-later"])
def test_a_malformed_chunked_body_gets_400_and_is_a_disconnect_for_the_app(later: bool) -> None:
    # Read with its head, the request never reaches the app; read once the app has
    # it, the app sees a disconnect. The client gets a 400 either way.
    app = Recorder()
    head = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"

    async def scenario(server: H1Server) -> bytes:
        parts = [head, b"zz\r\n"] if later else [head + b"zz\r\n"]
        return await _talk(server.port, parts, pause=0.05 if later else 0.0)

    assert _no_date(_run(app, scenario)) == (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: 50\r\nconnection: close\r\n\r\n"
        b"malformed request: Invalid character in chunk size"
    )
    assert app.messages == ([{"type": "http.disconnect"}] if later else [])


# -- the app failing ------------------------------------------------------------------------


def test_an_app_failing_before_its_response_gives_500(caplog: pytest.LogCaptureFixture) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        raise ValueError("boom")

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET.replace(b"Connection: close\r\n", b""))

    assert _no_date(_run(app, scenario)) == (
        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
        b"content-length: 21\r\nconnection: close\r\n\r\nInternal Server Error"
    )
    assert "the app failed on GET /a b/c" in caplog.text


@pytest.mark.parametrize("how", ["raises", "returns"])
def test_an_app_failing_mid_response_cuts_the_connection(how: str) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        if how == "raises":
            raise ValueError("boom")

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET)

    # No terminating chunk: the client sees a broken transfer, never a clean end.
    assert _no_date(_run(app, scenario)) == (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n4\r\npart\r\n"
    )


def test_an_app_returning_no_response_gives_500() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        return None

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET)

    assert _run(app, scenario).startswith(b"HTTP/1.1 500 Internal Server Error\r\n")


def test_protocol_misuse_by_the_app_is_an_error() -> None:
    errors: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        try:
            if scope["path"] == "/body-first":
                await send({"type": "http.response.body", "body": b"x"})
            else:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"a\n", b"b")]}
                )
        except RuntimeError as exc:
            errors.append(str(exc))
            raise

    async def scenario(server: H1Server) -> list[bytes]:
        return [
            await _talk(server.port, GET.replace(b"/a%20b/c", path))
            for path in (b"/body-first", b"/bad-header")
        ]

    replies = _run(app, scenario)
    assert all(r.startswith(b"HTTP/1.1 500 ") for r in replies)
    assert errors == [
        "expected http.response.start, got 'http.response.body'",
        "invalid response header b'a\\n'",
    ]


# -- disconnects, timeouts, flow control --------------------------------------------------------


def test_a_client_leaving_mid_response_is_a_disconnect_and_sends_are_ignored() -> None:
    seen: list[Any] = []
    done = asyncio.Event()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        seen.append(await receive())
        await send({"type": "http.response.body", "body": b"after", "more_body": True})
        seen.append("send ignored")
        done.set()

    async def scenario(server: H1Server) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(GET)
        data = await asyncio.wait_for(reader.readuntil(b"first\r\n"), 2)
        writer.close()
        await asyncio.wait_for(done.wait(), 2)
        return data

    _run(app, scenario)
    assert seen == [{"type": "http.disconnect"}, "send ignored"]


def test_after_the_response_receive_says_disconnect() -> None:
    seen: list[Any] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await receive()
        waiter = asyncio.ensure_future(receive())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        seen.append(await waiter)

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, GET)

    _run(app, scenario)
    assert seen == [{"type": "http.disconnect"}]


@pytest.mark.parametrize(
    ("parts", "option"),
    [
        ([], "keepalive_timeout"),  # idle from the start
        ([b"GET / HTTP/1.1\r\nHost"], "head_timeout"),  # a head that never ends
    ],
)
def test_idle_and_slow_connections_are_closed(parts: list[bytes], option: str) -> None:
    async def scenario(server: H1Server) -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        data = await _talk(server.port, parts, timeout=3)
        return data, loop.time() - started

    data, took = _run(Recorder(), scenario, **{option: 0.2})
    assert data == b""
    assert 0.15 < took < 2


def test_a_stalled_request_body_is_a_disconnect() -> None:
    app = Recorder()

    async def scenario(server: H1Server) -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        data = await _talk(
            server.port, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc", timeout=3
        )
        return data, loop.time() - started

    data, took = _run(app, scenario, body_timeout=0.2)
    assert data == b""
    assert 0.15 < took < 2
    assert app.messages == [
        {"type": "http.request", "body": b"abc", "more_body": True},
        {"type": "http.disconnect"},
    ]


def test_a_slow_but_steady_request_body_is_read() -> None:
    """The body timeout is a wait for the next byte, not for the whole body."""
    app = Recorder(length=True)
    body = b"0123456789"
    head = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\nConnection: close\r\n\r\n"
    parts = [head] + [body[i : i + 2] for i in range(0, 10, 2)]

    async def scenario(server: H1Server) -> bytes:
        return await _talk(server.port, parts, pause=0.1, timeout=5)

    data = _no_date(_run(app, scenario, body_timeout=0.3))
    assert data.endswith(b"\r\n\r\nok:0123456789")


def test_a_kept_alive_connection_is_closed_after_the_idle_timeout() -> None:
    async def scenario(server: H1Server) -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        first = await asyncio.wait_for(reader.readuntil(b"ok:"), 2)
        rest = await asyncio.wait_for(reader.read(-1), 2)  # closed by the server
        writer.close()
        return first, rest

    first, rest = _run(Recorder(length=True), scenario, keepalive_timeout=0.2)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert rest == b""


def test_a_slow_reader_holds_the_app_back() -> None:
    """Writes wait while the client does not read (bounded memory), and go on when it
    reads again."""
    progress: list[int] = []
    piece = b"x" * 65536

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(200):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            progress.append(i)
        await send({"type": "http.response.body", "body": b""})

    async def scenario(server: H1Server) -> tuple[int, int]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1 << 16)
        writer.transport.set_write_buffer_limits(0)
        writer.write(GET)
        await asyncio.sleep(0.3)
        stalled = len(progress)
        size = 0
        while chunk := await asyncio.wait_for(reader.read(1 << 20), 5):
            size += len(chunk)
        writer.close()
        return stalled, size

    stalled, size = _run(app, scenario)
    assert stalled < 200
    assert size > 200 * 65536


# -- lifespan and shutdown --------------------------------------------------------------------


def test_lifespan_startup_and_shutdown() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                seen.append(message["type"])
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        await Recorder()(scope, receive, send)

    async def scenario(server: H1Server) -> bytes:
        seen.append("serving")
        return await _talk(server.port, GET)

    assert _no_date(_run(app, scenario, lifespan=True)) == OK_CHUNKED
    assert seen == ["lifespan.startup", "serving", "lifespan.shutdown"]


def test_a_failed_startup_stops_the_server() -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    async def main() -> None:
        await H1Server(app).start("127.0.0.1", 0)

    with pytest.raises(RuntimeError, match="lifespan startup failed"):
        asyncio.run(main())


def test_shutdown_lets_running_requests_finish_and_closes_idle_connections() -> None:
    release = asyncio.Event()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await release.wait()
        await Recorder(length=True)(scope, receive, send)

    async def main() -> tuple[bytes, bytes]:
        server = H1Server(app, limits=ServerLimits(shutdown_timeout=2))
        await server.start("127.0.0.1", 0)
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port)
        busy = asyncio.ensure_future(_talk(server.port, GET))
        await asyncio.sleep(0.05)
        stopping = asyncio.ensure_future(server.shutdown())
        await asyncio.sleep(0.05)
        release.set()
        await stopping
        idle = await asyncio.wait_for(idle_reader.read(-1), 2)
        idle_writer.close()
        with contextlib.suppress(ConnectionError):
            await asyncio.open_connection("127.0.0.1", server.port)
            raise AssertionError("still listening")
        return await busy, idle

    busy, idle = asyncio.run(main())
    assert _no_date(busy).endswith(b"\r\n\r\nok:")
    assert idle == b""


@pytest.mark.parametrize("loop_handlers", [True, False])
def test_run_serves_until_sigterm(monkeypatch: pytest.MonkeyPatch, loop_handlers: bool) -> None:
    """``run()`` stops on SIGTERM, through the loop's signal handlers or, where the loop
    has none (Windows), through a plain handler."""
    refused: list[Any] = []
    if not loop_handlers:

        def unsupported(self: Any, sig: Any, *args: Any) -> None:
            refused.append(sig)
            raise NotImplementedError

        monkeypatch.setattr(asyncio.SelectorEventLoop, "add_signal_handler", unsupported)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    replies: list[bytes] = []

    def client() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                    conn.sendall(GET)
                    replies.append(conn.makefile("rb").read())
                break
            except OSError:
                time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await Recorder()(scope, receive, send)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        _h1server.run(app, "127.0.0.1", port)
    finally:
        thread.join(10)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert [_no_date(r) for r in replies] == [OK_CHUNKED]
    assert refused == ([] if loop_handlers else [signal.SIGINT, signal.SIGTERM])
