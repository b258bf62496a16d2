"""Unified events -> xAI Chat Completions stream (see :mod:`polystream.dialects._chat.encode`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._chat.encode import ChatEncoder
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects.xai_chat.wire import QUIRKS

__all__ = ["Encoder"]


class Encoder(ChatEncoder):
    """Encoder for ``xai_chat``."""

    dialect: ClassVar[str] = "xai_chat"
    quirks: ClassVar[Quirks] = QUIRKS
