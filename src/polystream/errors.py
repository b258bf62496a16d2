"""The exception hierarchy of polystream.

Every failure names what went wrong and where. Exceptions raised while reading a
stream carry the dialect, the index of the event that failed (0-based, counting the
framing events of the stream) and the byte offset in the input where that event began::

    PolystreamError
    ├── ProtocolError
    │   ├── RemoteProtocolError       the peer broke the protocol (bad framing, bad JSON,
    │   │   │                         impossible event order); raised by feed()/close()
    │   │   ├── StreamTruncated       the input ended before the dialect's terminal event
    │   │   ├── BufferLimitExceeded   a documented buffer limit was exceeded
    │   │   └── EventOrderError       an event that cannot happen in the current state
    │   └── LocalProtocolError        the caller misused the API (encode an impossible
    │                                 event, feed after close, unknown dialect)
    ├── ToolArgumentsError            a finished tool call's arguments are not valid JSON
    └── TransportError                raised by the I/O shells only (connect, read, timeout)
        ├── APIStatusError            the provider answered with an HTTP error status
        ├── SocketClosed              a WebSocket closed for good (close code, reason)
        └── IdleTimeout               nothing arrived for longer than the idle timeout

Errors that the *provider* sends inside a stream (Anthropic ``event: error``, an
OpenAI ``error`` event, a Gemini error element) are valid protocol: they become
typed :class:`polystream.events.ErrorEvent` events, not exceptions.
"""

from __future__ import annotations

from typing import Self

__all__ = [
    "APIStatusError",
    "BufferLimitExceeded",
    "EventOrderError",
    "IdleTimeout",
    "LocalProtocolError",
    "PolystreamError",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestError",
    "SocketClosed",
    "StreamTruncated",
    "ToolArgumentsError",
    "TransportError",
]


class PolystreamError(Exception):
    """Base class of every exception polystream raises on purpose."""


class ProtocolError(PolystreamError):
    """A stream violated a protocol rule.

    Attributes:
        message: What went wrong, in one sentence.
        dialect: The dialect (or framing, ``"sse"``/``"json_array"``) being decoded.
        event_index: 0-based index of the framing event at fault, when known.
        byte_offset: Offset in the input where that event (or the fault) began.
    """

    def __init__(
        self,
        message: str,
        *,
        dialect: str | None = None,
        event_index: int | None = None,
        byte_offset: int | None = None,
    ) -> None:
        self.message = message
        self.dialect = dialect
        self.event_index = event_index
        self.byte_offset = byte_offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.dialect is not None:
            where.append(f"dialect {self.dialect}")
        if self.event_index is not None:
            where.append(f"event {self.event_index}")
        if self.byte_offset is not None:
            where.append(f"byte {self.byte_offset}")
        return f"{self.message} ({', '.join(where)})" if where else self.message

    def located(
        self,
        *,
        dialect: str | None = None,
        event_index: int | None = None,
        byte_offset: int | None = None,
    ) -> Self:
        """Return a copy of this error with missing location fields filled in."""
        return type(self)(
            self.message,
            dialect=self.dialect if self.dialect is not None else dialect,
            event_index=self.event_index if self.event_index is not None else event_index,
            byte_offset=self.byte_offset if self.byte_offset is not None else byte_offset,
        )

    def again(self) -> Self:
        """A new error like this one, to keep, or to raise again.

        A decoder that failed keeps its error and raises it on each later call. What it
        keeps is never raised itself: a raised error's traceback holds the frames it
        passed through, and with them the decoder, which would make a reference cycle
        (the decoder freed only by the cycle collector).
        """
        return self.located()


class RemoteProtocolError(ProtocolError):
    """The peer (the provider, a proxy, a file) sent something the protocol forbids."""


class StreamTruncated(RemoteProtocolError):
    """The input ended in the middle of an event, or before the terminal event."""


class BufferLimitExceeded(RemoteProtocolError):
    """A line, event, element or nesting depth grew past its configured limit."""


class EventOrderError(RemoteProtocolError):
    """An event arrived that cannot happen in the current state (e.g. a delta for a
    block that was never started)."""


class LocalProtocolError(ProtocolError):
    """The caller used the API wrongly (feed after close, an event the encoder
    cannot write in its current state, an unknown dialect name)."""


class RequestError(PolystreamError):
    """A request body is invalid for its dialect: the provider would refuse it.

    Attributes:
        message: What is wrong, worded as the provider words it.
        param: The offending parameter path, when known (``messages[2].content``).
        status: The HTTP status the provider answers with.
        code: The provider's error code (OpenAI ``code``), when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        code: str | None = None,
    ) -> None:
        self.message = message
        self.param = param
        self.status = status
        self.code = code
        super().__init__(f"{message} ({param})" if param else message)


class ToolArgumentsError(PolystreamError):
    """A finished tool call's accumulated arguments are not valid JSON.

    Attributes:
        block_index: The unified block index of the tool call.
        arguments: The raw accumulated argument text.
    """

    def __init__(self, message: str, *, block_index: int, arguments: str) -> None:
        self.block_index = block_index
        self.arguments = arguments
        super().__init__(f"{message} (block {block_index})")


class TransportError(PolystreamError):
    """A network-level failure in an I/O shell (connect, read, idle timeout)."""


class APIStatusError(TransportError):
    """The provider answered with an HTTP error status before any stream began.

    Attributes:
        status_code: The HTTP status.
        kind: The unified error kind (see :data:`polystream.events.ErrorKind`).
        body: The provider's error body, parsed when it was JSON.
        request_id: The provider's request id header, when present.
        retry_after: Seconds from ``Retry-After``, when present.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        kind: str,
        body: object = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status_code = status_code
        self.kind = kind
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after
        super().__init__(f"HTTP {status_code} {kind}: {message}")


class SocketClosed(TransportError):
    """A WebSocket connection closed and was not reconnected: the peer closed it with a
    code after which no reconnection is allowed, or the reconnection attempts ran out
    (the last attempt's error is the ``__cause__``).

    Attributes:
        code: The close code received (1006 when the connection ended without a close
            frame).
        reason: The close reason received.
        unsent: The messages that were to be sent and never were, in order.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str = "",
        unsent: list[str | bytes] | None = None,
    ) -> None:
        self.code = code
        self.reason = reason
        self.unsent = list(unsent or [])
        detail = f"{code} {reason}".strip()
        super().__init__(f"{message} (close {detail})")


class IdleTimeout(TransportError):
    """Nothing arrived on a connection for longer than its idle timeout.

    Attributes:
        seconds: The idle timeout.
    """

    def __init__(self, message: str, *, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(message)
