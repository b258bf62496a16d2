"""Scenario reply -> unified events, for the media families (speech, transcription,
images).

* Speech: one ``audio`` block, the tone standing for the request's ``input`` in its
  ``response_format``; the usage counts the input's tokens and 25 output tokens a second.
* Transcription: one ``transcript`` block of the reply's text (the default reply's, or the
  scenario's ``text``), cut into deltas as text is. With ``include[]=logprobs`` each delta
  carries its log probabilities (one entry a delta), and so does the end; a diarizing
  request gets the reply's ``segments`` (or one per sentence, by speaker ``A``), each
  delta naming its segment.
* Images: ``n`` ``image`` blocks, each its partial images (the first rows of the final
  PNG drawn, the rest grey) and then the final PNG.

The transcript and image streams carry what only their own dialect has a place for (the
log probabilities, the segment ids, an edit's event names, ``created_at``, the native
usage objects), so they are written as that dialect's own events (``StreamStart.dialect``
is the dialect answered, the native fields in ``extra``), which its encoder writes as they
are. The speech stream is a synthetic one like a text reply's.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from polystream.dialects import DIALECTS
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    TextDelta,
    TranscriptSegment,
    Usage,
    UsageUpdate,
)
from polystream.scenario._format import Chunking, ImageSpec, Reply, SegmentSpec, UsageSpec
from polystream.scenario._media import png
from polystream.scenario._media_blocks import as_audio, as_image, audio_block, audio_tokens, b64
from polystream.scenario._media_request import MediaAsk
from polystream.scenario._reply import SCENARIO_SOURCE, default_reply, split_text
from polystream.scenario._request import RequestSummary

__all__ = ["media_events"]

_STOP: Final = FinishReason(unified="stop")
_SENTENCES: Final = re.compile(r"[^.!?]+[.!?]*")
_WORD_SECONDS: Final = 0.4
_PIXELS_PER_TOKEN: Final = 1000


def _count(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _usage(spec: UsageSpec | None, given: int, made: int, **parts: int | None) -> Usage:
    if spec is not None:
        given = spec.input_tokens if spec.input_tokens is not None else given
        made = spec.output_tokens if spec.output_tokens is not None else made
        total = spec.total_tokens if spec.total_tokens is not None else given + made
        return Usage(input_tokens=given, output_tokens=made, total_tokens=total, **parts)
    return Usage(input_tokens=given, output_tokens=made, total_tokens=given + made, **parts)


def media_events(
    reply: Reply | None,
    summary: RequestSummary,
    *,
    created: int = 0,
    chunking: Chunking | None = None,
) -> list[Event]:
    """Render a reply as the unified events of a speech, transcription or images stream
    (see the module docstring)."""
    media = summary.media
    assert media is not None
    family = DIALECTS[summary.dialect].family
    if family == "speech":
        return _speech(reply or Reply(), summary, media)
    if family == "transcription":
        size = chunking.size if chunking is not None else None
        return _transcription(reply or default_reply(summary), summary, media, size)
    return _images(reply or Reply(), summary, media, created)


def _finish(reply: Reply, usage: Usage) -> Finish:
    finish = reply.finish
    if finish is None:
        return Finish(status="completed", reason=_STOP, usage=usage)
    return Finish(
        status=finish.status,
        reason=FinishReason(unified=finish.reason or "stop", raw=finish.raw),
        usage=usage,
    )


# -- speech ----------------------------------------------------------------------------


def _speech(reply: Reply, summary: RequestSummary, media: MediaAsk) -> list[Event]:
    audio = as_audio(reply.audio) or as_audio(True)
    assert audio is not None
    blocks, seconds = audio_block(
        0,
        audio,
        speak=media.speak,
        audio_format=media.audio_format or "mp3",
        mime_type=media.mime_type or "audio/mpeg",
    )
    # (The speech stream names neither its id nor its model.)
    usage = _usage(reply.usage, _count(media.speak), audio_tokens(seconds))
    return [StreamStart(dialect=SCENARIO_SOURCE), *blocks, _finish(reply, usage)]


# -- transcription ---------------------------------------------------------------------


def _logprobs(delta: str) -> list[dict[str, Any]]:
    """A delta's log probabilities: one entry, a deterministic value."""
    data = delta.encode("utf-8")
    value = -round(0.0001 * (1 + sum(data) % 97), 6)
    return [{"token": delta, "logprob": value, "bytes": list(data)}]


