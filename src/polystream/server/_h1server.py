"""A lean HTTP/1.1 server for ASGI apps on plain asyncio (stdlib only): what
``polystream gateway`` serves with.

A gateway stands between a client and an upstream, so every microsecond it spends on a
request is added to the client's latency. This server keeps that small: a request head
is parsed in one pass, the app runs in a task whose first step runs in the read that
completed the request (a gateway's upstream request leaves in that same turn of the
loop), and a response's head leaves in the same write as its first body bytes (one
segment, one wake-up of the client, instead of two).

Scope: HTTP/1.1 and 1.0 over TCP; keep-alive; pipelined requests answered in order;
request bodies by ``Content-Length`` or chunked; ``Expect: 100-continue``; responses by
``Content-Length``, chunked (HTTP/1.1) or delimited by the close (HTTP/1.0). ASGI 3:
the ``http`` and ``lifespan`` scopes (no WebSocket: an upgrade request is a plain
request to the app). What it refuses, with a status and a closed connection: a
malformed request line or header (400), a head over 64 KiB or 100 headers (431), a
transfer coding other than chunked (501), both ``Content-Length`` and
``Transfer-Encoding`` (400, the request-smuggling shape), an expectation other than
``100-continue`` (417).

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
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

from polystream.wire._http1 import open_head_size

__all__ = ["SEND_NOWAIT", "H1Server", "ServerLimits", "run"]

logger = logging.getLogger("polystream.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]

_HEAD_END: Final = re.compile(rb"\r?\n\r?\n")
_BLANK_LINES: Final = re.compile(rb"[\r\n]*")
_REQUEST_LINE: Final = re.compile(rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/1\.([01])")
_TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_HEADER_LINE: Final = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+:[^\r\n\x00]*"
_HEADER_BLOCK: Final = re.compile(_HEADER_LINE + rb"(?:\r?\n" + _HEADER_LINE + rb")*")
"""The header lines of a head (a token, a colon, a value without CR or NUL, each)."""
_CHUNK_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")
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
}
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

# Request body framings.
_NONE, _LENGTH, _CHUNKED = range(3)
# Response body framings (and _NONE).
_OUT_LENGTH, _OUT_CHUNKED, _OUT_CLOSE = range(1, 4)
# States of a chunked request body.
_SIZE, _DATA, _DATA_END, _TRAILER, _END = range(5)


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
    """

    max_head_bytes: int = 64 * 1024
    max_headers: int = 100
    keepalive_timeout: float = 5.0
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_buffered_bytes: int = 1024 * 1024
    shutdown_timeout: float = 5.0


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
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _parse_head(
    head: bytes, limits: ServerLimits
) -> tuple[str, bytes, int, list[tuple[bytes, bytes]]]:
    """(method, target, minor version, headers with lowered names) of a request head."""
    end = head.find(b"\n")
    line = head if end < 0 else head[:end]
    if line.endswith(b"\r"):
        line = line[:-1]
    match = _REQUEST_LINE.fullmatch(line)
    if match is None:
        raise _BadRequest(400, f"malformed request line {line[:100]!r}")
    headers: list[tuple[bytes, bytes]] = []
    if end >= 0:
        block = head[end + 1 :]
        # One pass checks every line (a token, a colon, a value without CR or NUL);
        # obsolete line folding (a line starting with a space) is refused with the
        # rest, as a server may (RFC 9112, 5.2).
        lines = block.split(b"\n")
        if _HEADER_BLOCK.fullmatch(block) is None:
            for raw in lines:
                if _HEADER_BLOCK.fullmatch(raw[:-1] if raw.endswith(b"\r") else raw) is None:
                    raise _BadRequest(400, f"malformed header line {raw[:100]!r}")
        if len(lines) > limits.max_headers:
            raise _BadRequest(431, f"more than {limits.max_headers} header lines")
        for raw in lines:
            name, _, value = raw.partition(b":")
            headers.append((name.lower(), value.strip(b" \t\r")))
    return match.group(1).decode("ascii"), match.group(2), int(match.group(3)), headers


