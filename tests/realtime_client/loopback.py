"""A scripted WebSocket server on 127.0.0.1, in a thread of its own (so that sync and
async clients can both talk to it): each connection attempt takes the next entry of
the script, either a handler (an async function of a :class:`Peer`) or a
:class:`Refuse` (the handshake answered with an HTTP status)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response


@dataclass
class Refuse:
    """Answer the handshake with ``status`` and a JSON ``body``."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class Peer:
    """The server's side of one connection, for a handler."""

    def __init__(self, ws: ServerConnection, request: Request) -> None:
        self.ws = ws
        self.path = request.path
        self.headers = {k.lower(): v for k, v in request.headers.raw_items()}
        self.received: list[str | bytes] = []
        self.closed_by_client: int | None = None

    async def expect(self, count: int) -> list[str | bytes]:
        """The next ``count`` messages the client sends."""
        got = []
        for _ in range(count):
            got.append(await self.ws.recv())
        self.received += got
        return got

    async def send(self, *messages: str | dict[str, Any]) -> None:
        for message in messages:
            text = message if isinstance(message, str) else json.dumps(message)
            await self.ws.send(text)

    async def close(self, code: int, reason: str = "") -> None:
        await self.ws.close(code, reason)

    async def drain(self) -> None:
        """Read until the client closes."""
        try:
            async for message in self.ws:
                self.received.append(message)
        except ConnectionClosed:
            pass
        rcvd = self.ws.protocol.close_rcvd
        self.closed_by_client = rcvd.code if rcvd is not None else None


Handler = Callable[[Peer], Awaitable[None]]


class Loopback:
    """The server; ``with Loopback(h1, Refuse(401), ...) as server:``.

    Attributes:
        peers: One per connection handled, in order.
        attempts: The path of every handshake, in order (refused ones included).
        errors: What the handlers raised (a failed assertion), checked on exit.
    """

    def __init__(self, *script: Handler | Refuse) -> None:
        self.script = list(script)
        self.peers: list[Peer] = []
        self.attempts: list[str] = []
        self.errors: list[BaseException] = []
        self._which: dict[int, int] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Any = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """The emulator-like base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Loopback:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
        if self.errors and exc[0] is None:
            raise self.errors[0]

    async def _start(self) -> None:
        self._server = await serve(
            self._handle, "127.0.0.1", 0, process_request=self._process, ping_interval=None
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self._server.close()
        await self._server.wait_closed()

    def _process(self, connection: ServerConnection, request: Request) -> Response | None:
        attempt = len(self.attempts)
        self.attempts.append(request.path)
        entry = self.script[attempt] if attempt < len(self.script) else Refuse(503)
        if isinstance(entry, Refuse):
            body = json.dumps(entry.body).encode() if entry.body is not None else b""
            headers = Headers({"Content-Type": "application/json", **entry.headers})
            headers["Content-Length"] = str(len(body))
            phrase = HTTPStatus(entry.status).phrase
            return Response(entry.status, phrase, headers, body)
        self._which[id(connection)] = attempt
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        entry = self.script[self._which[id(ws)]]
        assert not isinstance(entry, Refuse)
        assert ws.request is not None
        peer = Peer(ws, ws.request)
        self.peers.append(peer)
        try:
            await entry(peer)
        except ConnectionClosed:
            pass
        except BaseException as exc:
            self.errors.append(exc)
            raise
