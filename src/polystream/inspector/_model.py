"""The inspector's page data for one capture: what the decoder makes of its bytes.

:func:`build_capture` decodes a capture (the raw wire bytes of any dialect, as
``polystream decode`` reads them) and returns plain JSON values: the native events with
the byte range each came from, the unified events they became, a timeline, the rebuilt
result, the warnings and errors with their byte offsets, the provider's own final
object, the audio and images ready for a page, and a preview of the stream transcoded to
other dialects with each one's loss report.

Byte offsets come from decoding the capture in pieces cut where its frames (SSE events
and comments, JSON-array elements) begin: every decoder gives the same events however
its input is cut, so the pieces change nothing but tell which frame each event came
from. A capture given as timed chunks (``(seconds, bytes)`` pairs: a live stream read
from the gateway's journal) also dates each event: the time its frame's last byte
arrived.
"""

from __future__ import annotations

import base64
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from polystream.accumulate import Result
from polystream.decoding import StreamDecoder
from polystream.dialects import DIALECTS, get_dialect
from polystream.errors import PolystreamError, RemoteProtocolError
from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    Raw,
    StreamWarning,
    Unknown,
    event_to_builtins,
)
from polystream.inspector._summary import is_token, summary
from polystream.wire.framing import sniff_framing
from polystream.wire.jsonarray import JSONArrayDecoder
from polystream.wire.sse import SSEDecoder

__all__ = ["EXCERPT_BYTES", "PREVIEW_CHARS", "TimedChunk", "build_capture"]

TimedChunk = tuple[float, bytes]
"""A piece of a capture and when it arrived (seconds from the time origin)."""

PREVIEW_CHARS: Final = 256 * 1024
"""How much of a transcoded stream's wire text the page holds (its size is given in
full; the rest is cut)."""

_FRAME_STEP: Final = 64 * 1024
"""Bytes framed at a time while looking for frame starts."""

EXCERPT_BYTES: Final = 400
"""The most of the wire bytes at a problem's offset its ``excerpt`` shows (up to the
end of the frame there)."""


def build_capture(
    capture: bytes | Sequence[TimedChunk],
    *,
    name: str = "capture",
    dialect: str = "auto",
    framing: str = "auto",
    content_type: str | None = None,
    strict: bool = False,
    targets: Sequence[str] | None = None,
    preview_chars: int = PREVIEW_CHARS,
    time_origin: str = "request",
) -> dict[str, Any]:
    """Decode one capture into the inspector's page data (plain JSON values).

    Args:
        capture: The wire bytes, or timed chunks ``(seconds, bytes)`` in order.
        name: What the page calls it (a file name).
        dialect: A dialect name or ``"auto"``.
        framing: As for :class:`~polystream.StreamDecoder`.
        content_type: The response's ``Content-Type``, when known.
        strict: Decode strictly (the first anomaly stops decoding, as ``fatal``).
        targets: The dialects to preview the stream in (default: every dialect; an
            empty list: none).
        preview_chars: How much of each transcoded stream's text to keep.
        time_origin: What the chunks' seconds count from (``request`` or
            ``first_event``), for the page to say.

    Returns:
        A dict; docs/inspect.md describes its keys.
    """
    if isinstance(capture, bytes | bytearray | memoryview):
        data = bytes(capture)
        times: list[float] | None = None
        ends: list[int] = []
    else:
        data = b"".join(bytes(chunk) for _, chunk in capture)
        times = []
        ends = []
        pos = 0
        for seconds, chunk in capture:
            pos += len(chunk)
            times.append(float(seconds))
            ends.append(pos)
    options: dict[str, Any] = {"keep_raw": True, "keep_events": True, "strict": strict}
    if framing != "auto":
        options["framing"] = framing
    if content_type:
        options["content_type"] = content_type
    decoder = StreamDecoder(dialect, **options)

    native: list[dict[str, Any]] = []
    events: list[Event] = []
    rows: list[dict[str, Any]] = []
    fatal: dict[str, Any] | None = None

    def arrived(end: int) -> float | None:
        """When the byte before ``end`` arrived (None for an untimed capture)."""
        if times is None or not times:
            return None
        at = bisect_left(ends, max(end, 1))
        return times[min(at, len(times) - 1)]

    def take(got: list[Event], start: int, end: int) -> None:
        when = arrived(end)
        owner: int | None = None
        for event in got:
            if type(event) is Raw:
                owner = len(native)
                native.append(
                    {
                        "index": owner,
                        "name": event.name,
                        "data": event.data,
                        "offset": start,
                        "end": end,
                        "time": when,
                        "events": [],
                    }
                )
                continue
            index = len(events)
            events.append(event)
            if owner is not None:
                native[owner]["events"].append(index)
            rows.append(_row(index, event, owner, start, end, when))

    bounds = _frame_starts(data)
    start = 0
    try:
        for cut in [*bounds, len(data)]:
            if cut > start:
                take(decoder.feed(data[start:cut]), start, cut)
                start = cut
        take(decoder.close(), len(data), len(data))
    except PolystreamError as exc:
        fatal = _fatal(exc, start)
    result = decoder.result()
    return {
        "name": name,
        "bytes": len(data),
        "dialect": decoder.dialect,
        "framing": _framing_of(decoder),
        "timed": times is not None,
        "time_origin": time_origin if times is not None else None,
        "complete": fatal is None,
        "fatal": fatal,
        "native": native,
        "events": [_event_json(event) for event in events],
        "timeline": rows,
        "stats": _stats(rows, native, result, len(data)),
        "result": result.to_dict(),
        "media": _media(result),
        "problems": _excerpts(_problems(events, rows, fatal), data, bounds),
        "native_final": _native_final(decoder, fatal),
        "transcodes": _transcodes(events, decoder.dialect, targets, preview_chars),
    }


