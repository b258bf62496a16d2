"""Unified events -> OpenAI Chat Completions stream
(see :mod:`polystream.dialects._chat.encode`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._chat.encode import ChatEncoder
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects.openai_chat.wire import QUIRKS

__all__ = ["Encoder"]


class Encoder(ChatEncoder):
    """Encoder for ``openai_chat``."""

    dialect: ClassVar[str] = "openai_chat"
    quirks: ClassVar[Quirks] = QUIRKS
