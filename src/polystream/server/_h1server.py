"""A lean HTTP/1.1 server for ASGI apps on plain asyncio: what ``polystream gateway``
serves with. Requests are parsed by llhttp (through ``httptools``), in strict mode.

A gateway stands between a client and an upstream, so every microsecond it spends on a
request is added to the client's latency. This server keeps that small: each read is
parsed once, the app runs in a task whose first step runs in the read that completed
the request's head (a gateway's upstream request leaves in that same turn of the
loop), and a response's head leaves in the same write as its first body bytes (one
segment, one wake-up of the client, instead of two).

Scope: HTTP/1.1 and 1.0 over TCP; keep-alive; pipelined requests answered in order;
request bodies by ``Content-Length`` or chunked; ``Expect: 100-continue``; responses by
``Content-Length``, chunked (HTTP/1.1) or delimited by the close (HTTP/1.0). ASGI 3:
the ``http`` and ``lifespan`` scopes (no WebSocket: an upgrade request is a plain
request to the app). What it refuses, with a status and a closed connection: anything
llhttp's strict mode refuses (a malformed request line, header or chunk framing, bare
CR or LF line ends, obsolete line folding, both ``Content-Length`` and
``Transfer-Encoding``, a repeated ``Content-Length``, chunked not the last coding: 400),
and what it leaves to the application: an HTTP version other than 1.0 and 1.1, no
``Host`` in HTTP/1.1 or more than one, ``Transfer-Encoding`` in HTTP/1.0 (400); a head
over 64 KiB or 100 headers (431); a transfer coding other than chunked (501); a
declared ``Content-Length`` over ``max_body_bytes``, before any of the body is read, or
a chunked body growing past it (413); an expectation other than ``100-continue`` (417).
Connections past ``max_connections`` get a 503 with ``Retry-After`` and are closed.
These refusals are plain text, unless the server was given a ``refusal`` hook (see
:data:`Refusal`): a 413 then has the body and headers the hook makes for the request's
path (the application's own error shape); the connection-cap 503 is answered before
any of the request is read, so it stays plain.

Connections are bounded in time: one idle between requests is closed after
``keepalive_timeout``; a request head must arrive whole within ``head_timeout`` of its
first byte; a request body may not go ``body_timeout`` without a byte arriving (the app
then sees a disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import logging
import re
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

import httptools

from polystream.wire._http1 import open_head_size

__all__ = ["SEND_NOWAIT", "H1Server", "Refusal", "ServerLimits", "run"]

logger = logging.getLogger("polystream.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]

Refusal = Callable[[int, str, str], tuple[list[tuple[bytes, bytes]], bytes]]
"""A hook that shapes the server's own refusals: ``refusal(status, path, message)``
gives the response headers (its ``content-type`` among them) and body for a refused
request whose path is known. The server adds ``content-length``, ``connection: close``,
``date`` and, where it has one, ``retry-after``. It runs in the read that refused the
request, so it is to be quick and not to wait; if it raises, the refusal is plain
text."""

_TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
SEND_NOWAIT: Final = "polystream.send_nowait"
"""The key, in an HTTP scope's ``extensions``, of the request's synchronous body send
(see :meth:`_Cycle.send_nowait`)."""
_REASONS: Final = {
    400: b"Bad Request",
    413: b"Content Too Large",
    417: b"Expectation Failed",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
}
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

# Response body framings.
_NONE, _OUT_LENGTH, _OUT_CHUNKED, _OUT_CLOSE = range(4)


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on what a client may make the server hold.

    Attributes:
        max_head_bytes: Largest request head (request line and headers).
        max_headers: Most header lines in a request.
        keepalive_timeout: Seconds an idle connection is kept between requests.
        head_timeout: Seconds a request head may take to arrive, from its first byte.
        body_timeout: Seconds a request body may go without a byte arriving (while the
            app is ready for more of it).
        max_buffered_bytes: Request bytes read ahead of the app (a body not yet
            received, a pipelined request) before reading pauses.
        shutdown_timeout: Seconds running requests get to finish at shutdown.
        max_body_bytes: Largest request body (413 past it; a declared
            ``Content-Length`` past it is refused before the body is read); None: no
            bound.
        max_connections: Connections open at once; one past it is answered 503 with
            ``Retry-After`` and closed.
    """

    max_head_bytes: int = 64 * 1024
    max_headers: int = 100
    keepalive_timeout: float = 5.0
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_buffered_bytes: int = 1024 * 1024
    shutdown_timeout: float = 5.0
    max_body_bytes: int | None = None
    max_connections: int = 1024

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