# -- decoding in pieces ---------------------------------------------------------------------


def _frame_starts(data: bytes) -> list[int]:
    """Where the capture's frames begin, as far as its framing reads (SSE events and
    comments, or JSON-array elements): the cuts that make each piece one frame."""
    framer: SSEDecoder | JSONArrayDecoder
    framer = JSONArrayDecoder() if sniff_framing(data) == "json_array" else SSEDecoder()
    starts: list[int] = []
    try:
        for pos in range(0, len(data), _FRAME_STEP):
            starts.extend(frame.offset for frame in framer.feed(data[pos : pos + _FRAME_STEP]))
        starts.extend(frame.offset for frame in framer.close())
    except PolystreamError:
        pass  # (the rest of the capture is one piece)
    size = len(data)
    return sorted({offset for offset in starts if 0 < offset < size})


def _framing_of(decoder: StreamDecoder) -> str | None:
    inner = decoder.dialect_decoder
    framing = getattr(inner, "framing", None)
    return framing if isinstance(framing, str) else None


def _fatal(exc: PolystreamError, start: int) -> dict[str, Any]:
    """A decoding error that stopped the capture's decoding (strict mode, a framing
    error, no dialect detected)."""
    offset = start
    event_index = None
    if isinstance(exc, RemoteProtocolError):
        if exc.byte_offset is not None:
            offset = exc.byte_offset
        event_index = exc.event_index
    return {
        "error": type(exc).__name__,
        "message": getattr(exc, "message", None) or str(exc),
        "byte_offset": offset,
        "event_index": event_index,
    }


# -- events and the timeline -------------------------------------------------------------------


def _event_json(event: Event) -> dict[str, Any]:
    return event_to_builtins(event)


def _row(
    index: int, event: Event, native: int | None, start: int, end: int, when: float | None
) -> dict[str, Any]:
    return {
        "event": index,
        "type": event_to_type(event),
        "block": getattr(event, "index", None),
        "summary": summary(event),
        "token": is_token(event),
        "native": native,
        "offset": start,
        "end": end,
        "time": when,
    }


def event_to_type(event: Event) -> str:
    """An event's ``type`` tag."""
    tag = type(event).__struct_config__.tag
    return tag if isinstance(tag, str) else type(event).__name__


def _stats(
    rows: list[dict[str, Any]], native: list[dict[str, Any]], result: Result, size: int
) -> dict[str, Any]:
    """The timeline's figures: time to the first token, the span of the tokens, the
    output tokens per second, the longest gap between two events (timed captures);
    gaps are also written into the rows."""
    first: dict[str, Any] | None = None
    last_token: dict[str, Any] | None = None
    longest: dict[str, Any] | None = None
    previous: float | None = None
    for row in rows:
        when = row["time"]
        gap = None if when is None or previous is None else round(when - previous, 6)
        row["gap"] = gap
        if gap is not None and (longest is None or gap > longest["seconds"]):
            longest = {"after_event": row["event"] - 1, "event": row["event"], "seconds": gap}
        if when is not None:
            previous = when
        if row["token"]:
            if first is None:
                first = row
            last_token = row
    output = result.usage.output_tokens
    rate = None
    span = None
    if first is not None and last_token is not None:
        t0, t1 = first["time"], last_token["time"]
        if t0 is not None and t1 is not None:
            span = round(t1 - t0, 6)
            if output and span > 0:
                rate = round(output / span, 3)
    times = [row["time"] for row in rows if row["time"] is not None]
    return {
        "bytes": size,
        "events": len(rows),
        "native_events": len(native),
        "first_token": None
        if first is None
        else {"event": first["event"], "offset": first["offset"], "time": first["time"]},
        "duration": times[-1] if times else None,
        "token_span": span,
        "output_tokens": output,
        "tokens_per_second": rate,
        "longest_gap": longest,
    }


# -- problems ----------------------------------------------------------------------------------


