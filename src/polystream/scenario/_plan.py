"""Unified events -> wire frames -> a timed, faulted delivery plan.

:func:`render_frames` runs a dialect encoder over the events and cuts its output into
*frames*, one per wire event (an SSE event, or a JSON-array element), each with the
provider's resume cursor when it has one (OpenAI/xAI ``sequence_number``, Interactions
``event_id``). An in-band error fault is injected here, in unified terms (an
``ErrorEvent`` and a failed ``Finish``), so every dialect renders it its own way.

:func:`plan_delivery` turns frames into :class:`Chunk` s, each with the time (seconds
after the response headers) at which the shell sends it: timing, keep-alive comments,
odd chunk boundaries (split UTF-8, CR at a chunk end, small chunks) and dropped
connections are decided here, so the shell only sleeps and writes.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from polystream.dialects import DIALECTS, DialectEncoder, Loss, get_dialect
from polystream.events import (
    RETRYABLE_KINDS,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
)
from polystream.scenario._format import Faults, InBandError, Timing
from polystream.wire.jsonarray import JSONArrayEncoder
from polystream.wire.sse import ServerSentEvent, SSEDecoder

__all__ = [
    "KEEPALIVE",
    "RESUMABLE",
    "Chunk",
    "DeliveryPlan",
    "Frame",
    "frames_after",
    "plan_delivery",
    "render_frames",
    "schedule",
]

RESUMABLE: Final = frozenset(name for name, spec in DIALECTS.items() if spec.retrievable)
"""Dialects whose events carry a resume cursor the emulator honours (those with a
``resume`` route)."""

KEEPALIVE: Final = b": keep-alive\n\n"
"""The keep-alive comment (WHATWG SSE: a line starting with a colon is ignored)."""

_decode_json: Final = msgspec.json.Decoder()


class Frame(msgspec.Struct, frozen=True, kw_only=True):
    """One wire event as encoded.

    Fields:
        data: Its bytes (for SSE, up to and including the blank line).
        cursor: The provider's resume cursor, when the dialect has one.
    """

    data: bytes
    cursor: int | str | None = None


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """Bytes to send at a time.

    Fields:
        at: Seconds after the response headers.
        data: The bytes, sent in one write.
    """

    at: float
    data: bytes


class DeliveryPlan(msgspec.Struct, kw_only=True):
    """How a streamed answer leaves the server.

    Fields:
        chunks: What to send, in order, each at its time.
        drop: True: after the last chunk, drop the connection (no clean end).
        frames: How many wire events the plan holds (complete or cut).
    """

    chunks: list[Chunk]
    drop: bool = False
    frames: int = 0


def _make_encoder(dialect: str, framing: str | None) -> tuple[DialectEncoder, bool]:
    """The dialect's encoder, and whether its output must be re-framed as a JSON array
    (an encoder that speaks only SSE)."""
    info = get_dialect(dialect)
    if framing is None or framing == info.framings[0]:
        return info.encoder(), False
    try:
        return info.encoder(framing=framing), False
    except TypeError:
        return info.encoder(), framing == "json_array"


def _split_sse(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Cut complete SSE events (ending in a blank line) off the front of ``buffer``."""
    out: list[bytes] = []
    start = 0
    while True:
        lf = buffer.find(b"\n\n", start)
        crlf = buffer.find(b"\r\n\r\n", start)
        ends = [e + 2 for e in (lf,) if e >= 0] + [e + 4 for e in (crlf,) if e >= 0]
        if not ends:
            return out, buffer[start:]
        end = min(ends)
        out.append(buffer[start:end])
        start = end


def _cursor(frame: bytes) -> int | str | None:
    """The resume cursor of an SSE frame: ``sequence_number`` (OpenAI/xAI) or
    ``event_id`` (Interactions) in its JSON data, else its ``id:`` field."""
    decoder = SSEDecoder()
    events = [e for e in decoder.feed(frame) + decoder.close() if type(e) is ServerSentEvent]
    if not events:
        return None
    event = events[0]
    try:
        data = _decode_json.decode(event.data)
    except msgspec.DecodeError:
        data = None
    if isinstance(data, dict):
        for key in ("sequence_number", "event_id"):
            value = data.get(key)
            if isinstance(value, int | str) and not isinstance(value, bool):
                return value
    return event.id or None


def render_frames(
    dialect: str,
    events: list[Event],
    *,
    framing: str | None = None,
    error: InBandError | None = None,
    terminal: bool = True,
    losses: list[Loss] | None = None,
) -> list[Frame]:
    """Encode a stream and cut it into wire events.

    Args:
        dialect: The target dialect.
        events: Its unified events (``StreamStart`` ... ``Finish``).
        framing: ``sse``, ``json_array`` (``gemini_generate``) or ``raw`` (speech: each
            encoder write is a frame); None: the default.
        error: Inject this in-band error once at least ``error.after`` wire events
            were produced (never before the ``StreamStart``).
        terminal: False: leave out the ``Finish`` and the encoder's closing bytes
            (the "missing terminal event" fault).
        losses: When given, receives what the encoder could not carry (its loss report).

    Returns:
        The frames, in order.
    """
    encoder, reframe = _make_encoder(dialect, framing)
    sse = encoder.content_type == "text/event-stream" and framing not in ("json_array", "raw")
    frames: list[Frame] = []
    pending = b""
    resumable = dialect in RESUMABLE

    def push(data: bytes) -> None:
        nonlocal pending
        if not data:
            return
        if not sse and not reframe:
            frames.append(Frame(data=data))
            return
        pending += data
        complete, pending = _split_sse(pending)
        frames.extend(Frame(data=f, cursor=_cursor(f) if resumable else None) for f in complete)

    for event in events:
        if isinstance(event, Finish) and not terminal:
            break
        push(encoder.encode(event))
        if error is not None and not isinstance(event, Finish) and len(frames) >= error.after:
            info = ErrorInfo(
                kind=error.kind,
                message=error.message,
                retryable=error.kind in RETRYABLE_KINDS,
                code=error.code,
            )
            push(encoder.encode(ErrorEvent(error=info)))
            if terminal:
                push(
                    encoder.encode(
                        Finish(status="failed", reason=FinishReason(unified="error"), error=info)
                    )
                )
            break
    if terminal:
        push(encoder.close())
    if pending:
        frames.append(Frame(data=pending))
    if losses is not None:
        losses.extend(encoder.losses)
    if reframe:
        return _as_json_array(frames, terminal=terminal)
    return frames


