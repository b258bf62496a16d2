"""Gemini ``finishReason`` <-> unified finish reason and stream status (a total table).

Every value of the catalog surface ``gemini.generate.finish_reason`` (21 values, from
google-genai ``types.FinishReason`` plus the REST/Vertex-only ``MISSING_THOUGHT_SIGNATURE``,
``MALFORMED_RESPONSE`` and ``MODEL_ARMOR``) has a row. An unknown value maps to
``other`` / ``incomplete`` and is kept as ``raw``.

``STOP`` on a candidate that asked for function calls maps to ``tool_calls`` (Gemini
says ``STOP`` either way; the raw value stays ``STOP``).

Rows whose status is ``failed`` also name the :data:`~polystream.events.ErrorKind`
of the error the Finish carries: ``MALFORMED_FUNCTION_CALL`` and ``MALFORMED_RESPONSE``
are generation failures worth retrying (``server``), ``UNEXPECTED_TOOL_CALL`` and
``MISSING_THOUGHT_SIGNATURE`` are faults of the request (``invalid_request``).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from polystream.events import (
    ErrorKind,
    FinishReason,
    FinishStatus,
    UnifiedFinishReason,
)

__all__ = ["FINISH_REASONS", "FinishRow", "map_finish_reason", "to_gemini_finish_reason"]


class FinishRow(NamedTuple):
    """One row of the table: unified reason, stream status, error kind when failed."""

    unified: UnifiedFinishReason
    status: FinishStatus
    error: ErrorKind | None = None


FINISH_REASONS: Final[dict[str, FinishRow]] = {
    "FINISH_REASON_UNSPECIFIED": FinishRow("other", "incomplete"),
    "STOP": FinishRow("stop", "completed"),
    "MAX_TOKENS": FinishRow("length", "incomplete"),
    "SAFETY": FinishRow("content_filter", "incomplete"),
    "RECITATION": FinishRow("content_filter", "incomplete"),
    "LANGUAGE": FinishRow("other", "incomplete"),
    "OTHER": FinishRow("other", "incomplete"),
    "BLOCKLIST": FinishRow("content_filter", "incomplete"),
    "PROHIBITED_CONTENT": FinishRow("content_filter", "incomplete"),
    "SPII": FinishRow("content_filter", "incomplete"),
    "MALFORMED_FUNCTION_CALL": FinishRow("error", "failed", "server"),
    "IMAGE_SAFETY": FinishRow("content_filter", "incomplete"),
    "UNEXPECTED_TOOL_CALL": FinishRow("error", "failed", "invalid_request"),
    "TOO_MANY_TOOL_CALLS": FinishRow("other", "incomplete"),
    "IMAGE_PROHIBITED_CONTENT": FinishRow("content_filter", "incomplete"),
    "NO_IMAGE": FinishRow("other", "incomplete"),
    "IMAGE_RECITATION": FinishRow("content_filter", "incomplete"),
    "IMAGE_OTHER": FinishRow("other", "incomplete"),
    "MISSING_THOUGHT_SIGNATURE": FinishRow("error", "failed", "invalid_request"),
    "MALFORMED_RESPONSE": FinishRow("error", "failed", "server"),
    "MODEL_ARMOR": FinishRow("content_filter", "incomplete"),
}
"""Every known ``finishReason``."""

_UNKNOWN: Final = FinishRow("other", "incomplete")


def map_finish_reason(raw: str, *, tool_calls: bool = False) -> tuple[FinishReason, FinishRow]:
    """Map a Gemini ``finishReason``.

    Args:
        raw: The value as sent.
        tool_calls: The candidate asked for function calls (``STOP`` -> ``tool_calls``).

    Returns:
        The unified reason (with ``raw`` kept) and the table row (status, error kind).
    """
    row = FINISH_REASONS.get(raw, _UNKNOWN)
    unified = row.unified
    if tool_calls and raw == "STOP":
        unified = "tool_calls"
    return FinishReason(unified=unified, raw=raw), row


_REVERSE: Final[dict[str, str]] = {
    "stop": "STOP",
    "tool_calls": "STOP",  # Gemini ends a function-calling turn with STOP
    "length": "MAX_TOKENS",
    "context_window": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "refusal": "STOP",  # a refusal is ordinary text on Gemini
    "pause": "OTHER",
    "error": "OTHER",
    "cancelled": "OTHER",
    "other": "OTHER",
}


def to_gemini_finish_reason(reason: FinishReason) -> str:
    """The ``finishReason`` to write for a unified reason (the raw value when it is
    already a Gemini value)."""
    if reason.raw is not None and reason.raw in FINISH_REASONS:
        return reason.raw
    return _REVERSE.get(reason.unified, "OTHER")
