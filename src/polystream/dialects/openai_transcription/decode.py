"""OpenAI transcription SSE -> unified events.

==========================  ====================================================================
native                      unified
==========================  ====================================================================
(the first event)           StreamStart (the stream names no id nor model)
``transcript.text.delta``   BlockStart(kind="transcript") before the first; TextDelta
                            (``logprobs``, ``segment_id`` in ``extra``)
``transcript.text.segment`` TranscriptSegment(id, start, end, speaker, text)
``transcript.text.done``    UsageUpdate (when it has ``usage``), BlockEnd(value=text;
                            ``logprobs``, ``languages`` in ``extra``), Finish(completed, stop)
``error``                   ErrorEvent, Finish(failed)
anything else               Unknown (a protocol error in strict mode)
==========================  ====================================================================

A stream that ends without ``transcript.text.done`` (nor ``error``) is ``truncated``. Every
native field an event does not model stays in its ``extra`` (see :mod:`.wire`), so that the
encoder writes the event back byte for byte.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    StreamStart,
    TextDelta,
    TranscriptSegment,
    Unknown,
    UsageUpdate,
)
from polystream.wire.sse import ServerSentEvent

from .wire import DELTA, DONE, ERROR, SEGMENT, convert_usage, error_info, residuals

__all__ = ["DIALECT", "Decoder"]

DIALECT: Final = "openai_transcription"
BLOCK: Final = 0
"""The transcript block's unified index (a stream transcribes one audio file)."""

_ANY: Final = msgspec.json.Decoder()


def _string(value: Any) -> bool:
    return type(value) is str


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Decoder(FramedDecoder):
    """Decode an OpenAI transcription stream into unified events.

    Args:
        strict: Raise typed protocol errors (unknown events included) instead of emitting
            ErrorEvent / Unknown and continuing.
        keep_raw: Emit a Raw event before the unified events of each native event.

    Feed bytes with :meth:`feed` in any chunking, then :meth:`close`; the last event is
    always the one Finish.
    """

    dialect = DIALECT

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._started = False
        self._opened = False
        self._output = False  # text or a segment has arrived (an error is then not retryable)

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        if not self._started:
            self._started = True
            out.append(StreamStart(dialect=DIALECT))
        data = event.data
        line = event.event is not None
        if data == "[DONE]":
            self._unknown(event, None, out)
            return
        payload = self.decode_json(data, _ANY)
        if type(payload) is not dict:
            raise self.protocol_error(f"event payload is not a JSON object: {data[:60]!r}")
        name = payload.get("type")
        if type(name) is not str:
            self._unknown(event, None, out)
            return
        if line and event.event != name:
            if name in (DELTA, SEGMENT, DONE, ERROR):
                raise self.protocol_error(
                    f"SSE event name {event.event!r} disagrees with the payload's type {name!r}"
                )
            self._unknown(event, name, out)
            return
        self.raw_event(out, event.event, payload)
        if name == DELTA:
            self._delta(payload, line, out)
        elif name == SEGMENT:
            self._segment(payload, line, out)
        elif name == DONE:
            self._done(payload, line, out)
        elif name == ERROR:
            self._error(payload, line, out)
        else:
            self._unknown(event, name, out)

    # -- events --------------------------------------------------------------------------

    def _open(self, out: list[Event]) -> None:
        if not self._opened:
            self._opened = True
            out.append(BlockStart(index=BLOCK, kind="transcript"))

    def _field(self, payload: dict[str, Any], key: str, check: Any, what: str) -> Any:
        """A modelled field: its value when of the right type, None when absent or null
        (a null stays in ``extra``); any other value is a protocol error."""
        value = payload.get(key)
        if value is None:
            return None
        if not check(value):
            raise self.protocol_error(f"{payload.get('type')}: {key} is not {what}: {value!r}")
        return value

    def _delta(self, payload: dict[str, Any], line: bool, out: list[Event]) -> None:
        delta = payload.get("delta")
        if type(delta) is not str:
            raise self.protocol_error(f"{DELTA}: delta is not a string: {delta!r}")
        self._open(out)
        self._output = True
        extra = residuals(DELTA, payload, ("delta",), line)
        out.append(TextDelta(index=BLOCK, delta=delta, extra=extra))

    def _segment(self, payload: dict[str, Any], line: bool, out: list[Event]) -> None:
        text = payload.get("text")
        if type(text) is not str:
            raise self.protocol_error(f"{SEGMENT}: text is not a string: {text!r}")
        sid = self._field(payload, "id", _string, "a string")
        speaker = self._field(payload, "speaker", _string, "a string")
        start = self._field(payload, "start", _number, "a number")
        end = self._field(payload, "end", _number, "a number")
        fields = {"text": text, "id": sid, "speaker": speaker, "start": start, "end": end}
        modelled = tuple(k for k, v in fields.items() if v is not None)
        self._open(out)
        self._output = True
        out.append(
            TranscriptSegment(
                index=BLOCK,
                text=text,
                id=sid,
                speaker=speaker,
                start=start,
                end=end,
                extra=residuals(SEGMENT, payload, modelled, line),
            )
        )

    def _done(self, payload: dict[str, Any], line: bool, out: list[Event]) -> None:
        text = payload.get("text")
        if type(text) is not str:
            raise self.protocol_error(f"{DONE}: text is not a string: {text!r}")
        raw_usage = payload.get("usage")
        if raw_usage is not None and type(raw_usage) is not dict:
            raise self.protocol_error(f"{DONE}: usage is not an object: {raw_usage!r}")
        self._open(out)
        usage = None
        if raw_usage is not None:
            usage = convert_usage(raw_usage)
            out.append(UsageUpdate(usage=usage))
        modelled = ("text", "usage") if raw_usage is not None else ("text",)
        out.append(
            BlockEnd(index=BLOCK, value=text, extra=residuals(DONE, payload, modelled, line))
        )
        self.emit_finish(
            out,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop"),
                usage=usage,
            ),
        )

    def _error(self, payload: dict[str, Any], line: bool, out: list[Event]) -> None:
        info = error_info(payload, output_started=self._output)
        info = msgspec.structs.replace(info, dialect=DIALECT, event_index=self.frame_index)
        nested = type(payload.get("error")) is dict
        extra = residuals(ERROR, payload, ("error",) if nested else tuple(payload), line)
        if not nested:
            extra = {**(extra or {}), "_flat": True}
        self._gave_error = True
        out.append(ErrorEvent(error=info, extra=extra))
        self.emit_finish(
            out,
            Finish(
                status="failed",
                reason=FinishReason(unified="error"),
                error=info,
            ),
        )

    def _unknown(self, event: ServerSentEvent, name: str | None, out: list[Event]) -> None:
        if self.strict:
            raise self.protocol_error(f"unknown event {event.event or name or event.data[:40]!r}")
        # (With an ``event:`` line, the name is the line's; the API writes none.)
        extra = {"_event": True} if event.event is not None else None
        out.append(Unknown(name=event.event or name, data=event.data, extra=extra))
