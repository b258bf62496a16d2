"""An HTTP/1.1 transport for httpx over plain asyncio (stdlib only).

:class:`AsyncH1Transport` is an ``httpx.AsyncBaseTransport``: the httpx API, its
timeouts and its exceptions stay as they are, and only the connection layer
(httpcore, h11, anyio) is replaced by an ``asyncio.Protocol`` and llhttp's response
parser (through ``httptools``, in strict mode). A streamed body is parsed a whole read
at a time (every complete chunk of a chunked body in the read at once), so that the
cost per streamed event stays small. A malformed reply (a bad chunk size, bare LF line
ends, both ``Content-Length`` and ``Transfer-Encoding``, a head over 64 KiB, a body cut
short) raises ``httpx.RemoteProtocolError``.

Scope: HTTP/1.1 (and HTTP/1.0 replies), ``http`` and ``https``, keep-alive pooling.
No HTTP/2, no upgrades, no proxies: when the environment asks for a proxy for a
request's host (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, not excluded by
``NO_PROXY``), that request goes through httpx's own transport instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import time
import urllib.request
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, cast
from urllib.parse import quote, urlsplit

import httptools
import httpx

from polystream.wire._http1 import open_head_size

__all__ = ["AsyncH1Transport", "DirectClient", "DirectReply"]

MAX_HEAD_BYTES: Final = 64 * 1024
"""Largest response head (status line and headers) accepted."""
INFLATE_STEP: Final = 256 * 1024
"""Most decompressed bytes a compressed reply gives at once (deflate inflates up to
about 1,000 times: one 64 KiB read could otherwise become 64 MiB)."""
_HIGH_WATER: Final = 64 * 1024
"""Bytes buffered from the socket before reading pauses (until the body is read).

