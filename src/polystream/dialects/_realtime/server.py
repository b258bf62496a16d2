"""The server's side of a WebSocket family, sans-I/O: what an emulator of the provider
runs for one connection.

A :class:`SocketServer` reads the client's messages (:meth:`SocketServer.receive`, one
whole message at a time) and answers with messages of its own (JSON texts; bytes for
raw audio) and with **replies** (:class:`ReplyRun`): a reply is written one message at a
time (:meth:`ReplyRun.next`), so that whoever drives the server decides when each
message leaves, and a client message that arrives meanwhile (a cancellation) acts on what is
left of it. What a reply says is not the server's to decide: it asks a **replier**
(:data:`Replier`) for each :class:`Turn`, which answers with the reply in unified terms
(a :class:`Script` of events, ``StreamStart`` ... ``Finish``) or refuses the turn
(:class:`Refusal`). Nothing here sleeps or touches a socket.
"""

from __future__ import annotations

import abc
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeAlias

import msgspec

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.intents import Intent
from polystream.errors import LocalProtocolError
from polystream.events import ErrorInfo, Event, Finish

__all__ = [
    "Close",
    "EventFeed",
    "IdMaker",
    "Message",
    "Outbound",
    "Refusal",
    "Replier",
    "ReplyRun",
    "Script",
    "SocketServer",
    "Turn",
    "function_names",
]


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """What a reply is asked for, in the terms a replier chooses it by.

    Fields:
        model: The model the reply is asked of.
        user_text: The text of the last user message of the reply's context ("" when
            it has none, or it was spoken).
        has_tools: The reply may call tools (some are declared).
        tool_names: The declared function tools' names, in order.
        has_tool_result: The last item of the context is a tool's result.
        audio: The format of the reply's audio, when it is to speak (None: text).
        body: The native request, when the family's requests are another API's bodies
            (the Responses WebSocket's ``response.create`` is a Responses request).
        generate: False: no output is asked for (a warm-up), only the reply's
            beginning and end.
        say: The text the reply says verbatim (xAI's ``force_message``), when the
            client chose it.
        heard: Seconds of audio the turn is about (what a speech-to-text turn
            transcribes).
        out_of_band: The reply stays outside the conversation (OpenAI's
            ``conversation: "none"``).
        instructions: Instructions given for this reply only.
    """

    model: str
    user_text: str = ""
    has_tools: bool = False
    tool_names: tuple[str, ...] = ()
    has_tool_result: bool = False
    audio: AudioFormat | None = None
    body: dict[str, Any] | None = None
    generate: bool = True
    say: str | None = None
    heard: float = 0.0
    out_of_band: bool = False
    instructions: str | None = None


class EventFeed:
    """The events of a reply that are not all known yet (a bridge's upstream is still
    sending them): pushed as they come, taken in order by the reply's run, whose
    :meth:`ReplyRun.next` gives None while it waits for more."""

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        self.ended = False
        """No more events will come (its ``Finish`` was pushed, or it was cut)."""

    def push(self, event: Event) -> None:
        """One more event (a ``Finish`` ends the feed)."""
        if not self.ended:
            self._events.append(event)
            if type(event) is Finish:
                self.ended = True

    def end(self) -> None:
        """No more events will come (the run ends ``completed`` if no ``Finish`` came)."""
        self.ended = True

    def take(self) -> Event | None:
        """The next event, if one came."""
        return self._events.popleft() if self._events else None


class Script(msgspec.Struct, frozen=True, kw_only=True):
    """A reply in unified terms.

    Fields:
        events: Its events, ``StreamStart`` ... ``Finish``.
        tag: Anything the replier wants back with the reply's :class:`ReplyRun`
            (the scenario that chose it).
        feed: Its events as they come, in place of ``events`` (a bridge's reply,
            whose upstream is still sending it; only a family that can be bridged
            reads it).
    """

    events: list[Event]
    tag: Any = None
    feed: EventFeed | None = None


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A turn refused before any reply: the family's error message is sent instead.

    Fields:
        status: The HTTP status the provider gives the same failure.
        message: What the error says.
        code: The provider's error code (default: per status).
        param: The parameter at fault.
        kind: The unified error kind, where the status does not say it.
    """

    status: int
    message: str
    code: str | None = None
    param: str | None = None
    kind: str | None = None


Replier: TypeAlias = Callable[[Turn], "Script | Refusal"]
"""Chooses the reply to a turn."""


class Message(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One message of a reply.

    Fields:
        text: The JSON text to send, or bytes to send as a binary message (raw
            audio).
        audio: It carries output audio (a driver may pace audio apart).
        close: Instead of a message, the socket closes with this code (a family that
            reports its errors as close codes); ``text`` is then unused.
        reason: The close reason.
    """

    text: str | bytes
    audio: bool = False
    close: int | None = None
    reason: str = ""


class ReplyRun(abc.ABC):
    """A reply being written, one message at a time.

    Attributes:
        response_id: The provider's id of the reply.
        tag: The :attr:`Script.tag` of the script it writes.
    """

    response_id: str
    tag: Any

    @property
    @abc.abstractmethod
    def done(self) -> bool:
        """Its last message was written (or it was ended at once, cancelled)."""

    @abc.abstractmethod
    def next(self) -> Message | None:
        """Its next message; None once it is done."""

    @abc.abstractmethod
    def fail(self, error: ErrorInfo) -> None:
        """End it failed: its next messages are the failure's, then it is done."""

    def item_of(self, index: int) -> str | None:
        """The id of the output item the reply's unified block ``index`` went into
        (None: none, or the family has no items)."""
        return None

    @property
    def urgent(self) -> bool:
        """Its next messages are due at once, whatever its timing (a reply that was
        cut: what says so goes before anything that follows)."""
        return False


