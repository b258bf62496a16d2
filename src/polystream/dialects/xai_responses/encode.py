"""Unified events -> xAI Responses SSE (the shared encoder with the xAI quirks)."""

from __future__ import annotations

from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import XAI

__all__ = ["Encoder"]


class Encoder(ResponsesEncoder):
    """Encoder for ``xai_responses``.

    The shared :class:`~polystream.dialects._responses.encode.ResponsesEncoder` with the
    xAI quirks.
    """

    dialect = "xai_responses"
    quirks = XAI
