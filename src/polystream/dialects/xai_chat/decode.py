"""xAI Chat Completions stream -> unified events (see :mod:`polystream.dialects._chat.decode`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._chat.decode import ChatDecoder
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects.xai_chat.wire import QUIRKS

__all__ = ["Decoder"]


class Decoder(ChatDecoder):
    """Decoder for ``xai_chat`` (SSE only)."""

    dialect: ClassVar[str] = "xai_chat"
    quirks: ClassVar[Quirks] = QUIRKS
