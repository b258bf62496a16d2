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

This module holds the pool; the connection and the response parser are in
:mod:`polystream.client._h1conn`, the response body in :mod:`polystream.client._h1body`,
the request head in :mod:`polystream.client._h1request`, and the direct client (the
gateway's upstream calls without httpx's client layer) in :mod:`polystream.client._direct`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.request
from collections.abc import Callable
from typing import Any, Final

import httpx

from polystream.client._direct import INFLATE_STEP, DirectClient, DirectReply
from polystream.client._h1body import Body, PushSink
from polystream.client._h1conn import (
    BODY_NONE,
    HIGH_WATER,
    MAX_HEAD_BYTES,
    Connection,
    Reply,
    response_framing,
)
from polystream.client._h1request import DEFAULT_PORTS, conn_tokens, request_head, write_stream

__all__ = [
    "INFLATE_STEP",
    "MAX_HEAD_BYTES",
    "AsyncH1Transport",
    "DirectClient",
    "DirectReply",
    "PushSink",
]

# The names this module had before its parts moved out, for the code that imports them.
_Connection = Connection
_Reply = Reply
_Body = Body
_HIGH_WATER: Final = HIGH_WATER
_framing = response_framing

_DRAIN_BYTES: Final = 64 * 1024
_DRAIN_SECONDS: Final = 0.1
_SAFE_METHODS: Final = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})


class _Stale(Exception):
    """A reused connection failed before any of the response arrived."""


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
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
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
        self.drain_bytes: int = _DRAIN_BYTES
        """Most bytes of a closed reply's tail read to keep its connection (see ``drain``)."""
        self.drain_seconds: float = _DRAIN_SECONDS
        """Longest time spent reading a closed reply's tail (see ``drain``)."""

    @property
    def tcp_quickack(self) -> bool:
        """Whether every read is acknowledged at once (``tcp_quickack``)."""
        return self._quickack

    @property
    def drain(self) -> Callable[[], bool] | None:
        """The hook that says whether a reply closed before its end is read to its end
        (``drain``)."""
        return self._drain

    # -- the pool -----------------------------------------------------------------------

    def discard(self, conn: Connection) -> None:
        """Drop an idle connection (closed by the server, expired, or over the bound)."""
        if conn.idle:
            conn.idle = False
            idle = self._idle.get(conn.key)
            if idle is not None:
                with contextlib.suppress(ValueError):
                    idle.remove(conn)
            self._idle_count -= 1
        self._close_conn(conn)

    def _close_conn(self, conn: Connection) -> None:
        transport = conn.transport
        if transport is not None:
            conn.transport = None
            conn.eof = True
            transport.close()
            self._open -= 1
            self._wake_slot()

    def release(self, conn: Connection, keep: bool) -> None:
        """Take back a connection whose reply is done: kept idle for reuse when ``keep``
        and it can be, else closed."""
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
        oldest: Connection | None = None
        for idle in self._idle.values():
            if idle and (oldest is None or idle[0].idle_since < oldest.idle_since):
                oldest = idle[0]
        if oldest is not None:
            self.discard(oldest)

    def _wake_slot(self) -> None:
        while self._slots:
            waiter = self._slots.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    def _pooled(self, key: tuple[str, str, int]) -> Connection | None:
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
    ) -> Connection:
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
    ) -> Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        context: ssl.SSLContext | None = None
        server_hostname: str | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            context = self._ssl
            server_hostname = sni.decode() if isinstance(sni, bytes) else (sni or host)
        conn = Connection(self, key)
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
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        host = url.host
        port = url.port or DEFAULT_PORTS[scheme]
        key = (scheme, host, port)
        timeouts: dict[str, Any] = request.extensions.get("timeout") or {}
        method = request.method.encode("ascii")
        head, body, stream = request_head(request, method, url)
        sni = request.extensions.get("sni_hostname")
        status, reason, minor, headers, content = await self.send(
            key, method, head, body, stream, timeouts, sni
        )
        extensions = {"http_version": b"HTTP/1.%d" % minor, "reason_phrase": reason}
        if content is None:
            return httpx.Response(status, headers=headers, extensions=extensions)
        return httpx.Response(status, headers=headers, stream=content, extensions=extensions)

    async def send(
        self,
        key: tuple[str, str, int],
        method: bytes,
        head: bytes,
        body: bytes | None,
        stream: Any,
        timeouts: dict[str, Any],
        sni: Any = None,
    ) -> tuple[int, bytes, int, list[tuple[bytes, bytes]], Body | None]:
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
        conn: Connection,
        method: bytes,
        head: bytes,
        body: bytes | None,
        stream: Any,
        timeouts: dict[str, Any],
        *,
        retry: bool,
    ) -> tuple[int, bytes, int, list[tuple[bytes, bytes]], Body | None]:
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
                    await write_stream(conn, head, stream, timeouts.get("write"))
            except httpx.WriteError:
                if retry and method in _SAFE_METHODS:
                    raise _Stale() from None
                raise
            read_timeout = timeouts.get("read")
            reply = Reply()
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
            framing, _, close = response_framing(method, status, headers)
        except BaseException:
            self.release(conn, False)
            raise
        keep = not close and minor == 1 and status != 101 and b"close" not in conn_tokens(head)
        if framing == BODY_NONE:
            # (llhttp, not told of a HEAD request, waits for the body its length says.)
            ended = reply.ended or method == b"HEAD"
            self.release(conn, keep and ended and not reply.extra and not first)
            return status, reply.reason, minor, headers, None
        reply_body = Body(self, conn, reply, framing, keep, read_timeout, first)
        return status, reply.reason, minor, headers, reply_body

    async def aclose(self) -> None:
        self._closed = True
        for idle in list(self._idle.values()):
            for conn in list(idle):
                self.discard(conn)
        self._idle.clear()
        for fallback in self._fallback.values():
            await fallback.aclose()
        self._fallback.clear()
