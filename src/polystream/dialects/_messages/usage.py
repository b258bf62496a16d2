"""Messages usage <-> canonical :class:`~polystream.events.Usage`.

The arithmetic (Anthropic docs, "Prompt caching": "total input tokens is the summation
of ``input_tokens``, ``cache_creation_input_tokens`` and ``cache_read_input_tokens``"):

* Anthropic ``input_tokens`` EXCLUDES cache reads and cache writes, so
  canonical ``input_tokens = input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens``; ``cache_read_tokens`` and ``cache_write_tokens`` are
  those two counts (parts of the canonical input).
* ``output_tokens`` is every generated token, thinking included; ``reasoning_tokens`` is
  ``output_tokens_details.thinking_tokens`` when the API reports it.
* ``total_tokens = input + output`` (Anthropic states no total).

Usage arrives twice: in ``message_start`` (input counts, a first output count) and as
*cumulative* totals in ``message_delta`` (docs: "the token counts in the usage field of
the message_delta event are cumulative"). A ``message_delta`` usage normally names only
``output_tokens``, but may now restate the input and cache counts; counts it omits (or
sends as null) keep their ``message_start`` value, exactly as the SDK's accumulator does.
"""

from __future__ import annotations

from typing import Any

from polystream.events import Usage

__all__ = ["from_usage", "merge_native", "to_usage"]


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def merge_native(total: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Fold a cumulative ``message_delta`` usage into the usage so far (a new dict)."""
    merged = dict(total)
    for key, value in update.items():
        if value is not None:
            merged[key] = value
    return merged


def to_usage(cumulative: dict[str, Any], raw: Any) -> Usage:
    """Canonical usage from the cumulative native usage.

    Args:
        cumulative: The native usage so far (``message_start`` merged with every
            ``message_delta``).
        raw: The usage object exactly as this event sent it (kept in ``Usage.raw``).
    """
    base = _int(cumulative.get("input_tokens"))
    cache_read = _int(cumulative.get("cache_read_input_tokens"))
    cache_write = _int(cumulative.get("cache_creation_input_tokens"))
    output = _int(cumulative.get("output_tokens"))
    details = cumulative.get("output_tokens_details")
    reasoning = _int(details.get("thinking_tokens")) if isinstance(details, dict) else None
    total_input = None if base is None else base + (cache_read or 0) + (cache_write or 0)
    total = None if total_input is None or output is None else total_input + output
    return Usage(
        input_tokens=total_input,
        output_tokens=output,
        reasoning_tokens=reasoning,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        total_tokens=total,
        raw=raw,
    )


def from_usage(usage: Usage | None) -> dict[str, Any]:
    """Native usage for a canonical usage from another dialect (the inverse arithmetic).

    ``input_tokens`` becomes the uncached part again; missing counts become 0, because
    the SDK's ``Usage`` requires ``input_tokens`` and ``output_tokens``.
    """
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    cache_read = usage.cache_read_tokens
    cache_write = usage.cache_write_tokens
    uncached = max((usage.input_tokens or 0) - (cache_read or 0) - (cache_write or 0), 0)
    out: dict[str, Any] = {"input_tokens": uncached}
    if cache_write is not None:
        out["cache_creation_input_tokens"] = cache_write
    if cache_read is not None:
        out["cache_read_input_tokens"] = cache_read
    out["output_tokens"] = usage.output_tokens or 0
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out