A reader that falls behind the socket (a gateway writing each batch to a journal)
holds this, plus the socket read under way (asyncio reads up to 256 KiB at once) and
the joined copy its next read makes: this bound is most of a pass-through stream's
memory (see docs/performance.md, the gateway's memory)."""
_DRAIN_BYTES: Final = 64 * 1024
_DRAIN_SECONDS: Final = 0.1

_QUICKACK: Final = getattr(socket, "TCP_QUICKACK", None)
_TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_SAFE_METHODS: Final = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

# Body framing of a response.
_NONE, _LENGTH, _CHUNKED, _CLOSE = range(4)


class _Stale(Exception):
    """A reused connection failed before any of the response arrived."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: buffers what the socket delivers and wakes its reader."""

    def __init__(self, pool: AsyncH1Transport, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.sock: Any = None
        self.quickack = False
        self.chunks: list[bytes] = []
        self.size = 0
        self.eof = False
        self.error: BaseException | None = None
        self.lost = False
        self.idle = False
        self.idle_since = 0.0
        self.reused = False
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.write_waiter: asyncio.Future[None] | None = None
        self.write_paused = False
        # Takes each read in this callback instead of the reader (see _Body.push);
        # None: end of input.
        self.sink: Callable[[bytes | None], None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but behave as one.)
        self.transport = cast(asyncio.Transport, transport)
        if self.pool._quickack and _QUICKACK is not None:
            sock = transport.get_extra_info("socket")
            if hasattr(sock, "setsockopt"):
                self.sock = sock
                self.quickack = True
                self._ack()

    def _ack(self) -> None:
        # Linux clears TCP_QUICKACK as it sees fit: re-armed after every read.
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            self.quickack = False

    def data_received(self, data: bytes) -> None:
        if self.idle:
            # Nothing is owed on an idle connection: it cannot be reused.
            self.pool._discard(self)
            return
        if self.quickack:
            self._ack()
        sink = self.sink
        if sink is not None and not self.chunks:
            sink(data)
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        self.eof = True
        if self.idle:
            self.pool._discard(self)
        self._wake()
        if self.sink is not None:
            self.sink(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.eof = True
        if exc is not None and self.error is None:
            self.error = exc
        if self.idle:
            self.pool._discard(self)
        self._wake()
        if self.sink is not None:
            self.sink(None)
        waiter = self.write_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        waiter = self.write_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading and writing ---------------------------------------------------------------

    async def read(self, timeout: float | None) -> bytes:
        """What has arrived (waiting for it if nothing has); ``b""`` at end of input."""
        if not self.chunks:
            if self.eof:
                if self.error is not None:
                    raise httpx.ReadError(str(self.error) or type(self.error).__name__)
                return b""
            loop = asyncio.get_running_loop()
            waiter = self.waiter = loop.create_future()
            handle = None if timeout is None else loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                self.waiter = None
                if handle is not None:
                    handle.cancel()
            if not self.chunks:
                if self.error is not None:
                    raise httpx.ReadError(str(self.error) or type(self.error).__name__)
                return b""
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.size = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def unread(self, data: bytes) -> None:
        """Put back bytes read ahead (the start of a body read with the head)."""
        if data:
            self.chunks.insert(0, data)
            self.size += len(data)

    async def write(self, data: bytes, timeout: float | None) -> None:
        transport = self.transport
        if self.lost or transport is None or transport.is_closing():
            raise httpx.WriteError("the connection is closed")
        transport.write(data)
        if self.write_paused:
            loop = asyncio.get_running_loop()
            waiter = self.write_waiter = loop.create_future()
            handle = None if timeout is None else loop.call_later(timeout, _expire_write, waiter)
            try:
                await waiter
            finally:
                self.write_waiter = None
                if handle is not None:
                    handle.cancel()
        if self.error is not None:
            raise httpx.WriteError(str(self.error) or type(self.error).__name__)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout("timed out waiting for the upstream"))


def _expire_write(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.WriteTimeout("timed out writing the request"))


class _Reply:
    """A response as llhttp parses it (strict mode): its head, then the body bytes of
    each read. llhttp calls the ``on_*`` methods; a framing error is an
    ``httpx.RemoteProtocolError``."""

    __slots__ = (
        "ended",
        "extra",
        "head_done",
        "head_ends",
        "head_read",
        "head_size",
        "headers",
        "interim",
        "minor",
        "out",
        "parser",
        "reason",
        "status",
        "trailer",
        "upgraded",
    )

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        # Whitespace between a chunk size and its extensions is allowed (RFC 9112, 7.1.1:
        # BWS before ";").
        self.parser.set_dangerous_leniencies(lenient_spaces_after_chunk_size=True)
        self.status = 0
        self.minor = 1
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0  # the head's bytes given by the parser
        self.head_read = 0  # bytes read while the head was under way
        self.head_ends = 0  # line ends at the end of those
        self.head_done = False
        self.interim = False
        self.ended = False
        self.extra = False  # bytes came after the end of the response
        self.upgraded = False  # a 101: what follows its head is not HTTP
        self.out: list[bytes] = []
        self.trailer = 0

    def feed(self, data: bytes) -> bytes:
        """The body bytes in ``data`` (the head's are kept on the reply).

        Raises:
            httpx.RemoteProtocolError: A malformed response.
        """
        if self.upgraded:
            return data
        if self.ended:
            self.extra = True
            return b""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            self.upgraded = True
            rest = data[int(exc.args[0]) :]
            if rest:
                self.out.append(rest)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, httpx.RemoteProtocolError):
                raise cause from None
            raise
        except httptools.HttpParserError as exc:
            if not self._after_end():
                raise httpx.RemoteProtocolError(f"malformed response: {exc}") from None
            self.extra = True  # bytes after the end, which llhttp refuses to read on
        if not self.head_done:
            ends = len(data) - open_head_size(data)
            self.head_ends = min(3, self.head_ends + ends) if ends == len(data) else ends
            self.head_read += len(data)
            if self.head_read - self.head_ends > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response head too long")
        out = self.out
        if not out:
            return b""
        self.out = []
        return out[0] if len(out) == 1 else b"".join(out)

    def _after_end(self) -> bool:
        """Whether the response ended (in the read just parsed)."""
        return self.ended

    # -- llhttp's callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.head_done:
            self.extra = True
            return
        self.reason = b""
        self.headers = []
        self.head_size = 13  # HTTP/1.x NNN SP
        self.interim = False

    def on_status(self, reason: bytes) -> None:
        if not self.head_done:
            self.reason += reason
            self._count(len(reason))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.extra:
            return
        if not self.head_done:
            self.headers.append((name, value.rstrip(b" \t")))  # (llhttp strips the left)
            self._count(len(name) + len(value) + 4)  # CRLF name: value
            return
        self.trailer += len(name) + len(value) + 4
        if self.trailer > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("chunked trailers too long")

    def _count(self, size: int) -> None:
        self.head_size += size
        if self.head_size > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("response head too long")

    def on_headers_complete(self) -> None:
        if self.extra:
            return
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise httpx.RemoteProtocolError(f"unsupported HTTP version {version[:10]!r}")
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.interim = True  # 100 Continue, 103 Early Hints: the real one follows
            return
        self.status = status
        self.minor = 1 if version == "1.1" else 0
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        if self.extra:
            return
        self.out.append(body)

    def on_message_complete(self) -> None:
        if self.head_done and not self.extra:
            self.ended = True


def _framing(
    method: bytes, status: int, headers: list[tuple[bytes, bytes]]
) -> tuple[int, int, bool]:
    """(framing, content length, close requested) of a response (whose
    ``Content-Length`` llhttp has checked)."""
    length: int | None = None
    chunked = False
    close = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-length":
            length = int(value)
        elif lowered == b"transfer-encoding":
            if value.strip(b" \t").lower() != b"chunked" or chunked:
                raise httpx.RemoteProtocolError(f"unsupported Transfer-Encoding {value[:40]!r}")
            chunked = True
        elif lowered == b"connection" and any(
            t.strip(b" \t").lower() == b"close" for t in value.split(b",")
        ):
            close = True
    if method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
        return _NONE, 0, close
    if chunked:
        return _CHUNKED, 0, close
    if length is not None:
        return (_LENGTH, length, close) if length else (_NONE, 0, close)
    return _CLOSE, 0, True


class PushSink(Protocol):
    """What a pushed reply hands its body to, in the connection's own callback."""

    def body(self, data: bytes) -> bool:
        """One read's body bytes (never empty); False: stop pushing after it."""
        ...

    def halt(self) -> None:
        """Pushing stopped by the reply: the body ended, its framing is bad, or the
        connection's input ended. The reader's next read says which."""
        ...


class _Body(httpx.AsyncByteStream):
    """A response body, parsed from the connection's reads as they come."""

    def __init__(
        self,
        transport: AsyncH1Transport,
        conn: _Connection,
        reply: _Reply,
        framing: int,
        keep: bool,
        timeout: float | None,
        first: bytes,
    ) -> None:
        self._transport = transport
        self._conn: _Connection | None = conn
        self._reply = reply
        self._framing = framing
        self._keep = keep
        self._timeout = timeout
        self._first = first  # body bytes read with the head
        self._ended = False
        self._started = False
        self._sink: PushSink | None = None
        self._failed: Exception | None = None  # raised by the next read (see push)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._started:
            raise httpx.StreamConsumed()
        self._started = True
        while True:
            data = await self._next()
            if not data:
                return
            yield data

    async def _next(self) -> bytes:
        """The next body bytes; ``b""`` at the end of the body."""
        first = self._first
        if first or (self._reply.ended and not self._ended):
            # What was read with the head; the whole body, maybe.
            self._first = b""
            if self._reply.ended and not self._ended:
                self._finish()
            if first:
                return first
        while True:
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed
            if self._ended:
                return b""
            conn = self._conn
            if conn is None:
                raise httpx.StreamClosed()
            try:
                data = await conn.read(self._timeout)
            except BaseException:
                self._close()
                raise
            if not data:
                if self._framing == _CLOSE:
                    self._finish()
                    return b""
                self._close()
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            try:
                out = self._unframe(data)
            except httpx.RemoteProtocolError:
                self._close()
                raise
            if out:
                return out

    def _unframe(self, data: bytes) -> bytes:
        """The body bytes of one read (the end of the body releases the connection).

        Raises:
            httpx.RemoteProtocolError: Bad framing.
        """
        reply = self._reply
        out = reply.feed(data)
        if reply.ended:
            self._finish()
        return out

    # -- pushing ---------------------------------------------------------------------

    def push(self, sink: PushSink) -> bool:
        """Hand each later read's body bytes to ``sink`` in the connection's own callback
        (no reader woken), until :meth:`unpush` or the sink stops it. False (nothing
        changes) when the body has ended or bytes wait to be read."""
        conn = self._conn
        if (
            conn is None
            or self._ended
            or self._reply.ended
            or self._failed is not None
            or self._first
            or conn.chunks
            or conn.eof
        ):
            return False
        self._sink = sink
        conn.sink = self._pushed
        return True

    def unpush(self) -> None:
        """Stop pushing: later reads wait for the reader again."""
        self._sink = None
        conn = self._conn
        if conn is not None:
            conn.sink = None

    def expire(self, error: Exception) -> None:
        """Stop pushing; the reader's next read raises ``error`` (a silence that lasted
        the read timeout while pushing)."""
        self.unpush()
        self._failed = error
        self._close()

    def _pushed(self, data: bytes | None) -> None:
        sink = self._sink
        assert sink is not None
        if data is None:
            # The end of input: the reader's next read says what it means.
            self.unpush()
            sink.halt()
            return
        try:
            out = self._unframe(data)
        except httpx.RemoteProtocolError as exc:
            self.unpush()
            self._failed = exc
            self._close()
            sink.halt()
            return
        if out and not sink.body(out):
            self.unpush()
        if self._ended:
            sink.halt()

    def _finish(self) -> None:
        """The body ended: the connection goes back to the pool when it can be reused."""
        self._ended = True
        conn = self._conn
        self._conn = None
        if conn is not None:
            conn.sink = None
            self._transport._release(conn, self._keep and not self._reply.extra)

    def _close(self) -> None:
        conn = self._conn
        self._conn = None
        if conn is not None:
            conn.sink = None
            self._transport._release(conn, False)

    async def aclose(self) -> None:
        if self._conn is not None and not self._ended:
            drain = self._transport._drain
            if self._keep and drain is not None and drain():
                # A finished reply's tail (a terminator the reader did not wait for):
                # read it, for a bounded time and size, so that the connection is kept.
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_DRAIN_SECONDS):
                        size = 0
                        while size <= _DRAIN_BYTES:
                            data = await self._next()
                            if not data:
                                break
                            size += len(data)
        self._close()


