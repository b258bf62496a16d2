"""The ``xai_responses`` dialect: the xAI Responses API stream (SSE).

Thin: the implementation is shared with the other Responses dialect in
:mod:`polystream.dialects._responses`; this package binds the xAI quirks
(:data:`polystream.dialects._responses.quirks.XAI`). See docs/dialects/xai_responses.md.
"""

from __future__ import annotations

from polystream.dialects.xai_responses.decode import Decoder
from polystream.dialects.xai_responses.encode import Encoder
from polystream.dialects.xai_responses.result import rebuild

__all__ = ["Decoder", "Encoder", "rebuild"]