class Close(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The server closes the connection (a family that reports its errors as close
    codes).

    Fields:
        code: The close code.
        reason: The close reason.
    """

    code: int
    reason: str = ""


Outbound: TypeAlias = "str | bytes | ReplyRun | Close"
"""What a server gives: a message to send now (a JSON text, or bytes for a binary
message), a reply to write, or the connection's close."""


class SocketServer(abc.ABC):
    """Base of the families' servers (see the module docstring).

    Every server is made as ``Server(replier, *, model, created, seed, query)``: the
    model the connection names (``?model=``, "" when it names none), the connection's
    Unix time, what its ids derive from, and the query parameters of the connection's
    URL (where a family takes its configuration).

    Class attributes:
        keepalive: Seconds between the keep-alive messages the server sends of its own
            (:meth:`ping`); None: it sends none.
        warn_before: Seconds before the connection's end that the server says it is
            going away (:meth:`going_away`; at most half the lifetime); None: it
            does not.
        expiry_close: The close code and reason after :meth:`expire`.
    """

    family: ClassVar[str]
    keepalive: ClassVar[float | None] = None
    warn_before: ClassVar[float | None] = None
    expiry_close: ClassVar[tuple[int, str]] = (1001, "")

    # -- a bridge's client side -----------------------------------------------------------
    #
    # Run by a bridge (a client of this family, a session of another upstream), the
    # server detects no voice activity itself (the upstream's is reported by
    # :meth:`heard`), and says what the client asked as intents (:meth:`take_intents`);
    # its replier asks the upstream for each reply and answers with an EventFeed.

    def bridge(self) -> None:
        """Serve as a bridge's client side from now on (see above).

        Raises:
            LocalProtocolError: The family cannot be bridged.
        """
        raise LocalProtocolError(f"{self.family} cannot be translated to another family")

    def take_intents(self) -> list[Intent]:
        """What the client asked since the last call, in order (a bridge's client side)."""
        return []

    def heard(self, state: str, at_ms: int) -> list[Outbound]:
        """Voice activity the upstream detected (``started``, ``stopped``), at
        ``at_ms`` of input audio: what the client is told."""
        return []

    def respond(self) -> list[Outbound]:
        """A reply the upstream began by itself (its turn detection answered the user):
        the reply (asked of the replier as any other) and what goes with it."""
        raise LocalProtocolError(f"{self.family} has no replies of the server's own")

    def refuse(self, status: int, message: str, *, code: str | None = None) -> list[Outbound]:
        """What tells the client that a request of its was refused (a bridge's
        upstream cannot carry it): the family's error message by default."""
        return [self.error(status, message, code=code, kind="invalid_request")]

    @property
    def input_audio(self) -> AudioFormat | None:
        """The format of the client's input audio (None: it sends none)."""
        return None

    @property
    def output_audio(self) -> AudioFormat | None:
        """The format of the audio the client is sent (None: it is sent none)."""
        return None

    @abc.abstractmethod
    def open(self) -> list[Outbound]:
        """The connection was accepted: what the server says first."""

    @abc.abstractmethod
    def receive(self, message: str | bytes) -> list[Outbound]:
        """One whole client message; what the server answers (a malformed message is
        answered with the family's error message, never raised)."""

    def finished(self, run: ReplyRun) -> list[Outbound]:
        """A reply was written to its end (or ended): what follows it (the next
        request waiting on its lane)."""
        return []

    def interrupt(self, run: ReplyRun, *, cancel: bool) -> list[Outbound]:
        """The user starts speaking while ``run`` is written (voice activity), and with
        ``cancel`` the server cuts the reply, as server VAD's ``interrupt_response``
        does.

        Raises:
            LocalProtocolError: The family has no voice input.
        """
        raise LocalProtocolError(f"{self.family} has no voice activity to interrupt a reply")

    def ping(self, timestamp_ms: int) -> list[str]:
        """A keep-alive message, sent every :attr:`keepalive` seconds
        (``timestamp_ms``: the Unix time in milliseconds)."""
        return []

    @property
    def configured_model(self) -> str:
        """The model the connection's configuration named, for a family whose
        connection names it in a message (its setup) rather than its URL ("" until
        then)."""
        return ""

    def going_away(self, time_left: float) -> list[str]:
        """The connection ends in ``time_left`` seconds (see :attr:`warn_before`)."""
        return []

    def closed(self) -> None:  # noqa: B027 (a hook: most servers keep nothing)
        """The connection ended (either side closed it)."""

    @abc.abstractmethod
    def expire(self) -> list[str]:
        """The connection reached its maximum lifetime: the family's error saying so
        (the connection is then closed, code 1001)."""

    @abc.abstractmethod
    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        kind: str | None = None,
    ) -> str:
        """The family's error message for a failure of the given HTTP status."""


class IdMaker:
    """Deterministic ids: ``prefix`` + a digest of the seed and a counter, so that two
    runs of the same connection give the same ids.

    Args:
        seed: What the ids derive from (the connection's serial number).
    """

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self.count = 0

    def make(self, prefix: str, size: int = 20) -> str:
        """The next id, ``prefix`` + ``size`` hex digits."""
        self.count += 1
        digest = hashlib.sha256(f"{self.seed}/{self.count}".encode()).hexdigest()
        return prefix + digest[:size]


def function_names(tools: Sequence[Any]) -> tuple[str, ...]:
    """The names of the function tools in a tools list."""
    return tuple(
        tool["name"]
        for tool in tools
        if isinstance(tool, dict)
        and tool.get("type", "function") == "function"
        and isinstance(tool.get("name"), str)
    )
