"""The ``openai_responses`` dialect: the OpenAI Responses API stream (SSE).

Thin: the implementation is shared with the other Responses dialect in
:mod:`polystream.dialects._responses`; this package binds the OpenAI quirks
(:data:`polystream.dialects._responses.quirks.OPENAI`). See docs/dialects/openai_responses.md.
"""

from __future__ import annotations

from polystream.dialects.openai_responses.decode import Decoder
from polystream.dialects.openai_responses.encode import Encoder
from polystream.dialects.openai_responses.result import rebuild

__all__ = ["Decoder", "Encoder", "rebuild"]
