"""OpenAI Responses SSE -> unified events (the shared decoder with the OpenAI quirks)."""

from __future__ import annotations

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.quirks import OPENAI

__all__ = ["Decoder"]


class Decoder(ResponsesDecoder):
    """Decoder for ``openai_responses``.

    The shared :class:`~polystream.dialects._responses.decode.ResponsesDecoder` with the
    OpenAI quirks.
    """

    dialect = "openai_responses"
    quirks = OPENAI
