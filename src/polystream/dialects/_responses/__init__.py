"""The shared implementation of the Responses dialects (``openai_responses``,
``xai_responses``): one decoder, one encoder, one rebuild, bound by each public dialect
folder to its :class:`~polystream.dialects._responses.quirks.Quirks`."""

from __future__ import annotations

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import OPENAI, XAI, Quirks
from polystream.dialects._responses.result import Assembler, rebuild

__all__ = [
    "OPENAI",
    "XAI",
    "Assembler",
    "Quirks",
    "ResponsesDecoder",
    "ResponsesEncoder",
    "rebuild",
]
