"""Unified events -> OpenAI Responses SSE (the shared encoder with the OpenAI quirks)."""

from __future__ import annotations

from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import OPENAI

__all__ = ["Encoder"]


class Encoder(ResponsesEncoder):
    """Encoder for ``openai_responses``.

    The shared :class:`~polystream.dialects._responses.encode.ResponsesEncoder` with the
    OpenAI quirks.
    """

    dialect = "openai_responses"
    quirks = OPENAI
