"""The Messages streaming protocol, shared by ``anthropic_messages`` and ``xai_messages``.

Private: the public dialect packages bind a :class:`~.quirks.Quirks` value and a
dialect name to the classes here. Modules: ``wire`` (payload shapes, block skeletons),
``decode``, ``encode``, ``finish_reason``, ``usage``, ``error_kind``, ``result``,
``quirks``.
"""

from __future__ import annotations

from polystream.dialects._messages.decode import MessagesDecoder
from polystream.dialects._messages.encode import CARRIER_PREFIX, MessagesEncoder
from polystream.dialects._messages.quirks import ANTHROPIC, XAI, Quirks
from polystream.dialects._messages.result import fold_native, rebuild_with

__all__ = [
    "ANTHROPIC",
    "CARRIER_PREFIX",
    "XAI",
    "MessagesDecoder",
    "MessagesEncoder",
    "Quirks",
    "fold_native",
    "rebuild_with",
]
