"""``openai_responses``'s code: the shared Responses implementation
(:mod:`polystream.dialects._responses`) bound to the OpenAI quirks
(:data:`polystream.dialects._responses.quirks.OPENAI`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import OPENAI, Quirks
from polystream.dialects._responses.request import RESPONSES as request
from polystream.dialects._responses.result import rebuild as _rebuild
from polystream.events import Event

__all__ = ["QUIRKS", "Decoder", "Encoder", "rebuild", "request"]

QUIRKS: Quirks = OPENAI


class Decoder(ResponsesDecoder):
    """OpenAI Responses SSE -> unified events (see :class:`ResponsesDecoder`)."""

    dialect: ClassVar[str] = "openai_responses"
    quirks: ClassVar[Quirks] = OPENAI


class Encoder(ResponsesEncoder):
    """Unified events -> OpenAI Responses SSE (see :class:`ResponsesEncoder`)."""

    dialect: ClassVar[str] = "openai_responses"
    quirks: ClassVar[Quirks] = OPENAI


def rebuild(events: Iterable[Event], *, prefer_terminal: bool = True) -> dict[str, Any]:
    """The ``Response`` object (see :func:`polystream.dialects._responses.result.rebuild`)."""
    return _rebuild(events, OPENAI, prefer_terminal=prefer_terminal)
