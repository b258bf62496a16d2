"""xAI Responses wire names and codec (shared: :mod:`polystream.dialects._responses.wire`)."""

from __future__ import annotations

from polystream.dialects._responses.wire import (
    DECODER,
    ENCODER,
    ITEM_KINDS,
    LIFECYCLE,
    STATUS_EVENTS,
    TERMINAL,
    encode_payload,
)

__all__ = [
    "DECODER",
    "ENCODER",
    "ITEM_KINDS",
    "LIFECYCLE",
    "STATUS_EVENTS",
    "TERMINAL",
    "encode_payload",
]
