"""A speech stream -> unified events.

The ``sse`` framing (``stream_format: "sse"``), per native event:

* the first event: :class:`StreamStart`, then (for audio or the end) the one ``audio``
  block's :class:`BlockStart` (index 0), its media from ``audio_format`` (the request's
  ``response_format``) or the ``content_type`` option, else with only ``channels=1``;
* ``speech.audio.delta``: a :class:`DataDelta` of its ``audio`` (base64, as sent);
* ``speech.audio.done``: a :class:`UsageUpdate` of its ``usage``, the block's
  :class:`BlockEnd` and ``Finish(completed, stop)`` with the usage;
* ``error`` (or a bare ``{"error": {...}}``): an :class:`ErrorEvent` and a ``failed``
  Finish;
* any other event: :class:`Unknown` (strict: a protocol error);
* no ``speech.audio.done`` before the input ends: ``Finish(truncated)``.

The ``raw`` framing (no ``stream_format``, or ``"audio"``: the body is the audio file):
the bytes become :class:`DataDelta` events of ``raw_chunk_size`` bytes each (the last
one shorter), whatever the chunking of the input; the end of input ends the block and
finishes ``completed``. A raw body has no terminal event, so a cut is seen only against
the length the response announced: with ``expected_length`` (its ``Content-Length``) a
shorter body ends ``truncated`` and a longer one is a protocol error.

What a native event holds besides the modelled fields goes in the event's
``extra["speech"]`` (``fields``: the other fields; ``order``: the fields' order when it
is not the usual one; ``event``: the SSE ``event:`` name when the event had one;
``untyped``: the data had no ``type``; an error event's ``data`` as sent), so that the
encoder writes the stream back exactly.
"""

from __future__ import annotations

import base64
from typing import Any, Final, Literal

from polystream.dialects._base import Coalesce, FramedDecoder, Framing
from polystream.dialects._errors import CODE_KINDS
from polystream.errors import LocalProtocolError, RemoteProtocolError, StreamTruncated
from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    ErrorKind,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH
from polystream.wire.sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE, ServerSentEvent

from .wire import (
    DEFAULT_RAW_CHUNK,
    DELTA,
    DONE,
    ERROR,
    EXTRA_KEY,
    FORMATS,
    JSON,
    format_of_content_type,
    media_for,
)

__all__ = ["DIALECT", "Decoder"]

DIALECT: Final = "openai_speech"
_STOP: Final = FinishReason(unified="stop", raw=None)
_FAILED: Final = FinishReason(unified="error", raw=None)
_DELTA_ORDER: Final = ("type", "audio")
_DONE_ORDER: Final = ("type", "usage")
_COUNTS: Final = ("input_tokens", "output_tokens", "total_tokens")