def _problems(
    events: list[Event], rows: list[dict[str, Any]], fatal: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Every error and warning of the capture, with its byte offset: the errors the
    stream carried or the decoder emitted, the decoder's warnings, the unknown native
    events, a Finish's error that no error event reported, and a fatal decoding
    error."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for event, row in zip(events, rows, strict=True):
        if isinstance(event, ErrorEvent):
            error = event.error
            seen.add((error.kind, error.message))
            out.append(_problem(error, row))
        elif isinstance(event, StreamWarning):
            offset = event.byte_offset if event.byte_offset is not None else row["offset"]
            out.append(
                {
                    "severity": "warning",
                    "code": event.code,
                    "message": event.message,
                    "byte_offset": offset,
                    "event_index": event.event_index,
                    "event": row["event"],
                }
            )
        elif isinstance(event, Unknown):
            out.append(
                {
                    "severity": "warning",
                    "code": "unknown_event",
                    "message": f"unknown native event {event.name or '(unnamed)'}",
                    "byte_offset": row["offset"],
                    "event_index": None,
                    "event": row["event"],
                }
            )
        elif (
            isinstance(event, Finish)
            and event.error is not None
            and (event.error.kind, event.error.message) not in seen
        ):
            out.append(_problem(event.error, row))
    if fatal is not None:
        out.append(
            {
                "severity": "fatal",
                "code": fatal["error"],
                "message": fatal["message"],
                "byte_offset": fatal["byte_offset"],
                "event_index": fatal["event_index"],
                "event": None,
            }
        )
    return out


def _problem(error: ErrorInfo, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "severity": "error",
        "code": error.kind,
        "message": error.message,
        "byte_offset": error.byte_offset if error.byte_offset is not None else row["offset"],
        "event_index": error.event_index,
        "event": row["event"],
    }


def _excerpts(
    problems: list[dict[str, Any]], data: bytes, bounds: list[int]
) -> list[dict[str, Any]]:
    """Each problem with the wire bytes at its offset (to the end of the frame there,
    at most :data:`EXCERPT_BYTES`), as text."""
    for problem in problems:
        offset = problem["byte_offset"]
        if offset is None or not 0 <= offset < len(data):
            problem["excerpt"] = None
            continue
        at = bisect_left(bounds, offset + 1)
        end = bounds[at] if at < len(bounds) else len(data)
        piece = data[offset : min(end, offset + EXCERPT_BYTES)]
        problem["excerpt"] = piece.decode("utf-8", errors="replace")
    return problems


# -- the result's media, the native final object, the transcoding preview ----------------------


def _media(result: Result) -> dict[str, Any]:
    """The audio (a WAV or the audio file itself, as a data URL an ``<audio>`` element
    plays) and the images (data URLs)."""
    audio: dict[str, Any] | None = None
    if result.audio is not None:
        clip = result.audio
        src: str | None = None
        note: str | None = None
        if clip.format in ("wav", "pcm") and (clip.format == "wav" or clip.sample_rate):
            src = _data_url("audio/wav", clip.wav())
        elif clip.format == "pcm":
            note = "PCM audio without a sample rate: not playable"
        elif clip.data:
            media = (clip.mime_type or f"audio/{clip.format or 'mpeg'}").split(";")[0]
            src = _data_url(media, clip.data)
        audio = {
            "src": src,
            "note": note,
            "format": clip.format,
            "mime_type": clip.mime_type,
            "sample_rate": clip.sample_rate,
            "channels": clip.channels,
            "bytes": len(clip.data),
            "duration": clip.duration,
            "complete": clip.complete,
        }
    images = [
        {
            "index": image.index,
            "src": _data_url(image.mime_type or f"image/{image.format or 'png'}", image.data)
            if image.data
            else None,
            "mime_type": image.mime_type,
            "size": image.size,
            "final": image.final,
            "partial_images": image.partial_images,
            "bytes": len(image.data),
            "error": image.error,
        }
        for image in result.images
    ]
    return {"audio": audio, "images": images}


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _native_final(decoder: StreamDecoder, fatal: dict[str, Any] | None) -> dict[str, Any]:
    """The provider's own final object, as its non-streaming endpoint returns it."""
    if decoder.dialect is None:
        return {"object": None, "error": "no dialect was detected"}
    try:
        return {"object": decoder.native(), "error": None}
    except Exception as exc:  # a rebuild of a broken stream: say why, show the rest
        return {"object": None, "error": f"{type(exc).__name__}: {exc}"}


def _transcodes(
    events: list[Event], source: str | None, targets: Sequence[str] | None, limit: int
) -> list[dict[str, Any]]:
    """The stream encoded as each target dialect: its wire text (cut at ``limit``
    characters) and what the target could not carry."""
    if source is None:
        return []
    out: list[dict[str, Any]] = []
    for target in DIALECTS if targets is None else targets:
        entry: dict[str, Any] = {"target": target, "same": target == source}
        try:
            encoder = get_dialect(target).encoder()
            wire = encoder.encode_all(events)
        except PolystreamError as exc:
            entry.update(error=f"{type(exc).__name__}: {exc}", losses=[], bytes=0, text="")
            entry.update(content_type=None, truncated=False, binary=False)
            out.append(entry)
            continue
        try:
            text = wire.decode("utf-8")
            binary = False
        except UnicodeDecodeError:
            text = base64.b64encode(wire).decode("ascii")
            binary = True
        entry.update(
            error=None,
            content_type=encoder.content_type,
            bytes=len(wire),
            binary=binary,
            text=text[:limit],
            truncated=len(text) > limit,
            losses=msgspec.to_builtins(encoder.losses),
        )
        out.append(entry)
    return out
