"""Responses finish reasons: ``response.status`` and ``incomplete_details.reason``.

The table is total: a value it does not list maps to ``other`` and the raw value is
kept. Sources: OpenAI ``Response.incomplete_details.reason``
(``max_output_tokens``, ``content_filter``, ``max_messages``, ``steered``), xAI
``incomplete_details.reason`` (``max_output_tokens``, ``max_prompt_tokens``,
``max_time_limit``; spec/streaming.md section 4) and ``Response.status``.
"""

from __future__ import annotations

from typing import Final

from polystream.events import FinishReason, UnifiedFinishReason

__all__ = ["FINISH_REASONS", "map_finish_reason", "to_incomplete_reason"]

FINISH_REASONS: Final[dict[str, UnifiedFinishReason]] = {
    # response.status
    "completed": "stop",
    "failed": "error",
    "cancelled": "cancelled",
    "incomplete": "other",  # incomplete without a stated reason
    # incomplete_details.reason
    "max_output_tokens": "length",
    "content_filter": "content_filter",
    "max_prompt_tokens": "context_window",  # xAI: the prompt exceeded the limit
    "max_time_limit": "other",  # xAI: the request ran out of time
    "max_messages": "other",
    "steered": "other",
}
"""Provider value -> unified reason."""

_TO_INCOMPLETE: Final[dict[str, str]] = {
    "length": "max_output_tokens",
    "content_filter": "content_filter",
    "context_window": "max_prompt_tokens",
}


def map_finish_reason(
    raw: str | None, *, tool_calls: bool = False, refusal: bool = False
) -> FinishReason:
    """Map a status or incomplete reason to a :class:`FinishReason` (raw kept).

    A ``completed`` response that asked for client tool calls finishes with
    ``tool_calls``; one whose only answer is a refusal with ``refusal``.
    """
    unified = FINISH_REASONS.get(raw, "other") if raw is not None else "other"
    if raw == "completed":
        if tool_calls:
            unified = "tool_calls"
        elif refusal:
            unified = "refusal"
    return FinishReason(unified=unified, raw=raw)


def to_incomplete_reason(reason: FinishReason) -> str | None:
    """The ``incomplete_details.reason`` for a unified reason (encoding foreign streams)."""
    if reason.raw in FINISH_REASONS and reason.raw not in ("completed", "failed", "incomplete"):
        return reason.raw
    return _TO_INCOMPLETE.get(reason.unified)
