"""xAI Chat Completions wire shapes: those of :mod:`polystream.dialects._chat.wire`, plus the
dialect's :data:`QUIRKS`."""

from __future__ import annotations

from typing import Final

from polystream.dialects._chat.quirks import XAI, Quirks
from polystream.dialects._chat.wire import CompletionUsage

__all__ = ["QUIRKS", "CompletionUsage"]

QUIRKS: Final[Quirks] = XAI
"""The quirks this dialect binds (see :mod:`polystream.dialects._chat.quirks`)."""
