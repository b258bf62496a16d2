"""Realtime finish reasons: ``response.status`` and ``status_details.reason``.

The table is total: a value it does not list maps to ``other``, the raw value kept.
Sources: openai-python ``RealtimeResponse.status`` (``completed``, ``cancelled``,
``failed``, ``incomplete``, ``in_progress``) and ``RealtimeResponseStatus.reason``
(``turn_detected``, ``client_cancelled``, ``max_output_tokens``, ``content_filter``);
the ``openai.realtime.response_status`` and ``openai.realtime.status_reason`` surfaces
of the event catalog.
"""

from __future__ import annotations

from typing import Final

from polystream.events import FinishReason, FinishStatus, UnifiedFinishReason

__all__ = ["FINISH_REASONS", "STATUSES", "finish_of"]

FINISH_REASONS: Final[dict[str, UnifiedFinishReason]] = {
    "completed": "stop",
    "cancelled": "cancelled",
    "failed": "error",
    "incomplete": "other",
    "in_progress": "other",
    "turn_detected": "cancelled",  # the user spoke: server VAD cut the reply
    "client_cancelled": "cancelled",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
"""Status or reason -> unified reason."""

STATUSES: Final[dict[str, FinishStatus]] = {
    "completed": "completed",
    "cancelled": "incomplete",
    "incomplete": "incomplete",
    "failed": "failed",
}
"""``response.status`` -> unified finish status (any other value: ``incomplete``)."""


def finish_of(
    status: str | None, reason: str | None, *, tool_calls: bool
) -> tuple[FinishStatus, FinishReason]:
    """The finish status and reason of a ``response.done``: the reason is the stated
    ``status_details.reason``, else the status; a completed response that called
    functions finishes with ``tool_calls``."""
    raw = reason if reason is not None else status
    unified = FINISH_REASONS.get(raw, "other") if raw is not None else "other"
    if raw == "completed" and tool_calls:
        unified = "tool_calls"
    return STATUSES.get(status or "", "incomplete"), FinishReason(unified=unified, raw=raw)
