"""xAI streaming speech to text over a WebSocket (``wss://api.x.ai/v1/stt``): raw audio
in as bytes messages, JSON transcripts out, the parameters in the URL's query. See
``docs/dialects/xai_stt.md``.

The folder's face: ``SPEC`` (:mod:`.spec`, data) and, imported on first use,
``Session`` and ``stt_url`` (:mod:`.binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import Session, stt_query, stt_url

__all__ = ["SPEC", "Session", "stt_query", "stt_url"]


def __getattr__(name: str) -> Any:
    if name in ("Session", "stt_query", "stt_url"):
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