class AsyncH1Transport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 ``httpx`` transport over asyncio, with a keep-alive pool.

    Args:
        max_connections: Connections open at once (None: no bound); a request waits
            for one up to its ``pool`` timeout, then raises ``httpx.PoolTimeout``.
        max_keepalive_connections: Idle connections kept for reuse (all hosts).
        keepalive_expiry: Seconds an idle connection is kept.
        ssl_context: For ``https`` (default: httpx's, ``httpx.create_ssl_context()``).
        tcp_quickack: Acknowledge every read at once (Linux ``TCP_QUICKACK``), so that an
            upstream writing one small segment per event is never held by delayed ACKs.
        drain: Called when a response is closed before its end; when it returns True,
            the rest of the body (at most 64 KiB, for at most 0.1 s) is read so that the
            connection can be reused.
        trust_env: Honour proxy environment variables (by handing the request to
            httpx's own transport).
    """

    def __init__(
        self,
        *,
        max_connections: int | None = None,
        max_keepalive_connections: int = 256,
        keepalive_expiry: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        tcp_quickack: bool = False,
        drain: Callable[[], bool] | None = None,
        trust_env: bool = True,
    ) -> None:
        self._max = max_connections
        self._max_idle = max_keepalive_connections
        self._expiry = keepalive_expiry
        self._ssl = ssl_context
        self._quickack = tcp_quickack
        self._drain = drain
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._idle_count = 0
        self._open = 0
        self._slots: list[asyncio.Future[None]] = []
        self._closed = False
        self._proxies: dict[str, str] = {}
        if trust_env:
            self._proxies = {
                k: v
                for k, v in urllib.request.getproxies_environment().items()
                if k in ("http", "https", "all")
            }
        self._bypass: dict[str, bool] = {}
        self._fallback: dict[str, httpx.AsyncHTTPTransport] = {}

    # -- the pool -----------------------------------------------------------------------

    def _discard(self, conn: _Connection) -> None:
        """Drop an idle connection (closed by the server, expired, or over the bound)."""
        if conn.idle:
            conn.idle = False
            idle = self._idle.get(conn.key)
            if idle is not None:
                with contextlib.suppress(ValueError):
                    idle.remove(conn)
            self._idle_count -= 1
        self._close_conn(conn)

    def _close_conn(self, conn: _Connection) -> None:
        transport = conn.transport
        if transport is not None:
            conn.transport = None
            conn.eof = True
            transport.close()
            self._open -= 1
            self._wake_slot()

    def _release(self, conn: _Connection, keep: bool) -> None:
        if (
            keep
            and not self._closed
            and not conn.eof
            and not conn.chunks
            and self._max_idle > 0
            and conn.transport is not None
        ):
            if self._idle_count >= self._max_idle:
                self._evict()
            conn.idle = True
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, []).append(conn)
            self._idle_count += 1
            self._wake_slot()
            return
        self._close_conn(conn)

    def _evict(self) -> None:
        oldest: _Connection | None = None
        for idle in self._idle.values():
            if idle and (oldest is None or idle[0].idle_since < oldest.idle_since):
                oldest = idle[0]
        if oldest is not None:
            self._discard(oldest)

    def _wake_slot(self) -> None:
        while self._slots:
            waiter = self._slots.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    def _pooled(self, key: tuple[str, str, int]) -> _Connection | None:
        """An idle connection to ``key`` that is still usable, or None."""
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            conn.idle = False
            self._idle_count -= 1
            if conn.eof or now - conn.idle_since > self._expiry:
                self._close_conn(conn)
                continue
            conn.reused = True
            return conn
        return None

    async def _acquire(
        self, key: tuple[str, str, int], timeouts: dict[str, Any], sni: Any = None
    ) -> _Connection:
        conn = self._pooled(key)
        if conn is not None:
            return conn
        if self._max is not None and self._open >= self._max:
            loop = asyncio.get_running_loop()
            pool = timeouts.get("pool")
            deadline = None if pool is None else loop.time() + pool
            while self._open >= self._max:
                if self._idle_count:
                    self._evict()  # an idle connection to another host makes room
                    continue
                waiter = loop.create_future()
                self._slots.append(waiter)
                try:
                    async with asyncio.timeout_at(deadline):
                        await waiter
                except BaseException as exc:
                    if waiter.done() and not waiter.cancelled():
                        self._wake_slot()  # handed a slot it will not use: pass it on
                    if isinstance(exc, TimeoutError):
                        raise httpx.PoolTimeout("no connection available in time") from None
                    raise
                finally:
                    with contextlib.suppress(ValueError):
                        self._slots.remove(waiter)
                conn = self._pooled(key)
                if conn is not None:
                    return conn
        return await self._connect(key, timeouts, sni)

    async def _connect(
        self, key: tuple[str, str, int], timeouts: dict[str, Any], sni: Any = None
    ) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        context: ssl.SSLContext | None = None
        server_hostname: str | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            context = self._ssl
            server_hostname = sni.decode() if isinstance(sni, bytes) else (sni or host)
        conn = _Connection(self, key)
        self._open += 1
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                await loop.create_connection(
                    lambda: conn,
                    host.strip("[]"),
                    port,
                    ssl=context,
                    server_hostname=server_hostname,
                )
        except BaseException as exc:
            if conn.transport is not None:
                self._close_conn(conn)
            else:
                self._open -= 1
                self._wake_slot()
            if isinstance(exc, TimeoutError):
                raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
            if isinstance(exc, OSError | ssl.CertificateError):
                raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
            raise
        return conn

    # -- a request ------------------------------------------------------------------------

    def _proxy_for(self, url: httpx.URL) -> str | None:
        proxy = self._proxies.get(url.scheme) or self._proxies.get("all")
        if proxy is None:
            return None
        host = url.host
        bypass = self._bypass.get(host)
        if bypass is None:
            bypass = self._bypass[host] = bool(
                urllib.request.proxy_bypass_environment(host)  # type: ignore[attr-defined]
            )
        return None if bypass else proxy

    def proxied(self, url: str) -> bool:
        """Whether the environment sends requests to ``url`` through a proxy (they then
        go through httpx's own transport)."""
        if not self._proxies:
            return False
        return self._proxy_for(httpx.URL(url)) is not None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if self._proxies:
            proxy = self._proxy_for(url)
            if proxy is not None:
                fallback = self._fallback.get(proxy)
                if fallback is None:
                    fallback = self._fallback[proxy] = httpx.AsyncHTTPTransport(
                        proxy=proxy,
                        limits=httpx.Limits(
                            max_connections=self._max,
                            max_keepalive_connections=self._max_idle,
                            keepalive_expiry=self._expiry,
                        ),
                    )
                return await fallback.handle_async_request(request)
        if self._closed:
            raise RuntimeError("the transport is closed")
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        host = url.host
        port = url.port or _DEFAULT_PORTS[scheme]
        key = (scheme, host, port)
        timeouts: dict[str, Any] = request.extensions.get("timeout") or {}
        method = request.method.encode("ascii")
        head, body, stream = _request_head(request, method, url)
        sni = request.extensions.get("sni_hostname")
        status, reason, minor, headers, content = await self._send(
            key, method, head, body, stream, timeouts, sni
        )
        extensions = {"http_version": b"HTTP/1.%d" % minor, "reason_phrase": reason}
        if content is None:
            return httpx.Response(status, headers=headers, extensions=extensions)
        return httpx.Response(status, headers=headers, stream=content, extensions=extensions)

    async def _send(
        self,
        key: tuple[str, str, int],
        method: bytes,
        head: bytes,
        body: bytes | None,
        stream: Any,
        timeouts: dict[str, Any],
        sni: Any = None,
    ) -> tuple[int, bytes, int, list[tuple[bytes, bytes]], _Body | None]:
        """Send a request on a pooled (or new) connection: (status, reason, minor
        version, headers, body stream or None when the reply has no body)."""
        for attempt in (0, 1):
            conn = await self._acquire(key, timeouts, sni)
            try:
                return await self._exchange(
                    conn, method, head, body, stream, timeouts, retry=attempt == 0
                )
            except _Stale:
                continue
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exchange(
        self,
        conn: _Connection,
        method: bytes,
        head: bytes,
        body: bytes | None,
        stream: Any,
        timeouts: dict[str, Any],
        *,
        retry: bool,
    ) -> tuple[int, bytes, int, list[tuple[bytes, bytes]], _Body | None]:
        # Resent on a new connection only if nothing of the reply came back on a reused
        # one, and then a POST only when the failure is the first read's.
        retry = retry and conn.reused and body is not None
        try:
            if retry and conn.eof:
                raise _Stale()  # closed by the server since it was pooled: nothing sent
            try:
                if body is not None:
                    await conn.write(head + body if body else head, timeouts.get("write"))
                else:
                    await _write_stream(conn, head, stream, timeouts.get("write"))
            except httpx.WriteError:
                if retry and method in _SAFE_METHODS:
                    raise _Stale() from None
                raise
            read_timeout = timeouts.get("read")
            reply = _Reply()
            first = b""
            while not reply.head_done:
                try:
                    data = await conn.read(read_timeout)
                except httpx.ReadError:
                    if retry:
                        raise _Stale() from None
                    raise
                if not data:
                    if retry:
                        raise _Stale()
                    if not reply.head_read:
                        raise httpx.RemoteProtocolError(
                            "Server disconnected without sending a response."
                        )
                    raise httpx.RemoteProtocolError("peer closed connection in the response head")
                retry = False
                first = reply.feed(data)
            status, minor, headers = reply.status, reply.minor, reply.headers
            framing, _, close = _framing(method, status, headers)
        except BaseException:
            self._release(conn, False)
            raise
        keep = not close and minor == 1 and status != 101 and b"close" not in _conn_tokens(head)
        if framing == _NONE:
            # (llhttp, not told of a HEAD request, waits for the body its length says.)
            ended = reply.ended or method == b"HEAD"
            self._release(conn, keep and ended and not reply.extra and not first)
            return status, reply.reason, minor, headers, None
        reply_body = _Body(self, conn, reply, framing, keep, read_timeout, first)
        return status, reply.reason, minor, headers, reply_body

    async def aclose(self) -> None:
        self._closed = True
        for idle in list(self._idle.values()):
            for conn in list(idle):
                self._discard(conn)
        self._idle.clear()
        for fallback in self._fallback.values():
            await fallback.aclose()
        self._fallback.clear()


def _conn_tokens(head: bytes) -> bytes:
    """The request's ``Connection`` header value, lowered (b"" when absent)."""
    lowered = head.lower()
    start = lowered.find(b"\r\nconnection:")
    if start < 0:
        return b""
    end = lowered.find(b"\r\n", start + 2)
    return lowered[start + 13 : end]


def _check_header(name: bytes, value: bytes) -> None:
    """Refuse a header that would break the request head (a line break in the value,
    a name that is not a token)."""
    if b"\r" in value or b"\n" in value or _TOKEN.fullmatch(name) is None:
        raise httpx.LocalProtocolError(f"invalid request header {name!r}")


def _request_head(
    request: httpx.Request, method: bytes, url: httpx.URL
) -> tuple[bytes, bytes | None, Any]:
    """(head, body bytes or None, body stream) of a request."""
    try:
        body: bytes | None = request.content
    except httpx.RequestNotRead:
        body = None
    parts = [method, b" ", url.raw_path, b" HTTP/1.1\r\n"]
    has_host = has_length = has_te = False
    for name, value in request.headers.raw:
        _check_header(name, value)
        lowered = name.lower()
        if lowered == b"host":
            has_host = True
        elif lowered == b"content-length":
            has_length = True
        elif lowered == b"transfer-encoding":
            has_te = True
        parts += (name, b": ", value, b"\r\n")
    if not has_host:
        parts[4:4] = (b"Host: ", url.netloc, b"\r\n")
    if body is not None:
        if body and not has_length and not has_te:
            parts += (b"Content-Length: ", str(len(body)).encode(), b"\r\n")
    elif not has_length and not has_te:
        parts.append(b"Transfer-Encoding: chunked\r\n")
        has_te = True
    parts.append(b"\r\n")
    return b"".join(parts), body, (request.stream, has_te and not has_length)


async def _write_stream(conn: _Connection, head: bytes, stream: Any, timeout: float | None) -> None:
    """Write a streamed request body (chunked unless its length was given)."""
    source, chunked = stream
    await conn.write(head, timeout)
    if hasattr(source, "__aiter__"):
        async for part in source:
            if part:
                await conn.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part, timeout)
    else:
        for part in source:
            if part:
                await conn.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part, timeout)
    if chunked:
        await conn.write(b"0\r\n\r\n", timeout)


# -- the direct client: httpx.AsyncClient's stream() surface without its client layer -----

_SAFE_TARGET: Final = "/:@!$&'()*+,;=-._~%?"
"""Kept as they are in a request target (everything else is percent-encoded)."""
_TARGETS_CACHED: Final = 1024
_HEADERS_CACHED: Final = 256


class DirectReply:
    """A reply opened by :meth:`DirectClient.stream`: the reading surface of
    ``httpx.Response`` that a streaming call uses.

    Attributes:
        status_code: The HTTP status.
        reason_phrase: The status line's reason.
        http_version: ``HTTP/1.1`` or ``HTTP/1.0``.
        headers: Header names lowered; repeated headers joined with ``", "``.
    """

    __slots__ = ("_body", "_decoder", "headers", "http_version", "reason_phrase", "status_code")

    def __init__(
        self,
        status: int,
        reason: bytes,
        minor: int,
        raw_headers: list[tuple[bytes, bytes]],
        body: _Body | None,
    ) -> None:
        self.status_code = status
        self.reason_phrase = reason.decode("latin-1")
        self.http_version = f"HTTP/1.{minor}"
        headers: dict[str, str] = {}
        for name, value in raw_headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers = headers
        self._body = body
        self._decoder: Any = None
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif coding == "deflate":
            self._decoder = zlib.decompressobj()
        elif coding not in ("identity", ""):
            if body is not None:
                body._close()
            raise httpx.DecodingError(f"unsupported Content-Encoding {coding!r}")

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, as it arrives (decompressed when the server compressed it)."""
        return _BodyIterator(self)

    def push(self, sink: PushSink) -> bool:
        """Hand each later read's body bytes to ``sink`` as the connection receives
        them, between two reads of :meth:`aiter_bytes` (see :meth:`_Body.push`); False
        when this reply cannot (no body, a compressed one, ended, or bytes waiting)."""
        body = self._body
        return body is not None and self._decoder is None and body.push(sink)

    def unpush(self) -> None:
        """Stop pushing."""
        if self._body is not None:
            self._body.unpush()

    def expire(self, error: Exception) -> None:
        """Stop pushing; the next read raises ``error``."""
        if self._body is not None:
            self._body.expire(error)

    async def aread(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Release the connection (kept for reuse when the body was read to its end)."""
        body = self._body
        if body is not None:
            await body.aclose()

    def _decode(self, data: bytes, final: bool) -> bytes:
        """At most :data:`INFLATE_STEP` bytes of the decompressed body; input left over
        stays in the decoder's ``unconsumed_tail`` for the next call (so that a small,
        highly compressed read never becomes one huge piece of memory)."""
        try:
            out: bytes = self._decoder.decompress(data, INFLATE_STEP)
            if final and not self._decoder.unconsumed_tail:
                out += self._decoder.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"cannot decompress the body: {exc}") from None
        return out


