"""Chat ``usage`` <-> canonical :class:`~polystream.events.Usage`.

The arithmetic (canonical rules in :class:`polystream.events.Usage`):

* ``input_tokens = prompt_tokens``. OpenAI's ``prompt_tokens`` already *includes*
  ``prompt_tokens_details.cached_tokens`` (cache reads) and ``cache_write_tokens``;
  those become ``cache_read_tokens`` / ``cache_write_tokens`` (parts, not additions).
  ``prompt_tokens_details.audio_tokens`` -> ``audio_input_tokens``.
* ``output_tokens`` must include reasoning. OpenAI's ``completion_tokens`` includes
  ``completion_tokens_details.reasoning_tokens``; xAI's does **not** (its
  ``total_tokens`` = prompt + completion + reasoning). The rule, applied to both
  dialects so that a server that changes convention is still read right:

  - with ``R = reasoning_tokens`` > 0 and ``total_tokens`` stated:
    if ``prompt + completion + R == total`` then reasoning is *outside*
    ``completion_tokens`` and ``output_tokens = completion + R``; otherwise
    ``output_tokens = completion``;
  - without ``total_tokens``: the dialect's quirk decides (xAI excludes, OpenAI
    includes).
* ``total_tokens`` is the provider's value unchanged; when absent, input + output.
* ``completion_tokens_details.audio_tokens`` -> ``audio_output_tokens``.
* ``raw`` is the usage object exactly as sent (including xAI ``num_sources_used``,
  ``cost_in_usd_ticks`` and anything else).

Encoding from canonical usage writes ``completion_tokens`` in the dialect's own
convention (xAI: output minus reasoning) so that decoding gives the same canonical
counts back.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.wire import CompletionUsage
from polystream.events import Usage

__all__ = ["convert_usage", "usage_to_wire"]

_EMPTY: Final = CompletionUsage()


def convert_usage(raw: Any, quirks: Quirks) -> Usage | None:
    """Canonical usage from a chunk's ``usage`` object (None when it is not an object).

    Counts of the wrong type are ignored (read as not reported); ``raw`` keeps them.
    """
    if not isinstance(raw, dict):
        return None
    try:
        wire = msgspec.convert(raw, CompletionUsage)
    except msgspec.ValidationError:
        wire = _EMPTY
    prompt = wire.prompt_tokens
    completion = wire.completion_tokens
    total = wire.total_tokens
    pdetails = wire.prompt_tokens_details
    cdetails = wire.completion_tokens_details
    reasoning = cdetails.reasoning_tokens if cdetails is not None else None
    output = completion
    if completion is not None and reasoning:
        if total is not None and prompt is not None:
            if prompt + completion + reasoning == total:
                output = completion + reasoning
        elif quirks.completion_excludes_reasoning:
            output = completion + reasoning
    if total is None and prompt is not None and output is not None:
        total = prompt + output
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        reasoning_tokens=reasoning,
        cache_read_tokens=pdetails.cached_tokens if pdetails is not None else None,
        cache_write_tokens=pdetails.cache_write_tokens if pdetails is not None else None,
        audio_input_tokens=pdetails.audio_tokens if pdetails is not None else None,
        audio_output_tokens=cdetails.audio_tokens if cdetails is not None else None,
        total_tokens=total,
        raw=raw,
    )


def usage_to_wire(usage: Usage, quirks: Quirks) -> dict[str, Any]:
    """A Chat ``usage`` object for canonical usage that has no Chat ``raw``."""
    prompt = usage.input_tokens or 0
    output = usage.output_tokens or 0
    reasoning = usage.reasoning_tokens
    completion = output
    if quirks.completion_excludes_reasoning and reasoning:
        completion = max(output - reasoning, 0)
    total = usage.total_tokens if usage.total_tokens is not None else prompt + output
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
    }
    prompt_details: dict[str, Any] = {}
    if usage.cache_read_tokens is not None:
        prompt_details["cached_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        prompt_details["cache_write_tokens"] = usage.cache_write_tokens
    if usage.audio_input_tokens is not None:
        prompt_details["audio_tokens"] = usage.audio_input_tokens
    if prompt_details:
        out["prompt_tokens_details"] = prompt_details
    completion_details: dict[str, Any] = {}
    if reasoning is not None:
        completion_details["reasoning_tokens"] = reasoning
    if usage.audio_output_tokens is not None:
        completion_details["audio_tokens"] = usage.audio_output_tokens
    if completion_details:
        out["completion_tokens_details"] = completion_details
    return out
