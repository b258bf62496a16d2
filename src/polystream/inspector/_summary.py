"""One line saying what a unified event holds, for the inspector's timeline."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    StreamWarning,
    TextDelta,
    ToolInputDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
)

__all__ = ["is_token", "summary"]

_WIDTH: Final = 80
"""Characters of a delta's text a summary shows."""


def is_token(event: Event) -> bool:
    """Whether ``event`` carries output (a non-empty delta or segment)."""
    if isinstance(event, TranscriptSegment):
        return bool(event.text)
    if isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta | DataDelta):
        return bool(event.delta)
    return False


def summary(event: Event) -> str:
    """What ``event`` holds, in one line."""
    if isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta):
        return f"#{event.index} {_clip(event.delta)}"
    if isinstance(event, DataDelta):
        what = f"#{event.index} {len(event.delta)} base64 chars"
        return what + (f" {event.mime_type}" if event.mime_type else "")
    if isinstance(event, SignatureDelta):
        return f"#{event.index} {len(event.delta)} chars"
    if isinstance(event, BlockStart):
        parts = [f"#{event.index}", event.kind]
        if event.name:
            parts.append(event.name)
        if event.id:
            parts.append(f"id={event.id}")
        return " ".join(parts)
    if isinstance(event, BlockEnd):
        return f"#{event.index}" + (f" {event.status}" if event.status else "")
    if isinstance(event, StreamStart):
        parts = [event.dialect]
        if event.id:
            parts.append(f"id={event.id}")
        if event.model:
            parts.append(event.model)
        return " ".join(parts)
    if isinstance(event, UsageUpdate):
        return _usage(event.usage)
    if isinstance(event, Finish):
        reason = event.reason
        return f"{event.status} {reason.unified}" + (f" ({reason.raw})" if reason.raw else "")
    if isinstance(event, ErrorEvent):
        return f"{event.error.kind}: {_clip(event.error.message)}"
    if isinstance(event, StreamWarning):
        return f"{event.code}: {_clip(event.message)}"
    if isinstance(event, KeepAlive):
        if event.name:
            return event.name
        return f": {event.comment}" if event.comment is not None else ""
    if isinstance(event, Metadata):
        return event.name
    if isinstance(event, Citation):
        return _clip(msgspec.json.encode(event.citation).decode())
    if isinstance(event, StatusUpdate):
        return event.status
    if isinstance(event, TranscriptSegment):
        return f"#{event.index} {_clip(event.text)}"
    if isinstance(event, Unknown):
        return event.name or "(unnamed)"
    return ""


def _usage(usage: Usage) -> str:
    counts: list[tuple[str, Any]] = [
        ("in", usage.input_tokens),
        ("out", usage.output_tokens),
        ("reasoning", usage.reasoning_tokens),
        ("cache read", usage.cache_read_tokens),
        ("total", usage.total_tokens),
    ]
    return " ".join(f"{name}={value}" for name, value in counts if value is not None)


def _clip(text: str) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"
