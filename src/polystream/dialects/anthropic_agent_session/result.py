"""The session's events as the list endpoint returns them
(``GET /v1/sessions/{id}/events``: ``{"data": [...], "next_page": ...}``), rebuilt from
the unified events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from polystream.events import Event
from polystream.wire.sse import ServerSentEvent, SSEDecoder

from .encode import Encoder
from .wire import decode_any

__all__ = ["rebuild"]

_NOT_HISTORY: Final = frozenset({"event_start", "event_delta", "ping", "error"})
"""Stream events the history never holds: the previews (``event_start`` /
``event_delta``: "never appears in event history"), keep-alives and API errors."""


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The page of session events the list endpoint returns for the stream's events:
    every native event in order but the previews, ``next_page`` null."""
    encoder = Encoder()
    data = encoder.encode_all(events)
    frames = SSEDecoder(max_event_size=len(data) + 1, max_line_size=len(data) + 1)
    out: list[Any] = []
    for frame in frames.feed(data) + frames.close():
        if type(frame) is not ServerSentEvent or frame.event in _NOT_HISTORY:
            continue
        value = decode_any(frame.data)
        if isinstance(value, dict):
            out.append(value)
    return {"data": out, "next_page": None}
