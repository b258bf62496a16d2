"""One request and its response on the HTTP/1.1 server (:class:`Cycle`): the request
body handed to the app, the response head and body framed as the app sends them; and
the refusals' pieces (:class:`BadRequest`, :func:`shaped_refusal`)."""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote

from polystream.server._h1support import (
    SEND_NOWAIT,
    TOKEN,
    HttpDate,
    Message,
    Refusal,
    Scope,
    logger,
    resolve,
)

if TYPE_CHECKING:
    from polystream.server._h1protocol import ServerConnection

__all__ = ["BadRequest", "Cycle", "reason_phrase", "shaped_refusal", "target_path"]

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


class BadRequest(Exception):
    def __init__(self, status: int, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.path = path
        """The refused request's path, where it is known and the refusal is one a
        :data:`Refusal` hook shapes."""


class Cycle:
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
        conn: ServerConnection,
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

    def add(self, data: bytes) -> None:
        self.body.append(data)
        self.body_size += len(data)

    def wake(self) -> None:
        resolve(self.app_waiter)

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
            self.wake()
            conn.finished(self)

    def _start(self, message: Message) -> None:
        status = int(message["status"])
        scope = self.scope
        parts = [b"HTTP/1.1 %d %b\r\n" % (status, reason_phrase(status))]
        length: int | None = None
        own_date = False
        for name, value in message.get("headers", ()):
            if TOKEN.fullmatch(name) is None or b"\r" in value or b"\n" in value:
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
            parts += (b"date: ", HttpDate.now(), b"\r\n")
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
        asyncio.get_running_loop().call_soon(self.flush_head)

    def flush_head(self) -> None:
        head = self.pending_head
        if head is not None and not self.conn.closed:
            self.pending_head = None
            self.conn.write(head)


_PHRASES: dict[int, bytes] = dict(_REASONS)


def reason_phrase(status: int) -> bytes:
    reason = _PHRASES.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase.encode("ascii")
        except ValueError:
            reason = b"Unknown"
        if len(_PHRASES) < 1000:
            _PHRASES[status] = reason
    return reason


def target_path(target: bytes) -> str | None:
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


def shaped_refusal(
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
                TOKEN.fullmatch(name) is None
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
