"""OpenAI Responses API over a WebSocket (``wss://api.openai.com/v1/responses``).

One ``response.create`` per turn, replies in lanes (``stream_id``), steering and
injection into running replies; each reply decoded by the shared Responses code. See
``docs/dialects/openai_responses_ws.md``.

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
