"""OpenAI Chat Completions: the ``openai_chat`` dialect (SSE ``data:`` chunks, ``data: [DONE]``).

Exports :class:`Decoder`, :class:`Encoder` and :func:`rebuild`. The implementation is
shared with the other Chat dialect in :mod:`polystream.dialects._chat`; this package
binds the quirks in :mod:`.wire` (see docs/dialects/openai_chat.md).
"""

from __future__ import annotations

from polystream.dialects.openai_chat.decode import Decoder
from polystream.dialects.openai_chat.encode import Encoder
from polystream.dialects.openai_chat.result import rebuild

__all__ = ["Decoder", "Encoder", "rebuild"]
