"""The Lyria RealTime session: prompts, configuration and playback controls out; the
music in, as unified streams.

The client's messages (one key each) come from the commands: :meth:`configure`
(``setup{model}``, sent once, first; with prompts and a configuration, their messages
after it), :meth:`set_prompts` (``clientContent.weightedPrompts``), :meth:`set_config`
(``musicGenerationConfig``), :meth:`play`, :meth:`pause`, :meth:`stop`,
:meth:`reset_context` (``playbackControl``). :meth:`send_text` sets one prompt and
plays; :meth:`cancel` pauses.

**A reply** is the music heard between a ``PLAY`` and the ``PAUSE`` or ``STOP`` that
ends it (the service never ends the music by itself). Its stream (dialect
``gemini_lyria``) opens with the first audio chunk (``StreamStart``, implicit, with the
model ``setup`` named; an ``audio`` block whose ``media`` is read from the chunk's
``mimeType``: ``audio/l16;rate=48000;channels=2`` is PCM, 48 kHz, 2 channels). Each
chunk is a ``DataDelta`` (base64 as sent, URL-safe base64 made standard with the
original in ``extra["data"]``; its ``mimeType``; its ``sourceMetadata`` and any other
field in ``extra``); a chunk of another media type ends the block and opens
the next. ``RESET_CONTEXT`` does not end it. When the client sends ``PAUSE`` or
``STOP``, the reply ends ``incomplete`` (reason ``cancelled``, raw ``PAUSE`` / ``STOP``):
its last events are given by :meth:`settle`, or else with the next message read or at
:meth:`close`. Audio that arrives after that and before the next ``PLAY`` (chunks made
before the service read the command) belongs to no reply: it comes in stream 0 as a
``StreamWarning`` (code ``audio_after_pause``) holding the chunks in ``extra``. A
connection that closes while the music plays ends the reply ``truncated``.

The session's own events (stream 0): ``setupComplete`` is a ``SessionUpdate``
(``created``); ``filteredPrompt`` is an ``ErrorEvent`` (kind ``content_filter``, code
``filtered_prompt``) naming the prompt and the reason (the music goes on without it).
A message with a key this version does not know passes through as ``Unknown`` (its
whole text; its known keys are read too). The service reports errors as close codes:
:func:`close_error` types them.

Server messages may come as text or binary frames: both hold JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from polystream.audio.media_types import media_of_type
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.gemini_lyria.spec import SPEC
from polystream.dialects.gemini_lyria.wire import (
    CONFIG_FIELDS,
    CONTROLS,
    MODES,
    SCALES,
    SERVER_KEYS,
    model_name,
    weighted_prompts,
)
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    ErrorKind,
    Event,
    Finish,
    FinishReason,
    Raw,
    SessionUpdate,
    StreamStart,
    StreamWarning,
)
from polystream.wire.ws import WSMessage

__all__ = ["CLOSE_KINDS", "LyriaSession", "close_error"]

_IMPLICIT: Final[dict[str, Any]] = {"implicit": True}

CLOSE_KINDS: Final[dict[int, tuple[ErrorKind, bool]]] = {
    1000: ("cancelled", False),
    1001: ("server", True),
    1006: ("truncated", True),
    1007: ("invalid_request", False),
    1008: ("permission", False),
    1009: ("request_too_large", False),
    1011: ("server", True),
    1012: ("server", True),
    1013: ("overloaded", True),
    1014: ("server", True),
}
"""A close code -> the unified error kind, and whether trying again may help (1007:
invalid argument; 1008: policy, an unknown model or a key without access; 1011:
internal error). Any other code is ``unknown``."""


def close_error(code: int | None, reason: str = "") -> ErrorInfo:
    """The typed error of a close the service sent (None: no close frame, 1006)."""
    code = 1006 if code is None else code
    kind, retryable = CLOSE_KINDS.get(code, ("unknown", False))
    message = f"the connection closed ({code}{': ' + reason if reason else ''})"
    return ErrorInfo(
        kind=kind, message=message, retryable=retryable, code=str(code), dialect=SPEC.name
    )


class _Reply:
    """The music being received: its stream, its open block and the block's type."""

    __slots__ = ("ending", "index", "mime", "number")

    def __init__(self, number: int) -> None:
        self.number = number
        self.index = -1
        self.mime: str | None = None
        self.ending: str | None = None  # the control that ended it, its finish not yet given


