"""Responses usage -> canonical :class:`~polystream.events.Usage`, and back.

Arithmetic (OpenAI ``ResponseUsage``):

* ``input_tokens`` already includes ``input_tokens_details.cached_tokens`` (cache
  reads) and ``cache_write_tokens``: canonical input = ``input_tokens``.
* ``output_tokens`` already includes ``output_tokens_details.reasoning_tokens``:
  canonical output = ``output_tokens``.
* ``total_tokens`` is kept as stated.

xAI (quirk ``reasoning_maybe_excluded``): xAI may count reasoning tokens apart, so that
``total_tokens == input_tokens + output_tokens + reasoning_tokens``. When the stated
total shows exactly that (and differs from ``input + output``), canonical output is
``output_tokens + reasoning_tokens``. ``cost_in_usd_ticks``,
``server_side_tool_usage_details`` and the other xAI extras stay in ``raw``.
"""

from __future__ import annotations

from typing import Any

from polystream.events import Usage

__all__ = ["from_usage", "to_usage"]


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def to_usage(raw: Any, *, reasoning_maybe_excluded: bool = False) -> Usage | None:
    """Canonical usage from a Responses ``usage`` object (None when absent)."""
    if not isinstance(raw, dict):
        return None
    inp = _int(raw.get("input_tokens"))
    out = _int(raw.get("output_tokens"))
    total = _int(raw.get("total_tokens"))
    details_in = raw.get("input_tokens_details")
    details_out = raw.get("output_tokens_details")
    cached = _int(details_in.get("cached_tokens")) if isinstance(details_in, dict) else None
    written = _int(details_in.get("cache_write_tokens")) if isinstance(details_in, dict) else None
    audio_in = _int(details_in.get("audio_tokens")) if isinstance(details_in, dict) else None
    reasoning = _int(details_out.get("reasoning_tokens")) if isinstance(details_out, dict) else None
    audio_out = _int(details_out.get("audio_tokens")) if isinstance(details_out, dict) else None
    if (
        reasoning_maybe_excluded
        and reasoning
        and inp is not None
        and out is not None
        and total is not None
        and total == inp + out + reasoning
    ):
        out += reasoning
    if total is None and inp is not None and out is not None:
        total = inp + out
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        reasoning_tokens=reasoning,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        audio_input_tokens=audio_in,
        audio_output_tokens=audio_out,
        total_tokens=total,
        raw=raw,
    )


def from_usage(usage: Usage, *, native: bool) -> dict[str, Any]:
    """A Responses ``usage`` object for a canonical usage.

    ``native``: the usage was decoded from the same dialect, so its ``raw`` object is
    written back unchanged.
    """
    if native and isinstance(usage.raw, dict):
        return usage.raw
    inp = usage.input_tokens or 0
    out = usage.output_tokens or 0
    details_in: dict[str, Any] = {"cached_tokens": usage.cache_read_tokens or 0}
    if usage.cache_write_tokens is not None:
        details_in["cache_write_tokens"] = usage.cache_write_tokens
    return {
        "input_tokens": inp,
        "input_tokens_details": details_in,
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": usage.total_tokens if usage.total_tokens is not None else inp + out,
    }
