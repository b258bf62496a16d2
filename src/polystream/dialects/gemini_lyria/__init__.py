"""Gemini Lyria RealTime (``BidiGenerateMusic``): weighted text prompts and a generation
config in, endless 48 kHz stereo PCM out, steered by playback controls. Developer API
only. See ``docs/dialects/gemini_lyria.md``.

The folder's face: ``SPEC`` (:mod:`.spec`, data) and, imported on first use,
``Session``, ``Server``, ``close_error`` and ``music_pcm`` (:mod:`.binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import Server, Session, close_error, music_pcm

__all__ = ["SPEC", "Server", "Session", "close_error", "music_pcm"]


def __getattr__(name: str) -> Any:
    if name in ("Server", "Session", "close_error", "music_pcm"):
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
