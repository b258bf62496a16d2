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

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import Decoder, Encoder, rebuild

__all__ = ["SPEC", "Decoder", "Encoder", "rebuild"]


def __getattr__(name: str) -> Any:
    if name in ("Decoder", "Encoder", "rebuild"):
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
