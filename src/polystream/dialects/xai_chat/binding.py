"""``xai_chat``'s code: the shared Chat implementation (:mod:`polystream.dialects._chat`)
bound to the xAI quirks (:data:`polystream.dialects._chat.quirks.XAI`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from polystream.dialects._chat.decode import ChatDecoder
from polystream.dialects._chat.encode import ChatEncoder
from polystream.dialects._chat.quirks import XAI, Quirks
from polystream.dialects._chat.request import CHAT as request
from polystream.dialects._chat.result import rebuild_completion
from polystream.events import Event

__all__ = ["QUIRKS", "Decoder", "Encoder", "rebuild", "request"]

QUIRKS: Quirks = XAI


class Decoder(ChatDecoder):
    """xAI Chat Completions SSE -> unified events (see :class:`ChatDecoder`)."""

    dialect: ClassVar[str] = "xai_chat"
    quirks: ClassVar[Quirks] = XAI


class Encoder(ChatEncoder):
    """Unified events -> xAI Chat Completions SSE (see :class:`ChatEncoder`)."""

    dialect: ClassVar[str] = "xai_chat"
    quirks: ClassVar[Quirks] = XAI


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The ``ChatCompletion`` (``object: "chat.completion"``) a non-streaming call
    would have returned, as plain JSON values (see
    :func:`polystream.dialects._chat.result.rebuild_completion`)."""
    return rebuild_completion(events, XAI, Encoder)