class _Date:
    """The ``Date`` header, formatted once a second."""

    second = -1
    value = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second = second
            cls.value = email.utils.formatdate(second, usegmt=True).encode("ascii")
        return cls.value


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    """Wake the task waiting on ``waiter``, if one is."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class _Started(Coroutine[Any, Any, Any]):
    """A coroutine whose first step ran ahead of the task that runs the rest of it: that
    task's first step gives what the first one ended with (what it awaits, its return
    or its exception), and every step after goes to the coroutine.

    What Python 3.12's eager tasks do, for 3.11 (see :func:`_start_task`).
    """

    __slots__ = ("_coro", "_first", "_raised")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self._first: Any = None
        self._raised: BaseException | None = None

    def step(self) -> None:
        try:
            self._first = self._coro.send(None)
        except BaseException as exc:  # its return (StopIteration) too
            self._raised = exc

    def send(self, value: Any) -> Any:
        raised = self._raised
        if raised is not None:
            self._raised = None
            raise raised
        first = self._first
        if first is not None:
            self._first = None
            return first
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self._first = self._raised = None
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a started task's coroutine is not awaited")


def _start_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]
) -> asyncio.Task[None]:
    """A task for ``coro`` whose first step runs now, not at the next turn of the loop.

    A request's first step (its parse, the app's work up to its first wait: for a
    gateway, the upstream request) then leaves in the same turn as the read that
    completed the request: one turn of the loop less on every request's path, which on
    a machine that wakes to cold caches is tens of microseconds. The step runs with the
    task current and in the task's own context, as a task's steps do. From within
    another task (never the case for a protocol's callbacks), a task as usual.
    """
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True)
    if asyncio.current_task(loop) is not None:
        return loop.create_task(coro)
    started = _Started(coro)
    context = contextvars.copy_context()
    task = loop.create_task(started, context=context)  # its first step: the next turn
    asyncio.tasks._enter_task(loop, task)
    try:
        context.run(started.step)
    finally:
        asyncio.tasks._leave_task(loop, task)
    return task


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.path = path
        """The refused request's path, where it is known and the refusal is one a
        :data:`Refusal` hook shapes."""


class _Cycle:
    """One request and its response."""

    __slots__ = (
        "app_waiter",
        "body",
        "body_done",
        "body_size",
        "complete",
        "conn",
        "continue_sent",
        "expect_continue",
        "head_size",
        "keep_alive",
        "minor",
        "out_framing",
        "out_remaining",
        "pending_head",
        "received",
        "request_sent",
        "scope",
        "started",
        "trailer",
    )

    def __init__(
        self,
        conn: _Connection,
        scope: Scope,
        *,
        has_body: bool,
        head_size: int,
        minor: int,
        keep_alive: bool,
        expect_continue: bool,
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.head_size = head_size
        self.minor = minor
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.continue_sent = False
        self.body: list[bytes] = []
        self.body_size = 0  # body bytes held for the app
        self.received = 0  # body bytes read in all
        self.body_done = not has_body
        self.request_sent = False
        self.trailer = 0  # trailer bytes so far (its lines are dropped, not kept)
        self.app_waiter: asyncio.Future[None] | None = None
        self.started = False
        self.complete = False
        self.pending_head: bytes | None = None
        self.out_framing = _NONE
        self.out_remaining = 0
        scope["extensions"] = {SEND_NOWAIT: self.send_nowait}

    # -- the request body -------------------------------------------------------------

    def _add(self, data: bytes) -> None:
        self.body.append(data)
        self.body_size += len(data)

    def _wake(self) -> None:
        _resolve(self.app_waiter)

    async def receive(self) -> Message:
        conn = self.conn
        while True:
            if conn.closed or self.complete:
                return {"type": "http.disconnect"}
            if self.body or (self.body_done and not self.request_sent):
                body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
                self.body = []
                self.body_size = 0
                self.request_sent = self.body_done
                conn.resume()
                return {"type": "http.request", "body": body, "more_body": not self.body_done}
            if self.expect_continue and not self.continue_sent and not self.started:
                self.continue_sent = True
                conn.write(_CONTINUE)
            waiter = self.app_waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self.app_waiter = None

    # -- the response -----------------------------------------------------------------

    async def send(self, message: Message) -> None:
        conn = self.conn
        if conn.write_paused and not conn.closed:
            await conn.drain()
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {kind!r}")
            self._start(message)
            self.started = True
            return
        self._body(message)

    def send_nowait(self, message: Message) -> bool:
        """``send`` without waiting, from any callback: False (nothing sent) when it
        would wait, that is for a body message while the connection is not taking
        writes. The ASGI scope's ``extensions`` name it :data:`SEND_NOWAIT`; an app
        may use it beside ``send``, one message after another as with ``send``.
        """
        if not self.started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {message['type']!r}")
            self._start(message)
            self.started = True
            return True
        conn = self.conn
        if conn.write_paused and not conn.closed:
            return False
        self._body(message)
        return True

    def _body(self, message: Message) -> None:
        kind = message["type"]
        if kind != "http.response.body":
            raise RuntimeError(f"expected http.response.body, got {kind!r}")
        if self.complete:
            raise RuntimeError("the response is already complete")
        conn = self.conn
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        framing = self.out_framing
        if framing == _OUT_CHUNKED:
            out = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more:
                out += b"0\r\n\r\n"
        elif framing == _OUT_LENGTH:
            if len(body) > self.out_remaining:
                raise RuntimeError("the response body is longer than its Content-Length")
            self.out_remaining -= len(body)
            if not more and self.out_remaining:
                raise RuntimeError("the response body is shorter than its Content-Length")
            out = body
        elif framing == _OUT_CLOSE:
            out = body
        else:
            out = b""
        head = self.pending_head
        if head is not None:
            self.pending_head = None
            out = head + out
        if out and not conn.closed:
            conn.write(out)
        if not more:
            self.complete = True
            self._wake()
            conn.finished(self)

    def _start(self, message: Message) -> None:
        status = int(message["status"])
        scope = self.scope
        parts = [b"HTTP/1.1 %d %b\r\n" % (status, _reason(status))]
        length: int | None = None
        own_date = False
        for name, value in message.get("headers", ()):
            if _TOKEN.fullmatch(name) is None or b"\r" in value or b"\n" in value:
                raise RuntimeError(f"invalid response header {name!r}")
            lowered = name.lower()
            if lowered == b"content-length":
                length = int(value)
            elif lowered == b"transfer-encoding":
                continue  # the framing is the server's
            elif lowered == b"connection":
                if b"close" in value.lower():
                    self.keep_alive = False
                continue
            elif lowered == b"date":
                own_date = True
            parts += (name, b": ", value, b"\r\n")
        if not own_date:
            parts += (b"date: ", _Date.now(), b"\r\n")
        if scope["method"] == "HEAD" or status in (204, 304) or status < 200:
            self.out_framing = _NONE
        elif length is not None:
            self.out_framing = _OUT_LENGTH
            self.out_remaining = length
        elif self.minor == 1:
            self.out_framing = _OUT_CHUNKED
            parts.append(b"transfer-encoding: chunked\r\n")
        else:
            self.out_framing = _OUT_CLOSE
            self.keep_alive = False
        if not self.body_done:
            self.keep_alive = False  # the rest of the request body will not be read
        if not self.keep_alive:
            parts.append(b"connection: close\r\n")
        elif self.minor == 0:
            parts.append(b"connection: keep-alive\r\n")
        parts.append(b"\r\n")
        self.pending_head = b"".join(parts)
        # The head leaves with the first body bytes when they follow at once (the usual
        # case), else at the end of this turn of the loop.
        asyncio.get_running_loop().call_soon(self._flush_head)

    def _flush_head(self) -> None:
        head = self.pending_head
        if head is not None and not self.conn.closed:
            self.pending_head = None
            self.conn.write(head)


_PHRASES: dict[int, bytes] = dict(_REASONS)


def _reason(status: int) -> bytes:
    reason = _PHRASES.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase.encode("ascii")
        except ValueError:
            reason = b"Unknown"
        if len(_PHRASES) < 1000:
            _PHRASES[status] = reason
    return reason


def _target_path(target: bytes) -> str | None:
    """The path of a request target (origin or absolute form), None for another form
    or one that is not ASCII."""
    if target.startswith((b"http://", b"https://")):
        after = target.partition(b"://")[2]
        slash = after.find(b"/")
        target = after[slash:] if slash >= 0 else b"/"
    elif not target.startswith(b"/"):
        return None
    raw = target.partition(b"?")[0].partition(b"#")[0]
    try:
        return unquote(raw.decode("ascii"))
    except UnicodeDecodeError:
        return None


def _shaped(
    refusal: Refusal | None, status: int, path: str, message: str
) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
    """What ``refusal`` makes of a refusal (None: none given, or it failed or gave a
    header that may not be sent, or one the server sets itself)."""
    if refusal is None:
        return None
    try:
        headers, body = refusal(status, path, message)
        for name, value in headers:
            if (
                _TOKEN.fullmatch(name) is None
                or b"\r" in value
                or b"\n" in value
                or name.lower() in _OWN_HEADERS
            ):
                raise ValueError(f"the refusal hook gave the header {name!r}")
    except Exception:
        logger.exception("the refusal hook failed on a %d for %s", status, path)
        return None
    return headers, bytes(body)


_OWN_HEADERS: Final = frozenset(
    (b"content-length", b"connection", b"date", b"retry-after", b"transfer-encoding")
)


class _Connection(asyncio.Protocol):
    """One client connection: parses requests (llhttp calls its ``on_*`` methods) and
    runs the app for each, in order."""

    def __init__(self, server: H1Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        # The head under way (between on_message_begin and on_headers_complete).
        self.in_head = False
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0  # its bytes given by the parser so far
        self.head_read = 0  # its bytes read so far, where known (see _count_read)
        self.head_ends = 0  # line ends at the end of those
        # The request whose app runs, the one whose body is being read (it, or the last
        # of those queued), the requests read ahead of their turn, and the one to
        # start at the end of the read that completed its head.
        self.cycle: _Cycle | None = None
        self.parsing: _Cycle | None = None
        self.queue: deque[_Cycle] = deque()
        self.queued_bytes = 0
        self.starting: _Cycle | None = None
        self.completed = False  # a request ended in the read under way
        # A refusal waiting for the responses to the requests before it.
        self.refusal: tuple[int, str, str | None] | None = None  # status, message, path
        self.broken = False  # the parser failed: nothing more is read
        self.closed = False
        self.reading = True
        self.write_paused = False
        self.drain_waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.client: tuple[str, int] | None = None
        self.local: tuple[str, int] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.server
        if len(server.connections) >= server.limits.max_connections:
            server.refused += 1
            server.accept_log.warning(
                "connections",
                "connection refused: %d connections open (max_connections)",
                len(server.connections),
            )
            self._reject(503, "too many connections", retry_after=True)
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self.local = (str(local[0]), int(local[1])) if isinstance(local, tuple) else None
        server.connections.add(self)
        self._arm(server.limits.keepalive_timeout)

    def data_received(self, data: bytes) -> None:
        if self.broken or self.closed:
            return
        fresh = not self.in_head and self.parsing is None
        inside = self.in_head
        self.completed = False
        try:
            self._feed(data)
        except _BadRequest as exc:
            self._refuse(exc.status, str(exc), exc.path)
            return
        if self.in_head:
            self._count_read(data, fresh=fresh, inside=inside)
        starting = self.starting
        if starting is not None:
            self.starting = None
            self._begin(starting)
        else:
            cycle = self.cycle
            if cycle is not None and not cycle.body_done and self.reading:
                self._arm(self.server.limits.body_timeout)  # progress: the wait starts again
        self._check_buffered()

    def _feed(self, data: bytes) -> None:
        """Hand ``data`` to the parser.

        Raises:
            _BadRequest: The request is refused (by llhttp or by this server).
        """
        while True:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade as exc:
                # An upgrade is not taken: the request was a plain one, and what
                # follows it is parsed as the next request.
                offset = int(exc.args[0])
                data = data[offset:]
                if data:
                    continue
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__context__
                if isinstance(cause, _BadRequest):
                    raise cause from None
                raise
            except httptools.HttpParserError as exc:
                raise _BadRequest(400, f"malformed request: {exc}") from None
            return

    def _count_read(self, data: bytes, *, fresh: bool, inside: bool) -> None:
        """Count a read that ends inside a head toward the head's size: the head is
        refused (431) as soon as more than ``max_head_bytes`` of it are known, whatever
        part of its end the read brought.

        A read that began inside the head, or between requests and ended no request,
        holds nothing but head bytes (and blank lines before it); in a read that ended
        a request as well, the bytes the parser gave are counted.
        """
        if inside:
            self.head_read += len(data)
        elif fresh and not self.completed:
            self.head_read = len(data.lstrip(b"\r\n"))
        else:
            self.head_read = self.head_size
        # The line ends the head's bytes end with (up to three) may begin its end.
        ends = len(data) - open_head_size(data)
        self.head_ends = min(3, self.head_ends + ends) if ends == len(data) else ends
        if self.head_read - self.head_ends > self.server.limits.max_head_bytes:
            self._refuse(431, "request head too large")

    def eof_received(self) -> bool | None:
        return None  # close: a client that stops sending is gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        self.server.connections.discard(self)
        cycle = self.cycle
        if cycle is not None:
            cycle._wake()
        _resolve(self.drain_waiter)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        _resolve(self.drain_waiter)

    # -- llhttp's callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.in_head = True
        self.url = b""
        self.headers = []
        self.head_size = 0
        self.head_read = 0
        self.head_ends = 0
        if self.cycle is None:
            self._arm(self.server.limits.head_timeout)

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self.server.limits
        if self.in_head:
            if len(self.headers) >= limits.max_headers:
                raise _BadRequest(431, f"more than {limits.max_headers} header lines")
            self.headers.append((name.lower(), value.rstrip(b" \t")))  # (llhttp strips the left)
            self._count_head(len(name) + len(value) + 4)  # name: value CRLF
            return
        cycle = self.parsing  # a trailer line: counted and dropped
        if cycle is not None:
            cycle.trailer += len(name) + len(value) + 4
            if cycle.trailer > limits.max_head_bytes:
                raise _BadRequest(431, "chunked trailer too long")

    def _count_head(self, size: int) -> None:
        self.head_size += size
        if self.head_size > self.server.limits.max_head_bytes:
            raise _BadRequest(431, "request head too large")

    def on_headers_complete(self) -> None:
        self.in_head = False
        parser = self.parser
        method = parser.get_method().decode("ascii")
        size = self.head_size + len(method) + 10  # SP, SP HTTP/1.x
        if size > self.server.limits.max_head_bytes:
            raise _BadRequest(431, "request head too large")
        cycle = self._cycle(method, parser.get_http_version(), size)
        self.parsing = cycle
        if self.cycle is None and not self.queue and self.starting is None:
            self.starting = cycle  # its app starts at the end of this read
        else:
            self.queue.append(cycle)
            self.queued_bytes += cycle.head_size

    def on_body(self, body: bytes) -> None:
        cycle = self.parsing
        assert cycle is not None
        cycle.received += len(body)
        limit = self.server.limits.max_body_bytes
        if limit is not None and cycle.received > limit:
            raise _BadRequest(413, f"request body over {limit} bytes", path=cycle.scope["path"])
        cycle._add(body)
        if cycle is self.cycle:
            cycle._wake()
        elif cycle is not self.starting:
            self.queued_bytes += len(body)

    def on_message_complete(self) -> None:
        cycle = self.parsing
        self.parsing = None
        self.completed = True
        if cycle is not None:
            cycle.body_done = True
            if cycle is self.cycle:
                self._disarm()
                cycle._wake()

    # -- plumbing -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not self.closed:
            transport.write(data)

    async def drain(self) -> None:
        if self.write_paused and not self.closed:
            waiter = self.drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self.drain_waiter = None

    def close(self) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.close()

    def resume(self) -> None:
        if not self.reading and not self.closed and not self.broken and self.transport is not None:
            self.reading = True
            self.transport.resume_reading()
            cycle = self.cycle
            if cycle is not None and not cycle.body_done:
                self._arm(self.server.limits.body_timeout)

    def _check_buffered(self) -> None:
        cycle = self.cycle
        held = self.queued_bytes + (cycle.body_size if cycle is not None else 0)
        if held > self.server.limits.max_buffered_bytes and self.reading:
            self._pause()

    def _pause(self) -> None:
        if self.reading:
            self.reading = False
            cycle = self.cycle
            if cycle is not None and not cycle.body_done:
                self._disarm()  # the app is behind, not the client
            if self.transport is not None:
                self.transport.pause_reading()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        cycle = self.cycle
        if cycle is None:
            self.close()  # idle too long, or a head too slow to arrive
        elif not cycle.body_done:
            logger.info("request body from %s stalled: connection closed", self.client)
            self.close()  # the app sees a disconnect

    def _reject(
        self, status: int, message: str, *, retry_after: bool = False, path: str | None = None
    ) -> None:
        """Answer ``status`` and close: in the shape the server's refusal hook gives for
        ``path`` when there are both, else as plain text."""
        shaped = None if path is None else _shaped(self.server.refusal, status, path, message)
        if shaped is None:
            body = message.encode("utf-8", "replace")
            fields = b"content-type: text/plain; charset=utf-8\r\n"
        else:
            body = shaped[1]
            fields = b"".join(b"%b: %b\r\n" % header for header in shaped[0])
        self.write(
            b"HTTP/1.1 %d %b\r\n%bcontent-length: %d\r\n%bconnection: close\r\ndate: %b\r\n\r\n%b"
            % (
                status,
                _reason(status),
                fields,
                len(body),
                b"retry-after: 1\r\n" if retry_after else b"",
                _Date.now(),
                body,
            )
        )
        self.broken = True
        self.close()

    def _refuse(self, status: int, message: str, path: str | None = None) -> None:
        """A request refused: answered with ``status`` once the responses to the
        requests before it are (a request under way whose app has the request already
        gets it in place of its response, when that has not started; the app sees a
        disconnect)."""
        self.broken = True
        cycle = self.parsing
        starting = self.starting
        self.starting = None
        if starting is not None and starting is not cycle:
            self._begin(starting)  # a request before the refused one, read whole
        current = self.cycle
        if cycle is not None and cycle is current:
            logger.info("bad request body from %s: %s", self.client, message)
            if not cycle.started and cycle.pending_head is None:
                self._reject(status, message, path=path)
            else:
                self.close()
        elif current is not None:
            if cycle is not None and self.queue and self.queue[-1] is cycle:
                self.queue.pop()  # never to reach the app
            self.refusal = (status, message, path)
            self._pause()
        else:
            self._reject(status, message, path=path)

    # -- requests -------------------------------------------------------------------------

    def _begin(self, cycle: _Cycle) -> None:
        """Run the app for ``cycle`` (its turn has come)."""
        self.cycle = cycle
        if cycle.body_done:
            self._disarm()
        elif self.reading:
            self._arm(self.server.limits.body_timeout)
        else:
            self._disarm()
        server = self.server
        task = _start_task(asyncio.get_running_loop(), server.run_app(self, cycle))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    def _next_queued(self) -> None:
        if self.cycle is not None or self.closed:
            return
        if self.queue:
            cycle = self.queue.popleft()
            self.queued_bytes -= cycle.head_size + cycle.body_size
            self._begin(cycle)
        elif self.refusal is not None:
            status, message, path = self.refusal
            self._reject(status, message, path=path)

    def _cycle(self, method: str, version: str, head_size: int) -> _Cycle:
        if version not in ("1.1", "1.0"):
            raise _BadRequest(400, f"unsupported HTTP version {version[:10]!r}")
        minor = 1 if version == "1.1" else 0
        target = self.url
        headers = self.headers
        length: int | None = None
        codings: list[bytes] = []
        close = minor == 0
        expect = False
        hosts = 0
        for name, value in headers:
            if name == b"content-length":
                # (llhttp refuses a malformed or repeated one.)
                length = int(value)
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"connection":
                tokens = {t.strip(b" \t").lower() for t in value.split(b",")}
                if b"close" in tokens:
                    close = True
                elif b"keep-alive" in tokens:
                    close = False
            elif name == b"expect":
                if value.lower() != b"100-continue":
                    raise _BadRequest(417, f"unsupported expectation {value[:40]!r}")
                expect = minor == 1
            elif name == b"host":
                hosts += 1
        if codings:
            if minor == 0:
                # RFC 9112, 6.1: its framing is faulty; the request is not read.
                raise _BadRequest(400, "Transfer-Encoding in an HTTP/1.0 request")
            if length is not None:
                raise _BadRequest(400, "both Content-Length and Transfer-Encoding")
            if codings[-1] != b"chunked":
                raise _BadRequest(400, "chunked is not the last transfer coding")
            if len(codings) > 1:
                raise _BadRequest(501, f"unsupported transfer codings {b', '.join(codings)[:60]!r}")
        if minor == 1 and hosts != 1:
            raise _BadRequest(400, "no Host header" if not hosts else "more than one Host header")
        limit = self.server.limits.max_body_bytes
        if limit is not None and length is not None and length > limit:
            raise _BadRequest(
                413, f"request body of {length} bytes, over {limit}", path=_target_path(target)
            )
        if target.startswith(b"/"):
            raw_path, _, query = target.partition(b"?")
        elif target == b"*" and method == "OPTIONS":
            raw_path, query = b"*", b""
        elif target.startswith((b"http://", b"https://")):
            after = target.partition(b"://")[2]
            slash = after.find(b"/")
            raw_path, _, query = (after[slash:] if slash >= 0 else b"/").partition(b"?")
        else:
            raise _BadRequest(400, f"unsupported request target {target[:100]!r}")
        raw_path = raw_path.partition(b"#")[0]
        scope: Scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "server": self.local,
            "client": self.client,
            "scheme": "http",
            "method": method,
            "root_path": "",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "headers": headers,
        }
        has_body = bool(codings) or bool(length)
        return _Cycle(
            self,
            scope,
            has_body=has_body,
            head_size=head_size,
            minor=minor,
            keep_alive=not close,
            expect_continue=expect and has_body,
        )

    def finished(self, cycle: _Cycle) -> None:
        """The response is complete: the next request, or the end of the connection."""
        if cycle is not self.cycle:
            return
        if not cycle.keep_alive or self.closed or not cycle.body_done:
            self.cycle = None
            self.close()
            return
        self.cycle = None
        self.resume()
        if self.queue or self.refusal is not None:
            asyncio.get_running_loop().call_soon(self._next_queued)
        self._arm(
            self.server.limits.head_timeout
            if self.in_head
            else self.server.limits.keepalive_timeout
        )

    def app_failed(self, cycle: _Cycle) -> None:
        """The app raised, or returned without completing its response."""
        if not cycle.started and not self.closed:
            body = b"Internal Server Error"
            self.write(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
                b"content-length: %d\r\nconnection: close\r\ndate: %b\r\n\r\n%b"
                % (len(body), _Date.now(), body)
            )
        elif cycle.pending_head is not None:
            cycle._flush_head()
        cycle.complete = True
        self.cycle = None
        self.close()  # a started response cut short: the client sees a broken transfer


class H1Server:
    """Serves an ASGI app over HTTP/1.1.

    Args:
        app: The ASGI 3 application.
        limits: Bounds on clients.
        refusal: Shapes the server's 413 refusals for the request's path (see
            :data:`Refusal`); None: plain text.
    """

    def __init__(
        self, app: App, *, limits: ServerLimits | None = None, refusal: Refusal | None = None
    ) -> None:
        self.app = app
        self.limits = limits or ServerLimits()
        self.refusal = refusal
        self.connections: set[_Connection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.refused = 0
        """Connections refused past ``max_connections``."""
        self.accept_log = _RateLimitedLog()
        self._server: asyncio.Server | None = None
        self._port = 0
        self._lifespan: _Lifespan | None = None
        self._previous_handler: Any = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self._port

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, sock: socket.socket | None = None
    ) -> None:
        """Run the app's lifespan startup, then listen."""
        self._lifespan = _Lifespan(self.app)
        await self._lifespan.startup()
        loop = asyncio.get_running_loop()
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        if sock is not None:
            self._server = await loop.create_server(
                lambda: _Connection(self), sock=sock, backlog=2048
            )
        else:
            self._server = await loop.create_server(
                lambda: _Connection(self), host, port, reuse_address=True, backlog=2048
            )
        self._port = int(self._server.sockets[0].getsockname()[1])

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler from the server's start on: the errors of
        accepting connections (out of file descriptors, say, which repeats for every
        connection waiting, and the retries asyncio schedules for it, which may fire
        after a shutdown) are logged at a bounded rate; others go to the handler
        before it."""
        if _accept_error(context):
            exc = context.get("exception")
            message = str(context.get("message", "accept failed"))
            kind = f"{message}:{type(exc).__name__}:{getattr(exc, 'errno', None)}"
            self.accept_log.log(logging.ERROR, kind, "%s: %r", message, exc)
            return
        previous = self._previous_handler
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    async def run_app(self, conn: _Connection, cycle: _Cycle) -> None:
        try:
            await self.app(cycle.scope, cycle.receive, cycle.send)
        except asyncio.CancelledError:
            conn.app_failed(cycle)
            raise
        except Exception:
            logger.exception("the app failed on %s %s", cycle.scope["method"], cycle.scope["path"])
            conn.app_failed(cycle)
        else:
            if not cycle.complete:
                if not cycle.started:
                    logger.error(
                        "the app returned no response to %s %s",
                        cycle.scope["method"],
                        cycle.scope["path"],
                    )
                conn.app_failed(cycle)

    async def shutdown(self) -> None:
        """Stop listening, let running requests finish (up to the limit), run the app's
        lifespan shutdown."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.cycle is None:
                conn.close()
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=self.limits.shutdown_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        for conn in list(self.connections):
            conn.close()
        if self._lifespan is not None:
            await self._lifespan.shutdown()


_ACCEPT_MESSAGES: Final = (
    "socket.accept() out of system resource",
    "Error on transport creation for incoming connection",
)


def _accept_error(context: dict[str, Any]) -> bool:
    """Whether a loop exception context is an error of accepting a connection."""
    if context.get("message") in _ACCEPT_MESSAGES:
        return True
    callback = getattr(context.get("handle"), "_callback", None)
    return getattr(callback, "__name__", "") in ("_accept_connection", "_start_serving")


class _RateLimitedLog:
    """Log lines, of each kind at most one per ``interval`` seconds; the next line of a
    kind says how many were left out since the last one.

    Args:
        interval: Seconds between two lines of one kind.
        max_kinds: Kinds remembered (past it, all are forgotten).
    """

    def __init__(self, interval: float = 1.0, max_kinds: int = 64) -> None:
        self.interval = interval
        self.max_kinds = max_kinds
        self._kinds: dict[str, list[float]] = {}  # kind: [time of its last line, left out]

    def log(self, level: int, kind: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        entry = self._kinds.get(kind)
        if entry is not None and now - entry[0] < self.interval:
            entry[1] += 1
            return
        if entry is None and len(self._kinds) >= self.max_kinds:
            self._kinds.clear()
        suppressed = int(entry[1]) if entry is not None else 0
        self._kinds[kind] = [now, 0]
        if suppressed:
            message += " (%d more like it in the last %.0f s not logged)"
            args = (*args, suppressed, now - entry[0]) if entry is not None else args
        logger.log(level, message, *args)

    def warning(self, kind: str, message: str, *args: Any) -> None:
        self.log(logging.WARNING, kind, message, *args)


class _Lifespan:
    """The ASGI lifespan protocol, for apps that speak it (others are left alone)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.events: dict[str, asyncio.Event] = {}
        self.failed = False
        self.refused = False
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope: Scope = {"type": "lifespan", "asgi": _ASGI, "state": {}}
        try:
            await self.app(scope, self.inbox.get, self._send)
        except Exception:
            self.failed = True
            logger.debug("the app does not support the lifespan protocol", exc_info=True)
        finally:
            for event in self.events.values():
                event.set()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind.endswith(".failed"):
            self.refused = True
            logger.error("lifespan: %s", message.get("message", kind))
        self.events.setdefault(kind.rsplit(".", 1)[0], asyncio.Event()).set()

    async def _step(self, name: str) -> None:
        event = self.events.setdefault(f"lifespan.{name}", asyncio.Event())
        await self.inbox.put({"type": f"lifespan.{name}"})
        await event.wait()

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())
        await self._step("startup")
        if self.refused:
            raise RuntimeError("the app's lifespan startup failed")

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self._step("shutdown")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.task, 5.0)


def run(
    app: App,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    sock: socket.socket | None = None,
    refusal: Refusal | None = None,
    **options: Any,
) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, then shut down gracefully.

    Args:
        app: The ASGI app.
        host: The interface to bind.
        port: The port.
        sock: A socket already bound, to listen on instead of ``host`` and ``port``.
        refusal: Shapes the server's 413 refusals (see :data:`Refusal`).
        options: :class:`ServerLimits` fields.
    """

    async def main() -> None:
        server = H1Server(app, limits=ServerLimits(**options), refusal=refusal)
        await server.start(host, port, sock=sock)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except NotImplementedError:
                # No loop signal handlers (Windows): a plain handler wakes the loop.
                signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
        try:
            await stop.wait()
        finally:
            await server.shutdown()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
