"""The HTTP/1.1 server's WebSocket connections: an upgraded connection runs the app's
ASGI ``websocket`` scope over the ``websockets`` library's sans-I/O
:class:`~websockets.server.ServerProtocol` (the handshake's checks, framing, masking,
pings, the closing handshake and the message size bound are the library's; this module
moves its bytes and speaks ASGI).

A ``GET`` request with ``Upgrade: websocket`` that is the only one in flight on its
connection is taken here once llhttp has read its head; what follows it on the
connection is the socket's. An upgrade pipelined behind another request stays a plain
request.

ASGI (spec 2.4): ``websocket.connect``, ``websocket.receive`` (``text`` or ``bytes``, one
whole message) and ``websocket.disconnect`` (``code``, ``reason``) in; ``accept``
(``subprotocol``, ``headers``), ``send``, ``close`` (``code``, ``reason``) and the
``websocket.http.response`` extension (a refused handshake with any status, headers and
body) out. ``close`` before ``accept`` refuses with 403, an app that fails or returns
before either gets a 500, one that fails after ``accept`` closes with 1011, and one that
returns without closing closes with 1000. A send once the client is gone raises
:class:`WebSocketGone` (an ``OSError``).

Bounds: a message is at most :data:`MAX_MESSAGE_BYTES` (16 MiB; past it the connection
closes with 1009); complete messages the app has not taken yet pause reading past
:data:`MAX_QUEUED_MESSAGES` of them or the server's ``max_buffered_bytes``; frames sent
before the handshake is answered pause reading until it is; a send waits while the
client does not take writes; a close is given :data:`CLOSE_TIMEOUT` for the client's
answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final

from websockets.datastructures import Headers
from websockets.exceptions import InvalidState, ProtocolError
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol

from polystream.server._h1support import HttpDate, Message, Scope, logger, resolve, start_task

if TYPE_CHECKING:
    from polystream.server._h1protocol import ServerConnection

__all__ = ["MAX_MESSAGE_BYTES", "WebSocketConnection", "WebSocketGone", "is_websocket_upgrade"]

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest message a client may send (1009 past it)."""

MAX_QUEUED_MESSAGES: Final = 64
"""Complete messages the app has not taken yet past which reading pauses."""

CLOSE_TIMEOUT: Final = 5.0
"""Seconds the client's answer to a close is waited for before the connection is cut."""

_ASGI: Final = {"version": "3.0", "spec_version": "2.4"}


class WebSocketGone(OSError):
    """The client is gone (or its close was received): nothing more can be sent."""


