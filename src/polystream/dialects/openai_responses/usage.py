"""OpenAI Responses usage -> canonical usage.

The arithmetic is documented in :mod:`polystream.dialects._responses.usage`.
"""

from __future__ import annotations

from typing import Any

from polystream.dialects._responses.quirks import OPENAI
from polystream.dialects._responses.usage import from_usage
from polystream.dialects._responses.usage import to_usage as _to_usage
from polystream.events import Usage

__all__ = ["from_usage", "to_usage"]


def to_usage(raw: Any) -> Usage | None:
    """Canonical usage from a ``usage`` object, with the OpenAI arithmetic."""
    return _to_usage(raw, reasoning_maybe_excluded=OPENAI.reasoning_maybe_excluded)
