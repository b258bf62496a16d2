"""What every dialect decoder and encoder shares: framing, locating errors,
strict versus tolerant decoding, and the one-finish contract.

A dialect decoder subclasses :class:`FramedDecoder` and implements the hooks
``_on_event`` (an SSE event), ``_on_element`` (a JSON-array element, Gemini only) and
``_on_close`` (end of input: emit the Finish if the terminal event never came). Inside a
hook, raise :class:`~polystream.errors.RemoteProtocolError` (or call :meth:`protocol_error`)
for anything malformed: the base class attaches the dialect, the framing event index and
the byte offset, then either raises it (strict) or turns it into a typed
:class:`~polystream.events.ErrorEvent` and carries on (tolerant). Events already returned
are never taken back.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Final, Literal, NamedTuple, final, get_args

import msgspec

from polystream.dialects._usage_fold import BATCH as USAGE_BATCH
from polystream.errors import (
    BufferLimitExceeded,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTruncated,
)
from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Metadata,
    Raw,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.wire.framing import BLANK
from polystream.wire.jsonarray import JSONArrayDecoder, JSONElement
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, DepthGuard, too_deep
from polystream.wire.sse import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_LINE_SIZE,
    ServerSentEvent,
    SSEComment,
    SSEDecoder,
)

__all__ = [
    "Coalesce",
    "DialectDecoder",
    "DialectEncoder",
    "FramedDecoder",
    "Framing",
    "Loss",
    "LossKind",
    "UsageRun",
    "UsageTexts",
]

Framing = Literal["sse", "json_array", "raw"]

Coalesce = Literal["off", "result", "usage", "usage_texts"]
"""How a decoder may give a run of native events as fewer unified events (its fast
path; see :attr:`DialectDecoder.coalesce`):

- ``"off"``: each native event gives its own events (the default, and every
  decoder's way).
- ``"result"``: the events go only to an accumulator (:func:`polystream.decode` asks
  for it), so a run of text deltas of one block may come as one, and the run's usage
  updates as one of their usage merged: the accumulator's result is the same.
- ``"usage"``: the events go to an encoder that only merges this dialect's usage
  updates into the usage so far (:meth:`DialectEncoder.folds_usage`): a run's usage
  updates may come as one, of their usage merged, after the run's other events (which
  come as usual); each such update is noted as a :class:`UsageRun`
  (:meth:`DialectDecoder.take_runs`). Not once the decoder has given an
  :class:`~polystream.events.ErrorEvent` (an encoder may report every event after an
  error as lost, each update included).
- ``"usage_texts"``: as ``"usage"``, for an encoder that writes this dialect's usage
  where it comes, from the usage's own text (:meth:`DialectEncoder.writes_usage_texts`):
  each run also keeps the usage text of each of its native events
  (:attr:`UsageRun.texts`), which stands for the update not given.
