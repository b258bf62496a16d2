"""The ``gemini_generate`` dialect: Gemini ``models.streamGenerateContent``, in both of
its framings (``?alt=sse`` events and the default incrementally streamed JSON array).

* :class:`Decoder` — bytes (either framing, ``framing="auto"`` by the first byte) ->
  unified events; the rules are in :mod:`.decode`.
* :class:`Encoder` — unified events -> exact bytes (``framing="sse"`` or
  ``"json_array"``); see :mod:`.encode`.
* :func:`rebuild` — the merged ``GenerateContentResponse`` the non-streaming endpoint
  would return; see :mod:`.result`.

See docs/dialects/gemini_generate.md for the coverage and finish-reason tables.
"""

from __future__ import annotations

from .decode import GeminiGenerateDecoder as Decoder
from .encode import GeminiGenerateEncoder as Encoder
from .result import rebuild

__all__ = ["Decoder", "Encoder", "rebuild"]
