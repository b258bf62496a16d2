"""``anthropic_messages``'s code. Anthropic Messages API streaming (``POST /v1/messages``, SSE).

The implementation is shared with ``xai_messages`` in
:mod:`polystream.dialects._messages`; this package binds the Anthropic quirks
(indices count up and are never reused, ``ping`` keep-alives). See
``docs/dialects/anthropic_messages.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from polystream.dialects._messages import ANTHROPIC, MessagesDecoder, MessagesEncoder, Quirks
from polystream.dialects._messages import rebuild_with as _rebuild_with
from polystream.dialects._messages.request import MessagesCodec
from polystream.dialects._spec import RequestCodec
from polystream.events import Event

__all__ = ["Decoder", "Encoder", "rebuild", "request"]

request: RequestCodec = MessagesCodec("/v1/messages")
"""The Messages request codec, sending to ``/v1/messages``."""


class Decoder(MessagesDecoder):
    """Anthropic Messages SSE -> unified events (see :class:`MessagesDecoder`)."""

    dialect: ClassVar[str] = "anthropic_messages"
    quirks: ClassVar[Quirks] = ANTHROPIC


class Encoder(MessagesEncoder):
    """Unified events -> Anthropic Messages SSE (see :class:`MessagesEncoder`)."""

    dialect: ClassVar[str] = "anthropic_messages"
    quirks: ClassVar[Quirks] = ANTHROPIC


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The native ``Message`` object, as the non-streaming endpoint returns it."""
    return _rebuild_with(Encoder(), events)