def _as_json_array(frames: list[Frame], *, terminal: bool) -> list[Frame]:
    """Re-frame SSE ``data:`` payloads as a streamed JSON array (Gemini's default)."""
    array = JSONArrayEncoder()
    out: list[Frame] = []
    for frame in frames:
        decoder = SSEDecoder()
        for event in decoder.feed(frame.data) + decoder.close():
            if type(event) is ServerSentEvent:
                out.append(Frame(data=array.element(event.data.encode())))
    if terminal:
        out.append(Frame(data=array.close()))
    return out


def frames_after(frames: list[Frame], cursor: int | str | None) -> list[Frame] | None:
    """The frames after ``cursor`` (OpenAI ``starting_after``: sequence numbers greater
    than it; Interactions ``last_event_id``: the frames after the one with that id).

    Returns None when ``cursor`` is a string id that no frame has.
    """
    if cursor is None:
        return list(frames)
    if isinstance(cursor, int):
        return [f for f in frames if not (isinstance(f.cursor, int) and f.cursor <= cursor)]
    for position, frame in enumerate(frames):
        if frame.cursor is not None and str(frame.cursor) == cursor:
            return frames[position + 1 :]
    return None


def schedule(count: int, timing: Timing) -> list[float]:
    """Send times (seconds after the headers) of ``count`` wire events."""
    speed = timing.speed
    times: list[float] = []
    recorded = timing.recorded or []
    at = 0.0
    for position in range(count):
        if position < len(recorded):
            at = recorded[position] / speed
        elif position == 0:
            at = timing.first_event / speed
        else:
            at += timing.delay / speed
        times.append(at)
    return times


def _line_ends(data: bytes, mode: Literal["lf", "crlf", "cr"]) -> bytes:
    if mode == "lf":
        return data
    normal = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return normal.replace(b"\n", b"\r\n" if mode == "crlf" else b"\r")


def _cut_points(data: bytes, faults: Faults) -> list[int]:
    """Offsets inside a frame where a chunk boundary goes."""
    points: set[int] = set()
    if faults.split_utf8:
        # Cut after the lead byte of the first multi-byte character (0b11xxxxxx), so
        # that no chunk holds a whole character: decoders must buffer bytes, not text.
        for position, byte in enumerate(data):
            if byte >= 0xC0:
                points.add(position + 1)
                break
    if faults.cr_at_chunk_end:
        # A chunk that ends in CR, with its LF in the next chunk: the classic bug of
        # line splitters that treat a lone CR as a complete line end (WHATWG SSE §9.2.6).
        position = data.find(b"\r\n")
        while position >= 0:
            points.add(position + 1)
            position = data.find(b"\r\n", position + 2)
    if faults.chunk_size is not None:
        points.update(range(faults.chunk_size, len(data), faults.chunk_size))
    return sorted(p for p in points if 0 < p < len(data))


def plan_delivery(
    frames: list[Frame], *, timing: Timing, faults: Faults, sse: bool
) -> DeliveryPlan:
    """Decide what leaves the server, and when.

    Args:
        frames: The wire events (see :func:`render_frames`).
        timing: When events leave.
        faults: Which transport faults to apply (keep-alive, chunk boundaries, line
            ends, dropped connection). HTTP errors and in-band errors are decided
            elsewhere.
        sse: True for SSE framing (line ends and keep-alive comments apply only there).
    """
    datas = [f.data for f in frames]
    drop = False
    if faults.drop_at_event is not None and faults.drop_at_event < len(datas):
        datas = datas[: faults.drop_at_event]
        drop = True
    keepalive = KEEPALIVE
    if sse and faults.line_endings != "lf":
        datas = [_line_ends(d, faults.line_endings) for d in datas]
        keepalive = _line_ends(KEEPALIVE, faults.line_endings)
    times = schedule(len(datas), timing)
    chunks: list[Chunk] = []
    last = 0.0
    interval = faults.keepalive if sse else None
    for at, data in zip(times, datas, strict=True):
        if interval is not None:
            while last + interval < at:
                last += interval
                chunks.append(Chunk(at=last, data=keepalive))
        start = 0
        for point in [*_cut_points(data, faults), len(data)]:
            chunks.append(Chunk(at=at, data=data[start:point]))
            start = point
        last = at
    if faults.drop_at_byte is not None:
        kept: list[Chunk] = []
        budget = faults.drop_at_byte
        for chunk in chunks:
            if budget <= 0:
                drop = True
                break
            if len(chunk.data) > budget:
                kept.append(Chunk(at=chunk.at, data=chunk.data[:budget]))
                drop = True
                break
            kept.append(chunk)
            budget -= len(chunk.data)
        chunks = kept
    return DeliveryPlan(chunks=chunks, drop=drop, frames=len(datas))
