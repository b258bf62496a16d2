"""Gemini ``usageMetadata`` <-> canonical :class:`~polystream.events.Usage`.

The arithmetic (Gemini counts thoughts and tool-use prompts *beside* the prompt and
candidate counts, and ``totalTokenCount`` is their sum):

* ``input_tokens  = promptTokenCount + toolUsePromptTokenCount``
* ``output_tokens = candidatesTokenCount + thoughtsTokenCount`` (thought tokens are
  never lost from the output count: pain point "Gemini thoughtsTokenCount is separate")
* ``total_tokens  = totalTokenCount`` as stated
* ``reasoning_tokens = thoughtsTokenCount``; ``cache_read_tokens =
  cachedContentTokenCount`` (already part of ``promptTokenCount``);
  ``tool_prompt_tokens = toolUsePromptTokenCount``
* ``audio_input_tokens`` / ``audio_output_tokens``: the ``AUDIO`` entries of
  ``promptTokensDetails`` / ``candidatesTokensDetails``.

A sum is reported only when at least one of its terms is; missing terms count 0.
``raw`` is the ``usageMetadata`` object exactly as sent. Every chunk carries one; the
last is authoritative.
"""

from __future__ import annotations

from typing import Any

from polystream.events import Usage

__all__ = ["convert", "from_usage_metadata", "to_usage_metadata"]


def from_usage_metadata(meta: dict[str, Any]) -> Usage:
    """Convert one ``usageMetadata`` object (see the module docstring)."""
    return convert(meta)[0]


def convert(meta: dict[str, Any]) -> tuple[Usage, int]:
    """:func:`from_usage_metadata`, and which counts the usage reports.

    Returns:
        The usage, and a bit mask with one bit per count that is not ``None``; the
        mask is 0 when the usage is empty (:meth:`Usage.is_empty`), so that the
        decoder can tell, without another pass, whether a newer usage reports every
        count an older one did (merging the older one then changes nothing).
    """
    # This runs on nearly every chunk (Gemini restates usageMetadata on each). The
    # usual object first: integer prompt, candidates and total counts, maybe
    # thoughtsTokenCount and promptTokensDetails, no other key (a key whose value is
    # null counts as another key, so that object takes the general way). Keys are read
    # by subscript, cheaper than a call to get. A thinking model's object has all five.
    if len(meta) == 5:
        try:
            prompt = meta["promptTokenCount"]
            candidates = meta["candidatesTokenCount"]
            total = meta["totalTokenCount"]
            thoughts = meta["thoughtsTokenCount"]
            details = meta["promptTokensDetails"]
        except KeyError:
            return _convert(meta)
        if (
            type(prompt) is not int
            or type(candidates) is not int
            or type(total) is not int
            or type(thoughts) is not int
            or type(details) is not list
        ):
            return _convert(meta)
    else:
        try:
            prompt = meta["promptTokenCount"]
            candidates = meta["candidatesTokenCount"]
            total = meta["totalTokenCount"]
        except KeyError:
            return _convert(meta)
        thoughts = meta.get("thoughtsTokenCount")
        details = meta.get("promptTokensDetails")
        if not (
            type(prompt) is int
            and type(candidates) is int
            and type(total) is int
            and len(meta) == 3 + (thoughts is not None) + (details is not None)
            and (thoughts is None or type(thoughts) is int)
            and (details is None or type(details) is list)
        ):
            return _convert(meta)
    # _audio_count, inlined (a call per chunk; details is a list or None here).
    audio_in = None
    if details is not None:
        for entry in details:
            if type(entry) is dict and entry.get("modality") == "AUDIO":
                count = entry.get("tokenCount")
                audio_in = count if type(count) is int else None
                break
    # The general way's values: no tool or cached counts, no candidatesTokensDetails.
    if thoughts is None:
        usage = Usage(
            input_tokens=prompt,
            output_tokens=candidates,
            audio_input_tokens=audio_in,
            total_tokens=total,
            raw=meta,
        )
        mask = 0b10000011
    else:
        usage = Usage(
            input_tokens=prompt,
            output_tokens=candidates + thoughts,
            reasoning_tokens=thoughts,
            audio_input_tokens=audio_in,
            total_tokens=total,
            raw=meta,
        )
        mask = 0b10000111
    if not (prompt or candidates or total or thoughts or audio_in):
        return usage, 0
    return usage, mask if audio_in is None else mask | 0b100000


