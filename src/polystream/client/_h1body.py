"""A response body as the client reads it: :class:`Body` unframes each read of the
connection (or, pushed, hands it to a :class:`PushSink` in the connection's own
callback) and gives the connection back to its pool at the body's end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

import httpx

from polystream.client._h1conn import BODY_CLOSE, Connection, Reply

if TYPE_CHECKING:
    from polystream.client._h1 import AsyncH1Transport

__all__ = ["Body", "PushSink"]


class PushSink(Protocol):
    """What a pushed reply hands its body to, in the connection's own callback."""

    def body(self, data: bytes) -> bool:
        """One read's body bytes (never empty); False: stop pushing after it."""
        ...

    def halt(self) -> None:
        """Pushing stopped by the reply: the body ended, its framing is bad, or the
        connection's input ended. The reader's next read says which."""
        ...


class Body(httpx.AsyncByteStream):
    """A response body, parsed from the connection's reads as they come."""

    def __init__(
        self,
        transport: AsyncH1Transport,
        conn: Connection,
        reply: Reply,
        framing: int,
        keep: bool,
        timeout: float | None,
        first: bytes,
    ) -> None:
        self._transport = transport
        self._conn: Connection | None = conn
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
            data = await self.next_bytes()
            if not data:
                return
            yield data

    async def next_bytes(self) -> bytes:
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
                self.close()
                raise
            if not data:
                if self._framing == BODY_CLOSE:
                    self._finish()
                    return b""
                self.close()
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            try:
                out = self._unframe(data)
            except httpx.RemoteProtocolError:
                self.close()
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
        self.close()

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
            self.close()
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
            self._transport.release(conn, self._keep and not self._reply.extra)

    def close(self) -> None:
        """Give the connection back unread: it is closed, not kept for reuse."""
        conn = self._conn
        self._conn = None
        if conn is not None:
            conn.sink = None
            self._transport.release(conn, False)

    async def aclose(self) -> None:
        if self._conn is not None and not self._ended:
            transport = self._transport
            drain = transport.drain
            if self._keep and drain is not None and drain():
                # A finished reply's tail (a terminator the reader did not wait for):
                # read it, for a bounded time and size, so that the connection is kept.
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(transport.drain_seconds):
                        size = 0
                        while size <= transport.drain_bytes:
                            data = await self.next_bytes()
                            if not data:
                                break
                            size += len(data)
        self.close()
