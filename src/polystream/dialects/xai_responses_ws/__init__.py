"""xAI Responses API over a WebSocket (``wss://api.x.ai/v1/responses``): one
``response.create`` per turn, each reply an ``xai_responses`` stream. See
``docs/dialects/xai_responses_ws.md``.

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
