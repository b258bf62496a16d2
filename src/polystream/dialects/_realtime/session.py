"""The sans-I/O session every WebSocket family builds on.

A session reads the server's messages (:meth:`RealtimeSession.feed`, one whole message
at a time, text or bytes) and gives events, and it writes the client's messages
(the commands: :meth:`~RealtimeSession.configure`, :meth:`~RealtimeSession.send_text`,
...), which it returns as JSON texts for the caller to send. It never touches a socket.

One connection carries many replies. Each reply is an ordinary unified stream
(``StreamStart`` ... ``Finish``, block indexes from 0) and gets a number, in the order
replies first appear: :attr:`Routed.stream`. What belongs to no reply (the session's
configuration, voice activity, input transcription, rate limits, errors outside a
reply) is stream 0. Every event comes wrapped in a :class:`Routed` that says where it
belongs, so that replies running side by side (Responses WebSocket lanes, a Realtime
out-of-band response) stay apart.

Errors are located by message: a malformed message is a
:class:`~polystream.errors.RemoteProtocolError` whose ``event_index`` is the message's
0-based index; in tolerant mode (the default) it becomes an
:class:`~polystream.events.ErrorEvent` of kind ``protocol`` in stream 0 and reading goes
on; in strict mode it is raised. Unknown messages pass through as
:class:`~polystream.events.Unknown` events holding the message's exact text (strict mode
rejects them). A family whose binary messages are data (raw audio) reads them with
:meth:`RealtimeSession._on_data`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import msgspec

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.intents import Intent
from polystream.dialects._socket_spec import SocketSpec
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Raw,
    RealtimeEvent,
    Unknown,
)
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH
from polystream.wire.ws import DEFAULT_MAX_MESSAGE_SIZE, MessageReader, WSMessage, dump_message

__all__ = ["RealtimeSession", "Routed"]


class Routed(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A session's event and where it belongs.

    Fields:
        event: The event.
        stream: The reply it belongs to, numbered from 1 in the order replies first
            appear on the connection; 0 for the session's own events.
        lane: The lane of the reply (Responses WebSocket ``stream_id``), when it has one.
        response_id: The provider's id of the reply, once known.
    """

    event: RealtimeEvent
    stream: int = 0
    lane: str | None = None
    response_id: str | None = None