class Decoder(FramedDecoder):
    """Decodes ``openai_speech`` (see the module docstring).

    Args:
        strict: Raise typed protocol errors (unknown events included).
        keep_raw: Emit a :class:`~polystream.events.Raw` event before each SSE event's
            unified events (the raw framing has none).
        framing: ``"sse"`` (also what ``"auto"`` means) or ``"raw"``.
        audio_format: The request's ``response_format`` (``mp3``, ``opus``, ``aac``,
            ``flac``, ``wav``, ``pcm``), when known: it describes the audio block.
        content_type: The response's ``Content-Type`` (``audio/mpeg``), for the raw
            framing: the format it names, when ``audio_format`` is not given.
        expected_length: The raw body's length as announced (``Content-Length``): a
            shorter body ends ``truncated``, a longer one is a protocol error.
        raw_chunk_size: Bytes of raw audio per data delta (a positive multiple of 3,
            at most ``max_event_size``): the most raw audio held back.
        max_line_size, max_event_size, max_depth: The SSE limits (see
            :class:`~polystream.dialects._base.FramedDecoder`).

    Raises:
        LocalProtocolError: An option is out of range.
    """

    dialect = DIALECT
    framings = ("sse", "raw")

    def __init__(
        self,
        *,
        strict: bool = False,
        keep_raw: bool = False,
        coalesce: Coalesce = "off",
        framing: Framing | Literal["auto"] = "auto",
        audio_format: str | None = None,
        content_type: str | None = None,
        expected_length: int | None = None,
        raw_chunk_size: int = DEFAULT_RAW_CHUNK,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if audio_format is not None and audio_format not in FORMATS:
            known = ", ".join(FORMATS)
            raise LocalProtocolError(
                f"unknown audio_format {audio_format!r} (known: {known})", dialect=DIALECT
            )
        if raw_chunk_size < 3 or raw_chunk_size % 3 or raw_chunk_size > max_event_size:
            raise LocalProtocolError(
                f"raw_chunk_size must be a positive multiple of 3 of at most max_event_size "
                f"({max_event_size}) (got {raw_chunk_size})",
                dialect=DIALECT,
            )
        if expected_length is not None and expected_length < 0:
            raise LocalProtocolError(
                f"expected_length must be >= 0 (got {expected_length})", dialect=DIALECT
            )
        super().__init__(
            strict=strict,
            keep_raw=keep_raw,
            coalesce=coalesce,
            framing="sse" if framing == "auto" else framing,
            max_line_size=max_line_size,
            max_event_size=max_event_size,
            max_depth=max_depth,
        )
        self._media: MediaInfo = media_for(audio_format or format_of_content_type(content_type))
        self._expected = expected_length
        self._chunk = raw_chunk_size
        self._pending = bytearray()  # raw bytes not yet given (fewer than raw_chunk_size)
        self._received = 0  # raw bytes fed
        self._started = False  # StreamStart given
        self._opened = False  # the audio block's BlockStart given

    def _make_framer(self, framing: Framing) -> None:
        if framing == "raw":
            self._framing = "raw"
            return
        super()._make_framer(framing)

    # -- the raw framing -----------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """Consume a chunk (see :meth:`FramedDecoder.feed`).

        Raises:
            RemoteProtocolError: Framing errors; dialect errors in strict mode; a raw
                body longer than ``expected_length``.
            LocalProtocolError: ``feed`` after ``close``.
        """
        if self._framing != "raw":
            return super().feed(data)
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect=DIALECT)
        if self._deferred is not None:
            raise self._deferred.again()
        out: list[Event] = []
        if not data:
            return out
        self._open(out)
        self.frame_offset = self._received
        expected = self._expected
        if expected is not None and self._received + len(data) > expected:
            self._deferred = RemoteProtocolError(
                f"raw audio body longer than its expected_length ({expected} bytes)",
                dialect=DIALECT,
                event_index=self.frame_index,
                byte_offset=expected,
            )
            data = data[: expected - self._received]
        self._received += len(data)
        pending = self._pending
        pending += data
        chunk = self._chunk
        if len(pending) >= chunk:
            whole = len(pending) - len(pending) % chunk
            view = memoryview(pending)
            for start in range(0, whole, chunk):
                out.append(DataDelta(index=0, delta=_b64(view[start : start + chunk])))
                self.frame_index += 1
            view.release()
            del pending[:whole]
        if self._deferred is not None and not out:
            raise self._deferred.again()
        return out

    def close(self) -> list[Event]:
        """End of input (see :meth:`FramedDecoder.close`): for the raw framing, the
        audio held back, the block's end and the Finish."""
        if self._framing != "raw":
            return super().close()
        if self._closed:
            return []
        self._closed = True
        if self._deferred is not None:
            raise self._deferred.again()
        out: list[Event] = []
        self._open(out)
        if self._pending:
            out.append(DataDelta(index=0, delta=_b64(self._pending)))
            self._pending = bytearray()
        self.frame_offset = self._received
        if self._expected is not None and self._received < self._expected:
            self.finish_truncated(
                out,
                _cut(
                    f"raw audio body ended after {self._received} of its {self._expected} "
                    f"bytes (expected_length)",
                    self.frame_index,
                    self._received,
                ),
            )
            return out
        out.append(BlockEnd(index=0))
        self.emit_finish(out, Finish(status="completed", reason=_STOP))
        return out

    def _open(self, out: list[Event]) -> None:
        if not self._started:
            self._started = True
            out.append(StreamStart(dialect=DIALECT))
        if not self._opened:
            self._opened = True
            out.append(BlockStart(index=0, kind="audio", media=self._media))

    # -- the SSE framing -----------------------------------------------------------------

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        obj = self.decode_json(event.data, JSON)
        if type(obj) is not dict:
            raise self.protocol_error("event data is not a JSON object")
        kind = obj.get("type")
        if kind is not None and type(kind) is not str:
            raise self.protocol_error("the event's type is not a string")
        tag = kind if kind is not None else event.event
        if self.keep_raw:
            self.raw_event(out, tag, obj)
        if tag == DELTA:
            audio = obj.get("audio")
            if type(audio) is not str:
                raise self.protocol_error("speech.audio.delta without a string audio")
            self._open(out)
            if event.event is None and len(obj) == 2 and kind is not None:
                # ({"type", "audio"} in that order: the usual event, nothing to keep.)
                extra = None if next(iter(obj)) == "type" else _residual(obj, _DELTA_ORDER, event)
            else:
                extra = _residual(obj, _DELTA_ORDER, event)
            out.append(DataDelta(index=0, delta=audio, extra=extra))
        elif tag == DONE:
            self._done(obj, event, out)
        elif tag == ERROR or (tag is None and "error" in obj):
            self._error(obj, event, out)
        else:
            if self.strict:
                raise self.protocol_error(f"unknown event {tag!r}")
            if not self._started:
                self._started = True
                out.append(StreamStart(dialect=DIALECT))
            marks = {EXTRA_KEY: {"event": event.event}} if event.event is not None else None
            out.append(Unknown(name=tag, data=event.data, extra=marks))

    def _done(self, obj: dict[str, Any], event: ServerSentEvent, out: list[Event]) -> None:
        raw = obj.get("usage")
        usage: Usage | None = None
        if raw is not None:
            usage = self._usage(raw)
        self._open(out)
        if usage is not None:
            out.append(UsageUpdate(usage=usage))
        out.append(BlockEnd(index=0))
        order = _DONE_ORDER if raw is not None else ("type",)
        self.emit_finish(
            out,
            Finish(
                status="completed", reason=_STOP, usage=usage, extra=_residual(obj, order, event)
            ),
        )

    def _usage(self, raw: Any) -> Usage:
        if type(raw) is not dict:
            raise self.protocol_error("speech.audio.done usage is not an object")
        counts: list[int | None] = []
        for name in _COUNTS:
            value = raw.get(name)
            if value is not None and (type(value) is not int or value < 0):
                raise self.protocol_error(f"usage.{name} is not a non-negative integer")
            counts.append(value)
        given, made, total = counts
        if total is None and given is not None and made is not None:
            total = given + made
        return Usage(input_tokens=given, output_tokens=made, total_tokens=total, raw=raw)

    def _error(self, obj: dict[str, Any], event: ServerSentEvent, out: list[Event]) -> None:
        inner = obj.get("error")
        body: dict[str, Any] = inner if type(inner) is dict else obj
        message = body.get("message")
        names = [body.get(key) for key in ("code", "type")]
        words = [w for w in names if type(w) is str and w and w != ERROR]
        known = [w for w in words if w in CODE_KINDS]
        code = known[0] if known else (words[0] if words else None)
        kind: ErrorKind = CODE_KINDS.get(code or "", "unknown")
        info = ErrorInfo(
            kind=kind,
            message=message if type(message) is str else "speech stream error",
            retryable=kind in RETRYABLE_KINDS,
            code=code,
            raw=body,
        )
        if not self._started:
            self._started = True
            out.append(StreamStart(dialect=DIALECT))
        kept: dict[str, Any] = {"data": event.data}
        if event.event is not None:
            kept["event"] = event.event
        self._gave_error = True
        out.append(ErrorEvent(error=info, extra={EXTRA_KEY: kept}))
        self.emit_finish(out, Finish(status="failed", reason=_FAILED, error=info))


def _residual(
    obj: dict[str, Any], modelled: tuple[str, ...], event: ServerSentEvent
) -> dict[str, Any] | None:
    """What the encoder needs besides the modelled fields to write ``obj`` back as it
    came (None: nothing)."""
    kept: dict[str, Any] = {}
    rest = {k: v for k, v in obj.items() if k not in modelled}
    if rest:
        kept["fields"] = rest
    if event.event is not None:
        kept["event"] = event.event
    if "type" not in obj:
        kept["untyped"] = True
    order = list(obj)
    if order != [k for k in modelled if k in obj] + list(rest):
        kept["order"] = order
    return {EXTRA_KEY: kept} if kept else None


def _b64(data: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(data).decode("ascii")


def _cut(message: str, index: int, offset: int) -> StreamTruncated:
    return StreamTruncated(message, dialect=DIALECT, event_index=index, byte_offset=offset)