"""


_COALESCE_MODES: Final = frozenset(get_args(Coalesce))


class UsageTexts(NamedTuple):
    """The usage texts of a run's native events (``"usage_texts"``).

    Fields:
        texts: Each native event's usage text, in order.
        shapes: For each, the text with its digits made 1s (one object while the shape
            does not change), for an encoder that writes the text itself.
        update: The usage update a text stands for, with the given extra.
    """

    texts: list[bytes]
    shapes: list[bytes]
    update: Callable[[bytes, dict[str, Any] | None], UsageUpdate]


class UsageRun(NamedTuple):
    """One usage update a decoder gave for a run of native events (``"usage"`` and
    ``"usage_texts"``; see :meth:`DialectDecoder.take_runs`).

    Fields:
        event: The update's index in the list of events the call gave.
        updates: How many updates it stands for (the run's native events): an encoder
            counts the events after it as if each had come
            (:meth:`DialectEncoder.encode_batch`).
        texts: (``"usage_texts"``) The usage texts of the run's native events, which
            stand for the update; the run's text deltas are the ``updates`` events
            before it.
    """

    event: int
    updates: int
    texts: UsageTexts | None = None


LossKind = Literal["lost", "defaulted"]
"""What a :class:`Loss` reports: ``lost``, something of the source the target could not
carry (or carried in a documented carrier: :attr:`Loss.carried`); ``defaulted``, a value
the target requires that the source did not have, which the encoder wrote as a default
(``created: 0``, a zero usage, a generated id): nothing of the source was lost, but the
output holds a value nobody sent."""


class Loss(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One thing an encoder could not carry into its target dialect, or a value it had
    to make up (``kind="defaulted"``).

    Fields:
        what: What was lost (``signature``, ``citation``, ``usage.cache_write_tokens``,
            ``event:unknown``, ...), or the field written as a default (``created``,
            ``model``, ``usage``, ``id``, ``stop_reason``).
        event_index: Index of the unified event (in the encoder's input) that held it
            (for a default: that lacked it, or was being encoded when it was written);
            a :class:`~polystream.transcode.Transcoder` counts the source's full event
            list, also when its decoder gave a run's usage updates as one.
        event_type: That event's ``type`` tag.
        reason: Why the target cannot carry it (for a default: which value was written).
        carried: True when it was put in a documented carrier instead, so that a hop
            back to the source dialect through polystream restores it.
        kind: ``lost`` or ``defaulted`` (see :data:`LossKind`).
    """

    what: str
    event_index: int
    event_type: str
    reason: str
    carried: bool = False
    kind: LossKind = "lost"

    def describe(self) -> str:
        """``what``, with ``(carried)`` or ``(defaulted)`` when it was not lost."""
        if self.kind == "defaulted":
            return f"{self.what} (defaulted)"
        return f"{self.what} (carried)" if self.carried else self.what


class DialectDecoder(abc.ABC):
    """The decoder contract: bytes in any chunking -> unified events.

    Args:
        strict: Raise typed protocol errors instead of emitting error events, and
            treat unknown events and enum values as errors (conformance checking).
        keep_raw: Emit a :class:`~polystream.events.Raw` event before the unified
            events of each native event.
        coalesce: The :data:`Coalesce` mode (its fast path): a mode this decoder has
            none for (not in :attr:`coalesce_modes`) is ``"off"``.

    Raises:
        LocalProtocolError: ``coalesce`` is not a :data:`Coalesce` mode.
    """

    dialect: ClassVar[str]

    coalesce_modes: ClassVar[frozenset[Coalesce]] = frozenset({"off"})
    """The :data:`Coalesce` modes this decoder has a fast path for (``"off"`` only,
    unless a dialect says more: Gemini's generateContent has each)."""

    private_extra: ClassVar[frozenset[str]] = frozenset()
    """The keys of an event's ``extra`` that this decoder sets for its encoder's own use
    (markers such as "no native event of its own", key orders, residual layouts), as
    opposed to the native fields the event does not model. A key that starts with ``_``
    is private too, in every dialect. ``polystream decode --events`` hides them unless
    ``--raw``; a same-dialect round trip needs them."""

    def __init__(
        self, *, strict: bool = False, keep_raw: bool = False, coalesce: Coalesce = "off"
    ) -> None:
        self.strict = strict
        self.keep_raw = keep_raw
        if coalesce not in _COALESCE_MODES:
            raise LocalProtocolError(
                f"coalesce must be one of {', '.join(get_args(Coalesce))} (got {coalesce!r})",
                dialect=self.dialect,
            )
        self._coalesce: Coalesce = coalesce if coalesce in self.coalesce_modes else "off"
        self._runs: list[UsageRun] = []  # (see take_runs)
        self._gave_error = False
        """An :class:`~polystream.events.ErrorEvent` was given: from then on, no run's
        usage updates are given as one (see :data:`Coalesce`)."""
        self.last_cursor: int | str | None = None
        """The resume cursor of the last native event handled (dialects that have one,
        OpenAI ``sequence_number`` and Interactions ``event_id``, set it)."""

    @property
    def coalesce(self) -> Coalesce:
        """The :data:`Coalesce` mode in use: the ``coalesce`` given at construction, or
        ``"off"`` when this decoder has no fast path for it (not in
        :attr:`coalesce_modes`)."""
        return self._coalesce

    def take_runs(self) -> list[UsageRun]:
        """The usage updates the last :meth:`feed` or :meth:`close` gave for runs of
        native events (``"usage"`` and ``"usage_texts"``; empty otherwise), in order;
        taken once (a second call gives none). The decoder drops what was not taken
        at its next ``feed`` or ``close``."""
        runs = self._runs
        if not runs:
            return runs
        self._runs = []
        return runs

    def reset_framing(self) -> None:
        """Forget a partial framing event, keeping the dialect state (for resuming)."""
        raise LocalProtocolError("this decoder cannot resume", dialect=self.dialect)

    @abc.abstractmethod
    def feed(self, data: bytes) -> list[Event]:
        """Consume a chunk of the stream; return the unified events it completed."""

    @abc.abstractmethod
    def close(self) -> list[Event]:
        """End of input: return the remaining events, ending with the one Finish."""


class FramedDecoder(DialectDecoder):
    """A dialect decoder over SSE or JSON-array framing (see the module docstring).

    Args:
        framing: ``"sse"``, ``"json_array"`` or ``"auto"`` (decided by the first
            non-blank byte: ``[`` means a JSON array). Dialects that only speak SSE
            ignore it.
        max_line_size: SSE line limit in bytes.
        max_event_size: SSE event / JSON element limit in bytes; with ``"auto"``, also
            the most blank bytes accepted before the first non-blank one (they are
            kept until the framing is known).
        max_depth: Deepest nesting accepted in one event's JSON data or one array
            element (see :mod:`polystream.wire.jsondepth`). A deeper SSE event is not
            parsed: it is a :class:`~polystream.errors.BufferLimitExceeded` at that
            event (an error event when tolerant); a deeper array element is a framing
            error.
    """

    framings: ClassVar[tuple[Framing, ...]] = ("sse",)

    _fast_paths: ClassVar[bool] = True
    """Private switch: False makes every dialect take its general path for every event
    (its fast paths must give exactly the same events; the tests compare both)."""

    def __init__(
        self,
        *,
        strict: bool = False,
        keep_raw: bool = False,
        coalesce: Coalesce = "off",
        framing: Framing | Literal["auto"] = "auto",
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        super().__init__(strict=strict, keep_raw=keep_raw, coalesce=coalesce)
        if max_depth < 1:
            raise LocalProtocolError(
                f"max_depth must be at least 1 (got {max_depth})", dialect=self.dialect
            )
        if framing != "auto" and framing not in self.framings:
            raise LocalProtocolError(
                f"{self.dialect} has no {framing} framing", dialect=self.dialect
            )
        self._framing: Framing | None = (
            framing
            if framing != "auto"
            else (self.framings[0] if len(self.framings) == 1 else None)
        )
        self._max_line = max_line_size
        self._max_event = max_event_size
        self._max_depth = max_depth
        # Whether the SSE events of a chunk may nest deeper than max_depth (only then
        # is each one checked; see polystream.wire.jsondepth).
        self._depth = DepthGuard(max_depth)
        self._sse: SSEDecoder | None = None
        self._array: JSONArrayDecoder | None = None
        # Blank bytes (whitespace, BOM bytes) held until the framing is known, and how
        # many: at most max_event_size (see feed).
        self._blank: list[bytes] = []
        self._blank_size = 0
        self.finished = False  # the Finish event has been emitted
        self.frame_index = 0  # index of the framing event being handled
        self.frame_offset = 0  # its byte offset
        self._closed = False
        self._deferred: RemoteProtocolError | None = None
        if self._framing is not None:
            self._make_framer(self._framing)

    @property
    def framing(self) -> Framing | None:
        """The framing in use (None until ``auto`` has seen the first byte)."""
        return self._framing

    def _make_framer(self, framing: Framing) -> None:
        self._framing = framing
        if framing == "sse":
            self._sse = SSEDecoder(max_line_size=self._max_line, max_event_size=self._max_event)
        else:
            self._array = JSONArrayDecoder(
                max_element_size=self._max_event, max_depth=self._max_depth
            )

    # -- the contract ------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """Consume a chunk of the stream and return the unified events it completed.

        Raises:
            RemoteProtocolError: Framing errors always; dialect errors in strict mode.
                When events were decoded from this chunk before the error, they are
                returned and the error is raised by the next ``feed`` or ``close``.
            BufferLimitExceeded: A framing limit was exceeded.
            LocalProtocolError: ``feed`` after ``close``.
        """
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect=self.dialect)
        if self._deferred is not None:
            raise self._deferred.again()
        if self._framing is None:
            stripped = data.lstrip(BLANK)
            if not stripped:
                # Still blank: kept for the framing's parser, which sees every byte (its
                # offsets and its reading of blank lines stay its own). Kept as pieces,
                # joined once: each feed does not copy what came before.
                self._blank.append(data)
                self._blank_size += len(data)
                if self._blank_size > self._max_event:
                    self._deferred = BufferLimitExceeded(
                        f"no content in the first {self._blank_size} bytes (blank bytes "
                        f"before the framing is known, max_event_size={self._max_event})",
                        dialect=self.dialect,
                        event_index=0,
                        byte_offset=0,
                    )
                    self._blank = []
                    raise self._deferred.again()
                return []
            if self._blank:
                self._blank.append(data)
                data = b"".join(self._blank)
                self._blank = []
            self._make_framer("json_array" if stripped[:1] == b"[" else "sse")
        out: list[Event] = []
        try:
            if self._sse is not None:
                frames = self._sse.feed(data)
                if self._depth.feed(data):
                    if frames:
                        frames = self._bound_depth(frames)
                    if self._sse.idle:
                        # Nothing is pending: what the guard kept (brackets inside
                        # strings count too) no longer stands for any event.
                        self._depth.reset()
                if frames:
                    self._dispatch_sse(frames, out)
            else:
                assert self._array is not None
                for element in self._array.feed(data):
                    self._handle_element(element, out)
        except RemoteProtocolError as exc:
            located = exc.located(dialect=self.dialect)
            if out:
                # Nothing already decoded is lost: return it now, raise on the next call.
                self._deferred = located
                return out
            # A copy: this frame names ``located``, and a raised error's traceback holds
            # the frame (and the decoder), which would be a reference cycle.
            raise located.again() from None
        return out

    def close(self) -> list[Event]:
        """End of input. Returns the remaining events; the last is always a Finish.

        A stream without the dialect's terminal event ends ``truncated``.
        """
        if self._closed:
            return []
        self._closed = True
        if self._deferred is not None:
            raise self._deferred.again()
        out: list[Event] = []
        truncation: StreamTruncated | None = None
        try:
            if self._sse is not None:
                frames = self._sse.close()
                if frames:
                    # (The events the end of input completes were open after the last
                    # feed: what it kept of their brackets says whether to check them.)
                    if self._depth.feed(b""):
                        frames = self._bound_depth(frames)
                    self._dispatch_sse(frames, out)
            elif self._array is not None:
                self._array.close()
        except StreamTruncated as exc:
            # Without its traceback: it would hold this frame, and with it the decoder,
            # in a reference cycle (freed only by the cycle collector).
            truncation = exc.with_traceback(None)
        self._on_close(out, truncation)
        if not self.finished:
            self.finish_truncated(out, truncation)
        return out

    def reset_framing(self) -> None:
        """Forget a partial framing event and start framing afresh, keeping the
        dialect's state (open blocks, indices, usage).

        Used to resume a dropped stream: the resumed bytes (``starting_after`` /
        ``last_event_id``) are fed to the *same* decoder, so unified block indices
        continue, and the partial event cut by the drop is discarded (the provider
        sends it again whole, after the cursor).
        """
        if self._closed:
            raise LocalProtocolError("reset_framing() after close()", dialect=self.dialect)
        if self._framing is not None:
            self._make_framer(self._framing)
        self._depth.reset()

    def _bound_depth(
        self, frames: list[ServerSentEvent | SSEComment]
    ) -> list[ServerSentEvent | SSEComment]:
        """``frames`` with each event whose data nests deeper than ``max_depth``
        replaced by a :class:`TooDeep` (which :meth:`_handle_sse` turns into the
        error, in its place among the events)."""
        limit = self._max_depth
        bounded: list[ServerSentEvent | SSEComment] = []
        for frame in frames:
            if type(frame) is ServerSentEvent:
                at = too_deep(frame.data, limit)
                if at is not None:
                    frame = TooDeep(
                        data="",
                        event=frame.event,
                        id=frame.id,
                        retry=frame.retry,
                        offset=frame.offset,
                        index=frame.index,
                        at=at,
                    )
            bounded.append(frame)
        return bounded

    # -- helpers for subclasses ----------------------------------------------------------

    def protocol_error(self, message: str) -> RemoteProtocolError:
        """Build a protocol error located at the current framing event."""
        return RemoteProtocolError(
            message,
            dialect=self.dialect,
            event_index=self.frame_index,
            byte_offset=self.frame_offset,
        )

    def decode_json(self, data: str | bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
        """Decode a payload with ``decoder``; malformed JSON becomes a located error."""
        try:
            return decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise self.protocol_error(f"malformed JSON payload: {exc}") from None

    def warn(self, out: list[Event], code: str, message: str) -> None:
        """Report an anomaly: a Warning event when tolerant, a protocol error when strict."""
        if self.strict:
            raise self.protocol_error(message)
        out.append(
            Warning(
                code=code,
                message=message,
                event_index=self.frame_index,
                byte_offset=self.frame_offset,
            )
        )

    def emit_finish(self, out: list[Event], finish: Finish) -> None:
        """Emit the stream's one Finish (a second one is ignored)."""
        if not self.finished:
            self.finished = True
            out.append(finish)

    def finish_truncated(self, out: list[Event], cause: StreamTruncated | None = None) -> None:
        """Emit a ``truncated`` Finish: the input ended without the terminal event."""
        message = (
            cause.message
            if cause is not None
            else f"stream ended without the {self.dialect} terminal event"
        )
        self.emit_finish(
            out,
            Finish(
                status="truncated",
                reason=FinishReason(unified="error", raw=None),
                error=ErrorInfo(
                    kind="truncated",
                    message=message,
                    retryable=True,
                    dialect=self.dialect,
                    event_index=cause.event_index if cause is not None else self.frame_index,
                    byte_offset=cause.byte_offset if cause is not None else None,
                ),
            ),
        )

    def raw_event(self, out: list[Event], name: str | None, data: Any) -> None:
        """Emit a Raw event when ``keep_raw`` is on."""
        if self.keep_raw:
            out.append(Raw(dialect=self.dialect, name=name, data=data))

    # -- hooks -----------------------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        """Handle one SSE event (dialects framed as SSE override this)."""
        raise self.protocol_error(f"{self.dialect} does not use SSE framing")

    def _on_element(self, element: JSONElement, out: list[Event]) -> None:
        """Handle one JSON-array element (Gemini only)."""
        raise self.protocol_error(f"{self.dialect} does not use JSON-array framing")

    def _on_comment(self, comment: SSEComment, out: list[Event]) -> None:
        """Handle an SSE comment line: a keep-alive by default."""
        out.append(KeepAlive(comment=comment.text))

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        """End of input: flush state; emit the Finish if the dialect ends by closing.

        If no Finish was emitted when this returns, the base emits ``truncated``.
        """

    def _after_finish(self, event: ServerSentEvent, out: list[Event]) -> None:
        """An event arrived after the terminal event."""
        self.warn(out, "after_terminal", "event after the stream's terminal event")

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch_sse(self, frames: list[ServerSentEvent | SSEComment], out: list[Event]) -> None:
        """Hand each frame of one ``feed`` to its hook: :meth:`_handle_sse` inlined for
        the common case (an event before the Finish), every other frame goes through it."""
        on_event = self._on_event
        for frame in frames:
            if type(frame) is ServerSentEvent and not self.finished:
                self.frame_index = frame.index
                self.frame_offset = frame.offset
                try:
                    on_event(frame, out)
                except RemoteProtocolError as exc:
                    self._tolerate(exc, out)
            else:
                self._handle_sse(frame, out)

    @final
    def _handle_sse(self, frame: ServerSentEvent | SSEComment, out: list[Event]) -> None:
        """Hand one frame to its hook (:meth:`_dispatch_sse` inlines it for an event
        before the Finish, so it is final: a dialect overrides the hooks instead)."""
        if type(frame) is SSEComment:
            self._on_comment(frame, out)
            return
        if type(frame) is TooDeep:
            # Never parsed (nor handed to a hook): the error takes the event's place.
            self.frame_index = frame.index
            self.frame_offset = frame.offset
            self._tolerate(
                BufferLimitExceeded(
                    f"event data nests deeper than max_depth={self._max_depth} "
                    f"(at character {frame.at} of its data)"
                ),
                out,
            )
            return
        assert type(frame) is ServerSentEvent
        self.frame_index = frame.index
        self.frame_offset = frame.offset
        try:
            if self.finished:
                self._after_finish(frame, out)
            else:
                self._on_event(frame, out)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)

    def _handle_element(self, element: JSONElement, out: list[Event]) -> None:
        self.frame_index = element.index
        self.frame_offset = element.offset
        try:
            self._on_element(element, out)
        except RemoteProtocolError as exc:
            self._tolerate(exc, out)

    def _tolerate(self, exc: RemoteProtocolError, out: list[Event]) -> None:
        located = exc.located(
            dialect=self.dialect, event_index=self.frame_index, byte_offset=self.frame_offset
        )
        if self.strict:
            raise located.again() from None  # a copy, as in feed
        self._gave_error = True
        out.append(
            ErrorEvent(
                error=ErrorInfo(
                    kind="protocol",
                    message=located.message,
                    dialect=located.dialect,
                    event_index=located.event_index,
                    byte_offset=located.byte_offset,
                )
            )
        )


class TooDeep(ServerSentEvent, frozen=True, gc=False):
    """An SSE event whose data nests deeper than the decoder's ``max_depth``, in the
    place of that event (its data dropped, never parsed).

    Fields:
        at: Index in the event's data of the first bracket past the bound.
    """

    at: int = 0


_FINISH_KEYS: Final = frozenset({"finishReason"})
"""The keys of a ``finish`` :class:`~polystream.events.Metadata` value that a Finish
carries (its reason)."""


def _event_name(event: Event) -> str:
    """An event's wire tag (``text_delta``), else its class name."""
    return str(type(event).__struct_config__.tag or type(event).__name__)


class DialectEncoder(abc.ABC):
    """The encoder contract: unified events -> the dialect's exact wire bytes.

    Call :meth:`encode` for each event (bytes may be empty when an event produces no
    output yet), then :meth:`close` once. What the target cannot carry is recorded in
    :attr:`losses`.
    """

    dialect: ClassVar[str]
    content_type: ClassVar[str] = "text/event-stream"

    def __init__(self) -> None:
        self.losses: list[Loss] = []
        self.event_index = 0  # index of the unified event being encoded
        # Another dialect's usage updates kept back, to be folded in one go by
        # ``_fold_usage`` (encoders that write usage only at the end use it).
        self._usage_batch: list[Usage] = []

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        Raises:
            LocalProtocolError: The encoder cannot write ``event`` (in its state, or
                at all: a string that UTF-8 cannot carry, a lone surrogate).
        """
        return self._encode_pending(event)

    def close(self) -> bytes:
        """End of the event stream: returns any final bytes (``[DONE]``, ``]``, what
        an encoder still held back).

        Raises:
            LocalProtocolError: What was held back cannot be written (a string that
                UTF-8 cannot carry).
        """
        try:
            return self._close()
        except UnicodeEncodeError as exc:
            raise self._unencodable(None, exc) from None

    def _close(self) -> bytes:
        """:meth:`close`'s work (encoders that hold events back override this)."""
        return b""

    def _unencodable(self, event: Event | None, exc: UnicodeEncodeError) -> LocalProtocolError:
        """The error for a string msgspec cannot write (UTF-8 has no lone surrogates),
        naming the event being encoded (``None``: the end of the stream) and where the
        string holds the character."""
        what = "the end of the stream" if event is None else f"a {_event_name(event)} event"
        bad = exc.object[exc.start : exc.end]
        return LocalProtocolError(
            f"cannot encode {what}: a string holds {bad!r} at index {exc.start}, which "
            f"UTF-8 cannot carry ({exc.reason})",
            dialect=self.dialect,
            event_index=self.event_index,
        )

    def encode_all(self, events: Iterable[Event]) -> bytes:
        """Encode a whole stream and close it."""
        parts = [self.encode(event) for event in events]
        parts.append(self.close())
        return b"".join(parts)

    def encode_batch(self, events: list[Event], runs: Sequence[UsageRun] = ()) -> bytes:
        """Encode ``events``, what one call of a decoder gave, with the runs it noted
        (:meth:`DialectDecoder.take_runs`, for a decoder made with
        :meth:`coalesce_for`'s mode): the events after a run's usage update are
        counted as if each update of the run had come, so that the losses name the
        events' indices in the full stream; a run with its usage texts is written from
        its text deltas and those texts (:meth:`_encode_usage_texts`), its update
        (which the texts stand for) not encoded.

        Raises:
            LocalProtocolError: As :meth:`encode`.
        """
        encode = self.encode
        if not runs:
            return b"".join([encode(event) for event in events])
        parts: list[bytes] = []
        at = 0
        for index, updates, texts in runs:
            if texts is None:
                parts.extend([encode(event) for event in events[at : index + 1]])
                self.event_index += updates - 1
            else:
                # The run's text deltas come before its update: each delta's own usage
                # text stands for the update it did not give.
                start = index - updates
                parts.extend([encode(event) for event in events[at:start]])
                update = events[index]
                assert type(update) is UsageUpdate
                parts.append(self._encode_usage_texts(events[start:index], texts, update.extra))
            at = index + 1
        parts.extend([encode(event) for event in events[at:]])
        return b"".join(parts)

    def coalesce_for(self, source: str) -> Coalesce:
        """The :data:`Coalesce` mode for a decoder of ``source`` whose events this
        encoder gets (through :meth:`encode_batch`): ``"usage"`` when it only merges
        ``source``'s usage updates (:meth:`folds_usage`), ``"usage_texts"`` when it
        writes them from their texts (:meth:`writes_usage_texts`), else ``"off"`` (a
        decoder without that mode's fast path takes ``"off"`` itself)."""
        if self.folds_usage(source):
            return "usage"
        if self.writes_usage_texts(source):
            return "usage_texts"
        return "off"

    def folds_usage(self, source: str) -> bool:
        """Whether every :class:`~polystream.events.UsageUpdate` that ``source``'s
        decoder gives is, to this encoder, only merged into the usage so far (nothing
        written for it, nothing lost, whatever comes before it), so that a run of them
        may come as one update of their usage merged, after the run's other events
        (the ``"usage"`` :data:`Coalesce` mode). False unless an encoder says so: an
        encoder that writes a dialect's usage where it comes (its own dialect's, as a
        rule) must get every update."""
        return False

    def writes_usage_texts(self, source: str) -> bool:
        """Whether this encoder writes a run of ``source``'s native events from their
        text deltas and each one's usage text faster than from their events
        (:meth:`_encode_usage_texts`), so that its decoder is to keep the texts (the
        ``"usage_texts"`` :data:`Coalesce` mode). False unless an encoder says so."""
        return False

    def _encode_usage_texts(
        self, deltas: list[Event], texts: UsageTexts, extra: dict[str, Any] | None
    ) -> bytes:
        """Encode, for each ``i``, ``deltas[i]`` then the usage update
        ``texts.texts[i]`` stands for (``texts.update(texts.texts[i], extra)``; an
        encoder that writes the text itself may use ``texts.shapes[i]``). Here: the
        events made and encoded."""
        update = texts.update
        parts: list[bytes] = []
        for delta, usage in zip(deltas, texts.texts, strict=True):
            parts.append(self.encode(delta))
            parts.append(self.encode(update(usage, extra)))
        return b"".join(parts)

    def _keep_usage(self, usage: Usage) -> bytes:
        """Keep a usage update back (nothing is written for it now); the batch is
        folded once full, or by :meth:`_encode_pending` before any other event."""
        batch = self._usage_batch
        batch.append(usage)
        if len(batch) >= USAGE_BATCH:
            self._fold_usage()
        self.event_index += 1
        return b""

    def _encode_pending(self, event: Event) -> bytes:
        """The general path of :meth:`encode` (and of an override's): fold the usage
        kept back, then encode ``event``."""
        try:
            if self._usage_batch:
                self._fold_usage()
            data = self._encode(event)
        except UnicodeEncodeError as exc:
            raise self._unencodable(event, exc) from None
        self.event_index += 1
        return data

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back (encoders that keep any override this)."""
        self._usage_batch.clear()

    def lose(self, what: str, event: Event, reason: str, *, carried: bool = False) -> None:
        """Record a loss (or a carrier use) for the event being encoded."""
        self.losses.append(
            Loss(
                what=what,
                event_index=self.event_index,
                event_type=_event_name(event),
                reason=reason,
                carried=carried,
            )
        )

    def lose_metadata(self, event: Metadata, reason: str) -> None:
        """Record a :class:`~polystream.events.Metadata` event the target has no field
        for (``reason`` says so): as carried when it only restates candidate 0's finish
        reason, which the stream's Finish carries into the target's own stop reason
        (Chat's per-choice ``finish_reason``, Gemini's per-candidate ``finish`` when it
        holds nothing but the ``finishReason``)."""
        value = event.value
        restated = event.candidate == 0 and (
            (event.name == "finish_reason" and (value is None or type(value) is str))
            or (event.name == "finish" and type(value) is dict and value.keys() <= _FINISH_KEYS)
        )
        if restated:
            self.lose(
                f"metadata:{event.name}",
                event,
                "candidate 0's finish reason: written as the stream's own finish reason",
                carried=True,
            )
        else:
            self.lose(f"metadata:{event.name}", event, reason)

    def default(self, what: str, event: Event | None, reason: str) -> None:
        """Record a value the target requires that the source did not have, written
        as a default (a :class:`Loss` of kind ``defaulted``): ``event`` is the one that
        lacked it (None: the stream had no such event, a ``stream-start`` as a rule)."""
        self.losses.append(
            Loss(
                what=what,
                event_index=self.event_index,
                event_type="stream-start" if event is None else _event_name(event),
                reason=reason,
                kind="defaulted",
            )
        )

    @abc.abstractmethod
    def _encode(self, event: Event) -> bytes:
        """Encode one event (subclasses)."""

    # -- journal entries ---------------------------------------------------------------

    stream_id: str = ""
    """The stream's id in the counter cursors (``<stream_id>.<n>``) and ``id:`` lines
    :meth:`encode_entries` writes; set it before the first call."""
    native_id: str | None = None
    """The stream's own id (the response's, the interaction's) once an event written by
    :meth:`encode_entries` has carried it; None until then, and in dialects without one."""
    _cursor_splitter: Any = None  # what :meth:`encode_entries` reads cursors with

    def encode_entries(
        self, events: Iterable[Event], *, close: bool = False
    ) -> list[tuple[str, bytes]]:
        """Encode ``events`` (``close``: then end the stream, as :meth:`close`) as the
        journal entries of the SSE events written: each event's resume cursor and its
        bytes, the ``id: <stream_id>.<n>`` line in for the dialects whose cursors are
        the counter (but Gemini's generate streams, whose SDK rejects it). An event
        cut short comes with the call that completes it. The rules are
        :class:`~polystream.dialects._cursors.CursorSplitter`'s; this default runs it
        over :meth:`encode`'s output (encoders that know their events' cursors where
        they write them override it).

        Raises:
            LocalProtocolError: As :meth:`encode` and :meth:`close`.
        """
        splitter = self._cursor_splitter
        if splitter is None:
            from polystream.dialects._cursors import CursorSplitter

            splitter = self._cursor_splitter = CursorSplitter(self.dialect, self.stream_id)
        encode = self.encode
        parts = [encode(event) for event in events]
        if close:
            parts.append(self.close())
        entries: list[tuple[str, bytes]] = splitter.split(b"".join(parts))
        if self.native_id is None:
            self.native_id = splitter.native_id
        return entries
