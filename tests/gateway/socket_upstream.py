"""A scripted WebSocket upstream on loopback (``websockets.serve``, in a thread of its
own): each connection runs a script, and what it was sent (the handshake's path and
headers, the messages, the close) is recorded for the test to check."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response


class Conn:
    """One connection the upstream served: what it received, and how it closed."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.path: str = ws.request.path if ws.request is not None else ""
        self.headers: Headers = ws.request.headers if ws.request is not None else Headers()
        self.received: list[str | bytes] = []
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.done = threading.Event()

    async def recv(self) -> str | bytes:
        """The client's next message (recorded)."""
        message = await self.ws.recv()
        self.received.append(message)
        return message

    async def drain(self) -> None:
        """Record the client's messages until it closes."""
        with contextlib.suppress(Exception):
            async for message in self.ws:
                self.received.append(message)


Script = Callable[[Conn], Awaitable[None]]


class ScriptedUpstream:
    """A WebSocket server on a free loopback port that runs ``script`` on each
    connection (after it, the connection is read until the other side closes it);
    ``refuse`` answers every handshake with an HTTP status and body instead."""

    def __init__(
        self,
        script: Script,
        *,
        refuse: tuple[int, bytes] | None = None,
        location: str | None = None,
    ) -> None:
        self.script = script
        self.refuse = refuse
        self.location = location
        self.conns: list[Conn] = []
        self.handshakes = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    @property
    def base_url(self) -> str:
        """The upstream's base URL, as an SDK's (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        stop = self._stop = asyncio.Event()
        async with serve(
            self._handle,
            sock=self._sock,
            process_request=self._process,
            compression=None,
            max_size=None,
        ) as server:
            self._server = server
            self._ready.set()
            await stop.wait()

    def _process(self, ws: ServerConnection, request: Request) -> Response | None:
        self.handshakes += 1
        if self.refuse is None:
            return None
        status, body = self.refuse
        response = ws.respond(status, body.decode())
        if self.location is not None:
            response.headers["Location"] = self.location
        return response

    async def _handle(self, ws: ServerConnection) -> None:
        conn = Conn(ws)
        self.conns.append(conn)
        try:
            await self.script(conn)
            await conn.drain()
        finally:
            await ws.wait_closed()
            rcvd = ws.close_code
            conn.close_code = rcvd
            conn.close_reason = ws.close_reason
            conn.done.set()

    def conn(self, index: int = 0, timeout: float = 5.0) -> Conn:
        """The ``index``-th connection, once it has closed."""
        for _ in range(int(timeout * 100)):
            if len(self.conns) > index:
                break
            threading.Event().wait(0.01)
        conn = self.conns[index]
        assert conn.done.wait(timeout), "the upstream connection did not close"
        return conn

    def call(self, coro: Awaitable[Any]) -> Any:
        """Run ``coro`` on the upstream's loop (from the test's thread)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    def __enter__(self) -> ScriptedUpstream:
        self._thread.start()
        assert self._ready.wait(5)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
