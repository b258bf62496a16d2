"""xAI Voice Agent API over a WebSocket (``wss://api.x.ai/v1/realtime``): the OpenAI
Realtime vocabulary with xAI's differences (binary audio messages, PCM at any rate,
session resumption, forced messages). See ``docs/dialects/xai_realtime.md``.

The folder's face: ``SPEC`` (:mod:`.spec`, data) and, imported on first use,
``Session`` (:mod:`.binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import Session

__all__ = ["SPEC", "Session"]


def __getattr__(name: str) -> Any:
    if name == "Session":
        from . import binding

        return binding.Session
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