class _BodyIterator:
    """Iterates a :class:`DirectReply`'s body (a class, not a generator: nothing is left
    to finalize when the reader stops early)."""

    __slots__ = ("_done", "_reply")

    def __init__(self, reply: DirectReply) -> None:
        self._reply = reply
        self._done = reply._body is None

    def __aiter__(self) -> _BodyIterator:
        return self

    async def __anext__(self) -> bytes:
        reply = self._reply
        decoder = reply._decoder
        if decoder is not None and decoder.unconsumed_tail:
            # What the last read left to decompress comes first, a step at a time.
            data = reply._decode(decoder.unconsumed_tail, self._done)
            if data:
                return data
        while not self._done:
            body = reply._body
            assert body is not None
            data = await body._next()
            if decoder is None:
                if data:
                    return data
                self._done = True
                break
            if not data:
                self._done = True
                data = reply._decode(b"", True)
            else:
                data = reply._decode(data, False)
            if data:
                return data
        raise StopAsyncIteration


class _Exchange:
    """``async with client.stream(...) as reply``: sends on enter, releases on exit."""

    __slots__ = ("_client", "_reply", "_request")

    def __init__(
        self,
        client: DirectClient,
        request: tuple[str, str, Mapping[str, str], bytes | None],
    ) -> None:
        self._client = client
        self._request = request
        self._reply: Any = None

    async def __aenter__(self) -> Any:
        client = self._client
        method, url, headers, content = self._request
        key, target, host, proxied = client._target(url)
        if proxied:
            self._reply = client._fallback.stream(method, url, headers=headers, content=content)
            return await self._reply.__aenter__()
        head = client._head(method, target, host, headers, content)
        status, reason, minor, raw, body = await client._transport._send(
            key, method.encode("ascii"), head, content or b"", None, client._timeouts
        )
        self._reply = DirectReply(status, reason, minor, raw, body)
        return self._reply

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        reply = self._reply
        if isinstance(reply, DirectReply):
            await reply.aclose()
        elif reply is not None:
            await reply.__aexit__(kind, value, traceback)