class RealtimeSession(abc.ABC):
    """Base of the WebSocket families' sessions.

    Args:
        strict: Raise typed protocol errors instead of giving error events, and reject
            unknown messages (conformance checking).
        keep_raw: Give a :class:`~polystream.events.Raw` event before the events of
            each message.
        max_message_size: Largest server message accepted (see
            :data:`polystream.wire.ws.DEFAULT_MAX_MESSAGE_SIZE`).
        max_depth: Deepest JSON nesting accepted in a message.
    """

    dialect: ClassVar[str]
    spec: ClassVar[SocketSpec]
    binary: ClassVar[Literal["json", "data"]] = "json"
    """What the server's binary messages hold: JSON, or data (raw audio) that
    :meth:`_on_data` reads."""

    def __init__(
        self,
        *,
        strict: bool = False,
        keep_raw: bool = False,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        self.strict = strict
        self.keep_raw = keep_raw
        self._reader = MessageReader(
            name=self.dialect,
            max_message_size=max_message_size,
            max_depth=max_depth,
            binary=self.binary,
        )
        self._streams = 0
        self._closed = False

    # -- reading -----------------------------------------------------------------------

    @property
    def messages_read(self) -> int:
        """How many server messages were fed (the next one's index)."""
        return self._reader.count

    def feed(self, message: str | bytes) -> list[Routed]:
        """Read one whole server message; returns its events.

        Raises:
            RemoteProtocolError: (strict mode) The message is malformed, unknown, or
                impossible in the session's state; located at its index.
            LocalProtocolError: ``feed`` after :meth:`close`.
        """
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect=self.dialect)
        out: list[Routed] = []
        try:
            read = self._reader.read(message)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)
            return out
        try:
            if read.data is not None:
                if self.keep_raw:
                    out.append(Routed(event=Raw(dialect=self.dialect, data=read.data)))
                self._on_data(read, read.data, out)
                return out
            payload = read.value
            if type(payload) is not dict:
                raise RemoteProtocolError(
                    f"message is a JSON {type(payload).__name__}, not an object"
                )
            kind = self._kind_of(payload)
            if self.keep_raw:
                out.append(Routed(event=Raw(dialect=self.dialect, data=payload, name=kind)))
            self._on_message(read, payload, kind, out)
        except RemoteProtocolError as exc:
            self._tolerate(exc.located(dialect=self.dialect, event_index=read.index), out)
        return out

    def close(self) -> list[Routed]:
        """The connection closed: every reply still open ends ``truncated``."""
        if self._closed:
            return []
        self._closed = True
        out: list[Routed] = []
        self._on_close(out)
        return out

    def restart(self) -> list[Routed]:
        """The connection dropped and a new one carries the session on (a client that
        reconnected): as :meth:`close`, every reply still open ends ``truncated`` and
        every request not yet answered gets a ``truncated`` stream, but the session
        stays open. What outlives a connection is kept (the Responses lanes' last
        response ids, the audio received per item), and streams go on being numbered
        where they were.

        Raises:
            LocalProtocolError: ``restart`` after :meth:`close`.
        """
        if self._closed:
            raise LocalProtocolError("restart() after close()", dialect=self.dialect)
        out: list[Routed] = []
        self._on_close(out)
        return out

    def _kind_of(self, payload: dict[str, Any]) -> str:
        """The kind of a server message: its ``type`` (a family whose messages have no
        ``type`` names them otherwise).

        Raises:
            RemoteProtocolError: The message has no kind.
        """
        kind = payload.get("type")
        if type(kind) is not str:
            raise RemoteProtocolError("message has no string type")
        return kind

    def close_code(self, code: int, reason: str = "") -> list[Routed]:
        """The server closed the connection with ``code``: the events that say what
        the code means, for a family that reports errors as close codes (by default
        none). Call it before :meth:`close` or :meth:`restart`."""
        return []

    @abc.abstractmethod
    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        """Handle one message (an object with a string ``type``); raise a
        :class:`~polystream.errors.RemoteProtocolError` for anything malformed."""

    def _on_data(self, read: WSMessage, data: bytes, out: list[Routed]) -> None:
        """Handle one binary data message (families whose :attr:`binary` is ``data``)."""
        raise RemoteProtocolError(f"unexpected binary message of {len(data)} bytes")

    @abc.abstractmethod
    def _on_close(self, out: list[Routed]) -> None:
        """End every open reply."""

    def _new_stream(self) -> int:
        self._streams += 1
        return self._streams

    def _unknown(self, read: WSMessage, kind: str) -> Unknown:
        """An unknown message, passed through (strict mode: an error)."""
        if self.strict:
            raise RemoteProtocolError(f"unknown message type {kind!r}")
        assert read.text is not None
        return Unknown(name=kind, data=read.text)

    def _tolerate(self, exc: RemoteProtocolError, out: list[Routed]) -> None:
        if self.strict:
            raise exc.again() from None
        out.append(
            Routed(
                event=ErrorEvent(
                    error=ErrorInfo(
                        kind="protocol",
                        message=exc.message,
                        dialect=exc.dialect,
                        event_index=exc.event_index,
                    )
                )
            )
        )

    # -- writing: the unified commands --------------------------------------------------

    # Each family takes its own arguments; one it lacks raises a LocalProtocolError.

    def configure(self, *args: Any, **kwargs: Any) -> list[str]:
        """Configure the session."""
        raise self._unsupported("session configuration")

    def send_text(self, *args: Any, **kwargs: Any) -> list[str]:
        """Send user text and, as a rule, ask for a reply."""
        raise self._unsupported("text input")

    def send_audio(self, *args: Any, **kwargs: Any) -> Sequence[str | bytes]:
        """Send input audio, in the session's input format (JSON texts, or bytes
        messages for a family that takes raw audio)."""
        raise self._unsupported("audio input")

    def append_item(self, *args: Any, **kwargs: Any) -> list[str]:
        """Add an input item (a message, a tool output) to the conversation."""
        raise self._unsupported("appending items")

    def create_response(self, *args: Any, **kwargs: Any) -> list[str]:
        """Ask for a reply (a turn)."""
        raise self._unsupported("response requests")

    def cancel(self, *args: Any, **kwargs: Any) -> list[str]:
        """Cancel a reply in progress."""
        raise self._unsupported("cancelling a response")

    def truncate(self, *args: Any, **kwargs: Any) -> list[str]:
        """Cut an assistant audio item at what was played."""
        raise self._unsupported("truncating audio")

    def tool_result(self, *args: Any, **kwargs: Any) -> list[str]:
        """Send a tool's result and, as a rule, ask for the reply that uses it."""
        raise self._unsupported("tool results")

    # -- a bridge's upstream ------------------------------------------------------------

    def perform(self, intent: Intent) -> list[str | bytes]:
        """The messages that carry a client's intent (a client of another family,
        bridged to this session: see :mod:`polystream.dialects._realtime.intents`).

        Raises:
            LocalProtocolError: The family cannot carry it (what it says names what).
        """
        raise LocalProtocolError(
            f"{self.dialect} cannot be translated from another family", dialect=self.dialect
        )

    def paused_for_tools(self, stream: int) -> bool:
        """The reply ``stream`` waits for the results of the tools it called, and goes
        on after them in the same stream (a family whose replies are not ended by their
        tool calls: Gemini Live's turns)."""
        return False

    @property
    def audio_formats(self) -> tuple[AudioFormat | None, AudioFormat | None]:
        """The formats of the audio the session sends and is sent, as configured last
        (None: it has none)."""
        return None, None

    def _unsupported(self, what: str) -> LocalProtocolError:
        return LocalProtocolError(f"{self.dialect} has no {what}", dialect=self.dialect)

    @staticmethod
    def _message(value: dict[str, Any]) -> str:
        return dump_message(value)
