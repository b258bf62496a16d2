"""The client's HTTP/1.1 connection and response parsing: :class:`Connection` buffers
what the socket delivers and wakes its reader, :class:`Reply` parses a response with
llhttp (strict mode), and :func:`response_framing` says how its body is delimited.
The pool that owns the connections is :class:`~polystream.client._h1.AsyncH1Transport`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

import httptools
import httpx

from polystream.wire._http1 import open_head_size

if TYPE_CHECKING:
    from polystream.client._h1 import AsyncH1Transport

__all__ = [
    "BODY_CHUNKED",
    "BODY_CLOSE",
    "BODY_LENGTH",
    "BODY_NONE",
    "HIGH_WATER",
    "MAX_HEAD_BYTES",
    "Connection",
    "Reply",
    "response_framing",
]


MAX_HEAD_BYTES: Final = 64 * 1024
"""Largest response head (status line and headers) accepted."""
HIGH_WATER: Final = 64 * 1024
"""Bytes buffered from the socket before reading pauses (until the body is read).

A reader that falls behind the socket (a gateway writing each batch to a journal)
holds this, plus the socket read under way (asyncio reads up to 256 KiB at once) and
the joined copy its next read makes: this bound is most of a pass-through stream's
memory (see docs/performance.md, the gateway's memory)."""

_QUICKACK: Final = getattr(socket, "TCP_QUICKACK", None)

# Body framing of a response.
BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE = range(4)


class Connection(asyncio.Protocol):
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
        # Takes each read in this callback instead of the reader (see Body.push);
        # None: end of input.
        self.sink: Callable[[bytes | None], None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but behave as one.)
        self.transport = cast(asyncio.Transport, transport)
        if self.pool.tcp_quickack and _QUICKACK is not None:
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
            self.pool.discard(self)
            return
        if self.quickack:
            self._ack()
        sink = self.sink
        if sink is not None and not self.chunks:
            sink(data)
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        self.eof = True
        if self.idle:
            self.pool.discard(self)
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
            self.pool.discard(self)
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


class Reply:
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


def response_framing(
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
        return BODY_NONE, 0, close
    if chunked:
        return BODY_CHUNKED, 0, close
    if length is not None:
        return (BODY_LENGTH, length, close) if length else (BODY_NONE, 0, close)
    return BODY_CLOSE, 0, True
