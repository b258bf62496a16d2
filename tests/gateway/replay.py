"""A loopback upstream that answers with planned bytes (fixture files) and records what
it was sent: for the media and agent-session dialects, which the emulator does not
serve."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.gateway.conftest import AppThread


@dataclass
class Reply:
    """One planned answer.

    Attributes:
        body: The body, or its chunks (each sent in its own write).
        status: The status.
        content_type: Its ``Content-Type``.
        headers: More headers.
        length: Send a ``Content-Length`` (of ``declared`` if given, else the body's).
        declared: The ``Content-Length`` to announce (a body cut short).
        cut: Drop the connection after the body, with no clean end.
        pause: Seconds to wait before the last chunk (a stalled upstream).
    """

    body: bytes | list[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: list[tuple[str, str]] = field(default_factory=list)
    length: bool = False
    declared: int | None = None
    cut: bool = False
    pause: float = 0.0


@dataclass
class Seen:
    """A request the upstream was sent."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


class _Cut(Exception):
    """Raised by the app to drop the connection mid-body."""


class Replay:
    """The ASGI app: each request is answered by ``plan(method, path)``, or the next of
    the replies given in order (the last one repeated)."""

    def __init__(self, *replies: Reply, plan: Callable[[str, str], Reply] | None = None) -> None:
        self.replies = list(replies)
        self.plan = plan
        self.seen: list[Seen] = []

    def _next(self, method: str, path: str) -> Reply:
        if self.plan is not None:
            return self.plan(method, path)
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        self.seen.append(
            Seen(
                scope["method"],
                scope["path"],
                scope.get("query_string", b"").decode("latin-1"),
                headers,
                b"".join(chunks),
            )
        )
        reply = self._next(scope["method"], scope["path"])
        parts = [reply.body] if isinstance(reply.body, bytes) else list(reply.body)
        out = [(b"content-type", reply.content_type.encode())]
        out += [(k.encode(), v.encode()) for k, v in reply.headers]
        if reply.length:
            size = reply.declared if reply.declared is not None else sum(map(len, parts))
            out.append((b"content-length", str(size).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": out})
        for i, part in enumerate(parts):
            if reply.pause and i == len(parts) - 1:
                await asyncio.sleep(reply.pause)
            await send({"type": "http.response.body", "body": part, "more_body": True})
        if reply.cut:
            raise _Cut("the upstream drops the connection")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@contextmanager
def replaying(
    *replies: Reply, plan: Callable[[str, str], Reply] | None = None
) -> Iterator[tuple[Replay, AppThread]]:
    """A :class:`Replay` served on loopback (polystream's own server) while in use."""
    app = Replay(*replies, plan=plan)
    server = AppThread(app).start()
    try:
        yield app, server
    finally:
        server.stop()
