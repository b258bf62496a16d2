"""xAI Chat Completions usage -> canonical usage, with this dialect's quirks bound.

The arithmetic is documented in :mod:`polystream.dialects._chat.usage`.

xAI: ``completion_tokens`` *excludes* reasoning tokens while ``total_tokens``
includes them (``total = prompt + completion + reasoning``), so
``output_tokens = completion_tokens + reasoning_tokens``; encoding writes
``completion_tokens = output_tokens - reasoning_tokens``.
"""

from __future__ import annotations

from typing import Any

from polystream.dialects._chat import usage as _usage
from polystream.dialects.xai_chat.wire import QUIRKS
from polystream.events import Usage

__all__ = ["convert_usage", "usage_to_wire"]


def convert_usage(raw: Any) -> Usage | None:
    """Canonical usage from a chunk's ``usage`` object (None if it is not an object)."""
    return _usage.convert_usage(raw, QUIRKS)


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    """A ``usage`` object for canonical usage, in this dialect's convention."""
    return _usage.usage_to_wire(usage, QUIRKS)
