"""OpenAI image stream (generation or edit) -> unified events.

========================================  ==========================================================
native                                    unified
========================================  ==========================================================
(the first event)                         StreamStart(created = its ``created_at``)
``image_generation.partial_image``,       BlockStart(kind="image", media) before the image's first
``image_edit.partial_image``              event; DataDelta(b64_json, replace=True,
                                          partial=partial_image_index)
``image_generation.completed``,           DataDelta(b64_json, replace=True) (the final image),
``image_edit.completed``                  UsageUpdate (when it has ``usage``), BlockEnd
``error``                                 ErrorEvent, Finish(failed)
(end of input)                            Finish(completed, stop) after a ``completed`` event;
                                          ``truncated`` without one, or with an image begun after
                                          the last
anything else                             Unknown (a protocol error in strict mode)
========================================  ==========================================================

The block's :class:`~polystream.events.MediaInfo` comes from the image's first event
(``output_format`` as ``format`` and its ``mime_type``, ``size``, ``quality``,
``background``); an event whose value differs keeps its own in ``extra``. The vocabulary is
recorded on the BlockStart: ``extra["operation"] = "edit"`` for ``image_edit.*`` events
(absent for ``image_generation.*``), so the encoder writes the same names back. Each
``completed`` event ends one image; a request for several images (``n``) gives one block
each, so the stream ends at the end of input, not at a ``completed`` event.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.errors import StreamTruncated
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import ServerSentEvent

from .wire import (
    COMPLETED,
    ERROR,
    EVENT_LINES,
    MIME_TYPES,
    PARTIAL,
    PREFIXES,
    convert_usage,
    error_info,
    residuals,
)

__all__ = ["DIALECT", "Decoder"]

DIALECT: Final = "openai_images"

_ANY: Final = msgspec.json.Decoder()
_OPERATIONS: Final = {
    prefix + suffix: (operation, suffix)
    for operation, prefix in PREFIXES.items()
    for suffix in (PARTIAL, COMPLETED)
}
_MEDIA_FIELDS: Final = ("size", "quality", "background", "output_format")


def media_of(payload: dict[str, Any]) -> MediaInfo:
    """The media an image event states (its string fields only)."""

    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) else None

    fmt = text("output_format")
    return MediaInfo(
        format=fmt,
        mime_type=MIME_TYPES.get(fmt, f"image/{fmt}") if fmt is not None else None,
        size=text("size"),
        quality=text("quality"),
        background=text("background"),
    )


class Decoder(FramedDecoder):
    """Decode an OpenAI image stream into unified events.

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
        self._block: int | None = None  # the image block open
        self._media: MediaInfo | None = None
        self._operation: str | None = None  # of the open block
        self._next = 0
        self._completed = 0  # images completed
        self._usage: Usage | None = None

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        data = event.data
        line = event.event is not None
        payload = None if data == "[DONE]" else self.decode_json(data, _ANY)
        if payload is not None and type(payload) is not dict:
            raise self.protocol_error(f"event payload is not a JSON object: {data[:60]!r}")
        if not self._started:
            self._started = True
            created = payload.get("created_at") if payload is not None else None
            out.append(
                StreamStart(
                    dialect=DIALECT,
                    created=created if type(created) is int else None,
                )
            )
        name = payload.get("type") if payload is not None else None
        if payload is None or type(name) is not str:
            self._unknown(event, None, out)
            return
        if line and event.event != name:
            if name in _OPERATIONS or name == ERROR:
                raise self.protocol_error(
                    f"SSE event name {event.event!r} disagrees with the payload's type {name!r}"
                )
            self._unknown(event, name, out)
            return
        known = _OPERATIONS.get(name)
        if known is not None:
            self.raw_event(out, event.event, payload)
            self._image(name, known[0], known[1] == COMPLETED, payload, line, out)
        elif name == ERROR:
            self.raw_event(out, event.event, payload)
            self._error(payload, line, out)
        else:
            self._unknown(event, name, out)

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        if truncation is None and self._completed and self._block is None:
            self.emit_finish(
                out,
                Finish(status="completed", reason=FinishReason(unified="stop"), usage=self._usage),
            )

    # -- events --------------------------------------------------------------------------

    def _image(
        self,
        name: str,
        operation: str,
        completed: bool,
        payload: dict[str, Any],
        line: bool,
        out: list[Event],
    ) -> None:
        b64 = payload.get("b64_json")
        if type(b64) is not str:
            raise self.protocol_error(f"{name}: b64_json is not a string: {b64!r}")
        index = payload.get("partial_image_index")
        if not completed and (type(index) is not int or index < 0):
            raise self.protocol_error(
                f"{name}: partial_image_index is not a non-negative integer: {index!r}"
            )
        raw_usage = payload.get("usage") if completed else None
        if raw_usage is not None and type(raw_usage) is not dict:
            raise self.protocol_error(f"{name}: usage is not an object: {raw_usage!r}")
        for key in _MEDIA_FIELDS:
            value = payload.get(key)
            if value is not None and type(value) is not str:
                raise self.protocol_error(f"{name}: {key} is not a string: {value!r}")
        if self._block is not None and operation != self._operation:
            raise self.protocol_error(f"{name} inside an image_{self._operation} stream")
        if self._block is None:
            self._block = self._next
            self._next += 1
            self._operation = operation
            self._media = media_of(payload)
            out.append(
                BlockStart(
                    index=self._block,
                    kind="image",
                    media=self._media,
                    extra={"operation": operation} if operation != "generation" else None,
                )
            )
        media = self._media
        assert media is not None
        # A media field is modelled when the block's media says the same.
        modelled = ["b64_json"] + [
            key
            for key, said in (
                ("size", media.size),
                ("quality", media.quality),
                ("background", media.background),
                ("output_format", media.format),
            )
            if key in payload and payload[key] == said and said is not None
        ]
        if not completed:
            modelled.append("partial_image_index")
        elif raw_usage is not None:
            modelled.append("usage")
        extra = residuals(name, payload, tuple(modelled), line)
        block = self._block
        out.append(
            DataDelta(
                index=block,
                delta=b64,
                mime_type=media.mime_type,
                replace=True,
                partial=None if completed else index,
                extra=extra,
            )
        )
        if not completed:
            return
        if raw_usage is not None:
            usage = convert_usage(raw_usage)
            self._usage = usage if self._usage is None else self._usage.merged(usage)
            out.append(UsageUpdate(usage=usage))
        out.append(BlockEnd(index=block))
        self._block = None
        self._completed += 1

    def _error(self, payload: dict[str, Any], line: bool, out: list[Event]) -> None:
        info = error_info(payload, output_started=self._next > 0)
        info = msgspec.structs.replace(info, dialect=DIALECT, event_index=self.frame_index)
        nested = type(payload.get("error")) is dict
        extra = residuals(ERROR, payload, ("error",) if nested else tuple(payload), line)
        if not nested:
            extra = {**(extra or {}), "_flat": True}
        self._gave_error = True
        out.append(ErrorEvent(error=info, extra=extra))
        self.emit_finish(
            out,
            Finish(status="failed", reason=FinishReason(unified="error"), error=info),
        )

    def _unknown(self, event: ServerSentEvent, name: str | None, out: list[Event]) -> None:
        if self.strict:
            raise self.protocol_error(f"unknown event {event.event or name or event.data[:40]!r}")
        # (With an ``event:`` line, the name is the line's.)
        line = event.event is not None
        extra = {"_event": line} if line != EVENT_LINES else None
        out.append(Unknown(name=event.event or name, data=event.data, extra=extra))
