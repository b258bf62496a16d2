"""Gemini Live API over a WebSocket (``BidiGenerateContent``): voice and text sessions,
resumed on a new connection by handle. See ``docs/dialects/gemini_live.md``.

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
