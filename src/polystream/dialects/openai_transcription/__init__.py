"""OpenAI audio transcriptions, streamed (``POST /v1/audio/transcriptions`` with
``stream=true``: SSE ``data:`` events ``transcript.text.delta``, ``transcript.text.segment``
and ``transcript.text.done``).

See ``docs/dialects/openai_transcription.md`` for the event coverage, the finish table, the
usage arithmetic and what is inferred.

Every dialect folder has the same face: ``SPEC`` (:mod:`.spec`, data) and, imported on
first use, ``Decoder``, ``Encoder``, ``rebuild`` and ``request`` (:mod:`.binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import DIALECT, Decoder, Encoder, rebuild, request

__all__ = ["DIALECT", "SPEC", "Decoder", "Encoder", "rebuild", "request"]
_LAZY = frozenset(__all__) - {"SPEC"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
