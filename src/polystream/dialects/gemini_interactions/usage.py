"""Interactions usage -> canonical :class:`~polystream.events.Usage`, and back.

The Interactions ``Usage`` object (SDK ``google/genai/_gaos/types/interactions/usage.py``)
reports ``total_input_tokens``, ``total_output_tokens``, ``total_thought_tokens``,
``total_cached_tokens``, ``total_tool_use_tokens``, ``total_tokens`` and per-modality
lists (``input_tokens_by_modality``, ``output_tokens_by_modality``, ...).

Arithmetic (as for ``generateContent``, whose ``candidatesTokenCount`` excludes
``thoughtsTokenCount`` and whose ``promptTokenCount`` excludes
``toolUsePromptTokenCount`` but includes ``cachedContentTokenCount``):

* ``input_tokens = total_input_tokens + total_tool_use_tokens``
* ``output_tokens = total_output_tokens + total_thought_tokens``
* ``reasoning_tokens = total_thought_tokens``
* ``cache_read_tokens = total_cached_tokens`` (already inside ``total_input_tokens``)
* ``tool_prompt_tokens = total_tool_use_tokens``
* ``audio_input_tokens`` / ``audio_output_tokens``: the ``audio`` entry of
  ``input_tokens_by_modality`` / ``output_tokens_by_modality``
* ``total_tokens = total_tokens`` when stated, else ``input_tokens + output_tokens``.

Cache writes are not reported by this API (``cache_write_tokens`` stays None).
"""

from __future__ import annotations

from typing import Any

from polystream.events import Usage

__all__ = ["convert_usage", "usage_to_native"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _modality(entries: Any, modality: str) -> int | None:
    if not isinstance(entries, list):
        return None
    found: int | None = None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("modality") == modality:
            tokens = _int(entry.get("tokens"))
            if tokens is not None:
                found = (found or 0) + tokens
    return found


def _add(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


def convert_usage(raw: Any) -> Usage:
    """Convert an Interactions ``usage`` object (see the module docstring).

    Args:
        raw: The ``usage`` mapping as sent (anything else gives an empty Usage).

    Returns:
        The canonical usage with ``raw`` set to the object as sent.
    """
    if not isinstance(raw, dict):
        return Usage(raw=raw)
    prompt = _int(raw.get("total_input_tokens"))
    tool = _int(raw.get("total_tool_use_tokens"))
    output = _int(raw.get("total_output_tokens"))
    thought = _int(raw.get("total_thought_tokens"))
    input_tokens = _add(prompt, tool)
    output_tokens = _add(output, thought)
    total = _int(raw.get("total_tokens"))
    if total is None and (input_tokens is not None or output_tokens is not None):
        total = (input_tokens or 0) + (output_tokens or 0)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=thought,
        cache_read_tokens=_int(raw.get("total_cached_tokens")),
        tool_prompt_tokens=tool,
        audio_input_tokens=_modality(raw.get("input_tokens_by_modality"), "audio"),
        audio_output_tokens=_modality(raw.get("output_tokens_by_modality"), "audio"),
        total_tokens=total,
        raw=raw,
    )


def usage_to_native(usage: Usage) -> tuple[dict[str, Any], list[str]]:
    """The Interactions ``usage`` object for a canonical usage (the inverse arithmetic).

    Returns:
        ``(usage object, names of counts it cannot carry)``.
    """
    out: dict[str, Any] = {}
    tool = usage.tool_prompt_tokens or 0
    thought = usage.reasoning_tokens or 0
    if usage.input_tokens is not None:
        out["total_input_tokens"] = max(usage.input_tokens - tool, 0)
    if usage.output_tokens is not None:
        out["total_output_tokens"] = max(usage.output_tokens - thought, 0)
    if usage.reasoning_tokens is not None:
        out["total_thought_tokens"] = usage.reasoning_tokens
    if usage.cache_read_tokens is not None:
        out["total_cached_tokens"] = usage.cache_read_tokens
    if usage.tool_prompt_tokens is not None:
        out["total_tool_use_tokens"] = usage.tool_prompt_tokens
    if usage.total_tokens is not None:
        out["total_tokens"] = usage.total_tokens
    if usage.audio_input_tokens is not None:
        out["input_tokens_by_modality"] = [
            {"modality": "audio", "tokens": usage.audio_input_tokens}
        ]
    if usage.audio_output_tokens is not None:
        out["output_tokens_by_modality"] = [
            {"modality": "audio", "tokens": usage.audio_output_tokens}
        ]
    lost = ["cache_write_tokens"] if usage.cache_write_tokens else []
    return out, lost
