"""The HTTP/1.1 server's connection (:class:`ServerConnection`): parses requests with
llhttp, runs the app for each in order, bounds what a client may make it hold (in
bytes and in time) and answers the server's own refusals. A WebSocket upgrade hands
the connection to :class:`~polystream.server._h1websocket.WebSocketConnection`."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from typing import TYPE_CHECKING, cast
from urllib.parse import unquote

import httptools

from polystream.server._h1cycle import BadRequest, Cycle, reason_phrase, shaped_refusal, target_path
from polystream.server._h1support import ASGI, HttpDate, Scope, logger, resolve, start_task
from polystream.server._h1websocket import WebSocketConnection, is_websocket_upgrade
from polystream.wire._http1 import open_head_size

if TYPE_CHECKING:
    from polystream.server._h1server import H1Server

__all__ = ["ServerConnection"]


class ServerConnection(asyncio.Protocol):
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
        self.cycle: Cycle | None = None
        self.parsing: Cycle | None = None
        self.queue: deque[Cycle] = deque()
        self.queued_bytes = 0
        self.starting: Cycle | None = None
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
        self.websocket: WebSocketConnection | None = None  # once upgraded

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but behave as one.)
        self.transport = cast(asyncio.Transport, transport)
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
        websocket = self.websocket
        if websocket is not None:
            if not self.closed:
                websocket.data_received(data)
            return
        if self.broken or self.closed:
            return
        fresh = not self.in_head and self.parsing is None
        inside = self.in_head
        self.completed = False
        try:
            self._feed(data)
        except BadRequest as exc:
            self._refuse(exc.status, str(exc), exc.path)
            return
        if self.websocket is not None:
            return  # (upgraded: the rest of the read was the socket's)
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
            BadRequest: The request is refused (by llhttp or by this server).
        """
        while True:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade as exc:
                offset = int(exc.args[0])
                data = data[offset:]
                if self._upgrade(data):
                    return
                # An upgrade not taken: the request was a plain one, and what follows
                # it is parsed as the next request.
                if data:
                    continue
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__context__
                if isinstance(cause, BadRequest):
                    raise cause from None
                raise
            except httptools.HttpParserError as exc:
                raise BadRequest(400, f"malformed request: {exc}") from None
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
        if self.websocket is not None:
            self.websocket.connection_lost()
        self.server.connections.discard(self)
        cycle = self.cycle
        if cycle is not None:
            cycle.wake()
        resolve(self.drain_waiter)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        resolve(self.drain_waiter)

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
                raise BadRequest(431, f"more than {limits.max_headers} header lines")
            self.headers.append((name.lower(), value.rstrip(b" \t")))  # (llhttp strips the left)
            self._count_head(len(name) + len(value) + 4)  # name: value CRLF
            return
        cycle = self.parsing  # a trailer line: counted and dropped
        if cycle is not None:
            cycle.trailer += len(name) + len(value) + 4
            if cycle.trailer > limits.max_head_bytes:
                raise BadRequest(431, "chunked trailer too long")

    def _count_head(self, size: int) -> None:
        self.head_size += size
        if self.head_size > self.server.limits.max_head_bytes:
            raise BadRequest(431, "request head too large")

    def on_headers_complete(self) -> None:
        self.in_head = False
        parser = self.parser
        method = parser.get_method().decode("ascii")
        size = self.head_size + len(method) + 10  # SP, SP HTTP/1.x
        if size > self.server.limits.max_head_bytes:
            raise BadRequest(431, "request head too large")
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
            raise BadRequest(413, f"request body over {limit} bytes", path=cycle.scope["path"])
        cycle.add(body)
        if cycle is self.cycle:
            cycle.wake()
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
                cycle.wake()

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
        shaped = (
            None if path is None else shaped_refusal(self.server.refusal, status, path, message)
        )
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
                reason_phrase(status),
                fields,
                len(body),
                b"retry-after: 1\r\n" if retry_after else b"",
                HttpDate.now(),
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

    def _upgrade(self, rest: bytes) -> bool:
        """Take a WebSocket upgrade (the request just read, when it is the only one in
        flight): the connection is the socket's from now on. ``rest``: the bytes of the
        read after the request's head."""
        cycle = self.starting
        if (
            cycle is None
            or self.cycle is not None
            or self.queue
            or not is_websocket_upgrade(cycle.scope["method"], cycle.scope["headers"])
        ):
            return False
        self.starting = None
        self.parsing = None
        self._disarm()
        self.websocket = WebSocketConnection(self, cycle.scope, self.url, rest)
        self.websocket.start()
        return True

    def _begin(self, cycle: Cycle) -> None:
        """Run the app for ``cycle`` (its turn has come)."""
        self.cycle = cycle
        if cycle.body_done:
            self._disarm()
        elif self.reading:
            self._arm(self.server.limits.body_timeout)
        else:
            self._disarm()
        server = self.server
        task = start_task(asyncio.get_running_loop(), server.run_app(self, cycle))
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

    def _cycle(self, method: str, version: str, head_size: int) -> Cycle:
        if version not in ("1.1", "1.0"):
            raise BadRequest(400, f"unsupported HTTP version {version[:10]!r}")
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
                    raise BadRequest(417, f"unsupported expectation {value[:40]!r}")
                expect = minor == 1
            elif name == b"host":
                hosts += 1
        if codings:
            if minor == 0:
                # RFC 9112, 6.1: its framing is faulty; the request is not read.
                raise BadRequest(400, "Transfer-Encoding in an HTTP/1.0 request")
            if length is not None:
                raise BadRequest(400, "both Content-Length and Transfer-Encoding")
            if codings[-1] != b"chunked":
                raise BadRequest(400, "chunked is not the last transfer coding")
            if len(codings) > 1:
                raise BadRequest(501, f"unsupported transfer codings {b', '.join(codings)[:60]!r}")
        if minor == 1 and hosts != 1:
            raise BadRequest(400, "no Host header" if not hosts else "more than one Host header")
        limit = self.server.limits.max_body_bytes
        if limit is not None and length is not None and length > limit:
            raise BadRequest(
                413, f"request body of {length} bytes, over {limit}", path=target_path(target)
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
            raise BadRequest(400, f"unsupported request target {target[:100]!r}")
        raw_path = raw_path.partition(b"#")[0]
        scope: Scope = {
            "type": "http",
            "asgi": ASGI,
            "http_version": version,
            "server": self.local,
            "client": self.client,
            "scheme": "http" if self.server.ssl is None else "https",
            "method": method,
            "root_path": "",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "headers": headers,
        }
        has_body = bool(codings) or bool(length)
        return Cycle(
            self,
            scope,
            has_body=has_body,
            head_size=head_size,
            minor=minor,
            keep_alive=not close,
            expect_continue=expect and has_body,
        )

    def finished(self, cycle: Cycle) -> None:
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

    def app_failed(self, cycle: Cycle) -> None:
        """The app raised, or returned without completing its response."""
        if not cycle.started and not self.closed:
            body = b"Internal Server Error"
            self.write(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
                b"content-length: %d\r\nconnection: close\r\ndate: %b\r\n\r\n%b"
                % (len(body), HttpDate.now(), body)
            )
        elif cycle.pending_head is not None:
            cycle.flush_head()
        cycle.complete = True
        self.cycle = None
        self.close()  # a started response cut short: the client sees a broken transfer
