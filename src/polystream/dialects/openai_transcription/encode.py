"""Unified events -> OpenAI transcription SSE.

A stream of this dialect is written back byte for byte (the native fields each event keeps
in ``extra``, their order and the ``event:`` line flag, see :mod:`.wire`). Another
dialect's stream is written as a transcription of its first ``transcript`` block:

* ``TextDelta`` on that block -> ``transcript.text.delta``; ``TranscriptSegment`` ->
  ``transcript.text.segment``;
* ``Finish`` ``completed`` (or ``incomplete``, reported as a loss) ->
  ``transcript.text.done`` with the whole text (``BlockEnd.value`` when it states it, else
  the deltas joined) and the usage so far; ``failed`` -> an ``error`` event unless an
  ``ErrorEvent`` was written already; ``truncated`` -> nothing (the stream stays cut);
* ``ErrorEvent`` -> ``error`` (``{"type": "error", "error": {type, code, message,
  param}}``, the shape the OpenAI SDK raises from);
* an SSE comment keep-alive -> the same comment.

Reported with :meth:`~polystream.dialects._base.DialectEncoder.lose` (never silently
dropped): every block other than the transcript (text, reasoning, tool calls, images,
audio: each once, at its start), deltas of a kind a transcript cannot hold, citations,
signatures, metadata, status updates, named keep-alives, another dialect's unknown events,
tolerated decode errors of the source, token counts the usage object has no field for,
and an ``incomplete`` finish.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._base import DialectEncoder
from polystream.dialects._errors import openai_error_object
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    KeepAlive,
    Raw,
    StreamStart,
    StreamWarning,
    TextDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import SSEEncoder

from .decode import DIALECT
from .wire import DELTA, DONE, ERROR, EVENT_LINES, SEGMENT, native_usage, write

__all__ = ["Encoder"]

_SSE: Final = SSEEncoder()
_PARTS: Final = (
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "tool_prompt_tokens",
    "audio_output_tokens",
)
"""Canonical counts a transcription usage object has no field for."""


class Encoder(DialectEncoder):
    """Encode unified events as an OpenAI transcription stream (see the module docstring)."""

    dialect = DIALECT

    def __init__(self) -> None:
        super().__init__()
        self._native = False
        self._block: int | None = None  # the transcript block written
        self._lost: set[int] = set()  # blocks reported lost at their start
        self._texts: list[str] = []
        self._end: BlockEnd | None = None
        self._usage = Usage()
        self._usage_raw: Any = None  # this dialect's own usage object, as it came
        self._errored = False
        self._done = False

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates only go into ``transcript.text.done`` (see
        :meth:`DialectEncoder.folds_usage`)."""
        return source != DIALECT

    def _encode(self, event: Event) -> bytes:
        kind = type(event)
        if (self._errored or self._done) and kind not in (Finish, StreamWarning, Raw):
            # An error or done event ends the stream: a reader takes nothing after it.
            self.lose(
                str(type(event).__struct_config__.tag),
                event,
                "after the transcription's terminal event",
            )
            return b""
        if kind is TextDelta:
            assert isinstance(event, TextDelta)
            if event.index == self._block:
                self._texts.append(event.delta)
                return write(DELTA, {"type": DELTA, "delta": event.delta}, self._own(event))
            return self._off_block(event, event.index, "text")
        if kind is TranscriptSegment:
            assert isinstance(event, TranscriptSegment)
            if event.index != self._block:
                return self._off_block(event, event.index, "segment")
            payload: dict[str, Any] = {"type": SEGMENT}
            for key, value in (
                ("id", event.id),
                ("start", event.start),
                ("end", event.end),
                ("speaker", event.speaker),
                ("text", event.text),
            ):
                if value is not None:
                    payload[key] = value
            return write(SEGMENT, payload, self._own(event))
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._native = event.dialect == DIALECT
            return b""
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.kind == "transcript" and self._block is None:
                self._block = event.index
            else:
                self._lost.add(event.index)
                what = "a second transcript" if event.kind == "transcript" else event.kind
                self.lose(
                    f"block:{event.kind}",
                    event,
                    f"a transcription stream holds one transcript, not {what}",
                )
            return b""
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            if event.index == self._block:
                self._end = event
            return b""
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            self._take_usage(event.usage)
            return b""
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            return self._error(event)
        if kind is Finish:
            assert isinstance(event, Finish)
            return self._finish(event)
        if kind is KeepAlive:
            assert isinstance(event, KeepAlive)
            if event.comment is not None:
                return _SSE.comment(event.comment)
            self.lose("keep-alive", event, "a transcription stream has no named keep-alive")
            return b""
        if kind is Unknown:
            assert isinstance(event, Unknown)
            if self._native:
                line = bool((event.extra or {}).get("_event", EVENT_LINES))
                return _SSE.event(event.data, event=event.name if line else None)
            self.lose("event:unknown", event, "an unknown event of another dialect")
            return b""
        if kind in (StreamWarning, Raw):
            return b""
        index = getattr(event, "index", None)
        if isinstance(index, int) and index in self._lost:
            return b""  # (its block was reported lost at its start)
        name = str(type(event).__struct_config__.tag)
        if name == "metadata":
            name = f"metadata:{getattr(event, 'name', '')}"
        elif name == "status":
            name = f"status:{getattr(event, 'status', '')}"
        self.lose(name, event, "a transcription stream has no place for it")
        return b""

    # -- helpers -------------------------------------------------------------------------

    def _own(self, event: Event) -> dict[str, Any] | None:
        """The native fields an event of this dialect keeps (another's: none)."""
        return event.extra if self._native else None

    def _off_block(self, event: Event, index: int, what: str) -> bytes:
        if index not in self._lost:
            self._lost.add(index)
            self.lose(what, event, "outside the transcript block (it was never started)")
        return b""

    def _take_usage(self, usage: Usage) -> None:
        self._usage = self._usage.merged(usage)
        if self._native and usage.raw is not None:
            self._usage_raw = usage.raw

    def _error(self, event: ErrorEvent) -> bytes:
        error = event.error
        if error.kind == "protocol":
            self.lose("error:protocol", event, "a decode error of the source stream")
            return b""
        self._errored = True
        extra = event.extra
        raw = error.raw
        if self._native and isinstance(raw, dict):
            if extra is not None and extra.get("_flat"):
                return write(ERROR, dict(raw), extra)
            return write(ERROR, {"type": ERROR, "error": raw}, extra)
        return write(ERROR, {"type": ERROR, "error": openai_error_object(error)}, None)

    def _finish(self, event: Finish) -> bytes:
        if event.usage is not None:
            self._take_usage(event.usage)
        if self._done:
            return b""
        self._done = True
        if self._errored:
            return b""  # (the error event ended the stream)
        if event.status == "truncated":
            return b""
        if event.status == "failed":
            error = event.error or ErrorInfo(kind="unknown", message="the stream failed")
            return write(ERROR, {"type": ERROR, "error": openai_error_object(error)}, None)
        if event.status == "incomplete":
            self.lose(
                f"finish:{event.reason.unified}",
                event,
                "a transcription ends whole or with an error; written as done",
            )
        end = self._end
        text = end.value if end is not None and isinstance(end.value, str) else "".join(self._texts)
        payload: dict[str, Any] = {"type": DONE, "text": text}
        extra = self._own(end) if end is not None else None
        usage = self._usage_raw if self._native else self._foreign_usage(event)
        if usage is not None:
            payload["usage"] = usage
        return write(DONE, payload, extra)

    def _foreign_usage(self, event: Event) -> dict[str, Any] | None:
        usage = self._usage
        for part in _PARTS:
            if getattr(usage, part):
                self.lose(f"usage.{part}", event, "a transcription's usage has no such count")
        return native_usage(usage)
