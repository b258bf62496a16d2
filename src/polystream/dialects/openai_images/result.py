"""The final images response, rebuilt from the unified events.

What ``POST /v1/images/generations`` (or ``/edits``) returns without streaming, the
``ImagesResponse``: ``{"created", "data": [{"b64_json"}], "background", "output_format",
"quality", "size", "usage"?}``. ``created`` is the last ``completed`` event's
``created_at`` (else ``StreamStart.created``); the media fields are the last image's; each
image block with final data (a ``DataDelta`` without ``partial``) is one entry of ``data``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.events import (
    BlockStart,
    DataDelta,
    Event,
    MediaInfo,
    StreamStart,
    Usage,
    UsageUpdate,
)

from .wire import native_usage

__all__ = ["rebuild"]


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The images response of a stream's unified events (see the module docstring)."""
    created: Any = None
    media: dict[int, MediaInfo] = {}
    finals: dict[int, str] = {}
    last: dict[str, Any] = {}
    usage = Usage()
    raw: Any = None
    for event in events:
        kind = type(event)
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            created = event.created
        elif kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.kind == "image":
                media[event.index] = event.media or MediaInfo()
        elif kind is DataDelta:
            assert isinstance(event, DataDelta)
            if event.index in media and event.partial is None:
                previous = finals.get(event.index, "")
                finals[event.index] = event.delta if event.replace else previous + event.delta
                info = media[event.index]
                extra = event.extra or {}
                last = {
                    "background": extra.get("background", info.background),
                    "output_format": extra.get("output_format", info.format),
                    "quality": extra.get("quality", info.quality),
                    "size": extra.get("size", info.size),
                }
                if isinstance(extra.get("created_at"), int):
                    created = extra["created_at"]
        elif kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            usage = usage.merged(event.usage)
            if isinstance(event.usage.raw, dict):
                raw = event.usage.raw
    out: dict[str, Any] = {
        "created": created if created is not None else 0,
        "data": [{"b64_json": finals[index]} for index in sorted(finals)],
    }
    out.update({k: v for k, v in last.items() if v is not None})
    usage_obj = raw if raw is not None else native_usage(usage)
    if usage_obj is not None:
        out["usage"] = usage_obj
    return out
