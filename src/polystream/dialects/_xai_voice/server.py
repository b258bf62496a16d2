"""What the servers of xAI's voice sockets share (``xai_tts``, ``xai_stt``), sans-I/O:
the configuration read from the URL's query, the client's JSON messages dispatched by
``type``, one turn answered at a time in the order asked, and the flat ``error``
message (``{"type": "error", "message"}``).

A query the service refuses makes the server answer the connection's opening and each
turn with an ``error`` naming the parameter (the connection stays open).
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from polystream.dialects._errors import DEFAULT_MESSAGES
from polystream.dialects._realtime.server import (
    IdMaker,
    Message,
    Outbound,
    Replier,
    ReplyRun,
    SocketServer,
)
from polystream.errors import ProtocolError
from polystream.events import ErrorEvent, ErrorInfo, Event, Finish
from polystream.wire.ws import MessageReader, dump_message

__all__ = ["VoiceRun", "VoiceServer", "voice_error_message"]


def voice_error_message(message: str) -> str:
    """The voice sockets' ``error`` message."""
    return dump_message({"type": "error", "message": message})


class VoiceRun(ReplyRun):
    """A turn's answer written message by message: each event rendered by
    :meth:`_render` (a subclass's), a failure as the ``error`` message.

    Args:
        response_id: An id for the run (the services name none on the wire).
        events: The answer in unified terms.
        tag: Handed back to whoever drives the run.
    """

    def __init__(self, response_id: str, events: list[Event], tag: Any) -> None:
        self.response_id = response_id
        self.tag = tag
        self._events: Iterator[Event] = iter(events)
        self._queue: deque[Message] = deque()
        self._error: ErrorInfo | None = None
        self._ended = False

    @property
    def done(self) -> bool:
        return self._ended and not self._queue

    def next(self) -> Message | None:
        while not self._queue and not self._ended:
            event = next(self._events, None)
            if event is None:
                self._complete()
                break
            if type(event) is ErrorEvent:
                self._error = event.error
            elif type(event) is Finish:
                if event.status == "failed":
                    error = event.error or self._error
                    self._fail(error.message if error is not None else "The request failed.")
                else:
                    self._complete()
            else:
                self._render(event)
        return self._queue.popleft() if self._queue else None

    def fail(self, error: ErrorInfo) -> None:
        if not self._ended:
            self._fail(error.message)

    def cancel(self) -> None:
        """Drop what is left of it (the client cleared it)."""
        self._queue.clear()
        self._ended = True

    def _send(self, body: dict[str, Any] | bytes, *, audio: bool = False) -> None:
        text = body if isinstance(body, bytes) else dump_message(body)
        self._queue.append(Message(text=text, audio=audio))

    def _fail(self, message: str) -> None:
        self._queue.append(Message(text=voice_error_message(message)))
        self._ended = True

    @abc.abstractmethod
    def _render(self, event: Event) -> None:
        """Queue the messages of one event of the answer (not its finish)."""

    @abc.abstractmethod
    def _complete(self) -> None:
        """Queue the messages that end the answer, and end it."""


class VoiceServer(SocketServer):
    """One connection of a voice socket, served (see the module docstring).

    Args:
        replier: Chooses each turn's answer.
        model: Unused (the services take no model).
        created: Unused.
        seed: What the ids derive from.
        query: The connection URL's query: the connection's configuration.

    A subclass reads the query (:meth:`_configure`: what is wrong with it, or None),
    handles each client message type named in :attr:`client_messages` with a method
    ``_on_<type>`` (dots as underscores), binary messages with :meth:`_on_bytes`, and
    starts each turn asked for (:meth:`_ask`) with :meth:`_start`.
    """

    client_messages: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        replier: Replier,
        *,
        model: str = "",
        created: int = 0,
        seed: str = "polystream",
        query: Mapping[str, str] | None = None,
    ) -> None:
        self._replier = replier
        self._ids = IdMaker(seed)
        self._reader = MessageReader(name=self.family)
        self.query = dict(query or {})
        self._waiting: deque[Any] = deque()
        self._active: ReplyRun | None = None
        self.problem = self._configure()
        """What is wrong with the query (None: nothing)."""

    @abc.abstractmethod
    def _configure(self) -> str | None:
        """Read the query; what is wrong with it (None: nothing)."""

    @abc.abstractmethod
    def _start(self, request: Any) -> str | ReplyRun:
        """Start a turn asked for: its answer (a message to send, or a run)."""

    def _on_bytes(self, data: bytes) -> list[Outbound]:
        return [self.error(400, "Binary messages are not read on this socket.")]

    # -- the connection ----------------------------------------------------------------

    def open(self) -> list[Outbound]:
        return [] if self.problem is None else [self.error(400, self.problem)]

    def receive(self, message: str | bytes) -> list[Outbound]:
        if isinstance(message, bytes | bytearray):
            return self._on_bytes(bytes(message))
        try:
            value = self._reader.read(message).value
        except ProtocolError as exc:
            return [self.error(400, f"The message could not be read: {exc.message}")]
        kind = value.get("type") if isinstance(value, dict) else None
        if not isinstance(kind, str) or kind not in self.client_messages:
            supported = ", ".join(f"'{name}'" for name in self.client_messages)
            return [self.error(400, f"Unknown message type {kind!r}; expected {supported}.")]
        out: list[Outbound] = getattr(self, "_on_" + kind.replace(".", "_"))(value)
        return out

    def finished(self, run: ReplyRun) -> list[Outbound]:
        if run is not self._active:
            return []
        self._active = None
        return self._next()

    def expire(self) -> list[str]:
        return [self.error(400, "The connection reached its maximum duration.")]

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        kind: str | None = None,
    ) -> str:
        return voice_error_message(message or DEFAULT_MESSAGES.get(status, f"HTTP {status}"))

    # -- turns -------------------------------------------------------------------------

    def _ask(self, request: Any) -> list[Outbound]:
        """A turn asked for: started now, or after those before it."""
        if self.problem is not None:
            return [self.error(400, self.problem)]
        self._waiting.append(request)
        return self._next() if self._active is None else []

    def _next(self) -> list[Outbound]:
        out: list[Outbound] = []
        while self._waiting and self._active is None:
            answer = self._start(self._waiting.popleft())
            if isinstance(answer, ReplyRun):
                self._active = answer
            out.append(answer)
        return out

    def _drop(self) -> None:
        """Drop the turns asked for and the one running (the client cleared them)."""
        self._waiting.clear()
        if isinstance(self._active, VoiceRun) and not self._active.done:
            self._active.cancel()
