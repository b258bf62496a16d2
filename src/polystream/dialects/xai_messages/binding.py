"""``xai_messages``: xAI's Anthropic-compatible ``POST /v1/messages`` (deprecated, SSE).

Same protocol as ``anthropic_messages`` (shared in :mod:`polystream.dialects._messages`)
with the xAI quirks (spec "Skeletons", xAI ``/v1/messages``): a new block takes the
lowest index not held by an open block, so the ``text`` block after a stopped
``thinking`` block at index 0 is at index 0 again — two distinct blocks, with distinct
unified indices; and no ``ping``. The encoder reproduces the index reuse. See
``docs/dialects/xai_messages.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from polystream.dialects._messages import XAI, MessagesDecoder, MessagesEncoder, Quirks
from polystream.dialects._messages import rebuild_with as _rebuild_with
from polystream.dialects._messages.request import MessagesCodec
from polystream.dialects._spec import RequestCodec
from polystream.events import Event

__all__ = ["Decoder", "Encoder", "rebuild", "request"]

# xAI's base URL already ends in /v1 (https://api.x.ai/v1).
request: RequestCodec = MessagesCodec("/messages")
"""The Messages request codec, sending to ``/messages``."""


class Decoder(MessagesDecoder):
    """xAI ``/v1/messages`` SSE -> unified events (see :class:`MessagesDecoder`)."""

    dialect: ClassVar[str] = "xai_messages"
    quirks: ClassVar[Quirks] = XAI


class Encoder(MessagesEncoder):
    """Unified events -> xAI ``/v1/messages`` SSE, block indices reused as xAI does."""

    dialect: ClassVar[str] = "xai_messages"
    quirks: ClassVar[Quirks] = XAI


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The native ``Message`` object, as the non-streaming endpoint returns it."""
    return _rebuild_with(Encoder(), events)
