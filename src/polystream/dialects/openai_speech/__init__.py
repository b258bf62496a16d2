"""OpenAI text to speech, streamed (``POST /v1/audio/speech``).

Two framings: ``sse`` (``stream_format: "sse"``: ``speech.audio.delta`` events carrying
base64 audio, then one ``speech.audio.done`` with the usage) and ``raw`` (no
``stream_format``, or ``"audio"``: the response body is the audio file's bytes). Both
decode to one ``audio`` block. See ``docs/dialects/openai_speech.md`` for the event
coverage, the usage arithmetic and what is inferred.

Exports ``Decoder``, ``Encoder`` and ``rebuild(events) -> dict`` (polystream's final
object: ``{"audio", "format", "usage"}``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import DIALECT, Decoder, Encoder, rebuild

__all__ = ["DIALECT", "SPEC", "Decoder", "Encoder", "rebuild"]
_LAZY = frozenset(__all__) - {"SPEC"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
