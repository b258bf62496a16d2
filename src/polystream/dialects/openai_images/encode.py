"""Unified events -> OpenAI image stream SSE.

A stream of this dialect is written back byte for byte (the native fields each event keeps
in ``extra``, their order, the ``event:`` line flag and the vocabulary recorded on each
image block). Another dialect's stream is written from its ``image`` blocks, in the
generation vocabulary:

* a ``DataDelta`` with ``partial`` set -> ``image_generation.partial_image``;
* the block's final data (a ``DataDelta`` without ``partial``; appended pieces joined) ->
  ``image_generation.completed``, written when the next image starts or at ``Finish``,
  with the usage so far; its ``size``, ``quality``, ``background`` and ``output_format``
  from the block's ``MediaInfo`` (``auto`` and the media type's format where unstated),
  ``created_at`` from ``StreamStart.created`` (0 when unstated);
* ``ErrorEvent`` -> ``error``; a ``failed`` finish without one -> ``error``.

Reported with :meth:`~polystream.dialects._base.DialectEncoder.lose`: every block that is
not an image (text, reasoning, tool calls, audio, transcripts: each once, at its start),
an image block without a final image (completed with its last partial image, or empty), a
completed stream without any image (completed empty, so that it ends whole, with its
usage), the held image of a ``truncated`` stream (writing it would make the stream look
whole), an ``incomplete`` finish, everything after an error, status updates, metadata,
citations, signatures, named keep-alives, another dialect's unknown events, tolerated
decode errors, token counts the usage object has no field for.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._base import DialectEncoder
from polystream.dialects._errors import openai_error_object
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    KeepAlive,
    MediaInfo,
    Raw,
    StreamStart,
    StreamWarning,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import SSEEncoder

from .decode import DIALECT
from .wire import COMPLETED, ERROR, EVENT_LINES, PARTIAL, PREFIXES, native_usage, write

__all__ = ["Encoder"]

_SSE: Final = SSEEncoder()
_PARTS: Final = (
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "tool_prompt_tokens",
    "audio_input_tokens",
    "audio_output_tokens",
)


class _Image:
    """One image block being written."""

    __slots__ = (
        "ended",
        "final",
        "final_extra",
        "index",
        "last_partial",
        "media",
        "prefix",
        "start",
    )

    def __init__(self, start: BlockStart, native: bool) -> None:
        self.start = start
        self.index = start.index
        self.media = start.media or MediaInfo()
        operation = (start.extra or {}).get("operation", "generation") if native else "generation"
        self.prefix = PREFIXES.get(str(operation), PREFIXES["generation"])
        self.final: list[str] = []
        self.final_extra: dict[str, Any] | None = None
        self.last_partial: str | None = None
        self.ended = False


class Encoder(DialectEncoder):
    """Encode unified events as an OpenAI image stream (see the module docstring)."""

    dialect = DIALECT

    def __init__(self) -> None:
        super().__init__()
        self._native = False
        self._created = 0
        self._image: _Image | None = None
        self._lost: set[int] = set()
        self._usage = Usage()
        self._usage_raw: Any = None
        self._errored = False
        self._done = False
        self._wrote_image = False

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates only go into the ``completed`` event (see
        :meth:`DialectEncoder.folds_usage`)."""
        return source != DIALECT

    def _encode(self, event: Event) -> bytes:
        kind = type(event)
        if (self._errored or self._done) and kind not in (Finish, StreamWarning, Raw):
            # An error event ends the stream: a reader takes nothing after it.
            self.lose(str(type(event).__struct_config__.tag), event, "after the stream's error")
            return b""
        if kind is DataDelta:
            assert isinstance(event, DataDelta)
            return self._data(event)
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._native = event.dialect == DIALECT
            self._created = event.created or 0
            return b""
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.kind != "image":
                self._lost.add(event.index)
                self.lose(f"block:{event.kind}", event, "an images stream holds images only")
                return b""
            head = self._flush(event)
            self._image = _Image(event, self._native)
            return head
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            image = self._image
            if image is not None and event.index == image.index:
                image.ended = True
                if not image.final and isinstance(event.value, str):
                    image.final = [event.value]
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
            self.lose("keep-alive", event, "an images stream has no named keep-alive")
            return b""
        if kind is Unknown:
            assert isinstance(event, Unknown)
            if self._native:
                line = bool((event.extra or {}).get("_event", EVENT_LINES))
                name = event.name if line else None
                return _SSE.event(event.data, event=name)
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
        self.lose(name, event, "an images stream has no place for it")
        return b""

    # -- images --------------------------------------------------------------------------

    def _media_fields(self, image: _Image) -> dict[str, Any]:
        media = image.media
        fmt = media.format
        if fmt is None and media.mime_type is not None and media.mime_type.startswith("image/"):
            fmt = media.mime_type[6:]
        fields: dict[str, Any] = {}
        if not self._native:
            fields["created_at"] = self._created
        for key, value in (
            ("size", media.size),
            ("quality", media.quality),
            ("background", media.background),
            ("output_format", fmt),
        ):
            if value is not None:
                fields[key] = value
            elif not self._native:
                fields[key] = "png" if key == "output_format" else "auto"
        return fields

    def _data(self, event: DataDelta) -> bytes:
        image = self._image
        if image is None or event.index != image.index or image.ended:
            if event.index not in self._lost:
                self._lost.add(event.index)
                self.lose("data", event, "outside an open image block")
            return b""
        if event.partial is None:
            if event.replace or not image.final:
                image.final = [event.delta]
            else:
                image.final.append(event.delta)
            image.final_extra = event.extra if self._native else None
            return b""
        image.last_partial = event.delta
        name = image.prefix + PARTIAL
        payload: dict[str, Any] = {"type": name, "b64_json": event.delta}
        payload.update(self._media_fields(image))
        payload["partial_image_index"] = event.partial
        self._wrote_image = True
        return write(name, payload, event.extra if self._native else None)

    def _flush(self, event: Event) -> bytes:
        """Write the held final image of the block before (at the next image or Finish)."""
        image = self._image
        if image is None:
            return b""
        self._image = None
        if not image.final:
            if image.last_partial is not None:
                image.final = [image.last_partial]
                self.lose("image", event, "no final image: the last partial image completes it")
            else:
                image.final = [""]
                self.lose("image", event, "the image block has no data: completed empty")
        return self._completed(image, event)

    def _completed(self, image: _Image, event: Event) -> bytes:
        name = image.prefix + COMPLETED
        payload: dict[str, Any] = {"type": name, "b64_json": "".join(image.final)}
        payload.update(self._media_fields(image))
        usage = self._usage_raw if self._native else self._foreign_usage(event)
        if usage is not None:
            payload["usage"] = usage
        self._usage_raw = None
        self._wrote_image = True
        return write(name, payload, image.final_extra)

    def _take_usage(self, usage: Usage) -> None:
        self._usage = self._usage.merged(usage)
        if self._native and usage.raw is not None:
            self._usage_raw = usage.raw

    def _foreign_usage(self, event: Event) -> dict[str, Any] | None:
        usage = self._usage
        for part in _PARTS:
            if getattr(usage, part):
                self.lose(f"usage.{part}", event, "an image's usage has no such count")
        return native_usage(usage)

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
            self._image = None
            return b""  # (the error event ended the stream)
        if event.status == "truncated":
            if self._image is not None and self._image.final:
                self.lose(
                    "image", event, "the source was cut off: its image is not written as whole"
                )
            self._image = None
            return b""
        if event.status == "failed":
            self._image = None
            error = event.error or ErrorInfo(kind="unknown", message="the stream failed")
            return write(ERROR, {"type": ERROR, "error": openai_error_object(error)}, None)
        if event.status == "incomplete":
            self.lose(
                f"finish:{event.reason.unified}",
                event,
                "an image stream ends whole or with an error; its image is written as completed",
            )
        data = self._flush(event)
        if not self._wrote_image:
            # The source completed without an image: an empty one ends the stream whole
            # (with its usage), as the source did.
            self.lose("image", event, "the source has no image: completed empty")
            empty = _Image(BlockStart(index=-1, kind="image"), False)
            empty.final = [""]
            data += self._completed(empty, event)
        return data
