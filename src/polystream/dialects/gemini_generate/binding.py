"""``gemini_generate``'s code: ``Decoder``, ``Encoder`` and ``rebuild`` (see the package
docstring)."""

from __future__ import annotations

from .decode import GeminiGenerateDecoder as Decoder
from .encode import GeminiGenerateEncoder as Encoder
from .request import GENERATE as request
from .result import rebuild

__all__ = ["Decoder", "Encoder", "rebuild", "request"]