class LyriaSession(RealtimeSession):
    """A Lyria RealTime WebSocket session.

    Args:
        model: The model to name in ``setup`` when :meth:`configure` names none
            (``models/`` is added when missing).
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.
    """

    dialect: ClassVar[str] = "gemini_lyria"
    spec: ClassVar[SocketSpec] = SPEC

    def __init__(self, *, model: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.model: str | None = model_name(model) if model else None
        """The model (the one ``setup`` named, once sent)."""
        self.setup_sent = False
        self.setup_complete = False
        """The service answered ``setup``."""
        self.prompts: list[dict[str, Any]] = []
        """The weighted prompts last sent."""
        self.config: dict[str, Any] = {}
        """The ``musicGenerationConfig`` last sent (wire names)."""
        self.filtered: list[dict[str, Any]] = []
        """Every ``filteredPrompt`` received (``{text, filteredReason}``)."""
        self.playing = False
        """``PLAY`` was sent, and no ``PAUSE`` or ``STOP`` since."""
        self._paused = False  # a PAUSE or STOP was sent: audio before the next PLAY is late
        self._reply: _Reply | None = None

    # -- reading -----------------------------------------------------------------------

    def feed(self, message: str | bytes) -> list[Routed]:
        """Read one whole server message (text or binary JSON); returns its events,
        after those of a reply a command ended (see :meth:`settle`).

        Raises:
            RemoteProtocolError: (strict mode) The message is malformed or unknown;
                located at its index.
            LocalProtocolError: ``feed`` after :meth:`close`.
        """
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect=self.dialect)
        out = self.settle()
        try:
            read = self._reader.read(message)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)
            return out
        try:
            payload = read.value
            if type(payload) is not dict:
                raise RemoteProtocolError(
                    f"message is a JSON {type(payload).__name__}, not an object"
                )
            if not payload:
                raise RemoteProtocolError("message is an empty object")
            if self.keep_raw:
                name = next((key for key in payload if key in SERVER_KEYS), next(iter(payload)))
                out.append(Routed(event=Raw(dialect=self.dialect, data=payload, name=name)))
            self._on_message(read, payload, "", out)
        except RemoteProtocolError as exc:
            self._tolerate(exc.located(dialect=self.dialect, event_index=read.index), out)
        return out

    def settle(self) -> list[Routed]:
        """The last events of the reply that a ``PAUSE`` or ``STOP`` ended, at once
        (otherwise they come with the next message read, or at :meth:`close`); empty
        when there are none."""
        reply = self._reply
        if reply is None or reply.ending is None:
            return []
        events: list[Event] = []
        if reply.mime is not None:
            events.append(BlockEnd(index=reply.index, extra=_IMPLICIT))
        reason = FinishReason(unified="cancelled", raw=reply.ending)
        events.append(Finish(status="incomplete", reason=reason, extra=_IMPLICIT))
        self._reply = None
        return [Routed(event=event, stream=reply.number) for event in events]

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        unknown = False
        for key, body in payload.items():
            if key == "serverContent":
                self._on_content(body, out)
            elif key == "setupComplete":
                self.setup_complete = True
                event = SessionUpdate(status="created", model=self.model, config=body)
                out.append(Routed(event=event))
            elif key == "filteredPrompt":
                out.append(Routed(event=self._filtered(body)))
            elif not unknown:
                unknown = True
                stream = self._reply.number if self._reply is not None else 0
                out.append(Routed(event=self._unknown(read, key), stream=stream))

    def _on_content(self, body: Any, out: list[Routed]) -> None:
        if type(body) is not dict:
            raise RemoteProtocolError("serverContent is not an object")
        chunks = body.get("audioChunks")
        if chunks is None:
            return
        if type(chunks) is not list:
            raise RemoteProtocolError("serverContent.audioChunks is not a list")
        for position, chunk in enumerate(chunks):
            if type(chunk) is not dict or type(chunk.get("data")) is not str:
                raise RemoteProtocolError(
                    f"serverContent.audioChunks[{position}] has no string data"
                )
            mime = chunk.get("mimeType")
            if mime is not None and type(mime) is not str:
                raise RemoteProtocolError(
                    f"serverContent.audioChunks[{position}].mimeType is not a string"
                )
        if self._paused and not self.playing:
            message = (
                f"{len(chunks)} audio chunk(s) arrived after the music was paused or "
                "stopped: not part of any reply"
            )
            warning = StreamWarning(
                code="audio_after_pause", message=message, extra={"audioChunks": chunks}
            )
            out.append(Routed(event=warning))
            return
        reply = self._reply
        events: list[Event] = []
        if reply is None:
            reply = self._reply = _Reply(self._new_stream())
            events.append(StreamStart(dialect=self.dialect, model=self.model, extra=_IMPLICIT))
        for chunk in chunks:
            mime = chunk.get("mimeType")
            if reply.mime is None or mime != reply.mime:
                if reply.mime is not None:
                    events.append(BlockEnd(index=reply.index, extra=_IMPLICIT))
                reply.index += 1
                reply.mime = mime if mime is not None else ""
                media = media_of_type(mime)
                events.append(
                    BlockStart(index=reply.index, kind="audio", media=media, extra=_IMPLICIT)
                )
            extra = {name: value for name, value in chunk.items() if name not in _CHUNK_FIELDS}
            data = chunk["data"]
            if "-" in data or "_" in data:  # (URL-safe base64, which JSON bytes may be)
                extra["data"] = data
                data = data.translate(_STANDARD)
            delta = DataDelta(index=reply.index, delta=data, mime_type=mime, extra=extra or None)
            events.append(delta)
        out.extend(Routed(event=event, stream=reply.number) for event in events)

    def _filtered(self, body: Any) -> ErrorEvent:
        if type(body) is not dict:
            raise RemoteProtocolError("filteredPrompt is not an object")
        text, reason = body.get("text"), body.get("filteredReason")
        self.filtered.append(body)
        why = f": {reason}" if isinstance(reason, str) and reason else ""
        info = ErrorInfo(
            kind="content_filter",
            message=f"the prompt {text!r} was filtered{why}",
            code="filtered_prompt",
            dialect=self.dialect,
            raw=body,
        )
        return ErrorEvent(error=info)

    def _on_close(self, out: list[Routed]) -> None:
        out.extend(self.settle())
        reply = self._reply
        if reply is None:
            return
        events: list[Event] = []
        if reply.mime is not None:
            events.append(BlockEnd(index=reply.index, extra=_IMPLICIT))
        error = ErrorInfo(
            kind="truncated",
            message="the connection closed while the music played",
            retryable=True,
            dialect=self.dialect,
        )
        reason = FinishReason(unified="error", raw=None)
        events.append(Finish(status="truncated", reason=reason, error=error, extra=_IMPLICIT))
        out.extend(Routed(event=event, stream=reply.number) for event in events)
        self._reply = None

    # -- writing -----------------------------------------------------------------------

    def configure(
        self,
        model: str | None = None,
        *,
        prompts: str | Sequence[str | tuple[str, float] | Mapping[str, Any]] | None = None,
        **config: Any,
    ) -> list[str]:
        """``setup`` (once, first: ``model``, or the session's), then the
        ``prompts`` (:meth:`set_prompts`) and the configuration (:meth:`set_config`'s
        arguments) when given.

        Raises:
            LocalProtocolError: No model, ``setup`` sent already with ``model`` given,
                or what :meth:`set_prompts` and :meth:`set_config` refuse.
        """
        out: list[str] = []
        if model is not None or not self.setup_sent:
            if self.setup_sent:
                raise self._error("setup was sent already: a model is set once")
            name = model_name(model) if model else self.model
            if not name:
                raise self._error("setup needs a model (models/lyria-realtime-exp)")
            self.model = name
            self.setup_sent = True
            out.append(self._message({"setup": {"model": name}}))
        if prompts is not None:
            out += self.set_prompts(prompts)
        if config:
            out += self.set_config(**config)
        return out

    def set_prompts(
        self, prompts: str | Sequence[str | tuple[str, float] | Mapping[str, Any]]
    ) -> list[str]:
        """``clientContent``: the weighted prompts that steer the music, replacing the
        last ones (a text, texts of weight 1.0, ``(text, weight)`` pairs, or
        ``{"text", "weight"}`` mappings).

        Raises:
            LocalProtocolError: Before ``setup``; no prompt, or a weight of 0.
        """
        self._check_setup()
        self.prompts = weighted_prompts(prompts, self.dialect)
        return [self._message({"clientContent": {"weightedPrompts": self.prompts}})]

    def set_config(self, *, extra: Mapping[str, Any] | None = None, **fields: Any) -> list[str]:
        """``musicGenerationConfig`` from ``temperature``, ``top_k``, ``seed``,
        ``guidance``, ``bpm``, ``density``, ``brightness``, ``scale`` (``C_MAJOR_A_MINOR``,
        ...), ``mute_bass``, ``mute_drums``, ``only_bass_and_drums``,
        ``music_generation_mode`` (``QUALITY``, ``DIVERSITY``, ``VOCALIZATION``); None
        leaves a field out; ``extra`` adds wire fields as they are. It replaces the
        configuration last sent.

        Raises:
            LocalProtocolError: Before ``setup``; an unknown field, a value of the
                wrong type or an unknown scale or mode.
        """
        self._check_setup()
        body: dict[str, Any] = {}
        for name, value in fields.items():
            known = CONFIG_FIELDS.get(name)
            if known is None:
                raise self._error(f"unknown music generation field {name!r}")
            if value is None:
                continue
            wire, types = known
            if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
                raise self._error(f"{name} must be {' or '.join(t.__name__ for t in types)}")
            body[wire] = value
        if body.get("scale", SCALES[0]) not in SCALES:
            raise self._error(f"unknown scale {body['scale']!r} (known: {', '.join(SCALES[1:])})")
        if body.get("musicGenerationMode", MODES[0]) not in MODES:
            mode = body["musicGenerationMode"]
            raise self._error(f"unknown music generation mode {mode!r}")
        body.update(extra or {})
        self.config = body
        return [self._message({"musicGenerationConfig": body})]

    def control(self, signal: str) -> list[str]:
        """``playbackControl``: ``PLAY``, ``PAUSE``, ``STOP`` or ``RESET_CONTEXT``
        (see :meth:`play` and the others).

        Raises:
            LocalProtocolError: Before ``setup``, or an unknown signal.
        """
        self._check_setup()
        if signal not in CONTROLS:
            raise self._error(f"unknown playback control {signal!r} (known: {', '.join(CONTROLS)})")
        if signal == "PLAY":
            self.playing = True
            self._paused = False
        elif signal in ("PAUSE", "STOP"):
            self.playing = False
            self._paused = True
            if self._reply is not None and self._reply.ending is None:
                self._reply.ending = signal
        return [self._message({"playbackControl": signal})]

    def play(self) -> list[str]:
        """Start the music (or go on after a ``PAUSE``)."""
        return self.control("PLAY")

    def pause(self) -> list[str]:
        """Hold the music: the reply ends (see the module docstring)."""
        return self.control("PAUSE")

    def stop(self) -> list[str]:
        """Stop the music and reset its context (the prompts and configuration stay):
        the reply ends."""
        return self.control("STOP")

    def reset_context(self) -> list[str]:
        """Reset the music's context without stopping it (the reply goes on)."""
        return self.control("RESET_CONTEXT")

    def send_text(self, text: str, *, weight: float = 1.0, play: bool = True) -> list[str]:
        """One weighted prompt, ``text``, and (``play``) ``PLAY``."""
        out = self.set_prompts([(text, weight)])
        return out + (self.play() if play else [])

    def create_response(self) -> list[str]:
        """``PLAY``."""
        return self.play()

    def cancel(self) -> list[str]:
        """``PAUSE``."""
        return self.pause()

    def _check_setup(self) -> None:
        if not self.setup_sent:
            raise self._error("send setup first: configure(model=...)")

    def _error(self, message: str) -> LocalProtocolError:
        return LocalProtocolError(message, dialect=self.dialect)


_CHUNK_FIELDS: Final = frozenset({"data", "mimeType"})
_STANDARD: Final = str.maketrans("-_", "+/")