class _Cycle:
    """One request and its response."""

    __slots__ = (
        "app_waiter",
        "body",
        "body_done",
        "body_size",
        "chunk_state",
        "complete",
        "conn",
        "continue_sent",
        "expect_continue",
        "framing",
        "keep_alive",
        "minor",
        "out_framing",
        "out_remaining",
        "partial",
        "pending_head",
        "remaining",
        "request_sent",
        "scope",
        "started",
        "trailer",
        "trailer_open",
    )

    def __init__(
        self,
        conn: _Connection,
        scope: Scope,
        framing: int,
        length: int,
        *,
        minor: int,
        keep_alive: bool,
        expect_continue: bool,
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.framing = framing
        self.remaining = length
        self.minor = minor
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.continue_sent = False
        self.body: list[bytes] = []
        self.body_size = 0
        self.body_done = framing == _NONE
        self.request_sent = False
        self.chunk_state = _SIZE
        self.partial = b""
        self.trailer = 0  # trailer bytes so far (its lines are dropped, not kept)
        self.trailer_open = False  # a trailer line under way is known not to be blank
        self.app_waiter: asyncio.Future[None] | None = None
        self.started = False
        self.complete = False
        self.pending_head: bytes | None = None
        self.out_framing = _NONE
        self.out_remaining = 0
        scope["extensions"] = {SEND_NOWAIT: self.send_nowait}

    # -- the request body -------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        """Body bytes from the connection; returns what follows the body (the next
        request's bytes)."""
        if self.framing == _LENGTH:
            take = min(self.remaining, len(data))
            if take:
                self._add(data[:take] if take < len(data) else data)
            self.remaining -= take
            if self.remaining == 0:
                self.body_done = True
            rest = data[take:]
        else:
            rest = self._chunked(data)
        self._wake()
        return rest

    def _add(self, data: bytes) -> None:
        self.body.append(data)
        self.body_size += len(data)

    def _chunked(self, data: bytes) -> bytes:
        """Parse chunked body bytes; an incomplete size line, CRLF or trailer line is
        kept for the next bytes."""
        if self.partial:
            data = self.partial + data
            self.partial = b""
        pos = 0
        end = len(data)
        state = self.chunk_state
        while pos < end and state != _END:
            if state == _DATA:
                stop = min(end, pos + self.remaining)
                self._add(data[pos:stop])
                self.remaining -= stop - pos
                pos = stop
                if self.remaining == 0:
                    state = _DATA_END
            elif state == _SIZE:
                match = _CHUNK_LINE.match(data, pos)
                if match is None:
                    if data.find(b"\n", pos) >= 0 or end - pos > 1024:
                        raise _BadRequest(400, "malformed chunk size line")
                    break
                self.remaining = int(match.group(1), 16)
                pos = match.end()
                state = _DATA if self.remaining else _TRAILER
            elif state == _DATA_END:
                if data.startswith(b"\r\n", pos):
                    pos += 2
                elif data.startswith(b"\n", pos):
                    pos += 1
                elif end - pos == 1 and data[pos:] == b"\r":
                    break
                else:
                    raise _BadRequest(400, "missing CRLF after a chunk")
                state = _SIZE
            else:  # _TRAILER: header lines up to a blank line, dropped
                eol = data.find(b"\n", pos)
                if eol < 0 and end - pos < 2 and not self.trailer_open:
                    break  # nothing, or a CR: maybe the blank line, kept
                line = data[pos:end] if eol < 0 else data[pos:eol]
                pos = end if eol < 0 else eol + 1
                if eol >= 0 and not self.trailer_open and line in (b"", b"\r"):
                    state = _END
                    self.body_done = True
                    continue
                # A trailer line, whole or in part: counted and dropped (a line cut
                # by a read is not kept to be read again with the next bytes).
                self.trailer_open = eol < 0
                self.trailer += len(line)
                if self.trailer > self.conn.server.limits.max_head_bytes:
                    raise _BadRequest(431, "chunked trailer too long")
        self.chunk_state = state
        if state == _END:
            return data[pos:]
        self.partial = data[pos:]
        return b""

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


class _Connection(asyncio.Protocol):
    """One client connection: parses requests and runs the app for each, in order."""

    def __init__(self, server: H1Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        # What was read and not yet handed on: the head under way, or the requests a
        # client sent ahead of this one's response. A bytearray: appending to it costs
        # what is appended (a bytes object would be copied whole on every read).
        self.buffer = bytearray()
        # How much of the buffer is known to hold no end of head: each search starts
        # there (less the 3 bytes an end may have begun with), not at its start.
        self.scanned = 0
        self.cycle: _Cycle | None = None
        self.closed = False
        self.reading = True
        self.write_paused = False
        self.drain_waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.head_started = False
        self.client: tuple[str, int] | None = None
        self.local: tuple[str, int] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self.local = (str(local[0]), int(local[1])) if isinstance(local, tuple) else None
        self.server.connections.add(self)
        self._arm(self.server.limits.keepalive_timeout)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if cycle is not None:
            if not cycle.body_done:
                self._feed_body(cycle, data)
            else:
                self.buffer += data  # a pipelined request: parsed after this response
            self._check_buffered()
            return
        self.buffer += data
        self._next_request()

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
        if not self.reading and not self.closed and self.transport is not None:
            self.reading = True
            self.transport.resume_reading()
            cycle = self.cycle
            if cycle is not None and not cycle.body_done:
                self._arm(self.server.limits.body_timeout)

    def _check_buffered(self) -> None:
        cycle = self.cycle
        held = len(self.buffer) + (cycle.body_size if cycle is not None else 0)
        if held > self.server.limits.max_buffered_bytes and self.reading:
            self.reading = False
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

    def _reject(self, status: int, message: str) -> None:
        body = message.encode("utf-8", "replace")
        self.write(
            b"HTTP/1.1 %d %b\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\ndate: %b\r\n\r\n%b"
            % (status, _reason(status), len(body), _Date.now(), body)
        )
        self.buffer = bytearray()
        self.scanned = 0
        self.close()

    # -- requests -------------------------------------------------------------------------

    def _feed_body(self, cycle: _Cycle, data: bytes) -> None:
        try:
            rest = cycle.feed(data)
        except _BadRequest as exc:
            # The app has the request already: it sees a disconnect.
            logger.info("bad request body from %s: %s", self.client, exc)
            self.close()
            return
        if rest:
            self.buffer += rest
        if cycle.body_done:
            self._disarm()
        elif self.reading:
            self._arm(self.server.limits.body_timeout)  # progress: the wait starts again

    def _next_request(self) -> None:
        if self.cycle is not None:
            # A request came in between the end of a response and this call (scheduled
            # by that end): it is under way, and the rest waits for its end.
            return
        buffer = self.buffer
        if buffer and buffer[0] in (13, 10):  # CR, LF
            # Blank lines before a request line are ignored (RFC 9112, 2.2).
            match = _BLANK_LINES.match(buffer)
            assert match is not None  # (it matches the empty string)
            del buffer[: match.end()]  # (from the front: no copy of the rest)
            self.scanned = 0
        if not buffer or self.closed:
            return
        limits = self.server.limits
        match = _HEAD_END.search(buffer, max(0, self.scanned - 3))
        if match is None:
            self.scanned = len(buffer)
            if open_head_size(buffer) > limits.max_head_bytes:
                self._reject(431, "request head too large")
            elif not self.head_started:
                self.head_started = True
                self._arm(limits.head_timeout)
            return
        if match.start() > limits.max_head_bytes:
            self._reject(431, "request head too large")
            return
        self._disarm()
        self.head_started = False
        self.scanned = 0
        head = bytes(buffer[: match.start()])
        del buffer[: match.end()]
        try:
            cycle = self._cycle(head)
        except _BadRequest as exc:
            self._reject(exc.status, str(exc))
            return
        self.cycle = cycle
        if buffer and not cycle.body_done:
            # The body's first bytes (and maybe requests sent after it).
            rest = bytes(buffer)
            self.buffer = bytearray()
            self._feed_body(cycle, rest)
        elif not cycle.body_done:
            self._arm(self.server.limits.body_timeout)
        self._check_buffered()
        server = self.server
        task = _start_task(asyncio.get_running_loop(), server.run_app(self, cycle))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    def _cycle(self, head: bytes) -> _Cycle:
        method, target, minor, headers = _parse_head(head, self.server.limits)
        length: int | None = None
        chunked = False
        close = minor == 0
        expect = False
        host = False
        for name, value in headers:
            if name == b"content-length":
                if not value.isdigit() or len(value) > 18:
                    raise _BadRequest(400, f"bad Content-Length {value[:40]!r}")
                if length is not None and int(value) != length:
                    raise _BadRequest(400, "conflicting Content-Length headers")
                length = int(value)
            elif name == b"transfer-encoding":
                if value.lower() != b"chunked" or chunked:
                    raise _BadRequest(501, f"unsupported Transfer-Encoding {value[:40]!r}")
                chunked = True
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
                host = True
        if chunked and length is not None:
            raise _BadRequest(400, "both Content-Length and Transfer-Encoding")
        if minor == 1 and not host:
            raise _BadRequest(400, "no Host header")
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
            "http_version": "1.1" if minor else "1.0",
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
        framing = _CHUNKED if chunked else (_LENGTH if length else _NONE)
        return _Cycle(
            self,
            scope,
            framing,
            length or 0,
            minor=minor,
            keep_alive=not close,
            expect_continue=expect and framing != _NONE,
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
        if self.buffer:
            asyncio.get_running_loop().call_soon(self._next_request)
        self._arm(self.server.limits.keepalive_timeout)

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
    """

    def __init__(self, app: App, *, limits: ServerLimits | None = None) -> None:
        self.app = app
        self.limits = limits or ServerLimits()
        self.connections: set[_Connection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._port = 0
        self._lifespan: _Lifespan | None = None

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
        if sock is not None:
            self._server = await loop.create_server(
                lambda: _Connection(self), sock=sock, backlog=2048
            )
        else:
            self._server = await loop.create_server(
                lambda: _Connection(self), host, port, reuse_address=True, backlog=2048
            )
        self._port = int(self._server.sockets[0].getsockname()[1])

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
    **options: Any,
) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, then shut down gracefully.

    Args:
        app: The ASGI app.
        host: The interface to bind.
        port: The port.
        sock: A socket already bound, to listen on instead of ``host`` and ``port``.
        options: :class:`ServerLimits` fields.
    """

    async def main() -> None:
        server = H1Server(app, limits=ServerLimits(**options))
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
