"""The final transcription object, rebuilt from the unified events.

What ``POST /v1/audio/transcriptions`` returns without streaming:

* ``Transcription`` (``response_format`` ``json``): ``{"text", "logprobs"?, "languages"?,
  "usage"?}``;
* ``TranscriptionDiarized`` (``diarized_json``, when the stream had segments):
  ``{"task": "transcribe", "duration", "text", "segments": [{"type":
  "transcript.text.segment", "id", "start", "end", "speaker", "text"}], "usage"?}``.
  The stream does not state the duration: it is the usage's ``seconds`` for a duration
  usage, else the end of the last segment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.events import (
    BlockEnd,
    BlockStart,
    Event,
    TextDelta,
    TranscriptSegment,
    Usage,
    UsageUpdate,
)

from .wire import SEGMENT, native_usage

__all__ = ["rebuild"]


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The transcription object of a stream's unified events (see the module docstring)."""
    block: int | None = None
    texts: list[str] = []
    end: BlockEnd | None = None
    segments: list[TranscriptSegment] = []
    usage = Usage()
    raw: Any = None
    for event in events:
        kind = type(event)
        if kind is BlockStart and block is None:
            assert isinstance(event, BlockStart)
            if event.kind == "transcript":
                block = event.index
        elif kind is TextDelta:
            assert isinstance(event, TextDelta)
            if event.index == block:
                texts.append(event.delta)
        elif kind is TranscriptSegment:
            assert isinstance(event, TranscriptSegment)
            if event.index == block:
                segments.append(event)
        elif kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            if event.index == block:
                end = event
        elif kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            usage = usage.merged(event.usage)
            if isinstance(event.usage.raw, dict) and event.usage.raw.get("type") in (
                "tokens",
                "duration",
            ):
                raw = event.usage.raw
    text = end.value if end is not None and isinstance(end.value, str) else "".join(texts)
    usage_obj = raw if raw is not None else native_usage(usage)
    extra = (end.extra or {}) if end is not None else {}
    if segments:
        duration: Any = None
        if isinstance(raw, dict) and raw.get("type") == "duration":
            duration = raw.get("seconds")
        if duration is None:
            duration = max((s.end for s in segments if s.end is not None), default=0.0)
        out: dict[str, Any] = {
            "task": "transcribe",
            "duration": duration,
            "text": text,
            "segments": [_segment(s) for s in segments],
        }
    else:
        out = {"text": text}
        for key in ("logprobs", "languages"):
            if key in extra:
                out[key] = extra[key]
    if usage_obj is not None:
        out["usage"] = usage_obj
    return out


def _segment(segment: TranscriptSegment) -> dict[str, Any]:
    out: dict[str, Any] = {"type": SEGMENT}
    for key, value in (
        ("id", segment.id),
        ("start", segment.start),
        ("end", segment.end),
        ("speaker", segment.speaker),
        ("text", segment.text),
    ):
        if value is not None:
            out[key] = value
    return out
