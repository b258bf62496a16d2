"""xAI Responses SSE -> unified events (the shared decoder with the xAI quirks)."""

from __future__ import annotations

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.quirks import XAI

__all__ = ["Decoder"]


class Decoder(ResponsesDecoder):
    """Decoder for ``xai_responses``.

    The shared :class:`~polystream.dialects._responses.decode.ResponsesDecoder` with the
    xAI quirks.
    """

    dialect = "xai_responses"
    quirks = XAI
