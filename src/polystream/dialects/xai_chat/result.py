"""Rebuild the non-streaming xAI Chat Completions ``ChatCompletion`` from unified events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.dialects._chat.result import rebuild_completion
from polystream.dialects.xai_chat.encode import Encoder
from polystream.dialects.xai_chat.wire import QUIRKS
from polystream.events import Event

__all__ = ["rebuild"]


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The ``ChatCompletion`` (``object: "chat.completion"``) a non-streaming call
    would have returned, as plain JSON values (see
    :func:`polystream.dialects._chat.result.rebuild_completion`)."""
    return rebuild_completion(events, QUIRKS, Encoder)