def _convert(meta: dict[str, Any]) -> tuple[Usage, int]:
    """:func:`convert` for any object, in one pass."""
    get = meta.get
    prompt = get("promptTokenCount")
    if type(prompt) is not int:
        prompt = None
    candidates = get("candidatesTokenCount")
    if type(candidates) is not int:
        candidates = None
    total = get("totalTokenCount")
    if type(total) is not int:
        total = None
    thoughts = get("thoughtsTokenCount")
    if thoughts is not None and type(thoughts) is not int:
        thoughts = None
    tool = get("toolUsePromptTokenCount")
    if tool is not None and type(tool) is not int:
        tool = None
    cached = get("cachedContentTokenCount")
    if cached is not None and type(cached) is not int:
        cached = None
    audio_in = _audio_count(get("promptTokensDetails"))
    audio_out = _audio_count(get("candidatesTokensDetails"))
    # A sum is None only when both of its terms are.
    inputs = prompt if tool is None else (tool if prompt is None else prompt + tool)
    outputs = (
        candidates
        if thoughts is None
        else (thoughts if candidates is None else candidates + thoughts)
    )
    usage = Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        reasoning_tokens=thoughts,
        cache_read_tokens=cached,
        tool_prompt_tokens=tool,
        audio_input_tokens=audio_in,
        audio_output_tokens=audio_out,
        total_tokens=total,
        raw=meta,
    )
    if not (inputs or outputs or thoughts or cached or tool or audio_in or audio_out or total):
        return usage, 0  # cache_write_tokens is never set here
    mask = (
        (inputs is not None)
        | (outputs is not None) << 1
        | (thoughts is not None) << 2
        | (cached is not None) << 3
        | (tool is not None) << 4
        | (audio_in is not None) << 5
        | (audio_out is not None) << 6
        | (total is not None) << 7
    )
    return usage, mask


def _audio_count(details: Any) -> int | None:
    """The ``tokenCount`` of the first ``AUDIO`` entry of a modality detail list (None
    when there is none, or its count is not an integer)."""
    if isinstance(details, list):
        for entry in details:
            if isinstance(entry, dict) and entry.get("modality") == "AUDIO":
                count = entry.get("tokenCount")
                return count if type(count) is int else None
    return None


def to_usage_metadata(usage: Usage) -> dict[str, Any]:
    """The ``usageMetadata`` for a canonical usage (the inverse of
    :func:`from_usage_metadata` on the counts it reads; detail lists are not rebuilt).
    """
    out: dict[str, Any] = {}
    tool = usage.tool_prompt_tokens or 0
    thoughts = usage.reasoning_tokens or 0
    if usage.input_tokens is not None:
        out["promptTokenCount"] = usage.input_tokens - tool
    if usage.cache_read_tokens:
        out["cachedContentTokenCount"] = usage.cache_read_tokens
    if usage.output_tokens is not None:
        out["candidatesTokenCount"] = usage.output_tokens - thoughts
    if usage.tool_prompt_tokens:
        out["toolUsePromptTokenCount"] = usage.tool_prompt_tokens
    if usage.reasoning_tokens:
        out["thoughtsTokenCount"] = usage.reasoning_tokens
    total = usage.total_tokens
    if total is None and (usage.input_tokens is not None or usage.output_tokens is not None):
        total = (usage.input_tokens or 0) + (usage.output_tokens or 0)
    if total is not None:
        out["totalTokenCount"] = total
    return out
