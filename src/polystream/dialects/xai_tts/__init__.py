"""xAI streaming text to speech over a WebSocket (``wss://api.x.ai/v1/tts``): text
deltas in, base64 audio out, the parameters in the URL's query. See
``docs/dialects/xai_tts.md``.

The folder's face: ``SPEC`` (:mod:`.spec`, data) and, imported on first use,
``Session`` and ``tts_url`` (:mod:`.binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import Session, tts_query, tts_url

__all__ = ["SPEC", "Session", "tts_query", "tts_url"]


def __getattr__(name: str) -> Any:
    if name in ("Session", "tts_query", "tts_url"):
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
