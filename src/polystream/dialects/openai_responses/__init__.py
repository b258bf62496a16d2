"""OpenAI Responses API streaming (``POST /v1/responses``, SSE).

The implementation is shared with ``xai_responses`` in :mod:`polystream.dialects._responses`;
see ``docs/dialects/openai_responses.md``.

Every dialect folder has the same face: ``SPEC`` (:mod:`.spec`, data: what the dialect is
and where it is served) and, imported on first use, ``Decoder``, ``Encoder`` and
``rebuild`` (:mod:`.binding`).
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
