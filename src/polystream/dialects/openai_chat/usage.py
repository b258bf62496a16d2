"""OpenAI Chat Completions usage -> canonical usage, with this dialect's quirks bound.

The arithmetic is documented in :mod:`polystream.dialects._chat.usage`.

OpenAI: ``completion_tokens`` *includes* reasoning tokens, so
``output_tokens = completion_tokens``; ``input_tokens = prompt_tokens`` (cache reads
included).
"""

from __future__ import annotations

from typing import Any

from polystream.dialects._chat import usage as _usage
from polystream.dialects.openai_chat.wire import QUIRKS
from polystream.events import Usage

__all__ = ["convert_usage", "usage_to_wire"]


def convert_usage(raw: Any) -> Usage | None:
    """Canonical usage from a chunk's ``usage`` object (None if it is not an object)."""
    return _usage.convert_usage(raw, QUIRKS)


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    """A ``usage`` object for canonical usage, in this dialect's convention."""
    return _usage.usage_to_wire(usage, QUIRKS)
