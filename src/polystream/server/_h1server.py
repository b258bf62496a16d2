"""A lean HTTP/1.1 server for ASGI apps on plain asyncio: what ``polystream gateway``
serves with. Requests are parsed by llhttp (through ``httptools``), in strict mode.

A gateway stands between a client and an upstream, so every microsecond it spends on a
request is added to the client's latency. This server keeps that small: each read is
parsed once, the app runs in a task whose first step runs in the read that completed
the request's head (a gateway's upstream request leaves in that same turn of the
loop), and a response's head leaves in the same write as its first body bytes (one
segment, one wake-up of the client, instead of two).

Scope: HTTP/1.1 and 1.0 over TCP, or over TLS when given an ``ssl.SSLContext`` (HTTPS,
and WSS on the same port; a TLS handshake must end within ``head_timeout``, and a
connection counts against ``max_connections`` once it has); keep-alive; pipelined
requests answered in order; request bodies by ``Content-Length`` or chunked; ``Expect:
100-continue``; responses by ``Content-Length``, chunked (HTTP/1.1) or delimited by the
close (HTTP/1.0). ASGI 3: the ``http``, ``websocket`` (see
:mod:`polystream.server._h1websocket`) and ``lifespan`` scopes. What it refuses, with a
status and a closed connection: anything llhttp's strict mode refuses (a malformed
request line, header or chunk framing, bare CR or LF line ends, obsolete line folding,
both ``Content-Length`` and ``Transfer-Encoding``, a repeated ``Content-Length``,
chunked not the last coding: 400), and what it leaves to the application: an HTTP
version other than 1.0 and 1.1, no ``Host`` in HTTP/1.1 or more than one,
``Transfer-Encoding`` in HTTP/1.0 (400); a head over 64 KiB or 100 headers (431); a
transfer coding other than chunked (501); a declared ``Content-Length`` over
``max_body_bytes``, before any of the body is read, or a chunked body growing past it
(413); an expectation other than ``100-continue`` (417). Connections past
``max_connections`` get a 503 with ``Retry-After`` and are closed. These refusals are
plain text, unless the server was given a ``refusal`` hook (see :data:`Refusal`): a 413
then has the body and headers the hook makes for the request's path (the application's
own error shape); the connection-cap 503 is answered before any of the request is read,
so it stays plain.

Connections are bounded in time: one idle between requests is closed after
``keepalive_timeout``; a request head must arrive whole within ``head_timeout`` of its
first byte; a request body may not go ``body_timeout`` without a byte arriving (the app
then sees a disconnect).

This module holds the server and :func:`run`; a connection is
:class:`~polystream.server._h1protocol.ServerConnection`, one request and its response a
:class:`~polystream.server._h1cycle.Cycle`, and what they share (the limits, the ASGI
types, the lifespan protocol) is in :mod:`polystream.server._h1support`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl as _ssl
from typing import Any

from polystream.server._h1cycle import Cycle
from polystream.server._h1protocol import ServerConnection
from polystream.server._h1support import (
    SEND_NOWAIT,
    App,
    Lifespan,
    RateLimitedLog,
    Refusal,
    ServerLimits,
    accept_error,
    logger,
)

__all__ = ["SEND_NOWAIT", "H1Server", "Refusal", "ServerLimits", "run"]

# The names this module had before its parts moved out, for the code that imports them.
_Connection = ServerConnection
_Cycle = Cycle


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
        self.connections: set[ServerConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.refused = 0
        """Connections refused past ``max_connections``."""
        self.accept_log = RateLimitedLog()
        self.ssl: _ssl.SSLContext | None = None
        """The TLS context once started over TLS (the scopes' scheme is then ``https``
        and ``wss``)."""
        self._server: asyncio.Server | None = None
        self._port = 0
        self._lifespan: Lifespan | None = None
        self._previous_handler: Any = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self._port

    async def start(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        """Run the app's lifespan startup, then listen (over TLS with ``ssl``, a
        server-side context: see :meth:`polystream.server.TLSFiles.server_context`)."""
        self.ssl = ssl
        # (A TLS handshake, before the connection counts, has as long as a head.)
        tls: dict[str, Any] = {}
        if ssl is not None:
            tls = {"ssl": ssl, "ssl_handshake_timeout": self.limits.head_timeout}
        self._lifespan = Lifespan(self.app)
        await self._lifespan.startup()
        loop = asyncio.get_running_loop()
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        if sock is not None:
            self._server = await loop.create_server(
                lambda: ServerConnection(self), sock=sock, backlog=2048, **tls
            )
        else:
            self._server = await loop.create_server(
                lambda: ServerConnection(self),
                host,
                port,
                reuse_address=True,
                backlog=2048,
                **tls,
            )
        self._port = int(self._server.sockets[0].getsockname()[1])

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler from the server's start on: the errors of
        accepting connections (out of file descriptors, say, which repeats for every
        connection waiting, and the retries asyncio schedules for it, which may fire
        after a shutdown) are logged at a bounded rate; others go to the handler
        before it."""
        if accept_error(context):
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

    async def run_app(self, conn: ServerConnection, cycle: Cycle) -> None:
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
            if conn.websocket is not None:
                conn.websocket.shutdown()  # (a close, 1012, which its app is told of)
            elif conn.cycle is None:
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


def run(
    app: App,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    sock: socket.socket | None = None,
    refusal: Refusal | None = None,
    ssl: _ssl.SSLContext | None = None,
    **options: Any,
) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, then shut down gracefully.

    Args:
        app: The ASGI app.
        host: The interface to bind.
        port: The port.
        sock: A socket already bound, to listen on instead of ``host`` and ``port``.
        refusal: Shapes the server's 413 refusals (see :data:`Refusal`).
        ssl: Serve HTTPS and WSS with this server-side context (None: plain TCP).
        options: :class:`ServerLimits` fields.
    """

    async def main() -> None:
        server = H1Server(app, limits=ServerLimits(**options), refusal=refusal)
        await server.start(host, port, sock=sock, ssl=ssl)
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
