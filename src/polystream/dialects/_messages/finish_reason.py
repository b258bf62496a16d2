"""Stop reasons of the Messages API <-> unified finish reasons.

The table is total: an unknown stop reason maps to ``other`` with the raw value kept
(Anthropic docs, "Handling stop reasons"; the SDK's ``StopReason`` literal, plus the
beta ``compaction`` value).
"""

from __future__ import annotations

from typing import Final

from polystream.events import FinishReason, FinishStatus, UnifiedFinishReason

__all__ = ["KNOWN_STOP_REASONS", "map_stop_reason", "status_for", "stop_reason_for"]

_TABLE: Final[dict[str, tuple[UnifiedFinishReason, FinishStatus]]] = {
    "end_turn": ("stop", "completed"),
    "stop_sequence": ("stop", "completed"),
    "tool_use": ("tool_calls", "completed"),
    "max_tokens": ("length", "incomplete"),
    # "we paused a long-running turn": the reply is to be sent back to continue it.
    "pause_turn": ("pause", "incomplete"),
    # The model refused (docs: "refusal"; streaming classifiers may stop it mid-text).
    # ``completed`` like every dialect's refusal: the reply is whole, and it is a refusal;
    # the unified reason says so.
    "refusal": ("refusal", "completed"),
    "model_context_window_exceeded": ("context_window", "incomplete"),
    # Beta: the turn paused right after a compaction block (pause_after_compaction).
    "compaction": ("pause", "incomplete"),
}

KNOWN_STOP_REASONS: Final = frozenset(_TABLE)
"""Every stop reason the table knows."""

_REVERSE: Final[dict[str, str]] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "refusal": "refusal",
    "pause": "pause_turn",
    "context_window": "model_context_window_exceeded",
    "cancelled": "end_turn",
    "other": "end_turn",
    "error": "end_turn",
}


def map_stop_reason(raw: str | None) -> FinishReason:
    """The unified finish reason for a native ``stop_reason`` (raw kept)."""
    if raw is None:
        return FinishReason(unified="other", raw=None)
    entry = _TABLE.get(raw)
    return FinishReason(unified=entry[0] if entry else "other", raw=raw)


def status_for(raw: str | None) -> FinishStatus:
    """The finish status for a native ``stop_reason`` that ended with ``message_stop``."""
    entry = _TABLE.get(raw) if raw is not None else None
    return entry[1] if entry else "completed"


def stop_reason_for(reason: FinishReason, *, native: bool) -> str:
    """The native ``stop_reason`` to send for a unified reason.

    Args:
        reason: The unified reason.
        native: True when ``reason.raw`` came from a Messages dialect and may be sent as is.
    """
    if native and reason.raw is not None:
        return reason.raw
    return _REVERSE.get(reason.unified, "end_turn")
