"""Rebuild the OpenAI ``Response`` object from unified events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.dialects._responses.quirks import OPENAI
from polystream.dialects._responses.result import rebuild as _rebuild
from polystream.events import Event

__all__ = ["rebuild"]


def rebuild(events: Iterable[Event], *, prefer_terminal: bool = True) -> dict[str, Any]:
    """The ``Response`` object (see :func:`polystream.dialects._responses.result.rebuild`)."""
    return _rebuild(events, OPENAI, prefer_terminal=prefer_terminal)