def is_websocket_upgrade(method: str, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request asks for a WebSocket (``GET`` with ``Upgrade: websocket``)."""
    if method != "GET":
        return False
    return any(name == b"upgrade" and b"websocket" in value.lower() for name, value in headers)


class WebSocketConnection:
    """An upgraded connection: the ASGI ``websocket`` scope of the app, over
    ``websockets``' sans-I/O server protocol.

    Args:
        conn: The HTTP connection it was (its transport, writes and drain).
        http_scope: The upgrade request's HTTP scope.
        target: The request target as sent.
        rest: What the read brought after the request's head.
    """

    def __init__(
        self, conn: ServerConnection, http_scope: Scope, target: bytes, rest: bytes
    ) -> None:
        self.conn = conn
        self.protocol = ServerProtocol(max_size=MAX_MESSAGE_BYTES)  # (logs as websockets.server)
        self.state = "connecting"  # accepted: "open"; then "closing", "closed"
        self.queue: deque[Message] = deque()
        self.queued_bytes = 0
        self.waiter: asyncio.Future[None] | None = None
        self.gone: Message | None = None  # the disconnect, once it is known
        self.response: Response | None = None
        self.denial: tuple[int, list[tuple[bytes, bytes]], list[bytes]] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.paused = False
        self.fragments: list[bytes] = []
        self.text = False
        self.early: list[Any] = []
        headers: list[tuple[bytes, bytes]] = http_scope["headers"]
        subprotocols = [
            token.strip()
            for name, value in headers
            if name == b"sec-websocket-protocol"
            for token in value.decode("latin-1").split(",")
            if token.strip()
        ]
        self.scope: Scope = {
            "type": "websocket",
            "asgi": _ASGI,
            "http_version": "1.1",
            "scheme": "wss" if http_scope["scheme"] == "https" else "ws",
            "server": http_scope["server"],
            "client": http_scope["client"],
            "root_path": "",
            "path": http_scope["path"],
            "raw_path": http_scope["raw_path"],
            "query_string": http_scope["query_string"],
            "headers": headers,
            "subprotocols": subprotocols,
            "extensions": {"websocket.http.response": {}},
        }
        # The protocol reads the handshake itself: the head as it was, then what followed.
        head = b"GET %b HTTP/1.1\r\n%b\r\n" % (
            target,
            b"".join(b"%b: %b\r\n" % header for header in headers),
        )
        self.protocol.receive_data(head + rest)

    # -- the handshake -------------------------------------------------------------------

    def start(self) -> None:
        """Check the handshake and run the app (or refuse a malformed handshake)."""
        protocol = self.protocol
        events = protocol.events_received()
        request = events[0] if events else None
        if not isinstance(request, Request):
            self._respond(protocol.reject(400, "malformed WebSocket handshake\n"))
            return
        self.early = events[1:]  # (frames sent ahead of the answer: read once accepted)
        protocol.data_to_send()  # (nothing may precede the answer: a pong to an early ping)
        response = protocol.accept(request)
        if response.status_code != 101:
            self._respond(response)  # (the library's own refusal: a missing key, ...)
            return
        self.response = response
        self.queue.append({"type": "websocket.connect"})
        server = self.conn.server
        task = start_task(asyncio.get_running_loop(), self._run(server.app))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    def _respond(self, response: Response) -> None:
        """Answer the handshake with a plain HTTP response and end the connection."""
        self.state = "closed"
        self.protocol.send_response(response)
        self._flush()
        self._gone(1006, "")
        self.conn.close()

    async def _run(self, app: Any) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except Exception:
            logger.exception("the app failed on WebSocket %s", self.scope["path"])
            self._end(1011, "internal error")
        else:
            if self.state == "connecting" and self.denial is None:
                logger.error(
                    "the app neither accepted nor refused WebSocket %s", self.scope["path"]
                )
            self._end(1000, "")

    def _end(self, code: int, reason: str) -> None:
        """The app is done: a handshake it left unanswered gets a 500, an open
        connection a close."""
        if self.state == "connecting":
            self._respond(self.protocol.reject(500, "Internal Server Error\n"))
        elif self.state == "open":
            self._close(code, reason)

    # -- ASGI ------------------------------------------------------------------------------

    async def receive(self) -> Message:
        while not self.queue:
            if self.gone is not None:
                return self.gone
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        message = self.queue.popleft()
        if message["type"] == "websocket.receive":
            data = message.get("bytes") or message.get("text") or ""
            self.queued_bytes -= len(data)
            if self.paused and (
                len(self.queue) < MAX_QUEUED_MESSAGES // 2
                and self.queued_bytes < self.conn.server.limits.max_buffered_bytes // 2
            ):
                self.paused = False
                transport = self.conn.transport
                if transport is not None and not self.conn.closed:
                    transport.resume_reading()
        return message

    async def send(self, message: Message) -> None:
        kind = message["type"]
        state = self.state
        if state == "open":
            if kind == "websocket.send":
                data = message.get("bytes")
                try:
                    if data is not None:
                        self.protocol.send_binary(data)
                    else:
                        self.protocol.send_text(message["text"].encode())
                except InvalidState:
                    raise WebSocketGone("the WebSocket is closing") from None
                self._flush()
                if self.conn.write_paused:
                    await self.conn.drain()
                return
            if kind == "websocket.close":
                self._close(message.get("code", 1000), message.get("reason") or "")
                return
        elif state == "connecting":
            if self.denial is not None:
                self._deny_body(message)
                return
            if kind == "websocket.accept":
                self._accept(message)
                return
            if kind == "websocket.close":
                self._respond(self.protocol.reject(HTTPStatus.FORBIDDEN, ""))
                return
            if kind == "websocket.http.response.start":
                self.denial = (message["status"], list(message.get("headers", ())), [])
                return
        if self.conn.closed or state in {"closed", "closing"}:
            raise WebSocketGone("the WebSocket is closed")
        raise RuntimeError(f"unexpected ASGI message {kind!r} on a WebSocket ({state})")

    def _accept(self, message: Message) -> None:
        response = self.response
        assert response is not None
        headers = response.headers
        subprotocol = message.get("subprotocol")
        if subprotocol:
            headers["Sec-WebSocket-Protocol"] = subprotocol
        for name, value in message.get("headers", ()):
            headers[name.decode("latin-1")] = value.decode("latin-1")
        if self.conn.closed:
            raise WebSocketGone("the client went before its handshake was answered")
        self.state = "open"
        self.protocol.send_response(response)
        self._flush()
        early, self.early = self.early, []
        self._resume()
        self._read(early)  # (with the frames the client sent ahead of the answer)

    def _deny_body(self, message: Message) -> None:
        if message["type"] != "websocket.http.response.body":
            raise RuntimeError(f"unexpected ASGI message {message['type']!r} in a refusal")
        assert self.denial is not None
        status, headers, body = self.denial
        body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        fields = Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers])
        data = b"".join(body)
        fields.setdefault("Content-Length", str(len(data)))
        fields.setdefault("Content-Type", "text/plain; charset=utf-8")
        fields["Connection"] = "close"
        fields["Date"] = HttpDate.now().decode()
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        self._respond(Response(status, phrase, fields, data))

    def _close(self, code: int, reason: str) -> None:
        """Send a close and wait (bounded) for the client's."""
        if self.state != "open":
            return
        self.state = "closing"
        with contextlib.suppress(InvalidState, ProtocolError):
            self.protocol.send_close(code, reason)
        self._flush()
        self._gone(code, reason)
        self._resume()  # (the client's close must be read)
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, self.conn.close)

    # -- the connection's events -----------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self.protocol.receive_data(data)
        if self.state != "connecting":
            self._read()
            return
        # Frames sent ahead of the handshake's answer wait for it, in the protocol,
        # reading paused (so they stay within a read); nothing may precede the answer.
        self.protocol.data_to_send()
        if not self.paused:
            self.paused = True
            transport = self.conn.transport
            if transport is not None:
                transport.pause_reading()

    def _read(self, early: list[Any] | None = None) -> None:
        protocol = self.protocol
        limit = self.conn.server.limits.max_buffered_bytes
        events = protocol.events_received()
        for event in [*early, *events] if early else events:
            if not isinstance(event, Frame):
                continue
            opcode = event.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
                self.text = opcode is Opcode.TEXT
                self.fragments = [bytes(event.data)]
            elif opcode is Opcode.CONT:
                self.fragments.append(bytes(event.data))
            elif opcode is Opcode.CLOSE:
                received = protocol.close_rcvd
                self._gone(received.code if received else 1005, received.reason if received else "")
                continue
            else:
                continue  # (a ping is answered by the protocol; a pong needs nothing)
            if not event.fin:
                continue
            data = b"".join(self.fragments) if len(self.fragments) > 1 else self.fragments[0]
            self.fragments = []
            if self.state != "open":
                continue  # (past its close, the app takes no more)
            if self.text:
                try:
                    message: Message = {"type": "websocket.receive", "text": data.decode()}
                except UnicodeDecodeError:
                    protocol.fail(1007, "invalid UTF-8 in a text message")
                    break
            else:
                message = {"type": "websocket.receive", "bytes": data}
            self.queue.append(message)
            self.queued_bytes += len(data)
        self._flush()
        sent = protocol.close_sent
        if sent is not None and self.gone is None:
            self._gone(sent.code, sent.reason)  # (the protocol failed the connection)
        self._wake()
        if (
            not self.paused
            and self.state == "open"  # (past a close, what comes is read and dropped)
            and (len(self.queue) >= MAX_QUEUED_MESSAGES or self.queued_bytes > limit)
        ):
            self.paused = True
            transport = self.conn.transport
            if transport is not None:
                transport.pause_reading()

    def _flush(self) -> None:
        """Write what the protocol has to send. Its end of data half-closes the
        connection: what the client still sends is read (and dropped) until it closes
        its side, or for ``close_timeout``, so that a close frame is not lost to a reset
        of a connection closed with unread bytes."""
        conn = self.conn
        for data in self.protocol.data_to_send():
            if data:
                conn.write(data)
                continue
            transport = conn.transport
            if transport is None or conn.closed or not transport.can_write_eof():
                conn.close()
                return
            transport.write_eof()
            self._resume()
            if self.timer is None:
                self.timer = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, conn.close)

    def _gone(self, code: int, reason: str) -> None:
        if self.gone is None:
            self.gone = {"type": "websocket.disconnect", "code": code, "reason": reason}
            if self.state == "open":
                self.state = "closing"
            self._wake()

    def _wake(self) -> None:
        if self.queue or self.gone is not None:
            resolve(self.waiter)

    def _resume(self) -> None:
        if self.paused:
            self.paused = False
            transport = self.conn.transport
            if transport is not None and not self.conn.closed:
                transport.resume_reading()

    def connection_lost(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.state = "closed"
        self._gone(1006, "")

    def shutdown(self) -> None:
        """The server stops: an open connection closes with 1012 (service restart)."""
        if self.state == "open":
            self._close(1012, "server shutting down")
        elif self.state == "connecting":
            self.conn.close()