def _segments(reply: Reply, text: str) -> list[SegmentSpec]:
    if reply.segments:
        return list(reply.segments)
    return [SegmentSpec(text=s.strip()) for s in _SENTENCES.findall(text) if s.strip()] or [
        SegmentSpec(text=text)
    ]


def _transcription(
    reply: Reply, summary: RequestSummary, media: MediaAsk, size: int | None
) -> list[Event]:
    events: list[Event] = [
        StreamStart(dialect=summary.dialect),
        BlockStart(index=0, kind="transcript"),
    ]
    pieces: list[str] = []
    every: list[dict[str, Any]] = []
    if media.diarize:
        text = reply.text if isinstance(reply.text, str) else "".join(reply.text or [])
        at = 0.0
        for number, segment in enumerate(_segments(reply, text)):
            seg_id = f"seg_{number}"
            start = segment.start if segment.start is not None else at
            words = max(1, len(segment.text.split()))
            end = segment.end if segment.end is not None else start + words * _WORD_SECONDS
            at = end
            for piece in split_text((" " if pieces else "") + segment.text, size):
                pieces.append(piece)
                events.append(TextDelta(index=0, delta=piece, extra={"segment_id": seg_id}))
            events.append(
                TranscriptSegment(
                    index=0,
                    id=seg_id,
                    start=round(start, 3),
                    end=round(end, 3),
                    speaker=segment.speaker,
                    text=segment.text,
                )
            )
    else:
        deltas = (
            [p for p in reply.text if p]
            if isinstance(reply.text, list)
            else split_text(reply.text or "", size)
        )
        for piece in deltas:
            pieces.append(piece)
            extra = None
            if media.logprobs:
                entries = _logprobs(piece)
                every.extend(entries)
                extra = {"logprobs": entries}
            events.append(TextDelta(index=0, delta=piece, extra=extra))
    text = "".join(pieces)
    heard = max(1, media.upload_size // 1024)  # (one token a KiB of the upload)
    usage = _usage(reply.usage, heard, _count(text) if text else 1, audio_input_tokens=heard)
    raw = {
        "type": "tokens",
        "input_tokens": usage.input_tokens,
        "input_token_details": {"text_tokens": 0, "audio_tokens": heard},
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    usage = Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        audio_input_tokens=heard,
        raw=raw,
    )
    events.append(UsageUpdate(usage=usage))
    events.append(
        BlockEnd(index=0, value=text, extra={"logprobs": every} if media.logprobs else None)
    )
    events.append(_finish(reply, usage))
    return events


# -- images ----------------------------------------------------------------------------


def _images(reply: Reply, summary: RequestSummary, media: MediaAsk, created: int) -> list[Event]:
    spec = as_image(reply.image) or ImageSpec()
    width = spec.width or media.width
    height = spec.height or media.height
    partials = spec.partial_images if spec.partial_images is not None else media.partial_images
    if not summary.stream:
        partials = 0  # (a unary answer holds the final images only)
    operation = media.operation or "generation"
    info = MediaInfo(
        format="png",
        mime_type="image/png",
        size=f"{width}x{height}",
        quality=media.quality,
        background=media.background,
    )
    stamp = {"created_at": created}
    events: list[Event] = [StreamStart(dialect=summary.dialect, created=created)]
    prompt = spec.text if spec.text is not None else summary.user_text
    text_tokens = _count(summary.user_text)
    made = max(1, math.ceil(width * height / _PIXELS_PER_TOKEN))
    total = Usage()
    for number in range(media.count):
        seed = prompt if number == 0 else f"{prompt}\n{number}"
        events.append(
            BlockStart(
                index=number,
                kind="image",
                media=info,
                extra={"operation": operation} if operation != "generation" else None,
            )
        )
        for k in range(partials):
            data = png(seed, width, height, shown=(k + 1) / (partials + 1))
            events.append(
                DataDelta(
                    index=number,
                    delta=b64(data),
                    mime_type="image/png",
                    replace=True,
                    partial=k,
                    extra=stamp,
                )
            )
        final = png(seed, width, height)
        events.append(
            DataDelta(
                index=number, delta=b64(final), mime_type="image/png", replace=True, extra=stamp
            )
        )
        usage = _usage(reply.usage, text_tokens, made)
        raw = {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"image_tokens": 0, "text_tokens": usage.input_tokens},
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }
        usage = Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            raw=raw,
        )
        total = total.merged(usage) if number else usage
        events.append(UsageUpdate(usage=usage))
        events.append(BlockEnd(index=number))
    events.append(_finish(reply, total))
    return events
