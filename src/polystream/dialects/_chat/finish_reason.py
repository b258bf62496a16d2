"""Chat ``finish_reason`` <-> unified finish reason and stream status: total tables.

OpenAI API reference (``ChatCompletionChunk.choices[].finish_reason``): ``stop``,
``length``, ``tool_calls``, ``content_filter``, ``function_call`` (deprecated). Any
other value (a compatible server's own word) maps to ``other`` with the raw value kept.
"""

from __future__ import annotations

from typing import Final

from polystream.events import FinishReason, FinishStatus, UnifiedFinishReason

__all__ = ["is_known_finish_reason", "map_finish_reason", "to_wire_finish_reason"]

_TABLE: Final[dict[str, tuple[UnifiedFinishReason, FinishStatus]]] = {
    "stop": ("stop", "completed"),
    "length": ("length", "incomplete"),
    "tool_calls": ("tool_calls", "completed"),
    "content_filter": ("content_filter", "incomplete"),
    # Deprecated functions API: the model asked for a function, like tool_calls.
    "function_call": ("tool_calls", "completed"),
    # OpenRouter: a mid-stream error ends the choice (with an "error" object on the chunk).
    "error": ("error", "failed"),
}

_BACK: Final[dict[UnifiedFinishReason, str]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    # Chat has no word for these; "stop" is what a client can act on (the turn ended),
    # and "content_filter" is the closest for a refusal that was filtered.
    "refusal": "stop",
    "pause": "stop",
    "context_window": "length",
    "error": "stop",
    "cancelled": "stop",
    "other": "stop",
}


def is_known_finish_reason(raw: object) -> bool:
    """Whether ``raw`` is in the table (strict mode rejects the others)."""
    return isinstance(raw, str) and raw in _TABLE


def map_finish_reason(raw: str | None) -> tuple[FinishReason, FinishStatus]:
    """Map a chunk's ``finish_reason`` to the unified reason and the stream status.

    ``None`` (a ``[DONE]`` without any finish_reason) is ``other``/``completed``;
    unknown values are ``other``/``completed`` with ``raw`` kept.
    """
    if raw is None:
        return FinishReason(unified="other", raw=None), "completed"
    unified, status = _TABLE.get(raw, ("other", "completed"))
    return FinishReason(unified=unified, raw=raw), status


def to_wire_finish_reason(reason: FinishReason) -> str:
    """The ``finish_reason`` to write for a unified reason (the raw value when it is a
    Chat value, else the closest Chat word)."""
    if reason.raw is not None and reason.raw in _TABLE:
        return reason.raw
    return _BACK.get(reason.unified, "stop")
