"""The Chat Completions family, shared by ``openai_chat`` and ``xai_chat``.

One decoder (:class:`ChatDecoder`), one encoder (:class:`ChatEncoder`) and one
rebuilder (:func:`rebuild_completion`); each public dialect package subclasses them
with its :class:`Quirks` (see :mod:`polystream.dialects._chat.quirks`), so the two
dialects differ only where the providers differ.
"""

from __future__ import annotations

from polystream.dialects._chat.decode import ChatDecoder
from polystream.dialects._chat.encode import ChatEncoder
from polystream.dialects._chat.finish_reason import map_finish_reason, to_wire_finish_reason
from polystream.dialects._chat.quirks import OPENAI, XAI, Quirks
from polystream.dialects._chat.result import rebuild_completion
from polystream.dialects._chat.usage import convert_usage, usage_to_wire

__all__ = [
    "OPENAI",
    "XAI",
    "ChatDecoder",
    "ChatEncoder",
    "Quirks",
    "convert_usage",
    "map_finish_reason",
    "rebuild_completion",
    "to_wire_finish_reason",
    "usage_to_wire",
]