class DirectClient:
    """``httpx.AsyncClient.stream()`` over an :class:`AsyncH1Transport`'s own
    connections, without httpx's client layer (request and response objects, cookies,
    auth and event hooks), which costs about 140 µs per request.

    What is sent: the given headers, ``Host``, ``Content-Length``, and unless given,
    ``Accept-Encoding: identity`` and a ``User-Agent``. A reply that is compressed anyway
    (gzip, deflate) is decompressed. No redirects are followed. A URL the environment
    proxies goes through ``fallback`` (an httpx client on the same transport).

    Args:
        transport: The connections.
        timeout: Connect, read, write and pool timeouts.
        fallback: The httpx client for proxied URLs.
        user_agent: The ``User-Agent`` header.
    """

    def __init__(
        self,
        transport: AsyncH1Transport,
        *,
        timeout: httpx.Timeout,
        fallback: httpx.AsyncClient,
        user_agent: str,
    ) -> None:
        self._transport = transport
        self.timeout = timeout
        self._timeouts: dict[str, Any] = timeout.as_dict()
        self._fallback = fallback
        self._user_agent = user_agent.encode("latin-1")
        self._targets: dict[str, tuple[tuple[str, str, int], bytes, bytes, bool]] = {}
        # The header lines of a header set, checked and encoded once: a gateway sends
        # the same few sets (one per upstream) on every request.
        self._lines: dict[tuple[tuple[str, str], ...], bytes] = {}

    def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
    ) -> _Exchange:
        """Send a request; the reply's body streams (use as ``async with``)."""
        return _Exchange(self, (method, url, headers, content))

    def _target(self, url: str) -> tuple[tuple[str, str, int], bytes, bytes, bool]:
        """(pool key, request target, Host value, whether it is proxied) of a URL."""
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        host = parts.hostname
        if not host:
            raise httpx.UnsupportedProtocol(f"no host in URL {url!r}")
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            raise httpx.InvalidURL(f"invalid port in URL {url!r}") from None
        target = quote(parts.path or "/", safe=_SAFE_TARGET)
        if parts.query:
            target += "?" + quote(parts.query, safe=_SAFE_TARGET)
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None and parts.port != _DEFAULT_PORTS[scheme]:
            netloc += f":{parts.port}"
        entry = (
            (scheme, host, port),
            target.encode("ascii"),
            netloc.encode("idna"),
            self._transport.proxied(url),
        )
        if len(self._targets) >= _TARGETS_CACHED:
            self._targets.clear()
        self._targets[url] = entry
        return entry

    def _head(
        self,
        method: str,
        target: bytes,
        host: bytes,
        headers: Mapping[str, str],
        content: bytes | None,
    ) -> bytes:
        """The request head (the framing headers are this client's)."""
        key = tuple(headers.items())
        lines = self._lines.get(key)
        if lines is None:
            lines = self._header_lines(key)
            if len(self._lines) >= _HEADERS_CACHED:
                self._lines.clear()
            self._lines[key] = lines
        parts = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\n", lines]
        if content or method not in ("GET", "HEAD"):
            parts += (b"Content-Length: ", b"%d" % len(content or b""), b"\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    def _header_lines(self, headers: tuple[tuple[str, str], ...]) -> bytes:
        """The lines of the given headers, each checked, and the defaults this client
        adds (``User-Agent``, ``Accept-Encoding``); the framing headers are dropped."""
        parts: list[bytes] = []
        agent = encoding = False
        for name, value in headers:
            raw_name = name.encode("latin-1")
            raw_value = value.encode("latin-1")
            _check_header(raw_name, raw_value)
            lowered = raw_name.lower()
            if lowered in (b"host", b"content-length", b"transfer-encoding"):
                continue  # the framing is this client's
            if lowered == b"user-agent":
                agent = True
            elif lowered == b"accept-encoding":
                encoding = True
            parts += (raw_name, b": ", raw_value, b"\r\n")
        if not agent:
            parts += (b"User-Agent: ", self._user_agent, b"\r\n")
        if not encoding:
            parts.append(b"Accept-Encoding: identity\r\n")
        return b"".join(parts)
